#include <ctype.h>

#include "counts.h"

void count_stream(FILE *in, struct counts *total)
{
    int c;
    int in_word = 0;

    while ((c = getc(in)) != EOF) {
        total->bytes++;
        if (c == '\n')
            total->lines++;
        if (isspace(c)) {
            in_word = 0;
        } else if (!in_word) {
            in_word = 1;
            total->words++;
        }
    }
}
