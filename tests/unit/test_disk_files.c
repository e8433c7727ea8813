/*
 * test_disk_files.c -- disk files and snapshot space (tasks/dc/disk_file.c,
 * tasks/dc/snapshot_space.c), checked on the files themselves: apparent size
 * (st_size), blocks used (st_blocks), content checksums, holes (SEEK_DATA), and
 * snapshot_bytes computed by hand from the blocks each test writes. Runs in a fresh
 * directory under /tmp.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk_file.h"
#include "snapshot_space.h"
#include "file_checks.h"

#define MIB   (1024ll * 1024ll)
#define BLOCK 4096ll

static char dir[PATH_MAX];

static char *path_in(const char *name)
{
    static char buf[8][PATH_MAX + 64];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, PATH_MAX + 64, "%s/%s", dir, name);
    return p;
}

/* Where the next data is at or after `from`, or -1 when only a hole follows. */
static off_t next_data(const char *path, off_t from)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    off_t at = lseek(fd, from, SEEK_DATA);
    close(fd);
    return at;
}

static int group_setup(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/test_disk_files.XXXXXX";
    if (mkdtemp(tmpl) == NULL)
        return -1;
    snprintf(dir, sizeof dir, "%s", tmpl);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---- disk files ------------------------------------------------------------------- */

static void test_make_is_sparse_and_exact(void **state)
{
    (void)state;
    char err[512] = "";
    const char *p = path_in("disk1.img");
    assert_int_equal(dc_disk_file_make(p, 92160, err, sizeof err), 0);
    struct stat st = test_file_stat(p);
    assert_int_equal(st.st_size, 92160 * MIB);
    assert_int_equal(st.st_blocks, 0); /* nothing written */
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_false(test_file_exists(path_in("disk1.img.part")));
    uint64_t mib = 0;
    assert_int_equal(dc_disk_file_size(p, &mib, err, sizeof err), 0);
    assert_int_equal(mib, 92160);
    /* Made again: refused, the file untouched. */
    test_file_write_pattern(p, 0, 1, 4096);
    assert_int_equal(dc_disk_file_make(p, 10, err, sizeof err), -EEXIST);
    assert_non_null(strstr(err, "disk1.img"));
    assert_int_equal(test_file_stat(p).st_size, 92160 * MIB);
    /* Sizes out of range. */
    assert_int_equal(dc_disk_file_make(path_in("zero.img"), 0, err, sizeof err), -EINVAL);
    assert_int_equal(dc_disk_file_make(path_in("huge.img"), DC_DISK_MAX_MIB + 1, err, sizeof err),
                     -EINVAL);
    assert_non_null(strstr(err, "huge.img"));
    assert_false(test_file_exists(path_in("zero.img")));
    assert_false(test_file_exists(path_in("huge.img")));
}

static void test_make_replaces_a_killed_part(void **state)
{
    (void)state;
    char err[512] = "";
    const char *p = path_in("disk2.img"), *part = path_in("disk2.img.part");
    int fd = open(part, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    close(fd);
    test_file_write_pattern(part, 0, 9, MIB); /* junk an attempt killed midway left */
    assert_int_equal(dc_disk_file_make(p, 64, err, sizeof err), 0);
    assert_false(test_file_exists(part));
    struct stat st = test_file_stat(p);
    assert_int_equal(st.st_size, 64 * MIB);
    assert_int_equal(st.st_blocks, 0);
}

static void test_resize_keeps_content(void **state)
{
    (void)state;
    char err[512] = "";
    const char *p = path_in("boot.img");
    assert_int_equal(dc_disk_file_make(p, 16, err, sizeof err), 0);
    test_file_write_pattern(p, 0, 3, 3 * MIB);
    uint64_t first3 = test_file_checksum(p, 0, 3 * MIB), first1 = test_file_checksum(p, 0, MIB);
    blkcnt_t blocks = test_file_stat(p).st_blocks;

    /* Grow: the first bytes identical, the new range a hole. */
    assert_int_equal(dc_disk_file_resize(p, 20480, err, sizeof err), 0);
    struct stat st = test_file_stat(p);
    assert_int_equal(st.st_size, 20480 * MIB);
    assert_true(st.st_blocks <= blocks);
    assert_int_equal(test_file_checksum(p, 0, 3 * MIB), first3);
    assert_int_equal(next_data(p, 16 * MIB), -1);
    /* The same size again is done. */
    assert_int_equal(dc_disk_file_resize(p, 20480, err, sizeof err), 0);
    assert_int_equal(test_file_stat(p).st_size, 20480 * MIB);

    /* Shrink: the first MiB kept, the rest gone. */
    assert_int_equal(dc_disk_file_resize(p, 1, err, sizeof err), 0);
    assert_int_equal(test_file_stat(p).st_size, MIB);
    assert_int_equal(test_file_checksum(p, 0, MIB), first1);

    assert_int_equal(dc_disk_file_resize(path_in("absent.img"), 10, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "absent.img"));
    assert_int_equal(dc_disk_file_resize(p, 0, err, sizeof err), -EINVAL);
    assert_int_equal(dc_disk_file_resize(p, DC_DISK_MAX_MIB + 1, err, sizeof err), -EINVAL);
    assert_int_equal(test_file_stat(p).st_size, MIB);
}

static void test_size_check(void **state)
{
    (void)state;
    char err[512] = "";
    const char *odd = path_in("odd.img");
    int fd = open(odd, O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, MIB + 512), 0);
    close(fd);
    uint64_t mib = 7;
    assert_int_equal(dc_disk_file_size(odd, &mib, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "odd.img"));
    assert_non_null(strstr(err, "1049088 bytes"));
    assert_int_equal(mib, 7);
    assert_int_equal(dc_disk_file_size(path_in("none.img"), &mib, err, sizeof err), -ENOENT);
    assert_int_equal(symlink(odd, path_in("link.img")), 0);
    assert_int_equal(dc_disk_file_size(path_in("link.img"), &mib, err, sizeof err), -ELOOP);
    assert_int_equal(dc_disk_file_resize(path_in("link.img"), 4, err, sizeof err), -ELOOP);
    assert_int_equal(test_file_stat(odd).st_size, MIB + 512);
}

/* ---- snapshot copies and their space ---------------------------------------------- */

static uint64_t bytes_of(const char *const *copies, size_t n, const char *live)
{
    char err[512] = "";
    uint64_t out = 12345;
    assert_int_equal(dc_snapshot_bytes(copies, n, live, &out, NULL, err, sizeof err), 0);
    return out;
}

static void snapshot(const char *live, const char *copy)
{
    char err[512] = "";
    assert_int_equal(dc_snapshot_copy(live, copy, NULL, NULL, err, sizeof err), 0);
}

static void test_snapshot_copy_is_whole_and_sparse(void **state)
{
    (void)state;
    char err[512] = "";
    const char *live = path_in("live0.img"), *copy = path_in("copy0.img");
    assert_int_equal(dc_disk_file_make(live, 256, err, sizeof err), 0);
    test_file_write_pattern(live, 0, 5, 2 * MIB);
    test_file_write_pattern(live, 128 * MIB, 6, MIB);
    /* A .part a killed copy left is replaced. */
    int fd = open(path_in("copy0.img.part"), O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    close(fd);
    test_file_write_pattern(path_in("copy0.img.part"), 0, 7, MIB);
    bool cloned = true;
    assert_int_equal(dc_snapshot_copy(live, copy, NULL, &cloned, err, sizeof err), 0);
    assert_false(test_file_exists(path_in("copy0.img.part")));
    struct stat st = test_file_stat(copy);
    assert_int_equal(st.st_size, 256 * MIB);
    assert_int_equal(test_file_checksum(copy, 0, 256 * MIB),
                     test_file_checksum(live, 0, 256 * MIB));
    if (!cloned) /* a sparse copy: the holes stayed holes */
        assert_true(st.st_blocks * 512 <= 3 * MIB + 64 * 1024);
    assert_int_equal(next_data(copy, 2 * MIB), 128 * MIB);

    /* Stopped before it starts: nothing made. */
    atomic_bool stop;
    atomic_init(&stop, true);
    assert_int_equal(dc_snapshot_copy(live, path_in("copy0b.img"), &stop, NULL, err, sizeof err),
                     -ECANCELED);
    assert_false(test_file_exists(path_in("copy0b.img")));
    assert_false(test_file_exists(path_in("copy0b.img.part")));
    /* A missing source names itself. */
    assert_int_equal(
        dc_snapshot_copy(path_in("nope.img"), path_in("copy0c.img"), NULL, NULL, err, sizeof err),
        -ENOENT);
    assert_non_null(strstr(err, "nope.img"));
    assert_false(test_file_exists(path_in("copy0c.img")));
}

static void test_snapshot_bytes_follow_overwrites(void **state)
{
    (void)state;
    char err[512] = "";
    const char *live = path_in("live1.img"), *s1 = path_in("s1.img"), *s2 = path_in("s2.img");
    assert_int_equal(dc_disk_file_make(live, 64, err, sizeof err), 0);
    test_file_write_pattern(live, 0, 11, 4 * MIB);

    /* No snapshot, and a fresh one: 0. */
    assert_int_equal(bytes_of(NULL, 0, live), 0);
    snapshot(live, s1);
    const char *one[] = {s1};
    assert_int_equal(bytes_of(one, 1, live), 0);

    /* Overwriting 3 blocks the snapshot holds: exactly 3 blocks. */
    test_file_write_pattern(live, 2 * BLOCK, 12, 3 * BLOCK);
    assert_int_equal(bytes_of(one, 1, live), 3 * BLOCK);
    /* Overwriting part of one block counts the whole block, once. */
    test_file_write_pattern(live, 10 * BLOCK + 100, 13, 10);
    assert_int_equal(bytes_of(one, 1, live), 4 * BLOCK);
    /* Writes into a hole of the snapshot: nothing. */
    test_file_write_pattern(live, 32 * MIB, 14, MIB);
    assert_int_equal(bytes_of(one, 1, live), 4 * BLOCK);

    /* A second snapshot: s1 counts against s2 (the same 4 blocks), s2 against the live
     * disk (nothing yet). */
    snapshot(live, s2);
    const char *two[] = {s1, s2};
    assert_int_equal(bytes_of(two, 2, live), 4 * BLOCK);
    /* A block both hold, overwritten: only the newest copy's counts (s1 equals s2
     * there). */
    test_file_write_pattern(live, 100 * BLOCK, 15, BLOCK);
    assert_int_equal(bytes_of(two, 2, live), 5 * BLOCK);
    /* A block written into s1's hole before s2, overwritten now: s2's counts, s1
     * holds no data there. */
    test_file_write_pattern(live, 32 * MIB, 16, BLOCK);
    assert_int_equal(bytes_of(two, 2, live), 6 * BLOCK);
    /* A block overwritten since s1 and again now: s1's (differs from s2) and s2's
     * (differs from live). */
    test_file_write_pattern(live, 2 * BLOCK, 17, BLOCK);
    assert_int_equal(bytes_of(two, 2, live), 7 * BLOCK);
    /* A snapshot without this disk (NULL) is passed over. */
    const char *gap[] = {s1, NULL, s2, NULL};
    assert_int_equal(bytes_of(gap, 4, live), 7 * BLOCK);
    assert_int_equal(dc_snapshot_size_mib(7 * BLOCK), 1);
}

static void test_snapshot_bytes_after_shrink(void **state)
{
    (void)state;
    char err[512] = "";
    const char *live = path_in("live2.img"), *s = path_in("s3.img");
    assert_int_equal(dc_disk_file_make(live, 8, err, sizeof err), 0);
    test_file_write_pattern(live, 0, 21, 4 * MIB);
    snapshot(live, s);
    const char *one[] = {s};
    assert_int_equal(bytes_of(one, 1, live), 0);
    /* Cut to 1 MiB: the 3 MiB of data past the live end are the snapshot's alone. */
    assert_int_equal(dc_disk_file_resize(live, 1, err, sizeof err), 0);
    assert_int_equal(bytes_of(one, 1, live), 3 * MIB);
    /* The live disk gone (unlinked): the whole copy's data. */
    const char *missing = path_in("gone.img");
    assert_int_equal(bytes_of(one, 1, missing), 4 * MIB);
    /* A copy missing is an error naming it. */
    const char *bad[] = {path_in("no-copy.img")};
    uint64_t out = 0;
    assert_int_equal(dc_snapshot_bytes(bad, 1, live, &out, NULL, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "no-copy.img"));
}

static void test_snapshot_size_rounds_up(void **state)
{
    (void)state;
    assert_int_equal(dc_snapshot_size_mib(0), 0);
    assert_int_equal(dc_snapshot_size_mib(1), 1);
    assert_int_equal(dc_snapshot_size_mib(MIB), 1);
    assert_int_equal(dc_snapshot_size_mib(MIB + 1), 2);
    assert_int_equal(dc_snapshot_size_mib(5000 * MIB), 5000);
}

/* A copy of known size is refused before it starts when the file system cannot hold it,
 * naming the directory and both numbers; one that fits passes. */
static void test_space_check(void **state)
{
    (void)state;
    char err[512] = "";
    assert_int_equal(dc_disk_space_check(dir, 4096, err, sizeof err), 0);
    assert_int_equal(dc_disk_space_check(dir, UINT64_MAX / 2, err, sizeof err), -ENOSPC);
    assert_non_null(strstr(err, dir));
    assert_non_null(strstr(err, "needs 9223372036854775807 bytes"));
    assert_non_null(strstr(err, "free"));
    assert_int_equal(dc_disk_space_check(path_in("no-such-dir"), 1, err, sizeof err), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_make_is_sparse_and_exact),
        cmocka_unit_test(test_make_replaces_a_killed_part),
        cmocka_unit_test(test_resize_keeps_content),
        cmocka_unit_test(test_size_check),
        cmocka_unit_test(test_snapshot_copy_is_whole_and_sparse),
        cmocka_unit_test(test_snapshot_bytes_follow_overwrites),
        cmocka_unit_test(test_snapshot_bytes_after_shrink),
        cmocka_unit_test(test_snapshot_size_rounds_up),
        cmocka_unit_test(test_space_check),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
