/*
 * test_converge.c -- when an automatic migration stops syncing (tasks/dc/sync/
 * converge.c): each of the three reasons, and the rule ending whatever the passes
 * send.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "converge.h"

#define MIB (1ull << 20)

/* The datacenter's defaults: 50 MiB, 10 passes, 3 stalled passes, 10 %. */
static const converge_rule_t rule = {50 * MIB, 10, 3, 10};

static void test_small_pass_switches_for_size(void **state)
{
    (void)state;
    uint64_t p[] = {10000 * MIB, 800 * MIB, 90 * MIB, 50 * MIB};
    assert_null(converge_decide(&rule, p, 0));
    assert_null(converge_decide(&rule, p, 1));
    assert_null(converge_decide(&rule, p, 3));
    assert_string_equal(converge_decide(&rule, p, 4), "size");
    /* A first pass already small: at once. */
    uint64_t tiny[] = {3 * MIB};
    assert_string_equal(converge_decide(&rule, tiny, 1), "size");
}

static void test_max_passes(void **state)
{
    (void)state;
    /* Shrinking by 20 % each pass: never stalled, never small enough within 10. */
    uint64_t p[10];
    p[0] = 100000 * MIB;
    for (int i = 1; i < 10; i++)
        p[i] = p[i - 1] * 8 / 10;
    for (size_t n = 1; n < 10; n++)
        assert_null(converge_decide(&rule, p, n));
    assert_string_equal(converge_decide(&rule, p, 10), "max_passes");
    /* max_passes 0 is taken as 1. */
    converge_rule_t zero = rule;
    zero.max_passes = 0;
    assert_string_equal(converge_decide(&zero, p, 1), "max_passes");
}

static void test_stalled(void **state)
{
    (void)state;
    /* Shrinks well, then by less than 10 % three times running. */
    uint64_t p[] = {10000 * MIB, 2000 * MIB, 1900 * MIB, 1800 * MIB, 1750 * MIB};
    assert_null(converge_decide(&rule, p, 2));
    assert_null(converge_decide(&rule, p, 3));
    assert_null(converge_decide(&rule, p, 4));
    const char *at5 = converge_decide(&rule, p, 5);
    assert_non_null(at5);
    assert_string_equal(at5, "stalled");
    /* Growing counts as not shrinking; one good pass among them resets the count. */
    uint64_t q[] = {1000 * MIB, 1100 * MIB, 900 * MIB, 950 * MIB, 1000 * MIB, 1050 * MIB};
    assert_null(converge_decide(&rule, q, 4));
    assert_null(converge_decide(&rule, q, 5));
    const char *why = converge_decide(&rule, q, 6);
    assert_non_null(why);
    assert_string_equal(why, "stalled");
    /* Exactly 10 % smaller is enough. */
    uint64_t r[] = {1000 * MIB, 900 * MIB, 810 * MIB, 729 * MIB};
    assert_null(converge_decide(&rule, r, 4));
}

/* Whatever the passes send, the rule says switch by max_passes at the latest. */
static void test_never_loops_forever(void **state)
{
    (void)state;
    srand(34);
    converge_rule_t rules[] = {rule, {0, 7, 0, 0}, {50 * MIB, 4, 100, 100}, {1, 1, 1, 1}};
    for (size_t k = 0; k < sizeof rules / sizeof rules[0]; k++)
        for (int trial = 0; trial < 200; trial++) {
            uint64_t p[64];
            const char *why = NULL;
            size_t n = 0;
            while (!why && n < 64) {
                p[n] = (uint64_t)(rand() % 4000 + 51) * MIB;
                why = converge_decide(&rules[k], p, ++n);
            }
            assert_non_null(why);
            assert_true(n <= (rules[k].max_passes ? rules[k].max_passes : 1));
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_pass_switches_for_size),
        cmocka_unit_test(test_max_passes),
        cmocka_unit_test(test_stalled),
        cmocka_unit_test(test_never_loops_forever),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
