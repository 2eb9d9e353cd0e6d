/* libcheck: check digits for warehouse item codes. */
#ifndef CHECK_H
#define CHECK_H
/* The check character of code (letters and digits; others are ignored). */
char check_char(const char *code);
const char *check_version(void);
#endif
