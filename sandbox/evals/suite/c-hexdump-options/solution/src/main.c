#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dump.h"

static void usage(void)
{
    fprintf(stderr, "usage: hexd [-v] [-s OFFSET] [-n LENGTH] [FILE]\n");
}

/* A decimal or 0x-prefixed hexadecimal count; -1 if it is not one. */
static int parse_count(const char *text, unsigned long *out)
{
    int base = 10;
    char *end;

    if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
        base = 16;
        text += 2;
    }
    if (*text == '\0' || strchr("0123456789abcdefABCDEF", *text) == NULL)
        return -1;
    if (base == 10 && (*text < '0' || *text > '9'))
        return -1;
    errno = 0;
    *out = strtoul(text, &end, base);
    if (errno != 0 || *end != '\0')
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    struct dump_options options = {0, ULONG_MAX, 1};
    FILE *in = stdin;
    int opt;

    while ((opt = getopt(argc, argv, "vs:n:")) != -1) {
        switch (opt) {
        case 'v':
            options.squeeze = 0;
            break;
        case 's':
            if (parse_count(optarg, &options.skip) != 0) {
                fprintf(stderr, "hexd: bad offset '%s'\n", optarg);
                return 2;
            }
            break;
        case 'n':
            if (parse_count(optarg, &options.length) != 0) {
                fprintf(stderr, "hexd: bad length '%s'\n", optarg);
                return 2;
            }
            break;
        default:
            usage();
            return 2;
        }
    }
    if (argc - optind > 1) {
        usage();
        return 2;
    }
    if (argc - optind == 1) {
        in = fopen(argv[optind], "rb");
        if (in == NULL) {
            fprintf(stderr, "hexd: %s: %s\n", argv[optind], strerror(errno));
            return 1;
        }
    }
    dump_stream(in, stdout, &options);
    if (in != stdin)
        fclose(in);
    return 0;
}
