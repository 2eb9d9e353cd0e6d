#include "dump.h"

void dump_line(FILE *out, unsigned long offset, const unsigned char *bytes, size_t n)
{
    fprintf(out, "%08lx  ", offset);
    for (size_t i = 0; i < n; i++) {
        fprintf(out, "%02x ", bytes[i]);
        if (i == 7)
            fputc(' ', out);
    }
    for (size_t i = n; i < 16; i++)
        fputs("   ", out);
    fputs(" |", out);
    for (size_t i = 0; i < n; i++)
        fputc(bytes[i] >= 0x20 && bytes[i] < 0x7f ? bytes[i] : '.', out);
    fputs("|\n", out);
}

unsigned long dump_stream(FILE *in, FILE *out)
{
    unsigned char line[16];
    unsigned long offset = 0;
    size_t n;

    while ((n = fread(line, 1, sizeof line, in)) > 0) {
        dump_line(out, offset, line, n);
        offset += n;
        if (n < sizeof line) {
            fprintf(out, "%08lx\n", offset);
            break;
        }
    }
    return offset;
}
