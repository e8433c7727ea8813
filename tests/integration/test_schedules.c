/*
 * test_schedules.c -- recurring schedules against real ternd processes and a real
 * redis-server: the API (create, list, get, pause, resume, delete, and bad input
 * refused with nothing stored), one job per tick carrying its schedule and tick time,
 * exactly one job per tick across three ternds while one is killed with SIGKILL, one
 * catch-up job after every ternd was down across several ticks, and overlap "skip"
 * against "queue" with jobs that wait until resumed.
 *
 * Every schedule here ticks each second, so a test lasts a few seconds. Waits poll
 * GET /jobs or GET /schedules/:uuid (a tick has no event of its own), bounded.
 */
#include <signal.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_calls.h"
#include "base/clock.h"
#include "base/iso8601.h"
#include "model/schedule.h"
#include "ops/schedule_fire.h"
#include "world.h"

static itest_fleet_world_t W;
static char side[400]; /* the side channel of the "waiter" workflow's steps */

static int group_setup(void **state)
{
    (void)state;
    itest_fleet_world_start(&W);
    itest_fleet_world_side_path(&W, side, sizeof side, "waiter");
    itest_workflow_put_ok(&W.client, "{\"name\": \"quick\", \"chain\": [{\"name\": \"a\", "
                                     "\"task\": \"core.noop\"}]}");
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"waiter\", \"chain\": [{\"name\": \"w\", "
                                    "\"task\": \"itest.wait\", \"args\": {\"file\": \"%s\"}}]}",
                                    side));
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    itest_fleet_world_stop(&W, 10000);
    return 0;
}

/* After each test: its ternds stopped, and its schedules gone so none fires into the
 * next test. */
static int teardown(void **state)
{
    (void)state;
    itest_fleet_stop(&W.fleet, 10000);
    itest_redis_int(&W.redis, "DEL tern:sched:due tern:sched:all tern:sched:names");
    return 0;
}

static void open_api(http_sync_t *h, const itest_ternd_t *t)
{
    http_sync_open(h, itest_fmt("http://127.0.0.1:%d", t->api_port));
}

/* POST /schedules with `body`, which must be accepted; its uuid into uuid. */
static void schedule_create_ok(http_sync_t *h, const char *body, char uuid[40])
{
    http_sync_resp_t r;
    itest_api_call(h, &r, "POST", "/schedules", body);
    if (r.status != 201)
        fail_msg("schedule refused (%ld): %s", r.status, r.body);
    snprintf(uuid, 40, "%s", itest_str_of(r.json, "uuid"));
    http_sync_resp_dispose(&r);
}

/* GET /schedules/<uuid> (new reference), which must answer 200. */
static json_t *schedule_get(http_sync_t *h, const char *uuid)
{
    http_sync_resp_t r;
    itest_api_call(h, &r, "GET", itest_fmt("/schedules/%s", uuid), NULL);
    itest_expect_status(&r, 200);
    json_t *v = json_incref(r.json);
    http_sync_resp_dispose(&r);
    return v;
}

static long long count_of(const json_t *schedule, const char *key)
{
    return (long long)json_integer_value(json_object_get(schedule, key));
}

typedef struct tick_job {
    char uuid[40];
    char execution[16];
    int64_t tick; /* params.scheduled_for, ms */
} tick_job_t;

static int by_tick(const void *a, const void *b)
{
    const tick_job_t *x = a, *y = b;
    return x->tick < y->tick ? -1 : x->tick > y->tick;
}

#define MAX_JOBS 200

/* The jobs of schedule `uuid`, by tick time, at most MAX_JOBS; each must carry its
 * schedule and a tick time. */
static size_t schedule_jobs(http_sync_t *h, const char *uuid, tick_job_t *out)
{
    http_sync_resp_t r;
    itest_api_call(h, &r, "GET", "/jobs?limit=1000", NULL);
    itest_expect_status(&r, 200);
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(r.json) && n < MAX_JOBS; i++) {
        const json_t *job = json_array_get(r.json, i);
        const json_t *params = json_object_get(job, "params");
        if (strcmp(itest_str_of(params, "schedule_uuid"), uuid) != 0)
            continue;
        uint64_t ms = 0;
        if (iso8601_parse_ms(itest_str_of(params, "scheduled_for"), &ms) != 0)
            fail_msg("job %s: scheduled_for is %s", itest_str_of(job, "uuid"),
                     itest_str_of(params, "scheduled_for"));
        snprintf(out[n].uuid, sizeof out[n].uuid, "%s", itest_str_of(job, "uuid"));
        snprintf(out[n].execution, sizeof out[n].execution, "%s", itest_execution(job));
        out[n].tick = (int64_t)ms;
        n++;
    }
    http_sync_resp_dispose(&r);
    qsort(out, n, sizeof *out, by_tick);
    return n;
}

/* Waits until schedule `uuid` has at least `want` jobs (at most timeout_ms); returns
 * how many it has. */
static size_t wait_jobs(http_sync_t *h, const char *uuid, size_t want, unsigned timeout_ms,
                        tick_job_t *out)
{
    uint64_t until = clock_mono_ms() + timeout_ms;
    size_t n;
    while ((n = schedule_jobs(h, uuid, out)) < want) {
        if (clock_mono_ms() > until)
            fail_msg("schedule %s: %zu jobs after %u ms, expected %zu", uuid, n, timeout_ms, want);
        itest_pause_ms(100);
    }
    return n;
}

/* Asserts that no two jobs share a tick and that ticks are whole seconds apart. */
static void ticks_unique(const tick_job_t *jobs, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        if (jobs[i].tick == jobs[i - 1].tick)
            fail_msg("tick %lld has two jobs: %s and %s", (long long)jobs[i].tick, jobs[i - 1].uuid,
                     jobs[i].uuid);
        if ((jobs[i].tick - jobs[0].tick) % 1000 != 0)
            fail_msg("tick %lld is not a whole number of seconds after %lld",
                     (long long)jobs[i].tick, (long long)jobs[0].tick);
    }
}

static void test_api_and_bad_input(void **state)
{
    (void)state;
    itest_ternd_t *t = itest_fleet_start(&W.fleet, &W.redis, &W.dir, "sched-api", "default", NULL);
    http_sync_t h;
    open_api(&h, t);
    http_sync_resp_t r;

    /* Bad input: 409 InvalidArgument naming the member and the fault; nothing stored. */
    static const char *const bad[][2] = {
        {"{\"workflow\": \"quick\", \"cron\": \"61 * * * *\"}",
         "cron: minute \"61\": 61 is out of range 0-59"},
        {"{\"workflow\": \"quick\", \"cron\": \"* * *\"}", "cron: expected 5 fields"},
        {"{\"workflow\": \"quick\", \"every\": \"500ms\"}", "every: \"500ms\" is under one second"},
        {"{\"workflow\": \"quick\", \"cron\": \"0 3 * * *\", \"time_zone\": \"Mars/Base\"}",
         "time_zone: unknown time zone \"Mars/Base\""},
        {"{\"workflow\": \"quick\", \"every\": \"1s\", \"overlap\": \"wait\"}",
         "overlap: expected \"skip\" or \"queue\""},
        {"{\"workflow\": \"nope\", \"every\": \"1s\"}", "workflow: no workflow \"nope\""},
        {"{\"workflow\": \"quick\", \"every\": \"1s\", \"bogus\": 1}", "bogus: unknown member"},
        {"{\"every\": \"1s\"}", "workflow: required"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        itest_api_call(&h, &r, "POST", "/schedules", bad[i][0]);
        itest_expect_error(&r, 409, "InvalidArgument", bad[i][1]);
        http_sync_resp_dispose(&r);
    }
    itest_api_call(&h, &r, "GET", "/schedules", NULL);
    itest_expect_status(&r, 200);
    assert_int_equal(json_array_size(r.json), 0);
    http_sync_resp_dispose(&r);
    assert_int_equal(itest_redis_int(&W.redis, "EXISTS tern:sched:all tern:sched:due"), 0);

    /* Create: 201, Location, the definition normalized and the schedule's state. */
    itest_api_call(&h, &r, "POST", "/schedules",
                   "{\"workflow\": \"quick\", \"cron\": \"0 3 * * *\", \"time_zone\": "
                   "\"Europe/Paris\", \"params\": {\"n\": 1}, \"target\": \"t1\"}");
    itest_expect_status(&r, 201);
    char uuid[40], location[120];
    snprintf(uuid, sizeof uuid, "%s", itest_str_of(r.json, "uuid"));
    assert_string_equal(http_sync_header(&r, "Location", location, sizeof location),
                        itest_fmt("/schedules/%s", uuid));
    assert_string_equal(itest_str_of(r.json, "overlap"), "skip");
    assert_string_equal(itest_str_of(r.json, "time_zone"), "Europe/Paris");
    assert_string_equal(itest_str_of(r.json, "target"), "t1");
    assert_true(json_is_false(json_object_get(r.json, "paused")));
    assert_true(json_is_null(json_object_get(r.json, "last_run")));
    assert_true(json_is_null(json_object_get(r.json, "last_job_uuid")));
    assert_int_equal(count_of(r.json, "fired"), 0);
    assert_int_equal(count_of(r.json, "skipped"), 0);
    /* 03:00 in Paris is 01:00Z or 02:00Z. */
    const char *next = itest_str_of(r.json, "next_run");
    assert_true(strstr(next, "T01:00:00.000Z") != NULL || strstr(next, "T02:00:00.000Z") != NULL);
    http_sync_resp_dispose(&r);

    json_t *s = schedule_get(&h, uuid);
    assert_string_equal(itest_str_of(s, "uuid"), uuid);
    assert_string_equal(itest_str_of(s, "cron"), "0 3 * * *");
    json_decref(s);
    itest_api_call(&h, &r, "GET", "/schedules", NULL);
    assert_int_equal(json_array_size(r.json), 1);
    http_sync_resp_dispose(&r);

    /* Pause: no next run, out of the due set; resume: a next run again. */
    itest_api_call(&h, &r, "POST", itest_fmt("/schedules/%s/pause", uuid), NULL);
    itest_expect_status(&r, 200);
    assert_true(json_is_true(json_object_get(r.json, "paused")));
    assert_true(json_is_null(json_object_get(r.json, "next_run")));
    http_sync_resp_dispose(&r);
    assert_int_equal(itest_redis_int(&W.redis, "ZCARD tern:sched:due"), 0);
    itest_api_call(&h, &r, "POST", itest_fmt("/schedules/%s/resume", uuid), NULL);
    itest_expect_status(&r, 200);
    assert_true(json_is_false(json_object_get(r.json, "paused")));
    assert_true(json_is_string(json_object_get(r.json, "next_run")));
    http_sync_resp_dispose(&r);
    assert_int_equal(itest_redis_int(&W.redis, "ZCARD tern:sched:due"), 1);

    /* A clock gone back: a tick at or before the last one fired (here, stored an hour
     * ahead of this clock) is never due again; the schedule resumes after it. */
    long long ahead = (long long)clock_wall_ms() + 3600 * 1000;
    itest_api_call(&h, &r, "POST", itest_fmt("/schedules/%s/pause", uuid), NULL);
    http_sync_resp_dispose(&r);
    itest_redis_int(&W.redis, "HSET tern:sched:%s last_run %lld", uuid, ahead);
    itest_api_call(&h, &r, "POST", itest_fmt("/schedules/%s/resume", uuid), NULL);
    itest_expect_status(&r, 200);
    uint64_t next_ms = 0;
    assert_int_equal(iso8601_parse_ms(itest_str_of(r.json, "next_run"), &next_ms), 0);
    assert_true((long long)next_ms > ahead);
    http_sync_resp_dispose(&r);

    /* Delete: 204, then 404 for it. */
    itest_api_call(&h, &r, "DELETE", itest_fmt("/schedules/%s", uuid), NULL);
    itest_expect_status(&r, 204);
    http_sync_resp_dispose(&r);
    itest_api_call(&h, &r, "GET", itest_fmt("/schedules/%s", uuid), NULL);
    itest_expect_error(&r, 404, "ResourceNotFound", uuid);
    http_sync_resp_dispose(&r);
    itest_api_call(&h, &r, "DELETE", itest_fmt("/schedules/%s", uuid), NULL);
    itest_expect_status(&r, 404);
    http_sync_resp_dispose(&r);
    itest_api_call(&h, &r, "POST", "/schedules/not-a-uuid/pause", NULL);
    itest_expect_status(&r, 404);
    http_sync_resp_dispose(&r);
    assert_int_equal(itest_redis_int(&W.redis, "EXISTS tern:sched:all tern:sched:due"), 0);
    http_sync_close(&h);
}

static void test_one_job_per_tick(void **state)
{
    (void)state;
    itest_ternd_t *t = itest_fleet_start(&W.fleet, &W.redis, &W.dir, "sched-tick", "default", NULL);
    http_sync_t h;
    open_api(&h, t);
    char uuid[40];
    schedule_create_ok(
        &h, "{\"workflow\": \"quick\", \"every\": \"1s\", \"params\": {\"k\": \"v\"}}", uuid);
    tick_job_t jobs[MAX_JOBS];
    size_t n = wait_jobs(&h, uuid, 3, 8000, jobs);
    ticks_unique(jobs, n);
    /* Ticks one second apart: a firer late by more than a tick (a loaded machine) fires
     * the tick it is at and goes on from now, so a gap of a few seconds is allowed, a
     * tick made twice (ticks_unique) never. */
    int one_second = 0;
    for (size_t i = 1; i < n; i++) {
        assert_true(jobs[i].tick - jobs[i - 1].tick <= 3000);
        one_second += jobs[i].tick - jobs[i - 1].tick == 1000;
    }
    assert_true(one_second >= 1);
    json_t *job = itest_wait_finished_ok(&W.client, jobs[0].uuid, 5000);
    const json_t *params = json_object_get(job, "params");
    assert_string_equal(itest_str_of(params, "k"), "v");
    assert_string_equal(itest_str_of(params, "schedule_uuid"), uuid);
    json_decref(job);

    json_t *s = schedule_get(&h, uuid);
    assert_true(count_of(s, "fired") >= 3);
    assert_int_equal(count_of(s, "skipped"), 0);
    assert_int_equal(count_of(s, "failed"), 0);
    json_decref(s);

    /* Deleted: no job comes after the ones already made. */
    http_sync_resp_t r;
    itest_api_call(&h, &r, "DELETE", itest_fmt("/schedules/%s", uuid), NULL);
    itest_expect_status(&r, 204);
    http_sync_resp_dispose(&r);
    size_t at_delete = schedule_jobs(&h, uuid, jobs);
    itest_pause_ms(2200);
    assert_int_equal(schedule_jobs(&h, uuid, jobs), at_delete);
    http_sync_close(&h);
}

/* Three ternds fire the same schedule; one is killed with SIGKILL meanwhile. Every tick
 * has one job at most, and the ticks missed are only those the kill explains: the
 * killed process may have held a tick's lease, which another claims once it expires. */
static void test_three_ternds_one_killed(void **state)
{
    (void)state;
    itest_ternd_t *a = itest_fleet_start(&W.fleet, &W.redis, &W.dir, "sched-a", "default", NULL);
    itest_ternd_t *b = itest_fleet_start(&W.fleet, &W.redis, &W.dir, "sched-b", "default", NULL);
    itest_fleet_start(&W.fleet, &W.redis, &W.dir, "sched-c", "default", NULL);
    http_sync_t h;
    open_api(&h, a);
    char uuid[40];
    schedule_create_ok(&h, "{\"workflow\": \"quick\", \"every\": \"1s\"}", uuid);
    tick_job_t jobs[MAX_JOBS];
    size_t before = wait_jobs(&h, uuid, 3, 8000, jobs);
    assert_int_equal(itest_ternd_signal(b, SIGKILL, 5000), 128 + SIGKILL);
    size_t n = wait_jobs(&h, uuid, before + 4, SCHEDULE_LEASE_MS + 10000, jobs);
    ticks_unique(jobs, n);
    int long_gaps = 0;
    for (size_t i = 1; i < n; i++) {
        int64_t gap = jobs[i].tick - jobs[i - 1].tick;
        if (gap > 1000)
            long_gaps++;
        if (gap > (int64_t)SCHEDULE_LEASE_MS + 2000)
            fail_msg("ticks %lld and %lld are %lld ms apart", (long long)jobs[i - 1].tick,
                     (long long)jobs[i].tick, (long long)gap);
    }
    assert_true(long_gaps <= 1);
    /* The schedule counts what was made: no tick fired twice. */
    json_t *s = schedule_get(&h, uuid);
    size_t now_jobs = schedule_jobs(&h, uuid, jobs);
    assert_true(count_of(s, "fired") <= (long long)now_jobs);
    assert_true(count_of(s, "fired") + 1 >= (long long)now_jobs);
    json_decref(s);
    http_sync_close(&h);
}

/* Every ternd down across several ticks, then one back: one job for the ticks missed,
 * then ticks after the return. */
static void test_catch_up_once(void **state)
{
    (void)state;
    itest_ternd_t *t = itest_fleet_start(&W.fleet, &W.redis, &W.dir, "sched-up", "default", NULL);
    http_sync_t h;
    open_api(&h, t);
    char uuid[40];
    schedule_create_ok(&h, "{\"workflow\": \"quick\", \"every\": \"1s\"}", uuid);
    tick_job_t jobs[MAX_JOBS];
    wait_jobs(&h, uuid, 2, 8000, jobs);
    http_sync_close(&h);
    assert_int_equal(itest_ternd_signal(t, SIGTERM, 10000), 0);
    char *last = itest_redis_str(&W.redis, "HGET tern:sched:%s last_run", uuid);
    assert_non_null(last);
    int64_t last_run = strtoll(last, NULL, 10);
    free(last);
    size_t before = (size_t)itest_redis_int(&W.redis, "HGET tern:sched:%s fired", uuid);

    /* Down for more than three ticks. */
    itest_pause_ms(3500);
    int64_t back = (int64_t)clock_wall_ms();
    t = itest_fleet_start(&W.fleet, &W.redis, &W.dir, "sched-up2", "default", NULL);
    open_api(&h, t);
    size_t n = wait_jobs(&h, uuid, before + 2, 8000, jobs);
    ticks_unique(jobs, n);
    int missed_fired = 0;
    for (size_t i = 0; i < n; i++)
        if (jobs[i].tick > last_run && jobs[i].tick < back)
            missed_fired++;
    assert_int_equal(missed_fired, 1);
    /* The one fired is the first tick missed; the next is after the return. */
    size_t i = 0;
    while (i < n && jobs[i].tick <= last_run)
        i++;
    assert_true(i + 1 < n);
    assert_int_equal(jobs[i].tick, last_run + 1000);
    assert_true(jobs[i + 1].tick >= back);
    http_sync_close(&h);
}

/* Overlap: with "skip" a tick while the last job waits makes no job and is counted;
 * with "queue" it makes a job that waits on the schedule's hold without starting. */
static void test_overlap_skip_and_queue(void **state)
{
    (void)state;
    itest_ternd_t *t = itest_fleet_start(&W.fleet, &W.redis, &W.dir, "sched-ov", "default", NULL);
    http_sync_t h;
    open_api(&h, t);
    tick_job_t jobs[MAX_JOBS];
    char msg[512];
    http_sync_resp_t r;

    char skip[40];
    schedule_create_ok(&h, "{\"workflow\": \"waiter\", \"every\": \"1s\", \"overlap\": \"skip\"}",
                       skip);
    wait_jobs(&h, skip, 1, 8000, jobs);
    char first[40];
    snprintf(first, sizeof first, "%s", jobs[0].uuid);
    itest_side_wait(side, "start", first, 1, 5000);
    uint64_t until = clock_mono_ms() + 8000;
    json_t *s = schedule_get(&h, skip);
    while (count_of(s, "skipped") < 2) {
        if (clock_mono_ms() > until)
            fail_msg("no two ticks skipped within 8 s");
        itest_pause_ms(100);
        json_decref(s);
        s = schedule_get(&h, skip);
    }
    assert_string_equal(itest_str_of(s, "last_job_uuid"), first);
    json_decref(s);
    assert_int_equal(schedule_jobs(&h, skip, jobs), 1);
    /* The job ends: the next tick makes a job again. */
    assert_int_equal(itest_job_resume(&W.client, first, "{}", NULL, msg, sizeof msg), 0);
    wait_jobs(&h, skip, 2, 5000, jobs);
    itest_api_call(&h, &r, "POST", itest_fmt("/schedules/%s/pause", skip), NULL);
    itest_expect_status(&r, 200);
    http_sync_resp_dispose(&r);

    char queue[40];
    schedule_create_ok(&h, "{\"workflow\": \"waiter\", \"every\": \"1s\", \"overlap\": \"queue\"}",
                       queue);
    size_t n = wait_jobs(&h, queue, 3, 8000, jobs);
    itest_api_call(&h, &r, "POST", itest_fmt("/schedules/%s/pause", queue), NULL);
    itest_expect_status(&r, 200);
    http_sync_resp_dispose(&r);
    n = schedule_jobs(&h, queue, jobs);
    itest_side_wait(side, "start", jobs[0].uuid, 1, 5000);
    /* Only the first started; the others wait for it, queued. */
    for (size_t i = 1; i < n; i++) {
        assert_int_equal(itest_side_count(side, "start", jobs[i].uuid), 0);
        assert_string_equal(jobs[i].execution, "queued");
    }
    s = schedule_get(&h, queue);
    assert_int_equal(count_of(s, "skipped"), 0);
    json_decref(s);
    assert_int_equal(itest_job_resume(&W.client, jobs[0].uuid, "{}", NULL, msg, sizeof msg), 0);
    itest_side_wait(side, "start", jobs[1].uuid, 1, 5000);
    if (n > 2)
        assert_int_equal(itest_side_count(side, "start", jobs[2].uuid), 0);
    for (size_t i = 1; i < n; i++)
        itest_job_cancel(&W.client, jobs[i].uuid, msg, sizeof msg);
    http_sync_close(&h);
}

/* Polls GET /schedules/<uuid> until its "fired" count is at least `want` (at most
 * timeout_ms); returns the schedule (new reference). */
static json_t *wait_fired(http_sync_t *h, const char *uuid, long long want, unsigned timeout_ms)
{
    uint64_t until = clock_mono_ms() + timeout_ms;
    json_t *s = schedule_get(h, uuid);
    while (count_of(s, "fired") < want) {
        if (clock_mono_ms() > until)
            fail_msg("schedule %s fired %lld ticks within %u ms, expected %lld", uuid,
                     count_of(s, "fired"), timeout_ms, want);
        itest_pause_ms(100);
        json_decref(s);
        s = schedule_get(h, uuid);
    }
    return s;
}

/* A process that claimed a tick and died, before making its job or after: the tick is
 * fired once its lease runs out, by another process, with one job. The dead claims
 * are made by hand in Redis as schedule_claim.lua leaves them (the entry in sched:due
 * at the lease's expiry, the tick unmoved), the job of the second as the dead process
 * made it (the tick's own uuid). */
static void test_claim_of_a_dead_process(void **state)
{
    (void)state;
    itest_ternd_t *t = itest_fleet_start(&W.fleet, &W.redis, &W.dir, "sched-d1", "default", NULL);
    http_sync_t h;
    open_api(&h, t);
    char before[40], after[40];
    schedule_create_ok(&h, "{\"workflow\": \"quick\", \"every\": \"1h\"}", before);
    schedule_create_ok(&h, "{\"workflow\": \"quick\", \"every\": \"1h\"}", after);
    http_sync_close(&h);
    assert_int_equal(itest_ternd_signal(t, SIGTERM, 10000), 0);

    long long now = (long long)clock_wall_ms(), tick = now - 300, lease = now + 1500;
    const char *uuids[] = {before, after};
    for (size_t i = 0; i < 2; i++) {
        itest_redis_int(&W.redis, "HSET tern:sched:%s next_run %lld lease %lld", uuids[i], tick,
                        lease);
        itest_redis_int(&W.redis, "ZADD tern:sched:due %lld %s", lease, uuids[i]);
    }
    char made[37], iso[32];
    schedule_job_uuid(after, tick, made);
    iso8601_format((uint64_t)tick, iso);
    job_create_req_t req = {.workflow = "quick", .uuid = made};
    json_t *params = json_pack("{s:s, s:s}", "schedule_uuid", after, "scheduled_for", iso);
    req.params = params;
    itest_answer_t a = {0};
    job_ops_create(W.client.ops, &req, itest_on_answer, &a);
    char msg[512];
    assert_int_equal(itest_answer_wait(&W.client, &a, NULL, msg, sizeof msg), 0);
    json_decref(params);

    t = itest_fleet_start(&W.fleet, &W.redis, &W.dir, "sched-d2", "default", NULL);
    open_api(&h, t);
    tick_job_t jobs[MAX_JOBS];
    for (size_t i = 0; i < 2; i++) {
        json_t *s = wait_fired(&h, uuids[i], 1, 10000);
        assert_int_equal(count_of(s, "failed"), 0);
        char want[37];
        schedule_job_uuid(uuids[i], tick, want);
        assert_string_equal(itest_str_of(s, "last_job_uuid"), want);
        /* Moved on to the next tick after now: an hour after its creation. */
        uint64_t next = 0;
        assert_int_equal(iso8601_parse_ms(itest_str_of(s, "next_run"), &next), 0);
        assert_true((long long)next > now + 30 * 60 * 1000);
        json_decref(s);
        assert_int_equal(schedule_jobs(&h, uuids[i], jobs), 1);
        assert_string_equal(jobs[0].uuid, want);
        assert_int_equal(jobs[0].tick, tick);
        if (i == 0) {
            /* Made once the dead process's lease ran out, not before. */
            json_t *job = itest_job_get(&W.client, want);
            uint64_t created = 0;
            assert_int_equal(iso8601_parse_ms(itest_str_of(job, "created_at"), &created), 0);
            assert_true((long long)created >= lease);
            json_decref(job);
        }
    }
    http_sync_close(&h);
}

/* Schedules a workflow file declares: installed by --workflows, the same again on each
 * start (no duplicate), changed in place when the file changes; through POST /workflows
 * too; a bad one refuses the whole definition. */
static void test_workflow_declared(void **state)
{
    (void)state;
    char dir[400], file[440];
    snprintf(dir, sizeof dir, "%s/wfs", W.dir.path);
    snprintf(file, sizeof file, "%s/declared.json", dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    itest_write_file(file, "{\"name\": \"declared\", \"chain\": [{\"name\": \"a\", \"task\": "
                           "\"core.noop\"}], \"schedules\": [{\"name\": \"nightly\", \"every\": "
                           "\"24h\", \"params\": {\"x\": 1}}]}");
    const char *flags[] = {"--workflows", dir, NULL};
    char first[40] = "";
    for (int round = 0; round < 3; round++) {
        if (round == 2)
            itest_write_file(file, "{\"name\": \"declared\", \"version\": \"2.0.0\", \"chain\": "
                                   "[{\"name\": \"a\", \"task\": \"core.noop\"}], \"schedules\": "
                                   "[{\"name\": \"nightly\", \"every\": \"12h\"}]}");
        itest_ternd_t *t = itest_fleet_start(&W.fleet, &W.redis, &W.dir,
                                             itest_fmt("sched-wf%d", round), "default", flags);
        http_sync_t h;
        open_api(&h, t);
        http_sync_resp_t r;
        itest_api_call(&h, &r, "GET", "/schedules", NULL);
        itest_expect_status(&r, 200);
        assert_int_equal(json_array_size(r.json), 1);
        const json_t *s = json_array_get(r.json, 0);
        assert_string_equal(itest_str_of(s, "name"), "nightly");
        assert_string_equal(itest_str_of(s, "workflow"), "declared");
        assert_string_equal(itest_str_of(s, "every"), round < 2 ? "24h" : "12h");
        if (round == 0)
            snprintf(first, sizeof first, "%s", itest_str_of(s, "uuid"));
        assert_string_equal(itest_str_of(s, "uuid"), first);
        http_sync_resp_dispose(&r);

        if (round == 2) {
            itest_api_call(&h, &r, "POST", "/workflows",
                           "{\"name\": \"posted\", \"chain\": [{\"name\": \"a\", \"task\": "
                           "\"core.noop\"}], \"schedules\": [{\"name\": \"hourly\", \"cron\": "
                           "\"0 * * * *\"}]}");
            itest_expect_status(&r, 201);
            http_sync_resp_dispose(&r);
            itest_api_call(&h, &r, "GET", "/schedules", NULL);
            assert_int_equal(json_array_size(r.json), 2);
            assert_string_equal(itest_str_of(json_array_get(r.json, 0), "name"), "hourly");
            http_sync_resp_dispose(&r);
            itest_api_call(&h, &r, "POST", "/workflows",
                           "{\"name\": \"refused\", \"chain\": [{\"name\": \"a\", \"task\": "
                           "\"core.noop\"}], \"schedules\": [{\"name\": \"x\", \"cron\": "
                           "\"0 * * *\"}]}");
            itest_expect_error(&r, 409, "InvalidArgument", "schedules[0].cron: expected 5 fields");
            http_sync_resp_dispose(&r);
            itest_api_call(&h, &r, "GET", "/workflows/refused", NULL);
            itest_expect_status(&r, 404);
            http_sync_resp_dispose(&r);
        }
        http_sync_close(&h);
        assert_int_equal(itest_ternd_signal(t, SIGTERM, 10000), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_api_and_bad_input, teardown),
        cmocka_unit_test_teardown(test_one_job_per_tick, teardown),
        cmocka_unit_test_teardown(test_three_ternds_one_killed, teardown),
        cmocka_unit_test_teardown(test_catch_up_once, teardown),
        cmocka_unit_test_teardown(test_overlap_skip_and_queue, teardown),
        cmocka_unit_test_teardown(test_claim_of_a_dead_process, teardown),
        cmocka_unit_test_teardown(test_workflow_declared, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
