/*
 * test_sparse.c -- the lab's image files and sparse copies (tasks/dc/image_file.c,
 * tasks/dc/sparse.c), checked on the files themselves: apparent size (st_size),
 * blocks used (st_blocks), content checksums, and where the holes are (SEEK_DATA).
 * Runs in a fresh directory under /tmp.
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

#include "image_file.h"
#include "sparse.h"
#include "file_checks.h"

#define MIB (1024ll * 1024ll)

static char dir[PATH_MAX];

static char *path_in(const char *name)
{
    static char buf[4][PATH_MAX + 64];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, PATH_MAX + 64, "%s/%s", dir, name);
    return p;
}

/* Where the next data is at or after `from`, or -1 when only a hole follows. */
static off_t next_data(const char *path, off_t from)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    off_t at = lseek(fd, from, SEEK_DATA);
    int e = errno;
    close(fd);
    if (at < 0) {
        assert_int_equal(e, ENXIO);
        return -1;
    }
    return at;
}

static void write_at(int fd, off_t at, unsigned char byte, size_t len)
{
    unsigned char *buf = malloc(len);
    memset(buf, byte, len);
    assert_int_equal(pwrite(fd, buf, len, at), (ssize_t)len);
    free(buf);
}

static int group_setup(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/test_sparse.XXXXXX";
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

static dc_image_t image(const char *uuid, const char *file, uint64_t size_mib, uint64_t data_mib)
{
    dc_image_t m = {.size_mib = size_mib, .data_mib = data_mib, .file = (char *)file};
    snprintf(m.uuid, sizeof m.uuid, "%s", uuid);
    return m;
}

static void test_image_made_sparse(void **state)
{
    (void)state;
    const char *file = path_in("images/nested/os.img");
    dc_image_t m = image("00000000-0000-4000-8000-000000000031", file, 256, 2);
    char err[512] = "";
    bool made = false;
    assert_int_equal(dc_image_ensure(&m, &made, err, sizeof err), 0);
    assert_true(made);
    struct stat st = test_file_stat(file);
    assert_int_equal(st.st_size, 256 * MIB);
    /* Blocks used: the 2 MiB of data (and a little of the file system's own). */
    assert_true((long long)st.st_blocks * 512 >= 2 * MIB);
    assert_true((long long)st.st_blocks * 512 < 3 * MIB);
    assert_int_equal(next_data(file, 0), 0);
    assert_int_equal(next_data(file, 2 * MIB), -1); /* the rest is one hole */
    uint64_t data = 0;
    assert_int_equal(dc_sparse_data_bytes(file, &data), 0);
    assert_int_equal(data, 2 * MIB);

    /* The content is the image's own: what dc_image_content makes for its uuid. */
    unsigned char *want = malloc(2 * MIB);
    dc_image_content(m.uuid, 0, want, 2 * MIB);
    int fd = open(file, O_RDONLY);
    unsigned char *got = malloc(2 * MIB);
    assert_int_equal(pread(fd, got, 2 * MIB, 0), 2 * MIB);
    close(fd);
    assert_memory_equal(got, want, 2 * MIB);
    /* No block of it is all zeros: each is a data extent of a real image. */
    static const unsigned char zero[DC_SPARSE_BLOCK];
    for (long long at = 0; at < 2 * MIB; at += DC_SPARSE_BLOCK)
        assert_memory_not_equal(got + at, zero, DC_SPARSE_BLOCK);
    /* A range made on its own equals the same range of the whole. */
    unsigned char part[64];
    dc_image_content(m.uuid, MIB + 64, part, sizeof part);
    assert_memory_equal(part, want + MIB + 64, sizeof part);
    free(got);

    /* Deterministic: the same uuid gives the same bytes; another uuid others. */
    const char *twin = path_in("twin.img");
    dc_image_t t = image(m.uuid, twin, 16, 2);
    assert_int_equal(dc_image_ensure(&t, &made, err, sizeof err), 0);
    assert_int_equal(test_file_checksum(twin, 0, 2 * MIB), test_file_checksum(file, 0, 2 * MIB));
    dc_image_content("00000000-0000-4000-8000-000000000032", 0, want, 4096);
    unsigned char first[4096];
    dc_image_content(m.uuid, 0, first, sizeof first);
    assert_memory_not_equal(first, want, sizeof first);
    free(want);

    /* Already there: left alone. */
    assert_int_equal(dc_image_ensure(&m, &made, err, sizeof err), 0);
    assert_false(made);
    /* There with another size: refused, naming the file and both sizes. */
    m.size_mib = 512;
    assert_int_equal(dc_image_ensure(&m, &made, err, sizeof err), -EEXIST);
    assert_non_null(strstr(err, file));
    assert_non_null(strstr(err, "268435456 bytes"));
    assert_non_null(strstr(err, "size_mib 512"));
    /* No temporary file is left behind. */
    assert_int_not_equal(access(path_in("images/nested/os.img.part"), F_OK), 0);
}

/* A source with data at 0 and at 32 MiB, a hole between, and a run of written zeros
 * at 40 MiB; copied to 128 MiB. */
static void test_copy_keeps_holes(void **state)
{
    (void)state;
    const char *src = path_in("src.img"), *dst = path_in("copy.img");
    int fd = open(src, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 64 * MIB), 0);
    unsigned char *buf = malloc(MIB);
    dc_image_content("00000000-0000-4000-8000-0000000000aa", 0, buf, MIB);
    assert_int_equal(pwrite(fd, buf, MIB, 0), MIB);
    write_at(fd, 32 * MIB, 0x5a, MIB);
    write_at(fd, 40 * MIB, 0x00, 64 * 1024); /* allocated zeros */
    assert_int_equal(fsync(fd), 0);
    close(fd);
    free(buf);
    assert_int_equal(next_data(src, 34 * MIB), 40 * MIB); /* the zeros are data in src */

    char err[512] = "";
    assert_int_equal(dc_sparse_copy(src, dst, 128 * MIB, err, sizeof err), 0);
    struct stat st = test_file_stat(dst);
    assert_int_equal(st.st_size, 128 * MIB);
    /* Blocks used: the 2 MiB of data, far below the apparent 128 MiB. */
    assert_true((long long)st.st_blocks * 512 >= 2 * MIB);
    assert_true((long long)st.st_blocks * 512 < 3 * MIB);
    assert_int_equal(st.st_mode & 0777, 0600);
    /* The same bytes, and the holes where they were. */
    assert_int_equal(test_file_checksum(dst, 0, 64 * MIB), test_file_checksum(src, 0, 64 * MIB));
    assert_int_equal(next_data(dst, 0), 0);
    assert_int_equal(next_data(dst, MIB), 32 * MIB);
    assert_int_equal(next_data(dst, 33 * MIB), -1); /* the zeros were not written out */
    uint64_t data = 0;
    assert_int_equal(dc_sparse_data_bytes(dst, &data), 0);
    assert_int_equal(data, 2 * MIB);
    assert_int_not_equal(access(path_in("copy.img.part"), F_OK), 0);

    /* Size 0 keeps the source's; a second copy replaces the first whole. */
    assert_int_equal(dc_sparse_copy(src, dst, 0, err, sizeof err), 0);
    assert_int_equal(test_file_stat(dst).st_size, 64 * MIB);
    assert_int_equal(test_file_checksum(dst, 0, 64 * MIB), test_file_checksum(src, 0, 64 * MIB));
}

static void test_copy_refusals(void **state)
{
    (void)state;
    const char *src = path_in("small.img"), *dst = path_in("never.img");
    int fd = open(src, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 8 * MIB), 0);
    write_at(fd, 0, 0x11, 4096);
    close(fd);
    char err[512] = "";
    /* Smaller than the source: refused, nothing made. */
    assert_int_equal(dc_sparse_copy(src, dst, 4 * MIB, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "would cut off"));
    assert_int_not_equal(access(dst, F_OK), 0);
    assert_int_not_equal(access(path_in("never.img.part"), F_OK), 0);
    /* A missing source names itself. */
    assert_int_equal(dc_sparse_copy(path_in("missing.img"), dst, 0, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "missing.img"));
    assert_int_not_equal(access(dst, F_OK), 0);
    /* A destination in a missing directory fails without a trace. */
    assert_int_equal(dc_sparse_copy(src, path_in("no/such/dir/x.img"), 0, err, sizeof err),
                     -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_image_made_sparse),
        cmocka_unit_test(test_copy_keeps_holes),
        cmocka_unit_test(test_copy_refusals),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
