/*
 * test_task_ctx.c -- engine/run/task_ctx.c with a task defined in this file (the "probe"),
 * whose behaviour each test picks with args {"mode": ...}: exactly one outcome per
 * attempt, late and double reports logged and ignored, delivery from the loop, state
 * overlay and key checks, progress coalescing, tracked timers, work, children and
 * Redis calls stopped on cancel, and the context freed only after its handles closed.
 * Log lines go to a memfd so the warnings can be asserted.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "loop_util.h"
#include "run/task_ctx.h"

#define BOUND_MS 10000

/* ---- what the probe task saw, shared with the tests ------------------------------------ */

static struct probe_seen {
    int cancel_calls;
    bool timer_fired;
    bool after_called;
    int late_rc;        /* what a host call returned after the outcome or in the cancel hook */
    uv_sem_t work_gate; /* the blocking work waits on this */
    bool work_ran;
} seen;

static int plugin_state_marker;

/* ---- the fake Redis ops ------------------------------------------------------------------- */

static struct fake_redis {
    int evals;
    int cancels;
    char keys[4][128];
    size_t nkeys;
    char script[64];
    task_redis_done_fn done;
    task_redis_call_t *call;
    void *handle_cancelled;
} redis;

static int redis_handle_marker;

static void *fake_eval(void *data, const char *script, size_t nkeys, const char *const *keys,
                       size_t nargs, const char *const *args, task_redis_done_fn done,
                       task_redis_call_t *call)
{
    (void)data;
    (void)nargs;
    (void)args;
    redis.evals++;
    snprintf(redis.script, sizeof redis.script, "%s", script);
    redis.nkeys = nkeys;
    for (size_t i = 0; i < nkeys && i < 4; i++)
        snprintf(redis.keys[i], sizeof redis.keys[i], "%s", keys[i]);
    redis.done = done;
    redis.call = call;
    return &redis_handle_marker;
}

static void fake_cancel(void *data, void *handle)
{
    (void)data;
    redis.cancels++;
    redis.handle_cancelled = handle;
}

static const task_redis_ops_t fake_ops = {.eval = fake_eval, .cancel = fake_cancel};

/* ---- the probe task -------------------------------------------------------------------- */

static void probe_done_int(tern_ctx *ctx, json_int_t v)
{
    tern_task_done(ctx, json_integer(v));
}

static void on_probe_timer_done(tern_ctx *ctx, void *data)
{
    (void)data;
    seen.timer_fired = true;
    probe_done_int(ctx, 7);
    tern_task_done(ctx, json_integer(8)); /* second report: ignored */
}

static void on_probe_timer_flag(tern_ctx *ctx, void *data)
{
    (void)ctx;
    (void)data;
    seen.timer_fired = true;
}

/* Progress script: reports at 0, 40, 80, 120 and 300 ms, done at 340 ms. */
static void on_progress_step(tern_ctx *ctx, void *data)
{
    int step = (int)(intptr_t)data;
    static const int at_ms[] = {0, 40, 80, 120, 300, 340};
    if (step == 5) {
        tern_task_done(ctx, json_string("finished"));
        return;
    }
    tern_progress(ctx, json_pack("{s:i}", "percent", at_ms[step]));
    tern_timer_start(ctx, (uint64_t)(at_ms[step + 1] - at_ms[step]), on_progress_step,
                     (void *)(intptr_t)(step + 1));
}

static void probe_work(void *data)
{
    (void)data;
    seen.work_ran = true;
}

static void probe_blocking_work(void *data)
{
    (void)data;
    uv_sem_wait(&seen.work_gate);
    seen.work_ran = true;
}

static void on_probe_after_work(tern_ctx *ctx, void *data, int status)
{
    (void)data;
    seen.after_called = true;
    tern_task_done(ctx, json_pack("{s:i}", "status", status));
}

static void on_probe_child(tern_ctx *ctx, const tern_spawn_res *res, void *data)
{
    (void)data;
    tern_task_done(ctx, json_pack("{s:I, s:s?, s:s}", "exit_status", (json_int_t)res->exit_status,
                                  "error", res->error, "stdout", res->stdout_tail));
}

static void on_probe_redis(tern_ctx *ctx, const json_t *reply, const char *error, void *data)
{
    (void)data;
    tern_task_done(ctx, json_pack("{s:O?, s:s?}", "reply", reply, "error", error));
}

static void on_probe_http(tern_ctx *ctx, const tern_http_res *res, void *data)
{
    (void)ctx;
    (void)res;
    (void)data;
}

static void probe_start(tern_ctx *ctx, const json_t *args)
{
    const char *mode = json_string_value(json_object_get(args, "mode"));
    if (strcmp(mode, "done_twice") == 0) {
        probe_done_int(ctx, 1);
        tern_task_done(ctx, json_integer(2));
        tern_task_fail(ctx, "Late", "after the outcome");
        seen.late_rc = tern_timer_start(ctx, 10, on_probe_timer_flag, NULL);
    } else if (strcmp(mode, "timer_done") == 0) {
        tern_timer_start(ctx, 20, on_probe_timer_done, NULL);
    } else if (strcmp(mode, "long_timer") == 0) {
        tern_timer_start(ctx, 60000, on_probe_timer_flag, NULL);
    } else if (strcmp(mode, "fail") == 0) {
        tern_task_fail(ctx, "Boom", "value %d and %s", 42, "text");
    } else if (strcmp(mode, "wait") == 0) {
        tern_task_wait(ctx, json_pack("{s:s}", "why", "approval"));
    } else if (strcmp(mode, "requeue") == 0) {
        tern_task_requeue(ctx, 5000, NULL);
    } else if (strcmp(mode, "info") == 0) {
        tern_task_done(ctx, json_pack("{s:s, s:s?, s:O, s:s, s:i, s:s, s:b, s:b}", "job",
                                      tern_job_uuid(ctx), "target", tern_job_target(ctx), "params",
                                      tern_job_params(ctx), "step", tern_step_name(ctx), "attempt",
                                      (int)tern_step_attempt(ctx), "key", tern_idempotency_key(ctx),
                                      "state_ok", tern_plugin_state(ctx) == &plugin_state_marker,
                                      "loop_ok", tern_loop(ctx) != NULL));
    } else if (strcmp(mode, "state") == 0) {
        json_t *r = json_object();
        json_object_set_new(r, "set_b", json_integer(tern_state_set(ctx, "b", json_integer(2))));
        json_object_set_new(r, "set_a", json_integer(tern_state_set(ctx, "a", json_integer(3))));
        json_object_set(r, "a", (json_t *)tern_state_get(ctx, "a"));
        json_object_set(r, "b", (json_t *)tern_state_get(ctx, "b"));
        json_object_set(r, "base", (json_t *)tern_state_get(ctx, "base"));
        json_object_set_new(r, "missing", json_boolean(tern_state_get(ctx, "missing") == NULL));
        tern_task_done(ctx, r);
    } else if (strcmp(mode, "bad_keys") == 0) {
        char long_ok[129], too_long[130];
        memset(long_ok, 'k', 128);
        long_ok[128] = '\0';
        memset(too_long, 'k', 129);
        too_long[129] = '\0';
        tern_task_done(ctx, json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i}", "space",
                                      tern_state_set(ctx, "has space", json_true()), "empty",
                                      tern_state_set(ctx, "", json_true()), "slash",
                                      tern_state_set(ctx, "a/b", json_true()), "too_long",
                                      tern_state_set(ctx, too_long, json_true()), "long_ok",
                                      tern_state_set(ctx, long_ok, json_true()), "dots",
                                      tern_state_set(ctx, "vm.disk-0_size", json_true()),
                                      "null_value", tern_state_set(ctx, "x", NULL)));
    } else if (strcmp(mode, "progress") == 0) {
        on_progress_step(ctx, (void *)(intptr_t)0);
    } else if (strcmp(mode, "progress_sync") == 0) {
        for (int i = 1; i <= 5; i++)
            tern_progress(ctx, json_pack("{s:i}", "percent", i * 10));
        tern_progress(ctx, json_string("not an object")); /* refused */
        tern_task_done(ctx, NULL);
    } else if (strcmp(mode, "timer_stop") == 0) {
        int a = tern_timer_start(ctx, 10, on_probe_timer_flag, NULL);
        int stop = tern_timer_stop(ctx, a);
        int again = tern_timer_stop(ctx, a);
        int unknown = tern_timer_stop(ctx, 9999);
        tern_timer_start(ctx, 40, on_probe_timer_done, NULL);
        seen.late_rc = stop * 1000000 + (-again) * 1000 + (-unknown);
    } else if (strcmp(mode, "work") == 0) {
        tern_work(ctx, probe_work, on_probe_after_work, NULL);
    } else if (strcmp(mode, "blocking_work") == 0) {
        tern_work(ctx, probe_blocking_work, on_probe_after_work, NULL);
    } else if (strcmp(mode, "spawn") == 0) {
        const char *argv[] = {json_string_value(json_object_get(args, "program")), "hello", NULL};
        int rc = tern_spawn(ctx, &(tern_spawn_opts){.size = sizeof(tern_spawn_opts), .argv = argv},
                            on_probe_child, NULL);
        if (rc != 0)
            tern_task_fail(ctx, "SpawnRefused", "%d", rc);
    } else if (strcmp(mode, "redis") == 0) {
        const char *keys[] = {"inventory", "vm:1"};
        const char *argv[] = {"x"};
        int rc = tern_redis_eval(ctx, "return 1", 2, keys, 1, argv, on_probe_redis, NULL);
        if (rc != 0)
            tern_task_fail(ctx, "RedisRefused", "%d", rc);
    } else if (strcmp(mode, "http") == 0) {
        int rc = tern_http_request(
            ctx, &(tern_http_req){.size = sizeof(tern_http_req), .url = "http://127.0.0.1:1/"},
            NULL, NULL);
        int rc2 = tern_http_request(
            ctx, &(tern_http_req){.size = sizeof(tern_http_req), .url = "http://127.0.0.1:1/"},
            on_probe_http, NULL);
        tern_task_done(ctx, json_pack("{s:i, s:i}", "no_cb", rc, "no_client", rc2));
    } else if (strcmp(mode, "log") == 0) {
        tern_log(ctx, TERN_LOG_INFO, "hello %s", "operator");
        tern_task_done(ctx, NULL);
    }
}

static void probe_cancel(tern_ctx *ctx)
{
    seen.cancel_calls++;
    tern_task_done(ctx, json_string("from the cancel hook")); /* ignored */
    seen.late_rc = tern_timer_start(ctx, 10, on_probe_timer_flag, NULL);
}

static const tern_task_def probe_def = {
    .size = sizeof(tern_task_def),
    .name = "probe",
    .summary = "test task",
    .start = probe_start,
    .cancel = probe_cancel,
};

/* ---- the recording sink ------------------------------------------------------------------ */

typedef struct rec {
    int outcomes;
    task_outcome_t outcome;
    json_t *progress; /* array of {"p": report, "at_ms": ms since start} */
    int progress_after_outcome;
    bool closed;
    uint64_t t0;
} rec_t;

static void on_outcome(void *owner, task_outcome_t *o)
{
    rec_t *r = owner;
    r->outcomes++;
    if (r->outcomes == 1)
        r->outcome = *o;
    else
        task_outcome_dispose(o);
}

static void on_progress(void *owner, json_t *p)
{
    rec_t *r = owner;
    if (r->outcomes > 0)
        r->progress_after_outcome++;
    json_array_append_new(r->progress, json_pack("{s:o, s:I}", "p", p, "at_ms",
                                                 (json_int_t)(clock_mono_ms() - r->t0)));
}

static void on_closed(void *owner)
{
    ((rec_t *)owner)->closed = true;
}

/* ---- fixture --------------------------------------------------------------------------- */

typedef struct fixture {
    uv_loop_t loop;
    int log_fd;
    rec_t rec;
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = xcalloc(1, sizeof *f);
    if (uv_loop_init(&f->loop) != 0)
        return -1;
    f->log_fd = memfd_create("task_ctx_log", 0);
    if (f->log_fd < 0)
        return -1;
    log_init("test_task_ctx", TERN_LOG_TRACE, f->log_fd);
    memset(&seen, 0, sizeof seen);
    memset(&redis, 0, sizeof redis);
    f->rec.progress = json_array();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    int rc = loop_close_bounded(&f->loop, BOUND_MS);
    log_init("test_task_ctx", TERN_LOG_INFO, 2);
    close(f->log_fd);
    task_outcome_dispose(&f->rec.outcome);
    json_decref(f->rec.progress);
    free(f);
    assert_int_equal(rc, 0);
    return 0;
}

/* Everything logged so far (malloc'd). */
static char *log_text(fixture_t *f)
{
    off_t n = lseek(f->log_fd, 0, SEEK_END);
    char *buf = xmalloc((size_t)n + 1);
    ssize_t got = pread(f->log_fd, buf, (size_t)n, 0);
    buf[got > 0 ? got : 0] = '\0';
    return buf;
}

static tern_ctx *start_probe(fixture_t *f, const char *mode, const json_t *state,
                             const task_redis_ops_t *ops)
{
    json_t *args = json_pack("{s:s, s:s}", "mode", mode, "program", "echo");
    json_t *params = json_pack("{s:s}", "vm", "v1");
    task_ctx_opts_t opts = {
        .loop = &f->loop,
        .def = &probe_def,
        .plugin_name = "test",
        .plugin_state = &plugin_state_marker,
        .task_name = "test.probe",
        .job_uuid = "4f1c0000-0000-4000-8000-000000000001",
        .job_target = "vm-v1",
        .params = params,
        .state = state,
        .step_name = "step1",
        .attempt = 3,
        .idempotency_key = "4f1c0000-0000-4000-8000-000000000001/chain/0",
        .redis = ops,
        .sink = {.on_outcome = on_outcome,
                 .on_progress = on_progress,
                 .on_closed = on_closed,
                 .owner = &f->rec},
    };
    f->rec.t0 = clock_mono_ms();
    tern_ctx *ctx = task_ctx_start(&opts, args);
    json_decref(args);
    json_decref(params); /* the context keeps its own reference */
    return ctx;
}

static bool rec_closed(void *data)
{
    return ((rec_t *)data)->closed;
}

static void run_to_close(fixture_t *f)
{
    assert_int_equal(loop_run_until(&f->loop, rec_closed, &f->rec, BOUND_MS), 0);
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_sync_report_is_deferred(void **state)
{
    fixture_t *f = *state;
    start_probe(f, "fail", NULL, NULL);
    /* Reported inside start(), but the owner hears of it only from the loop. */
    assert_int_equal(f->rec.outcomes, 0);
    run_to_close(f);
    assert_int_equal(f->rec.outcomes, 1);
    assert_int_equal(f->rec.outcome.kind, TASK_FAILED);
    assert_string_equal(f->rec.outcome.code, "Boom");
    assert_string_equal(f->rec.outcome.message, "value 42 and text");
    assert_null(f->rec.outcome.state_changes);
    assert_int_equal(uv_loop_alive(&f->loop), 0);
}

static void test_double_report_ignored(void **state)
{
    fixture_t *f = *state;
    start_probe(f, "done_twice", NULL, NULL);
    run_to_close(f);
    assert_int_equal(f->rec.outcomes, 1);
    assert_int_equal(f->rec.outcome.kind, TASK_DONE);
    assert_int_equal(json_integer_value(f->rec.outcome.result), 1);
    assert_int_equal(seen.late_rc, -ECANCELED); /* no service after the outcome */
    assert_false(seen.timer_fired);
    char *log = log_text(f);
    assert_non_null(strstr(log, "task test.probe reported done after its outcome; ignored"));
    assert_non_null(
        strstr(log, "task test.probe reported failure \\\"Late\\\" after its outcome; ignored"));
    assert_non_null(strstr(log, "\"level\":40"));
    assert_non_null(strstr(log, "\"job\":\"4f1c0000-0000-4000-8000-000000000001\""));
    free(log);
}

static void test_double_report_from_timer(void **state)
{
    fixture_t *f = *state;
    start_probe(f, "timer_done", NULL, NULL);
    run_to_close(f);
    assert_true(seen.timer_fired);
    assert_int_equal(f->rec.outcomes, 1);
    assert_int_equal(json_integer_value(f->rec.outcome.result), 7);
}

static void test_cancel_stops_timers_and_ignores_reports(void **state)
{
    fixture_t *f = *state;
    tern_ctx *ctx = start_probe(f, "long_timer", NULL, NULL);
    task_ctx_cancel(ctx);
    assert_int_equal(seen.cancel_calls, 1);
    assert_int_equal(seen.late_rc, -ECANCELED);
    run_to_close(f);
    assert_int_equal(f->rec.outcomes, 0);
    assert_false(seen.timer_fired);
    /* Nothing is left on the loop: the 60 s timer was closed with the context. */
    assert_int_equal(uv_loop_alive(&f->loop), 0);
    char *log = log_text(f);
    assert_non_null(
        strstr(log, "task test.probe reported done after the attempt was cancelled; ignored"));
    free(log);
}

static void test_cancel_discards_pending_outcome(void **state)
{
    fixture_t *f = *state;
    tern_ctx *ctx = start_probe(f, "wait", NULL, NULL);
    /* Reported, not yet delivered: cancel wins and the hook is not called. */
    task_ctx_cancel(ctx);
    run_to_close(f);
    assert_int_equal(f->rec.outcomes, 0);
    assert_int_equal(seen.cancel_calls, 0);
}

static void test_wait_requeue_and_info(void **state)
{
    fixture_t *f = *state;
    start_probe(f, "wait", NULL, NULL);
    run_to_close(f);
    assert_int_equal(f->rec.outcome.kind, TASK_WAIT);
    assert_string_equal(json_string_value(json_object_get(f->rec.outcome.info, "why")), "approval");
    task_outcome_dispose(&f->rec.outcome);

    f->rec = (rec_t){.progress = f->rec.progress};
    start_probe(f, "requeue", NULL, NULL);
    run_to_close(f);
    assert_int_equal(f->rec.outcome.kind, TASK_REQUEUE);
    assert_int_equal(f->rec.outcome.delay_ms, 5000);
    assert_null(f->rec.outcome.info);
    task_outcome_dispose(&f->rec.outcome);

    f->rec = (rec_t){.progress = f->rec.progress};
    start_probe(f, "info", NULL, NULL);
    run_to_close(f);
    json_t *r = f->rec.outcome.result;
    assert_string_equal(json_string_value(json_object_get(r, "job")),
                        "4f1c0000-0000-4000-8000-000000000001");
    assert_string_equal(json_string_value(json_object_get(r, "target")), "vm-v1");
    assert_string_equal(json_string_value(json_object_get(json_object_get(r, "params"), "vm")),
                        "v1");
    assert_string_equal(json_string_value(json_object_get(r, "step")), "step1");
    assert_int_equal(json_integer_value(json_object_get(r, "attempt")), 3);
    assert_string_equal(json_string_value(json_object_get(r, "key")),
                        "4f1c0000-0000-4000-8000-000000000001/chain/0");
    assert_true(json_is_true(json_object_get(r, "state_ok")));
    assert_true(json_is_true(json_object_get(r, "loop_ok")));
}

static void test_state_overlay_and_changes(void **state)
{
    fixture_t *f = *state;
    json_t *job_state = json_pack("{s:i, s:s}", "a", 1, "base", "kept");
    start_probe(f, "state", job_state, NULL);
    json_decref(job_state);
    run_to_close(f);
    json_t *r = f->rec.outcome.result;
    assert_int_equal(json_integer_value(json_object_get(r, "set_a")), 0);
    assert_int_equal(json_integer_value(json_object_get(r, "set_b")), 0);
    assert_int_equal(json_integer_value(json_object_get(r, "a")), 3); /* own set wins */
    assert_int_equal(json_integer_value(json_object_get(r, "b")), 2);
    assert_string_equal(json_string_value(json_object_get(r, "base")), "kept");
    assert_true(json_is_true(json_object_get(r, "missing")));
    json_t *want = json_pack("{s:i, s:i}", "b", 2, "a", 3);
    assert_true(json_equal(f->rec.outcome.state_changes, want));
    json_decref(want);
}

static void test_bad_state_keys_refused(void **state)
{
    fixture_t *f = *state;
    start_probe(f, "bad_keys", NULL, NULL);
    run_to_close(f);
    json_t *r = f->rec.outcome.result;
    assert_int_equal(json_integer_value(json_object_get(r, "space")), -1);
    assert_int_equal(json_integer_value(json_object_get(r, "empty")), -1);
    assert_int_equal(json_integer_value(json_object_get(r, "slash")), -1);
    assert_int_equal(json_integer_value(json_object_get(r, "too_long")), -1);
    assert_int_equal(json_integer_value(json_object_get(r, "null_value")), -1);
    assert_int_equal(json_integer_value(json_object_get(r, "long_ok")), 0);
    assert_int_equal(json_integer_value(json_object_get(r, "dots")), 0);
    assert_int_equal(json_object_size(f->rec.outcome.state_changes), 2);
    assert_non_null(json_object_get(f->rec.outcome.state_changes, "vm.disk-0_size"));
    char *log = log_text(f);
    assert_non_null(strstr(log, "state key \\\"has space\\\" refused"));
    free(log);
}

static void test_progress_coalesced(void **state)
{
    fixture_t *f = *state;
    start_probe(f, "progress", NULL, NULL);
    run_to_close(f);
    assert_int_equal(f->rec.outcomes, 1);
    assert_string_equal(json_string_value(f->rec.outcome.result), "finished");
    /* Reports at 0, 40, 80, 120, 300 ms: delivered at once (0), then 120 when the 200 ms
     * interval is over (40 and 80 replaced), then 300 flushed before the outcome at 340
     * although its interval has not passed. */
    json_t *p = f->rec.progress;
    assert_int_equal(json_array_size(p), 3);
    int want[] = {0, 120, 300};
    for (size_t i = 0; i < 3; i++) {
        json_t *e = json_array_get(p, i);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(e, "p"), "percent")),
                         want[i]);
    }
    json_int_t t0 = json_integer_value(json_object_get(json_array_get(p, 0), "at_ms"));
    json_int_t t1 = json_integer_value(json_object_get(json_array_get(p, 1), "at_ms"));
    assert_true(t1 - t0 >= 190);
    assert_int_equal(f->rec.progress_after_outcome, 0);
}

static void test_progress_sync_then_outcome(void **state)
{
    fixture_t *f = *state;
    start_probe(f, "progress_sync", NULL, NULL);
    assert_int_equal(json_array_size(f->rec.progress), 0);
    run_to_close(f);
    /* Five reports inside start(): only the last is delivered, and before the outcome. */
    assert_int_equal(json_array_size(f->rec.progress), 1);
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(json_array_get(f->rec.progress, 0), "p"), "percent")),
                     50);
    assert_int_equal(f->rec.progress_after_outcome, 0);
    assert_true(json_is_null(f->rec.outcome.result));
}

static void test_timer_stop(void **state)
{
    fixture_t *f = *state;
    start_probe(f, "timer_stop", NULL, NULL);
    run_to_close(f);
    assert_int_equal(seen.late_rc, 0 * 1000000 + ENOENT * 1000 + ENOENT);
    assert_int_equal(json_integer_value(f->rec.outcome.result), 7);
}

static void test_work_runs_then_after(void **state)
{
    fixture_t *f = *state;
    start_probe(f, "work", NULL, NULL);
    run_to_close(f);
    assert_true(seen.work_ran);
    assert_true(seen.after_called);
    assert_int_equal(json_integer_value(json_object_get(f->rec.outcome.result, "status")), 0);
}

static void test_cancel_skips_after_work(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(uv_sem_init(&seen.work_gate, 0), 0);
    tern_ctx *ctx = start_probe(f, "blocking_work", NULL, NULL);
    task_ctx_cancel(ctx);
    /* The work may be running already; the context waits for it before it goes. */
    uv_sem_post(&seen.work_gate);
    run_to_close(f);
    assert_false(seen.after_called);
    assert_int_equal(f->rec.outcomes, 0);
    uv_sem_destroy(&seen.work_gate);
}

static void test_spawn(void **state)
{
    fixture_t *f = *state;
    start_probe(f, "spawn", NULL, NULL);
    run_to_close(f);
    assert_int_equal(f->rec.outcome.kind, TASK_DONE);
    json_t *r = f->rec.outcome.result;
    assert_int_equal(json_integer_value(json_object_get(r, "exit_status")), 0);
    assert_string_equal(json_string_value(json_object_get(r, "stdout")), "hello\n");
}

static void test_spawn_failure_reaches_callback(void **state)
{
    fixture_t *f = *state;
    json_t *args = json_pack("{s:s, s:s}", "mode", "spawn", "program", "/nonexistent/tern-prog");
    task_ctx_opts_t opts = {
        .loop = &f->loop,
        .def = &probe_def,
        .plugin_name = "test",
        .task_name = "test.probe",
        .job_uuid = "j",
        .step_name = "s",
        .attempt = 1,
        .sink = {.on_outcome = on_outcome, .on_closed = on_closed, .owner = &f->rec},
    };
    task_ctx_start(&opts, args);
    json_decref(args);
    assert_int_equal(f->rec.outcomes, 0);
    run_to_close(f);
    json_t *r = f->rec.outcome.result;
    assert_int_equal(json_integer_value(json_object_get(r, "exit_status")), -1);
    assert_non_null(
        strstr(json_string_value(json_object_get(r, "error")), "/nonexistent/tern-prog"));
}

static void test_redis_namespaced_and_cancelled(void **state)
{
    fixture_t *f = *state;
    /* No ops: refused at once. */
    start_probe(f, "redis", NULL, NULL);
    run_to_close(f);
    assert_string_equal(f->rec.outcome.code, "RedisRefused");
    char want[16];
    snprintf(want, sizeof want, "%d", -ENOTCONN);
    assert_string_equal(f->rec.outcome.message, want);
    task_outcome_dispose(&f->rec.outcome);

    /* Keys go into the plugin's namespace; the reply reaches the task. */
    f->rec = (rec_t){.progress = f->rec.progress};
    start_probe(f, "redis", NULL, &fake_ops);
    assert_int_equal(redis.evals, 1);
    assert_int_equal(redis.nkeys, 2);
    assert_string_equal(redis.keys[0], "tern:p:test:inventory");
    assert_string_equal(redis.keys[1], "tern:p:test:vm:1");
    assert_string_equal(redis.script, "return 1");
    json_t *reply = json_integer(42);
    redis.done(redis.call, reply, NULL);
    json_decref(reply);
    run_to_close(f);
    assert_int_equal(json_integer_value(json_object_get(f->rec.outcome.result, "reply")), 42);
    assert_int_equal(redis.cancels, 0);
    task_outcome_dispose(&f->rec.outcome);

    /* Cancel while the call is pending: the ops are told, the task hears nothing. */
    f->rec = (rec_t){.progress = f->rec.progress};
    tern_ctx *ctx = start_probe(f, "redis", NULL, &fake_ops);
    task_ctx_cancel(ctx);
    assert_int_equal(redis.cancels, 1);
    assert_ptr_equal(redis.handle_cancelled, &redis_handle_marker);
    run_to_close(f);
    assert_int_equal(f->rec.outcomes, 0);
}

static void test_http_refusals(void **state)
{
    fixture_t *f = *state;
    start_probe(f, "http", NULL, NULL);
    run_to_close(f);
    json_t *r = f->rec.outcome.result;
    assert_int_equal(json_integer_value(json_object_get(r, "no_cb")), -EINVAL);
    assert_int_equal(json_integer_value(json_object_get(r, "no_client")), -ENOTSUP);
}

static void test_log_fields(void **state)
{
    fixture_t *f = *state;
    start_probe(f, "log", NULL, NULL);
    run_to_close(f);
    char *log = log_text(f);
    const char *line = strstr(log, "hello operator");
    assert_non_null(line);
    assert_non_null(strstr(log, "\"component\":\"task\""));
    assert_non_null(strstr(log, "\"step\":\"step1\""));
    assert_non_null(strstr(log, "\"attempt\":3"));
    assert_non_null(strstr(log, "\"task\":\"test.probe\""));
    assert_non_null(strstr(log, "\"level\":30"));
    free(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sync_report_is_deferred, setup, teardown),
        cmocka_unit_test_setup_teardown(test_double_report_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_double_report_from_timer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_stops_timers_and_ignores_reports, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cancel_discards_pending_outcome, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_requeue_and_info, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_overlay_and_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_state_keys_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_progress_coalesced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_progress_sync_then_outcome, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timer_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_work_runs_then_after, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_skips_after_work, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spawn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spawn_failure_reaches_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_redis_namespaced_and_cancelled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_fields, setup, teardown),
    };
    int failures = cmocka_run_group_tests_name("task_ctx", tests, NULL, NULL);
    return failures == 0 ? 0 : 1;
}
