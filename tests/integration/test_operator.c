/*
 * test_operator.c -- what operators and the API do to jobs, on a real ternd and
 * redis-server: uniqueness and locks at creation, cancel of queued and running jobs,
 * waiting and resume, re-queue after a delay, retry from failure (redrive), workflow
 * and task timeouts, and the history every operator action leaves on the job.
 */
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"
#include "events/events.h"
#include "world.h"

static itest_world_t W;

static int group_setup(void **state)
{
    (void)state;
    itest_world_start(&W, "r1", NULL, NULL);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    itest_world_stop(&W, 10000);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------- */

static void put(const char *json)
{
    itest_workflow_put_ok(&W.client, json);
}

/* Creates a job that must be accepted. */
static void create_ok(const char *workflow, const char *params, const char *target,
                      uint64_t exec_after_ms, const char *locks, char uuid[40])
{
    char msg[1024];
    int rc = itest_job_create(&W.client, workflow, params, target, exec_after_ms, locks, uuid, msg,
                              sizeof msg);
    if (rc != 0)
        fail_msg("job create (%s, target %s) refused (%d): %s", workflow, target ? target : "-", rc,
                 msg);
}

static json_t *must_finish(const char *uuid, unsigned ms)
{
    json_t *job = itest_wait_finished(&W.client, uuid, ms);
    if (job == NULL)
        fail_msg("job %s did not finish within %u ms", uuid, ms);
    return job;
}

/* Waits (at most `ms`) until the side channel holds at least `n` lines of `what` for
 * the step `key`. The side channel is a file the task writes, so this polls it; the
 * bound makes a step that never starts fail the test instead of hanging it. */
static void wait_side(const char *what, const char *key, int n, unsigned ms)
{
    itest_side_wait(W.side, what, key, n, ms);
}

/* The side channel key of step `idx` of `phase` of a job. */
static const char *step_key(const char *uuid, int phase, int idx)
{
    static char key[3][64];
    static int next;
    char *k = key[next++ % 3];
    snprintf(k, 64, "%s/%d/%d", uuid, phase, idx);
    return k;
}

/* Follows the job's events from its start until the `n`th event of `type` (and
 * `status` when not NULL): a redriven job's stream still holds its first "finished",
 * so waiting for the end of the second run means waiting for the second one. */
static bool wait_nth_event(const char *uuid, const char *type, const char *status, int n,
                           unsigned ms)
{
    json_t *ev = itest_wait_event_nth(&W.client, uuid, type, status, -1, n, ms);
    json_decref(ev);
    return ev != NULL;
}

/* The job after its `n`th "finished" event. */
static json_t *must_finish_nth(const char *uuid, int n, unsigned ms)
{
    if (!wait_nth_event(uuid, "finished", NULL, n, ms))
        fail_msg("job %s did not finish a %d. time within %u ms", uuid, n, ms);
    return itest_job_get(&W.client, uuid);
}

/* The value at a dotted path of object keys and array indexes, e.g.
 * "chain_results.1.result.msg" (borrowed), or NULL. */
static const json_t *at(const json_t *v, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const json_t *cur = v;
    for (char *save = NULL, *p = strtok_r(buf, ".", &save); p != NULL && cur != NULL;
         p = strtok_r(NULL, ".", &save))
        cur = json_is_array(cur) ? json_array_get(cur, (size_t)atoi(p)) : json_object_get(cur, p);
    return cur;
}

static const char *str_at(const json_t *v, const char *path)
{
    return json_string_value(at(v, path));
}

/* Checks one history entry: its action, a time and the caller the harness gives. */
static void assert_history_entry(const json_t *job, size_t i, const char *action)
{
    const json_t *h = json_array_get(json_object_get(job, "history"), i);
    if (h == NULL)
        fail_msg("history has no entry %zu (expected %s)", i, action);
    assert_string_equal(str_at(h, "action"), action);
    assert_string_equal(str_at(h, "caller"), "itest");
    const char *time = str_at(h, "time");
    assert_non_null(time);
    /* ISO 8601 UTC with milliseconds, as every time of the job view. */
    assert_int_equal(strlen(time), 24);
    assert_int_equal(time[23], 'Z');
}

/* ---- uniqueness and locks ------------------------------------------------------ */

static void test_unique_target_and_params(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"op-uniq\", \"chain\": [{\"name\": \"w\", \"task\": \"itest.wait\", "
                  "\"args\": {\"file\": \"%s\"}}]}",
                  W.side));
    char first[40], other[40], elsewhere[40], again[40], dup[40];
    char msg[1024];
    create_ok("op-uniq", "{\"disk\": \"d0\", \"size\": 10}", "vm-u1", 0, NULL, first);

    /* The same params, written in another key order, are the same params. */
    int rc = itest_job_create(&W.client, "op-uniq", "{\"size\": 10, \"disk\": \"d0\"}", "vm-u1", 0,
                              NULL, dup, msg, sizeof msg);
    assert_int_equal(rc, TERN_EEXIST);
    if (strstr(msg, first) == NULL)
        fail_msg("the refusal does not name the unfinished job %s: %s", first, msg);

    create_ok("op-uniq", "{\"disk\": \"d0\", \"size\": 20}", "vm-u1", 0, NULL, other);
    create_ok("op-uniq", "{\"disk\": \"d0\", \"size\": 10}", "vm-u2", 0, NULL, elsewhere);

    /* The first job finishes (it is resumed and succeeds): its claim is released. */
    json_t *ev = itest_wait_event(&W.client, first, "waiting", NULL, 10000);
    if (ev == NULL)
        fail_msg("job %s did not reach waiting", first);
    json_decref(ev);
    rc = itest_job_resume(&W.client, first, "{}", NULL, msg, sizeof msg);
    assert_int_equal(rc, 0);
    json_t *job = must_finish(first, 10000);
    assert_string_equal(itest_execution(job), "succeeded");
    json_decref(job);
    create_ok("op-uniq", "{\"disk\": \"d0\", \"size\": 10}", "vm-u1", 0, NULL, again);

    const char *left[] = {other, elsewhere, again};
    for (size_t i = 0; i < 3; i++) {
        rc = itest_job_cancel(&W.client, left[i], msg, sizeof msg);
        if (rc != 0)
            fail_msg("cancel %s: %s", left[i], msg);
        json_decref(must_finish(left[i], 10000));
    }
}

static void test_locks(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"op-lockholder\", \"chain\": [{\"name\": \"hold\", \"task\": "
                  "\"itest.record\", \"args\": {\"file\": \"%s\", \"ms\": 10000}}]}",
                  W.side));
    put("{\"name\": \"op-quick\", \"chain\": [{\"name\": \"n\", \"task\": \"core.noop\"}]}");
    char locker[40], uuid[40], msg[1024];
    create_ok("op-lockholder", NULL, "rack-1", 0, "^vm-1[0-9]$", locker);
    wait_side("start", step_key(locker, 0, 0), 1, 10000);

    int rc = itest_job_create(&W.client, "op-quick", NULL, "vm-12", 0, NULL, uuid, msg, sizeof msg);
    assert_int_equal(rc, TERN_EEXIST);
    if (strstr(msg, locker) == NULL || strstr(msg, "^vm-1[0-9]$") == NULL)
        fail_msg("the refusal does not name the lock of job %s: %s", locker, msg);

    create_ok("op-quick", NULL, "vm-2", 0, NULL, uuid);
    json_t *job = must_finish(uuid, 10000);
    assert_string_equal(itest_execution(job), "succeeded");
    json_decref(job);

    rc =
        itest_job_create(&W.client, "op-quick", NULL, "vm-30", 0, "vm-[0-9", uuid, msg, sizeof msg);
    assert_int_equal(rc, TERN_EINVAL);

    /* The locking job ends: its lock goes with it. */
    rc = itest_job_cancel(&W.client, locker, msg, sizeof msg);
    assert_int_equal(rc, 0);
    job = must_finish(locker, 10000);
    assert_string_equal(itest_execution(job), "canceled");
    json_decref(job);
    create_ok("op-quick", NULL, "vm-12", 0, NULL, uuid);
    job = must_finish(uuid, 10000);
    assert_string_equal(itest_execution(job), "succeeded");
    json_decref(job);
}

/* ---- cancel -------------------------------------------------------------------- */

static void test_cancel_queued(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"op-later\", \"chain\": [{\"name\": \"s\", \"task\": "
                  "\"itest.record\", \"args\": {\"file\": \"%s\", \"ms\": 1}}]}",
                  W.side));
    char uuid[40], msg[1024];
    create_ok("op-later", NULL, NULL, clock_wall_ms() + 60000, NULL, uuid);
    json_t *job = itest_job_get(&W.client, uuid);
    assert_string_equal(itest_execution(job), "queued");
    assert_non_null(str_at(job, "exec_after"));
    json_decref(job);

    int rc = itest_job_cancel(&W.client, uuid, msg, sizeof msg);
    assert_int_equal(rc, 0);
    /* Canceled at once: no runner is involved in removing a job that never started. */
    job = itest_job_get(&W.client, uuid);
    assert_string_equal(itest_execution(job), "canceled");
    assert_true(json_is_null(at(job, "started")));
    assert_int_equal(json_array_size(json_object_get(job, "chain_results")), 0);
    assert_int_equal(json_array_size(json_object_get(job, "history")), 1);
    assert_history_entry(job, 0, "cancel");
    json_decref(job);
    /* Nothing is left to start it later. */
    assert_int_equal(itest_redis_int(&W.redis, "ZSCORE tern:delayed %s", uuid), -1);
    assert_int_equal(itest_redis_int(&W.redis, "LPOS tern:q:default %s", uuid), -1);
    assert_int_equal(itest_side_count(W.side, "start", uuid), 0);
    /* A second cancel of the finished job is refused. */
    rc = itest_job_cancel(&W.client, uuid, msg, sizeof msg);
    assert_int_equal(rc, TERN_EBUSY);
}

static void test_cancel_running(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"op-cancel-run\", \"chain\": [{\"name\": \"long\", \"task\": "
                  "\"itest.record\", \"args\": {\"file\": \"%s\", \"ms\": 10000}}], "
                  "\"oncancel\": [{\"name\": \"cleanup\", \"task\": \"core.log\", \"args\": "
                  "{\"msg\": \"cleaning up after ${error.code}\"}}]}",
                  W.side));
    char uuid[40], msg[1024];
    create_ok("op-cancel-run", NULL, NULL, 0, NULL, uuid);
    wait_side("start", step_key(uuid, 0, 0), 1, 10000);

    uint64_t t0 = clock_mono_ms();
    int rc = itest_job_cancel(&W.client, uuid, msg, sizeof msg);
    assert_int_equal(rc, 0);
    json_t *job = must_finish(uuid, 8000);
    uint64_t took = clock_mono_ms() - t0;
    print_message("cancel of a running job took %llu ms\n", (unsigned long long)took);
    assert_true(took < 3000);
    assert_string_equal(itest_execution(job), "canceled");
    /* The task was told (its cancel hook ran), its step records the cancel, and the
     * oncancel chain ran with the Canceled error in scope. */
    assert_int_equal(itest_side_count(W.side, "cancel", step_key(uuid, 0, 0)), 1);
    assert_int_equal(itest_side_count(W.side, "start", step_key(uuid, 0, 0)), 1);
    assert_int_equal(json_array_size(json_object_get(job, "chain_results")), 1);
    assert_string_equal(str_at(job, "chain_results.0.error.code"), "Canceled");
    assert_int_equal(json_array_size(json_object_get(job, "oncancel_results")), 1);
    assert_string_equal(str_at(job, "oncancel_results.0.result.msg"), "cleaning up after Canceled");
    assert_history_entry(job, 0, "cancel");
    json_decref(job);
}

/* ---- waiting and resume -------------------------------------------------------- */

static void test_wait_and_resume(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"op-wait\", \"chain\": ["
                  "{\"name\": \"ask\", \"task\": \"itest.wait\", \"args\": {\"file\": \"%s\"}},"
                  "{\"name\": \"say\", \"task\": \"core.log\", \"args\": "
                  "{\"msg\": \"the answer is ${steps.ask.result.answer}\"}}],"
                  "\"onerror\": [{\"name\": \"report\", \"task\": \"core.log\", \"args\": "
                  "{\"msg\": \"failed: ${error.code}\"}}]}",
                  W.side));
    char uuid[40], msg[1024];
    create_ok("op-wait", NULL, NULL, 0, NULL, uuid);
    json_t *ev = itest_wait_event(&W.client, uuid, "waiting", NULL, 10000);
    if (ev == NULL)
        fail_msg("job %s did not reach waiting", uuid);
    json_decref(ev);
    json_t *job = itest_job_get(&W.client, uuid);
    assert_string_equal(itest_execution(job), "waiting");
    assert_null(str_at(job, "runner_id"));
    assert_string_equal(str_at(job, "wait_info.waiting_for"), "an operator");
    json_decref(job);

    int rc = itest_job_resume(&W.client, uuid, "{\"answer\": 42}", NULL, msg, sizeof msg);
    assert_int_equal(rc, 0);
    /* It is queued or running now, not waiting: a second resume is refused. */
    rc = itest_job_resume(&W.client, uuid, "{\"answer\": 43}", NULL, msg, sizeof msg);
    assert_int_equal(rc, TERN_EBUSY);
    job = must_finish(uuid, 10000);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_int_equal(json_integer_value(at(job, "chain_results.0.result.answer")), 42);
    assert_string_equal(str_at(job, "chain_results.1.result.msg"), "the answer is 42");
    assert_int_equal(itest_side_count(W.side, "start", step_key(uuid, 0, 0)), 1);
    json_decref(job);
    rc = itest_job_resume(&W.client, uuid, "{\"answer\": 44}", NULL, msg, sizeof msg);
    assert_int_equal(rc, TERN_EBUSY);

    /* A resume with an error is the waiting step's failure. */
    create_ok("op-wait", NULL, NULL, 0, NULL, uuid);
    ev = itest_wait_event(&W.client, uuid, "waiting", NULL, 10000);
    if (ev == NULL)
        fail_msg("job %s did not reach waiting", uuid);
    json_decref(ev);
    rc = itest_job_resume(&W.client, uuid, NULL, "{\"code\": \"Nope\", \"message\": \"no\"}", msg,
                          sizeof msg);
    assert_int_equal(rc, 0);
    job = must_finish(uuid, 10000);
    assert_string_equal(itest_execution(job), "failed");
    assert_string_equal(str_at(job, "error.code"), "Nope");
    assert_string_equal(str_at(job, "error.message"), "no");
    assert_int_equal(json_array_size(json_object_get(job, "chain_results")), 1);
    assert_string_equal(str_at(job, "chain_results.0.error.code"), "Nope");
    assert_string_equal(str_at(job, "onerror_results.0.result.msg"), "failed: Nope");
    json_decref(job);
}

/* ---- re-queue after a delay ---------------------------------------------------- */

static void test_requeue_after_delay(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"op-poll\", \"chain\": [{\"name\": \"p\", \"task\": \"itest.poll\", "
                  "\"args\": {\"file\": \"%s\", \"times\": 2, \"delay_ms\": 200}}]}",
                  W.side));
    char uuid[40];
    create_ok("op-poll", NULL, NULL, 0, NULL, uuid);
    if (!wait_nth_event(uuid, "step", "requeued", 1, 10000))
        fail_msg("job %s was not re-queued", uuid);
    /* While delayed the job is off the runner. The view is read before the events:
     * unless the job was claimed again in between (a second "running" event), the view
     * shows it between runs. */
    json_t *view = itest_job_get(&W.client, uuid);
    json_t *events = itest_events(&W.client, uuid);
    if (itest_count_events(events, "running", NULL) == 1) {
        assert_string_equal(itest_execution(view), "queued");
        assert_null(str_at(view, "runner_id"));
    }
    json_decref(view);
    json_decref(events);

    json_t *job = must_finish(uuid, 10000);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_int_equal(json_integer_value(at(job, "chain_results.0.result.polls")), 3);
    assert_int_equal(itest_side_count(W.side, "start", step_key(uuid, 0, 0)), 3);
    /* Two re-queues, each followed by a new claim no sooner than the delay. */
    events = itest_events(&W.client, uuid);
    assert_int_equal(itest_count_events(events, "step", "requeued"), 2);
    assert_int_equal(itest_count_events(events, "running", NULL), 3);
    size_t i;
    json_t *ev;
    json_int_t requeued_at = 0;
    int gaps = 0;
    json_array_foreach(events, i, ev)
    {
        const char *type = str_at(ev, "type");
        const char *status = str_at(ev, "status");
        json_int_t t = json_integer_value(json_object_get(ev, "time"));
        if (status != NULL && strcmp(status, "requeued") == 0) {
            assert_int_equal(json_integer_value(json_object_get(ev, "delay_ms")), 200);
            requeued_at = t;
        } else if (requeued_at != 0 && type != NULL && strcmp(type, "running") == 0) {
            assert_true(t - requeued_at >= 200);
            requeued_at = 0;
            gaps++;
        }
    }
    assert_int_equal(gaps, 2);
    json_decref(events);
    double elapsed = json_number_value(json_object_get(job, "elapsed"));
    print_message("polling job elapsed %.3f s\n", elapsed);
    assert_true(elapsed >= 0.4);
    json_decref(job);
}

/* ---- retry from failure -------------------------------------------------------- */

static void test_redrive(void **state)
{
    (void)state;
    put(itest_fmt(
        "{\"name\": \"op-redrive\", \"chain\": ["
        "{\"name\": \"a\", \"task\": \"itest.record\", \"args\": {\"file\": \"%s\", \"ms\": 1}},"
        "{\"name\": \"c\", \"task\": \"itest.check\", \"args\": {\"file\": \"%s\", "
        "\"ok\": \"${params.ok}\"}},"
        "{\"name\": \"z\", \"task\": \"itest.record\", \"args\": {\"file\": \"%s\", \"ms\": 1}}]}",
        W.side, W.side, W.side));
    char uuid[40], msg[1024];
    create_ok("op-redrive", "{\"ok\": false, \"keep\": \"me\"}", NULL, 0, NULL, uuid);
    json_t *job = must_finish(uuid, 10000);
    assert_string_equal(itest_execution(job), "failed");
    assert_string_equal(str_at(job, "error.code"), "NotOk");
    json_decref(job);

    int rc = itest_job_redrive(&W.client, uuid, NULL, "{\"ok\": true}", msg, sizeof msg);
    if (rc != 0)
        fail_msg("redrive refused: %s", msg);
    job = must_finish_nth(uuid, 2, 10000);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_true(json_is_null(at(job, "error")));
    /* The step before the failed one kept its result and did not run again. */
    assert_int_equal(itest_side_count(W.side, "start", step_key(uuid, 0, 0)), 1);
    assert_int_equal(itest_side_count(W.side, "start", step_key(uuid, 0, 1)), 2);
    assert_int_equal(itest_side_count(W.side, "start", step_key(uuid, 0, 2)), 1);
    assert_int_equal(json_array_size(json_object_get(job, "chain_results")), 3);
    assert_true(json_is_true(at(job, "params.ok")));
    assert_string_equal(str_at(job, "params.keep"), "me");
    assert_int_equal(json_array_size(json_object_get(job, "history")), 1);
    assert_history_entry(job, 0, "retry");
    assert_true(json_is_true(at(job, "history.0.changes.params.ok")));
    json_decref(job);
    rc = itest_job_redrive(&W.client, uuid, NULL, NULL, msg, sizeof msg);
    assert_int_equal(rc, TERN_EBUSY);

    /* From a named earlier step: that step runs again. A step after the failed one
     * cannot be the start (its inputs were never produced). */
    create_ok("op-redrive", "{\"ok\": false}", NULL, 0, NULL, uuid);
    json_decref(must_finish(uuid, 10000));
    rc = itest_job_redrive(&W.client, uuid, "z", "{\"ok\": true}", msg, sizeof msg);
    assert_int_equal(rc, TERN_EINVAL);
    rc = itest_job_redrive(&W.client, uuid, "a", "{\"ok\": true}", msg, sizeof msg);
    if (rc != 0)
        fail_msg("redrive from a refused: %s", msg);
    job = must_finish_nth(uuid, 2, 10000);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_int_equal(itest_side_count(W.side, "start", step_key(uuid, 0, 0)), 2);
    assert_int_equal(itest_side_count(W.side, "start", step_key(uuid, 0, 1)), 2);
    assert_int_equal(itest_side_count(W.side, "start", step_key(uuid, 0, 2)), 1);
    assert_string_equal(str_at(job, "history.0.changes.from_step"), "a");
    json_decref(job);
}

/* A workflow's retry_from: a retry of a job that failed after that step restarts
 * there (its onerror undid what the steps from it took), keeping what came before; a
 * job that failed before it restarts at the failed step; a named step still wins. */
static void test_redrive_retry_from(void **state)
{
    (void)state;
    put(itest_fmt(
        "{\"name\": \"op-retry-from\", \"retry_from\": \"take\", \"chain\": ["
        "{\"name\": \"a\", \"task\": \"itest.check\", \"args\": {\"file\": \"%s\", "
        "\"ok\": \"${params.a_ok}\"}},"
        "{\"name\": \"take\", \"task\": \"itest.record\", \"args\": {\"file\": \"%s\", \"ms\": 1}},"
        "{\"name\": \"c\", \"task\": \"itest.check\", \"args\": {\"file\": \"%s\", "
        "\"ok\": \"${params.ok}\"}}]}",
        W.side, W.side, W.side));
    char uuid[40], msg[1024];
    create_ok("op-retry-from", "{\"a_ok\": true, \"ok\": false}", NULL, 0, NULL, uuid);
    json_t *job = must_finish(uuid, 10000);
    assert_string_equal(itest_execution(job), "failed");
    assert_string_equal(str_at(job, "retry_from"), "take");
    json_decref(job);
    if (itest_job_redrive(&W.client, uuid, NULL, "{\"ok\": true}", msg, sizeof msg) != 0)
        fail_msg("redrive refused: %s", msg);
    job = must_finish_nth(uuid, 2, 10000);
    assert_string_equal(itest_execution(job), "succeeded");
    /* "take" ran again, "a" (before it) did not. */
    assert_int_equal(itest_side_count(W.side, "start", step_key(uuid, 0, 0)), 1);
    assert_int_equal(itest_side_count(W.side, "start", step_key(uuid, 0, 1)), 2);
    assert_int_equal(itest_side_count(W.side, "start", step_key(uuid, 0, 2)), 2);
    assert_int_equal((int)json_integer_value(at(job, "history.0.changes.from_index")), 1);
    json_decref(job);

    /* Failed before retry_from: the failed step is where the retry starts. */
    create_ok("op-retry-from", "{\"a_ok\": false, \"ok\": true}", NULL, 0, NULL, uuid);
    json_decref(must_finish(uuid, 10000));
    if (itest_job_redrive(&W.client, uuid, NULL, "{\"a_ok\": true}", msg, sizeof msg) != 0)
        fail_msg("redrive refused: %s", msg);
    job = must_finish_nth(uuid, 2, 10000);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_int_equal(itest_side_count(W.side, "start", step_key(uuid, 0, 0)), 2);
    assert_int_equal(itest_side_count(W.side, "start", step_key(uuid, 0, 1)), 1);
    assert_int_equal((int)json_integer_value(at(job, "history.0.changes.from_index")), 0);
    json_decref(job);
}

/* ---- timeouts ------------------------------------------------------------------ */

static void test_workflow_timeout(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"op-wf-timeout\", \"timeout\": 1, \"chain\": [{\"name\": \"slow\", "
                  "\"task\": \"itest.record\", \"args\": {\"file\": \"%s\", \"ms\": 10000}}],"
                  "\"onerror\": [{\"name\": \"report\", \"task\": \"core.log\", \"args\": "
                  "{\"msg\": \"gave up: ${error.code}\"}}]}",
                  W.side));
    char uuid[40];
    uint64_t t0 = clock_mono_ms();
    create_ok("op-wf-timeout", NULL, NULL, 0, NULL, uuid);
    json_t *job = must_finish(uuid, 8000);
    uint64_t took = clock_mono_ms() - t0;
    print_message("a 1 s workflow timeout ended the job after %llu ms\n", (unsigned long long)took);
    assert_true(took >= 1000);
    assert_true(took < 3000);
    assert_string_equal(itest_execution(job), "failed");
    assert_string_equal(str_at(job, "error.code"), "WorkflowTimeout");
    assert_string_equal(str_at(job, "onerror_results.0.result.msg"), "gave up: WorkflowTimeout");
    /* The step in flight was cancelled, not left to run. */
    assert_int_equal(itest_side_count(W.side, "cancel", step_key(uuid, 0, 0)), 1);
    json_decref(job);
}

static void test_task_timeout(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"op-task-timeout\", \"chain\": [{\"name\": \"slow\", \"task\": "
                  "\"itest.record\", \"timeout\": 0.3, \"retry\": 2, "
                  "\"args\": {\"file\": \"%s\", \"ms\": 5000}}]}",
                  W.side));
    char uuid[40];
    create_ok("op-task-timeout", NULL, NULL, 0, NULL, uuid);
    json_t *job = must_finish(uuid, 8000);
    assert_string_equal(itest_execution(job), "failed");
    assert_string_equal(str_at(job, "error.code"), "TaskTimeout");
    assert_int_equal(itest_side_count(W.side, "start", step_key(uuid, 0, 0)), 2);
    assert_int_equal(itest_side_count(W.side, "cancel", step_key(uuid, 0, 0)), 2);
    assert_int_equal(json_integer_value(at(job, "chain_results.0.attempts")), 2);
    json_t *events = itest_events(&W.client, uuid);
    assert_int_equal(itest_count_events(events, "step", "retry"), 1);
    json_decref(events);
    json_decref(job);
}

/* ---- the operator history ------------------------------------------------------ */

static void test_history(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"op-history\", \"chain\": ["
                  "{\"name\": \"w\", \"task\": \"itest.wait\", \"args\": {\"file\": \"%s\"}},"
                  "{\"name\": \"c\", \"task\": \"itest.check\", \"args\": {\"file\": \"%s\", "
                  "\"ok\": \"${params.ok}\"}}]}",
                  W.side, W.side));
    char uuid[40], msg[1024];
    create_ok("op-history", "{\"ok\": false}", NULL, 0, NULL, uuid);
    if (!wait_nth_event(uuid, "waiting", NULL, 1, 10000))
        fail_msg("job %s did not reach waiting", uuid);
    assert_int_equal(itest_job_resume(&W.client, uuid, "{\"go\": 1}", NULL, msg, sizeof msg), 0);
    json_decref(must_finish(uuid, 10000));
    int rc = itest_job_redrive(&W.client, uuid, "w", "{\"ok\": true}", msg, sizeof msg);
    if (rc != 0)
        fail_msg("redrive refused: %s", msg);
    if (!wait_nth_event(uuid, "waiting", NULL, 2, 10000))
        fail_msg("job %s did not reach waiting again", uuid);
    assert_int_equal(itest_job_cancel(&W.client, uuid, msg, sizeof msg), 0);
    json_t *job = must_finish_nth(uuid, 2, 10000);
    assert_string_equal(itest_execution(job), "canceled");

    json_t *history = json_object_get(job, "history");
    assert_int_equal(json_array_size(history), 3);
    assert_history_entry(job, 0, "resume");
    assert_history_entry(job, 1, "retry");
    assert_history_entry(job, 2, "cancel");
    assert_int_equal(json_integer_value(at(job, "history.0.changes.result.go")), 1);
    assert_string_equal(str_at(job, "history.1.changes.from_step"), "w");
    assert_true(json_is_true(at(job, "history.1.changes.params.ok")));
    /* In the order they happened (ISO times of one format compare as text). */
    for (size_t i = 1; i < 3; i++)
        assert_true(strcmp(str_at(json_array_get(history, i - 1), "time"),
                           str_at(json_array_get(history, i), "time")) <= 0);
    json_decref(job);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unique_target_and_params),
        cmocka_unit_test(test_locks),
        cmocka_unit_test(test_cancel_queued),
        cmocka_unit_test(test_cancel_running),
        cmocka_unit_test(test_wait_and_resume),
        cmocka_unit_test(test_requeue_after_delay),
        cmocka_unit_test(test_redrive),
        cmocka_unit_test(test_redrive_retry_from),
        cmocka_unit_test(test_workflow_timeout),
        cmocka_unit_test(test_task_timeout),
        cmocka_unit_test(test_history),
    };
    int failures = cmocka_run_group_tests(tests, group_setup, group_teardown);
    return failures == 0 ? 0 : 1;
}
