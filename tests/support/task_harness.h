/*
 * task_harness.h -- runs one task of a built plugin to its outcome, on a private
 * loop, through the engine's real task context (engine/run/task_ctx.c) and host table.
 * Used by each plugin's tests; no Redis involved (tern_redis_eval fails with
 * -ENOTCONN unless the test supplies ops).
 *
 * The plugin is loaded directly with dlopen + tern_plugin_entry (the loader's own
 * checks are tested in test_plugin_loader.c) and initialised with the real host; its
 * configuration's "allow_networks" limits its HTTP requests, as the loader's does.
 */
#ifndef TERN_TASK_HARNESS_H
#define TERN_TASK_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "run/task_ctx.h"

typedef struct task_harness task_harness_t;

typedef struct harness_run {
    bool finished;          /* an outcome arrived within the bound */
    task_outcome_t outcome; /* valid when finished; freed by harness_run_dispose */
    json_t *progress;       /* array of every progress report delivered (new ref) */
    uint64_t elapsed_ms;    /* wall time of the run */
} harness_run_t;

/* Opens the built plugin at `plugin_path` and returns its descriptor (owned by the
 * plugin: valid until dlclose(*dl)); *dl is the dlopen handle, the caller's to close.
 * Fails the current cmocka test (fail_msg) when the file cannot be opened, has no
 * tern_plugin_entry or the entry returns NULL. */
const tern_plugin *task_harness_plugin_open(const char *plugin_path, void **dl);

/* Loads `plugin_path` and calls its init with `plugin_config` (borrowed, may be NULL).
 * Fails the current cmocka test (fail_msg) when the plugin cannot be loaded. */
task_harness_t *task_harness_new(const char *plugin_path, const json_t *plugin_config);

/* The harness's loop, for tests that run servers of their own on it. */
uv_loop_t *task_harness_loop(task_harness_t *h);

/* Runs task `entry` ("sleep": the plugin's own entry name) with `args` (borrowed),
 * job params `params` (borrowed, may be NULL) and job state `state` (borrowed, may be
 * NULL), until the outcome arrives or `bound_ms` passes. If cancel_after_ms > 0 the
 * attempt is cancelled with task_ctx_cancel after that many ms (then finished stays
 * false and the run returns once the context is gone). Returns 0 when finished,
 * -ETIMEDOUT when the bound passed (the attempt is cancelled), -ECANCELED when it was
 * cancelled on request, -ENOENT for an unknown entry. */
int task_harness_run(task_harness_t *h, const char *entry, const json_t *args, const json_t *params,
                     const json_t *state, uint64_t bound_ms, uint64_t cancel_after_ms,
                     harness_run_t *out);

void harness_run_dispose(harness_run_t *r);

/* Asserts that the run finished with a failure of `code` whose message holds
 * `message_part`; fails the current cmocka test naming what came instead. */
void harness_run_assert_failed(const harness_run_t *r, const char *code, const char *message_part);

/* Runs entry with args given as JSON text, within bound_ms, and asserts it finished:
 * the run (dispose it). */
harness_run_t task_harness_run_text(task_harness_t *h, const char *entry, const char *args_text,
                                    uint64_t bound_ms);

/* Runs entry with args as JSON text and asserts it is done: its result (new
 * reference); a failure fails the current cmocka test naming its code and message. */
json_t *task_harness_run_ok(task_harness_t *h, const char *entry, const char *args_text,
                            uint64_t bound_ms);

/* Runs entry with args as JSON text and asserts it fails with `code`, its message
 * holding `message_part`. */
void task_harness_run_fails(task_harness_t *h, const char *entry, const char *args_text,
                            uint64_t bound_ms, const char *code, const char *message_part);

/* The JSON text of a test (any value, not only objects) parsed: a new reference. Fails
 * the current cmocka test when the text is not JSON. */
json_t *task_harness_json(const char *text);

/* Calls the plugin's fini, closes the loop and asserts uv_loop_close() == 0. */
void task_harness_free(task_harness_t *h);

#endif /* TERN_TASK_HARNESS_H */
