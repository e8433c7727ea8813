/*
 * test_job_request.c -- the body of POST /jobs read into a job creation request
 * (job_request.h): node-workflow's mapping and the messages the API answers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/error.h"
#include "model/job_request.h"

static json_t *load(const char *text)
{
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    assert_non_null(v);
    return v;
}

/* Parses text and expects TERN_EINVAL with `message`. */
static void refused(const char *text, const char *message)
{
    json_t *body = text != NULL ? load(text) : NULL;
    job_create_req_t req;
    char err[1024] = "";
    assert_int_equal(job_request_parse(body, &req, err, sizeof err), TERN_EINVAL);
    assert_null(req.params);
    assert_string_equal(err, message);
    json_decref(body);
}

static void test_members_and_params(void **state)
{
    (void)state;
    json_t *body = load("{\"workflow\": \"hello\", \"target\": \"vm-1\", \"locks\": \"vm-.*\", "
                        "\"exec_after\": 1700000000000, \"post_back_urls\": [\"http://a/\"], "
                        "\"num_attempts\": 3, \"params\": {\"who\": \"ops\"}, \"size\": 10}");
    job_create_req_t req;
    char err[1024] = "";
    assert_int_equal(job_request_parse(body, &req, err, sizeof err), 0);
    assert_string_equal(req.workflow, "hello");
    assert_string_equal(req.target, "vm-1");
    assert_string_equal(req.locks, "vm-.*");
    assert_null(req.uuid);
    assert_int_equal(req.exec_after_ms, 1700000000000ULL);
    assert_ptr_equal(req.post_back_urls, json_object_get(body, "post_back_urls"));
    json_t *want = load("{\"who\": \"ops\", \"size\": 10}");
    assert_true(json_equal(req.params, want));
    json_decref(want);
    /* The members were added to a copy: the body's params object is as it came. */
    want = load("{\"who\": \"ops\"}");
    assert_true(json_equal(json_object_get(body, "params"), want));
    json_decref(want);
    json_decref((json_t *)req.params);
    json_decref(body);
}

static void test_nulls_and_dates(void **state)
{
    (void)state;
    json_t *body = load("{\"workflow\": \"w\", \"target\": null, \"params\": null, "
                        "\"post_back_urls\": null, \"exec_after\": \"2026-11-21T04:47:28Z\"}");
    job_create_req_t req;
    char err[1024] = "";
    assert_int_equal(job_request_parse(body, &req, err, sizeof err), 0);
    assert_null(req.target);
    assert_null(req.post_back_urls);
    assert_int_equal(req.exec_after_ms, 1795236448000ULL);
    assert_int_equal(json_object_size(req.params), 0);
    json_decref((json_t *)req.params);
    json_decref(body);
}

static void test_refusals(void **state)
{
    (void)state;
    refused(NULL, "workflow: required (a workflow uuid or name); the body is empty");
    refused("{}", "workflow: required (a workflow uuid or name)");
    refused("{\"workflow\": 5}", "workflow: expected a workflow uuid or name (a string)");
    refused("{\"workflow\": \"w\", \"uuid\": []}", "uuid: expected a UUID (a string)");
    refused("{\"workflow\": \"w\", \"params\": [1]}", "params: expected an object");
    refused("{\"workflow\": \"w\", \"params\": {\"a\": 1}, \"a\": 2}",
            "a: given both in params and at the top level, with different values");
    refused("{\"workflow\": \"w\", \"exec_after\": -1}",
            "exec_after: expected an ISO 8601 date such as \"2026-11-21T04:47:28Z\" (or "
            "milliseconds since the epoch), got -1");
    refused("{\"workflow\": \"w\", \"exec_after\": \"10000-01-01\"}",
            "exec_after: \"10000-01-01\" is after 9999-12-31T23:59:59.999Z, the latest time "
            "accepted (in milliseconds since the epoch: 253402300799999)");
    refused("{\"workflow\": \"w\", \"exec_after\": 253402300800000}",
            "exec_after: 253402300800000 is after 9999-12-31T23:59:59.999Z, the latest time "
            "accepted (in milliseconds since the epoch: 253402300799999)");
}

/* The latest time accepted, both ways it can be sent. */
static void test_latest_date(void **state)
{
    (void)state;
    static const char *const bodies[] = {
        "{\"workflow\": \"w\", \"exec_after\": \"9999-12-31T23:59:59.999Z\"}",
        "{\"workflow\": \"w\", \"exec_after\": 253402300799999}",
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(bodies); i++) {
        json_t *body = load(bodies[i]);
        job_create_req_t req;
        char err[1024] = "";
        assert_int_equal(job_request_parse(body, &req, err, sizeof err), 0);
        assert_int_equal(req.exec_after_ms, 253402300799999ULL);
        json_decref((json_t *)req.params);
        json_decref(body);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_members_and_params),
        cmocka_unit_test(test_nulls_and_dates),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_latest_date),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
