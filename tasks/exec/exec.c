/*
 * exec.c -- the "exec" plugin: runs a program on the runner's host.
 *
 * exec.run starts one child process through the host (tern_spawn: the engine's
 * child_process, stopped by the engine if the attempt is cancelled) and reports how it
 * ended. The program is executed directly, never through a shell, unless the workflow
 * says "shell": true, in which case argv is one string given to /bin/sh -c: the step
 * asks for a shell in writing, where a reviewer sees it.
 *
 * The child gets a minimal environment by default (PATH=/usr/local/bin:/usr/bin:/bin
 * plus the step's "env"), so what a command sees does not depend on how ternd was
 * started; "inherit_env": true passes ternd's environment, with "env" on top.
 *
 * This file owns nothing beyond one attempt's argument vectors, which live only for
 * the tern_spawn call (the host copies them). No state survives between attempts and
 * nothing is allocated across the callback, so the task needs no cancel hook.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tern/task.h>

#define DEFAULT_PATH   "PATH=/usr/local/bin:/usr/bin:/bin"
#define MAX_TAIL_BYTES (1024 * 1024) /* results are stored in Redis */
#define DEFAULT_TAIL   4096
#define MAX_MSG_STDERR 2048 /* bytes of stderr quoted in a failure message */

/* A NULL-terminated vector of strings whose elements are borrowed or owned per entry. */
typedef struct strv {
    const char **v;
    char **owned; /* parallel: what to free */
    size_t n, cap;
} strv_t;

static int strv_push(strv_t *s, const char *borrowed, char *owned)
{
    if (s->n + 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        const char **v = realloc(s->v, cap * sizeof *v);
        if (v == NULL)
            return -1;
        s->v = v;
        char **o = realloc(s->owned, cap * sizeof *o);
        if (o == NULL)
            return -1;
        s->owned = o;
        s->cap = cap;
    }
    s->v[s->n] = owned != NULL ? owned : borrowed;
    s->owned[s->n] = owned;
    s->n++;
    s->v[s->n] = NULL;
    return 0;
}

static void strv_free(strv_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->owned[i]);
    free(s->owned);
    free(s->v);
}

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    case JSON_NULL:
        return "null";
    }
    return "unknown";
}

/* Builds the child's environment into *env (left empty when the child simply inherits
 * ternd's). Returns NULL, or `msg` filled with what is wrong. */
static const char *build_env(const json_t *args, strv_t *env, bool *inherit_all, char *msg,
                             size_t msglen)
{
    const json_t *given = json_object_get(args, "env");
    const json_t *inherit = json_object_get(args, "inherit_env");
    if (given != NULL && !json_is_object(given) && !json_is_null(given)) {
        snprintf(msg, msglen, "env: expected object, got %s", json_kind(given));
        return msg;
    }
    if (inherit != NULL && !json_is_boolean(inherit)) {
        snprintf(msg, msglen, "inherit_env: expected boolean, got %s", json_kind(inherit));
        return msg;
    }
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)given, key, val)
    {
        if (key[0] == '\0' || strchr(key, '=') != NULL) {
            snprintf(msg, msglen, "env: invalid variable name \"%s\"", key);
            return msg;
        }
        if (!json_is_string(val)) {
            snprintf(msg, msglen, "env.%s: expected string, got %s", key, json_kind(val));
            return msg;
        }
    }
    *inherit_all = json_is_true(inherit);
    if (*inherit_all && json_object_size(given) == 0)
        return NULL; /* plain inheritance: the host passes NULL */

    if (*inherit_all) {
        for (char **e = environ; e != NULL && *e != NULL; e++) {
            const char *eq = strchr(*e, '=');
            if (eq == NULL || json_object_getn(given, *e, (size_t)(eq - *e)) != NULL)
                continue; /* malformed, or overridden by the step's env below */
            if (strv_push(env, *e, NULL) != 0)
                goto NoMemory;
        }
    } else if (json_object_get(given, "PATH") == NULL) {
        if (strv_push(env, DEFAULT_PATH, NULL) != 0)
            goto NoMemory;
    }
    json_object_foreach((json_t *)given, key, val)
    {
        size_t len = strlen(key) + 1 + json_string_length(val) + 1;
        char *entry = malloc(len);
        if (entry == NULL)
            goto NoMemory;
        snprintf(entry, len, "%s=%s", key, json_string_value(val));
        if (strv_push(env, NULL, entry) != 0) {
            free(entry);
            goto NoMemory;
        }
    }
    return NULL;
NoMemory:
    snprintf(msg, msglen, "out of memory building the environment");
    return msg;
}

/* Reads an optional non-negative integer argument. Returns NULL, or `msg` filled. */
static const char *get_uint(const json_t *args, const char *name, uint64_t max, uint64_t *out,
                            char *msg, size_t msglen)
{
    const json_t *v = json_object_get(args, name);
    if (v == NULL || json_is_null(v))
        return NULL;
    if (!json_is_integer(v)) {
        snprintf(msg, msglen, "%s: expected integer, got %s", name, json_kind(v));
        return msg;
    }
    json_int_t i = json_integer_value(v);
    if (i < 0 || (uint64_t)i > max) {
        snprintf(msg, msglen, "%s: %lld is out of range 0..%llu", name, (long long)i,
                 (unsigned long long)max);
        return msg;
    }
    *out = (uint64_t)i;
    return NULL;
}

/* The argument vector: the array as given, or /bin/sh -c <string> when shell is true.
 * Returns NULL, or `msg` filled. */
static const char *build_argv(const json_t *args, strv_t *argv, char *msg, size_t msglen)
{
    const json_t *a = json_object_get(args, "argv");
    const json_t *shell = json_object_get(args, "shell");
    if (shell != NULL && !json_is_boolean(shell)) {
        snprintf(msg, msglen, "shell: expected boolean, got %s", json_kind(shell));
        return msg;
    }
    if (json_is_true(shell)) {
        if (!json_is_string(a) || json_string_length(a) == 0) {
            snprintf(msg, msglen,
                     "argv: with \"shell\": true, expected one non-empty string (the command "
                     "line for /bin/sh -c), got %s",
                     a == NULL ? "nothing" : json_kind(a));
            return msg;
        }
        if (strv_push(argv, "/bin/sh", NULL) != 0 || strv_push(argv, "-c", NULL) != 0 ||
            strv_push(argv, json_string_value(a), NULL) != 0)
            goto NoMemory;
        return NULL;
    }
    if (json_is_string(a)) {
        snprintf(msg, msglen,
                 "argv: expected an array of strings, got a string; a command line runs "
                 "through /bin/sh only with \"shell\": true");
        return msg;
    }
    if (!json_is_array(a) || json_array_size(a) == 0) {
        snprintf(msg, msglen, "argv: expected a non-empty array of strings, got %s",
                 a == NULL          ? "nothing"
                 : json_is_array(a) ? "an empty array"
                                    : json_kind(a));
        return msg;
    }
    size_t i;
    const json_t *s;
    json_array_foreach(a, i, s)
    {
        if (!json_is_string(s)) {
            snprintf(msg, msglen, "argv[%zu]: expected string, got %s", i, json_kind(s));
            return msg;
        }
        if (strlen(json_string_value(s)) != json_string_length(s)) {
            snprintf(msg, msglen, "argv[%zu]: contains a NUL byte", i);
            return msg;
        }
        if (strv_push(argv, json_string_value(s), NULL) != 0)
            goto NoMemory;
    }
    if (argv->v[0][0] == '\0') {
        snprintf(msg, msglen, "argv[0]: empty program name");
        return msg;
    }
    return NULL;
NoMemory:
    snprintf(msg, msglen, "out of memory building argv");
    return msg;
}

/* The last `max` bytes of s without trailing newlines, for a message. */
static void quote_tail(const char *s, size_t len, char *out, size_t outlen)
{
    while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == '\r'))
        len--;
    size_t from = len > MAX_MSG_STDERR ? len - MAX_MSG_STDERR : 0;
    snprintf(out, outlen, "%s%.*s", from > 0 ? "..." : "", (int)(len - from), s + from);
}

/* `data` carries the step's timeout_ms (an integer, not a pointer), so that nothing is
 * allocated across the callback. */
static void on_exec_exit(tern_ctx *ctx, const tern_spawn_res *res, void *data)
{
    unsigned long long timeout_ms = (unsigned long long)(uintptr_t)data;
    if (res->error != NULL) {
        tern_task_fail(ctx, "ExecSpawnError", "%s", res->error);
        return;
    }
    char err_tail[MAX_MSG_STDERR + 8];
    quote_tail(res->stderr_tail, res->stderr_len, err_tail, sizeof err_tail);
    const char *sep = err_tail[0] != '\0' ? ": " : " (no stderr)";

    if (res->timed_out) {
        const char *abbrev = res->term_signal > 0 ? sigabbrev_np(res->term_signal) : NULL;
        tern_task_fail(ctx, "ExecTimeout",
                       "timed out after %llu ms, killed by signal %d (SIG%s)%s%s", timeout_ms,
                       res->term_signal, abbrev != NULL ? abbrev : "?", sep, err_tail);
        return;
    }
    if (res->term_signal != 0) {
        const char *abbrev = sigabbrev_np(res->term_signal);
        tern_task_fail(ctx, "ExecKilled", "killed by signal %d (SIG%s)%s%s", res->term_signal,
                       abbrev != NULL ? abbrev : "?", sep, err_tail);
        return;
    }
    if (res->exit_status != 0) {
        tern_task_fail(ctx, "ExecNonZeroExit", "exited with status %lld%s%s",
                       (long long)res->exit_status, sep, err_tail);
        return;
    }
    json_t *result = json_object();
    json_object_set_new(result, "exit_status", json_integer(res->exit_status));
    json_object_set_new(result, "stdout", json_stringn(res->stdout_tail, res->stdout_len));
    json_object_set_new(result, "stderr", json_stringn(res->stderr_tail, res->stderr_len));
    json_object_set_new(result, "elapsed_ms", json_integer((json_int_t)res->elapsed_ms));
    tern_task_done(ctx, result);
}

static void run_start(tern_ctx *ctx, const json_t *args)
{
    char msg[512];
    const char *bad = NULL;
    strv_t argv = {0}, env = {0};
    bool inherit_all = false;
    uint64_t timeout_ms = 0, tail = DEFAULT_TAIL;

    bad = build_argv(args, &argv, msg, sizeof msg);
    if (bad == NULL)
        bad = build_env(args, &env, &inherit_all, msg, sizeof msg);
    if (bad == NULL)
        bad = get_uint(args, "timeout_ms", UINTPTR_MAX, &timeout_ms, msg, sizeof msg);
    if (bad == NULL)
        bad = get_uint(args, "tail_bytes", MAX_TAIL_BYTES, &tail, msg, sizeof msg);
    const json_t *cwd = json_object_get(args, "cwd");
    if (bad == NULL && cwd != NULL && !json_is_string(cwd) && !json_is_null(cwd)) {
        snprintf(msg, sizeof msg, "cwd: expected string, got %s", json_kind(cwd));
        bad = msg;
    }
    const json_t *in = json_object_get(args, "stdin");
    if (bad == NULL && in != NULL && !json_is_string(in) && !json_is_null(in)) {
        snprintf(msg, sizeof msg, "stdin: expected string, got %s", json_kind(in));
        bad = msg;
    }
    if (bad != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "%s", bad);
        goto Out;
    }

    tern_spawn_opts opts = {
        .size = sizeof(tern_spawn_opts),
        .argv = argv.v,
        .env = inherit_all && env.n == 0 ? NULL : env.v,
        .cwd = json_string_value(cwd),
        .timeout_ms = timeout_ms,
        .tail_bytes = tail == 0 ? DEFAULT_TAIL : (size_t)tail,
        .stdin_data = json_is_string(in) ? json_string_value(in) : NULL,
        .stdin_len = json_is_string(in) ? json_string_length(in) : 0,
    };
    int rc = tern_spawn(ctx, &opts, on_exec_exit, (void *)(uintptr_t)timeout_ms);
    if (rc < 0)
        tern_task_fail(ctx, "ExecSpawnError", "spawn \"%s\": %s", argv.v[0], strerror(-rc));
Out:
    strv_free(&argv);
    strv_free(&env);
}

static const char *const run_fatal[] = {"ExecSpawnError", "InvalidArgument", NULL};

static const tern_task_def run_task = {
    .size = sizeof(tern_task_def),
    .name = "run",
    .summary = "Runs a program (never through a shell unless \"shell\": true) and returns "
               "its exit status and the tails of its output.",
    .args_schema = "{\"required\": [\"argv\"],"
                   " \"properties\": {"
                   "  \"argv\": {\"type\": [\"array\", \"string\"],"
                   "            \"description\": \"program and arguments; a string only with "
                   "shell\"},"
                   "  \"env\": {\"type\": \"object\"},"
                   "  \"inherit_env\": {\"type\": \"boolean\"},"
                   "  \"cwd\": {\"type\": \"string\"},"
                   "  \"timeout_ms\": {\"type\": \"integer\", \"minimum\": 0,"
                   "                 \"maximum\": 31536000000},"
                   "  \"stdin\": {\"type\": \"string\"},"
                   "  \"tail_bytes\": {\"type\": \"integer\", \"minimum\": 0,"
                   "                 \"maximum\": 1048576},"
                   "  \"shell\": {\"type\": \"boolean\"}},"
                   " \"additional\": false}",
    .fatal_codes = run_fatal,
    .start = run_start,
};

static const tern_task_def *const tasks[] = {&run_task, NULL};

static const tern_plugin exec_plugin = {
    .magic = TERN_PLUGIN_MAGIC,
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
    .size = sizeof(tern_plugin),
    .name = "exec",
    .version = "1.0.0",
    .tasks = tasks,
};

TERN_PLUGIN(exec_plugin)
