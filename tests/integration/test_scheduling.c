/*
 * test_scheduling.c -- what decides when a job runs, on a real ternd and redis-server:
 * resource tickets (job and step level, counted, released however the job ends),
 * named queues, exec_after promoted by the due timer, the event streams, and the
 * refusal of bad input before anything is stored.
 *
 * Times compared here are the "time" fields of events. Events written by the Lua
 * scripts carry the Redis server's clock, step events the runner's wall clock; all run
 * on this machine, so they compare on one clock. Where two scripts' events would tie
 * at the same millisecond, the order is a consequence of one script running before
 * the other, and the comparisons allow equality.
 */
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "base/clock.h"
#include "base/error.h"
#include "events/stream_entry.h"
#include "model/workflow.h"
#include "ops/workflow_ops.h"
#include "plugins/plugin_loader.h"
#include "run/task_ctx.h"
#include "world.h"

static itest_world_t W;
static itest_ternd_t extra_runner; /* a runner of another kind that one test starts */

/* The group's runner "r1" serves the default queue. Its heartbeat is slow on purpose:
 * delayed jobs must then be promoted by the timer armed for their due time, and a
 * promotion that only came from the heartbeat would make test_exec_after fail. Tests
 * that need runners of other kinds start them and stop them before they return. */
static int group_setup(void **state)
{
    (void)state;
    static const char *const slow_heartbeat[] = {"--heartbeat-ms", "5000", "--lease-ms", "15000",
                                                 NULL};
    itest_world_start(&W, "r1", NULL, slow_heartbeat);
    return 0;
}

/* Stops the test's extra runner when the test failed before stopping it, so that it
 * cannot serve the next tests. */
static int test_teardown(void **state)
{
    (void)state;
    if (extra_runner.pid > 0)
        itest_ternd_signal(&extra_runner, SIGTERM, 10000);
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

static void create_at(const char *workflow, const char *params, uint64_t exec_after, char uuid[40])
{
    char msg[1024];
    int rc = itest_job_create(&W.client, workflow, params, NULL, exec_after, NULL, uuid, msg,
                              sizeof msg);
    if (rc != 0)
        fail_msg("job create refused: %s", msg);
}

static void create(const char *workflow, const char *params, char uuid[40])
{
    create_at(workflow, params, 0, uuid);
}

static json_t *finished(const char *uuid)
{
    return itest_wait_finished_ok(&W.client, uuid, 20000);
}

/* The job once it has finished, found by reading it every 10 ms (up to 20 s) rather
 * than by watching its events: a watcher starts the job's event stream, which writes
 * to the job (field rf among others: see step_hold_covers_only_its_step). */
static json_t *finished_unwatched(const char *uuid)
{
    for (int waited = 0; waited < 20000; waited += 10) {
        json_t *job = itest_job_get(&W.client, uuid);
        const char *ex = itest_execution(job);
        if (strcmp(ex, "succeeded") == 0 || strcmp(ex, "failed") == 0 ||
            strcmp(ex, "canceled") == 0)
            return job;
        json_decref(job);
        uv_sleep(10);
    }
    fail_msg("job %s did not finish within 20 s", uuid);
    return NULL;
}

/* Waits for the job's first event of `type` (and `status`) and returns its time. */
static json_int_t wait_event_time(const char *uuid, const char *type, const char *status)
{
    json_t *ev = itest_wait_event(&W.client, uuid, type, status, 10000);
    if (ev == NULL)
        fail_msg("job %s: no \"%s\" event within 10 s", uuid, type);
    json_int_t t = json_integer_value(json_object_get(ev, "time"));
    json_decref(ev);
    return t;
}

/* The `nth` event (0 first, -1 last) of `type` (and `status`) among the job's events;
 * fails the test when there is none. Borrowed from `events`. */
static json_t *event_of(const json_t *events, const char *type, const char *status, int nth)
{
    int n = itest_count_events(events, type, status);
    int want = nth < 0 ? n + nth : nth;
    if (want < 0 || want >= n)
        fail_msg("no event #%d of type %s%s%s (%d such events)", nth, type,
                 status ? " status " : "", status ? status : "", n);
    size_t i;
    json_t *ev;
    int seen = 0;
    json_array_foreach((json_t *)events, i, ev)
    {
        const char *t = json_string_value(json_object_get(ev, "type"));
        const char *s = json_string_value(json_object_get(ev, "status"));
        if (t != NULL && strcmp(t, type) == 0 &&
            (status == NULL || (s != NULL && strcmp(s, status) == 0)) && seen++ == want)
            return ev;
    }
    return NULL;
}

static json_int_t time_of(const json_t *events, const char *type, const char *status, int nth)
{
    return json_integer_value(json_object_get(event_of(events, type, status, nth), "time"));
}

/* When a step's attempt started: its event is written at the end, with the duration.
 * The end (wall clock) and the duration (monotonic clock) are each truncated to the
 * millisecond, so this estimate may come out up to START_SLACK_MS early. */
#define START_SLACK_MS 2

static json_int_t step_start(const json_t *step_event)
{
    return json_integer_value(json_object_get(step_event, "time")) -
           json_integer_value(json_object_get(step_event, "duration_ms"));
}

/* Waits (bounded) until the side channel holds a "start" line of `key_prefix`: the
 * task's attempt is running. */
static void wait_side_start(const char *key_prefix)
{
    for (int waited = 0; waited < 10000; waited += 10) {
        if (itest_side_count(W.side, "start", key_prefix) > 0)
            return;
        uv_sleep(10);
    }
    fail_msg("no attempt of %s started within 10 s", key_prefix);
}

static void stop_runner(itest_ternd_t *t)
{
    assert_int_equal(itest_ternd_signal(t, SIGTERM, 10000), 0);
}

static long long key_count(const char *pattern)
{
    return itest_redis_int(&W.redis, "EVAL %s 0 %s", "return #redis.call('KEYS', ARGV[1])",
                           pattern);
}

/* ---- 1. job-level tickets ---------------------------------------------------------- */

static void test_job_hold_serializes_one_vm(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"vm-op\", \"holds\": [\"vm:${params.vm}\"], \"chain\": ["
                  "{\"name\": \"work\", \"task\": \"itest.record\", \"args\": "
                  "{\"file\": \"%s\", \"ms\": 300}}]}",
                  W.side));
    char a[40], b[40], c[40];
    create("vm-op", "{\"vm\": \"alpha\"}", a);
    create("vm-op", "{\"vm\": \"alpha\"}", b);
    create("vm-op", "{\"vm\": \"beta\"}", c);
    json_t *ja = finished(a), *jb = finished(b), *jc = finished(c);
    assert_string_equal(itest_execution(ja), "succeeded");
    assert_string_equal(itest_execution(jb), "succeeded");
    assert_string_equal(itest_execution(jc), "succeeded");
    json_t *ea = itest_events(&W.client, a), *eb = itest_events(&W.client, b),
           *ec = itest_events(&W.client, c);

    /* The second job on "alpha" waited for the ticket and ran only once the first had
     * finished: its only start comes after that end. */
    assert_int_equal(itest_count_events(ea, "hold_wait", NULL), 0);
    assert_string_equal(itest_str_of(event_of(eb, "hold_wait", NULL, 0), "resource"), "vm:alpha");
    assert_int_equal(itest_count_events(eb, "running", NULL), 1);
    assert_true(time_of(eb, "running", NULL, 0) >= time_of(ea, "finished", NULL, 0));
    assert_true(step_start(event_of(eb, "step", "succeeded", 0)) + START_SLACK_MS >=
                time_of(ea, "finished", NULL, 0));

    /* "beta" is another resource: that job ran alongside the first. */
    assert_int_equal(itest_count_events(ec, "hold_wait", NULL), 0);
    assert_true(time_of(ec, "running", NULL, 0) < time_of(ea, "finished", NULL, 0));
    assert_true(time_of(ea, "running", NULL, 0) < time_of(ec, "finished", NULL, 0));
    assert_int_equal(itest_redis_int(&W.redis, "EXISTS tern:hold:vm:alpha:h tern:hold:vm:beta:h"),
                     0);
    json_decref(ea);
    json_decref(eb);
    json_decref(ec);
    json_decref(ja);
    json_decref(jb);
    json_decref(jc);
}

static void test_job_hold_wait_frees_the_runner_slot(void **state)
{
    (void)state;
    /* The holder runs on r1; the waiter and a job on another vm go to a runner with one
     * slot. If the waiter kept that slot, the other job could not run before it. */
    put(itest_fmt("{\"name\": \"vm-long\", \"holds\": [\"vm:${params.vm}\"], \"chain\": ["
                  "{\"name\": \"work\", \"task\": \"itest.record\", \"args\": "
                  "{\"file\": \"%s\", \"ms\": 800}}]}",
                  W.side));
    put(itest_fmt("{\"name\": \"vm-single\", \"queue\": \"single\", \"holds\": "
                  "[\"vm:${params.vm}\"], \"chain\": [{\"name\": \"work\", \"task\": "
                  "\"itest.record\", \"args\": {\"file\": \"%s\", \"ms\": 50}}]}",
                  W.side));
    static const char *const one_slot[] = {"--concurrency", "1", "--queues", "single", NULL};
    itest_ternd_start(&extra_runner, &W.redis, &W.dir, "single", one_slot);

    char holder[40], waiter[40], other[40];
    create("vm-long", "{\"vm\": \"gamma\"}", holder);
    wait_event_time(holder, "running", NULL);
    create("vm-single", "{\"vm\": \"gamma\"}", waiter);
    wait_event_time(waiter, "hold_wait", NULL);
    create("vm-single", "{\"vm\": \"delta\"}", other);

    json_t *jo = finished(other), *jw = finished(waiter), *jh = finished(holder);
    assert_string_equal(itest_execution(jo), "succeeded");
    assert_string_equal(itest_execution(jw), "succeeded");
    assert_string_equal(itest_execution(jh), "succeeded");
    json_t *eo = itest_events(&W.client, other), *ew = itest_events(&W.client, waiter),
           *eh = itest_events(&W.client, holder);
    assert_string_equal(itest_str_of(event_of(eo, "running", NULL, 0), "runner"), "single");
    assert_string_equal(itest_str_of(event_of(ew, "running", NULL, 0), "runner"), "single");
    /* The other job ran and finished while the waiter waited on the one-slot runner. */
    assert_true(time_of(eo, "finished", NULL, 0) < time_of(eh, "finished", NULL, 0));
    assert_true(time_of(eo, "finished", NULL, 0) <= time_of(ew, "running", NULL, 0));
    assert_true(time_of(ew, "running", NULL, 0) >= time_of(eh, "finished", NULL, 0));
    json_decref(eo);
    json_decref(ew);
    json_decref(eh);
    json_decref(jo);
    json_decref(jw);
    json_decref(jh);
    stop_runner(&extra_runner);
}

/* ---- 2. counted tickets --------------------------------------------------------------- */

static void test_capacity_is_counted_and_fifo(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"migrate\", \"holds\": [{\"resource\": \"mig:${params.server}\", "
                  "\"capacity\": 2}], \"chain\": [{\"name\": \"move\", \"task\": "
                  "\"itest.record\", \"args\": {\"file\": \"%s\", \"ms\": \"${params.ms}\"}}]}",
                  W.side));
    /* Two take the capacity at once; the third gets the place of the first to end (the
     * 300 ms one), the fourth that of the next (the third, before the 1000 ms one). */
    static const int ms[4] = {300, 1000, 300, 300};
    char uuid[4][40];
    for (int i = 0; i < 4; i++)
        create("migrate", itest_fmt("{\"server\": \"s1\", \"ms\": %d}", ms[i]), uuid[i]);
    json_int_t start[4], end[4], granted[4];
    for (int i = 0; i < 4; i++) {
        json_t *job = finished(uuid[i]);
        assert_string_equal(itest_execution(job), "succeeded");
        json_decref(job);
        json_t *ev = itest_events(&W.client, uuid[i]);
        assert_int_equal(itest_count_events(ev, "running", NULL), 1);
        start[i] = time_of(ev, "running", NULL, 0);
        end[i] = time_of(ev, "finished", NULL, 0);
        assert_int_equal(itest_count_events(ev, "hold_wait", NULL), i < 2 ? 0 : 1);
        granted[i] = i < 2 ? start[i] : time_of(ev, "hold_granted", NULL, 0);
        json_decref(ev);
    }
    /* At no moment did more than two hold the ticket. */
    for (int i = 0; i < 4; i++) {
        int holding = 0;
        for (int k = 0; k < 4; k++)
            if (start[k] <= start[i] && start[i] < end[k])
                holding++;
        assert_true(holding <= 2);
    }
    /* The first two ran together; the third only after one of them ended. */
    assert_true(start[1] < end[0] && start[0] < end[1]);
    assert_true(start[2] >= (end[0] < end[1] ? end[0] : end[1]));
    /* First come, first served: the third was granted before the fourth, and the fourth
     * took the place the third freed, while the long second still held its own. */
    assert_true(granted[2] <= granted[3]);
    assert_true(start[2] < start[3]);
    assert_true(start[3] >= end[2]);
    assert_true(start[3] < end[1]);
    assert_int_equal(itest_redis_int(&W.redis, "EXISTS tern:hold:mig:s1:h tern:hold:mig:s1:w "
                                               "tern:hold:mig:s1:cap"),
                     0);
}

static int http_post(const char *path, const char *body, char *out, size_t outlen);

/* POSTs a job of workflow `wf` with `params` (members of a JSON object, without braces)
 * through the HTTP API, where admission checks run, and returns the HTTP status; the
 * job's uuid goes to uuid on 201, the answer's body to body. */
static int http_create(const char *wf, const char *params, char uuid[40], char *body, size_t n)
{
    char req[1024];
    snprintf(req, sizeof req, "{\"workflow\": \"%s\", %s}", wf, params);
    int status = http_post("/jobs", req, body, n);
    uuid[0] = '\0';
    if (status == 201) {
        json_t *job = json_loads(body, 0, NULL);
        snprintf(uuid, 40, "%s", itest_str_of(job, "uuid"));
        json_decref(job);
    }
    return status;
}

/* A capacity given by the job's inputs (an admission check's result, as a migration's
 * slots per server come from its settings): expanded when the job is created, counted
 * and granted first come first served as a written one; a value that is no integer in
 * range refuses the job 422 and stores nothing; a malformed template refuses the
 * workflow. */
static void test_templated_capacity_from_admission(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"slotted\", \"admission\": [{\"name\": \"check\", \"task\":"
                  " \"itest.admit_ok\", \"args\": {\"slots\": \"${params.slots}\", \"server\":"
                  " \"${params.server}\"}}], \"holds\": [{\"resource\":"
                  " \"slot:${admission.check.result.args.server}\", \"capacity\":"
                  " \"${admission.check.result.args.slots}\"}], \"chain\": [{\"name\": \"move\","
                  " \"task\": \"itest.record\", \"args\": {\"file\": \"%s\", \"ms\": 500}}]}",
                  W.side));
    char uuid[3][40], body[4096];
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            http_create("slotted", "\"slots\": 2, \"server\": \"s7\"", uuid[i], body, sizeof body),
            201);
    json_int_t start[3], end[3];
    for (int i = 0; i < 3; i++) {
        json_t *job = finished(uuid[i]);
        assert_string_equal(itest_execution(job), "succeeded");
        json_decref(job);
        json_t *ev = itest_events(&W.client, uuid[i]);
        start[i] = time_of(ev, "running", NULL, 0);
        end[i] = time_of(ev, "finished", NULL, 0);
        /* The first two are granted at once; the third, created last, waits. */
        assert_int_equal(itest_count_events(ev, "hold_wait", NULL), i < 2 ? 0 : 1);
        json_decref(ev);
    }
    assert_true(start[1] < end[0] && start[0] < end[1]);
    assert_true(start[2] >= (end[0] < end[1] ? end[0] : end[1]));
    assert_int_equal(
        itest_redis_int(&W.redis,
                        "EXISTS tern:hold:slot:s7:h tern:hold:slot:s7:w tern:hold:slot:s7:cap"),
        0);

    /* Values that are no capacity: refused 422 naming the hold and the value; no job. */
    static const struct {
        const char *slots, *shown;
    } bad[] = {{"0", "0"}, {"\"two\"", "two"}, {"1.5", "1.5"}, {"1000001", "1000001"}};
    long long jobs = key_count("tern:job:*");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char u[40];
        int status =
            http_create("slotted", itest_fmt("\"slots\": %s, \"server\": \"s8\"", bad[i].slots), u,
                        body, sizeof body);
        print_message("HTTP %d: %s\n", status, body);
        assert_int_equal(status, 422);
        char want[256];
        snprintf(want, sizeof want,
                 "holds[0].capacity: \\\"${admission.check.result.args.slots}\\\" gave \\\"%s\\\", "
                 "expected an integer from 1 to 1000000",
                 bad[i].shown);
        assert_non_null(strstr(body, want));
    }
    assert_int_equal(key_count("tern:job:*"), jobs);
    assert_int_equal(key_count("tern:hold:slot:s8*"), 0);

    /* A step's templated capacity is expanded when the step runs: a bad value fails
     * the step with InvalidArgument naming the hold (nothing was taken). */
    put("{\"name\": \"slotted-step\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\","
        " \"holds\": [{\"resource\": \"stepslot\", \"capacity\": \"${params.cap}\"}]}]}");
    char su[40];
    create("slotted-step", "{\"cap\": 0}", su);
    json_t *sj = finished(su);
    assert_string_equal(itest_execution(sj), "failed");
    const json_t *serr = json_object_get(sj, "error");
    assert_string_equal(itest_str_of(serr, "code"), "InvalidArgument");
    assert_non_null(
        strstr(itest_str_of(serr, "message"), "holds[0].capacity: \"${params.cap}\" gave \"0\""));
    json_decref(sj);
    create("slotted-step", "{\"cap\": 3}", su);
    sj = finished(su);
    assert_string_equal(itest_execution(sj), "succeeded");
    json_decref(sj);
    assert_int_equal(key_count("tern:hold:stepslot*"), 0);

    /* A malformed template is refused when the workflow is stored. */
    int status =
        http_post("/workflows",
                  "{\"name\": \"slotted-bad\", \"holds\": [{\"resource\": \"r\", \"capacity\":"
                  " \"${params.slots\"}], \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}]}",
                  body, sizeof body);
    print_message("HTTP %d: %s\n", status, body);
    assert_int_equal(status, 409);
    assert_non_null(strstr(body, "holds[0].capacity: ${params.slots has no closing"));
}

/* ---- 3. release however the job ends -------------------------------------------------- */

static void test_holds_released_on_failure_and_cancel(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"vm-check\", \"holds\": [\"vm:${params.vm}\"], \"chain\": ["
                  "{\"name\": \"work\", \"task\": \"itest.record\", \"args\": "
                  "{\"file\": \"%s\", \"ms\": 300}}, "
                  "{\"name\": \"check\", \"task\": \"itest.check\", \"args\": "
                  "{\"file\": \"%s\", \"ok\": \"${params.ok}\"}}]}",
                  W.side, W.side));
    put(itest_fmt("{\"name\": \"vm-hang\", \"holds\": [\"vm:${params.vm}\"], \"chain\": ["
                  "{\"name\": \"work\", \"task\": \"itest.record\", \"args\": "
                  "{\"file\": \"%s\", \"ms\": 60000}}]}",
                  W.side));

    /* Every job of this test, to check at the end that none holds anything. */
    char jobs[7][40];
    int n_jobs = 0;

    /* A job that fails. */
    char failing[40], next[40];
    create("vm-check", "{\"vm\": \"x1\", \"ok\": false}", failing);
    wait_event_time(failing, "running", NULL);
    create("vm-check", "{\"vm\": \"x1\", \"ok\": true}", next);
    wait_event_time(next, "hold_wait", NULL);
    json_t *jf = finished(failing), *jn = finished(next);
    snprintf(jobs[n_jobs++], 40, "%s", failing);
    snprintf(jobs[n_jobs++], 40, "%s", next);
    assert_string_equal(itest_execution(jf), "failed");
    assert_string_equal(itest_str_of(json_object_get(jf, "error"), "code"), "NotOk");
    assert_string_equal(itest_execution(jn), "succeeded");
    json_t *ef = itest_events(&W.client, failing), *en = itest_events(&W.client, next);
    json_int_t gap = time_of(en, "running", NULL, 0) - time_of(ef, "finished", NULL, 0);
    assert_true(gap >= 0 && gap < 500);
    json_decref(ef);
    json_decref(en);
    json_decref(jf);
    json_decref(jn);

    /* A job canceled in the middle of its step. */
    char canceled[40];
    create("vm-hang", "{\"vm\": \"x2\"}", canceled);
    char key[64];
    snprintf(key, sizeof key, "%s/0/0", canceled);
    wait_side_start(key);
    create("vm-check", "{\"vm\": \"x2\", \"ok\": true}", next);
    wait_event_time(next, "hold_wait", NULL);
    char msg[1024];
    assert_int_equal(itest_job_cancel(&W.client, canceled, msg, sizeof msg), 0);
    jf = finished(canceled);
    jn = finished(next);
    snprintf(jobs[n_jobs++], 40, "%s", canceled);
    snprintf(jobs[n_jobs++], 40, "%s", next);
    assert_string_equal(itest_execution(jf), "canceled");
    assert_int_equal(itest_side_count(W.side, "cancel", key), 1);
    assert_string_equal(itest_execution(jn), "succeeded");
    ef = itest_events(&W.client, canceled);
    en = itest_events(&W.client, next);
    gap = time_of(en, "running", NULL, 0) - time_of(ef, "finished", NULL, 0);
    assert_true(gap >= 0 && gap < 500);
    json_decref(ef);
    json_decref(en);
    json_decref(jf);
    json_decref(jn);

    /* A job canceled while it waits for the ticket gives up its place in line. */
    char holder[40], gone[40];
    create("vm-check", "{\"vm\": \"x3\", \"ok\": true}", holder);
    wait_event_time(holder, "running", NULL);
    create("vm-check", "{\"vm\": \"x3\", \"ok\": true}", gone);
    wait_event_time(gone, "hold_wait", NULL);
    create("vm-check", "{\"vm\": \"x3\", \"ok\": true}", next);
    wait_event_time(next, "hold_wait", NULL);
    assert_int_equal(itest_job_cancel(&W.client, gone, msg, sizeof msg), 0);
    json_t *jg = finished(gone);
    assert_string_equal(itest_execution(jg), "canceled");
    json_decref(jg);
    jf = finished(holder);
    jn = finished(next);
    snprintf(jobs[n_jobs++], 40, "%s", gone);
    snprintf(jobs[n_jobs++], 40, "%s", holder);
    snprintf(jobs[n_jobs++], 40, "%s", next);
    assert_string_equal(itest_execution(jn), "succeeded");
    ef = itest_events(&W.client, holder);
    en = itest_events(&W.client, next);
    gap = time_of(en, "running", NULL, 0) - time_of(ef, "finished", NULL, 0);
    assert_true(gap >= 0 && gap < 500);
    snprintf(key, sizeof key, "%s/", gone);
    assert_int_equal(itest_side_count(W.side, "start", key), 0);
    json_decref(ef);
    json_decref(en);
    json_decref(jf);
    json_decref(jn);

    /* Nothing is held or awaited any more, and no job remembers a ticket. */
    assert_int_equal(key_count("tern:hold:vm:x*"), 0);
    for (int i = 0; i < n_jobs; i++)
        assert_int_equal(itest_redis_int(&W.redis, "EXISTS tern:job:%s:held", jobs[i]), 0);
}

/* ---- 3b. telling a plugin of waits for tickets ---------------------------------------- */

/* The entries of stream `key` as a JSON array of their 'e' objects (new reference). */
static json_t *stream_events(const char *key)
{
    char *text = itest_redis_str(&W.redis, "EVAL %s 1 %s",
                                 "local out = {} for _, e in ipairs(redis.call('XRANGE', "
                                 "KEYS[1], '-', '+')) do out[#out + 1] = cjson.decode(e[2][2]) "
                                 "end return cjson.encode(out)",
                                 key);
    assert_non_null(text);
    /* cjson encodes an empty table as {} */
    json_t *arr = strcmp(text, "{}") == 0 ? json_array() : json_loads(text, 0, NULL);
    free(text);
    assert_true(json_is_array(arr));
    return arr;
}

static void assert_told(const json_t *ev, const char *type, const char *job, const char *res)
{
    assert_string_equal(itest_str_of(ev, "type"), type);
    assert_string_equal(itest_str_of(ev, "job_uuid"), job);
    assert_string_equal(itest_str_of(ev, "resource"), res);
    assert_string_equal(itest_str_of(ev, "workflow"), "told");
    assert_true(json_integer_value(json_object_get(ev, "timestamp")) > 0);
}

/* A workflow's hold_events names plugin streams: a job's wait for a ticket, its grant
 * and its leaving the line are appended there; a workflow without it writes nothing. */
static void test_hold_events_tell_a_plugin_stream(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"told\", \"holds\": [{\"resource\": \"told:${params.server}\", "
                  "\"capacity\": 1}], \"hold_events\": [\"itest:waits:${params.server}\", "
                  "\"itest:all\"], \"chain\": [{\"name\": \"work\", \"task\": \"itest.record\", "
                  "\"args\": {\"file\": \"%s\", \"ms\": \"${params.ms}\"}}]}",
                  W.side));
    put(itest_fmt("{\"name\": \"untold\", \"holds\": [{\"resource\": \"told:${params.server}\", "
                  "\"capacity\": 1}], \"chain\": [{\"name\": \"work\", \"task\": "
                  "\"itest.record\", \"args\": {\"file\": \"%s\", \"ms\": 300}}]}",
                  W.side));

    /* One job holds, the next waits: one hold_wait while it waits, one hold_granted when
     * the first ends, in both streams named. */
    char first[40], second[40];
    create("told", "{\"server\": \"s1\", \"ms\": 400}", first);
    wait_event_time(first, "running", NULL);
    create("told", "{\"server\": \"s1\", \"ms\": 10}", second);
    wait_event_time(second, "hold_wait", NULL);
    json_t *ev = stream_events("tern:p:itest:waits:s1");
    assert_int_equal(json_array_size(ev), 1);
    assert_told(json_array_get(ev, 0), "hold_wait", second, "told:s1");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ev, 0), "capacity")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ev, 0), "holders")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ev, 0), "ahead")), 0);
    json_decref(ev);
    json_t *j1 = finished(first), *j2 = finished(second);
    assert_string_equal(itest_execution(j2), "succeeded");
    json_decref(j1);
    json_decref(j2);
    ev = stream_events("tern:p:itest:waits:s1");
    assert_int_equal(json_array_size(ev), 2);
    assert_told(json_array_get(ev, 1), "hold_granted", second, "told:s1");
    json_t *all = stream_events("tern:p:itest:all");
    assert_true(json_equal(ev, all));
    json_decref(all);
    json_decref(ev);

    /* A job canceled while it waits: hold_wait, then hold_left; the third in line is
     * told how many wait ahead of it. */
    char holder[40], gone[40], third[40], msg[1024];
    create("told", "{\"server\": \"s2\", \"ms\": 600}", holder);
    wait_event_time(holder, "running", NULL);
    create("told", "{\"server\": \"s2\", \"ms\": 10}", gone);
    wait_event_time(gone, "hold_wait", NULL);
    create("told", "{\"server\": \"s2\", \"ms\": 10}", third);
    wait_event_time(third, "hold_wait", NULL);
    assert_int_equal(itest_job_cancel(&W.client, gone, msg, sizeof msg), 0);
    json_t *jg = finished(gone), *jh = finished(holder), *jt = finished(third);
    assert_string_equal(itest_execution(jg), "canceled");
    assert_string_equal(itest_execution(jt), "succeeded");
    json_decref(jg);
    json_decref(jh);
    json_decref(jt);
    ev = stream_events("tern:p:itest:waits:s2");
    assert_int_equal(json_array_size(ev), 4);
    assert_told(json_array_get(ev, 0), "hold_wait", gone, "told:s2");
    assert_told(json_array_get(ev, 1), "hold_wait", third, "told:s2");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ev, 1), "ahead")), 1);
    assert_told(json_array_get(ev, 2), "hold_left", gone, "told:s2");
    assert_told(json_array_get(ev, 3), "hold_granted", third, "told:s2");
    json_decref(ev);

    /* A step's ticket is told the same way; one stream may be given as a string. */
    put(itest_fmt("{\"name\": \"told-step\", \"hold_events\": \"itest:stepwaits\", \"chain\": "
                  "[{\"name\": \"work\", \"task\": \"itest.record\", \"holds\": "
                  "[\"toldstep\"], \"args\": {\"file\": \"%s\", \"ms\": \"${params.ms}\"}}]}",
                  W.side));
    char s1[40], s2[40];
    create("told-step", "{\"ms\": 400}", s1);
    wait_event_time(s1, "running", NULL);
    create("told-step", "{\"ms\": 10}", s2);
    wait_event_time(s2, "hold_wait", NULL);
    json_t *js1 = finished(s1), *js2 = finished(s2);
    assert_string_equal(itest_execution(js2), "succeeded");
    json_decref(js1);
    json_decref(js2);
    ev = stream_events("tern:p:itest:stepwaits");
    assert_int_equal(json_array_size(ev), 2);
    assert_string_equal(itest_str_of(json_array_get(ev, 0), "type"), "hold_wait");
    assert_string_equal(itest_str_of(json_array_get(ev, 0), "job_uuid"), s2);
    assert_string_equal(itest_str_of(json_array_get(ev, 0), "resource"), "toldstep");
    assert_string_equal(itest_str_of(json_array_get(ev, 1), "type"), "hold_granted");
    assert_string_equal(itest_str_of(json_array_get(ev, 1), "job_uuid"), s2);
    json_decref(ev);

    /* Without hold_events the same wait writes no plugin stream. */
    long long streams = key_count("tern:p:*");
    char u1[40], u2[40];
    create("untold", "{\"server\": \"s3\"}", u1);
    wait_event_time(u1, "running", NULL);
    create("untold", "{\"server\": \"s3\"}", u2);
    wait_event_time(u2, "hold_wait", NULL);
    json_t *ju1 = finished(u1), *ju2 = finished(u2);
    assert_string_equal(itest_execution(ju2), "succeeded");
    json_decref(ju1);
    json_decref(ju2);
    assert_int_equal(key_count("tern:p:*"), streams);

    /* Bad streams are refused with their path when the workflow is stored... */
    static const struct {
        const char *hold_events, *message;
    } bad[] = {
        {"\"itest:w:${params.x\"", "hold_events: ${params.x has no closing"},
        {"\"Itest:w\"", "hold_events: expected \\\"<plugin>:<key>\\\""},
        {"\"itest:\"", "hold_events: expected \\\"<plugin>:<key>\\\""},
        {"[\"itest:a\", 5]", "hold_events[1]: expected a stream \\\"<plugin>:<key>\\\", got 5"},
        {"[\"itest:a\", \"itest:a\"]", "hold_events[1]: duplicate stream \\\"itest:a\\\""},
        {"[]", "hold_events: expected 1 to 4 streams"},
        {"\"itest:${steps.work.result}\"", "hold_events"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char body[2048];
        int status = http_post("/workflows",
                               itest_fmt("{\"name\": \"told-bad\", \"hold_events\": %s, \"chain\": "
                                         "[{\"name\": \"work\", \"task\": \"core.noop\"}]}",
                                         bad[i].hold_events),
                               body, sizeof body);
        print_message("HTTP %d: %s\n", status, body);
        assert_true(status == 400 || status == 409 || status == 422);
        assert_non_null(strstr(body, bad[i].message));
    }
    assert_int_equal(itest_redis_int(&W.redis, "HEXISTS tern:wf:latest told-bad"), 0);

    /* ... and a template the job cannot fill when the job is created: nothing stored. */
    long long jobs = itest_jobs_indexed(&W.redis);
    char uuid[40];
    assert_int_equal(
        itest_job_create(&W.client, "told", "{\"ms\": 1}", NULL, 0, NULL, uuid, msg, sizeof msg),
        TERN_EINVAL);
    print_message("refused: %s\n", msg);
    assert_non_null(strstr(msg, "params.server"));
    assert_int_equal(itest_jobs_indexed(&W.redis), jobs);
}

/* ---- 4. step-level tickets ------------------------------------------------------------ */

/* A step's hold is released by the step's commit, which reads the job's rare fields
 * (step_holds) only when its field rf says it may have them: the first job is not
 * watched, so nothing but its step's begin writes rf. */
static void test_step_hold_covers_only_its_step(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"disk-op\", \"chain\": ["
                  "{\"name\": \"copy\", \"task\": \"itest.record\", \"holds\": "
                  "[\"disk:${params.d}\"], \"args\": {\"file\": \"%s\", \"ms\": 400}}, "
                  "{\"name\": \"verify\", \"task\": \"itest.record\", \"args\": "
                  "{\"file\": \"%s\", \"ms\": 600}}]}",
                  W.side, W.side));
    char first[40], second[40];
    create("disk-op", "{\"d\": \"d1\"}", first);
    char key[64];
    snprintf(key, sizeof key, "%s/0/0", first);
    wait_side_start(key);
    create("disk-op", "{\"d\": \"d1\"}", second);
    json_t *j1 = finished_unwatched(first);
    json_t *j2 = finished(second);
    assert_string_equal(itest_execution(j1), "succeeded");
    assert_string_equal(itest_execution(j2), "succeeded");
    json_t *e1 = itest_events(&W.client, first), *e2 = itest_events(&W.client, second);

    /* The second job's copy waited for the first job's copy ... */
    assert_int_equal(itest_count_events(e1, "hold_wait", NULL), 0);
    assert_string_equal(itest_str_of(event_of(e2, "hold_wait", NULL, 0), "resource"), "disk:d1");
    json_t *copy1 = event_of(e1, "step", "succeeded", 0);
    json_t *copy2 = event_of(e2, "step", "succeeded", 0);
    assert_string_equal(itest_str_of(copy1, "name"), "copy");
    assert_string_equal(itest_str_of(copy2, "name"), "copy");
    assert_true(time_of(e2, "running", NULL, -1) >=
                json_integer_value(json_object_get(copy1, "time")));
    assert_true(step_start(copy2) + START_SLACK_MS >= time_of(e2, "running", NULL, -1));
    /* ... but not for the rest of the first job: it ran while the first verified. */
    json_t *verify1 = event_of(e1, "step", "succeeded", 1);
    assert_string_equal(itest_str_of(verify1, "name"), "verify");
    assert_true(step_start(copy2) < time_of(e1, "finished", NULL, 0));
    assert_true(step_start(copy2) < json_integer_value(json_object_get(verify1, "time")));
    snprintf(key, sizeof key, "%s/0/0", second);
    assert_int_equal(itest_side_count(W.side, "start", key), 1);
    assert_int_equal(key_count("tern:hold:disk:*"), 0);
    json_decref(e1);
    json_decref(e2);
    json_decref(j1);
    json_decref(j2);
}

/* ---- 5. named queues --------------------------------------------------------------- */

static void test_named_queue_needs_its_runner(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"bulk\", \"queue\": \"slow\", \"chain\": [{\"name\": \"move\", "
                  "\"task\": \"itest.record\", \"args\": {\"file\": \"%s\", \"ms\": 5}}]}",
                  W.side));
    put(itest_fmt("{\"name\": \"quick\", \"chain\": [{\"name\": \"do\", \"task\": "
                  "\"itest.record\", \"args\": {\"file\": \"%s\", \"ms\": 5}}]}",
                  W.side));
    char slow[40], quick[40];
    create("bulk", NULL, slow);
    create("quick", NULL, quick);
    /* r1 serves the default queue only: it runs the job created after, not the first. */
    json_t *jq = finished(quick);
    assert_string_equal(itest_execution(jq), "succeeded");
    json_decref(jq);
    json_t *eq = itest_events(&W.client, quick);
    assert_string_equal(itest_str_of(event_of(eq, "running", NULL, 0), "runner"), "r1");
    json_decref(eq);
    json_t *js = itest_job_get(&W.client, slow);
    assert_string_equal(itest_execution(js), "queued");
    json_decref(js);
    json_t *es = itest_events(&W.client, slow);
    assert_int_equal(itest_count_events(es, "running", NULL), 0);
    json_decref(es);
    assert_int_equal(itest_redis_int(&W.redis, "LLEN tern:q:slow"), 1);

    static const char *const slow_queue[] = {"--queues", "slow", NULL};
    itest_ternd_start(&extra_runner, &W.redis, &W.dir, "bulk", slow_queue);
    js = finished(slow);
    assert_string_equal(itest_execution(js), "succeeded");
    json_decref(js);
    es = itest_events(&W.client, slow);
    assert_string_equal(itest_str_of(event_of(es, "running", NULL, 0), "runner"), "bulk");
    json_decref(es);
    stop_runner(&extra_runner);
}

/* ---- 6. exec_after ---------------------------------------------------------------- */

static void test_exec_after_on_time_without_heartbeat(void **state)
{
    (void)state;
    /* Only r1 (heartbeat 5 s) is alive: nothing else promotes delayed jobs. */
    long long live = itest_redis_int(&W.redis, "ZCOUNT tern:runners %llu +inf",
                                     (unsigned long long)clock_wall_ms());
    assert_int_equal(live, 1);
    put(itest_fmt("{\"name\": \"later\", \"chain\": [{\"name\": \"do\", \"task\": "
                  "\"itest.record\", \"args\": {\"file\": \"%s\", \"ms\": 5}}]}",
                  W.side));
    /* The later job is created first: the runner's timer must move to the earlier due
     * time when it is announced, and on to the later one after promoting the earlier. */
    uint64_t now = clock_wall_ms();
    uint64_t due[2] = {now + 1600, now + 800};
    char uuid[2][40];
    create_at("later", NULL, due[0], uuid[0]);
    create_at("later", NULL, due[1], uuid[1]);
    for (int i = 1; i >= 0; i--) {
        json_t *job = finished(uuid[i]);
        assert_string_equal(itest_execution(job), "succeeded");
        json_decref(job);
        json_t *ev = itest_events(&W.client, uuid[i]);
        json_int_t ran = time_of(ev, "running", NULL, 0);
        print_message("job due at +%llu ms started %lld ms after its due time\n",
                      (unsigned long long)(due[i] - now), (long long)(ran - (json_int_t)due[i]));
        assert_true(ran >= (json_int_t)due[i]);
        assert_true(ran <= (json_int_t)due[i] + 500);
        json_decref(ev);
    }
}

/* ---- 7. event streams ----------------------------------------------------------------- */

typedef struct global_events {
    const char *uuid;
    json_t *out;
} global_events_t;

static bool global_event_of_job(void *data, const json_t *ev)
{
    global_events_t *g = data;
    if (strcmp(itest_str_of(ev, "job"), g->uuid) == 0)
        json_array_append_new(g->out, json_deep_copy(ev));
    return true;
}

/* The events of job `uuid` in the global stream, oldest first (new reference). An
 * entry may hold several events (stream_entry.h). */
static json_t *global_events(const char *uuid)
{
    struct timeval tv = {2, 0};
    redisContext *rc = redisConnectWithTimeout("127.0.0.1", W.redis.port, tv);
    if (rc == NULL || rc->err)
        fail_msg("cannot connect to Redis");
    redisReply *r = redisCommand(rc, "XREVRANGE tern:events + - COUNT 1000");
    json_t *out = json_array();
    for (size_t i = r != NULL && r->type == REDIS_REPLY_ARRAY ? r->elements : 0; i-- > 0;) {
        global_events_t g = {uuid, out};
        stream_entry_each(r->element[i]->element[1], global_event_of_job, &g);
    }
    if (r != NULL)
        freeReplyObject(r);
    redisFree(rc);
    return out;
}

static void test_event_streams(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"evs\", \"chain\": ["
                  "{\"name\": \"one\", \"task\": \"itest.record\", \"args\": "
                  "{\"file\": \"%s\", \"ms\": 5}}, "
                  "{\"name\": \"two\", \"task\": \"itest.check\", \"args\": "
                  "{\"file\": \"%s\", \"ok\": true}}]}",
                  W.side, W.side));
    char uuid[40];
    create("evs", NULL, uuid);
    json_t *job = finished(uuid);
    assert_string_equal(itest_execution(job), "succeeded");
    json_decref(job);

    json_t *ev = itest_events(&W.client, uuid);
    static const char *const types[] = {"created", "running", "step", "step", "finished"};
    assert_int_equal(json_array_size(ev), 5);
    for (size_t i = 0; i < 5; i++) {
        json_t *e = json_array_get(ev, i);
        assert_string_equal(itest_str_of(e, "type"), types[i]);
        assert_string_equal(itest_str_of(e, "job"), uuid);
        assert_true(json_integer_value(json_object_get(e, "time")) > 0);
    }
    assert_string_equal(itest_str_of(json_array_get(ev, 0), "workflow"), "evs");
    assert_string_equal(itest_str_of(json_array_get(ev, 1), "runner"), "r1");
    assert_string_equal(itest_str_of(json_array_get(ev, 2), "name"), "one");
    assert_string_equal(itest_str_of(json_array_get(ev, 2), "status"), "succeeded");
    assert_string_equal(itest_str_of(json_array_get(ev, 3), "name"), "two");
    assert_string_equal(itest_str_of(json_array_get(ev, 3), "status"), "succeeded");
    assert_string_equal(itest_str_of(json_array_get(ev, 4), "execution"), "succeeded");

    /* A new job has no stream of its own: the first watcher (here the wait for the end)
     * started it from the job's record, which told "created". */
    assert_true(json_is_true(json_object_get(json_array_get(ev, 0), "from_record")));
    assert_true(json_integer_value(json_object_get(json_array_get(ev, 2), "duration_ms")) >= 5);

    /* The global stream carried the same events as they happened, in the same order. */
    json_t *all = global_events(uuid);
    assert_int_equal(json_array_size(all), json_array_size(ev));
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *g = json_array_get(all, i), *e = json_array_get(ev, i);
        assert_string_equal(itest_str_of(g, "type"), itest_str_of(e, "type"));
        assert_null(json_object_get(g, "from_record"));
    }
    assert_string_equal(itest_str_of(json_array_get(all, 1), "runner"), "r1");
    assert_string_equal(itest_str_of(json_array_get(all, 2), "name"), "one");
    json_decref(all);
    json_decref(ev);
}

/* ---- 8. bad input ------------------------------------------------------------------ */

/* Stores `doc` through `ops` and returns the status; the message goes to msg. */
static int put_with(job_ops_t *ops, const json_t *doc, char *msg, size_t msglen)
{
    itest_answer_t a = {0};
    workflow_ops_put(ops, doc, itest_on_answer, &a);
    return itest_answer_wait(&W.client, &a, NULL, msg, msglen);
}

/* The description of the stored workflow `ref`. */
static char *stored_description(const char *ref)
{
    itest_answer_t a = {0};
    json_t *wf = NULL;
    workflow_ops_get(W.client.store, ref, itest_on_answer, &a);
    if (itest_answer_wait(&W.client, &a, &wf, NULL, 0) != 0)
        fail_msg("workflow %s: %s", ref, a.msg);
    char *d = strdup(itest_str_of(wf, "description"));
    json_decref(wf);
    return d;
}

static void assert_original_kept(long long keys)
{
    assert_int_equal(key_count("tern:wf:*"), keys);
    static const char *const refs[] = {"guarded", "guarded@1.0.0"};
    for (size_t i = 0; i < 2; i++) {
        char *d = stored_description(refs[i]);
        assert_string_equal(d, "the original");
        free(d);
    }
}

/* POSTs `body` to r1's API at `path` (one request, connection closed after) and
 * returns the HTTP status; the response body goes to out. Bounded by 10 s. */
static int http_post(const char *path, const char *body, char *out, size_t outlen)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)W.ternd.api_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        fail_msg("cannot connect to the API on port %d", W.ternd.api_port);
    char head[512];
    int n = snprintf(head, sizeof head,
                     "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     path, strlen(body));
    if (write(fd, head, (size_t)n) != n || write(fd, body, strlen(body)) != (ssize_t)strlen(body))
        fail_msg("cannot send a request to the API");
    char reply[8192];
    size_t len = 0;
    ssize_t got;
    while (len < sizeof reply - 1 && (got = read(fd, reply + len, sizeof reply - 1 - len)) > 0)
        len += (size_t)got;
    reply[len] = '\0';
    close(fd);
    int status = 0;
    if (sscanf(reply, "HTTP/1.%*d %d", &status) != 1)
        fail_msg("no HTTP answer from the API: %s", reply);
    const char *b = strstr(reply, "\r\n\r\n");
    snprintf(out, outlen, "%s", b != NULL ? b + 4 : "");
    return status;
}

static void test_bad_workflows_are_refused_and_change_nothing(void **state)
{
    (void)state;
    /* Job operations that know the tasks of the loaded plugins, as ternd's do. */
    char err[512];
    plugin_registry_t *reg =
        plugin_registry_new(W.ternd.plugin_dir, task_ctx_host(), err, sizeof err);
    if (reg == NULL)
        fail_msg("%s", err);
    assert_int_equal(plugin_registry_load_all(reg, NULL), 0);
    job_ops_opts_t jo = {.store = W.client.store, .plugins = reg};
    job_ops_t *ops = job_ops_new(&jo);

    char msg[1024];
    json_t *good = json_loads("{\"name\": \"guarded\", \"description\": \"the original\", "
                              "\"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}]}",
                              0, NULL);
    assert_int_equal(put_with(ops, good, msg, sizeof msg), 0);
    long long keys = key_count("tern:wf:*");
    assert_true(keys > 0);

    /* Bad definitions of the same name as a new version: each refused with its code
     * and the JSON path of the fault. */
    static const struct {
        const char *doc;
        int code;
        const char *path, *detail;
    } bad[] = {
        {"{\"name\": \"guarded\", \"version\": \"2.0.0\", \"chain\": [{\"name\": \"a\", "
         "\"task\": \"itest.nosuch\"}]}",
         TERN_EINVAL, "chain[0].task", "itest.nosuch"},
        {"{\"name\": \"guarded\", \"version\": \"2.0.0\", \"chain\": [{\"name\": \"a\", "
         "\"task\": \"core.log\", \"args\": {\"msg\": \"${nosuch.thing}\"}}]}",
         TERN_EINVAL, "chain[0].args.msg", "nosuch"},
        {"{\"name\": \"guarded\", \"version\": \"2.0.0\", \"chain\": [{\"name\": \"a\", "
         "\"task\": \"core.log\", \"args\": {\"msg\": \"${steps.later.result.x}\"}}, "
         "{\"name\": \"later\", \"task\": \"core.noop\"}]}",
         TERN_EINVAL, "chain[0].args.msg", "later"},
        {"{\"name\": \"guarded\", \"version\": \"2.0.0\", \"chain\": [{\"name\": \"a\", "
         "\"task\": \"core.noop\", \"retry\": {\"max_attempts\": 3, \"initial_ms\": -5}}]}",
         TERN_EINVAL, "chain[0].retry.initial_ms", "-5"},
        {"{\"name\": \"guarded\", \"version\": \"2.0.0\", \"chain\": [{\"name\": \"a\", "
         "\"task\": \"core.noop\"}, {\"name\": \"a\", \"task\": \"core.noop\"}]}",
         TERN_EINVAL, "chain[1].name", "duplicate"},
        {"{\"name\": \"guarded\", \"version\": \"2.0.0\", \"chain\": [{\"name\": \"a\", "
         "\"body\": \"function (job, cb) { return cb(null); }\"}]}",
         TERN_EINVAL, "chain[0].body", "not supported"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_error_t je;
        json_t *doc = json_loads(bad[i].doc, 0, &je);
        if (doc == NULL)
            fail_msg("test JSON does not parse: %s", je.text);
        int rc = put_with(ops, doc, msg, sizeof msg);
        json_decref(doc);
        print_message("refused (%d): %s\n", rc, msg);
        assert_int_equal(rc, bad[i].code);
        /* The message starts with the path of the fault, exactly. */
        size_t n = strlen(bad[i].path);
        assert_true(strncmp(msg, bad[i].path, n) == 0 && msg[n] == ':');
        assert_non_null(strstr(msg, bad[i].detail));
        assert_original_kept(keys);
    }

    /* A definition over the size limit. */
    size_t big = WORKFLOW_MAX_BYTES + 1024;
    char *text = malloc(big + 1);
    memset(text, 'x', big);
    text[big] = '\0';
    json_t *huge = json_deep_copy(good);
    json_object_set_new(huge, "version", json_string("2.0.0"));
    json_object_set_new(huge, "description", json_string(text));
    free(text);
    int rc = put_with(ops, huge, msg, sizeof msg);
    json_decref(huge);
    print_message("refused (%d): %s\n", rc, msg);
    assert_int_equal(rc, TERN_E2BIG);
    assert_non_null(strstr(msg, "WORKFLOW_MAX_BYTES"));
    assert_original_kept(keys);

    /* Another definition under a stored name and version is a conflict; the same one
     * again is not. */
    json_t *changed = json_deep_copy(good);
    json_object_set_new(changed, "description", json_string("a rewrite"));
    rc = put_with(ops, changed, msg, sizeof msg);
    json_decref(changed);
    assert_int_equal(rc, TERN_EEXIST);
    assert_non_null(strstr(msg, "guarded"));
    assert_original_kept(keys);
    assert_int_equal(put_with(ops, good, msg, sizeof msg), 0);
    assert_original_kept(keys);
    json_decref(good);

    /* Through the HTTP API: text that is not JSON, and a fault of the definition, which
     * is the client's (not a missing resource). */
    char body[8192];
    int status =
        http_post("/workflows", "{\"name\": \"guarded\", \"version\": \"2.0.0\", \"chain\": [",
                  body, sizeof body);
    print_message("HTTP %d: %s\n", status, body);
    assert_int_equal(status, 400);
    assert_non_null(strstr(body, "line 1, column"));
    assert_original_kept(keys);
    status = http_post("/workflows", bad[0].doc, body, sizeof body);
    print_message("HTTP %d: %s\n", status, body);
    assert_int_equal(status, 409);
    assert_non_null(strstr(body, "InvalidArgument"));
    assert_non_null(strstr(body, "chain[0].task: unknown task"));
    assert_original_kept(keys);

    job_ops_free(ops);
    plugin_registry_free(reg);
}

static void test_bad_jobs_are_refused_or_fail_visibly(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"needs-param\", \"chain\": [{\"name\": \"use\", \"task\": "
                  "\"itest.record\", \"retry\": {\"max_attempts\": 3, \"initial_ms\": 10}, "
                  "\"args\": {\"file\": \"%s\", \"ms\": \"${params.missing}\"}}]}",
                  W.side));
    long long jobs = itest_jobs_indexed(&W.redis);
    char uuid[40], msg[1024];
    assert_int_equal(
        itest_job_create(&W.client, "no-such-workflow", NULL, NULL, 0, NULL, uuid, msg, sizeof msg),
        TERN_ENOENT);
    assert_non_null(strstr(msg, "no-such-workflow"));
    assert_int_equal(
        itest_job_create(&W.client, "needs-param", "[1, 2]", NULL, 0, NULL, uuid, msg, sizeof msg),
        TERN_EINVAL);
    assert_non_null(strstr(msg, "params"));
    /* Over the client's params limit (job_ops' default, 256 KiB). */
    size_t big = 300 * 1024;
    char *params = malloc(big + 32);
    snprintf(params, big + 32, "{\"blob\": \"");
    size_t at = strlen(params);
    memset(params + at, 'x', big);
    snprintf(params + at + big, 32, "\"}");
    int rc =
        itest_job_create(&W.client, "needs-param", params, NULL, 0, NULL, uuid, msg, sizeof msg);
    free(params);
    assert_int_equal(rc, TERN_E2BIG);
    assert_non_null(strstr(msg, "params"));
    assert_int_equal(itest_jobs_indexed(&W.redis), jobs);

    /* A template naming a param the job lacks: the step fails once, not retried, and
     * the job fails with the reason on record. */
    create("needs-param", "{\"other\": 1}", uuid);
    json_t *job = finished(uuid);
    assert_string_equal(itest_execution(job), "failed");
    json_t *error = json_object_get(job, "error");
    assert_string_equal(itest_str_of(error, "code"), "TemplateError");
    assert_non_null(strstr(itest_str_of(error, "message"), "params.missing"));
    json_t *entry = json_array_get(json_object_get(job, "chain_results"), 0);
    assert_string_equal(itest_str_of(json_object_get(entry, "error"), "code"), "TemplateError");
    assert_int_equal(json_integer_value(json_object_get(entry, "attempts")), 1);
    json_decref(job);
    json_t *ev = itest_events(&W.client, uuid);
    assert_int_equal(itest_count_events(ev, "step", "retry"), 0);
    assert_int_equal(itest_count_events(ev, "step", "failed"), 1);
    assert_string_equal(itest_str_of(event_of(ev, "finished", NULL, 0), "execution"), "failed");
    json_decref(ev);
    char key[64];
    snprintf(key, sizeof key, "%s/", uuid);
    assert_int_equal(itest_side_count(W.side, "start", key), 0);

    /* Arguments that do not fit the task once expanded: refused before the task runs,
     * with the path of the argument. */
    put("{\"name\": \"say\", \"chain\": [{\"name\": \"say\", \"task\": \"core.log\", "
        "\"retry\": 3, \"args\": {\"msg\": \"${params.m}\"}}]}");
    create("say", "{\"m\": 5}", uuid);
    job = finished(uuid);
    assert_string_equal(itest_execution(job), "failed");
    error = json_object_get(job, "error");
    assert_string_equal(itest_str_of(error, "code"), "InvalidArgument");
    print_message("refused at run time: %s\n", itest_str_of(error, "message"));
    assert_non_null(strstr(itest_str_of(error, "message"), "chain[0].args.msg:"));
    assert_null(strstr(itest_str_of(error, "message"), "args.args"));
    entry = json_array_get(json_object_get(job, "chain_results"), 0);
    assert_int_equal(json_integer_value(json_object_get(entry, "attempts")), 1);
    json_decref(job);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_job_hold_serializes_one_vm, test_teardown),
        cmocka_unit_test_teardown(test_job_hold_wait_frees_the_runner_slot, test_teardown),
        cmocka_unit_test_teardown(test_capacity_is_counted_and_fifo, test_teardown),
        cmocka_unit_test_teardown(test_templated_capacity_from_admission, test_teardown),
        cmocka_unit_test_teardown(test_holds_released_on_failure_and_cancel, test_teardown),
        cmocka_unit_test_teardown(test_hold_events_tell_a_plugin_stream, test_teardown),
        cmocka_unit_test_teardown(test_step_hold_covers_only_its_step, test_teardown),
        cmocka_unit_test_teardown(test_named_queue_needs_its_runner, test_teardown),
        cmocka_unit_test_teardown(test_exec_after_on_time_without_heartbeat, test_teardown),
        cmocka_unit_test_teardown(test_event_streams, test_teardown),
        cmocka_unit_test_teardown(test_bad_workflows_are_refused_and_change_nothing, test_teardown),
        cmocka_unit_test_teardown(test_bad_jobs_are_refused_or_fail_visibly, test_teardown),
    };
    int failures = cmocka_run_group_tests(tests, group_setup, group_teardown);
    return failures == 0 ? 0 : 1;
}
