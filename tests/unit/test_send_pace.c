/*
 * test_send_pace.c -- when dc.migration_send's timer reports a pass's progress
 * (tasks/dc/sync/send_pace.c): every tick that moved bytes or walked blocks, and the
 * keep-alive every 60 s while it does neither, run on a clock the test advances a tick
 * (1 s) at a time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdint.h>

#include "send_pace.h"

#define TICK_MS      1000u /* migration_send.c's timer */
#define KEEPALIVE_MS SEND_PACE_KEEPALIVE_MS
#define T0           123456789u

/* The ticks in (start, start + n ticks] at which a report goes out, as the task's timer
 * runs them: sent_at(i) and walked_at(i) are the byte and walked block counts the tick
 * i reads. Writes the tick numbers into at[] (up to max) and answers how many. */
static size_t run_walk_ticks(send_pace_t *p, uint64_t start, size_t n, uint64_t (*sent_at)(size_t),
                             uint64_t (*walked_at)(size_t), size_t *at, size_t max)
{
    size_t k = 0;
    for (size_t i = 1; i <= n; i++) {
        uint64_t t = start + i * TICK_MS, sent = sent_at(i), walked = walked_at(i);
        if (send_pace_due(p, t, sent, walked)) {
            if (k < max)
                at[k] = i;
            k++;
            send_pace_reported(p, t, sent, walked);
        }
    }
    return k;
}

static uint64_t stuck(size_t i);

/* A pass that does not walk. */
static size_t run_ticks(send_pace_t *p, uint64_t start, size_t n, uint64_t (*sent_at)(size_t),
                        size_t *at, size_t max)
{
    return run_walk_ticks(p, start, n, sent_at, stuck, at, max);
}

static uint64_t stuck(size_t i)
{
    (void)i;
    return 0;
}

static uint64_t moving(size_t i)
{
    return (uint64_t)i * 65536u;
}

/* Moving for 10 ticks, then stuck at what tick 10 sent. */
static uint64_t moving_then_stuck(size_t i)
{
    return (uint64_t)(i < 10 ? i : 10) * 65536u;
}

static void test_stuck_pass_reports_every_60_s(void **state)
{
    (void)state;
    assert_int_equal(SEND_PACE_KEEPALIVE_MS, 60000); /* what the docs promise */
    send_pace_t p;
    send_pace_start(&p, KEEPALIVE_MS, T0);
    size_t at[16];
    /* Ten minutes without a byte: a report at 60 s, 120 s, ... 600 s, none between and
     * none at the start (the pass's start counts as one). */
    size_t n = run_ticks(&p, T0, 600, stuck, at, 16);
    assert_int_equal(n, 10);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(at[i], (i + 1) * 60);
}

static void test_moving_pass_reports_every_tick(void **state)
{
    (void)state;
    send_pace_t p;
    send_pace_start(&p, KEEPALIVE_MS, T0);
    size_t at[128];
    assert_int_equal(run_ticks(&p, T0, 120, moving, at, 128), 120);
    assert_int_equal(at[0], 1);
    assert_int_equal(at[119], 120);
}

static void test_keepalive_counts_from_the_last_report(void **state)
{
    (void)state;
    send_pace_t p;
    send_pace_start(&p, KEEPALIVE_MS, T0);
    size_t at[32];
    /* Ticks 1-10 move bytes; then the first keep-alive is 60 s after tick 10's
     * report, not 60 s after the pass started. */
    size_t n = run_ticks(&p, T0, 200, moving_then_stuck, at, 32);
    assert_int_equal(n, 10 + 3);
    assert_int_equal(at[9], 10);
    assert_int_equal(at[10], 70);
    assert_int_equal(at[11], 130);
    assert_int_equal(at[12], 190);
}

/* Walking for 30 ticks (the walk compares 16 blocks a tick), then stuck at what tick
 * 30 walked. */
static uint64_t walking_then_stuck(size_t i)
{
    return (uint64_t)(i < 30 ? i : 30) * 16u;
}

/* A walk moves no byte, yet reports every tick: the pass learns of a pause or abort
 * within a tick, not at the keep-alive; once the walk stops growing, the keep-alive
 * rule holds again. */
static void test_walking_pass_reports_every_tick(void **state)
{
    (void)state;
    send_pace_t p;
    send_pace_start(&p, KEEPALIVE_MS, T0);
    size_t at[64];
    size_t n = run_walk_ticks(&p, T0, 100, stuck, walking_then_stuck, at, 64);
    assert_int_equal(n, 30 + 1);
    for (size_t i = 0; i < 30; i++)
        assert_int_equal(at[i], i + 1);
    assert_int_equal(at[30], 90);
}

static void test_boundaries(void **state)
{
    (void)state;
    send_pace_t p;
    send_pace_start(&p, KEEPALIVE_MS, T0);
    assert_false(send_pace_due(&p, T0, 0, 0));
    assert_false(send_pace_due(&p, T0 + KEEPALIVE_MS - 1, 0, 0));
    assert_true(send_pace_due(&p, T0 + KEEPALIVE_MS, 0, 0));
    assert_true(send_pace_due(&p, T0 + 1, 1, 0)); /* one byte moved: at once */
    assert_true(send_pace_due(&p, T0 + 1, 0, 1)); /* one block walked: at once */
    /* A clock behind the last report is not 2^64 ms later. */
    assert_false(send_pace_due(&p, T0 - 1, 0, 0));
    /* A new pass starts over: nothing sent, its start the last report. */
    send_pace_reported(&p, T0 + 5000, 4096, 32);
    send_pace_start(&p, KEEPALIVE_MS, T0 + 9000);
    assert_false(send_pace_due(&p, T0 + 9000 + KEEPALIVE_MS - 1, 0, 0));
    assert_true(send_pace_due(&p, T0 + 9001, 4096, 0));
    /* An interval of 0 is taken as 1 ms: it never stops reporting. */
    send_pace_start(&p, 0, T0);
    assert_false(send_pace_due(&p, T0, 0, 0));
    assert_true(send_pace_due(&p, T0 + 1, 0, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stuck_pass_reports_every_60_s),
        cmocka_unit_test(test_moving_pass_reports_every_tick),
        cmocka_unit_test(test_keepalive_counts_from_the_last_report),
        cmocka_unit_test(test_walking_pass_reports_every_tick),
        cmocka_unit_test(test_boundaries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
