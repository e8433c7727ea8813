/*
 * test_retry_policy.c -- unit tests of engine/model/retry_policy.c: the retry policy a step
 * declares (a count or an object, every refusal and its message) and the delay before each retry
 * (the three kinds, the cap, jitter bounds, huge attempt numbers).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "model/retry_policy.h"

/* Parses JSON text as a "retry" value at chain[1].retry. */
static int parse(const char *text, retry_policy_t *p, char *err, size_t errlen)
{
    json_error_t je;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &je);
    assert_non_null(v);
    int rc = retry_policy_parse(v, "chain[1].retry", p, err, errlen);
    json_decref(v);
    return rc;
}

/* Compares two policies field by field (the struct has padding). */
static void assert_policy_equal(const retry_policy_t *a, const retry_policy_t *b)
{
    assert_int_equal(a->max_attempts, b->max_attempts);
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->initial_ms, b->initial_ms);
    assert_int_equal(a->max_ms, b->max_ms);
    assert_true(a->factor == b->factor);
    assert_int_equal(a->jitter, b->jitter);
}

/* Asserts that text is refused with exactly `msg`. */
static void refused(const char *text, const char *msg)
{
    retry_policy_t p;
    char err[256] = "";
    assert_int_equal(parse(text, &p, err, sizeof err), TERN_EINVAL);
    assert_string_equal(err, msg);
}

static void test_default(void **state)
{
    (void)state;
    retry_policy_t p;
    memset(&p, 0xff, sizeof p);
    retry_policy_default(&p);
    assert_int_equal(p.max_attempts, 1);
    assert_int_equal(p.kind, BACKOFF_EXPONENTIAL);
    assert_int_equal(p.initial_ms, 1000);
    assert_int_equal(p.max_ms, 60000);
    assert_true(p.factor == 2.0);
    assert_true(p.jitter);
}

static void test_count(void **state)
{
    (void)state;
    retry_policy_t p;
    char err[256] = "";
    assert_int_equal(parse("3", &p, err, sizeof err), 0);
    assert_int_equal(p.max_attempts, 3);
    assert_int_equal(p.kind, BACKOFF_EXPONENTIAL);
    assert_int_equal(p.initial_ms, 1000);
    assert_int_equal(p.max_ms, 60000);
    assert_true(p.jitter);

    assert_int_equal(parse("1", &p, err, sizeof err), 0);
    assert_int_equal(p.max_attempts, 1);
    assert_int_equal(parse("1000", &p, err, sizeof err), 0);
    assert_int_equal(p.max_attempts, 1000);
}

static void test_count_refused(void **state)
{
    (void)state;
    refused("0", "chain[1].retry: expected a number of attempts from 1 to 1000 (1 = no retry), "
                 "got 0");
    refused("-2", "chain[1].retry: expected a number of attempts from 1 to 1000 (1 = no retry), "
                  "got -2");
    refused("1001", "chain[1].retry: expected a number of attempts from 1 to 1000 (1 = no "
                    "retry), got 1001");
    refused("2.5", "chain[1].retry: expected a number of attempts or a policy object, got 2.5");
    refused("\"3\"", "chain[1].retry: expected a number of attempts or a policy object, got \"3\"");
    refused("true", "chain[1].retry: expected a number of attempts or a policy object, got true");
    refused("null", "chain[1].retry: expected a number of attempts or a policy object, got null");
    refused("[3]", "chain[1].retry: expected a number of attempts or a policy object, got an "
                   "array");
}

static void test_object(void **state)
{
    (void)state;
    retry_policy_t p;
    char err[256] = "";
    assert_int_equal(parse("{\"max_attempts\": 5, \"backoff\": \"linear\", \"initial_ms\": 200, "
                           "\"max_ms\": 10000, \"factor\": 3, \"jitter\": false}",
                           &p, err, sizeof err),
                     0);
    assert_int_equal(p.max_attempts, 5);
    assert_int_equal(p.kind, BACKOFF_LINEAR);
    assert_int_equal(p.initial_ms, 200);
    assert_int_equal(p.max_ms, 10000);
    assert_true(p.factor == 3.0);
    assert_false(p.jitter);

    assert_int_equal(parse("{\"backoff\": \"constant\", \"factor\": 1.5}", &p, err, sizeof err), 0);
    assert_int_equal(p.max_attempts, 1);
    assert_int_equal(p.kind, BACKOFF_CONSTANT);
    assert_true(p.factor == 1.5);

    assert_int_equal(parse("{\"backoff\": \"exponential\"}", &p, err, sizeof err), 0);
    assert_int_equal(p.kind, BACKOFF_EXPONENTIAL);

    /* An empty object is the default policy. */
    assert_int_equal(parse("{}", &p, err, sizeof err), 0);
    retry_policy_t d;
    retry_policy_default(&d);
    assert_policy_equal(&p, &d);
}

static void test_object_refused(void **state)
{
    (void)state;
    refused("{\"initial_ms\": -5}",
            "chain[1].retry.initial_ms: expected a positive integer, got -5");
    refused("{\"initial_ms\": 0}", "chain[1].retry.initial_ms: expected a positive integer, got 0");
    refused("{\"initial_ms\": \"200\"}",
            "chain[1].retry.initial_ms: expected a positive integer, got \"200\"");
    refused("{\"initial_ms\": 1.5}", "chain[1].retry.initial_ms: expected a positive integer, "
                                     "got 1.5");
    refused("{\"initial_ms\": 86400001}",
            "chain[1].retry.initial_ms: expected at most 86400000, got 86400001");
    refused("{\"max_ms\": 0}", "chain[1].retry.max_ms: expected a positive integer, got 0");
    refused("{\"max_ms\": 99999999999}",
            "chain[1].retry.max_ms: expected at most 86400000, got 99999999999");
    refused("{\"max_attempts\": 0}",
            "chain[1].retry.max_attempts: expected a positive integer, got 0");
    refused("{\"max_attempts\": 1001}",
            "chain[1].retry.max_attempts: expected at most 1000, got 1001");
    refused("{\"max_attempts\": null}",
            "chain[1].retry.max_attempts: expected a positive integer, got null");
    refused("{\"backoff\": \"fast\"}", "chain[1].retry.backoff: expected \"constant\", \"linear\" "
                                       "or \"exponential\", got \"fast\"");
    refused("{\"backoff\": 1}", "chain[1].retry.backoff: expected \"constant\", \"linear\" or "
                                "\"exponential\", got 1");
    refused("{\"factor\": 1}", "chain[1].retry.factor: expected a number greater than 1, got 1");
    refused("{\"factor\": 0.5}",
            "chain[1].retry.factor: expected a number greater than 1, got 0.5");
    refused("{\"factor\": \"2\"}",
            "chain[1].retry.factor: expected a number greater than 1, got \"2\"");
    refused("{\"jitter\": \"yes\"}", "chain[1].retry.jitter: expected true or false, got \"yes\"");
    refused("{\"jitter\": 1}", "chain[1].retry.jitter: expected true or false, got 1");
    refused("{\"max_attempts\": 3, \"tries\": 2}",
            "chain[1].retry.tries: unknown key (a retry policy has max_attempts, backoff, "
            "initial_ms, max_ms, factor and jitter)");
    refused("{\"initial_ms\": 500, \"max_ms\": 100}",
            "chain[1].retry.max_ms: 100 is less than initial_ms (500)");
    refused("{\"backoff\": {}}", "chain[1].retry.backoff: expected \"constant\", \"linear\" or "
                                 "\"exponential\", got an object");
}

/* A long string value is cut in the message rather than copied whole. */
static void test_long_value_cut(void **state)
{
    (void)state;
    char text[300], err[256] = "";
    retry_policy_t p;
    snprintf(text, sizeof text, "{\"backoff\": \"%0200d\"}", 0);
    assert_int_equal(parse(text, &p, err, sizeof err), TERN_EINVAL);
    assert_non_null(strstr(err, "got \"0000000000000000000000000000000000000000...\""));
}

static void test_refusal_keeps_policy(void **state)
{
    (void)state;
    retry_policy_t p, before;
    char err[256] = "";
    assert_int_equal(parse("{\"max_attempts\": 4}", &p, err, sizeof err), 0);
    before = p;
    assert_int_equal(parse("{\"max_attempts\": 7, \"backoff\": \"fast\"}", &p, err, sizeof err),
                     TERN_EINVAL);
    assert_policy_equal(&p, &before);
    /* A NULL error buffer is allowed. */
    assert_int_equal(parse("0", &p, NULL, 0), TERN_EINVAL);
}

/* With no cap written, a first delay above the default cap raises the cap. */
static void test_long_initial_raises_default_cap(void **state)
{
    (void)state;
    retry_policy_t p;
    char err[256] = "";
    assert_int_equal(parse("{\"initial_ms\": 120000, \"jitter\": false}", &p, err, sizeof err), 0);
    assert_int_equal(p.max_ms, 120000);
    assert_int_equal(retry_policy_next_delay(&p, 1, 0), 120000);
    assert_int_equal(retry_policy_next_delay(&p, 5, 0), 120000);
}

static retry_policy_t policy(backoff_kind_t kind, uint32_t initial, uint32_t max, double factor,
                             bool jitter)
{
    retry_policy_t p;
    retry_policy_default(&p);
    p.max_attempts = 10;
    p.kind = kind;
    p.initial_ms = initial;
    p.max_ms = max;
    p.factor = factor;
    p.jitter = jitter;
    return p;
}

static void test_delay_constant(void **state)
{
    (void)state;
    retry_policy_t p = policy(BACKOFF_CONSTANT, 300, 10000, 2.0, false);
    for (uint32_t n = 1; n < 50; n++)
        assert_int_equal(retry_policy_next_delay(&p, n, 12345), 300);
}

static void test_delay_linear(void **state)
{
    (void)state;
    retry_policy_t p = policy(BACKOFF_LINEAR, 200, 1000, 2.0, false);
    assert_int_equal(retry_policy_next_delay(&p, 1, 0), 200);
    assert_int_equal(retry_policy_next_delay(&p, 2, 0), 400);
    assert_int_equal(retry_policy_next_delay(&p, 3, 0), 600);
    assert_int_equal(retry_policy_next_delay(&p, 5, 0), 1000);
    assert_int_equal(retry_policy_next_delay(&p, 6, 0), 1000);
}

static void test_delay_exponential(void **state)
{
    (void)state;
    retry_policy_t p = policy(BACKOFF_EXPONENTIAL, 200, 10000, 2.0, false);
    assert_int_equal(retry_policy_next_delay(&p, 1, 0), 200);
    assert_int_equal(retry_policy_next_delay(&p, 2, 0), 400);
    assert_int_equal(retry_policy_next_delay(&p, 3, 0), 800);
    assert_int_equal(retry_policy_next_delay(&p, 4, 0), 1600);
    assert_int_equal(retry_policy_next_delay(&p, 6, 0), 6400);
    assert_int_equal(retry_policy_next_delay(&p, 7, 0), 10000);

    p = policy(BACKOFF_EXPONENTIAL, 1000, 60000, 1.5, false);
    assert_int_equal(retry_policy_next_delay(&p, 2, 0), 1500);
    assert_int_equal(retry_policy_next_delay(&p, 3, 0), 2250);
}

/* Attempt 0 is read as the first failed attempt rather than as a negative power. */
static void test_delay_attempt_zero(void **state)
{
    (void)state;
    retry_policy_t p = policy(BACKOFF_EXPONENTIAL, 200, 10000, 2.0, false);
    assert_int_equal(retry_policy_next_delay(&p, 0, 0), 200);
    p.kind = BACKOFF_LINEAR;
    assert_int_equal(retry_policy_next_delay(&p, 0, 0), 200);
}

static void test_delay_huge_attempts(void **state)
{
    (void)state;
    retry_policy_t p = policy(BACKOFF_EXPONENTIAL, 200, 10000, 2.0, false);
    assert_int_equal(retry_policy_next_delay(&p, 64, 0), 10000);
    assert_int_equal(retry_policy_next_delay(&p, 1100, 0), 10000);
    assert_int_equal(retry_policy_next_delay(&p, UINT32_MAX, 0), 10000);
    p.factor = 1e300;
    assert_int_equal(retry_policy_next_delay(&p, 3, 0), 10000);
    assert_int_equal(retry_policy_next_delay(&p, UINT32_MAX, 0), 10000);
    p.factor = 1.0000001;
    assert_int_equal(retry_policy_next_delay(&p, UINT32_MAX, 0), 10000);

    p = policy(BACKOFF_LINEAR, RETRY_MAX_DELAY_MS, RETRY_MAX_DELAY_MS, 2.0, false);
    assert_int_equal(retry_policy_next_delay(&p, UINT32_MAX, 0), RETRY_MAX_DELAY_MS);
    p.initial_ms = UINT32_MAX; /* a hand-made policy beyond what parsing allows */
    p.max_ms = UINT32_MAX;
    assert_int_equal(retry_policy_next_delay(&p, UINT32_MAX, 0), RETRY_MAX_DELAY_MS);
}

/* A simple 64-bit generator so the test covers many rnd values reproducibly. */
static uint64_t next_rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s ^ (*s >> 29);
}

static void test_jitter_bounds(void **state)
{
    (void)state;
    static const uint32_t nominal[] = {1, 2, 3, 7, 200, 1001, 10000};
    for (size_t k = 0; k < TERN_ARRAY_SIZE(nominal); k++) {
        retry_policy_t p = policy(BACKOFF_CONSTANT, nominal[k], 10000, 2.0, true);
        uint64_t d = nominal[k], lo = (d + 1) / 2, seed = 42 + k;
        uint64_t seen_min = UINT64_MAX, seen_max = 0;
        for (int i = 0; i < 100000; i++) {
            uint64_t v = retry_policy_next_delay(&p, 1, next_rnd(&seed));
            assert_in_range(v, lo, d);
            seen_min = v < seen_min ? v : seen_min;
            seen_max = v > seen_max ? v : seen_max;
        }
        /* Uniform over [lo, d]: both ends come up in 100000 draws. */
        assert_int_equal(seen_min, lo);
        assert_int_equal(seen_max, d);
        assert_in_range(retry_policy_next_delay(&p, 1, 0), lo, d);
        assert_in_range(retry_policy_next_delay(&p, 1, UINT64_MAX), lo, d);
    }
}

static void test_jitter_never_above_cap(void **state)
{
    (void)state;
    retry_policy_t p = policy(BACKOFF_EXPONENTIAL, 1000, 5000, 2.0, true);
    uint64_t seed = 7;
    for (uint32_t n = 1; n < 40; n++) {
        for (int i = 0; i < 1000; i++) {
            uint64_t v = retry_policy_next_delay(&p, n, next_rnd(&seed));
            assert_true(v <= 5000);
            assert_true(v >= 500);
        }
    }
    assert_in_range(retry_policy_next_delay(&p, UINT32_MAX, UINT64_MAX), 2500, 5000);
}

/* Without jitter the random value plays no part. */
static void test_no_jitter_ignores_rnd(void **state)
{
    (void)state;
    retry_policy_t p = policy(BACKOFF_EXPONENTIAL, 100, 100000, 2.0, false);
    assert_int_equal(retry_policy_next_delay(&p, 3, 0), retry_policy_next_delay(&p, 3, UINT64_MAX));
    assert_int_equal(retry_policy_next_delay(&p, 3, 987654321), 400);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default),
        cmocka_unit_test(test_count),
        cmocka_unit_test(test_count_refused),
        cmocka_unit_test(test_object),
        cmocka_unit_test(test_object_refused),
        cmocka_unit_test(test_long_value_cut),
        cmocka_unit_test(test_refusal_keeps_policy),
        cmocka_unit_test(test_long_initial_raises_default_cap),
        cmocka_unit_test(test_delay_constant),
        cmocka_unit_test(test_delay_linear),
        cmocka_unit_test(test_delay_exponential),
        cmocka_unit_test(test_delay_attempt_zero),
        cmocka_unit_test(test_delay_huge_attempts),
        cmocka_unit_test(test_jitter_bounds),
        cmocka_unit_test(test_jitter_never_above_cap),
        cmocka_unit_test(test_no_jitter_ignores_rnd),
    };
    int failures = cmocka_run_group_tests_name("backoff", tests, NULL, NULL);
    return failures == 0 ? 0 : 1;
}
