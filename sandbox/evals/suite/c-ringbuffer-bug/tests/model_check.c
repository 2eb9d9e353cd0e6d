/* Random calls checked against a plain array queue, for many capacities. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringbuf.h"

static unsigned long state;

static unsigned next(void)
{
    state = state * 6364136223846793005UL + 1442695040888963407UL;
    return (unsigned)(state >> 33);
}

static unsigned char model[1 << 12];
static size_t model_size;

#define FAIL(...)                                 \
    do {                                          \
        printf("capacity %zu step %d: ", cap, step); \
        printf(__VA_ARGS__);                      \
        putchar('\n');                            \
        return 1;                                 \
    } while (0)

static int run(size_t cap, int steps)
{
    ringbuf rb;
    unsigned char in[256], out[256];
    int step = -1;

    if (rb_init(&rb, cap) != 0)
        FAIL("rb_init failed");
    model_size = 0;
    for (step = 0; step < steps; step++) {
        unsigned op = next() % 6;
        size_t n = next() % (2 * cap + 2);
        size_t expect;

        if (n > sizeof in)
            n = sizeof in;
        if (op <= 1) {
            for (size_t i = 0; i < n; i++)
                in[i] = (unsigned char)(next() % 8 + (next() % 4 == 0 ? 250 : 0));
            expect = n < cap - model_size ? n : cap - model_size;
            if (rb_write(&rb, in, n) != expect)
                FAIL("rb_write(%zu) returned the wrong count", n);
            memcpy(model + model_size, in, expect);
            model_size += expect;
        } else if (op <= 3) {
            expect = n < model_size ? n : model_size;
            memset(out, 0xAA, sizeof out);
            if (op == 2) {
                if (rb_read(&rb, out, n) != expect)
                    FAIL("rb_read(%zu) returned the wrong count", n);
            } else if (rb_peek(&rb, out, n) != expect) {
                FAIL("rb_peek(%zu) returned the wrong count", n);
            }
            if (memcmp(out, model, expect) != 0)
                FAIL("%s returned the wrong bytes", op == 2 ? "rb_read" : "rb_peek");
            for (size_t i = expect; i < sizeof out; i++)
                if (out[i] != 0xAA)
                    FAIL("wrote past the bytes it returned");
            if (op == 2) {
                memmove(model, model + expect, model_size - expect);
                model_size -= expect;
            }
        } else if (op == 4) {
            expect = n < model_size ? n : model_size;
            if (rb_discard(&rb, n) != expect)
                FAIL("rb_discard(%zu) returned the wrong count", n);
            memmove(model, model + expect, model_size - expect);
            model_size -= expect;
        } else {
            unsigned char byte = (unsigned char)(next() % 10 + (next() % 3 == 0 ? 250 : 0));
            long want = -1;
            for (size_t i = 0; i < model_size; i++)
                if (model[i] == byte) {
                    want = (long)i;
                    break;
                }
            if (rb_find(&rb, byte) != want)
                FAIL("rb_find(%u) gave %ld, want %ld", byte, rb_find(&rb, byte), want);
        }
        if (rb_size(&rb) != model_size || rb_space(&rb) != cap - model_size)
            FAIL("size %zu / space %zu, want %zu / %zu", rb_size(&rb), rb_space(&rb),
                 model_size, cap - model_size);
    }
    rb_free(&rb);
    return 0;
}

int main(int argc, char **argv)
{
    static const size_t capacities[] = {1, 2, 3, 5, 7, 8, 16, 31, 64, 100};
    ringbuf rb;
    int status = 0;

    state = argc > 1 ? strtoul(argv[1], NULL, 10) : 1;
    if (rb_init(&rb, 0) != -1) {
        puts("rb_init(0) must fail");
        return 1;
    }
    for (size_t i = 0; i < sizeof capacities / sizeof capacities[0]; i++)
        status |= run(capacities[i], 3000);
    if (status == 0)
        puts("model ok");
    return status;
}
