/*
 * sync_tree_recv.c -- the target's side of a pass's trees part (sync_tree_xfer.h).
 */
#include "sync_tree_xfer.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sync_block.h"
#include "sync_tree.h"
#include "tree_copy.h"

typedef struct trecv {
    int fd;
    const char *dir, *mdir;
    uint32_t bs;
    sync_buf_t *in, *out;
    char *err;
    size_t errlen;
    int part;           /* the file being received, into .migration/tree.part; -1 between */
    char cur[PATH_MAX]; /* its path (relative) */
    uint32_t cur_mode;
    uint64_t cur_size;
    struct timespec cur_mtime;
} trecv_t;

static int rfail(trecv_t *t, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int rfail(trecv_t *t, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->err, t->errlen, fmt, ap);
    va_end(ap);
    return rc;
}

static int dir_sync(const char *path)
{
    int f = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (f < 0)
        return -errno;
    int rc = fsync(f) < 0 ? -errno : 0;
    close(f);
    return rc;
}

/* rel checked, every directory above it a real directory (never a symlink a peer made
 * to lead outside), and its absolute path into abs and its parent's into parent. */
static int resolve(trecv_t *t, const char *rel, char *abs, char *parent)
{
    if (!sync_tree_path_ok(rel))
        return rfail(t, -EINVAL, "a tree path that is not allowed: \"%.200s\"", rel);
    int k = snprintf(abs, PATH_MAX, "%s/%s", t->dir, rel);
    if (k < 0 || k >= PATH_MAX)
        return rfail(t, -ENAMETOOLONG, "%s/%.200s: a path too long", t->dir, rel);
    snprintf(parent, PATH_MAX, "%s", abs);
    char *slash = strrchr(parent, '/');
    *slash = '\0';
    /* Each component of rel but the last. */
    char walk[PATH_MAX];
    snprintf(walk, sizeof walk, "%s", t->dir);
    const char *p = rel;
    for (;;) {
        const char *next = strchr(p, '/');
        if (!next)
            break;
        size_t have = strlen(walk);
        snprintf(walk + have, sizeof walk - have, "/%.*s", (int)(next - p), p);
        struct stat st;
        if (lstat(walk, &st) < 0 || !S_ISDIR(st.st_mode))
            return rfail(t, -ENOTDIR, "%s: not a directory (for %s)", walk, rel);
        p = next + 1;
    }
    return 0;
}

/* Removes whatever is at abs (a directory with everything in it). */
static int remove_any(trecv_t *t, const char *abs)
{
    struct stat st;
    if (lstat(abs, &st) < 0)
        return errno == ENOENT ? 0 : rfail(t, -errno, "%s: %s", abs, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return dc_tree_remove(abs, t->err, t->errlen);
    if (unlink(abs) < 0 && errno != ENOENT)
        return rfail(t, -errno, "%s: %s", abs, strerror(errno));
    return 0;
}

/* export/ and snapshots/ themselves are directories: a link or file in their place
 * would make the instance's share (or its snapshots) whatever the peer named. */
static int not_top(trecv_t *t, const char *rel)
{
    if (!strchr(rel, '/'))
        return rfail(t, -EINVAL, "\"%s\" can only be a directory", rel);
    return 0;
}

static void put_entry(sync_buf_t *b, const sync_tree_entry_t *e)
{
    sync_buf_str(b, e->path);
    sync_buf_u8(b, e->kind);
    sync_buf_u32(b, e->mode);
    sync_buf_u64(b, e->size);
    sync_buf_str(b, e->kind == SYNC_KIND_LINK ? e->link : e->hash);
}

static int send_listing(trecv_t *t)
{
    sync_tree_t mine = {0};
    int rc = sync_tree_list(t->dir, t->bs, NULL, &mine, t->err, t->errlen);
    for (size_t i = 0; rc == 0 && i < mine.n; i++) {
        put_entry(t->out, &mine.e[i]);
        if (t->out->len > SYNC_CONTROL_MAX - PATH_MAX * 3 || i + 1 == mine.n) {
            rc = sync_frame_write(t->fd, SYNC_TREE_ENTRIES, t->out->p, t->out->len, NULL);
            sync_buf_reset(t->out);
        }
    }
    bool listed = rc == 0 || mine.n > 0;
    sync_tree_free(&mine);
    if (rc == 0)
        rc = sync_frame_write(t->fd, SYNC_TREE_LIST_END, NULL, 0, NULL);
    if (rc < 0 && listed)
        return rfail(t, rc, "sending the trees' listing: %s", strerror(-rc));
    return rc;
}

static int on_remove(trecv_t *t, sync_cur_t *c)
{
    char rel[PATH_MAX], abs[PATH_MAX], parent[PATH_MAX];
    sync_cur_str(c, rel, sizeof rel);
    if (c->bad)
        return rfail(t, -EPROTO, "a torn tree removal");
    int rc = resolve(t, rel, abs, parent);
    if (rc == -ENOTDIR)
        return 0; /* its directory is gone already */
    if (rc < 0 || (rc = remove_any(t, abs)) < 0)
        return rc;
    return dir_sync(parent);
}

static int on_dir(trecv_t *t, sync_cur_t *c)
{
    char rel[PATH_MAX], abs[PATH_MAX], parent[PATH_MAX];
    sync_cur_str(c, rel, sizeof rel);
    uint32_t mode = sync_cur_u32(c) & SYNC_TREE_MODE_BITS;
    if (c->bad)
        return rfail(t, -EPROTO, "a torn tree directory");
    int rc = resolve(t, rel, abs, parent);
    if (rc < 0)
        return rc;
    struct stat st;
    if (lstat(abs, &st) == 0 && !S_ISDIR(st.st_mode) && (rc = remove_any(t, abs)) < 0)
        return rc;
    if (mkdir(abs, 0700) < 0 && errno != EEXIST)
        return rfail(t, -errno, "%s: %s", abs, strerror(errno));
    if (chmod(abs, mode) < 0)
        return rfail(t, -errno, "%s: %s", abs, strerror(errno));
    return dir_sync(parent);
}

static int on_link(trecv_t *t, sync_cur_t *c)
{
    char rel[PATH_MAX], target[PATH_MAX], abs[PATH_MAX], parent[PATH_MAX];
    sync_cur_str(c, rel, sizeof rel);
    sync_cur_str(c, target, sizeof target);
    if (c->bad || !target[0])
        return rfail(t, -EPROTO, "a torn tree link");
    int rc = resolve(t, rel, abs, parent);
    if (rc == 0)
        rc = not_top(t, rel);
    if (rc < 0)
        return rc;
    char tmp[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s/tree.link", t->mdir);
    if (unlink(tmp) < 0 && errno != ENOENT)
        return rfail(t, -errno, "%s: %s", tmp, strerror(errno));
    if (symlink(target, tmp) < 0)
        return rfail(t, -errno, "%s: %s", tmp, strerror(errno));
    struct stat st;
    if (lstat(abs, &st) == 0 && S_ISDIR(st.st_mode) && (rc = remove_any(t, abs)) < 0)
        return rc;
    if (rename(tmp, abs) < 0)
        return rfail(t, -errno, "%s: %s", abs, strerror(errno));
    return dir_sync(parent);
}

static int on_file(trecv_t *t, sync_cur_t *c)
{
    char abs[PATH_MAX], parent[PATH_MAX];
    sync_cur_str(c, t->cur, sizeof t->cur);
    t->cur_mode = sync_cur_u32(c) & SYNC_TREE_MODE_BITS;
    t->cur_size = sync_cur_u64(c);
    t->cur_mtime.tv_sec = (time_t)sync_cur_u64(c);
    t->cur_mtime.tv_nsec = sync_cur_u32(c);
    if (c->bad || t->cur_mtime.tv_nsec >= 1000000000L)
        return rfail(t, -EPROTO, "a torn tree file");
    int rc = resolve(t, t->cur, abs, parent);
    if (rc == 0)
        rc = not_top(t, t->cur);
    if (rc < 0)
        return rc;
    char tmp[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s/tree.part", t->mdir);
    t->part = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (t->part < 0)
        return rfail(t, -errno, "%s: %s", tmp, strerror(errno));
    if (ftruncate(t->part, (off_t)t->cur_size) < 0)
        return rfail(t, -errno, "%s: %s", tmp, strerror(errno));
    return 0;
}

static int on_data(trecv_t *t)
{
    if (t->part < 0 || t->in->len < 8)
        return rfail(t, -EPROTO, "tree data outside a file");
    uint64_t idx = sync_get_le64(t->in->p);
    size_t len = t->in->len - 8;
    if (len != sync_block_len(t->cur_size, t->bs, idx) || len == 0)
        return rfail(t, -EPROTO, "%s: block %llu of %zu bytes does not fit its size", t->cur,
                     (unsigned long long)idx, len);
    const uint8_t *data = t->in->p + 8;
    off_t base = (off_t)(idx * t->bs);
    /* Only the non-zero pages are written: a page of zeros stays a hole. */
    for (size_t at = 0; at < len; at += 4096) {
        size_t k = len - at < 4096 ? len - at : 4096;
        if (sync_block_is_zero(data + at, k))
            continue;
        if (pwrite(t->part, data + at, k, base + (off_t)at) != (ssize_t)k)
            return rfail(t, -EIO, "%s: writing: %s", t->cur, strerror(errno));
    }
    return 0;
}

static int on_file_end(trecv_t *t)
{
    char abs[PATH_MAX], parent[PATH_MAX], tmp[PATH_MAX + 16];
    if (t->part < 0)
        return rfail(t, -EPROTO, "a tree file's end outside a file");
    snprintf(tmp, sizeof tmp, "%s/tree.part", t->mdir);
    struct timespec times[2] = {t->cur_mtime, t->cur_mtime};
    int rc = 0;
    /* Mode and mtime set before the sync, and fsync (not fdatasync) so that they are
     * durable with the data: mtime is not compared, so one lost in a crash after the
     * rename would never be put right by a later pass. */
    if (fchmod(t->part, t->cur_mode) < 0 || futimens(t->part, times) < 0 || fsync(t->part) < 0)
        rc = rfail(t, -errno, "%s: %s", tmp, strerror(errno));
    close(t->part);
    t->part = -1;
    if (rc < 0 || (rc = resolve(t, t->cur, abs, parent)) < 0)
        return rc;
    struct stat st;
    if (lstat(abs, &st) == 0 && S_ISDIR(st.st_mode) && (rc = remove_any(t, abs)) < 0)
        return rc;
    if (rename(tmp, abs) < 0)
        return rfail(t, -errno, "%s: %s", abs, strerror(errno));
    return dir_sync(parent);
}

int sync_tree_receive(int fd, const char *dir, const char *mdir, sync_buf_t *in, sync_buf_t *out,
                      char *err, size_t errlen)
{
    trecv_t t = {.fd = fd,
                 .dir = dir,
                 .mdir = mdir,
                 .in = in,
                 .out = out,
                 .err = err,
                 .errlen = errlen,
                 .part = -1};
    sync_cur_t c = {.p = in->p, .left = in->len};
    t.bs = sync_cur_u32(&c);
    if (c.bad || t.bs < SYNC_BLOCK_MIN || t.bs > SYNC_BLOCK_MAX || t.bs % SYNC_BLOCK_MIN)
        return rfail(&t, -EPROTO, "trees asked with a bad block size");
    if (mkdir(mdir, 0700) < 0 && errno != EEXIST)
        return rfail(&t, -errno, "%s: %s", mdir, strerror(errno));
    sync_buf_reset(out);
    int rc = send_listing(&t);
    if (rc < 0)
        return rc;
    size_t max = t.bs + 8 > SYNC_CONTROL_MAX ? t.bs + 8 : SYNC_CONTROL_MAX;
    for (;;) {
        uint32_t type;
        rc = sync_frame_read(fd, &type, in, max, NULL);
        if (rc < 0) {
            rfail(&t, rc, "reading the trees: %s", strerror(-rc));
            break;
        }
        sync_cur_t fc = {.p = in->p, .left = in->len};
        if (type == SYNC_TREE_DONE)
            break;
        if (type != SYNC_TREE_DATA && t.part >= 0 && type != SYNC_TREE_FILE_END) {
            rc = rfail(&t, -EPROTO, "%s: frame type %u before its end", t.cur, type);
            break;
        }
        switch (type) {
        case SYNC_TREE_REMOVE:
            rc = on_remove(&t, &fc);
            break;
        case SYNC_TREE_DIR:
            rc = on_dir(&t, &fc);
            break;
        case SYNC_TREE_LINK:
            rc = on_link(&t, &fc);
            break;
        case SYNC_TREE_FILE:
            rc = on_file(&t, &fc);
            break;
        case SYNC_TREE_DATA:
            rc = on_data(&t);
            break;
        case SYNC_TREE_FILE_END:
            rc = on_file_end(&t);
            break;
        default:
            rc = rfail(&t, -EPROTO, "trees: unexpected frame type %u", type);
        }
        if (rc < 0)
            break;
    }
    if (t.part >= 0)
        close(t.part);
    return rc;
}
