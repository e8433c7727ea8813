/*
 * decimal.c -- see decimal.h.
 */
#include "base/decimal.h"

char *u64_text(uint64_t v, char buf[U64_TEXT_DIGITS + 1])
{
    char *p = buf + U64_TEXT_DIGITS;
    *p = '\0';
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    return p;
}
