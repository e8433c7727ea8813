/*
 * bench_tern.c -- tern's side of the benchmark suite (see tests/bench/run.sh and
 * docs/PERFORMANCE.md). Against a Redis that is already running (its URL is an argument), it starts
 * one ternd (runner and API, --concurrency 1000), runs one scenario and prints one JSON
 * line per measurement: {"system": "tern", "scenario", "metric", "value", "rep"}.
 *
 *   TERN_BIN=build-release/engine/ternd TERN_TASKS=build-release/tasks \
 *   TERN_ITEST=build-release/tests/integration/plugin/itest.so \
 *   build-release/tests/bench/bench_tern SCENARIO REDIS_URL [N] [REP]
 *
 * Scenarios: a-api (N 1-step no-op jobs submitted over HTTP, A_API_CONNS keep-alive
 * connections, or BENCH_API_CONNS),
 * a-bulk (the same through job_ops_create, all in flight at once), b (N 10-step no-op
 * jobs through the bulk path), c (N 1-step jobs one at a time: submission to the
 * job's "running" event as the client receives it), e (Redis used_memory per finished
 * 10-step job), f-create and f-read (HTTP creates and reads, 64 keep-alive connections),
 * q-hop and q-same (N 2-step jobs whose second step names a queue another ternd serves,
 * and the same without, on two ternds: the cost of step queues; see run_queues).
 * a-api also reports ternd_cpu_us_per_job: ternd's CPU time (user + system) over the
 * scenario per job, the figure to compare builds by on a machine whose load varies.
 * The end-to-end clocks start at the first submission and stop at the last "finished"
 * event on the global stream. Every wait is bounded. BENCH_DIRECT_START=0 runs ternd with
 * --direct-start 0 (HTTP creates then go through the queue, as the bulk path's do).
 *
 * The scaling study (tests/bench/scale.sh) uses scale-jobs, scale-steps, scale-params and
 * scale-runners: N jobs through the bulk path, shaped by the environment:
 *   BENCH_STEPS         no-op steps per job (default 1)
 *   BENCH_PARAMS_BYTES  length of the one string value in each job's params (default 0:
 *                       no params)
 *   BENCH_RUNNERS       ternd processes (default 1): the first runs API and runner, the
 *                       others `--role runner`, each with --concurrency 1000
 * The four names run the same code and differ only in which of N, BENCH_STEPS,
 * BENCH_PARAMS_BYTES or BENCH_RUNNERS is reported as "x" on each line, so that the report
 * can group the lines by the parameter that varied; each line also carries the whole
 * shape ("n", "steps", "params_bytes", "runners"). Metrics: jobs_per_s, steps_per_s,
 * bytes_per_job (Redis used_memory growth, the capped global stream left out), rss_mb
 * (the largest peak RSS of the ternds), and redis_cpu_pct, ternd_cpu_pct, client_cpu_pct
 * (CPU time over wall time; the client is this process: the creates and the thread that
 * counts "finished" events on the global stream).
 */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "events/events.h"
#include "harness.h"
#include "http_blast.h"

#define WAIT_MS     300000u      /* the bound of any one scenario's wait */
#define MAX_RUNNERS 16           /* BENCH_RUNNERS: more would only oversubscribe the cores */
#define MAX_STEPS   1000         /* BENCH_STEPS */
#define MAX_PARAMS  (200 * 1024) /* BENCH_PARAMS_BYTES: under job_ops' 256 KiB limit */

static const char *scenario = "";
static const char *redis_url = "";
static int n_jobs = 0;
static int rep = 1;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The whole shape of a scale-* run, appended to its lines so that each is self-describing
 * (set by run_scale). */
static char scale_shape[160] = "";

/* One measurement line; `x` (the varied parameter of a scale-* scenario) and the shape
 * are left out when x is NAN. */
static void emit_x(const char *scen, const char *metric, double value, double x)
{
    printf("{\"system\": \"tern\", \"scenario\": \"%s\", \"metric\": \"%s\", \"value\": %.6g, "
           "\"rep\": %d",
           scen, metric, value, rep);
    if (!isnan(x))
        printf(", \"x\": %.0f%s", x, scale_shape);
    printf("}\n");
    fflush(stdout);
}

static void emit(const char *scen, const char *metric, double value)
{
    emit_x(scen, metric, value, NAN);
}

/* ---- the world: ternd against the given Redis, a client, the global events ------- */

typedef struct bench {
    itest_client_t c;
    itest_ternd_t t;
    itest_ternd_t more[MAX_RUNNERS - 1]; /* runner-only ternds of scale-*, n_more started */
    int n_more;
    struct tail *tail; /* scale-*: the global stream's follower thread, or NULL */
    itest_dir_t dir;
    itest_redis_t r; /* filled from the URL; tern did not start this Redis */
    events_follow_t *follow;
    int created, create_failed, finished, running;
    double t_running; /* when the last "running" event arrived */
    char (*uuids)[40];
} bench_t;

static bool on_global_event(void *data, const char *id, const json_t *ev)
{
    (void)id;
    bench_t *b = data;
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (type != NULL && strcmp(type, "finished") == 0)
        b->finished++;
    if (type != NULL && strcmp(type, "running") == 0) {
        b->running++;
        b->t_running = now_s();
    }
    return true;
}

/* Counts a create's answer (and keeps the job's uuid when the scenario asks for them). */
static void created(bench_t *b, int status, const char *uuid, const char *msg)
{
    if (status != 0) {
        fprintf(stderr, "create failed: %s\n", msg);
        b->create_failed++;
    } else if (b->uuids != NULL) {
        snprintf(b->uuids[b->created], 40, "%s", uuid != NULL ? uuid : "");
    }
    b->created++;
}

static void on_created(void *data, int status, const json_t *res, const char *msg)
{
    created(data, status, json_string_value(json_object_get(res, "uuid")), msg);
}

/* The same for the bulk path's creates, answered as text (job_ops_create_text): a
 * submitter of many jobs has no use for a tree of each new job, whose parsing was half
 * of this process's CPU per job in a-bulk. */
static void on_created_text(void *data, int status, const char *view, size_t len, const char *uuid,
                            const char *code, const char *msg)
{
    (void)view;
    (void)len;
    (void)code;
    created(data, status, uuid, msg);
}

static const char *noop10_json(void)
{
    static char text[2048];
    size_t n = (size_t)snprintf(text, sizeof text, "{\"name\": \"bench-noop-10\", \"chain\": [");
    for (int i = 0; i < 10; i++)
        n += (size_t)snprintf(text + n, sizeof text - n,
                              "%s{\"name\": \"n%d\", \"task\": \"core.noop\"}", i ? ", " : "", i);
    snprintf(text + n, sizeof text - n, "]}");
    return text;
}

static void world_start(bench_t *b)
{
    memset(b, 0, sizeof *b);
    itest_dir_make(&b->dir);
    snprintf(b->r.url, sizeof b->r.url, "%s", redis_url);
    const char *colon = strrchr(redis_url, ':');
    b->r.port = colon != NULL ? atoi(colon + 1) : 6379;
    char id[64];
    snprintf(id, sizeof id, "bench-%d", (int)getpid());
    /* Scenario e measures jobs at rest: their own event streams (kept 60 s after a
     * success by default) gone within seconds. */
    const char *success_events = strcmp(scenario, "e") == 0 ? "2" : "60";
    /* BENCH_DIRECT_START=0 measures creates through the queue ("Direct start" in
     * docs/WORKFLOWS.md). */
    const char *direct = getenv("BENCH_DIRECT_START");
    const char *extra[] = {"--concurrency",
                           "1000",
                           "--lease-ms",
                           "10000",
                           "--heartbeat-ms",
                           "2000",
                           "--log-level",
                           "info",
                           "--success-events-s",
                           success_events,
                           "--direct-start",
                           direct != NULL && strcmp(direct, "0") == 0 ? "0" : "1",
                           NULL};
    itest_ternd_start(&b->t, &b->r, &b->dir, id, extra);
    itest_client_open(&b->c, &b->r);
    itest_workflow_put_ok(&b->c, "{\"name\": \"bench-noop-1\", \"chain\": "
                                 "[{\"name\": \"n\", \"task\": \"core.noop\"}]}");
    itest_workflow_put_ok(&b->c, noop10_json());
    b->follow = events_follow(&b->c.loop, &b->c.addr, NULL, "$", on_global_event, b);
    /* Lets the follower connect and block on the stream before anything is submitted. */
    bool never = false;
    itest_client_run_until(&b->c, &never, 300);
}

/* ---- a follower of the global stream on a thread of its own ------------------------ */

/* events_follow reads 100 entries per round trip on the client's loop. While that loop
 * is busy with the answers to a burst of creates, the follower can fall further behind
 * than the global stream's cap (100,000 entries), and the trimmed "finished" events are
 * never seen: a 100,000-job burst lost some that way. The scale-* runs count on this
 * thread instead: a blocking connection of its own that takes up to 10,000 entries per
 * call and wakes the client's loop (uv_async) when it is ready and when it is done. */
typedef struct tail {
    int port;
    int want;        /* "finished" events to count */
    double deadline; /* on the now_s() clock */
    pthread_t th;
    bool started;
    uv_async_t wake;
    atomic_bool ready, stop, done;
    atomic_int finished; /* written by the thread only */
    double t_done;       /* when the want-th "finished" event was read */
    char err[256];       /* why it stopped early, or "" */
} tail_t;

static void on_tail_wake(uv_async_t *a)
{
    (void)a; /* only there to return from uv_run */
}

static void tail_finish(tail_t *t, const char *err)
{
    if (err != NULL)
        snprintf(t->err, sizeof t->err, "%s", err);
    atomic_store(&t->done, true);
    uv_async_send(&t->wake);
}

/* The "finished" events in one entry of the global stream (field "e": one event, "a":
 * an array of them), counted in their text: tern writes each as an object that starts
 * {"type":"finished" (event_finished_text in lib/events.lua), and the bench's tasks return
 * {}, so no other text holds it. Parsing every event with jansson (four per 1-step job)
 * was a large part of the submitting process's CPU in the a-bulk scenario, CPU that
 * Redis and ternd, on the same two cores, then lacked. */
static int finished_in_entry(const redisReply *fields)
{
    static const char mark[] = "{\"type\":\"finished\"";
    int n = 0;
    for (size_t k = 0; fields != NULL && k + 1 < fields->elements; k += 2) {
        const redisReply *name = fields->element[k], *value = fields->element[k + 1];
        if (name->type != REDIS_REPLY_STRING || value->type != REDIS_REPLY_STRING ||
            (strcmp(name->str, "e") != 0 && strcmp(name->str, "a") != 0))
            continue;
        const char *p = value->str, *end = value->str + value->len;
        while ((p = memmem(p, (size_t)(end - p), mark, sizeof mark - 1)) != NULL) {
            n++;
            p += sizeof mark - 1;
        }
    }
    return n;
}

static void *tail_run(void *arg)
{
    tail_t *t = arg;
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", t->port, tv);
    if (c == NULL || c->err) {
        tail_finish(t, "cannot connect to Redis");
        if (c != NULL)
            redisFree(c);
        return NULL;
    }
    /* Replies to a BLOCK of 500 ms come well within this. */
    struct timeval rtv = {5, 0};
    redisSetTimeout(c, rtv);
    /* The newest entry is where counting starts (the stream may not exist yet). */
    char last[64] = "0-0";
    redisReply *r = redisCommand(c, "XREVRANGE tern:events + - COUNT 1");
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
        r->element[0]->type == REDIS_REPLY_ARRAY && r->element[0]->elements >= 1)
        snprintf(last, sizeof last, "%s", r->element[0]->element[0]->str);
    if (r != NULL)
        freeReplyObject(r);
    atomic_store(&t->ready, true);
    uv_async_send(&t->wake);
    while (!atomic_load(&t->stop) && atomic_load(&t->finished) < t->want && now_s() < t->deadline) {
        r = redisCommand(c, "XREAD COUNT 10000 BLOCK 500 STREAMS tern:events %s", last);
        if (r == NULL) {
            tail_finish(t, "XREAD failed");
            redisFree(c);
            return NULL;
        }
        /* [[key, [[id, [field, value]], ...]]], or nil when the BLOCK timed out. */
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->elements == 2) {
            const redisReply *entries = r->element[0]->element[1];
            for (size_t i = 0; i < entries->elements; i++) {
                const redisReply *e = entries->element[i];
                snprintf(last, sizeof last, "%s", e->element[0]->str);
                int n = finished_in_entry(e->element[1]);
                int before = atomic_fetch_add(&t->finished, n);
                if (before < t->want && before + n >= t->want)
                    t->t_done = now_s();
            }
        }
        freeReplyObject(r);
    }
    redisFree(c);
    bool short_ = atomic_load(&t->finished) < t->want && !atomic_load(&t->stop);
    tail_finish(t, short_ ? "time bound reached" : NULL);
    return NULL;
}

/* Starts the thread and runs the client's loop until it is ready (bounded). */
static void tail_start(bench_t *b, int want, double deadline)
{
    tail_t *t = calloc(1, sizeof *t);
    b->tail = t;
    t->port = b->r.port;
    t->want = want;
    t->deadline = deadline;
    uv_async_init(&b->c.loop, &t->wake, on_tail_wake);
    pthread_create(&t->th, NULL, tail_run, t);
    t->started = true;
    double t0 = now_s();
    while (!atomic_load(&t->ready) && !atomic_load(&t->done) && now_s() - t0 < 10.0)
        uv_run(&b->c.loop, UV_RUN_ONCE);
    if (!atomic_load(&t->ready))
        fail_msg("the stream follower did not start: %s", t->err);
}

/* Stops the thread (it notices within one 500 ms BLOCK) and frees it. */
static void tail_stop(bench_t *b)
{
    tail_t *t = b->tail;
    if (t == NULL)
        return;
    atomic_store(&t->stop, true);
    if (t->started)
        pthread_join(t->th, NULL);
    uv_close((uv_handle_t *)&t->wake, NULL);
    /* The close completes on the next turn of the loop; the memory must outlive it. */
    uv_run(&b->c.loop, UV_RUN_NOWAIT);
    free(t);
    b->tail = NULL;
}

/* Starts `n` further ternds as runners only, against the same Redis, after world_start. */
static void world_add_runners(bench_t *b, int n)
{
    const char *extra[] = {"--role", "runner",         "--concurrency", "1000",        "--lease-ms",
                           "10000",  "--heartbeat-ms", "2000",          "--log-level", "info",
                           NULL};
    for (int i = 0; i < n && b->n_more < MAX_RUNNERS - 1; i++) {
        char id[64];
        snprintf(id, sizeof id, "bench-%d-r%d", (int)getpid(), b->n_more + 2);
        itest_ternd_start(&b->more[b->n_more], &b->r, &b->dir, id, extra);
        b->n_more++;
    }
}

/* The ternds go first and the client last: after a failed scenario the client may
 * still have creates in flight, and its close is the step that can fail. */
static void world_stop(bench_t *b)
{
    tail_stop(b);
    events_follow_stop(b->follow);
    for (int i = 0; i < b->n_more; i++)
        itest_ternd_signal(&b->more[i], SIGTERM, 30000);
    itest_ternd_signal(&b->t, SIGTERM, 30000);
    itest_dir_remove(&b->dir);
    free(b->uuids);
    itest_client_close(&b->c);
}

/* Runs the client's loop until `count` jobs finished (bounded). */
static void wait_finished(bench_t *b, int count, double t0)
{
    /* A refused create would leave the count short for the whole bound: stop at once. */
    while (b->finished < count && b->create_failed == 0 && now_s() - t0 < WAIT_MS / 1000.0)
        uv_run(&b->c.loop, UV_RUN_ONCE);
    if (b->create_failed > 0)
        fail_msg("%d creates failed", b->create_failed);
    if (b->finished < count)
        fail_msg("only %d of %d jobs finished", b->finished, count);
}

static void submit_bulk(bench_t *b, const char *workflow, int count)
{
    for (int i = 0; i < count; i++) {
        job_create_req_t req = {.workflow = workflow};
        job_ops_create_text(b->c.ops, &req, on_created_text, b);
    }
}

static long long used_memory(const bench_t *b)
{
    char *info = itest_redis_str(&b->r, "INFO memory");
    const char *p = info != NULL ? strstr(info, "used_memory:") : NULL;
    long long v = p != NULL ? atoll(p + strlen("used_memory:")) : -1;
    free(info);
    return v;
}

/* A number from Redis's INFO (e.g. "used_cpu_user:"), or -1. */
static double redis_info_num(const bench_t *b, const char *section, const char *field)
{
    char *info = itest_redis_str(&b->r, "INFO %s", section);
    const char *p = info != NULL ? strstr(info, field) : NULL;
    double v = p != NULL ? atof(p + strlen(field)) : -1;
    free(info);
    return v;
}

/* Redis's CPU seconds so far (user + system, its main thread and its I/O threads; a
 * child rewriting the append-only file counts apart). */
static double redis_cpu_s(const bench_t *b)
{
    return redis_info_num(b, "cpu", "used_cpu_user:") + redis_info_num(b, "cpu", "used_cpu_sys:");
}

/* A process's figures from /proc: CPU seconds (user + system) and peak RSS in KiB. */
static double proc_cpu_s(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* Fields after the command name, which is in parentheses and may hold spaces:
     * utime and stime are fields 14 and 15 of the line, 12 and 13 after ')'. */
    const char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    if (p == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The memory of the global event stream (tern:events), counted exactly. */
static long long global_stream_bytes(const bench_t *b)
{
    long long v = itest_redis_int(&b->r, "MEMORY USAGE tern:events SAMPLES 0");
    return v > 0 ? v : 0;
}

/* CPU seconds of every ternd of the world together. */
static double ternds_cpu_s(const bench_t *b)
{
    double s = proc_cpu_s(b->t.pid);
    for (int i = 0; i < b->n_more; i++)
        s += proc_cpu_s(b->more[i].pid);
    return s;
}

static double self_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* An integer from the environment within [lo, hi], or `def` when unset. */
static int env_int(const char *name, int def, int lo, int hi)
{
    const char *v = getenv(name);
    if (v == NULL || *v == '\0')
        return def;
    char *end;
    long n = strtol(v, &end, 10);
    if (*end != '\0' || n < lo || n > hi)
        fail_msg("%s=%s: expected an integer from %d to %d", name, v, lo, hi);
    return (int)n;
}

/* A chain of `steps` core.noop steps named bench-noop-s<steps> (malloc'd). */
static char *noop_chain_json(int steps)
{
    size_t cap = 64 + (size_t)steps * 64, n;
    char *text = malloc(cap);
    n = (size_t)snprintf(text, cap, "{\"name\": \"bench-noop-s%d\", \"chain\": [", steps);
    for (int i = 0; i < steps; i++)
        n += (size_t)snprintf(text + n, cap - n, "%s{\"name\": \"n%d\", \"task\": \"core.noop\"}",
                              i ? ", " : "", i);
    snprintf(text + n, cap - n, "]}");
    return text;
}

/* ---- the scenarios --------------------------------------------------------------- */

/* Redis's CPU per job since `rcpu0` (redis_cpu_s): what bounds (a) and (b), since
 * Redis runs on one core (docs/PERFORMANCE.md, "Where (a) through the bulk path stops"). */
static void emit_redis_us_per_job(const bench_t *b, const char *scen, double rcpu0)
{
    emit(scen, "redis_us_per_job", (redis_cpu_s(b) - rcpu0) * 1e6 / n_jobs);
}

/* The HTTP client's CPU per request: on this 2-core machine it is taken from ternd and
 * Redis, so it is reported beside the rates it may have held down. */
static void emit_client_cpu(const http_blast_t *h, const char *scen)
{
    emit(scen, "client_cpu_us_per_req", h->cpu_s * 1e6 / h->n);
}

static void run_bulk(bench_t *b, const char *workflow, int steps, const char *scen)
{
    double rcpu0 = redis_cpu_s(b);
    double t0 = now_s();
    submit_bulk(b, workflow, n_jobs);
    wait_finished(b, n_jobs, t0);
    double el = now_s() - t0;
    emit(scen, "jobs_per_s", n_jobs / el);
    if (steps > 1)
        emit(scen, "steps_per_s", (double)n_jobs * steps / el);
    emit_redis_us_per_job(b, scen, rcpu0);
}

/* EVALSHA calls Redis has counted so far (INFO commandstats), or -1. */
static double evalsha_calls(const bench_t *b)
{
    char *info = itest_redis_str(&b->r, "INFO commandstats");
    const char *p = info != NULL ? strstr(info, "cmdstat_evalsha:calls=") : NULL;
    double v = p != NULL ? atof(p + strlen("cmdstat_evalsha:calls=")) : -1;
    free(info);
    return v;
}

/* q-hop and q-same: N 2-step no-op jobs through the bulk path on two ternds. In q-hop
 * the second step names the queue bench-q2, which only the second ternd serves (the
 * first serves default), so every job hops there after its first step and back to end;
 * in q-same the workflow names no step queue and both ternds serve default. Besides the
 * rates, evalsha_calls_per_job: script calls Redis counted per job (a batched call
 * counts once, however many jobs it carries). */
static void run_queues(bench_t *b, bool hop)
{
    const char *extra[] = {"--role",      "runner", "--concurrency",  "1000",
                           "--lease-ms",  "10000",  "--heartbeat-ms", "2000",
                           "--log-level", "info",   "--queues",       hop ? "bench-q2" : "default",
                           NULL};
    char id[64];
    snprintf(id, sizeof id, "bench-%d-q", (int)getpid());
    itest_ternd_start(&b->more[b->n_more], &b->r, &b->dir, id, extra);
    b->n_more++;
    const char *scen = hop ? "q-hop" : "q-same";
    const char *wf = hop ? "bench-q-hop" : "bench-q-same";
    itest_workflow_put_ok(&b->c, itest_fmt("{\"name\": \"%s\", \"chain\": ["
                                           "{\"name\": \"n0\", \"task\": \"core.noop\"},"
                                           " {\"name\": \"n1\", \"task\": \"core.noop\"%s}]}",
                                           wf, hop ? ", \"queue\": \"bench-q2\"" : ""));
    double rcpu0 = redis_cpu_s(b), calls0 = evalsha_calls(b);
    double t0 = now_s();
    submit_bulk(b, wf, n_jobs);
    wait_finished(b, n_jobs, t0);
    double el = now_s() - t0;
    emit(scen, "jobs_per_s", n_jobs / el);
    emit_redis_us_per_job(b, scen, rcpu0);
    emit(scen, "evalsha_calls_per_job", (evalsha_calls(b) - calls0) / n_jobs);
}

/* Requests in flight in a-api: 256 connections, one request on each. The client of
 * BullMQ's (a) keeps 1,000 adds in flight; on the 2-core machine of docs/PERFORMANCE.md tern
 * did best at 256 (64 keeps ternd, Redis and the client taking turns on each burst,
 * 1,000 makes bursts longer than Redis's answers are quick). (f) keeps 64. */
#define A_API_CONNS 256

static void run_a_api(bench_t *b)
{
    http_blast_t h = {.port = b->t.api_port,
                      .post = true,
                      .n = n_jobs,
                      .conns = env_int("BENCH_API_CONNS", A_API_CONNS, 1, HTTP_BLAST_CONNS_MAX),
                      .limit_s = WAIT_MS / 1000.0,
                      .body = "{\"workflow\": \"bench-noop-1\"}"};
    double rcpu0 = redis_cpu_s(b), tcpu0 = ternds_cpu_s(b);
    double t0 = now_s();
    pthread_t th;
    if (pthread_create(&th, NULL, http_blast_run, &h) != 0)
        fail_msg("cannot start the HTTP client's thread");
    wait_finished(b, n_jobs, t0);
    pthread_join(th, NULL);
    double el = now_s() - t0;
    if (atomic_load(&h.bad) > 0)
        fail_msg("%d HTTP creates failed, the first: %s", atomic_load(&h.bad), h.err);
    emit("a-api", "jobs_per_s", n_jobs / el);
    emit_client_cpu(&h, "a-api");
    emit_redis_us_per_job(b, "a-api", rcpu0);
    /* ternd's own CPU per job (serving the create and running the job): a count of the
     * work done, unlike the rate, which the machine's other load moves. */
    emit("a-api", "ternd_cpu_us_per_job", (ternds_cpu_s(b) - tcpu0) * 1e6 / n_jobs);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void run_c(bench_t *b)
{
    double *lat = calloc((size_t)n_jobs, sizeof *lat);
    for (int i = 0; i < n_jobs; i++) {
        int running = b->running, finished = b->finished;
        double t0 = now_s();
        job_create_req_t req = {.workflow = "bench-noop-1"};
        job_ops_create(b->c.ops, &req, on_created, b);
        while ((b->running == running || b->finished == finished) && now_s() - t0 < 10.0)
            uv_run(&b->c.loop, UV_RUN_ONCE);
        if (b->finished == finished)
            fail_msg("job %d did not finish within 10 s", i);
        lat[i] = (b->t_running - t0) * 1000.0;
    }
    qsort(lat, (size_t)n_jobs, sizeof *lat, cmp_double);
    emit("c", "p50_ms", lat[n_jobs / 2]);
    emit("c", "p99_ms", lat[(n_jobs * 99) / 100]);
    free(lat);
}

/* Redis memory per finished 10-step job, without the global event stream: it is capped
 * (100,000 events by default, about 20 MB), a fixed cost that stays full on a system
 * that has run a while. "bytes_per_job" is at rest, once the jobs' own streams expired
 * (a succeeded job keeps its stream --success-events-s, 2 s here); the figure right
 * after the last job ended, streams included, is "bytes_per_job_at_end". */
static void run_e(bench_t *b)
{
    b->uuids = calloc((size_t)n_jobs, sizeof *b->uuids);
    long long mem0 = used_memory(b), ev0 = global_stream_bytes(b);
    double t0 = now_s();
    submit_bulk(b, "bench-noop-10", n_jobs);
    wait_finished(b, n_jobs, t0);
    long long mem1 = used_memory(b), ev1 = global_stream_bytes(b);
    emit("e", "bytes_per_job_at_end", (double)((mem1 - mem0) - (ev1 - ev0)) / n_jobs);
    /* EXISTS also deletes an expired key on the spot, so rounds of it end the wait as
     * soon as every stream's time is up (bounded: 60 s). */
    int left = n_jobs;
    for (double t1 = now_s(); left > 0 && now_s() - t1 < 60.0;) {
        left = 0;
        for (int i = 0; i < n_jobs; i++)
            left += itest_redis_int(&b->r, "EXISTS tern:job:%s:events", b->uuids[i]) > 0;
        if (left > 0)
            itest_pause_ms(200);
    }
    if (left > 0)
        fail_msg("%d job event streams still there 60 s after the jobs ended", left);
    long long mem2 = used_memory(b), ev2 = global_stream_bytes(b);
    emit("e", "bytes_per_job", (double)((mem2 - mem0) - (ev2 - ev0)) / n_jobs);
}

static void run_f(bench_t *b, bool read)
{
    http_blast_t h = {.port = b->t.api_port, .n = n_jobs, .limit_s = WAIT_MS / 1000.0};
    if (!read) {
        h.post = true;
        h.body = "{\"workflow\": \"bench-noop-1\"}";
    } else {
        /* Reads of 1,000 finished jobs, round robin. */
        int k = 1000;
        b->uuids = calloc((size_t)k, sizeof *b->uuids);
        double t0 = now_s();
        submit_bulk(b, "bench-noop-1", k);
        wait_finished(b, k, t0);
        h.uuids = b->uuids;
        h.n_uuids = k;
    }
    http_blast_run(&h);
    if (atomic_load(&h.bad) > 0)
        fail_msg("%d HTTP requests failed, the first: %s", atomic_load(&h.bad), h.err);
    emit(read ? "f-read" : "f-create", "req_per_s", n_jobs / (h.t_end - h.t_start));
    emit_client_cpu(&h, read ? "f-read" : "f-create");
    if (!read) /* Leaves nothing queued for the next scenario. */
        wait_finished(b, n_jobs, now_s());
}

/* scale-*: N jobs of BENCH_STEPS no-op steps with a BENCH_PARAMS_BYTES string param,
 * all submitted at once through the bulk path to BENCH_RUNNERS ternds. Besides the
 * rates it reports what each party spent: Redis's used_memory growth per job, the
 * ternds' largest peak RSS, and the CPU of Redis, the ternds and this client as a
 * percentage of the wall time (on a 2-core machine the three share 200 %). */
static void run_scale(bench_t *b)
{
    int steps = env_int("BENCH_STEPS", 1, 1, MAX_STEPS);
    int pbytes = env_int("BENCH_PARAMS_BYTES", 0, 0, MAX_PARAMS);
    int runners = env_int("BENCH_RUNNERS", 1, 1, MAX_RUNNERS);
    double x = strcmp(scenario, "scale-steps") == 0     ? steps
               : strcmp(scenario, "scale-params") == 0  ? pbytes
               : strcmp(scenario, "scale-runners") == 0 ? runners
                                                        : n_jobs;
    snprintf(scale_shape, sizeof scale_shape,
             ", \"n\": %d, \"steps\": %d, \"params_bytes\": %d, \"runners\": %d", n_jobs, steps,
             pbytes, runners);
    world_add_runners(b, runners - 1);
    char *wf = noop_chain_json(steps);
    itest_workflow_put_ok(&b->c, wf);
    free(wf);
    char wf_name[64];
    snprintf(wf_name, sizeof wf_name, "bench-noop-s%d", steps);
    json_t *params = NULL;
    if (pbytes > 0) {
        char *blob = malloc((size_t)pbytes + 1);
        memset(blob, 'x', (size_t)pbytes);
        blob[pbytes] = '\0';
        params = json_pack("{s:s}", "blob", blob);
        free(blob);
    }

    /* The global event stream is capped (100,000 entries by default): a system that has
     * run a while keeps it full, so each new entry evicts an old one. Its growth here
     * depends only on how full it was before the run, so it is left out of the bytes a
     * job keeps. */
    long long mem0 = used_memory(b), ev0 = global_stream_bytes(b);
    double rcpu0 = redis_cpu_s(b);
    /* The world's own follower would only duplicate the thread's work on the loop. */
    events_follow_stop(b->follow);
    b->follow = NULL;
    /* The bound: a minute plus 2,000 steps a second, a quarter of today's rate. */
    double bound = 60.0 + (double)n_jobs * steps / 2000.0;
    bound = bound < WAIT_MS / 1000.0 ? bound : WAIT_MS / 1000.0;
    tail_start(b, n_jobs, now_s() + bound);
    tail_t *tl = b->tail;
    double tcpu0 = ternds_cpu_s(b), ccpu0 = self_cpu_s();
    double t0 = now_s();
    for (int i = 0; i < n_jobs; i++) {
        job_create_req_t req = {.workflow = wf_name, .params = params};
        job_ops_create(b->c.ops, &req, on_created, b);
    }
    /* Until every create is answered and the thread has counted every "finished"
     * event; the thread's own bound ends it. */
    while ((b->created < n_jobs || !atomic_load(&tl->done)) && b->create_failed == 0 &&
           now_s() - t0 < bound + 10.0)
        uv_run(&b->c.loop, UV_RUN_ONCE);
    if (b->create_failed > 0)
        fail_msg("%d creates failed", b->create_failed);
    if (!atomic_load(&tl->done) || atomic_load(&tl->finished) < n_jobs)
        fail_msg("%d of %d jobs finished within %.0f s (%s)", atomic_load(&tl->finished), n_jobs,
                 bound, tl->err[0] ? tl->err : "the thread did not end");
    double el = tl->t_done - t0;
    double ccpu = self_cpu_s() - ccpu0, tcpu = ternds_cpu_s(b) - tcpu0;
    double rcpu = redis_cpu_s(b) - rcpu0;
    long long mem1 = used_memory(b), ev1 = global_stream_bytes(b);
    long rss = itest_peak_rss_kb(b->t.pid);
    for (int i = 0; i < b->n_more; i++) {
        long r = itest_peak_rss_kb(b->more[i].pid);
        rss = r > rss ? r : rss;
    }
    json_decref(params);

    emit_x(scenario, "jobs_per_s", n_jobs / el, x);
    emit_x(scenario, "steps_per_s", (double)n_jobs * steps / el, x);
    emit_x(scenario, "bytes_per_job", (double)((mem1 - mem0) - (ev1 - ev0)) / n_jobs, x);
    emit_x(scenario, "rss_mb", (double)rss / 1024.0, x);
    emit_x(scenario, "redis_cpu_pct", 100.0 * rcpu / el, x);
    emit_x(scenario, "ternd_cpu_pct", 100.0 * tcpu / el, x);
    emit_x(scenario, "client_cpu_pct", 100.0 * ccpu / el, x);
}

/* The world is set up and torn down around the scenario, so that a failed scenario
 * still stops its ternds and removes its directory. */
static int world_setup(void **state)
{
    bench_t *b = calloc(1, sizeof *b);
    *state = b;
    world_start(b);
    return 0;
}

static int world_teardown(void **state)
{
    bench_t *b = *state;
    if (b != NULL && b->dir.path[0] != '\0') {
        world_stop(b);
        free(b);
    }
    return 0;
}

static void bench_main(void **state)
{
    bench_t *b = *state;
    if (strcmp(scenario, "a-api") == 0)
        run_a_api(b);
    else if (strcmp(scenario, "a-bulk") == 0)
        run_bulk(b, "bench-noop-1", 1, "a-bulk");
    else if (strcmp(scenario, "b") == 0)
        run_bulk(b, "bench-noop-10", 10, "b");
    else if (strcmp(scenario, "c") == 0)
        run_c(b);
    else if (strcmp(scenario, "e") == 0)
        run_e(b);
    else if (strcmp(scenario, "f-create") == 0)
        run_f(b, false);
    else if (strcmp(scenario, "f-read") == 0)
        run_f(b, true);
    else if (strcmp(scenario, "q-hop") == 0 || strcmp(scenario, "q-same") == 0)
        run_queues(b, strcmp(scenario, "q-hop") == 0);
    else if (strncmp(scenario, "scale-", 6) == 0 &&
             (strcmp(scenario + 6, "jobs") == 0 || strcmp(scenario + 6, "steps") == 0 ||
              strcmp(scenario + 6, "params") == 0 || strcmp(scenario + 6, "runners") == 0))
        run_scale(b);
    else
        fail_msg("unknown scenario %s", scenario);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_tern a-api|a-bulk|b|c|e|f-create|f-read|q-hop|q-same|"
                        "scale-jobs|scale-steps|scale-params|scale-runners REDIS_URL [N] [REP]\n"
                        "  scale-*: BENCH_STEPS, BENCH_PARAMS_BYTES, BENCH_RUNNERS in the "
                        "environment\n");
        return 2;
    }
    scenario = argv[1];
    redis_url = argv[2];
    n_jobs = argc > 3 ? atoi(argv[3]) : 0;
    rep = argc > 4 ? atoi(argv[4]) : 1;
    if (n_jobs <= 0)
        n_jobs = strcmp(scenario, "c") == 0 || strcmp(scenario, "e") == 0 ? 1000
                 : strcmp(scenario, "b") == 0                             ? 2000
                                                                          : 20000;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(bench_main, world_setup, world_teardown)};
    return cmocka_run_group_tests(tests, NULL, NULL) == 0 ? 0 : 1;
}
