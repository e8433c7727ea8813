/*
 * test_sync_digest.c -- the disk digest the verify compares (tasks/dc/sync): equal for
 * a file and its sparse copy (and for a copy with its zero blocks written out), other
 * for one byte changed or another size; bad block sizes and missing files refused
 * with the path. A final pass's digests (sync_send_opts_t.digests), built from the
 * block hashes the pass takes, equal the digest of the source's file and of the
 * target's after a first pass and after an incremental one (blocks changed, added,
 * zeroed, a zero block written as data, a size change); a pass without the option or
 * stopped gives none.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sparse.h"
#include "sync_digest.h"
#include "sync_lab.h"

static void digest(const char *path, char hex[65], uint64_t *size)
{
    char err[256];
    if (sync_disk_digest(path, (uint32_t)MIB, hex, size, err, sizeof err) != 0)
        fail_msg("digest: %s", err);
}

static void test_digest_of_copies(void **state)
{
    (void)state;
    sync_lab_t lab;
    sync_lab_open(&lab, "sync_digest");
    const char *src = sync_lab_src_disk(&lab, 0);
    sync_lab_disk(&lab, 0, GIB + 777);
    sync_lab_write(&lab, 0, 3 * MIB + 100, 5 * MIB, 1);
    sync_lab_write(&lab, 0, GIB, 777, 2);
    char a[65], b[65], err[256];
    uint64_t sa, sb;
    digest(src, a, &sa);
    assert_int_equal(sa, GIB + 777);
    assert_int_equal(strlen(a), 64);

    /* The sparse copy (what provisioning makes). */
    char copy[1100];
    snprintf(copy, sizeof copy, "%s/copy.img", lab.dir);
    assert_int_equal(dc_sparse_copy(src, copy, 0, err, sizeof err), 0);
    digest(copy, b, &sb);
    assert_string_equal(a, b);

    /* Zeros written out as data over a hole: the same content, the same digest. */
    static uint8_t zeros[1 << 20];
    int fd = open(copy, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, zeros, sizeof zeros, 500 * MIB), (ssize_t)sizeof zeros);
    digest(copy, b, &sb);
    assert_string_equal(a, b);

    /* One byte changed. */
    assert_int_equal(pwrite(fd, "x", 1, 600 * MIB), 1);
    digest(copy, b, &sb);
    assert_string_not_equal(a, b);
    assert_int_equal(pwrite(fd, zeros, 1, 600 * MIB), 1);
    digest(copy, b, &sb);
    assert_string_equal(a, b);

    /* Grown by a hole: the size is part of it. */
    assert_int_equal(ftruncate(fd, (off_t)(2 * GIB)), 0);
    digest(copy, b, &sb);
    assert_string_not_equal(a, b);
    close(fd);

    /* Refusals name the file or the size. */
    assert_int_equal(sync_disk_digest(src, 1000, a, &sa, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "block size 1000"));
    snprintf(copy, sizeof copy, "%s/none.img", lab.dir);
    assert_int_equal(sync_disk_digest(copy, (uint32_t)MIB, a, &sa, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, copy));
    sync_lab_close(&lab);
}

/* Asserts the pass digested disks 0 and 1 exactly as sync_disk_digest reads both
 * sides' files. */
static void assert_pass_digests(const sync_lab_t *lab, const sync_pass_result_t *r)
{
    for (unsigned n = 0; n < 2; n++) {
        char src[65], dst[65];
        uint64_t ssize, dsize;
        digest(sync_lab_src_disk(lab, n), src, &ssize);
        digest(sync_lab_dst_disk(lab, n), dst, &dsize);
        assert_true(r->digested[n]);
        assert_string_equal(r->digest[n], src);
        assert_string_equal(r->digest[n], dst);
        assert_int_equal(r->digest_size[n], ssize);
        assert_int_equal(dsize, ssize);
    }
    for (unsigned n = 2; n < SYNC_DISKS_MAX; n++)
        assert_false(r->digested[n]);
}

/* Writes len zero bytes as data (allocated, not a hole) at `at` of source disk n. */
static void write_zeros(const sync_lab_t *lab, unsigned n, uint64_t at, uint64_t len)
{
    static uint8_t zeros[1 << 20];
    int fd = open(sync_lab_src_disk(lab, n), O_WRONLY);
    assert_true(fd >= 0);
    for (uint64_t done = 0; done < len;) {
        size_t k = len - done < sizeof zeros ? (size_t)(len - done) : sizeof zeros;
        assert_int_equal(pwrite(fd, zeros, k, (off_t)(at + done)), (ssize_t)k);
        done += k;
    }
    close(fd);
}

static void test_pass_digests(void **state)
{
    (void)state;
    sync_lab_t lab;
    sync_lab_open(&lab, "sync_pass_digests");
    sync_lab_disk(&lab, 0, 256 * MIB + 777);
    sync_lab_disk(&lab, 1, 64 * MIB);
    sync_lab_write(&lab, 0, 3 * MIB + 100, 5 * MIB, 1);
    sync_lab_write(&lab, 0, 256 * MIB, 777, 2); /* the short last block */
    sync_lab_write(&lab, 1, 10 * MIB, 2 * MIB, 3);
    write_zeros(&lab, 0, 100 * MIB, MIB); /* data the walk reads as a hole */

    /* Without the option: no digest. */
    sync_pass_result_t r = sync_lab_pass(&lab);
    for (unsigned n = 0; n < SYNC_DISKS_MAX; n++)
        assert_false(r.digested[n]);

    /* Changed where the target has data, new data where it has none, a data block
     * made all zeros, zeros written over a hole, disk 1 grown: the pass reads some of
     * these in its walk and the others as it sends them. */
    sync_lab_write(&lab, 0, 4 * MIB, 4096, 4);
    sync_lab_write(&lab, 0, 200 * MIB, 3 * MIB, 5);
    write_zeros(&lab, 1, 10 * MIB, MIB);
    write_zeros(&lab, 1, 40 * MIB, MIB);
    sync_lab_disk(&lab, 1, 96 * MIB);
    lab.o.digests = true;
    r = sync_lab_pass(&lab);
    assert_true(r.sent > 0);
    assert_pass_digests(&lab, &r);

    /* Nothing changed: every block is known from the walk, none sent. */
    r = sync_lab_pass(&lab);
    assert_int_equal(r.sent, 0);
    assert_pass_digests(&lab, &r);

    /* A first pass into an empty target: every block hashed as it is sent. */
    sync_lab_t fresh;
    sync_lab_open(&fresh, "sync_pass_digests_fresh");
    sync_lab_disk(&fresh, 0, 32 * MIB);
    sync_lab_disk(&fresh, 1, 32 * MIB + 4096);
    sync_lab_write(&fresh, 0, 0, 3 * MIB, 6);
    sync_lab_write(&fresh, 1, 32 * MIB, 4096, 7);
    fresh.o.digests = true;
    r = sync_lab_pass(&fresh);
    assert_pass_digests(&fresh, &r);

    /* A pass stopped before its first disk: no digest claimed. */
    atomic_bool stop;
    atomic_init(&stop, true);
    sync_counters_t c;
    char err[512];
    sync_lab_write(&fresh, 0, 8 * MIB, MIB, 8);
    assert_int_equal(sync_send_pass(&fresh.o, &c, &stop, &r, err, sizeof err), 0);
    assert_true(r.stopped);
    for (unsigned n = 0; n < SYNC_DISKS_MAX; n++)
        assert_false(r.digested[n]);
    sync_lab_close(&fresh);
    sync_lab_close(&lab);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_digest_of_copies),
        cmocka_unit_test(test_pass_digests),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
