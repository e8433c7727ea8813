/*
 * test_faults.c -- the fault suite: real runners and a real redis-server taken down
 * while many jobs run, and plugins that misbehave. Each test checks that nothing is
 * lost (every job ends succeeded) and that no finished step runs again (the itest
 * plugin records every step start in a side channel), and prints its numbers: jobs,
 * elapsed time, kills, restarts, steps started twice, the longest recovery.
 *
 *   a. 1,000 jobs of 5 steps on 3 runners (concurrency 200), one runner killed with
 *      SIGKILL and restarted under its id every ~2 s.
 *   b. 300 such jobs while redis-server is killed with SIGKILL and restarted.
 *   c. redis-server stopped for 30 s: runners and API stay up, say so in their logs,
 *      /ping answers 503 and /metrics tern_redis_up 0 meanwhile, and jobs created
 *      before and after the outage succeed without restarting anything.
 *   d. a plugin that segfaults (isolated), one that never reports (step timeout) and
 *      one that reports twice: the runner survives each and the job records it.
 *   e. a runner stopped with SIGTERM under 200 busy jobs and started again: no step
 *      runs twice.
 *
 * Every test has its own directory, redis-server and client, and stops the processes
 * it started by PID. Every wait is bounded and waits on the condition itself (a count
 * in Redis, a side-channel line, a log line, an HTTP answer, a process exit).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "base/clock.h"
#include "http_sync.h"
#include "world.h"

#define STEPS     5
#define MAX_KILLS 128

static itest_fleet_world_t W;

static int test_setup(void **state)
{
    (void)state;
    itest_fleet_world_start(&W);
    return 0;
}

/* Stops by PID what the test left running (a failed assertion skips the test's own
 * clean-up), brings Redis back if needed so runners can hand work back, then removes
 * everything. */
static int test_teardown(void **state)
{
    (void)state;
    if (W.redis.pid <= 0)
        itest_redis_restart(&W.redis);
    itest_fleet_world_stop(&W, 15000);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------ */

static long long now_ms(void)
{
    return (long long)clock_mono_ms();
}

static itest_ternd_t *start_runner(const char *id, const char *queue, const char *concurrency)
{
    const char *more[] = {"--concurrency", concurrency, NULL};
    return itest_fleet_start(&W.fleet, &W.redis, &W.dir, id, queue, more);
}

/* Starts runner `t` again under its id. Its old log is kept aside first, so the wait
 * for "ready" reads the new process's line, not the old one's. */
static void restart_runner(itest_ternd_t *t, const char *queue, const char *concurrency, int n)
{
    char id[64], old[460];
    snprintf(id, sizeof id, "%s", t->id);
    snprintf(old, sizeof old, "%s.%d", t->log, n);
    if (rename(t->log, old) != 0)
        fail_msg("cannot keep %s aside", t->log);
    const char *extra[] = {"--queues", queue, "--concurrency", concurrency, NULL};
    itest_ternd_start(t, &W.redis, &W.dir, id, extra);
}

/* True while `t` runs (a process that exited, even unreaped, is not alive). */
static bool alive(itest_ternd_t *t)
{
    int st;
    return t->pid > 0 && waitpid(t->pid, &st, WNOHANG) == 0;
}

static void wait_log_both(const itest_ternd_t *t, const char *a, const char *b, unsigned ms)
{
    long long end = now_ms() + ms;
    while (!itest_ternd_log_has_both(t, a, b)) {
        if (now_ms() > end)
            fail_msg("no line with %s and %s in %s within %u ms", a, b, t->log, ms);
        itest_pause_ms(20);
    }
}

static void create(const char *workflow, const char *params, char uuid[40])
{
    itest_job_create_ok(&W.client, workflow, params, uuid);
}

static json_t *finished(const char *uuid, unsigned timeout_ms)
{
    return itest_wait_finished_ok(&W.client, uuid, timeout_ms);
}

/* A chain of STEPS itest.record steps of `ms` each on `queue`. */
static void put_records(const char *name, const char *queue, int ms)
{
    char steps[4096] = "";
    for (int i = 0; i < STEPS; i++)
        snprintf(steps + strlen(steps), sizeof steps - strlen(steps),
                 "%s{\"name\": \"s%d\", \"task\": \"itest.record\", "
                 "\"args\": {\"file\": \"%s\", \"ms\": %d}}",
                 i ? "," : "", i, W.side, ms);
    itest_workflow_put_ok(
        &W.client,
        itest_fmt("{\"name\": \"%s\", \"queue\": \"%s\", \"chain\": [%s]}", name, queue, steps));
}

/* Waits until the side channel holds at least `n` start lines. */
static void wait_side(int n, unsigned timeout_ms)
{
    itest_side_wait(W.side, "start", NULL, n, timeout_ms);
}

static long long zcard(const char *execution)
{
    return itest_redis_int(&W.redis, "ZCARD tern:jobs:%s", execution);
}

/* A synchronous connection to the test's Redis, or NULL while it is down. */
static redisContext *redis_open(void)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", W.redis.port, tv);
    if (c != NULL && c->err) {
        redisFree(c);
        c = NULL;
    }
    return c;
}

/* ---- a batch of jobs and what the side channel says about it ------------------ */

/* The side channel is offsets in a file; a kill is the span of offsets [before,
 * after] the file had just before the signal and once the process was gone. */
typedef struct kill_mark {
    long before, after;
} kill_mark_t;

typedef struct batch {
    int n;
    char (*uuids)[40];
    char (*sorted)[40];
    int *count;   /* n * STEPS starts */
    long *first;  /* offset of the first start line */
    long *second; /* offset of the second */
} batch_t;

static void batch_init(batch_t *b, int n)
{
    memset(b, 0, sizeof *b);
    b->n = n;
    b->uuids = calloc((size_t)n, sizeof *b->uuids);
    b->sorted = calloc((size_t)n, sizeof *b->sorted);
    b->count = calloc((size_t)n * STEPS, sizeof *b->count);
    b->first = calloc((size_t)n * STEPS, sizeof *b->first);
    b->second = calloc((size_t)n * STEPS, sizeof *b->second);
}

static void batch_dispose(batch_t *b)
{
    free(b->uuids);
    free(b->sorted);
    free(b->count);
    free(b->first);
    free(b->second);
    memset(b, 0, sizeof *b);
}

static void batch_create(batch_t *b, const char *workflow)
{
    for (int i = 0; i < b->n; i++)
        create(workflow, itest_fmt("{\"n\": %d}", i), b->uuids[i]);
}

static int cmp_uuid(const void *a, const void *b)
{
    return strncmp(a, b, 40);
}

/* Reads the side channel into per-step counts and offsets. */
static void batch_read_side(batch_t *b)
{
    memcpy(b->sorted, b->uuids, (size_t)b->n * sizeof *b->uuids);
    qsort(b->sorted, (size_t)b->n, sizeof *b->sorted, cmp_uuid);
    memset(b->count, 0, (size_t)b->n * STEPS * sizeof *b->count);
    FILE *f = fopen(W.side, "r");
    if (f == NULL)
        fail_msg("no side channel at %s", W.side);
    char line[1024], what[32], key[512];
    long off = ftell(f);
    while (fgets(line, sizeof line, f) != NULL) {
        char uuid[40];
        int phase, idx;
        if (sscanf(line, "%31s %511s", what, key) == 2 && strcmp(what, "start") == 0 &&
            sscanf(key, "%36[0-9a-f-]/%d/%d", uuid, &phase, &idx) == 3 && phase == 0 && idx >= 0 &&
            idx < STEPS) {
            char(*hit)[40] = bsearch(uuid, b->sorted, (size_t)b->n, sizeof *b->sorted, cmp_uuid);
            if (hit != NULL) {
                size_t k = (size_t)(hit - b->sorted) * STEPS + (size_t)idx;
                if (b->count[k] == 0)
                    b->first[k] = off;
                else if (b->count[k] == 1)
                    b->second[k] = off;
                b->count[k]++;
            }
        }
        off = ftell(f);
    }
    fclose(f);
}

/* Checks every step of the batch started once, or twice when a kill fell between its
 * two starts (it was in flight then); returns the steps started twice. */
static int batch_check_starts(batch_t *b, const kill_mark_t *kills, int n_kills)
{
    batch_read_side(b);
    int twice = 0;
    for (int j = 0; j < b->n; j++)
        for (int s = 0; s < STEPS; s++) {
            size_t k = (size_t)j * STEPS + (size_t)s;
            int n = b->count[k];
            if (n < 1 || n > 2)
                fail_msg("job %s step %d started %d times", b->sorted[j], s, n);
            if (n == 1)
                continue;
            bool straddles = false;
            for (int i = 0; i < n_kills && !straddles; i++)
                straddles = b->first[k] < kills[i].after && b->second[k] >= kills[i].before;
            if (!straddles)
                fail_msg("job %s step %d started twice (offsets %ld, %ld) with no kill between",
                         b->sorted[j], s, b->first[k], b->second[k]);
            twice++;
        }
    return twice;
}

/* Checks in Redis that every job of the batch succeeded with STEPS results, that no
 * queue, runner list or delayed set still holds work, and that exactly the batch's
 * job hashes exist. Returns the number of job hashes counted. */
static long long batch_check_redis(batch_t *b, const char *queue)
{
    redisContext *c = redis_open();
    assert_non_null(c);
    for (int j = 0; j < b->n; j++) {
        redisAppendCommand(c, "HGET tern:job:%s execution", b->uuids[j]);
        redisAppendCommand(c, "LLEN tern:job:%s:res:0", b->uuids[j]);
    }
    for (int j = 0; j < b->n; j++) {
        redisReply *ex = NULL, *len = NULL;
        if (redisGetReply(c, (void **)&ex) != REDIS_OK ||
            redisGetReply(c, (void **)&len) != REDIS_OK)
            fail_msg("Redis: %s", c->errstr);
        if (ex->type != REDIS_REPLY_STRING || strcmp(ex->str, "succeeded") != 0)
            fail_msg("job %s is %s", b->uuids[j], ex->type == REDIS_REPLY_STRING ? ex->str : "?");
        if (len->integer != STEPS)
            fail_msg("job %s has %lld results", b->uuids[j], len->integer);
        freeReplyObject(ex);
        freeReplyObject(len);
    }
    redisFree(c);
    long long hashes = itest_job_hashes(&W.redis);
    assert_int_equal(hashes, b->n);
    assert_int_equal(itest_jobs_indexed(&W.redis), b->n);
    assert_int_equal(zcard("succeeded"), b->n);
    assert_int_equal(itest_redis_int(&W.redis, "LLEN tern:q:%s", queue), 0);
    assert_int_equal(itest_redis_int(&W.redis, "ZCARD tern:delayed"), 0);
    for (size_t i = 0; i < W.fleet.n; i++)
        assert_int_equal(itest_redis_int(&W.redis, "LLEN tern:r:%s:jobs", W.fleet.runners[i].id),
                         0);
    return hashes;
}

/* ---- recovery of a killed runner's jobs --------------------------------------- */

/* The jobs a runner held when it was killed, with their fences: a job is recovered
 * once it is claimed again (a new fence) or has ended. */
typedef struct recovery {
    long long killed_at;
    long long took_ms; /* -1 while some job is not recovered */
    size_t n;
    char (*uuids)[40];
    char (*fences)[24];
    bool *done;
} recovery_t;

static void recovery_note(recovery_t *rec, const char *runner_id)
{
    memset(rec, 0, sizeof *rec);
    rec->took_ms = -1;
    redisContext *c = redis_open();
    assert_non_null(c);
    redisReply *list = redisCommand(c, "LRANGE tern:r:%s:jobs 0 -1", runner_id);
    assert_non_null(list);
    rec->n = list->elements;
    rec->uuids = calloc(rec->n + 1, sizeof *rec->uuids);
    rec->fences = calloc(rec->n + 1, sizeof *rec->fences);
    rec->done = calloc(rec->n + 1, sizeof *rec->done);
    for (size_t i = 0; i < rec->n; i++) {
        snprintf(rec->uuids[i], sizeof rec->uuids[i], "%s", list->element[i]->str);
        redisReply *f = redisCommand(c, "HGET tern:job:%s fence", rec->uuids[i]);
        snprintf(rec->fences[i], sizeof rec->fences[i], "%s",
                 f != NULL && f->type == REDIS_REPLY_STRING ? f->str : "");
        if (f != NULL)
            freeReplyObject(f);
    }
    freeReplyObject(list);
    redisFree(c);
}

/* Updates `rec`; returns true once every job is recovered. */
static bool recovery_check(recovery_t *rec)
{
    if (rec->took_ms >= 0)
        return true;
    redisContext *c = redis_open();
    if (c == NULL)
        return false;
    for (size_t i = 0; i < rec->n; i++)
        redisAppendCommand(c, "HMGET tern:job:%s fence execution", rec->uuids[i]);
    size_t left = 0;
    for (size_t i = 0; i < rec->n; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK) {
            redisFree(c);
            return false;
        }
        const redisReply *fence = r->element[0], *ex = r->element[1];
        const char *fs = fence->type == REDIS_REPLY_STRING ? fence->str : "";
        const char *es = ex->type == REDIS_REPLY_STRING ? ex->str : "";
        if (strcmp(fs, rec->fences[i]) != 0 || strcmp(es, "succeeded") == 0)
            rec->done[i] = true;
        left += !rec->done[i];
        freeReplyObject(r);
    }
    redisFree(c);
    if (left == 0)
        rec->took_ms = now_ms() - rec->killed_at;
    return left == 0;
}

static void recovery_dispose(recovery_t *rec)
{
    free(rec->uuids);
    free(rec->fences);
    free(rec->done);
}

/* ---- a. a runner killed every ~2 s under 1,000 jobs --------------------------- */

#define A_JOBS        1000
#define A_CONCURRENCY 200
#define A_BOUND_MS    120000
#define A_KILL_EVERY  2000
#define A_STEP_MS     1500

static void test_runner_killed_every_2s(void **state)
{
    (void)state;
    static const char *const ids[] = {"f1", "f2", "f3"};
    /* Steps of 1.5 s, not a few ms: 1,000 jobs of 5-ms steps end within a second,
     * before the first kill; with 1.5 s the run lasts ~15 s, so several kills each
     * find up to 200 steps in flight. */
    put_records("fa", "fa", A_STEP_MS);
    batch_t b;
    batch_init(&b, A_JOBS);
    long long t0 = now_ms();
    batch_create(&b, "fa");
    long long created = now_ms() - t0;
    for (int i = 0; i < 3; i++)
        start_runner(ids[i], "fa", "200");

    static kill_mark_t kills[MAX_KILLS];
    static recovery_t recs[MAX_KILLS];
    int n_kills = 0, restarts = 0;
    long long next_kill = now_ms() + A_KILL_EVERY;
    long long ok = 0;
    for (;;) {
        ok = zcard("succeeded");
        long long bad = zcard("failed") + zcard("canceled");
        if (bad > 0)
            fail_msg("%lld jobs failed or were canceled (%lld succeeded, %d kills)", bad, ok,
                     n_kills);
        for (int i = 0; i < n_kills; i++)
            recovery_check(&recs[i]);
        if (ok == A_JOBS)
            break;
        if (now_ms() - t0 > A_BOUND_MS)
            fail_msg("after %lld ms: %lld of %d jobs succeeded, %d kills, %d restarts",
                     now_ms() - t0, ok, A_JOBS, n_kills, restarts);
        if (now_ms() >= next_kill && n_kills < MAX_KILLS) {
            itest_ternd_t *victim = &W.fleet.runners[n_kills % 3];
            recovery_note(&recs[n_kills], victim->id);
            kills[n_kills].before = itest_file_size(W.side);
            recs[n_kills].killed_at = now_ms();
            assert_int_equal(itest_ternd_signal(victim, SIGKILL, 5000), 128 + SIGKILL);
            kills[n_kills].after = itest_file_size(W.side);
            n_kills++;
            restart_runner(victim, "fa", "200", n_kills);
            restarts++;
            next_kill = now_ms() + A_KILL_EVERY;
        }
        itest_pause_ms(50);
    }
    long long elapsed = now_ms() - t0;
    long long max_rec = 0;
    for (int i = 0; i < n_kills; i++) {
        if (!recovery_check(&recs[i]))
            fail_msg("kill %d: jobs of the killed runner not recovered", i);
        if (recs[i].took_ms > max_rec)
            max_rec = recs[i].took_ms;
    }
    int twice = batch_check_starts(&b, kills, n_kills);
    long long hashes = batch_check_redis(&b, "fa");
    print_message("a: jobs %d (created in %lld ms), elapsed %lld ms, kills %d, restarts %d, "
                  "steps run twice %d (bound %d), max recovery %lld ms, job hashes %lld\n",
                  A_JOBS, created, elapsed, n_kills, restarts, twice, n_kills * A_CONCURRENCY,
                  max_rec, hashes);
    assert_true(n_kills >= 1);
    assert_true(twice <= n_kills * A_CONCURRENCY);
    for (int i = 0; i < n_kills; i++)
        recovery_dispose(&recs[i]);
    batch_dispose(&b);
}

/* ---- b. redis-server killed and restarted under 300 jobs ----------------------- */

#define B_JOBS     300
#define B_BOUND_MS 90000

static void test_redis_killed_mid_run(void **state)
{
    (void)state;
    static const char *const ids[] = {"g1", "g2", "g3"};
    put_records("fb", "fb", 100);
    batch_t b;
    batch_init(&b, B_JOBS);
    long long t0 = now_ms();
    batch_create(&b, "fb");
    for (int i = 0; i < 3; i++)
        start_runner(ids[i], "fb", "100");

    /* About a third of the steps have started when Redis dies. */
    wait_side(B_JOBS * STEPS / 3, 30000);
    kill_mark_t kill = {.before = itest_file_size(W.side)};
    long long killed_at = now_ms();
    itest_redis_stop(&W.redis, SIGKILL);
    for (int i = 0; i < 3; i++)
        wait_log_both(&W.fleet.runners[i], "\"level\":40", "Redis is unreachable", 5000);
    /* Steps in flight go on and end meanwhile; their commits must wait for Redis. */
    kill.after = itest_file_size(W.side);
    itest_redis_restart(&W.redis);
    long long restarted_at = now_ms();

    /* Recovery: the first step started after Redis came back. */
    long long recovered_at = -1;
    long long ok = 0;
    for (;;) {
        if (recovered_at < 0 && itest_file_size(W.side) > kill.after)
            recovered_at = now_ms();
        ok = zcard("succeeded");
        if (ok == B_JOBS)
            break;
        if (zcard("failed") > 0)
            fail_msg("%lld jobs failed", zcard("failed"));
        if (now_ms() - t0 > B_BOUND_MS)
            fail_msg("after %lld ms: %lld of %d jobs succeeded", now_ms() - t0, ok, B_JOBS);
        itest_pause_ms(50);
    }
    if (recovered_at < 0)
        recovered_at = now_ms();
    long long elapsed = now_ms() - t0;
    int twice = batch_check_starts(&b, &kill, 1);
    long long hashes = batch_check_redis(&b, "fb");
    for (int i = 0; i < 3; i++)
        assert_true(alive(&W.fleet.runners[i]));
    print_message("b: jobs %d, elapsed %lld ms, Redis kills 1, restarts 1 (down %lld ms), "
                  "steps run twice %d, recovery %lld ms after the restart, job hashes %lld\n",
                  B_JOBS, elapsed, restarted_at - killed_at, twice, recovered_at - restarted_at,
                  hashes);
    batch_dispose(&b);
}

/* ---- c. Redis unreachable for 30 s -------------------------------------------- */

#define C_OUTAGE_MS 30000

static long http_status(http_sync_t *h, const char *path, char **body)
{
    http_sync_resp_t r;
    memset(&r, 0, sizeof r);
    http_sync_do(h, "GET", path, NULL, 0, NULL, &r);
    long status = r.status;
    if (body != NULL) {
        *body = r.body;
        r.body = NULL;
    }
    http_sync_resp_dispose(&r);
    return status;
}

static double redis_up_metric(http_sync_t *h)
{
    char *page = NULL;
    double v =
        http_status(h, "/metrics", &page) == 200 ? itest_metric_sample(page, "tern_redis_up") : -1;
    free(page);
    return v;
}

static void test_redis_unreachable_30s(void **state)
{
    (void)state;
    itest_workflow_put_ok(
        &W.client,
        itest_fmt("{\"name\": \"fc\", \"queue\": \"fc\", \"chain\": ["
                  "{\"name\": \"a\", \"task\": \"itest.record\", \"args\": {\"file\": \"%s\", "
                  "\"ms\": 500}},"
                  "{\"name\": \"b\", \"task\": \"itest.record\", \"args\": {\"file\": \"%s\", "
                  "\"ms\": 100}}]}",
                  W.side, W.side));
    itest_ternd_t *api = start_runner("c1", "fc", "10");
    itest_ternd_t *other = start_runner("c2", "fc", "10");
    pid_t pids[2] = {api->pid, other->pid};
    http_sync_t h;
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", api->api_port);
    http_sync_open(&h, base);
    assert_int_equal(http_status(&h, "/ping", NULL), 200);
    assert_true(redis_up_metric(&h) == 1);

    char before[40], after[40];
    create("fc", "{\"when\": \"before\"}", before);
    wait_side(1, 10000); /* its first step runs when Redis goes away */
    long long stopped_at = now_ms();
    itest_redis_stop(&W.redis, SIGTERM);
    /* The client notices only while its loop runs; it must see the outage to see the
     * return. */
    itest_client_wait_state(&W.client, false, 5000);

    /* The outage is noticed and reported... */
    long long end = now_ms() + 5000;
    while (http_status(&h, "/ping", NULL) != 503) {
        if (now_ms() > end)
            fail_msg("/ping did not answer 503 within 5 s of the outage");
        itest_pause_ms(20);
    }
    long long noticed_ms = now_ms() - stopped_at;
    assert_true(redis_up_metric(&h) == 0);
    wait_log_both(api, "\"level\":40", "Redis", 5000);
    wait_log_both(other, "\"level\":40", "Redis", 5000);
    /* ...and for the whole outage both processes stay up and the API says so. */
    int pings = 0;
    while (now_ms() - stopped_at < C_OUTAGE_MS) {
        if (!alive(api) || !alive(other))
            fail_msg("a ternd exited during the outage (log %s or %s)", api->log, other->log);
        long st = http_status(&h, "/ping", NULL);
        if (st != 503)
            fail_msg("/ping answered %ld during the outage", st);
        pings++;
        itest_pause_ms(250);
    }
    assert_true(redis_up_metric(&h) == 0);
    itest_redis_restart(&W.redis);
    long long restarted_at = now_ms();
    end = now_ms() + 15000;
    while (http_status(&h, "/ping", NULL) != 200) {
        if (now_ms() > end)
            fail_msg("/ping did not answer 200 within 15 s of Redis coming back");
        itest_pause_ms(20);
    }
    long long back_ms = now_ms() - restarted_at;
    assert_true(redis_up_metric(&h) == 1);

    itest_client_wait_state(&W.client, true, 15000);
    create("fc", "{\"when\": \"after\"}", after);
    const char *jobs[] = {before, after};
    for (int i = 0; i < 2; i++) {
        json_t *job = finished(jobs[i], 30000);
        if (strcmp(itest_execution(job), "succeeded") != 0)
            fail_msg("job %s ended %s", jobs[i], itest_execution(job));
        for (int s = 0; s < 2; s++) {
            char key[64];
            snprintf(key, sizeof key, "%.36s/0/%d", jobs[i], s);
            assert_in_range(itest_side_count(W.side, "start", key), 1, 2);
        }
        json_decref(job);
    }
    long long done_ms = now_ms() - restarted_at;
    assert_int_equal(api->pid, pids[0]);
    assert_int_equal(other->pid, pids[1]);
    assert_true(alive(api) && alive(other));
    http_sync_close(&h);
    print_message("c: jobs 2, outage %lld ms (noticed in %lld ms, %d pings answered 503), "
                  "kills 0, restarts 0, /ping 200 %lld ms after Redis came back, both jobs "
                  "succeeded %lld ms after\n",
                  restarted_at - stopped_at, noticed_ms, pings, back_ms, done_ms);
}

/* ---- d. plugins that crash, hang or report twice ------------------------------ */

static void run_ok_job(itest_ternd_t *r)
{
    char uuid[40];
    create("fd-ok", NULL, uuid);
    json_t *job = finished(uuid, 20000);
    assert_string_equal(itest_execution(job), "succeeded");
    json_decref(job);
    assert_true(alive(r));
}

static void test_misbehaving_plugins(void **state)
{
    (void)state;
    long long t0 = now_ms();
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"fd-crash\", \"queue\": \"fd\", \"chain\": ["
                                    "{\"name\": \"boom\", \"task\": \"itest.crash\", \"isolate\": "
                                    "true, \"args\": {\"file\": \"%s\"}}]}",
                                    W.side));
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"fd-ok\", \"queue\": \"fd\", \"chain\": ["
                                    "{\"name\": \"fine\", \"task\": \"itest.record\", \"args\": "
                                    "{\"file\": \"%s\", \"ms\": 5}}]}",
                                    W.side));
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"fd-hang\", \"queue\": \"fd\", \"chain\": ["
                                    "{\"name\": \"stuck\", \"task\": \"itest.hang\", \"timeout\": "
                                    "0.3, \"args\": {\"file\": \"%s\"}}]}",
                                    W.side));
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"fd-twice\", \"queue\": \"fd\", \"chain\": ["
                                    "{\"name\": \"chatty\", \"task\": \"itest.twice\", \"args\": "
                                    "{\"file\": \"%s\"}}]}",
                                    W.side));
    /* The crash is deliberate: a sanitizer build must let the helper die of the signal
     * instead of reporting it. */
    const char *asan = getenv("ASAN_OPTIONS");
    char *saved = asan != NULL ? strdup(asan) : NULL;
    setenv("ASAN_OPTIONS", itest_fmt("%s%shandle_segv=0", asan ? asan : "", asan ? ":" : ""), 1);
    itest_ternd_t *r = start_runner("d1", "fd", "10");
    if (saved != NULL)
        setenv("ASAN_OPTIONS", saved, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(saved);
    pid_t pid = r->pid;

    char uuid[40];
    create("fd-crash", NULL, uuid);
    json_t *job = finished(uuid, 20000);
    assert_string_equal(itest_execution(job), "failed");
    json_t *entry = json_array_get(json_object_get(job, "chain_results"), 0);
    assert_string_equal(itest_error_code_of(entry), "TaskCrashed");
    char crash[512];
    snprintf(crash, sizeof crash, "%s", itest_str_of(json_object_get(entry, "error"), "message"));
    if (strstr(crash, "SIGSEGV") == NULL)
        fail_msg("the crash message does not name the signal: %s", crash);
    json_decref(job);
    run_ok_job(r);

    create("fd-hang", NULL, uuid);
    job = finished(uuid, 20000);
    assert_string_equal(itest_execution(job), "failed");
    entry = json_array_get(json_object_get(job, "chain_results"), 0);
    assert_string_equal(itest_error_code_of(entry), "TaskTimeout");
    assert_string_equal(itest_error_code_of(job), "TaskTimeout");
    json_decref(job);
    run_ok_job(r);

    create("fd-twice", NULL, uuid);
    job = finished(uuid, 20000);
    assert_string_equal(itest_execution(job), "succeeded");
    json_t *res = json_object_get(job, "chain_results");
    assert_int_equal(json_array_size(res), 1);
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(json_array_get(res, 0), "result"), "report")),
                     1);
    json_decref(job);
    wait_log_both(r, "\"level\":40", "task itest.twice reported done after its outcome", 5000);
    run_ok_job(r);
    assert_int_equal(r->pid, pid);
    print_message("d: jobs 6, elapsed %lld ms, kills 0, restarts 0, steps run twice 0; "
                  "crash: %s\n",
                  now_ms() - t0, crash);
}

/* ---- e. SIGTERM under a busy run ---------------------------------------------- */

#define E_JOBS 200

static void test_sigterm_under_load(void **state)
{
    (void)state;
    put_records("fe", "fe", 200);
    batch_t b;
    batch_init(&b, E_JOBS);
    long long t0 = now_ms();
    batch_create(&b, "fe");
    itest_ternd_t *victim = start_runner("e1", "fe", "100");
    start_runner("e2", "fe", "100");

    /* Busy: a third of the steps have started. */
    wait_side(E_JOBS * STEPS / 3, 30000);
    long long termed_at = now_ms();
    assert_int_equal(itest_ternd_signal(victim, SIGTERM, 8000), 0);
    long long exit_ms = now_ms() - termed_at;
    restart_runner(victim, "fe", "100", 1);

    long long ok = 0;
    for (;;) {
        ok = zcard("succeeded");
        if (ok == E_JOBS)
            break;
        if (zcard("failed") > 0)
            fail_msg("%lld jobs failed", zcard("failed"));
        if (now_ms() - t0 > 60000)
            fail_msg("after %lld ms: %lld of %d jobs succeeded", now_ms() - t0, ok, E_JOBS);
        itest_pause_ms(50);
    }
    long long elapsed = now_ms() - t0;
    int twice = batch_check_starts(&b, NULL, 0);
    batch_check_redis(&b, "fe");
    for (int j = 0; j < E_JOBS; j++) {
        long long retried = itest_redis_int(&W.redis, "HGET tern:job:%s retried", b.uuids[j]);
        if (retried > 0)
            fail_msg("job %s was retried %lld times", b.uuids[j], retried);
    }
    print_message("e: jobs %d, elapsed %lld ms, SIGTERM 1 (exit in %lld ms), restarts 1, "
                  "kills 0, steps run twice %d\n",
                  E_JOBS, elapsed, exit_ms, twice);
    batch_dispose(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_runner_killed_every_2s, test_setup, test_teardown),
        cmocka_unit_test_setup_teardown(test_redis_killed_mid_run, test_setup, test_teardown),
        cmocka_unit_test_setup_teardown(test_redis_unreachable_30s, test_setup, test_teardown),
        cmocka_unit_test_setup_teardown(test_misbehaving_plugins, test_setup, test_teardown),
        cmocka_unit_test_setup_teardown(test_sigterm_under_load, test_setup, test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL) == 0 ? 0 : 1;
}
