/*
 * task_isolated.h -- one attempt of a step run in a helper process, so that a plugin
 * that crashes, corrupts memory or blocks its loop takes down only that attempt.
 *
 * The helper is `ternd --task-helper`: it reads one JSON request on stdin (task,
 * arguments, job fields, step, attempt, idempotency key, plugin directory and
 * configuration), loads only the plugin it needs, runs the task through the same
 * task context as the runner, and writes JSON lines on stdout, the last of which is
 * the outcome. A helper that dies without an outcome fails the attempt with
 * TaskCrashed, naming the signal or exit status and the tail of its stderr.
 * Progress reports of isolated tasks are not forwarded while they run.
 */
#ifndef TERN_TASK_ISOLATED_H
#define TERN_TASK_ISOLATED_H

#include <stddef.h>

#include <jansson.h>
#include <uv.h>

#include "run/task_ctx.h"

typedef struct task_isolated task_isolated_t;

typedef struct task_isolated_opts {
    uv_loop_t *loop;
    const char *helper_exe;      /* path of ternd */
    const char *plugin_dir;      /* where the helper loads the plugin from */
    const char *redis_url;       /* for tern_redis_eval in the helper; may be NULL */
    const json_t *plugin_config; /* the plugin's configuration (borrowed, may be NULL) */
    const task_ctx_opts_t *ctx;  /* job, step and sink, as for task_ctx_start */
} task_isolated_opts_t;

/* Starts the helper. `args` is borrowed. Returns the attempt, or NULL with a message.
 * The outcome reaches opts->ctx->sink exactly once unless cancelled. */
task_isolated_t *task_isolated_start(const task_isolated_opts_t *opts, const json_t *args,
                                     char *err, size_t errlen);

/* Kills the helper; no outcome is delivered. */
void task_isolated_cancel(task_isolated_t *t);

/* The helper's side: runs one request read from stdin, writes the outcome to stdout.
 * Returns the process exit status (0 when an outcome was written). */
int task_helper_main(const char *default_plugin_dir);

#endif /* TERN_TASK_ISOLATED_H */
