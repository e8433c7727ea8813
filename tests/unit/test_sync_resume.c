/*
 * test_sync_resume.c -- a pass of the block transfer that does not finish loses at most
 * one window (tasks/dc/sync): stopped by its `stop` flag, its sender killed -9 (a child
 * process), its receiver stopped and started again on the same port; and a sender that
 * finds no listener yet keeps trying until one comes; stopped during its walk (before
 * any block went), within SYNC_WALK_STOP_BLOCKS blocks compared. Each time the next
 * pass sends what was left (plus at most one window) and the disks end equal.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sync_lab.h"

enum { BLOCKS = 48, WINDOW = 4 };

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void pause_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int setup(void **state)
{
    sync_lab_t *lab = calloc(1, sizeof *lab);
    sync_lab_open(lab, "sync_resume");
    /* 48 MiB of data in a 1 GiB disk, sent 4 blocks a window at 24 MiB/s (2 s). */
    sync_lab_disk(lab, 0, GIB);
    sync_lab_write(lab, 0, 100 * MIB, BLOCKS * MIB, 5);
    lab->o.window_blocks = WINDOW;
    lab->o.rate_bytes_s = 24 * MIB;
    *state = lab;
    return 0;
}

static int teardown(void **state)
{
    sync_lab_close(*state);
    free(*state);
    return 0;
}

typedef struct pass_thread {
    sync_lab_t *lab;
    sync_counters_t c;
    atomic_bool stop;
    sync_pass_result_t r;
    int rc;
    char err[512];
    pthread_t t;
} pass_thread_t;

static void *run_pass(void *arg)
{
    pass_thread_t *p = arg;
    p->rc = sync_send_pass(&p->lab->o, &p->c, &p->stop, &p->r, p->err, sizeof p->err);
    return NULL;
}

static void pass_start(pass_thread_t *p, sync_lab_t *lab)
{
    memset(p, 0, sizeof *p);
    p->lab = lab;
    atomic_init(&p->stop, false);
    assert_int_equal(pthread_create(&p->t, NULL, run_pass, p), 0);
}

/* Waits (at most 10 s) until the target's manifest holds at least `blocks` blocks. */
static uint64_t wait_manifest(sync_lab_t *lab, uint64_t blocks)
{
    uint64_t deadline = now_ms() + 10000, k = 0;
    while ((k = sync_lab_manifest_blocks(lab)) < blocks) {
        if (now_ms() > deadline)
            fail_msg("the target's manifest holds %llu blocks after 10 s", (unsigned long long)k);
        pause_ms(20);
    }
    return k;
}

static void test_stopped_pass_then_resumed(void **state)
{
    sync_lab_t *lab = *state;
    pass_thread_t p;
    pass_start(&p, lab);
    /* The counters move while the pass runs: read from this thread. */
    uint64_t deadline = now_ms() + 10000;
    while (atomic_load(&p.c.blocks) < 2 * WINDOW + 1) {
        if (now_ms() > deadline)
            fail_msg("the pass sent %llu blocks in 10 s",
                     (unsigned long long)atomic_load(&p.c.blocks));
        pause_ms(5);
    }
    assert_int_equal(atomic_load(&p.c.total), BLOCKS * MIB);
    atomic_store(&p.stop, true);
    pthread_join(p.t, NULL);
    if (p.rc)
        fail_msg("stopped pass: %s", p.err);
    assert_true(p.r.stopped);
    /* Ended at a window boundary, before the end. */
    assert_int_equal(p.r.blocks % WINDOW, 0);
    assert_true(p.r.blocks < BLOCKS);
    /* What it sent is durable: the next pass sends only the rest. */
    assert_int_equal(sync_lab_manifest_blocks(lab), p.r.blocks);
    lab->o.rate_bytes_s = 0;
    sync_pass_result_t r = sync_lab_pass(lab);
    assert_int_equal(r.blocks, BLOCKS - p.r.blocks);
    assert_false(r.stopped);
    sync_lab_assert_same(lab, 0);
}

static void test_killed_sender_resends_one_window(void **state)
{
    sync_lab_t *lab = *state;
    fflush(NULL);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        sync_counters_t c;
        sync_pass_result_t r;
        char err[512];
        _exit(sync_send_pass(&lab->o, &c, NULL, &r, err, sizeof err) == 0 ? 0 : 1);
    }
    wait_manifest(lab, 2 * WINDOW);
    assert_int_equal(kill(child, SIGKILL), 0);
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status));
    uint64_t had = sync_lab_manifest_blocks(lab);
    assert_true(had < BLOCKS);
    lab->o.rate_bytes_s = 0;
    sync_pass_result_t r = sync_lab_pass(lab);
    /* What the target did not have yet, and at most the window in flight again (a
     * window whose frames had all arrived is still made durable after the kill). */
    assert_true(r.blocks <= BLOCKS - had + WINDOW);
    assert_true(r.blocks >= 1);
    sync_lab_assert_same(lab, 0);
}

static void test_receiver_stopped_mid_pass(void **state)
{
    sync_lab_t *lab = *state;
    pass_thread_t p;
    pass_start(&p, lab);
    wait_manifest(lab, 2 * WINDOW);
    sync_lab_restart(lab);
    pthread_join(p.t, NULL);
    assert_true(p.rc < 0); /* the pass saw its target go */
    uint64_t had = sync_lab_manifest_blocks(lab);
    assert_true(had >= 2 * WINDOW && had < BLOCKS);
    lab->o.rate_bytes_s = 0;
    sync_pass_result_t r = sync_lab_pass(lab);
    assert_true(r.blocks <= BLOCKS - had + WINDOW);
    sync_lab_assert_same(lab, 0);
}

/* A target agent restarting keeps its port: the sender keeps trying to connect until
 * connect_timeout_ms. */
static void test_connect_retried_until_listener_back(void **state)
{
    sync_lab_t *lab = *state;
    char addr[64], err[256];
    snprintf(addr, sizeof addr, "%s", lab->addr);
    sync_listener_stop(lab->l);
    lab->l = NULL;
    lab->o.rate_bytes_s = 0;
    lab->o.connect_timeout_ms = 5000;
    pass_thread_t p;
    pass_start(&p, lab);
    pause_ms(300); /* the sender is refused a few times meanwhile */
    assert_int_equal(sync_listener_start(addr, lab->dst_root, &lab->l, err, sizeof err), 0);
    pthread_join(p.t, NULL);
    if (p.rc)
        fail_msg("pass: %s", p.err);
    assert_int_equal(p.r.blocks, BLOCKS);
    sync_lab_assert_same(lab, 0);
    /* No listener at all: refused once the timeout is over, naming the address. */
    sync_listener_stop(lab->l);
    lab->l = NULL;
    lab->o.connect_timeout_ms = 300;
    sync_counters_t c;
    sync_pass_result_t r;
    uint64_t t0 = now_ms();
    assert_int_equal(sync_send_pass(&lab->o, &c, NULL, &r, err, sizeof err), -ECONNREFUSED);
    assert_true(now_ms() - t0 >= 300);
    assert_non_null(strstr(err, addr));
}

/* The walk of a disk the target already has reads and hashes every block before the
 * first one goes: 48 MiB in 4 KiB blocks is 12288 blocks to compare. */
enum { WALK_BLOCK = 4096, WALK_BLOCKS = BLOCKS * (MIB / WALK_BLOCK) };

/* A first pass in 4 KiB blocks, then the disk's last MiB and first block written anew:
 * the next pass walks all 12288 blocks and sends 257. */
static void walk_prepare(sync_lab_t *lab)
{
    lab->o.rate_bytes_s = 0;
    lab->o.block_size = WALK_BLOCK;
    sync_pass_result_t r = sync_lab_pass(lab);
    assert_int_equal(r.blocks, WALK_BLOCKS);
    sync_lab_write(lab, 0, 100 * MIB, WALK_BLOCK, 6);
    sync_lab_write(lab, 0, 100 * MIB + (BLOCKS - 1) * MIB, MIB, 7);
}

/* After a pass stopped in its walk: nothing was sent and the target's resume point is
 * as it was; the next pass sends the 257 changed blocks and the disks end equal. */
static void walk_resume(sync_lab_t *lab, const pass_thread_t *p)
{
    assert_true(p->r.stopped);
    assert_int_equal(p->r.blocks, 0);
    assert_int_equal(p->r.sent, 0);
    assert_int_equal(sync_lab_manifest_blocks(lab), WALK_BLOCKS);
    sync_pass_result_t r = sync_lab_pass(lab);
    assert_false(r.stopped);
    assert_int_equal(r.blocks, 1 + MIB / WALK_BLOCK);
    char a[65], b[65];
    sync_lab_sha256(sync_lab_src_disk(lab, 0), a);
    sync_lab_sha256(sync_lab_dst_disk(lab, 0), b);
    assert_string_equal(a, b);
    sync_lab_assert_same(lab, 0);
}

/* A stop during the walk ends the pass within SYNC_WALK_STOP_BLOCKS more blocks
 * compared, not after the whole walk. */
static void test_stopped_during_walk_then_resumed(void **state)
{
    sync_lab_t *lab = *state;
    walk_prepare(lab);
    pass_thread_t p;
    pass_start(&p, lab);
    uint64_t deadline = now_ms() + 10000;
    while (atomic_load(&p.c.walked) < 2 * SYNC_WALK_STOP_BLOCKS) {
        if (now_ms() > deadline)
            fail_msg("the pass walked %llu blocks in 10 s",
                     (unsigned long long)atomic_load(&p.c.walked));
        struct timespec ts = {.tv_nsec = 100000L}; /* 0.1 ms: well inside the walk */
        nanosleep(&ts, NULL);
    }
    atomic_store(&p.stop, true);
    /* Read after the stop: the walk had compared at most this many when it was set. */
    uint64_t seen = atomic_load(&p.c.walked);
    pthread_join(p.t, NULL);
    if (p.rc)
        fail_msg("stopped pass: %s", p.err);
    uint64_t walked = atomic_load(&p.c.walked);
    assert_true(seen < WALK_BLOCKS); /* the stop came during the walk */
    assert_true(walked <= seen + SYNC_WALK_STOP_BLOCKS);
    walk_resume(lab, &p);
}

/* A pause asked before the pass began: the walk stops at its first check. */
static void test_stopped_before_walk(void **state)
{
    sync_lab_t *lab = *state;
    walk_prepare(lab);
    pass_thread_t p;
    memset(&p, 0, sizeof p);
    p.lab = lab;
    atomic_init(&p.stop, true);
    run_pass(&p);
    if (p.rc)
        fail_msg("stopped pass: %s", p.err);
    assert_int_equal(atomic_load(&p.c.walked), 1);
    walk_resume(lab, &p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stopped_pass_then_resumed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_killed_sender_resends_one_window, setup, teardown),
        cmocka_unit_test_setup_teardown(test_receiver_stopped_mid_pass, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connect_retried_until_listener_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stopped_during_walk_then_resumed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stopped_before_walk, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
