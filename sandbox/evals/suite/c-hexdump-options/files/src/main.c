#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dump.h"

int main(int argc, char **argv)
{
    FILE *in = stdin;

    if (argc > 2) {
        fprintf(stderr, "usage: hexd [FILE]\n");
        return 2;
    }
    if (argc == 2) {
        in = fopen(argv[1], "rb");
        if (in == NULL) {
            fprintf(stderr, "hexd: %s: %s\n", argv[1], strerror(errno));
            return 1;
        }
    }
    dump_stream(in, stdout);
    if (in != stdin)
        fclose(in);
    return 0;
}
