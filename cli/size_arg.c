/*
 * size_arg.c -- SIZE arguments of the disk commands; see size_arg.h.
 */
#include "size_arg.h"

#include <stdio.h>
#include <string.h>

#define SIZE_FORMS "N or NM (MiB) or NG (GiB), N a positive integer"

bool size_arg_parse(const char *s, bool remaining_ok, size_arg_t *out, char *err, size_t errlen)
{
    *out = (size_arg_t){0};
    if (strcmp(s, "remaining") == 0) {
        if (!remaining_ok) {
            snprintf(err, errlen,
                     "size \"remaining\" is only for a new disk: expected " SIZE_FORMS);
            return false;
        }
        out->remaining = true;
        return true;
    }
    uint64_t n = 0;
    size_t i = 0;
    bool overflow = false;
    for (; s[i] >= '0' && s[i] <= '9'; i++) {
        uint64_t d = (uint64_t)(s[i] - '0');
        if (n > (SIZE_ARG_MAX_MIB - d) / 10)
            overflow = true;
        else
            n = n * 10 + d;
    }
    uint64_t scale = 1;
    const char *unit = s + i;
    if (strcmp(unit, "G") == 0)
        scale = 1024;
    else if (strcmp(unit, "M") != 0 && unit[0] != '\0')
        i = 0; /* an unknown unit or a stray character: not a size */
    if (i == 0) {
        snprintf(err, errlen, "size \"%s\": expected " SIZE_FORMS "%s", s,
                 remaining_ok ? ", or remaining" : "");
        return false;
    }
    if (!overflow && n == 0) {
        snprintf(err, errlen, "size \"%s\": a disk cannot be 0 MiB", s);
        return false;
    }
    if (overflow || n > SIZE_ARG_MAX_MIB / scale) {
        snprintf(err, errlen, "size \"%s\": more than the largest size, %llu MiB", s,
                 (unsigned long long)SIZE_ARG_MAX_MIB);
        return false;
    }
    out->mib = n * scale;
    return true;
}
