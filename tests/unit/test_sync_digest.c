/*
 * test_sync_digest.c -- the disk digest the verify compares (tasks/dc/sync): equal for
 * a file and its sparse copy (and for a copy with its zero blocks written out), other
 * for one byte changed or another size; bad block sizes and missing files refused
 * with the path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_digest_of_copies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
