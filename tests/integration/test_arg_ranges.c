/*
 * test_arg_ranges.c -- a task's argument ranges (args_schema minimum/maximum) on a real
 * ternd: a literal out of range is refused when the workflow is stored, with its JSON
 * path, and nothing is stored; a templated one fails its step with InvalidArgument once
 * expanded, at the first attempt, however many the retry policy allows.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "http_sync.h"
#include "world.h"

static itest_world_t W;

static int group_setup(void **state)
{
    (void)state;
    itest_world_start(&W, "ranges", NULL, NULL);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    itest_world_stop(&W, 15000);
    return 0;
}

static void test_literal_out_of_range_refused_at_store(void **state)
{
    (void)state;
    http_sync_t h;
    http_sync_open(&h, W.base);
    static const char *const bodies[] = {
        "{\"name\": \"nap-neg\", \"chain\": [{\"name\": \"s\", \"task\": \"core.sleep\","
        " \"args\": {\"ms\": -1}}]}",
        "{\"name\": \"nap-huge\", \"chain\": [{\"name\": \"s\", \"task\": \"core.sleep\","
        " \"args\": {\"ms\": 4611686018427387904}}]}",
    };
    static const char *const want[] = {
        "chain[0].args.ms: expected an integer from 0 to 86400000, got -1",
        "chain[0].args.ms: expected an integer from 0 to 86400000, got 4611686018427387904",
    };
    for (size_t i = 0; i < 2; i++) {
        http_sync_resp_t r;
        http_sync_do(&h, "POST", "/workflows", bodies[i], strlen(bodies[i]), NULL, &r);
        assert_int_equal(r.status, 409);
        assert_string_equal(json_string_value(json_object_get(r.json, "code")), "InvalidArgument");
        assert_non_null(strstr(json_string_value(json_object_get(r.json, "message")), want[i]));
        http_sync_resp_dispose(&r);
    }
    /* Nothing was stored. */
    http_sync_resp_t r;
    http_sync_do(&h, "GET", "/workflows?name=nap-neg", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(r.json), 0);
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
}

static void test_templated_out_of_range_fails_once(void **state)
{
    (void)state;
    itest_workflow_put_ok(&W.client,
                          "{\"name\": \"nap\", \"chain\": [{\"name\": \"s\", \"task\": "
                          "\"core.sleep\", \"retry\": 3, \"args\": {\"ms\": \"${params.ms}\"}}]}");
    char uuid[40];
    itest_job_create_ok(&W.client, "nap", "{\"ms\": -1}", uuid);
    json_t *job = itest_wait_finished(&W.client, uuid, 10000);
    if (job == NULL)
        fail_msg("job %s did not finish within 10 s", uuid);
    assert_string_equal(itest_execution(job), "failed");
    json_t *error = json_object_get(job, "error");
    assert_string_equal(json_string_value(json_object_get(error, "code")), "InvalidArgument");
    assert_non_null(strstr(json_string_value(json_object_get(error, "message")),
                           "chain[0].args.ms: expected an integer from 0 to 86400000, got -1"));
    /* Not retried: the one attempt's result, no retry event. */
    json_t *entry = json_array_get(json_object_get(job, "chain_results"), 0);
    json_t *attempts = json_object_get(entry, "attempts");
    assert_true(attempts == NULL || json_integer_value(attempts) == 1);
    json_t *events = itest_events(&W.client, uuid);
    assert_int_equal(itest_count_events(events, "step", "retry"), 0);
    json_decref(events);
    json_decref(job);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_literal_out_of_range_refused_at_store),
        cmocka_unit_test(test_templated_out_of_range_fails_once),
    };
    return cmocka_run_group_tests_name("arg_ranges", tests, group_setup, group_teardown);
}
