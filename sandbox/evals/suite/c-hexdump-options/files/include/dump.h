#ifndef HEXD_DUMP_H
#define HEXD_DUMP_H

#include <stdio.h>

/* Print one canonical line for n (1..16) bytes starting at `offset`. */
void dump_line(FILE *out, unsigned long offset, const unsigned char *bytes, size_t n);

/* Dump everything readable from `in`; returns the number of bytes shown. */
unsigned long dump_stream(FILE *in, FILE *out);

#endif
