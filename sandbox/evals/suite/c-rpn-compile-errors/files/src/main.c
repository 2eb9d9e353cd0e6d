#include <stdio.h>

#include "stack.h"
#include "ops.h"

static const char *const messages[] = {
    [RPN_UNDERFLOW] = "stack underflow",
    [RPN_OVERFLOW] = "stack overflow",
    [RPN_DIVZERO] = "division by zero",
};

/* Evaluate one line; print its result or its error. Returns 0 when it is fine. */
static int evaluate(char *line)
{
    struct stack s;
    char *token;
    unsigned int count;

    stack_clear(&s);
    for (token = strtok(line, " \t\r\n"); token; token = strtok(NULL, " \t\r\n")) {
        char *end;
        double value = strtod(token, &end);
        enum rpn_status status;

        if (end != token && *end == '\0') {
            status = stack_push(&s, value) ? RPN_OVERFLOW : RPN_OK;
        } else {
            status = apply_token(&s, token);
        }
        if (status == RPN_UNKNOWN) {
            printf("error: unknown token '%s'\n", token);
            return 1;
        }
        if (status != RPN_OK) {
            printf("error: %s\n", messages[status]);
            return 1;
        }
    }
    count = s.size;
    if (count == 1) {
        printf("%.10g\n", s.values[0]);
        return 0;
    }
    printf("error: %d values left\n", count);
    return 1;
}

int main(void)
{
    char line[4096];
    int failed = 0;

    while (fgets(line, sizeof line, stdin)) {
        if (strspn(line, " \t\r\n") == strlen(line))
            continue;
        failed |= evaluate(line);
    }
    return failed ? 1 : 0;
}
