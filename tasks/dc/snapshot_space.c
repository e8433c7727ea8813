/*
 * snapshot_space.c -- snapshot copies and their space (snapshot_space.h). Owns the
 * descriptors and buffers it makes; the copy owns "<dst>.part" until it is renamed or
 * removed.
 */
#include "snapshot_space.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk_file.h"
#include "sparse.h"
#include "dc_fail.h"

#define CHUNK (1u << 20) /* bytes compared at a time, a multiple of DC_SPARSE_BLOCK */

/* 1: cloned into dst; 0: the file system cannot clone (fall back to a copy); or a
 * negative errno. */
static int try_clone(const char *src, const char *dst, char *err, size_t errlen)
{
    char part[PATH_MAX];
    if (snprintf(part, sizeof part, "%s.part", dst) >= (int)sizeof part)
        return dc_fail(err, errlen, -ENAMETOOLONG, "%s: path too long", dst);
    int in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in < 0)
        return dc_fail(err, errlen, -errno, "%s: %s", src, strerror(errno));
    unlink(part); /* what an attempt killed midway left; usually absent */
    int out = open(part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0) {
        int e = errno;
        close(in);
        return dc_fail(err, errlen, -e, "%s: %s", part, strerror(e));
    }
    int rc = 1;
    if (ioctl(out, FICLONE, in) != 0) {
        int e = errno;
        /* Not a file system that shares blocks (ext4, tmpfs) or not across these two:
         * the sparse copy does it. Anything else is a real fault. */
        if (e == EOPNOTSUPP || e == ENOTTY || e == EXDEV || e == EINVAL || e == ENOSYS)
            rc = 0;
        else
            rc = dc_fail(err, errlen, -e, "%s: FICLONE from %s: %s", part, src, strerror(e));
    } else if (fsync(out) != 0) {
        rc = dc_fail(err, errlen, -errno, "%s: fsync: %s", part, strerror(errno));
    }
    if (close(out) != 0 && rc == 1)
        rc = dc_fail(err, errlen, -errno, "%s: close: %s", part, strerror(errno));
    close(in);
    if (rc == 1 && rename(part, dst) != 0)
        rc = dc_fail(err, errlen, -errno, "cannot rename %s to %s: %s", part, dst, strerror(errno));
    if (rc != 1)
        unlink(part); /* may be gone: nothing to report */
    return rc;
}

int dc_snapshot_copy(const char *src, const char *dst, const atomic_bool *stop, bool *cloned,
                     char *err, size_t errlen)
{
    if (cloned != NULL)
        *cloned = false;
    if (stop != NULL && atomic_load(stop))
        return dc_fail(err, errlen, -ECANCELED, "%s: copy to %s stopped", src, dst);
    int rc = try_clone(src, dst, err, errlen);
    if (rc < 0)
        return rc;
    if (rc == 0)
        rc = dc_sparse_copy_stoppable(src, dst, 0, stop, err, errlen);
    else if (cloned != NULL)
        *cloned = true;
    if (rc == 0)
        rc = dc_disk_dir_sync(dst, err, errlen);
    return rc;
}

uint64_t dc_snapshot_size_mib(uint64_t bytes)
{
    return bytes / DC_MIB + (bytes % DC_MIB != 0);
}

/* Reads up to len bytes at off; fewer only at the end of the file. */
static ssize_t read_full(int fd, unsigned char *buf, size_t len, off_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, buf + got, len - got, off + (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* The bytes of [from, to) of `old` (4 KiB aligned, to may be the file's end) that
 * differ, block by block, from `newer` (-1: no newer file, everything counts). */
static int count_extent(int old, int newer, off_t from, off_t to, unsigned char *a,
                        unsigned char *b, const char *old_path, const char *newer_path,
                        uint64_t *count, const atomic_bool *stop, char *err, size_t errlen)
{
    while (from < to) {
        if (stop != NULL && atomic_load(stop))
            return dc_fail(err, errlen, -ECANCELED, "%s: measure stopped", old_path);
        size_t want = (size_t)(to - from) < CHUNK ? (size_t)(to - from) : CHUNK;
        ssize_t got = read_full(old, a, want, from);
        if (got < 0)
            return dc_fail(err, errlen, -errno, "%s: read at %lld: %s", old_path, (long long)from,
                           strerror(errno));
        if (got == 0)
            break; /* the file ended (it shrank under us) */
        ssize_t have = newer >= 0 ? read_full(newer, b, (size_t)got, from) : 0;
        if (have < 0)
            return dc_fail(err, errlen, -errno, "%s: read at %lld: %s", newer_path, (long long)from,
                           strerror(errno));
        for (size_t at = 0; at < (size_t)got; at += DC_SPARSE_BLOCK) {
            size_t n = (size_t)got - at < DC_SPARSE_BLOCK ? (size_t)got - at : DC_SPARSE_BLOCK;
            /* Past the newer file's end, the block is held by this copy alone. */
            if (at + n > (size_t)have || memcmp(a + at, b + at, n) != 0)
                *count += n;
        }
        from += got;
    }
    return 0;
}

/* The differing data blocks of the copy `old` against `newer` (may be absent). */
static int count_copy(const char *old_path, const char *newer_path, unsigned char *a,
                      unsigned char *b, uint64_t *count, const atomic_bool *stop, char *err,
                      size_t errlen)
{
    int rc = 0;
    int old = open(old_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (old < 0)
        return dc_fail(err, errlen, -errno, "%s: %s", old_path, strerror(errno));
    int newer = open(newer_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (newer < 0 && errno != ENOENT) {
        rc = dc_fail(err, errlen, -errno, "%s: %s", newer_path, strerror(errno));
        goto Done;
    }
    struct stat st;
    if (fstat(old, &st) != 0) {
        rc = dc_fail(err, errlen, -errno, "%s: %s", old_path, strerror(errno));
        goto Done;
    }
    for (off_t pos = 0; pos < st.st_size;) {
        off_t data = lseek(old, pos, SEEK_DATA);
        if (data < 0 && errno == ENXIO)
            break; /* no data after pos */
        if (data < 0) {
            rc = dc_fail(err, errlen, -errno, "%s: SEEK_DATA at %lld: %s", old_path, (long long)pos,
                         strerror(errno));
            goto Done;
        }
        off_t hole = lseek(old, data, SEEK_HOLE);
        if (hole < 0) {
            rc = dc_fail(err, errlen, -errno, "%s: SEEK_HOLE at %lld: %s", old_path,
                         (long long)data, strerror(errno));
            goto Done;
        }
        /* Whole blocks: an extent that starts or ends inside one counts it once. */
        off_t from = data - data % DC_SPARSE_BLOCK;
        if (from < pos)
            from = pos;
        off_t to = hole + (DC_SPARSE_BLOCK - hole % DC_SPARSE_BLOCK) % DC_SPARSE_BLOCK;
        if (to > st.st_size)
            to = st.st_size;
        rc = count_extent(old, newer, from, to, a, b, old_path, newer_path, count, stop, err,
                          errlen);
        if (rc != 0)
            goto Done;
        pos = to > hole ? to : hole;
    }
Done:
    if (newer >= 0)
        close(newer);
    close(old);
    return rc;
}

int dc_snapshot_bytes(const char *const *copies, size_t n, const char *live, uint64_t *out,
                      const atomic_bool *stop, char *err, size_t errlen)
{
    unsigned char *a = malloc(CHUNK), *b = malloc(CHUNK);
    if (a == NULL || b == NULL)
        abort();
    uint64_t total = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (copies[i] == NULL)
            continue;
        const char *newer = live;
        for (size_t j = i + 1; j < n; j++) {
            if (copies[j] != NULL) {
                newer = copies[j];
                break;
            }
        }
        rc = count_copy(copies[i], newer, a, b, &total, stop, err, errlen);
    }
    free(a);
    free(b);
    if (rc == 0)
        *out = total;
    return rc;
}
