/*
 * describe.c -- short descriptions of JSON values for error messages; see
 * describe.h. It formats only; which values are wrong is for its callers to say.
 */
#include "base/describe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *describe_json(const json_t *v, char *buf, size_t len)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING: {
        const char *s = json_string_value(v);
        size_t n = strlen(s);
        snprintf(buf, len, "\"%.*s%s\"", n > 40 ? 40 : (int)n, s, n > 40 ? "..." : "");
        return buf;
    }
    default: {
        char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
        snprintf(buf, len, "%s", s != NULL ? s : "?");
        free(s);
        return buf;
    }
    }
}
