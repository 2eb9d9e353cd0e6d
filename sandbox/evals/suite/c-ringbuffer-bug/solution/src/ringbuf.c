#include <stdlib.h>
#include <string.h>

#include "ringbuf.h"

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

int rb_init(ringbuf *rb, size_t capacity)
{
    if (capacity == 0)
        return -1;
    rb->data = malloc(capacity);
    if (rb->data == NULL)
        return -1;
    rb->capacity = capacity;
    rb->read = rb->write = rb->size = 0;
    return 0;
}

void rb_free(ringbuf *rb)
{
    free(rb->data);
    rb->data = NULL;
    rb->capacity = rb->size = 0;
}

size_t rb_size(const ringbuf *rb)
{
    return rb->size;
}

size_t rb_space(const ringbuf *rb)
{
    return rb->capacity - rb->size;
}

size_t rb_write(ringbuf *rb, const void *src, size_t n)
{
    const unsigned char *bytes = src;
    size_t first;

    n = min_size(n, rb_space(rb));
    first = min_size(n, rb->capacity - rb->write);
    memcpy(rb->data + rb->write, bytes, first);
    memcpy(rb->data, bytes + first, n - first);
    rb->write = (rb->write + n) % rb->capacity;
    rb->size += n;
    return n;
}

size_t rb_peek(const ringbuf *rb, void *dst, size_t n)
{
    unsigned char *out = dst;
    size_t first;

    n = min_size(n, rb->size);
    first = min_size(n, rb->capacity - rb->read);
    memcpy(out, rb->data + rb->read, first);
    memcpy(out + first, rb->data, n - first);
    return n;
}

size_t rb_discard(ringbuf *rb, size_t n)
{
    n = min_size(n, rb->size);
    rb->read = (rb->read + n) % rb->capacity;
    rb->size -= n;
    return n;
}

size_t rb_read(ringbuf *rb, void *dst, size_t n)
{
    return rb_discard(rb, rb_peek(rb, dst, n));
}

long rb_find(const ringbuf *rb, unsigned char byte)
{
    for (size_t i = 0; i < rb->size; i++) {
        if (rb->data[(rb->read + i) % rb->capacity] == byte)
            return (long)i;
    }
    return -1;
}
