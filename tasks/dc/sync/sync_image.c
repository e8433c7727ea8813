/*
 * sync_image.c -- the target's side of an image pass (sync_image.h).
 */
#include "sync_image.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sync_auth.h"
#include "sync_block.h"
#include "sync_digest.h"

/* Largest image an image pass makes (bytes): 64 TiB, as a disk. */
#define IMAGE_SIZE_MAX (64ull << 40)

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

/* Whether path holds an image of that digest. */
static int has_digest(const char *path, uint32_t bs, const char *want)
{
    char hex[65], why[256];
    uint64_t size;
    struct stat st;
    if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
        return 0;
    if (sync_disk_digest(path, bs, hex, &size, why, sizeof why) < 0)
        return 0;
    return strcmp(hex, want) == 0;
}

/* Receives the data blocks into fd until IMAGE_END. */
static int receive_blocks(int fd, int file, uint64_t size, uint32_t bs, sync_buf_t *in, char *err,
                          size_t errlen)
{
    for (;;) {
        uint32_t type;
        int rc = sync_frame_read(fd, &type, in, (size_t)bs + 64, NULL);
        if (rc < 0) {
            snprintf(err, errlen, "receiving the image: %s", strerror(-rc));
            return rc;
        }
        if (type == SYNC_IMAGE_END)
            return 0;
        if (type != SYNC_IMAGE_DATA || in->len < 8) {
            snprintf(err, errlen, "receiving the image: unexpected frame type %u", type);
            return -EPROTO;
        }
        uint64_t idx = sync_get_le64(in->p);
        uint32_t len = (uint32_t)(in->len - 8);
        if (len == 0 || len != sync_block_len(size, bs, idx)) {
            snprintf(err, errlen, "image block %llu: %u bytes, not the block's length",
                     (unsigned long long)idx, len);
            return -EPROTO;
        }
        const uint8_t *data = in->p + 8;
        for (size_t off = 0; off < len;) {
            ssize_t n = pwrite(file, data + off, len - off, (off_t)(idx * bs + off));
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                int e = errno;
                snprintf(err, errlen, "writing image block %llu: %s", (unsigned long long)idx,
                         strerror(e));
                return -e;
            }
            off += (size_t)n;
        }
    }
}

int sync_image_receive(int fd, const char *root, sync_buf_t *in, char *err, size_t errlen)
{
    sync_cur_t c = {.p = in->p, .left = in->len};
    char uuid[64], digest[80];
    sync_cur_str(&c, uuid, sizeof uuid);
    uint64_t size = sync_cur_u64(&c);
    sync_cur_str(&c, digest, sizeof digest);
    uint32_t bs = sync_cur_u32(&c);
    if (c.bad || c.left) {
        snprintf(err, errlen, "image pass: a malformed IMAGE frame");
        return -EPROTO;
    }
    if (!sync_uuid_ok(uuid) || strlen(digest) != 64 || strspn(digest, "0123456789abcdef") != 64 ||
        size > IMAGE_SIZE_MAX || bs < SYNC_BLOCK_MIN || bs > SYNC_BLOCK_MAX ||
        bs % SYNC_BLOCK_MIN) {
        snprintf(err, errlen,
                 "image pass: image uuid, digest (64 hex digits), size (up to 64 TiB) or "
                 "block size out of range");
        return -EINVAL;
    }
    if (strlen(root) > PATH_MAX - 128) {
        snprintf(err, errlen, "image pass: the data root's path is too long");
        return -ENAMETOOLONG;
    }
    char dir[PATH_MAX - 100], path[PATH_MAX - 50], part[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s/images", PATH_MAX - 128, root);
    snprintf(path, sizeof path, "%s/%.36s.img", dir, uuid);
    snprintf(part, sizeof part, "%s.part", path);
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", dir, strerror(e));
        return -e;
    }
    struct stat st;
    if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s is not the data root's images directory: refused", dir);
        return -EPERM;
    }
    uint8_t have = (uint8_t)has_digest(path, bs, digest);
    int rc = sync_frame_write(fd, SYNC_IMAGE_HAVE, &have, 1, NULL);
    if (rc < 0) {
        snprintf(err, errlen, "answering the image pass: %s", strerror(-rc));
        return rc;
    }
    if (have)
        return sync_frame_write(fd, SYNC_PASS_DONE, NULL, 0, NULL);
    /* A .part left by an earlier pass is started over: it was never checked. */
    if (unlink(part) < 0 && errno != ENOENT) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", part, strerror(e));
        return -e;
    }
    int file = open(part, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (file < 0) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", part, strerror(e));
        return -e;
    }
    if (ftruncate(file, (off_t)size) < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: sizing to %llu bytes: %s", part, (unsigned long long)size,
                 strerror(-rc));
    } else {
        rc = receive_blocks(fd, file, size, bs, in, err, errlen);
    }
    if (rc == 0 && fsync(file) < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", part, strerror(-rc));
    }
    close(file);
    char hex[65];
    uint64_t got = 0;
    if (rc == 0 && (rc = sync_disk_digest(part, bs, hex, &got, err, errlen)) == 0 &&
        (got != size || strcmp(hex, digest) != 0)) {
        snprintf(err, errlen, "image %s received with digest %s, the source's is %s: discarded",
                 uuid, hex, digest);
        rc = -EIO;
    }
    if (rc == 0 && rename(part, path) < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(-rc));
    }
    if (rc == 0)
        rc = fsync_dir(dir);
    if (rc != 0) {
        /* What was not checked never stays: the next pass starts from nothing. */
        if (unlink(part) < 0 && errno != ENOENT)
            snprintf(err + strlen(err), errlen - strlen(err), " (and %s stays)", part);
        return rc;
    }
    return sync_frame_write(fd, SYNC_PASS_DONE, NULL, 0, NULL);
}
