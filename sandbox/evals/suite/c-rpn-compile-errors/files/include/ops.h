#ifndef RPN_OPS_H
#define RPN_OPS_H

#include "stack.h"

enum rpn_status { RPN_OK, RPN_UNDERFLOW, RPN_OVERFLOW, RPN_DIVZERO, RPN_UNKNOWN };

/* Apply one operator or command token; RPN_UNKNOWN if it is neither. */
enum rpn_status apply_token(struct stack *s, const char *token);

#endif
