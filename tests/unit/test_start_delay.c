/*
 * test_start_delay.c -- the delay of an agent's first NIC reconcile (lab/start_delay.h):
 * within [min, max] at both ends of the random source, even at the edges of a range
 * that does not divide 2^64 (the values the draw rejects), and spread: 50 agents drawn
 * from the system's source do not all wait the same.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdint.h>

#include "start_delay.h"

/* A source that answers the values of an array in turn, counting the calls. */
typedef struct scripted {
    const uint64_t *v;
    size_t n, next;
} scripted_t;

static uint64_t scripted_next(void *arg)
{
    scripted_t *s = arg;
    assert_true(s->next < s->n); /* the draw asked for more values than it should */
    return s->v[s->next++];
}

static uint64_t draw(uint64_t min_s, uint64_t max_s, const uint64_t *v, size_t n, size_t *used)
{
    scripted_t s = {.v = v, .n = n};
    uint64_t d = start_delay_draw_ms(min_s, max_s, scripted_next, &s);
    if (used != NULL)
        *used = s.next;
    return d;
}

static void test_bounds_at_both_ends(void **state)
{
    (void)state;
    /* span = 480001: 0 gives min, span-1 gives max, span wraps to min again. */
    uint64_t zero = 0, last = 480000, wrap = 480001;
    assert_int_equal(draw(120, 600, &zero, 1, NULL), 120000);
    assert_int_equal(draw(120, 600, &last, 1, NULL), 600000);
    assert_int_equal(draw(120, 600, &wrap, 1, NULL), 120000);
    /* Every value of the source lands inside. */
    uint64_t probes[] = {1, 12345, 1ull << 32, 1ull << 63, UINT64_MAX / 3, 999999999999ull};
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        uint64_t d = draw(1, 2, &probes[i], 1, NULL);
        assert_true(d >= 1000 && d <= 2000);
    }
}

static void test_biased_tail_is_drawn_again(void **state)
{
    (void)state;
    /* The top of the source's range (past its last whole multiple of the span) would
     * favour the small delays: those values are drawn again. */
    uint64_t v[] = {UINT64_MAX, UINT64_MAX - 1, 7};
    size_t used = 0;
    assert_int_equal(draw(120, 600, v, 3, &used), 120007);
    assert_int_equal(used, 3);
}

static void test_empty_range_is_its_minimum(void **state)
{
    (void)state;
    uint64_t v = 42;
    size_t used = 1;
    assert_int_equal(draw(5, 5, &v, 1, &used), 5000);
    assert_int_equal(used, 0);
    assert_int_equal(draw(0, 0, &v, 1, &used), 0);
}

static void test_fifty_agents_do_not_all_wait_the_same(void **state)
{
    (void)state;
    uint64_t first = start_delay_draw_ms(120, 600, start_delay_os_random, NULL);
    int differ = 0;
    for (int i = 0; i < 49; i++) {
        uint64_t d = start_delay_draw_ms(120, 600, start_delay_os_random, NULL);
        assert_true(d >= 120000 && d <= 600000);
        differ += d != first;
    }
    assert_true(differ > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounds_at_both_ends),
        cmocka_unit_test(test_biased_tail_is_drawn_again),
        cmocka_unit_test(test_empty_range_is_its_minimum),
        cmocka_unit_test(test_fifty_agents_do_not_all_wait_the_same),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
