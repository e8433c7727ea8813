/*
 * bench_sleepers.c -- one runner holding N concurrent jobs that each sleep: the time
 * for all of them to finish and the runner's peak RSS (VmHWM). The target of the core
 * design: 10,000 jobs sleeping 5 s finish in under 7 s with the runner well under
 * 100 MB. Usage (after meson setup build):
 *
 *   TERN_BIN=build/engine/ternd TERN_TASKS=build/tasks \
 *   TERN_ITEST=build/tests/integration/plugin/itest.so \
 *   build/tests/bench/bench_sleepers [jobs] [sleep_ms] [redis_url] [rep]
 *
 * With a Redis URL (tests/bench/run.sh gives one) it uses that Redis instead of starting
 * its own, and also prints the figures as lines of the suite's format (scenario "d").
 * Prints one JSON line with the figures. Jobs are submitted before the clock starts
 * is not how users see it, so the clock starts at the first submission.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "events/events.h"
#include "harness.h"

static int n_jobs = 10000;
static int sleep_ms = 5000;
static const char *redis_url = NULL;
static int rep = 1;

typedef struct bench {
    itest_client_t *c;
    int created, failed, finished;
    bool all_created;
} bench_t;

static void on_created(void *data, int status, const json_t *res, const char *msg)
{
    (void)res;
    bench_t *b = data;
    if (status != 0) {
        fprintf(stderr, "create failed: %s\n", msg);
        b->failed++;
    }
    b->created++;
}

static bool on_global_event(void *data, const char *id, const json_t *ev)
{
    (void)id;
    bench_t *b = data;
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (type != NULL && strcmp(type, "finished") == 0)
        b->finished++;
    return b->finished < n_jobs;
}

static void bench_sleepers(void **state)
{
    (void)state;
    itest_dir_t dir;
    itest_dir_make(&dir);
    itest_redis_t redis;
    if (redis_url != NULL) {
        /* A Redis the caller runs: only its URL and port are needed here. */
        memset(&redis, 0, sizeof redis);
        snprintf(redis.url, sizeof redis.url, "%s", redis_url);
        const char *colon = strrchr(redis_url, ':');
        redis.port = colon != NULL ? atoi(colon + 1) : 6379;
    } else {
        itest_redis_start(&redis, dir.path);
    }
    itest_ternd_t t;
    char conc[16];
    snprintf(conc, sizeof conc, "%d", n_jobs);
    const char *extra[] = {"--concurrency",  conc,   "--lease-ms", "10000",
                           "--heartbeat-ms", "2000", NULL};
    itest_ternd_start(&t, &redis, &dir, "bench", extra);
    itest_client_t c;
    itest_client_open(&c, &redis);
    char msg[512];
    if (itest_workflow_put(&c,
                           itest_fmt("{\"name\": \"sleeper\", \"chain\": [{\"name\": \"s\", "
                                     "\"task\": \"core.sleep\", \"args\": {\"ms\": %d}}]}",
                                     sleep_ms),
                           NULL, msg, sizeof msg) != 0)
        fail_msg("%s", msg);
    long rss_idle = itest_peak_rss_kb(t.pid);
    bench_t b = {.c = &c};
    events_follow_t *f = events_follow(&c.loop, &c.addr, NULL, "$", on_global_event, &b);
    uint64_t t0 = clock_mono_ms();
    for (int i = 0; i < n_jobs; i++) {
        job_create_req_t req = {.workflow = "sleeper"};
        job_ops_create(c.ops, &req, on_created, &b);
    }
    /* Bounded: sleep time plus a generous margin. */
    uint64_t bound = (uint64_t)sleep_ms + 60000;
    while (b.finished < n_jobs && clock_mono_ms() - t0 < bound)
        uv_run(&c.loop, UV_RUN_ONCE);
    uint64_t elapsed = clock_mono_ms() - t0;
    long rss = itest_peak_rss_kb(t.pid);
    printf("{\"bench\": \"sleepers\", \"jobs\": %d, \"sleep_ms\": %d, \"finished\": %d, "
           "\"create_failures\": %d, \"elapsed_ms\": %llu, \"runner_peak_rss_kb\": %ld, "
           "\"runner_idle_rss_kb\": %ld}\n",
           n_jobs, sleep_ms, b.finished, b.failed, (unsigned long long)elapsed, rss, rss_idle);
    if (redis_url != NULL && b.finished == n_jobs) {
        printf("{\"system\": \"tern\", \"scenario\": \"d\", \"metric\": \"seconds\", "
               "\"value\": %.3f, \"rep\": %d}\n",
               (double)elapsed / 1000.0, rep);
        printf("{\"system\": \"tern\", \"scenario\": \"d\", \"metric\": \"rss_mb\", "
               "\"value\": %.1f, \"rep\": %d}\n",
               (double)rss / 1024.0, rep);
    }
    if (b.finished < n_jobs)
        events_follow_stop(f);
    itest_client_close(&c);
    itest_ternd_signal(&t, SIGTERM, 30000);
    if (redis_url == NULL)
        itest_redis_stop(&redis, SIGTERM);
    itest_dir_remove(&dir);
    assert_int_equal(b.finished, n_jobs);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        n_jobs = atoi(argv[1]);
    if (argc > 2)
        sleep_ms = atoi(argv[2]);
    if (argc > 3)
        redis_url = argv[3];
    if (argc > 4)
        rep = atoi(argv[4]);
    const struct CMUnitTest tests[] = {cmocka_unit_test(bench_sleepers)};
    return cmocka_run_group_tests(tests, NULL, NULL) == 0 ? 0 : 1;
}
