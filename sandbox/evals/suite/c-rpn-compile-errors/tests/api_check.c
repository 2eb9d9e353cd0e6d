/* Links against the workspace's stack and ops modules: their API must hold. */
#include <stdio.h>
#include <string.h>

#include "ops.h"
#include "stack.h"

#define CHECK(cond)                                                  \
    do {                                                             \
        if (!(cond)) {                                               \
            printf("check failed line %d: %s\n", __LINE__, #cond);   \
            return 1;                                                \
        }                                                            \
    } while (0)

int main(void)
{
    struct stack s;
    double out = 0;

    stack_clear(&s);
    CHECK(stack_pop(&s, &out) == -1);
    CHECK(stack_push(&s, 7) == 0);
    CHECK(stack_push(&s, 2) == 0);
    CHECK(apply_token(&s, "-") == RPN_OK);
    CHECK(stack_pop(&s, &out) == 0 && out == 5);
    CHECK(stack_pop(&s, &out) == -1);
    for (int i = 0; i < STACK_MAX; i++)
        CHECK(stack_push(&s, i) == 0);
    CHECK(stack_push(&s, 1) == -1);
    CHECK(apply_token(&s, "dup") == RPN_OVERFLOW);
    stack_clear(&s);
    CHECK(apply_token(&s, "swap") == RPN_UNDERFLOW);
    CHECK(stack_push(&s, 1) == 0);
    CHECK(apply_token(&s, "swap") == RPN_UNDERFLOW);
    stack_clear(&s);
    CHECK(stack_push(&s, 1) == 0 && stack_push(&s, 0) == 0);
    CHECK(apply_token(&s, "/") == RPN_DIVZERO);
    CHECK(apply_token(&s, "nope") == RPN_UNKNOWN);
    puts("api ok");
    return 0;
}
