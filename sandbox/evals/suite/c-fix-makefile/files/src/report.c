#include "counts.h"

void print_counts(const struct counts *counts, const char *name)
{
    printf("%7ld %7ld %7ld", counts->lines, counts->words, counts->bytes);
    if (name != NULL)
        printf(" %s", name);
    putchar('\n');
}
