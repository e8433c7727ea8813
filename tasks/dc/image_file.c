/*
 * image_file.c -- making the lab's image files (image_file.h). Owns the descriptor
 * and the "<file>.part" file it writes until the rename.
 */
#include "image_file.h"
#include "dc_fail.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB       (1024ull * 1024ull)
#define WRITE_BUF (1u << 20)

/* splitmix64: one well-mixed 64-bit word per index, so any range of the content can
 * be made (or checked) without making what comes before it. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* FNV-1a of the uuid's text: the seed of its content. */
static uint64_t seed_of(const char *uuid)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)uuid; *p != '\0'; p++) {
        h ^= *p;
        h *= 0x100000001b3ull;
    }
    return h;
}

void dc_image_content(const char *uuid, uint64_t offset, void *buf, size_t len)
{
    uint64_t seed = seed_of(uuid);
    unsigned char *out = buf;
    for (size_t i = 0; i + 8 <= len; i += 8) {
        uint64_t w = mix64(seed ^ mix64((offset + i) / 8));
        for (int b = 0; b < 8; b++)
            out[i + (size_t)b] = (unsigned char)(w >> (8 * b)); /* little-endian everywhere */
    }
}

/* mkdir -p of the directory holding `file`. */
static int make_parents(const char *file, char *err, size_t errlen)
{
    char *dir = strdup(file);
    if (dir == NULL)
        abort();
    int rc = 0;
    char *slash = strrchr(dir, '/');
    if (slash != NULL && slash != dir) {
        *slash = '\0';
        for (char *p = dir + 1;; p++) {
            if (*p != '/' && *p != '\0')
                continue;
            char saved = *p;
            *p = '\0';
            if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
                rc = dc_fail(err, errlen, -errno, "cannot create directory %s: %s", dir,
                             strerror(errno));
                break;
            }
            *p = saved;
            if (saved == '\0')
                break;
        }
    }
    free(dir);
    return rc;
}

int dc_image_ensure(const dc_image_t *img, bool *made, char *err, size_t errlen)
{
    *made = false;
    uint64_t size = img->size_mib * MIB;
    struct stat st;
    if (stat(img->file, &st) == 0) {
        if (!S_ISREG(st.st_mode))
            return dc_fail(err, errlen, -EEXIST, "image %s: %s exists and is not a regular file",
                           img->uuid, img->file);
        if ((uint64_t)st.st_size != size)
            return dc_fail(err, errlen, -EEXIST,
                           "image %s: %s holds %lld bytes, but size_mib %llu is %llu bytes",
                           img->uuid, img->file, (long long)st.st_size,
                           (unsigned long long)img->size_mib, (unsigned long long)size);
        return 0;
    }
    if (errno != ENOENT)
        return dc_fail(err, errlen, -errno, "image %s: %s: %s", img->uuid, img->file,
                       strerror(errno));
    int rc = make_parents(img->file, err, errlen);
    if (rc != 0)
        return rc;

    char *part = NULL;
    if (asprintf(&part, "%s.part", img->file) < 0)
        abort();
    unsigned char *buf = NULL;
    int fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = dc_fail(err, errlen, -errno, "image %s: %s: %s", img->uuid, part, strerror(errno));
        goto Done;
    }
    if (ftruncate(fd, (off_t)size) != 0) {
        rc = dc_fail(err, errlen, -errno, "image %s: cannot set the size of %s to %llu bytes: %s",
                     img->uuid, part, (unsigned long long)size, strerror(errno));
        goto Done;
    }
    buf = malloc(WRITE_BUF);
    if (buf == NULL)
        abort();
    uint64_t data = img->data_mib * MIB;
    for (uint64_t at = 0; at < data;) {
        size_t n = data - at < WRITE_BUF ? (size_t)(data - at) : WRITE_BUF;
        dc_image_content(img->uuid, at, buf, n);
        ssize_t w = pwrite(fd, buf, n, (off_t)at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            rc = dc_fail(err, errlen, w < 0 ? -errno : -EIO, "image %s: write to %s: %s", img->uuid,
                         part, w < 0 ? strerror(errno) : "nothing written");
            goto Done;
        }
        at += (uint64_t)w & ~7ull; /* the content is made in 8-byte words */
    }
    if (fsync(fd) != 0) {
        rc = dc_fail(err, errlen, -errno, "image %s: fsync %s: %s", img->uuid, part,
                     strerror(errno));
        goto Done;
    }
    int c = close(fd);
    fd = -1;
    if (c != 0) {
        rc = dc_fail(err, errlen, -errno, "image %s: close %s: %s", img->uuid, part,
                     strerror(errno));
        goto Done;
    }
    if (rename(part, img->file) != 0) {
        rc = dc_fail(err, errlen, -errno, "image %s: cannot rename %s to %s: %s", img->uuid, part,
                     img->file, strerror(errno));
        goto Done;
    }
    *made = true;

Done:
    if (fd >= 0)
        close(fd);
    if (rc != 0)
        unlink(part); /* may not exist: nothing to report */
    free(buf);
    free(part);
    return rc;
}
