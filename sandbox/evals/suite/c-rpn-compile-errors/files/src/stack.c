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

double stack_pop(struct stack *s)
{
    return s->values[--s->size];
}
