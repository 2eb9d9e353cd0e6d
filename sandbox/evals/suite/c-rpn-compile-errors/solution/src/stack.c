#include "stack.h"

void stack_clear(struct stack *s)
{
    s->size = 0;
}

int stack_push(struct stack *s, double value)
{
    if (s->size == STACK_MAX)
        return -1;
    s->values[s->size++] = value;
    return 0;
}

int stack_pop(struct stack *s, double *out)
{
    if (s->size == 0)
        return -1;
    *out = s->values[--s->size];
    return 0;
}
