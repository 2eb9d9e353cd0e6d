/* calc TOKEN...: evaluates an RPN expression, e.g. `calc 2 3 + 4 '*'` prints 20. */
#include <stdio.h>
#include <stdlib.h>
#include "calc.h"

#define DEPTH 16

int main(int argc, char **argv)
{
    double stack[DEPTH];
    int top = 0;
    for (int i = 1; i < argc; i++) {
        const struct op *op = find_op(argv[i]);
        enum err e = ERR_OK;
        if (op) {
            if (top < 2) {
                e = ERR_STACK_UNDERFLOW;
            } else {
                e = op->apply(stack[top - 2], stack[top - 1], &stack[top - 2]);
                top--;
            }
        } else {
            char *end;
            double v = strtod(argv[i], &end);
            if (*argv[i] == '\0' || *end != '\0')
                e = ERR_BAD_TOKEN;
            else if (top == DEPTH)
                e = ERR_STACK_OVERFLOW;
            else
                stack[top++] = v;
        }
        if (e != ERR_OK) {
            fprintf(stderr, "calc: %s: %s\n", argv[i], err_text(e));
            return 1;
        }
    }
    if (top != 1) {
        fprintf(stderr, "calc: %s\n", err_text(top ? ERR_STACK_OVERFLOW : ERR_STACK_UNDERFLOW));
        return 1;
    }
    printf("%g\n", stack[0]);
    return 0;
}
