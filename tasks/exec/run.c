/*
 * run.c -- one attempt of exec.run: its arguments read and checked against the
 * configuration again, the child spawned through the host, and the outcome reported
 * when it exits. The argument vectors live only for the tern_spawn call (the host
 * copies them), so nothing is allocated across the callback.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"

#include "lib/args.h"

#define MAX_TAIL_BYTES (1024 * 1024) /* results are stored in Redis */
#define DEFAULT_TAIL   4096
#define MAX_MSG_STDERR 2048 /* bytes of stderr quoted in a failure message */

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

void run_start(tern_ctx *ctx, const json_t *args)
{
    char msg[512];
    const char *bad = NULL;
    task_strv_t argv = {0}, env = {0};
    bool inherit_all = false;
    uint64_t timeout_ms = 0, tail = DEFAULT_TAIL;

    const exec_config_t *cfg = tern_plugin_state(ctx);
    bool is_shell = false;
    bad = build_argv(args, &argv, &is_shell, msg, sizeof msg);
    if (bad == NULL)
        bad = build_env(args, &env, &inherit_all, msg, sizeof msg);
    if (bad == NULL)
        bad = task_args_uint(args, "timeout_ms", UINTPTR_MAX, &timeout_ms, msg, sizeof msg);
    if (bad == NULL)
        bad = task_args_uint(args, "tail_bytes", MAX_TAIL_BYTES, &tail, msg, sizeof msg);
    const char *cwd = NULL, *in = NULL;
    size_t in_len = 0;
    if (bad == NULL)
        bad = task_args_string(args, "cwd", &cwd, NULL, msg, sizeof msg);
    if (bad == NULL)
        bad = task_args_string(args, "stdin", &in, &in_len, msg, sizeof msg);
    if (bad != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "%s", bad);
        goto Out;
    }
    /* The configuration is checked again at every attempt: it may have changed since
     * the workflow was stored. */
    if (is_shell && (cfg == NULL || !cfg->allow_shell)) {
        tern_task_fail(ctx, "ExecNotAllowed", SHELL_REFUSED);
        goto Out;
    }
    char run_path[PATH_MAX];
    const char *path = inherit_all && env.n == 0 ? getenv("PATH") : NULL;
    for (size_t i = 0; path == NULL && i < env.n; i++)
        if (strncmp(env.v[i], "PATH=", 5) == 0)
            path = env.v[i] + 5;
    if (program_allowed(cfg, argv.v[0], path, cwd, run_path, sizeof run_path, msg, sizeof msg) !=
        NULL) {
        tern_task_fail(
            ctx, "ExecNotAllowed", "%s%s", msg,
            is_shell ? " (a shell step needs the shell, " SHELL_PATH ", among the programs)" : "");
        goto Out;
    }
    /* Run what was checked: the path found, not a second search of PATH. */
    if (cfg != NULL && cfg->has_programs)
        argv.v[0] = run_path;

    tern_spawn_opts opts = {
        .size = sizeof(tern_spawn_opts),
        .argv = argv.v,
        .env = inherit_all && env.n == 0 ? NULL : env.v,
        .cwd = cwd,
        .timeout_ms = timeout_ms,
        .tail_bytes = tail == 0 ? DEFAULT_TAIL : (size_t)tail,
        .stdin_data = in,
        .stdin_len = in_len,
        .flags = cfg != NULL && cfg->set_ids ? TERN_SPAWN_SET_IDS : 0,
        .uid = cfg != NULL ? (uint32_t)cfg->uid : 0,
        .gid = cfg != NULL ? (uint32_t)cfg->gid : 0,
    };
    int rc = tern_spawn(ctx, &opts, on_exec_exit, (void *)(uintptr_t)timeout_ms);
    if (rc < 0)
        tern_task_fail(ctx, "ExecSpawnError", "spawn \"%s\": %s", argv.v[0], strerror(-rc));
Out:
    task_strv_free(&argv);
    task_strv_free(&env);
}
