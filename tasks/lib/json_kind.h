/*
 * json_kind.h -- the name of a JSON value's type, for messages such as
 * "timeout_ms: expected integer, got string".
 */
#ifndef TASK_JSON_KIND_H
#define TASK_JSON_KIND_H

#include <jansson.h>

/* "object", "array", "string", "integer", "number" (a real), "boolean" or "null": a
 * static string. v must not be NULL (an absent argument is the caller's to name). */
const char *task_json_kind(const json_t *v);

#endif
