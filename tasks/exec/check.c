/*
 * check.c -- the store-time check of exec.run (tern_task_def.check): what can be
 * refused when a workflow is stored, before any step runs. Owns nothing.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"

/* The PATH the child will search: the step's env, ternd's when inherited, or the
 * default. Borrowed from args or environ. */
static const char *child_path(const json_t *args)
{
    const char *p = json_string_value(json_object_get(json_object_get(args, "env"), "PATH"));
    if (p != NULL)
        return p;
    if (json_is_true(json_object_get(args, "inherit_env")))
        return getenv("PATH");
    return DEFAULT_PATH_DIRS;
}

/* The store-time check (tern_task_def.check): the arguments as written, templates
 * unexpanded. A program named by a template, or one not found on this host (the
 * runners may differ), is left to run time, which checks every step again. */
int run_check(void *state, const json_t *args, char *err, size_t errlen)
{
    const exec_config_t *c = state;
    const json_t *shell = json_object_get(args, "shell");
    bool is_shell = json_is_true(shell);
    if (is_shell && (c == NULL || !c->allow_shell)) {
        snprintf(err, errlen, "shell: " SHELL_REFUSED);
        return -1;
    }
    if (c == NULL || !c->has_programs)
        return 0;
    const json_t *a = json_object_get(args, "argv");
    const char *program = is_shell ? SHELL_PATH : json_string_value(json_array_get(a, 0));
    const json_t *cwd = json_object_get(args, "cwd");
    const char *path = child_path(args);
    if (program == NULL || strstr(program, "${") != NULL ||
        (json_is_string(cwd) && strstr(json_string_value(cwd), "${") != NULL) ||
        (path != NULL && strstr(path, "${") != NULL))
        return 0;
    char run_path[PATH_MAX], found[PATH_MAX], msg[PATH_MAX + 256];
    if (!resolve_program(program, path, json_string_value(cwd), found, sizeof found))
        return 0;
    if (program_allowed(c, program, path, json_string_value(cwd), run_path, sizeof run_path, msg,
                        sizeof msg) == NULL)
        return 0;
    snprintf(err, errlen, "%s: %s%s", is_shell ? "shell" : "argv[0]", msg,
             is_shell ? " (a shell step needs the shell, " SHELL_PATH ", among the programs)" : "");
    return -1;
}
