#include "calc.h"
#include "errors_table.h"

const char *err_text(enum err e)
{
    return ERRORS[e];
}
