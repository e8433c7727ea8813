/*
 * test_long_backoff.c -- a retry delay of a second or more is spent in the delayed set,
 * not on the runner: the next attempt starts no earlier than the policy says, the job
 * meanwhile shows as queued and delayed (GET /jobs/:uuid, GET /metrics, the delayed
 * set), and the runner's only slot is free for another job during the delay.
 *
 * One ternd with --concurrency 1 against a private redis-server; the itest plugin
 * records each attempt's start with its wall-clock time.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_sync.h"
#include "world.h"

static itest_world_t W;

static int group_setup(void **state)
{
    (void)state;
    static const char *const one_slot[] = {"--concurrency", "1", NULL};
    itest_world_start(&W, "lb", NULL, one_slot);
    itest_workflow_put_ok(&W.client, itest_fmt("{\"name\": \"lb-quick\", \"chain\": [{\"name\": "
                                               "\"q\", \"task\": \"itest.record\", \"args\": "
                                               "{\"file\": \"%s\", \"ms\": 10}}]}",
                                               W.side));
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    itest_world_stop(&W, 15000);
    return 0;
}

/* GET `path` of the API; returns the body (malloc'd) and the parsed JSON in *json when
 * json is not NULL (new reference). */
static char *api_get(const char *path, json_t **json)
{
    http_sync_t h;
    http_sync_open(&h, W.base);
    http_sync_resp_t r;
    http_sync_do(&h, "GET", path, NULL, 0, NULL, &r);
    if (r.status != 200)
        fail_msg("GET %s answered %ld: %s", path, r.status, r.body ? r.body : r.error);
    char *body = r.body;
    r.body = NULL;
    if (json != NULL)
        *json = json_incref(r.json);
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
    return body;
}

/* The value of gauge `name` on GET /metrics, or -1 when absent. */
static long long metric(const char *name)
{
    char *body = api_get("/metrics", NULL);
    long long v = (long long)itest_metric_sample(body, name);
    free(body);
    return v;
}

/* A step that fails once, with a fixed backoff of `delay_ms` and no jitter. */
static void check_backoff(const char *workflow, unsigned delay_ms)
{
    itest_workflow_put_ok(
        &W.client,
        itest_fmt("{\"name\": \"%s\", \"chain\": [{\"name\": \"f\", \"task\": \"itest.flaky\","
                  " \"retry\": {\"max_attempts\": 2, \"backoff\": \"constant\", \"initial_ms\": %u,"
                  " \"jitter\": false}, \"args\": {\"file\": \"%s\", \"fail_times\": 1}}]}",
                  workflow, delay_ms, W.side));
    char uuid[40], key[96];
    itest_job_create_ok(&W.client, workflow, NULL, uuid);
    snprintf(key, sizeof key, "%s/0/0", uuid);

    /* The first attempt fails; its retry is committed with the policy's delay. */
    json_t *retry = itest_wait_event(&W.client, uuid, "step", "retry", 10000);
    if (retry == NULL)
        fail_msg("job %s: no retry within 10 s", uuid);
    assert_int_equal(json_integer_value(json_object_get(retry, "delay_ms")), delay_ms);
    json_decref(retry);
    itest_side_line_t first[4];
    assert_int_equal(itest_side_lines(W.side, "start", key, first, 4), 1);

    /* Meanwhile the job waits in the delayed set, due a delay after the first start at
     * the earliest, and shows as queued, not running. */
    char *due = itest_redis_str(&W.redis, "ZSCORE tern:delayed %s", uuid);
    if (due == NULL)
        fail_msg("job %s is not in the delayed set during its backoff", uuid);
    long long due_ms = atoll(due);
    free(due);
    assert_true(due_ms >= first[0].time_ms + delay_ms);
    json_t *view = NULL;
    free(api_get(itest_fmt("/jobs/%s", uuid), &view));
    assert_string_equal(itest_execution(view), "queued");
    json_decref(view);
    long long delayed = metric("tern_jobs_delayed");
    print_message("tern_jobs_delayed %lld during the backoff\n", delayed);
    assert_true(delayed >= 1);

    /* The runner's one slot is free: another job runs to its end during the delay. */
    char quick[40], quick_key[96];
    itest_job_create_ok(&W.client, "lb-quick", NULL, quick);
    json_t *qjob = itest_wait_finished(&W.client, quick, 10000);
    if (qjob == NULL)
        fail_msg("job %s did not finish within 10 s", quick);
    assert_string_equal(itest_execution(qjob), "succeeded");
    json_decref(qjob);
    snprintf(quick_key, sizeof quick_key, "%s/0/0", quick);
    itest_side_line_t q[4];
    assert_int_equal(itest_side_lines(W.side, "start", quick_key, q, 4), 1);

    json_t *job = itest_wait_finished(&W.client, uuid, delay_ms + 10000);
    if (job == NULL)
        fail_msg("job %s did not finish within %u ms", uuid, delay_ms + 10000);
    assert_string_equal(itest_execution(job), "succeeded");
    json_t *entry = json_array_get(json_object_get(job, "chain_results"), 0);
    assert_int_equal(json_integer_value(json_object_get(entry, "attempts")), 2);
    json_decref(job);

    /* The second attempt started no earlier than the delay after the first one (both
     * times are this machine's wall clock in ms, and the due time is counted from the
     * failure's commit, after the first start), and the quick job ran in between. */
    itest_side_line_t starts[4];
    assert_int_equal(itest_side_lines(W.side, "start", key, starts, 4), 2);
    long long gap = starts[1].time_ms - starts[0].time_ms;
    print_message("%u ms backoff: attempts started %lld ms apart; the other job started "
                  "%lld ms after the first attempt\n",
                  delay_ms, gap, q[0].time_ms - starts[0].time_ms);
    assert_true(gap >= (long long)delay_ms);
    assert_true(gap < (long long)delay_ms + 5000);
    assert_true(q[0].time_ms < starts[1].time_ms);
    assert_int_equal(starts[0].pid, starts[1].pid);
}

static void test_backoff_of_1500_ms(void **state)
{
    (void)state;
    check_backoff("lb-1500", 1500);
}

static void test_backoff_of_3000_ms(void **state)
{
    (void)state;
    check_backoff("lb-3000", 3000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backoff_of_1500_ms),
        cmocka_unit_test(test_backoff_of_3000_ms),
    };
    return cmocka_run_group_tests_name("long_backoff", tests, group_setup, group_teardown);
}
