/*
 * env.c -- the child's environment: a minimal one (PATH and the step's "env") by
 * default, or ternd's with "env" on top when "inherit_env" is true. Pushes owned
 * "NAME=value" strings, and entries of environ it borrows, to the caller's vector.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec.h"

#include "lib/args.h"
#include "lib/json_kind.h"

/* Builds the child's environment into *env (left empty when the child simply inherits
 * ternd's). Returns NULL, or `msg` filled with what is wrong. */
const char *build_env(const json_t *args, task_strv_t *env, bool *inherit_all, char *msg,
                      size_t msglen)
{
    const json_t *given = NULL;
    bool inherit = false;
    const char *bad = task_args_object(args, "env", &given, msg, msglen);
    if (bad == NULL)
        bad = task_args_bool(args, "inherit_env", &inherit, msg, msglen);
    if (bad != NULL)
        return bad;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)given, key, val)
    {
        if (key[0] == '\0' || strchr(key, '=') != NULL) {
            snprintf(msg, msglen, "env: invalid variable name \"%s\"", key);
            return msg;
        }
        if (!json_is_string(val)) {
            snprintf(msg, msglen, "env.%s: expected string, got %s", key, task_json_kind(val));
            return msg;
        }
    }
    *inherit_all = inherit;
    if (*inherit_all && json_object_size(given) == 0)
        return NULL; /* plain inheritance: the host passes NULL */

    if (*inherit_all) {
        for (char **e = environ; e != NULL && *e != NULL; e++) {
            const char *eq = strchr(*e, '=');
            if (eq == NULL || json_object_getn(given, *e, (size_t)(eq - *e)) != NULL)
                continue; /* malformed, or overridden by the step's env below */
            if (task_strv_push(env, *e, NULL) != 0)
                goto NoMemory;
        }
    } else if (json_object_get(given, "PATH") == NULL) {
        if (task_strv_push(env, DEFAULT_PATH, NULL) != 0)
            goto NoMemory;
    }
    json_object_foreach((json_t *)given, key, val)
    {
        size_t len = strlen(key) + 1 + json_string_length(val) + 1;
        char *entry = malloc(len);
        if (entry == NULL)
            goto NoMemory;
        snprintf(entry, len, "%s=%s", key, json_string_value(val));
        if (task_strv_push(env, NULL, entry) != 0) {
            free(entry);
            goto NoMemory;
        }
    }
    return NULL;
NoMemory:
    snprintf(msg, msglen, "out of memory building the environment");
    return msg;
}
