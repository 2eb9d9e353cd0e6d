#ifndef HEXD_DUMP_H
#define HEXD_DUMP_H

#include <stdio.h>

struct dump_options {
    unsigned long skip;   /* bytes of input to skip first */
    unsigned long length; /* most bytes to show */
    int squeeze;          /* print repeated full lines as '*' */
};

/* Print one canonical line for n (1..16) bytes starting at `offset`. */
void dump_line(FILE *out, unsigned long offset, const unsigned char *bytes, size_t n);

/* Dump what `options` select of `in`; returns the number of bytes shown. */
unsigned long dump_stream(FILE *in, FILE *out, const struct dump_options *options);

#endif
