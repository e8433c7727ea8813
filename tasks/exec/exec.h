/*
 * exec.h -- what the files of the exec family share: the configuration built by init,
 * the default PATH and the shell, and the functions one file calls in another. Not
 * installed and not part of any ABI: only tern_plugin_entry leaves exec.so.
 *
 *   exec.c    the descriptor: exec.run, its argument schema and fatal codes
 *   config.c  the plugin's configuration (init, fini) and what it allows to run
 *   check.c   the store-time check of a step's arguments
 *   argv.c    the argument vector of an argv array, templates kept one argument each
 *   shell.c   the script of a "shell": true step, values passed as "$1"...
 *   env.c     the child's environment
 *   run.c     one attempt: the arguments read, the spawn and how it ended
 */
#ifndef TASKS_EXEC_H
#define TASKS_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <tern/task.h>

#include "lib/strvec.h"

#define DEFAULT_PATH_DIRS "/usr/local/bin:/usr/bin:/bin"
#define DEFAULT_PATH      "PATH=" DEFAULT_PATH_DIRS
#define SHELL_PATH        "/bin/sh"

#define SHELL_REFUSED                                                                              \
    "\"shell\": true is not allowed; the exec plugin's configuration must say "                    \
    "\"allow_shell\": true ({\"plugins\": {\"exec\": {\"allow_shell\": true}}})"

/* What the operator allows, from {"plugins": {"exec": {...}}}; built by init, read by
 * every attempt, freed by fini. */
typedef struct exec_config {
    bool allow_shell;  /* "allow_shell": shell steps may run */
    bool has_programs; /* "programs" was given: only those programs run */
    char **programs;   /* realpath of each allowed program */
    char **names;      /* parallel: the name it was found by (basename, before symlinks) */
    size_t n_programs;
    bool set_ids; /* run children as uid/gid (ternd is root) */
    uid_t uid;
    gid_t gid;
} exec_config_t;

/* ---- config.c -------------------------------------------------------------------- */

/* The plugin's init and fini: init builds the exec_config_t that every attempt reads
 * through tern_plugin_state (refusing, with a message in err, a configuration it does
 * not understand); fini frees it. */
int exec_init(const tern_host *host, const json_t *config, void **state, char *err, size_t errlen);
void exec_fini(void *state);

/* Where `program` (argv[0]) runs from, given the child's PATH and cwd: an absolute
 * path written into out, or false when it cannot be found. */
bool resolve_program(const char *program, const char *path, const char *cwd, char *out,
                     size_t outlen);

/* Whether `program` may run, given the child's PATH and cwd. Returns NULL and the
 * absolute path to run in `run_path`, or `msg` filled. With no "programs" list every
 * program may run and run_path is the program as written. */
const char *program_allowed(const exec_config_t *c, const char *program, const char *path,
                            const char *cwd, char *run_path, size_t run_len, char *msg,
                            size_t msglen);

/* ---- check.c --------------------------------------------------------------------- */

/* The store-time check (tern_task_def.check) of exec.run's arguments. */
int run_check(void *state, const json_t *args, char *err, size_t errlen);

/* ---- argv.c ---------------------------------------------------------------------- */

/* Appends a value of a template as text: a string as it is, anything else as compact
 * JSON, as templates read inside a longer string. Returns 0, or -1 for a NUL byte
 * (which no argument can carry) or no memory. *buf is malloc'd, the caller's. */
int append_value(char **buf, size_t *len, const json_t *v);

/* Appends n bytes of s to the malloc'd *buf. Returns 0, or -1 when out of memory. */
int append_text(char **buf, size_t *len, const char *s, size_t n);

/* The argument vector: the array as given, or /bin/sh -c <script> when shell is true.
 * Returns NULL, or `msg` filled. The strings pushed to argv are borrowed from args or
 * owned by argv. */
const char *build_argv(const json_t *args, task_strv_t *argv, bool *is_shell, char *msg,
                       size_t msglen);

/* ---- shell.c --------------------------------------------------------------------- */

/* /bin/sh -c SCRIPT sh VALUE1 ... for the parts `a` of a shell step's argv, pushed to
 * argv. Returns NULL, or `msg` filled. */
const char *build_shell(const json_t *a, task_strv_t *argv, char *msg, size_t msglen);

/* ---- env.c ----------------------------------------------------------------------- */

/* Builds the child's environment into *env (left empty when the child simply inherits
 * ternd's). Returns NULL, or `msg` filled with what is wrong. */
const char *build_env(const json_t *args, task_strv_t *env, bool *inherit_all, char *msg,
                      size_t msglen);

/* ---- run.c ----------------------------------------------------------------------- */

/* exec.run's start(): reads the arguments, checks them against the configuration and
 * spawns the child; the outcome is reported when it exits. */
void run_start(tern_ctx *ctx, const json_t *args);

#endif
