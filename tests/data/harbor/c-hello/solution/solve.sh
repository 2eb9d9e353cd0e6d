#!/bin/bash
set -euo pipefail
cd /workspace
cat > hello.c <<'C'
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    printf("Hello, %s!\n", argv[1]);
    return 0;
}
C
gcc -O2 -o hello hello.c
