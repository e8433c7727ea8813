/*
 * test_iso8601.c -- unit tests of engine/base/iso8601.c: the date-times API clients send
 * as exec_after, every accepted variant and every refusal, checked against
 * iso8601_format (what tern writes back).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "base/error.h"
#include "base/iso8601.h"

static uint64_t parsed(const char *s)
{
    uint64_t ms = 0;
    if (iso8601_parse_ms(s, &ms) != 0)
        fail_msg("\"%s\" was refused", s);
    return ms;
}

static void test_round_trip(void **state)
{
    (void)state;
    /* What JavaScript's toISOString and iso8601_format write reads back exactly. */
    uint64_t samples[] = {0, 1000, 951782400123ull, 1795240921999ull, 4102444800000ull};
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        char iso[32];
        iso8601_format(samples[i], iso);
        assert_int_equal(parsed(iso), samples[i]);
    }
    assert_int_equal(parsed("2000-02-29T00:00:00.000Z"), 951782400000ull);
}

/* iso8601_format keeps the text of the last second it wrote: times within that second,
 * after it and back again each read as they should. */
static void test_iso_time_text(void **state)
{
    (void)state;
    static const struct {
        uint64_t ms;
        const char *iso;
    } cases[] = {
        {1795240921000ull, "2026-11-21T06:02:01.000Z"},
        {1795240921999ull, "2026-11-21T06:02:01.999Z"},
        {1795240922005ull, "2026-11-21T06:02:02.005Z"},
        {1795240921007ull, "2026-11-21T06:02:01.007Z"},
        {0, "1970-01-01T00:00:00.000Z"},
        {4102444800000ull, "2100-01-01T00:00:00.000Z"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char iso[32];
        iso8601_format(cases[i].ms, iso);
        assert_string_equal(iso, cases[i].iso);
    }
}

static void test_variants(void **state)
{
    (void)state;
    uint64_t base = parsed("2026-11-21T04:47:28.512Z");
    assert_int_equal(parsed("2026-11-21t04:47:28.512z"), base);
    assert_int_equal(parsed("2026-11-21 04:47:28.512Z"), base);
    assert_int_equal(parsed("2026-11-21T04:47:28.5129999Z"), base);
    assert_int_equal(parsed("2026-11-21T04:47:28,512Z"), base);
    assert_int_equal(parsed("2026-11-21T06:47:28.512+02:00"), base);
    assert_int_equal(parsed("2026-11-21T06:47:28.512+0200"), base);
    assert_int_equal(parsed("2026-11-21T06:47:28.512+02"), base);
    assert_int_equal(parsed("2026-11-20T23:17:28.512-05:30"), base);
    /* No zone: UTC. No seconds, no fraction, no time. */
    assert_int_equal(parsed("2026-11-21T04:47:28.512"), base);
    assert_int_equal(parsed("2026-11-21T04:47:28Z"), base - 512);
    assert_int_equal(parsed("2026-11-21T04:47Z"), base - 28512);
    assert_int_equal(parsed("2026-11-21T04:47:28.5Z"), base - 12);
    assert_int_equal(parsed("2026-11-21"), parsed("2026-11-21T00:00:00Z"));
    assert_int_equal(parsed("1970-01-01T00:00:00Z"), 0);
}

static void test_refusals(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "tomorrow",
        "2026",
        "2026-11",
        "2026-11-21T",
        "2026-11-21T04",
        "2026-1-21",
        "2026-13-01",
        "2026-00-10",
        "2026-02-29",
        "2026-04-31",
        "2026-11-21T24:00:00Z",
        "2026-11-21T04:60:00Z",
        "2026-11-21T04:47:60Z",
        "2026-11-21T04:47:28.Z",
        "2026-11-21T04:47:28Zjunk",
        "2026-11-21T04:47:28+25:00",
        "2026-11-21T04:47:28+02:75",
        "1969-12-31T23:59:59Z",
        "1970-01-01T00:30:00+01:00",
        " 2026-11-21",
        "2026-11-21 ",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t ms = 7;
        if (iso8601_parse_ms(bad[i], &ms) != TERN_EINVAL)
            fail_msg("\"%s\" was accepted", bad[i]);
        assert_int_equal(ms, 7);
    }
    uint64_t ms;
    assert_int_equal(iso8601_parse_ms(NULL, &ms), TERN_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_iso_time_text),
        cmocka_unit_test(test_variants),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
