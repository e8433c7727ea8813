/*
 * test_postback.c -- the pure parts of post-back delivery: the backoff between
 * attempts and the body POSTed to receivers. Delivery itself (claims, leases, retries
 * against a real receiver) is tested in tests/integration/test_postback.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "run/postback.h"

static void test_delay_doubles_up_to_the_cap(void **state)
{
    (void)state;
    postback_opts_t o = {.initial_ms = 1000, .max_ms = 300000};
    assert_int_equal(postback_delay_ms(&o, 1), 1000);
    assert_int_equal(postback_delay_ms(&o, 2), 2000);
    assert_int_equal(postback_delay_ms(&o, 3), 4000);
    assert_int_equal(postback_delay_ms(&o, 9), 256000);
    assert_int_equal(postback_delay_ms(&o, 10), 300000);
    /* A huge attempt number neither overflows nor passes the cap. */
    assert_int_equal(postback_delay_ms(&o, 1000000), 300000);
    postback_opts_t flat = {.initial_ms = 500, .max_ms = 500};
    assert_int_equal(postback_delay_ms(&flat, 7), 500);
}

static void test_body_of_a_failed_job(void **state)
{
    (void)state;
    json_t *b = postback_body("6f0c2f4e-1d0a-4b8e-9a57-0e2b7f3c9a11", "disk-resize", "failed",
                              "{\"vm_uuid\":\"v1\",\"size\":[1,2]}",
                              "{\"code\":\"TaskTimeout\",\"message\":\"too slow\"}", 1700000000123);
    assert_string_equal(json_string_value(json_object_get(b, "uuid")),
                        "6f0c2f4e-1d0a-4b8e-9a57-0e2b7f3c9a11");
    assert_string_equal(json_string_value(json_object_get(b, "workflow")), "disk-resize");
    assert_string_equal(json_string_value(json_object_get(b, "execution")), "failed");
    /* Params keep their JSON types (the array stays an array). */
    assert_true(json_is_array(json_object_get(json_object_get(b, "params"), "size")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(b, "error"), "code")),
                        "TaskTimeout");
    assert_string_equal(json_string_value(json_object_get(b, "finished_at")),
                        "2023-11-14T22:13:20.123Z");
    assert_int_equal(json_object_size(b), 6);
    json_decref(b);
}

static void test_body_of_a_succeeded_job(void **state)
{
    (void)state;
    json_t *b =
        postback_body("6f0c2f4e-1d0a-4b8e-9a57-0e2b7f3c9a11", "hello", "succeeded", "", "", 0);
    assert_true(json_is_object(json_object_get(b, "params")));
    assert_int_equal(json_object_size(json_object_get(b, "params")), 0);
    assert_true(json_is_null(json_object_get(b, "error")));
    assert_true(json_is_null(json_object_get(b, "finished_at")));
    json_decref(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delay_doubles_up_to_the_cap),
        cmocka_unit_test(test_body_of_a_failed_job),
        cmocka_unit_test(test_body_of_a_succeeded_job),
    };
    return cmocka_run_group_tests(tests, NULL, NULL) == 0 ? 0 : 1;
}
