/*
 * test_redis_freeze.c -- a Redis that stops answering without closing its sockets
 * (SIGSTOP: what a frozen VM, a swapped-out server or a silent network looks like to
 * ternd), then goes on (SIGCONT):
 *
 *   - within 4 s GET /ping answers 503 and GET /metrics shows tern_redis_up 0;
 *   - a POST /jobs sent as the freeze began is answered within 7 s: 503
 *     OutcomeUnknown naming the uuid ternd drew for the job; a GET /jobs/:uuid during
 *     the freeze is answered 503 at once;
 *   - once Redis goes on, /ping answers 200 again; the job the 503 named either does not
 *     exist or runs to its end with each step started once; the job that was running
 *     when Redis froze succeeds with each step started once (the itest plugin records
 *     every step start).
 *
 * The test runs with ternd's default health and command timeouts (2 s, 5 s). It stops
 * only the redis-server and ternd it started, by PID, and its teardown sends SIGCONT to
 * the redis-server it stopped whatever happened, before stopping it.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "base/clock.h"
#include "base/ident.h"
#include "http_sync.h"
#include "world.h"

#define STEPS      3
#define FREEZE_MS  12000 /* longer than the command timeout: reconnects meet the freeze */
#define NOTICE_MS  4000  /* /ping and tern_redis_up say "down" within this */
#define ANSWER_MS  7000  /* a call waiting on the frozen Redis is answered within this */
#define RECOVER_MS 10000 /* /ping says "up" within this of SIGCONT */
#define FINISH_MS  60000

static itest_world_t W;
static bool redis_stopped; /* SIGSTOP sent and no SIGCONT yet */

/* A POST /jobs made on its own thread while the main thread watches /ping. */
typedef struct create_call {
    pthread_t thread;
    bool started;
    http_sync_resp_t resp;
    long long elapsed_ms;
} create_call_t;

static create_call_t create_call;
static http_sync_t api; /* the main thread's client, open while api_open */
static bool api_open;

static long long now_ms(void)
{
    return (long long)clock_mono_ms();
}

static void redis_continue(void)
{
    if (redis_stopped && W.redis.pid > 0)
        kill(W.redis.pid, SIGCONT);
    redis_stopped = false;
}

/* The state letter of process `pid` in /proc (T: stopped), or '?'. */
static int group_setup(void **state)
{
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    itest_world_start(&W, "fz1", NULL, NULL);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    redis_continue();
    if (W.ternd.pid > 0)
        itest_world_stop(&W, 15000);
    curl_global_cleanup();
    return 0;
}

/* Runs after the test, also after a failed assertion: Redis goes on, the thread is
 * joined (its request is bounded by http_sync). */
static int test_teardown(void **state)
{
    (void)state;
    redis_continue();
    if (create_call.started) {
        pthread_join(create_call.thread, NULL);
        create_call.started = false;
    }
    http_sync_resp_dispose(&create_call.resp);
    /* Closed before ternd stops: it stops with no client connection left open. */
    if (api_open)
        http_sync_close(&api);
    api_open = false;
    return 0;
}

static void *create_thread(void *arg)
{
    (void)arg;
    http_sync_t own;
    http_sync_open(&own, W.base);
    static const char body[] = "{\"workflow\": \"fz\"}";
    long long t0 = now_ms();
    if (http_sync_do(&own, "POST", "/jobs", body, strlen(body), NULL, &create_call.resp) !=
        CURLE_OK)
        create_call.resp.status = 0;
    create_call.elapsed_ms = now_ms() - t0;
    http_sync_close(&own);
    return NULL;
}

static long http_get(http_sync_t *h, const char *path, http_sync_resp_t *out)
{
    memset(out, 0, sizeof *out);
    http_sync_do(h, "GET", path, NULL, 0, NULL, out);
    return out->status;
}

/* The value of sample `series` in GET /metrics, or -1. */
static double metric(http_sync_t *h, const char *series)
{
    http_sync_resp_t r;
    double v = -1;
    if (http_get(h, "/metrics", &r) == 200)
        v = itest_metric_sample(r.body, series);
    http_sync_resp_dispose(&r);
    return v;
}

/* Fails unless each chain step of job `uuid` was started exactly once. */
static void assert_steps_once(const char *uuid)
{
    for (int s = 0; s < STEPS; s++) {
        char key[64];
        snprintf(key, sizeof key, "%.36s/0/%d", uuid, s);
        int n = itest_side_count_exact(W.side, "start", key);
        if (n != 1)
            fail_msg("job %s: step %d started %d times (side channel %s)", uuid, s, n, W.side);
    }
}

static void test_frozen_redis(void **state)
{
    (void)state;
    char steps[2048] = "";
    for (int i = 0; i < STEPS; i++)
        snprintf(steps + strlen(steps), sizeof steps - strlen(steps),
                 "%s{\"name\": \"s%d\", \"task\": \"itest.record\", "
                 "\"args\": {\"file\": \"%s\", \"ms\": 1000}}",
                 i ? "," : "", i, W.side);
    itest_workflow_put_ok(&W.client, itest_fmt("{\"name\": \"fz\", \"chain\": [%s]}", steps));

    http_sync_t *h = &api;
    http_sync_open(h, W.base);
    api_open = true;
    http_sync_resp_t r;
    assert_int_equal(http_get(h, "/ping", &r), 200);
    http_sync_resp_dispose(&r);
    assert_true(metric(h, "tern_redis_up") == 1);

    /* A job that runs while Redis freezes: its first step has started. It is created
     * through the API, so that ternd knows the workflow and a create during the freeze
     * is one script call that stores the job. */
    static const char create_body[] = "{\"workflow\": \"fz\"}";
    assert_int_equal(http_sync_do(h, "POST", "/jobs", create_body, strlen(create_body), NULL, &r),
                     CURLE_OK);
    const char *made = json_string_value(json_object_get(r.json, "uuid"));
    if (r.status != 201 || made == NULL)
        fail_msg("POST /jobs answered %ld: %s", r.status, r.body ? r.body : r.error);
    char running[40];
    snprintf(running, sizeof running, "%s", made);
    http_sync_resp_dispose(&r);
    char key0[64];
    snprintf(key0, sizeof key0, "%s/0/0", running);
    itest_side_wait(W.side, "start", key0, 1, 15000);

    /* Freeze Redis, then create a job at once: the create reaches Redis's socket. */
    assert_int_equal(kill(W.redis.pid, SIGSTOP), 0);
    redis_stopped = true;
    long long stopped_at = now_ms();
    while (itest_proc_state(W.redis.pid, NULL) != 'T') {
        if (now_ms() - stopped_at > 2000)
            fail_msg("redis-server %d did not stop", (int)W.redis.pid);
        itest_pause_ms(1);
    }
    memset(&create_call.resp, 0, sizeof create_call.resp);
    assert_int_equal(pthread_create(&create_call.thread, NULL, create_thread, NULL), 0);
    create_call.started = true;

    /* The freeze is noticed. */
    for (;;) {
        long st = http_get(h, "/ping", &r);
        bool down = st == 503 && json_is_false(json_object_get(r.json, "redis"));
        http_sync_resp_dispose(&r);
        if (down)
            break;
        if (now_ms() - stopped_at > NOTICE_MS)
            fail_msg("/ping still answered %ld %.0f s after Redis froze (log %s)", st,
                     (now_ms() - stopped_at) / 1000.0, W.ternd.log);
        itest_pause_ms(50);
    }
    long long noticed_ms = now_ms() - stopped_at;
    double up = metric(h, "tern_redis_up");
    if (up != 0)
        fail_msg("tern_redis_up is %.0f while /ping says Redis is down", up);

    /* A read during the freeze gets its 503 at once. */
    char path[80];
    snprintf(path, sizeof path, "/jobs/%s", running);
    long long t0 = now_ms();
    long st = http_get(h, path, &r);
    long long get_ms = now_ms() - t0;
    if (st != 503 || get_ms > ANSWER_MS)
        fail_msg("GET %s during the freeze answered %ld after %lld ms: %s", path, st, get_ms,
                 r.body ? r.body : r.error);
    http_sync_resp_dispose(&r);

    /* The create sent as the freeze began: outcome unknown, with the job's uuid. */
    pthread_join(create_call.thread, NULL);
    create_call.started = false;
    const json_t *body = create_call.resp.json;
    const char *code = json_string_value(json_object_get(body, "code"));
    const char *named = json_string_value(json_object_get(body, "uuid"));
    const char *message = json_string_value(json_object_get(body, "message"));
    if (create_call.resp.status != 503 || code == NULL || strcmp(code, "OutcomeUnknown") != 0 ||
        named == NULL || !uuid_valid(named) || message == NULL)
        fail_msg("POST /jobs during the freeze answered %ld after %lld ms: %s",
                 create_call.resp.status, create_call.elapsed_ms,
                 create_call.resp.body ? create_call.resp.body : create_call.resp.error);
    if (create_call.elapsed_ms > ANSWER_MS)
        fail_msg("POST /jobs during the freeze was answered only after %lld ms",
                 create_call.elapsed_ms);
    char lookup[80];
    snprintf(lookup, sizeof lookup, "GET /jobs/%s", named);
    if (strstr(message, lookup) == NULL)
        fail_msg("the OutcomeUnknown message does not say \"%s\": %s", lookup, message);
    char unknown[40];
    snprintf(unknown, sizeof unknown, "%s", named);

    /* The freeze lasts past a reconnect; /ping says "down" all along. */
    int pings = 0;
    while (now_ms() - stopped_at < FREEZE_MS) {
        st = http_get(h, "/ping", &r);
        http_sync_resp_dispose(&r);
        if (st != 503)
            fail_msg("/ping answered %ld %lld ms into the freeze", st, now_ms() - stopped_at);
        pings++;
        itest_pause_ms(250);
    }

    redis_continue();
    long long continued_at = now_ms();
    for (;;) {
        st = http_get(h, "/ping", &r);
        http_sync_resp_dispose(&r);
        if (st == 200)
            break;
        if (now_ms() - continued_at > RECOVER_MS)
            fail_msg("/ping still answered %ld %d ms after Redis went on", st, RECOVER_MS);
        itest_pause_ms(50);
    }
    long long back_ms = now_ms() - continued_at;
    assert_true(metric(h, "tern_redis_up") == 1);

    /* The job that ran through the freeze ends, each step started once. */
    json_t *job = itest_wait_finished_ok(&W.client, running, FINISH_MS);
    assert_string_equal(itest_execution(job), "succeeded");
    json_decref(job);
    assert_steps_once(running);

    /* The job of the unknown create exists or not; if it does, it runs once. */
    snprintf(path, sizeof path, "/jobs/%s", unknown);
    st = http_get(h, path, &r);
    http_sync_resp_dispose(&r);
    bool created = st == 200;
    if (st != 200 && st != 404)
        fail_msg("GET %s after the freeze answered %ld", path, st);
    if (created) {
        job = itest_wait_finished_ok(&W.client, unknown, FINISH_MS);
        assert_string_equal(itest_execution(job), "succeeded");
        json_decref(job);
        assert_steps_once(unknown);
    } else {
        assert_int_equal(itest_side_count(W.side, "start", unknown), 0);
    }
    print_message("freeze %d ms: /ping 503 after %lld ms, GET answered 503 in %lld ms, "
                  "POST /jobs 503 OutcomeUnknown in %lld ms (job %s), %d pings 503 during the "
                  "freeze, /ping 200 %lld ms after SIGCONT\n",
                  FREEZE_MS, noticed_ms, get_ms, create_call.elapsed_ms,
                  created ? "created, ran once" : "not created", pings, back_ms);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_frozen_redis, test_teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
