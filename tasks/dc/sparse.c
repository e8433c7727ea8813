/*
 * sparse.c -- sparse copies (sparse.h). Owns the descriptors it opens and the
 * "<dst>.part" file until it is renamed or removed.
 */
#include "sparse.h"
#include "dc_fail.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define COPY_BUF (1u << 20) /* bytes read at a time from a data extent */

static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0)
            return false;
    return true;
}

/* Copies [from, to) of in into out at the same offsets, leaving blocks of zeros
 * unwritten (they read back as zeros from the hole they stay). */
static int copy_extent(int in, int out, off_t from, off_t to, unsigned char *buf, const char *src,
                       const char *part, const atomic_bool *stop, char *err, size_t errlen)
{
    while (from < to) {
        if (stop != NULL && atomic_load(stop))
            return dc_fail(err, errlen, -ECANCELED, "%s: copy to %s stopped", src, part);
        size_t want = (size_t)(to - from) < COPY_BUF ? (size_t)(to - from) : COPY_BUF;
        ssize_t got = pread(in, buf, want, from);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return dc_fail(err, errlen, -errno, "%s: read at %lld: %s", src, (long long)from,
                           strerror(errno));
        if (got == 0)
            break; /* the source shrank under us: what is left is past its end */
        for (size_t at = 0; at < (size_t)got; at += DC_SPARSE_BLOCK) {
            size_t n = (size_t)got - at < DC_SPARSE_BLOCK ? (size_t)got - at : DC_SPARSE_BLOCK;
            if (all_zero(buf + at, n))
                continue;
            for (size_t done = 0; done < n;) {
                ssize_t w = pwrite(out, buf + at + done, n - done, from + (off_t)(at + done));
                if (w < 0 && errno == EINTR)
                    continue;
                if (w < 0)
                    return dc_fail(err, errlen, -errno, "%s: write at %lld: %s", part,
                                   (long long)(from + (off_t)(at + done)), strerror(errno));
                done += (size_t)w;
            }
        }
        from += got;
    }
    return 0;
}

int dc_sparse_copy(const char *src, const char *dst, uint64_t size_bytes, char *err, size_t errlen)
{
    return dc_sparse_copy_stoppable(src, dst, size_bytes, NULL, err, errlen);
}

int dc_sparse_copy_stoppable(const char *src, const char *dst, uint64_t size_bytes,
                             const atomic_bool *stop, char *err, size_t errlen)
{
    int rc = 0, in = -1, out = -1;
    unsigned char *buf = NULL;
    char *part = NULL;
    if (asprintf(&part, "%s.part", dst) < 0)
        abort();

    in = open(src, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (in < 0 || fstat(in, &st) != 0) {
        rc = dc_fail(err, errlen, -errno, "%s: %s", src, strerror(errno));
        goto Done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = dc_fail(err, errlen, -EINVAL, "%s: not a regular file", src);
        goto Done;
    }
    uint64_t size = size_bytes != 0 ? size_bytes : (uint64_t)st.st_size;
    if (size < (uint64_t)st.st_size) {
        rc = dc_fail(err, errlen, -EINVAL,
                     "%s: a copy of %llu bytes would cut off the end of its %lld bytes", src,
                     (unsigned long long)size, (long long)st.st_size);
        goto Done;
    }
    out = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0) {
        rc = dc_fail(err, errlen, -errno, "%s: %s", part, strerror(errno));
        goto Done;
    }
    /* The size first: the data lands inside it, and what is never written is a hole. */
    if (ftruncate(out, (off_t)size) != 0) {
        rc = dc_fail(err, errlen, -errno, "%s: cannot set its size to %llu bytes: %s", part,
                     (unsigned long long)size, strerror(errno));
        goto Done;
    }
    buf = malloc(COPY_BUF);
    if (buf == NULL)
        abort();
    for (off_t pos = 0; pos < st.st_size;) {
        off_t data = lseek(in, pos, SEEK_DATA);
        if (data < 0 && errno == ENXIO)
            break; /* no data after pos */
        if (data < 0) {
            rc = dc_fail(err, errlen, -errno, "%s: SEEK_DATA at %lld: %s", src, (long long)pos,
                         strerror(errno));
            goto Done;
        }
        off_t hole = lseek(in, data, SEEK_HOLE);
        if (hole < 0) {
            rc = dc_fail(err, errlen, -errno, "%s: SEEK_HOLE at %lld: %s", src, (long long)data,
                         strerror(errno));
            goto Done;
        }
        rc = copy_extent(in, out, data, hole, buf, src, part, stop, err, errlen);
        if (rc != 0)
            goto Done;
        pos = hole;
    }
    if (fsync(out) != 0) {
        rc = dc_fail(err, errlen, -errno, "%s: fsync: %s", part, strerror(errno));
        goto Done;
    }
    if (close(out) != 0) {
        out = -1;
        rc = dc_fail(err, errlen, -errno, "%s: close: %s", part, strerror(errno));
        goto Done;
    }
    out = -1;
    if (rename(part, dst) != 0)
        rc = dc_fail(err, errlen, -errno, "cannot rename %s to %s: %s", part, dst, strerror(errno));

Done:
    if (out >= 0)
        close(out);
    if (in >= 0)
        close(in);
    if (rc != 0)
        unlink(part); /* may not exist: nothing to report */
    free(buf);
    free(part);
    return rc;
}

int dc_sparse_data_bytes(const char *path, uint64_t *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    uint64_t total = 0;
    for (off_t pos = 0; pos < st.st_size;) {
        off_t data = lseek(fd, pos, SEEK_DATA);
        if (data < 0 && errno == ENXIO)
            break; /* no data after pos */
        if (data < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        off_t hole = lseek(fd, data, SEEK_HOLE);
        if (hole < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        total += (uint64_t)(hole - data);
        pos = hole;
    }
    close(fd);
    *out = total;
    return 0;
}
