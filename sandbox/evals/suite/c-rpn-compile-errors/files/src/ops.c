#include "ops.h"

static enum rpn_status binary(struct stack *s, char op)
{
    double a, b;

    if (stack_pop(s, &a) || stack_pop(s, &b))
        return RPN_UNDERFLOW;
    switch (op) {
    case '+':
        return stack_push(s, a + b) ? RPN_OVERFLOW : RPN_OK;
    case '-':
        return stack_push(s, a - b) ? RPN_OVERFLOW : RPN_OK;
    case '*':
        return stack_push(s, a * b) ? RPN_OVERFLOW : RPN_OK;
    default:
        if (b == 0)
            return RPN_DIVZERO;
        return stack_push(s, a / b) ? RPN_OVERFLOW : RPN_OK;
    }
}

enum rpn_status apply_token(struct stack *s, const char *token)
{
    double a, b;

    if (strlen(token) == 1 && strchr("+-*/", token[0]))
        return binary(s, token[0]);
    if (strcmp(token, "neg") == 0) {
        if (stack_pop(s, &a))
            return RPN_UNDERFLOW;
        return stack_push(s, -a) ? RPN_OVERFLOW : RPN_OK;
    }
    if (strcmp(token, "dup") == 0) {
        if (stack_pop(s, &a))
            return RPN_UNDERFLOW;
        stack_push(s, a);
        return stack_push(s, a) ? RPN_OVERFLOW : RPN_OK;
    }
    if (strcmp(token, "swap") == 0) {
        if (stack_pop(s, &a))
            return RPN_UNDERFLOW;
        if (stack_pop(s, &b)) {
            return RPN_UNDERFLOW;
        stack_push(s, a);
        return stack_push(s, b) ? RPN_OVERFLOW : RPN_OK;
    }
    return RPN_UNKNOWN;
}
