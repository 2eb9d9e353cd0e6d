#ifndef RINGBUF_H
#define RINGBUF_H

#include <stddef.h>

/* A fixed-capacity FIFO of bytes. The oldest byte is at offset 0. */
typedef struct {
    unsigned char *data;
    size_t capacity;
    size_t read;  /* index in data of the oldest byte */
    size_t write; /* index in data where the next byte goes */
    size_t size;  /* number of bytes stored */
} ringbuf;

/* Allocate the storage; returns 0, or -1 if capacity is 0 or allocation fails. */
int rb_init(ringbuf *rb, size_t capacity);
void rb_free(ringbuf *rb);

size_t rb_size(const ringbuf *rb);  /* bytes stored */
size_t rb_space(const ringbuf *rb); /* bytes that can still be written */

/* Append up to n bytes (as many as fit); returns how many were appended. */
size_t rb_write(ringbuf *rb, const void *src, size_t n);
/* Remove up to n of the oldest bytes into dst; returns how many. */
size_t rb_read(ringbuf *rb, void *dst, size_t n);
/* Copy up to n of the oldest bytes into dst without removing them. */
size_t rb_peek(const ringbuf *rb, void *dst, size_t n);
/* Drop up to n of the oldest bytes; returns how many. */
size_t rb_discard(ringbuf *rb, size_t n);
/* Offset from the oldest byte of the first byte equal to `byte`, or -1. */
long rb_find(const ringbuf *rb, unsigned char byte);

#endif
