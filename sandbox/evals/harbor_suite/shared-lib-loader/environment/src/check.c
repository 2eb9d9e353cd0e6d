#include <ctype.h>
#include "check.h"

static const char ALPHABET[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

char check_char(const char *code)
{
    unsigned sum = 0, weight = 1;
    for (const char *p = code; *p; p++) {
        int c = toupper((unsigned char)*p);
        if (!isalnum(c))
            continue;
        unsigned v = isdigit(c) ? (unsigned)(c - '0') : (unsigned)(c - 'A' + 10);
        sum += v * weight;
        weight = weight % 7 + 2;
    }
    return ALPHABET[sum % 32];
}

const char *check_version(void)
{
    return "1.4.2";
}
