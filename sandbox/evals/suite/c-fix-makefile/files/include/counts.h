#ifndef WCL_COUNTS_H
#define WCL_COUNTS_H

#include <stdio.h>

struct counts {
    long lines;
    long words;
    long bytes;
};

/* Add the lines, words and bytes of everything readable from `in`. */
void count_stream(FILE *in, struct counts *total);

/* Print one line of counts, followed by `name` unless it is NULL. */
void print_counts(const struct counts *counts, const char *name);

#endif
