#include <string.h>

#include "dump.h"

void dump_line(FILE *out, unsigned long offset, const unsigned char *bytes, size_t n)
{
    fprintf(out, "%08lx  ", offset);
    for (size_t i = 0; i < 16; i++) {
        if (i < n)
            fprintf(out, "%02x ", bytes[i]);
        else
            fputs("   ", out);
        if (i == 7)
            fputc(' ', out);
    }
    fputs(" |", out);
    for (size_t i = 0; i < n; i++)
        fputc(bytes[i] >= 0x20 && bytes[i] < 0x7f ? bytes[i] : '.', out);
    fputs("|\n", out);
}

/* Read up to n bytes, as many as there are (short only at the end). */
static size_t read_full(FILE *in, unsigned char *buffer, size_t n)
{
    size_t got = 0;

    while (got < n) {
        size_t more = fread(buffer + got, 1, n - got, in);
        if (more == 0)
            break;
        got += more;
    }
    return got;
}

unsigned long dump_stream(FILE *in, FILE *out, const struct dump_options *options)
{
    unsigned char line[16], previous[16];
    unsigned long skipped = 0, shown = 0;
    int have_previous = 0, squeezing = 0;

    while (skipped < options->skip) {
        unsigned long want = options->skip - skipped;
        size_t got = read_full(in, line, want < sizeof line ? want : sizeof line);
        if (got == 0)
            return 0;
        skipped += got;
    }
    while (shown < options->length) {
        unsigned long want = options->length - shown;
        size_t n = read_full(in, line, want < sizeof line ? want : sizeof line);
        if (n == 0)
            break;
        if (options->squeeze && n == sizeof line && have_previous &&
            memcmp(line, previous, sizeof line) == 0) {
            if (!squeezing)
                fputs("*\n", out);
            squeezing = 1;
        } else {
            dump_line(out, options->skip + shown, line, n);
            squeezing = 0;
        }
        have_previous = n == sizeof line;
        memcpy(previous, line, n);
        shown += n;
    }
    if (shown > 0)
        fprintf(out, "%08lx\n", options->skip + shown);
    return shown;
}
