/*
 * error.c -- error messages into a caller's buffer; see error.h.
 */
#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>

int err_set(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}
