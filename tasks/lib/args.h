/*
 * args.h -- a task's arguments read by name. Each getter leaves *out as the caller
 * set it (the default) when the argument is absent, stores the value when it has the
 * right type, and otherwise writes into msg a message that names the argument, the
 * type expected and the type given ("cwd: expected string, got integer") and returns
 * msg. On success they return NULL, so checks chain:
 *
 *     uint64_t timeout_ms = 0;            the default
 *     const char *cwd = NULL;
 *     const char *bad = task_args_uint(args, "timeout_ms", UINT32_MAX, &timeout_ms, msg, len);
 *     if (bad == NULL)
 *         bad = task_args_string(args, "cwd", &cwd, NULL, msg, len);
 *     if (bad != NULL)
 *         tern_task_fail(ctx, "InvalidArgument", "%s", bad);
 *
 * JSON null reads as absent for a string, an object or a number: a template that
 * expanded to null leaves the default. A boolean is a switch a step has to set, so
 * null there is refused like any other non-boolean.
 *
 * Values stored in *out are borrowed from args and valid while args is: a task that
 * keeps one past its start() call copies it.
 */
#ifndef TASK_ARGS_H
#define TASK_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* A non-negative integer no larger than max ("tail_bytes: 5000000 is out of range
 * 0..1048576"). */
const char *task_args_uint(const json_t *args, const char *name, uint64_t max, uint64_t *out,
                           char *msg, size_t msglen);

/* A string: *out points into args; *len (when len is not NULL) is its length in
 * bytes, which counts any NUL byte inside it. */
const char *task_args_string(const json_t *args, const char *name, const char **out, size_t *len,
                             char *msg, size_t msglen);

/* true or false; null is refused. */
const char *task_args_bool(const json_t *args, const char *name, bool *out, char *msg,
                           size_t msglen);

/* An object, borrowed from args. */
const char *task_args_object(const json_t *args, const char *name, const json_t **out, char *msg,
                             size_t msglen);

#endif
