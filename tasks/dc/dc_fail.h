/*
 * dc_fail.h -- how dc_model's file and process code reports a failure: the message
 * into the caller's buffer, the code (a negative errno) as the return value, in one
 * statement: `return dc_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));`.
 *
 * Part of dc_model: the C library only.
 */
#ifndef DC_FAIL_H
#define DC_FAIL_H

#include <stddef.h>

/* Formats the message into err (when err is not NULL and errlen > 0) and returns code. */
int dc_fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
