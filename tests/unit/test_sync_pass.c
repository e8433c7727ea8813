/*
 * test_sync_pass.c -- what a pass of the block transfer sends (tasks/dc/sync): a whole
 * sparse instance the first time (holes kept holes), then only what changed: blocks
 * written at random, a hole punched, a disk grown or shrunk, a disk added or removed, a
 * disk reprovisioned (its generation changed: sent whole, nothing stale kept); and the
 * target's own vm.json flags kept; bad options refused, a torn manifest tail ignored.
 * A listener on 127.0.0.1:0 over a temporary target data root; no Redis, no lab.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sync_block.h"
#include "sync_digest.h"
#include "sync_lab.h"

/* Two disks of 1 and 1 GiB + 12345 apparent with a few MiB written at scattered offsets, the
 * second with a short last block. */
static void two_disks(sync_lab_t *lab)
{
    sync_lab_disk(lab, 0, 1 * GIB);
    sync_lab_disk(lab, 1, 1 * GIB + 12345);
    sync_lab_write(lab, 0, 0, 3 * MIB, 1);
    sync_lab_write(lab, 0, 700 * MIB + 4096, 2 * MIB, 2);
    sync_lab_write(lab, 1, 5 * MIB, MIB / 2, 3);
    sync_lab_write(lab, 1, 1 * GIB, 12345, 4);
}

static int setup(void **state)
{
    sync_lab_t *lab = calloc(1, sizeof *lab);
    sync_lab_open(lab, "sync_pass");
    *state = lab;
    return 0;
}

static int teardown(void **state)
{
    sync_lab_close(*state);
    free(*state);
    return 0;
}

static void test_full_pass_keeps_holes(void **state)
{
    sync_lab_t *lab = *state;
    two_disks(lab);
    sync_pass_result_t r = sync_lab_pass(lab);
    /* Blocks with data: disk0 3 + 3 (a 2 MiB run across 3 blocks), disk1 1 + 1 (short). */
    assert_int_equal(r.blocks, 8);
    assert_int_equal(r.total, 7 * MIB + 12345);
    assert_int_equal(r.sent, r.total);
    assert_true(r.wire > r.sent && r.wire < r.sent + 64 * 1024);
    assert_int_equal(r.holes, 0);
    assert_int_equal(r.disks_created, 2);
    assert_false(r.stopped);
    for (unsigned n = 0; n < 2; n++) {
        char a[65], b[65];
        sync_lab_sha256(sync_lab_src_disk(lab, n), a);
        sync_lab_sha256(sync_lab_dst_disk(lab, n), b);
        assert_string_equal(a, b);
        sync_lab_assert_same(lab, n);
    }
    /* Nothing changed: a second pass sends no block. */
    r = sync_lab_pass(lab);
    assert_int_equal(r.blocks, 0);
    assert_int_equal(r.total, 0);
    assert_true(r.wire < 4096);
}

static void test_incremental_sends_changed_blocks(void **state)
{
    sync_lab_t *lab = *state;
    two_disks(lab);
    sync_lab_pass(lab);
    /* N distinct blocks at random over both disks, some already data, most holes. */
    enum { N = 12 };
    uint64_t picked[N];
    srand(29);
    for (int i = 0; i < N; i++) {
        bool again;
        do {
            picked[i] = (uint64_t)(rand() % 1024);
            again = false;
            for (int j = 0; j < i; j++)
                again |= picked[j] == picked[i];
        } while (again);
        unsigned disk = i % 2;
        sync_lab_write(lab, disk, picked[i] * MIB, MIB, 100 + (unsigned)i);
    }
    sync_pass_result_t r = sync_lab_pass(lab);
    assert_int_equal(r.blocks, N);
    assert_int_equal(r.sent, N * MIB);
    assert_int_equal(r.total, N * MIB);
    /* Overhead: frame headers, the manifest (about 40 bytes per block), vm.json. */
    assert_true(r.wire >= r.sent);
    assert_true(r.wire < r.sent + 16 * 1024);
    sync_lab_assert_same(lab, 0);
    sync_lab_assert_same(lab, 1);
}

static void test_punched_hole_is_punched(void **state)
{
    sync_lab_t *lab = *state;
    two_disks(lab);
    sync_lab_pass(lab);
    uint64_t before = sync_lab_allocated(sync_lab_dst_disk(lab, 0));
    sync_lab_punch(lab, 0, MIB, MIB);
    /* A block written as zeros is a hole too. */
    sync_lab_write(lab, 0, 2 * MIB, MIB, 7);
    {
        static uint8_t zeros[1 << 20];
        FILE *f = fopen(sync_lab_src_disk(lab, 0), "r+");
        assert_non_null(f);
        assert_int_equal(fseek(f, 2 * MIB, SEEK_SET), 0);
        assert_int_equal(fwrite(zeros, 1, sizeof zeros, f), sizeof zeros);
        assert_int_equal(fclose(f), 0);
    }
    sync_pass_result_t r = sync_lab_pass(lab);
    assert_int_equal(r.holes, 2);
    assert_int_equal(r.blocks, 0);
    sync_lab_assert_same(lab, 0);
    assert_int_equal(sync_lab_allocated(sync_lab_dst_disk(lab, 0)), before - 2 * MIB);
}

static void test_disk_grown_and_shrunk(void **state)
{
    sync_lab_t *lab = *state;
    two_disks(lab);
    sync_lab_pass(lab);
    /* Grown by 1 GiB with a block written past the old end; the other shrunk to cut its
     * last data off and end mid-block. */
    sync_lab_disk(lab, 0, 2 * GIB);
    sync_lab_write(lab, 0, 1 * GIB + 5 * MIB, MIB, 9);
    sync_lab_disk(lab, 1, 5 * MIB + 1000);
    sync_pass_result_t r = sync_lab_pass(lab);
    assert_int_equal(r.truncates, 2);
    /* The new block, and disk1's block that now ends at its new size. */
    assert_true(r.blocks >= 1 && r.blocks <= 2);
    sync_lab_assert_same(lab, 0);
    sync_lab_assert_same(lab, 1);
    struct stat st;
    assert_int_equal(stat(sync_lab_dst_disk(lab, 1), &st), 0);
    assert_int_equal(st.st_size, 5 * MIB + 1000);
    r = sync_lab_pass(lab);
    assert_int_equal(r.blocks, 0);
}

static void test_disk_added_and_removed(void **state)
{
    sync_lab_t *lab = *state;
    two_disks(lab);
    sync_lab_pass(lab);
    assert_int_equal(unlink(sync_lab_src_disk(lab, 1)), 0);
    sync_lab_disk(lab, 2, GIB);
    sync_lab_write(lab, 2, 10 * MIB, MIB, 11);
    sync_pass_result_t r = sync_lab_pass(lab);
    assert_int_equal(r.disks_removed, 1);
    assert_int_equal(r.disks_created, 1);
    assert_int_equal(r.blocks, 1);
    assert_int_equal(access(sync_lab_dst_disk(lab, 1), F_OK), -1);
    sync_lab_assert_same(lab, 2);
}

/* DOMAIN 5.6 test 29: a disk made again between passes (another inode: reprovisioned)
 * is sent whole into an emptied file; its old blocks never stay, even where the new
 * disk has holes and where its blocks happen to equal the old ones. */
static void test_generation_change_resends_whole_disk(void **state)
{
    sync_lab_t *lab = *state;
    two_disks(lab);
    sync_lab_pass(lab);
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.new", sync_lab_src_disk(lab, 0));
    assert_int_equal(rename(sync_lab_src_disk(lab, 0), tmp), 0);
    sync_lab_disk(lab, 0, 1 * GIB);
    sync_lab_write(lab, 0, 0, MIB, 1); /* the same bytes as the old first block */
    assert_int_equal(unlink(tmp), 0);
    sync_pass_result_t r = sync_lab_pass(lab);
    assert_int_equal(r.disks_reset, 1);
    assert_int_equal(r.blocks, 1);
    sync_lab_assert_same(lab, 0);
    assert_true(sync_lab_allocated(sync_lab_dst_disk(lab, 0)) <= 2 * MIB);
    sync_lab_assert_same(lab, 1);
}

static void test_vm_json_keeps_target_flags(void **state)
{
    sync_lab_t *lab = *state;
    two_disks(lab);
    sync_lab_pass(lab);
    char p[1024];
    snprintf(p, sizeof p, "%s/vm.json", lab->dst);
    json_error_t jerr;
    json_t *vm = json_load_file(p, 0, &jerr);
    assert_non_null(vm);
    assert_int_equal(json_integer_value(json_object_get(vm, "ram")), 1024);
    assert_true(json_is_false(json_object_get(vm, "autoboot")));
    assert_true(json_is_true(json_object_get(vm, "do_not_inventory")));
    assert_int_equal(json_array_size(json_object_get(vm, "nics")), 0);
    assert_string_equal(json_string_value(json_object_get(vm, "migration_target")),
                        SYNC_LAB_MIGRATION);
    const char *path =
        json_string_value(json_object_get(json_array_get(json_object_get(vm, "disks"), 0), "path"));
    assert_string_equal(path, sync_lab_dst_disk(lab, 0));
    json_decref(vm);
}

/* The digests the verify compares agree after a pass. */
static void test_digests_agree_after_pass(void **state)
{
    sync_lab_t *lab = *state;
    two_disks(lab);
    sync_lab_pass(lab);
    for (unsigned n = 0; n < 2; n++) {
        char a[65], b[65], err[256];
        uint64_t sa, sb;
        assert_int_equal(sync_disk_digest(sync_lab_src_disk(lab, n), MIB, a, &sa, err, sizeof err),
                         0);
        assert_int_equal(sync_disk_digest(sync_lab_dst_disk(lab, n), MIB, b, &sb, err, sizeof err),
                         0);
        assert_string_equal(a, b);
        assert_int_equal(sa, sb);
    }
}

/* Options a caller got wrong are refused before anything is opened, naming them. */
static void test_bad_options_refused(void **state)
{
    sync_lab_t *lab = *state;
    sync_counters_t c;
    sync_pass_result_t r;
    char err[512];
    sync_send_opts_t o = lab->o;
    o.block_size = 1000;
    assert_int_equal(sync_send_pass(&o, &c, NULL, &r, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "block_size 1000"));
    o = lab->o;
    o.window_blocks = 0;
    assert_int_equal(sync_send_pass(&o, &c, NULL, &r, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "window_blocks 0"));
    o = lab->o;
    o.vm_uuid = "../../etc";
    assert_int_equal(sync_send_pass(&o, &c, NULL, &r, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "../../etc"));
    o = lab->o;
    o.addr = "127.0.0.1";
    assert_int_equal(sync_send_pass(&o, &c, NULL, &r, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "HOST:PORT"));
    char p[1024];
    snprintf(p, sizeof p, "%s/.migration/manifest", lab->dst);
    assert_int_equal(access(p, F_OK), -1);
}

/* A manifest whose last record was torn (a kill in the middle of an append) is cut
 * back to its last whole record: the next pass trusts what was whole. */
static void test_torn_manifest_tail_ignored(void **state)
{
    sync_lab_t *lab = *state;
    two_disks(lab);
    sync_lab_pass(lab);
    char p[1024];
    snprintf(p, sizeof p, "%s/.migration/manifest", lab->dst);
    struct stat before;
    assert_int_equal(stat(p, &before), 0);
    FILE *f = fopen(p, "a");
    assert_non_null(f);
    assert_int_equal(fwrite("\x30\0\0\0garbage", 1, 11, f), 11);
    assert_int_equal(fclose(f), 0);
    sync_pass_result_t r = sync_lab_pass(lab);
    assert_int_equal(r.blocks, 0);
    assert_int_equal(r.holes, 0);
    sync_lab_assert_same(lab, 0);
    sync_lab_assert_same(lab, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_full_pass_keeps_holes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_incremental_sends_changed_blocks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_punched_hole_is_punched, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_grown_and_shrunk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_added_and_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_generation_change_resends_whole_disk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vm_json_keeps_target_flags, setup, teardown),
        cmocka_unit_test_setup_teardown(test_digests_agree_after_pass, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_options_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_manifest_tail_ignored, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
