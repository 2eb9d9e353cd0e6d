/* labelgen CODE...: prints one shipping label line per item code. */
#include <stdio.h>
#include <string.h>
#include "check.h"

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        printf("labelgen 2.1 (libcheck %s)\n", check_version());
        return 0;
    }
    for (int i = 1; i < argc; i++)
        printf("[%s] %c\n", argv[i], check_char(argv[i]));
    return argc > 1 ? 0 : 2;
}
