#include <stdio.h>
#include <string.h>

#include "ringbuf.h"

static int failures;

#define EXPECT(cond)                                                  \
    do {                                                              \
        if (!(cond)) {                                                \
            fprintf(stderr, "%s:%d: FAILED %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                               \
        }                                                             \
    } while (0)

static void test_simple_fifo(void)
{
    ringbuf rb;
    char out[8] = {0};

    EXPECT(rb_init(&rb, 8) == 0);
    EXPECT(rb_write(&rb, "hello", 5) == 5);
    EXPECT(rb_size(&rb) == 5 && rb_space(&rb) == 3);
    EXPECT(rb_read(&rb, out, 3) == 3 && memcmp(out, "hel", 3) == 0);
    EXPECT(rb_size(&rb) == 2);
    rb_free(&rb);
}

static void test_write_is_truncated_when_full(void)
{
    ringbuf rb;

    rb_init(&rb, 4);
    EXPECT(rb_write(&rb, "abcdef", 6) == 4);
    EXPECT(rb_write(&rb, "x", 1) == 0);
    rb_free(&rb);
}

static void test_wrap_around(void)
{
    ringbuf rb;
    char out[8] = {0};

    rb_init(&rb, 6);
    rb_write(&rb, "abcd", 4);
    rb_read(&rb, out, 3);
    EXPECT(rb_write(&rb, "efghi", 5) == 5); /* wraps: d e f | g h i */
    EXPECT(rb_peek(&rb, out, 6) == 6 && memcmp(out, "defghi", 6) == 0);
    EXPECT(rb_find(&rb, 'h') == 4);
    EXPECT(rb_find(&rb, 'z') == -1);
    EXPECT(rb_read(&rb, out, 8) == 6 && memcmp(out, "defghi", 6) == 0);
    EXPECT(rb_size(&rb) == 0);
    rb_free(&rb);
}

static void test_zero_capacity_is_refused(void)
{
    ringbuf rb;

    EXPECT(rb_init(&rb, 0) == -1);
}

int main(void)
{
    test_simple_fifo();
    test_write_is_truncated_when_full();
    test_wrap_around();
    test_zero_capacity_is_refused();
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    puts("all tests passed");
    return 0;
}
