#include <string.h>
#include "calc.h"

static enum err op_add(double a, double b, double *out) { *out = a + b; return ERR_OK; }
static enum err op_sub(double a, double b, double *out) { *out = a - b; return ERR_OK; }
static enum err op_mul(double a, double b, double *out) { *out = a * b; return ERR_OK; }
static enum err op_div(double a, double b, double *out)
{
    if (b == 0)
        return ERR_DIV_BY_ZERO;
    *out = a / b;
    return ERR_OK;
}

#include "ops_table.h"

const struct op *find_op(const char *sym)
{
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++)
        if (strcmp(OPS[i].sym, sym) == 0)
            return &OPS[i];
    return NULL;
}
