/*
 * test_retention.c -- limits on what a job keeps in Redis, on a real ternd and
 * redis-server: a finished job is deleted with all its keys after the retention and
 * leaves the listings, an unfinished job never expires, a redriven job loses its
 * expiry, the default retention is 30 days, and a job's event stream stays within its
 * cap.
 *
 * Expiry has no event to wait on, so those waits poll Redis, bounded.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "base/clock.h"
#include "http_sync.h"
#include "world.h"

/* The hidden test setting: finished jobs expire 2 s after they end. */
#define RETENTION_MS 2000
/* The event caps of the second group and the stream node size it sets. */
#define CAP_JOB      5
#define CAP_GLOBAL   20
#define NODE_ENTRIES 10

static itest_world_t W;

static int retention_setup(void **state)
{
    (void)state;
    itest_world_start(&W, "ret1", itest_fmt("{\"retention_ms\": %d}", RETENTION_MS), NULL);
    return 0;
}

static int caps_setup(void **state)
{
    (void)state;
    itest_world_start(&W, "cap1",
                      itest_fmt("{\"event_stream_max\": %d, \"global_event_stream_max\": %d}",
                                CAP_JOB, CAP_GLOBAL),
                      NULL);
    /* Approximate trimming (MAXLEN ~) removes whole stream nodes only: a stream may
     * exceed its cap by less than one node. Small nodes make that bound tight. */
    char *ok = itest_redis_str(&W.redis, "CONFIG SET stream-node-max-entries %d", NODE_ENTRIES);
    assert_non_null(ok);
    free(ok);
    return 0;
}

/* A slow heartbeat, so that "at once" and "at the next heartbeat" are told apart. */
#define SWEEP_HEARTBEAT_MS 4000
#define SWEEP_JOBS         1100 /* more than tick.lua deletes in one call (1,000) */

static int sweep_setup(void **state)
{
    (void)state;
    char heartbeat[16];
    snprintf(heartbeat, sizeof heartbeat, "%d", SWEEP_HEARTBEAT_MS);
    const char *slow[] = {"--heartbeat-ms", heartbeat, "--lease-ms", "20000", NULL};
    itest_world_start(&W, "sweep1", itest_fmt("{\"retention_ms\": %d}", RETENTION_MS), slow);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    itest_world_stop(&W, 10000);
    return 0;
}

static void create(const char *workflow, char uuid[40])
{
    char msg[1024];
    if (itest_job_create(&W.client, workflow, NULL, NULL, 0, NULL, uuid, msg, sizeof msg) != 0)
        fail_msg("job create refused: %s", msg);
}

static json_t *finished(const char *uuid)
{
    return itest_wait_finished_ok(&W.client, uuid, 20000);
}

/* How many keys tern:job:<uuid>* exist. */
static long long job_keys(const char *uuid)
{
    return itest_redis_int(&W.redis, "EVAL %s 0 %s", "return #redis.call('KEYS', ARGV[1])",
                           itest_fmt("tern:job:%s*", uuid));
}

/* How many keys tern:job:<uuid>* exist without an expiry. */
static long long job_keys_persistent(const char *uuid)
{
    return itest_redis_int(&W.redis, "EVAL %s 0 %s",
                           "local n = 0 "
                           "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do "
                           "if redis.call('PTTL', k) == -1 then n = n + 1 end end "
                           "return n",
                           itest_fmt("tern:job:%s*", uuid));
}

/* Milliseconds until the job's keys are deleted (its time in tern:expiring, on Redis's
 * clock), or -1 when no deletion is scheduled. */
static long long deletion_in_ms(const char *uuid)
{
    return itest_redis_int(&W.redis, "EVAL %s 0 %s",
                           "local s = redis.call('ZSCORE', 'tern:expiring', ARGV[1]) "
                           "if not s then return -1 end "
                           "local t = redis.call('TIME') "
                           "return tonumber(s) - (tonumber(t[1]) * 1000 + "
                           "math.floor(tonumber(t[2]) / 1000))",
                           uuid);
}

/* True when the uuid is in the sorted set `key`. */
static bool indexed(const char *key, const char *uuid)
{
    char *score = itest_redis_str(&W.redis, "ZSCORE %s %s", key, uuid);
    bool found = score != NULL;
    free(score);
    return found;
}

/* True when GET /jobs?limit=1000 lists the job. */
static bool listed(const char *uuid)
{
    http_sync_t h;
    http_sync_open(&h, W.base);
    http_sync_resp_t r;
    http_sync_do(&h, "GET", "/jobs?limit=1000", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_true(json_is_array(r.json));
    bool found = false;
    size_t i;
    json_t *job;
    json_array_foreach(r.json, i, job)
    {
        if (strcmp(json_string_value(json_object_get(job, "uuid")), uuid) == 0)
            found = true;
    }
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
    return found;
}

/* The HTTP status of GET /jobs/<uuid>. */
static long get_status(const char *uuid)
{
    http_sync_t h;
    http_sync_open(&h, W.base);
    http_sync_resp_t r;
    http_sync_do(&h, "GET", itest_fmt("/jobs/%s", uuid), NULL, 0, NULL, &r);
    long status = r.status;
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
    return status;
}

/* Polls (every 50 ms, at most `ms`) until the job has no key left; returns whether it
 * got there. */
static bool wait_keys_gone(const char *uuid, unsigned ms)
{
    for (unsigned waited = 0; waited <= ms; waited += 50) {
        if (job_keys(uuid) == 0)
            return true;
        itest_pause_ms(50);
    }
    return false;
}

/* Polls until the job left tern:jobs:<execution> and tern:expiring (a runner's heartbeat
 * cleans the indexes); returns whether it did within `ms`. */
static bool wait_unindexed(const char *uuid, const char *execution, unsigned ms)
{
    for (unsigned waited = 0; waited <= ms; waited += 50) {
        if (!indexed(itest_fmt("tern:jobs:%s", execution), uuid) && !indexed("tern:expiring", uuid))
            return true;
        itest_pause_ms(50);
    }
    return false;
}

/* ---- retention ---------------------------------------------------------------------- */

static void test_finished_job_expires_unfinished_does_not(void **state)
{
    (void)state;
    itest_workflow_put_ok(&W.client, "{\"name\": \"quick\", \"chain\": [{\"name\": \"a\", "
                                     "\"task\": \"core.log\", \"args\": {\"msg\": \"hi\"}}]}");
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"parked\", \"chain\": [{\"name\": \"w\", "
                                    "\"task\": \"itest.wait\", \"args\": {\"file\": \"%s\"}}]}",
                                    W.side));
    char live[40], done[40];
    create("parked", live);
    json_t *ev = itest_wait_event(&W.client, live, "waiting", NULL, 20000);
    if (ev == NULL)
        fail_msg("job %s did not start waiting within 20 s", live);
    json_decref(ev);
    create("quick", done);
    json_t *job = finished(done);
    assert_string_equal(itest_execution(job), "succeeded");
    json_decref(job);

    /* The finished job is to be deleted within the retention; it is still readable
     * until then. */
    long long left = deletion_in_ms(done);
    assert_true(left > 0 && left <= RETENTION_MS);
    assert_true(job_keys(done) >= 3); /* the job, its results and its events at least */
    /* The unfinished job is not to be deleted, and none of its keys expires. */
    assert_int_equal(deletion_in_ms(live), -1);
    assert_true(job_keys(live) >= 2);
    assert_int_equal(job_keys_persistent(live), job_keys(live));

    /* A key created after the end (the job's info list) goes with the job's other keys
     * (wait_keys_gone below counts every key of the job). */
    http_sync_t h;
    http_sync_open(&h, W.base);
    http_sync_resp_t r;
    const char *body = "{\"message\": {\"late\": \"note\"}}";
    http_sync_do(&h, "POST", itest_fmt("/jobs/%s/info", done), body, strlen(body), NULL, &r);
    assert_int_equal(r.status, 200);
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
    assert_int_equal(itest_redis_int(&W.redis, "LLEN tern:job:%s:info", done), 1);

    if (!wait_keys_gone(done, RETENTION_MS + 10000))
        fail_msg("job %s still has keys long after its retention", done);
    assert_int_equal(get_status(done), 404);
    if (!wait_unindexed(done, "succeeded", 10000))
        fail_msg("job %s is still in the job indexes", done);
    assert_false(listed(done));

    /* The retention has passed for the unfinished job too: it is all still there. */
    assert_int_equal(job_keys_persistent(live), job_keys(live));
    assert_true(indexed("tern:jobs:waiting", live));
    assert_true(listed(live));
    assert_int_equal(get_status(live), 200);
    char msg[1024];
    assert_int_equal(itest_job_cancel(&W.client, live, msg, sizeof msg), 0);
}

static void test_redriven_job_loses_expiry(void **state)
{
    (void)state;
    /* Fails once (no retries), then succeeds; then waits, so that the redriven job
     * stays live while the test looks at it. */
    itest_workflow_put_ok(
        &W.client,
        itest_fmt("{\"name\": \"once\", \"chain\": [{\"name\": \"f\", \"task\": \"itest.flaky\", "
                  "\"args\": {\"file\": \"%s\", \"fail_times\": 1}}, {\"name\": \"w\", "
                  "\"task\": \"itest.wait\", \"args\": {\"file\": \"%s\"}}]}",
                  W.side, W.side));
    char uuid[40];
    create("once", uuid);
    json_t *job = finished(uuid);
    assert_string_equal(itest_execution(job), "failed");
    json_decref(job);
    assert_true(deletion_in_ms(uuid) > 0);

    char msg[1024];
    if (itest_job_redrive(&W.client, uuid, NULL, NULL, msg, sizeof msg) != 0)
        fail_msg("redrive refused: %s", msg);
    json_t *ev = itest_wait_event(&W.client, uuid, "waiting", NULL, 20000);
    if (ev == NULL)
        fail_msg("redriven job %s did not reach its wait step within 20 s", uuid);
    json_decref(ev);
    assert_int_equal(deletion_in_ms(uuid), -1);
    assert_int_equal(job_keys_persistent(uuid), job_keys(uuid));

    /* Past the retention it is still there, and when it ends again it expires again. */
    itest_pause_ms(RETENTION_MS + 200);
    assert_int_equal(get_status(uuid), 200);
    assert_int_equal(job_keys_persistent(uuid), job_keys(uuid));
    assert_int_equal(itest_job_resume(&W.client, uuid, "{\"ok\": true}", NULL, msg, sizeof msg), 0);
    /* The stream still holds the first run's "finished" event: wait for the second. */
    ev = itest_wait_event_nth(&W.client, uuid, "finished", NULL, -1, 2, 20000);
    if (ev == NULL)
        fail_msg("redriven job %s did not finish again within 20 s", uuid);
    json_decref(ev);
    assert_true(indexed("tern:jobs:succeeded", uuid));
    assert_true(deletion_in_ms(uuid) > 0);
    if (!wait_keys_gone(uuid, RETENTION_MS + 10000))
        fail_msg("job %s still has keys long after its retention", uuid);
}

/* ---- deletion keeps up ------------------------------------------------------------- */

/* How many jobs are due for deletion (in tern:expiring). */
static long long due_for_deletion(void)
{
    return itest_redis_int(&W.redis, "ZCARD tern:expiring");
}

/* More finished jobs than one tick deletes: the runner deletes the rest at once, not a
 * heartbeat later, so deletion keeps up with any rate of jobs ending. */
static void test_deletion_goes_on_while_jobs_are_due(void **state)
{
    (void)state;
    itest_workflow_put_ok(&W.client, "{\"name\": \"many\", \"chain\": [{\"name\": \"n\", "
                                     "\"task\": \"core.noop\"}]}");
    static itest_answer_t answers[SWEEP_JOBS];
    memset(answers, 0, sizeof answers);
    for (int i = 0; i < SWEEP_JOBS; i++) {
        job_create_req_t req = {.workflow = "many"};
        job_ops_create(W.client.ops, &req, itest_on_answer, &answers[i]);
    }
    for (int i = 0; i < SWEEP_JOBS; i++)
        if (itest_answer_wait(&W.client, &answers[i], NULL, NULL, 0) != 0)
            fail_msg("create %d refused: %s", i, answers[i].msg);
    /* Every job ends (and is given its time of deletion) within the bound. */
    uint64_t t0 = clock_mono_ms();
    while (due_for_deletion() < SWEEP_JOBS && clock_mono_ms() - t0 < 30000)
        itest_pause_ms(50);
    assert_int_equal(due_for_deletion(), SWEEP_JOBS);
    /* The runner is held still until every job is due, so that its next tick finds
     * them all: it deletes 1,000, and the rest in the tick it asks for at once, well
     * before its next heartbeat. */
    assert_int_equal(kill(W.ternd.pid, SIGSTOP), 0);
    long long last_due = itest_redis_int(&W.redis, "EVAL %s 0",
                                         "local s = redis.call('ZRANGE', 'tern:expiring', -1, -1, "
                                         "'WITHSCORES') return tonumber(s[2])");
    t0 = clock_mono_ms();
    while (itest_redis_int(&W.redis, "EVAL %s 0",
                           "local t = redis.call('TIME') return tonumber(t[1]) * 1000 + "
                           "math.floor(tonumber(t[2]) / 1000)") <= last_due &&
           clock_mono_ms() - t0 < RETENTION_MS + 5000)
        itest_pause_ms(50);
    assert_int_equal(kill(W.ternd.pid, SIGCONT), 0);
    /* Its first tick comes within a heartbeat; from then on, the rest must go well
     * before the next one. */
    t0 = clock_mono_ms();
    while (due_for_deletion() == SWEEP_JOBS && clock_mono_ms() - t0 < 2 * SWEEP_HEARTBEAT_MS)
        itest_pause_ms(10);
    if (due_for_deletion() == SWEEP_JOBS)
        fail_msg("no job was deleted within %d ms of the runner going on", 2 * SWEEP_HEARTBEAT_MS);
    t0 = clock_mono_ms();
    while (due_for_deletion() > 0 && clock_mono_ms() - t0 < SWEEP_HEARTBEAT_MS / 2)
        itest_pause_ms(10);
    assert_int_equal(due_for_deletion(), 0);
    assert_int_equal(itest_job_hashes(&W.redis), 0);
}

/* ---- default retention and event caps ------------------------------------------------ */

static void test_default_retention_is_30_days(void **state)
{
    (void)state;
    itest_workflow_put_ok(&W.client, "{\"name\": \"quick\", \"chain\": [{\"name\": \"a\", "
                                     "\"task\": \"core.log\", \"args\": {\"msg\": \"hi\"}}]}");
    char uuid[40];
    create("quick", uuid);
    json_decref(finished(uuid));
    long long day = 24LL * 3600 * 1000;
    long long left = deletion_in_ms(uuid);
    assert_true(left > 30 * day - 60000 && left <= 30 * day);
}

static void test_event_streams_stay_within_caps(void **state)
{
    (void)state;
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"parked\", \"chain\": [{\"name\": \"w\", "
                                    "\"task\": \"itest.wait\", \"args\": {\"file\": \"%s\"}}]}",
                                    W.side));
    char uuid[40];
    create("parked", uuid);
    json_t *ev = itest_wait_event(&W.client, uuid, "waiting", NULL, 20000);
    if (ev == NULL)
        fail_msg("job %s did not start waiting within 20 s", uuid);
    json_decref(ev);
    /* Each info entry appends an event: the streams are measured after every one. */
    http_sync_t h;
    http_sync_open(&h, W.base);
    long long most = 0, most_global = 0;
    for (int i = 0; i < 60; i++) {
        http_sync_resp_t r;
        char body[64];
        snprintf(body, sizeof body, "{\"message\": {\"n\": \"%d\"}}", i);
        http_sync_do(&h, "POST", itest_fmt("/jobs/%s/info", uuid), body, strlen(body), NULL, &r);
        assert_int_equal(r.status, 200);
        http_sync_resp_dispose(&r);
        long long n = itest_redis_int(&W.redis, "XLEN tern:job:%s:events", uuid);
        long long g = itest_redis_int(&W.redis, "XLEN tern:events");
        most = n > most ? n : most;
        most_global = g > most_global ? g : most_global;
    }
    http_sync_close(&h);
    print_message("job stream: %lld at most, global stream: %lld at most\n", most, most_global);
    assert_int_equal(itest_redis_int(&W.redis, "LLEN tern:job:%s:info", uuid), 60);
    assert_true(most >= CAP_JOB);
    assert_true(most < CAP_JOB + NODE_ENTRIES);
    assert_true(most_global >= CAP_GLOBAL);
    assert_true(most_global < CAP_GLOBAL + NODE_ENTRIES);
    char msg[1024];
    assert_int_equal(itest_job_cancel(&W.client, uuid, msg, sizeof msg), 0);
}

int main(void)
{
    const struct CMUnitTest retention[] = {
        cmocka_unit_test(test_finished_job_expires_unfinished_does_not),
        cmocka_unit_test(test_redriven_job_loses_expiry),
    };
    const struct CMUnitTest sweep[] = {
        cmocka_unit_test(test_deletion_goes_on_while_jobs_are_due),
    };
    const struct CMUnitTest caps[] = {
        cmocka_unit_test(test_default_retention_is_30_days),
        cmocka_unit_test(test_event_streams_stay_within_caps),
    };
    int failed =
        cmocka_run_group_tests_name("retention", retention, retention_setup, group_teardown);
    failed += cmocka_run_group_tests_name("sweep", sweep, sweep_setup, group_teardown);
    failed += cmocka_run_group_tests_name("event_caps", caps, caps_setup, group_teardown);
    return failed;
}
