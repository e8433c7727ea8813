/*
 * volume_size.c -- SIZE arguments of `tern volume create`; see volume_size.h.
 */
#include "volume_size.h"

#include <inttypes.h>
#include <stdio.h>

#define SIZE_FORM "NG or Ng, N a positive whole number of GiB (10G, 100g)"

bool volume_size_parse(const char *s, uint64_t *mib, char *err, size_t errlen)
{
    *mib = 0;
    uint64_t n = 0;
    size_t i = 0;
    bool overflow = false;
    for (; s[i] >= '0' && s[i] <= '9'; i++) {
        uint64_t d = (uint64_t)(s[i] - '0');
        if (n > (VOLUME_SIZE_MAX_GIB - d) / 10)
            overflow = true;
        else
            n = n * 10 + d;
    }
    if (i == 0 || (s[i] != 'G' && s[i] != 'g') || s[i + 1] != '\0') {
        snprintf(err, errlen, "size \"%s\": expected " SIZE_FORM "%s", s,
                 i > 0 && s[i] == '\0' ? "; the unit G is required" : "");
        return false;
    }
    if (overflow) {
        snprintf(err, errlen, "size \"%s\": more than the largest size, %" PRIu64 "G", s,
                 VOLUME_SIZE_MAX_GIB);
        return false;
    }
    if (n == 0) {
        snprintf(err, errlen, "size \"%s\": a volume cannot be 0 GiB", s);
        return false;
    }
    *mib = n * 1024;
    return true;
}

bool volume_size_listed(const json_t *sizes, uint64_t mib)
{
    size_t i;
    const json_t *row;
    json_array_foreach(sizes, i, row)
    {
        const json_t *size = json_object_get(row, "size");
        if (json_is_integer(size) && json_integer_value(size) >= 0 &&
            (uint64_t)json_integer_value(size) == mib)
            return true;
    }
    return false;
}

void volume_size_text(uint64_t mib, char *buf, size_t n)
{
    if (mib % 1024 == 0)
        snprintf(buf, n, "%" PRIu64 "G", mib / 1024);
    else
        snprintf(buf, n, "%" PRIu64 "M", mib);
}
