#define STACK_MAX 64

struct stack {
    double values[STACK_MAX];
    int size;
};

void stack_clear(struct stack *s);
/* Each returns 0 on success, -1 on overflow or underflow. */
int stack_push(struct stack *s, double value);
int stack_pop(struct stack *s, double *out);
