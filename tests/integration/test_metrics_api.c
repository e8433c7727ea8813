/*
 * test_metrics_api.c -- GET /metrics on a real ternd after a few jobs: the content
 * type Prometheus expects, jobs by execution, queue depths (including a queue no
 * runner serves), delayed jobs, live runners, step durations and retries by task,
 * HTTP requests by route and status, and tern_redis_up following Redis going away and
 * coming back (the page is still served while Redis is down).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "base/clock.h"
#include "http_sync.h"
#include "world.h"

static itest_world_t W;

static int group_setup(void **state)
{
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    itest_world_start(&W, "m1", NULL, NULL);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    itest_world_stop(&W, 15000);
    curl_global_cleanup();
    return 0;
}

static void put(const char *json)
{
    itest_workflow_put_ok(&W.client, json);
}

static void create(const char *workflow, uint64_t exec_after_ms, char uuid[40])
{
    char msg[1024];
    if (itest_job_create(&W.client, workflow, NULL, NULL, exec_after_ms, NULL, uuid, msg,
                         sizeof msg) != 0)
        fail_msg("job of %s refused: %s", workflow, msg);
}

/* GET /metrics; the body (malloc'd) and the content type. */
static char *scrape(char *ctype, size_t ctlen)
{
    http_sync_t h;
    http_sync_open(&h, W.base);
    http_sync_resp_t r;
    http_sync_do(&h, "GET", "/metrics", NULL, 0, NULL, &r);
    if (r.status != 200)
        fail_msg("GET /metrics answered %ld: %s", r.status, r.body ? r.body : r.error);
    if (ctype != NULL && http_sync_header(&r, "Content-Type", ctype, ctlen) == NULL)
        ctype[0] = '\0';
    char *body = r.body;
    r.body = NULL;
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
    return body;
}

static void assert_sample(const char *page, const char *series, double want)
{
    double v = itest_metric_sample(page, series);
    if (v != want)
        fail_msg("%s = %g, expected %g", series, v, want);
}

static void test_metrics_after_a_few_jobs(void **state)
{
    (void)state;
    put("{\"name\": \"m-ok\", \"version\": \"1.0.0\", \"chain\": ["
        " {\"name\": \"a\", \"task\": \"core.noop\", \"args\": {}},"
        " {\"name\": \"b\", \"task\": \"core.sleep\", \"args\": {\"ms\": 30}}]}");
    put("{\"name\": \"m-retry\", \"version\": \"1.0.0\", \"chain\": ["
        " {\"name\": \"a\", \"task\": \"core.fail\", \"retry\": {\"max_attempts\": 3,"
        "  \"initial_ms\": 10, \"jitter\": false},"
        "  \"args\": {\"code\": \"Flaky\", \"message\": \"again\"}}]}");
    put("{\"name\": \"m-orphan\", \"version\": \"1.0.0\", \"queue\": \"orphans\", \"chain\": ["
        " {\"name\": \"a\", \"task\": \"core.noop\", \"args\": {}}]}");
    char uuid[40];
    for (int i = 0; i < 3; i++) {
        create("m-ok", 0, uuid);
        json_t *job = itest_wait_finished(&W.client, uuid, 10000);
        assert_non_null(job);
        json_decref(job);
    }
    create("m-retry", 0, uuid);
    json_t *job = itest_wait_finished(&W.client, uuid, 10000);
    assert_string_equal(itest_execution(job), "failed");
    json_decref(job);
    create("m-orphan", 0, uuid);                         /* nobody serves "orphans" */
    create("m-ok", clock_wall_ms() + 3600 * 1000, uuid); /* due in an hour */

    /* In-flight counts come from the runners' heartbeats, so the page may show the
     * last job for one heartbeat after it finished: wait for it, with a bound. */
    char ctype[128];
    char *page = scrape(ctype, sizeof ctype);
    for (int tries = 0; tries < 50 && itest_metric_sample(page, "tern_jobs_in_flight") != 0;
         tries++) {
        free(page);
        itest_pause_ms(50);
        page = scrape(ctype, sizeof ctype);
    }
    assert_string_equal(ctype, "text/plain; version=0.0.4");
    assert_sample(page, "tern_redis_up", 1);
    assert_true(itest_metric_sample(page, "tern_redis_rtt_seconds") > 0);
    assert_sample(page, "tern_jobs{execution=\"succeeded\"}", 3);
    assert_sample(page, "tern_jobs{execution=\"failed\"}", 1);
    assert_sample(page, "tern_jobs{execution=\"queued\"}", 2);
    assert_sample(page, "tern_jobs{execution=\"running\"}", 0);
    assert_sample(page, "tern_jobs_stored", 6);
    assert_sample(page, "tern_queue_depth{queue=\"default\"}", 0);
    assert_sample(page, "tern_queue_depth{queue=\"orphans\"}", 1);
    assert_sample(page, "tern_jobs_delayed", 1);
    assert_sample(page, "tern_runners", 1);
    assert_sample(page, "tern_jobs_in_flight", 0);
    assert_sample(page, "tern_step_duration_seconds_count{task=\"core.noop\",status=\"succeeded\"}",
                  3);
    assert_sample(page,
                  "tern_step_duration_seconds_count{task=\"core.sleep\",status=\"succeeded\"}", 3);
    assert_true(itest_metric_sample(page,
                                    "tern_step_duration_seconds_sum{task=\"core.sleep\",status=\""
                                    "succeeded\"}") >= 0.09);
    assert_sample(page, "tern_step_duration_seconds_count{task=\"core.fail\",status=\"failed\"}",
                  3);
    assert_sample(page, "tern_step_retries_total{task=\"core.fail\"}", 2);
    assert_sample(page, "tern_event_streams_open", 0);
    free(page);

    /* This scrape is counted by the next one. */
    page = scrape(NULL, 0);
    assert_true(itest_metric_sample(page,
                                    "tern_http_requests_total{route=\"/metrics\",method=\"GET\","
                                    "status=\"200\"}") >= 1);
    free(page);
}

/* Redis goes away: the page is still served, saying so; it comes back: so does the
 * flag and the gauges. */
static void test_redis_down_and_back(void **state)
{
    (void)state;
    itest_client_close(&W.client);
    itest_redis_stop(&W.redis, SIGTERM);
    char *page = NULL;
    for (int i = 0; i < 200; i++) {
        free(page);
        page = scrape(NULL, 0);
        if (itest_metric_sample(page, "tern_redis_up") == 0)
            break;
        itest_pause_ms(25);
    }
    assert_sample(page, "tern_redis_up", 0);
    assert_sample(page, "tern_jobs{execution=\"succeeded\"}", -1); /* not made up */
    free(page);
    itest_redis_restart(&W.redis);
    page = NULL;
    for (int i = 0; i < 400; i++) {
        free(page);
        page = scrape(NULL, 0);
        if (itest_metric_sample(page, "tern_redis_up") == 1 &&
            itest_metric_sample(page, "tern_jobs{execution=\"succeeded\"}") == 3)
            break;
        itest_pause_ms(25);
    }
    assert_sample(page, "tern_redis_up", 1);
    assert_sample(page, "tern_jobs{execution=\"succeeded\"}", 3);
    free(page);
    itest_client_open(&W.client, &W.redis);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_after_a_few_jobs),
        cmocka_unit_test(test_redis_down_and_back),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown) == 0 ? 0 : 1;
}
