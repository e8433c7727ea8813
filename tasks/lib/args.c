/*
 * args.c -- a task's arguments read by name, with defaults and messages naming the
 * argument and both types; see args.h. Owns nothing: every value is borrowed from the
 * arguments and every message is written into the caller's buffer.
 */
#include <stdio.h>

#include "args.h"
#include "json_kind.h"

/* The argument named, or NULL when it is absent or, unless null_is_value, null. */
static const json_t *lookup(const json_t *args, const char *name, bool null_is_value)
{
    const json_t *v = json_object_get(args, name);
    if (v == NULL || (json_is_null(v) && !null_is_value))
        return NULL;
    return v;
}

static const char *wrong_type(const char *name, const char *expected, const json_t *v, char *msg,
                              size_t msglen)
{
    snprintf(msg, msglen, "%s: expected %s, got %s", name, expected, task_json_kind(v));
    return msg;
}

const char *task_args_uint(const json_t *args, const char *name, uint64_t max, uint64_t *out,
                           char *msg, size_t msglen)
{
    const json_t *v = lookup(args, name, false);
    if (v == NULL)
        return NULL;
    if (!json_is_integer(v))
        return wrong_type(name, "integer", v, msg, msglen);
    json_int_t i = json_integer_value(v);
    if (i < 0 || (uint64_t)i > max) {
        snprintf(msg, msglen, "%s: %lld is out of range 0..%llu", name, (long long)i,
                 (unsigned long long)max);
        return msg;
    }
    *out = (uint64_t)i;
    return NULL;
}

const char *task_args_string(const json_t *args, const char *name, const char **out, size_t *len,
                             char *msg, size_t msglen)
{
    const json_t *v = lookup(args, name, false);
    if (v == NULL)
        return NULL;
    if (!json_is_string(v))
        return wrong_type(name, "string", v, msg, msglen);
    *out = json_string_value(v);
    if (len != NULL)
        *len = json_string_length(v);
    return NULL;
}

const char *task_args_bool(const json_t *args, const char *name, bool *out, char *msg,
                           size_t msglen)
{
    const json_t *v = lookup(args, name, true);
    if (v == NULL)
        return NULL;
    if (!json_is_boolean(v))
        return wrong_type(name, "boolean", v, msg, msglen);
    *out = json_is_true(v);
    return NULL;
}

const char *task_args_object(const json_t *args, const char *name, const json_t **out, char *msg,
                             size_t msglen)
{
    const json_t *v = lookup(args, name, false);
    if (v == NULL)
        return NULL;
    if (!json_is_object(v))
        return wrong_type(name, "object", v, msg, msglen);
    *out = v;
    return NULL;
}
