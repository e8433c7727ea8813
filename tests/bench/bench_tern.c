/*
 * bench_tern.c -- tern's side of the benchmark suite (see tests/bench/run.sh and README
 * "Speed"). Against a Redis that is already running (its URL is an argument), it starts
 * one ternd (runner and API, --concurrency 1000), runs one scenario and prints one JSON
 * line per measurement: {"system": "tern", "scenario", "metric", "value", "rep"}.
 *
 *   TERN_BIN=build-release/engine/ternd TERN_TASKS=build-release/tasks \
 *   TERN_ITEST=build-release/tests/integration/plugin/itest.so \
 *   build-release/tests/bench/bench_tern SCENARIO REDIS_URL [N] [REP]
 *
 * Scenarios: a-api (N 1-step no-op jobs submitted over HTTP, 64 keep-alive connections),
 * a-bulk (the same through job_ops_create, all in flight at once), b (N 10-step no-op
 * jobs through the bulk path), c (N 1-step jobs one at a time: submission to the
 * job's "running" event as the client receives it), e (Redis used_memory per finished
 * 10-step job), f-create and f-read (HTTP creates and reads, 64 keep-alive connections).
 * The end-to-end clocks start at the first submission and stop at the last "finished"
 * event on the global stream. Every wait is bounded.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <hiredis/hiredis.h>

#include "common.h"
#include "events.h"
#include "harness.h"

#define HTTP_CONNS 64
#define WAIT_MS    300000u /* the bound of any one scenario's wait */

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

static void emit(const char *scen, const char *metric, double value)
{
    printf("{\"system\": \"tern\", \"scenario\": \"%s\", \"metric\": \"%s\", \"value\": %.6g, "
           "\"rep\": %d}\n",
           scen, metric, value, rep);
    fflush(stdout);
}

/* ---- the HTTP client: curl multi, HTTP_CONNS requests in flight ------------------ */

typedef struct blast {
    int port;
    bool post;         /* POST /jobs with `body`, else GET /jobs/<uuid> */
    const char *body;  /* the POST body */
    char (*uuids)[40]; /* for GET: read round robin */
    int n_uuids;
    int n;              /* requests in all */
    atomic_int ok, bad; /* answers 2xx and others (or transport errors) */
    double t_start, t_end;
} blast_t;

static size_t discard(char *p, size_t size, size_t n, void *data)
{
    (void)p;
    (void)data;
    return size * n;
}

static void blast_setup(blast_t *b, CURL *h, struct curl_slist *hdr, int i, char *url)
{
    if (b->post)
        snprintf(url, 160, "http://127.0.0.1:%d/jobs", b->port);
    else
        snprintf(url, 160, "http://127.0.0.1:%d/jobs/%s", b->port, b->uuids[i % b->n_uuids]);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L);
    if (b->post) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, b->body);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    }
}

/* Runs all of b's requests (bounded by WAIT_MS); usable as a thread's body. */
static void *blast_run(void *arg)
{
    blast_t *b = arg;
    CURLM *m = curl_multi_init();
    curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, (long)HTTP_CONNS);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    CURL *h[HTTP_CONNS];
    static char urls[HTTP_CONNS][160];
    int next = 0, done = 0, used = 0;
    b->t_start = now_s();
    for (; used < HTTP_CONNS && next < b->n; used++) {
        h[used] = curl_easy_init();
        curl_easy_setopt(h[used], CURLOPT_PRIVATE, urls[used]);
        blast_setup(b, h[used], hdr, next++, urls[used]);
        curl_multi_add_handle(m, h[used]);
    }
    while (done < b->n && now_s() - b->t_start < WAIT_MS / 1000.0) {
        int running = 0, queued = 0;
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        while ((msg = curl_multi_info_read(m, &queued)) != NULL) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            CURL *e = msg->easy_handle;
            long code = 0;
            curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
            if (msg->data.result == CURLE_OK && code >= 200 && code < 300)
                atomic_fetch_add(&b->ok, 1);
            else
                atomic_fetch_add(&b->bad, 1);
            done++;
            curl_multi_remove_handle(m, e);
            if (next < b->n) {
                char *url = NULL;
                curl_easy_getinfo(e, CURLINFO_PRIVATE, &url);
                blast_setup(b, e, hdr, next++, url);
                curl_multi_add_handle(m, e);
            }
        }
        if (done < b->n)
            curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    b->t_end = now_s();
    for (int i = 0; i < used; i++) {
        curl_multi_remove_handle(m, h[i]);
        curl_easy_cleanup(h[i]);
    }
    curl_slist_free_all(hdr);
    curl_multi_cleanup(m);
    return NULL;
}

/* ---- the world: ternd against the given Redis, a client, the global events ------- */

typedef struct bench {
    itest_client_t c;
    itest_ternd_t t;
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

static void on_created(void *data, int status, const json_t *res, const char *msg)
{
    bench_t *b = data;
    if (status != 0) {
        fprintf(stderr, "create failed: %s\n", msg);
        b->create_failed++;
    } else if (b->uuids != NULL) {
        snprintf(b->uuids[b->created], 40, "%s", json_string_value(json_object_get(res, "uuid")));
    }
    b->created++;
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
    const char *extra[] = {"--concurrency", "1000",        "--lease-ms", "10000", "--heartbeat-ms",
                           "2000",          "--log-level", "info",       NULL};
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

static void world_stop(bench_t *b)
{
    events_follow_stop(b->follow);
    itest_client_close(&b->c);
    itest_ternd_signal(&b->t, SIGTERM, 30000);
    itest_dir_remove(&b->dir);
    free(b->uuids);
}

/* Runs the client's loop until `count` jobs finished (bounded). */
static void wait_finished(bench_t *b, int count, double t0)
{
    while (b->finished < count && now_s() - t0 < WAIT_MS / 1000.0)
        uv_run(&b->c.loop, UV_RUN_ONCE);
    if (b->finished < count)
        fail_msg("only %d of %d jobs finished", b->finished, count);
}

static void submit_bulk(bench_t *b, const char *workflow, int count)
{
    for (int i = 0; i < count; i++) {
        job_create_req_t req = {.workflow = workflow};
        job_ops_create(b->c.ops, &req, on_created, b);
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

/* ---- the scenarios --------------------------------------------------------------- */

static void run_bulk(bench_t *b, const char *workflow, int steps, const char *scen)
{
    double t0 = now_s();
    submit_bulk(b, workflow, n_jobs);
    wait_finished(b, n_jobs, t0);
    double el = now_s() - t0;
    emit(scen, "jobs_per_s", n_jobs / el);
    if (steps > 1)
        emit(scen, "steps_per_s", (double)n_jobs * steps / el);
}

static void run_a_api(bench_t *b)
{
    blast_t h = {.port = b->t.api_port,
                 .post = true,
                 .n = n_jobs,
                 .body = "{\"workflow\": \"bench-noop-1\"}"};
    double t0 = now_s();
    pthread_t th;
    pthread_create(&th, NULL, blast_run, &h);
    wait_finished(b, n_jobs, t0);
    pthread_join(th, NULL);
    double el = now_s() - t0;
    if (atomic_load(&h.bad) > 0)
        fail_msg("%d HTTP creates failed", atomic_load(&h.bad));
    emit("a-api", "jobs_per_s", n_jobs / el);
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

static void run_e(bench_t *b)
{
    long long before = used_memory(b);
    double t0 = now_s();
    submit_bulk(b, "bench-noop-10", n_jobs);
    wait_finished(b, n_jobs, t0);
    long long after = used_memory(b);
    emit("e", "bytes_per_job", (double)(after - before) / n_jobs);
}

static void run_f(bench_t *b, bool read)
{
    blast_t h = {.port = b->t.api_port, .n = n_jobs};
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
    blast_run(&h);
    if (atomic_load(&h.bad) > 0)
        fail_msg("%d HTTP requests failed", atomic_load(&h.bad));
    emit(read ? "f-read" : "f-create", "req_per_s", n_jobs / (h.t_end - h.t_start));
    if (!read) /* Leaves nothing queued for the next scenario. */
        wait_finished(b, n_jobs, now_s());
}

static void bench_main(void **state)
{
    (void)state;
    bench_t *b = calloc(1, sizeof *b);
    world_start(b);
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
    else
        fail_msg("unknown scenario %s", scenario);
    world_stop(b);
    free(b);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_tern a-api|a-bulk|b|c|e|f-create|f-read REDIS_URL [N] "
                        "[REP]\n");
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
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {cmocka_unit_test(bench_main)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL) == 0 ? 0 : 1;
    curl_global_cleanup();
    return rc;
}
