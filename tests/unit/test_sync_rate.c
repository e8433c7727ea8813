/*
 * test_sync_rate.c -- a pass of the block transfer keeps to its rate limit
 * (tasks/dc/sync): the token bucket alone, then a whole pass of 16 MiB at 8 MiB/s
 * taking 2 s within 10 %.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdlib.h>

#include "sync_lab.h"
#include "sync_rate.h"

static void test_bucket_paces_takes(void **state)
{
    (void)state;
    sync_rate_t r;
    /* 4 MiB/s with a burst of 1 MiB: 2 MiB in 64 KiB takes is 0.5 s. */
    sync_rate_init(&r, 4 * MIB, MIB);
    uint64_t t0 = sync_now_ns();
    for (int i = 0; i < 32; i++)
        sync_rate_take(&r, 64 * 1024);
    double s = (double)(sync_now_ns() - t0) / 1e9;
    if (s < 0.45 || s > 0.55)
        fail_msg("2 MiB at 4 MiB/s took %.3f s", s);
    /* No limit: no wait. */
    sync_rate_init(&r, 0, MIB);
    t0 = sync_now_ns();
    sync_rate_take(&r, 1ull << 40);
    assert_true(sync_now_ns() - t0 < 10 * 1000000ull);
}

static void test_pass_holds_rate(void **state)
{
    (void)state;
    sync_lab_t lab;
    sync_lab_open(&lab, "sync_rate");
    sync_lab_disk(&lab, 0, GIB);
    sync_lab_write(&lab, 0, 0, 16 * MIB, 3);
    lab.o.rate_bytes_s = 8 * MIB;
    lab.o.window_blocks = 4;
    sync_pass_result_t r = sync_lab_pass(&lab);
    assert_int_equal(r.sent, 16 * MIB);
    double rate = (double)r.sent / ((double)r.duration_ms / 1000.0);
    if (rate < 0.9 * 8 * MIB || rate > 1.1 * 8 * MIB)
        fail_msg("16 MiB at a limit of 8 MiB/s went at %.2f MiB/s (%llu ms)", rate / MIB,
                 (unsigned long long)r.duration_ms);
    sync_lab_assert_same(&lab, 0);
    sync_lab_close(&lab);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket_paces_takes),
        cmocka_unit_test(test_pass_holds_rate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
