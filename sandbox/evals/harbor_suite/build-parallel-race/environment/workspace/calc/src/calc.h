#ifndef CALC_H
#define CALC_H

enum err { ERR_OK = -1, ERR_STACK_UNDERFLOW, ERR_STACK_OVERFLOW, ERR_DIV_BY_ZERO, ERR_BAD_TOKEN };

struct op {
    const char *sym;
    enum err (*apply)(double a, double b, double *out);
};

const struct op *find_op(const char *sym);
const char *err_text(enum err e);

#endif
