/*
 * dc_fail.c -- see dc_fail.h.
 */
#include "dc_fail.h"

#include <stdarg.h>
#include <stdio.h>

int dc_fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}
