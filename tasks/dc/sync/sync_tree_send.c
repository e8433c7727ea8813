/*
 * sync_tree_send.c -- the source's side of a pass's trees part (sync_tree_xfer.h).
 */
#include "sync_tree_xfer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sync_block.h"
#include "sync_tree.h"

typedef struct tsend {
    int fd;
    const char *dir;
    uint32_t bs;
    sync_rate_t *rate;
    sync_counters_t *c;
    sync_buf_t *in, *out;
    uint8_t *block;
    sync_tree_result_t *r;
    char *err;
    size_t errlen;
} tsend_t;

static int tfail(tsend_t *t, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int tfail(tsend_t *t, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->err, t->errlen, fmt, ap);
    va_end(ap);
    return rc;
}

static int put(tsend_t *t, uint32_t type, const char *what)
{
    int rc = sync_frame_write(t->fd, type, t->out->p, t->out->len, &t->c->wire);
    return rc < 0 ? tfail(t, rc, "%s: %s", what, strerror(-rc)) : 0;
}

/* The target's listing, into theirs. */
static int read_listing(tsend_t *t, sync_tree_t *theirs)
{
    sync_buf_reset(t->out);
    sync_buf_u32(t->out, t->bs);
    int rc = put(t, SYNC_TREE_REQ, "asking for the target's trees");
    if (rc < 0)
        return rc;
    for (;;) {
        uint32_t type;
        rc = sync_frame_read(t->fd, &type, t->in, SYNC_CONTROL_MAX, &t->c->wire);
        if (rc < 0)
            return tfail(t, rc, "reading the target's trees: %s", strerror(-rc));
        if (type == SYNC_TREE_LIST_END)
            break;
        if (type == SYNC_ERROR)
            return tfail(t, -EIO, "%.*s", (int)(t->in->len > 400 ? 400 : t->in->len),
                         (const char *)t->in->p);
        if (type != SYNC_TREE_ENTRIES)
            return tfail(t, -EPROTO, "the target's trees: unexpected frame type %u", type);
        sync_cur_t c = {.p = t->in->p, .left = t->in->len};
        while (c.left > 0 && !c.bad) {
            char path[PATH_MAX], extra[PATH_MAX];
            sync_cur_str(&c, path, sizeof path);
            uint8_t kind = sync_cur_u8(&c);
            uint32_t mode = sync_cur_u32(&c);
            uint64_t size = sync_cur_u64(&c);
            sync_cur_str(&c, extra, sizeof extra);
            if (c.bad || !sync_tree_path_ok(path) || kind < SYNC_KIND_DIR || kind > SYNC_KIND_LINK)
                return tfail(t, -EPROTO, "the target's trees: a bad entry \"%.200s\"", path);
            sync_tree_add(theirs, path, kind, mode, size, kind == SYNC_KIND_FILE ? extra : NULL,
                          kind == SYNC_KIND_LINK ? extra : NULL);
        }
        if (c.bad)
            return tfail(t, -EPROTO, "the target's trees: a torn entry");
    }
    sync_tree_sort(theirs);
    return 0;
}

/* Whether the target's entry (NULL: none) already is what the source's is. */
static bool same(const sync_tree_entry_t *mine, const sync_tree_entry_t *theirs)
{
    if (!theirs || theirs->kind != mine->kind)
        return false;
    switch (mine->kind) {
    case SYNC_KIND_DIR:
        return theirs->mode == mine->mode;
    case SYNC_KIND_LINK:
        return !strcmp(theirs->link, mine->link);
    default:
        return theirs->mode == mine->mode && theirs->size == mine->size &&
               !strcmp(theirs->hash, mine->hash);
    }
}

/* The target's entry at path, or NULL (theirs sorted). */
static const sync_tree_entry_t *find(const sync_tree_t *theirs, const char *path)
{
    size_t lo = 0, hi = theirs->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(theirs->e[mid].path, path);
        if (c == 0)
            return &theirs->e[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* One file sent whole: its current size and data blocks (a file changed since the
 * listing goes as it is now: the next pass compares again). */
static int send_file(tsend_t *t, const sync_tree_entry_t *e)
{
    char path[PATH_MAX + 300];
    sync_tree_file_path(t->dir, e->path, path, sizeof path);
    /* Opened with no symlink followed on the way: a directory a consumer replaced by a
     * link since the listing must not make the pass read (and the target keep) a file
     * outside the trees. */
    int f = sync_tree_open_file(t->dir, e->path);
    struct stat st;
    if (f < 0 || fstat(f, &st) < 0) {
        int e2 = f < 0 ? -f : errno;
        if (f >= 0)
            close(f);
        /* Removed since the listing, or replaced by a link or a file on the way: the
         * next pass lists it as it is now and makes the target's copy so. */
        return e2 == ENOENT || e2 == ELOOP || e2 == ENOTDIR
                   ? 0
                   : tfail(t, -e2, "%s: %s", path, strerror(e2));
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return 0;
    }
    uint64_t size = (uint64_t)st.st_size;
    sync_buf_reset(t->out);
    sync_buf_str(t->out, e->path);
    sync_buf_u32(t->out, (uint32_t)st.st_mode & SYNC_TREE_MODE_BITS);
    sync_buf_u64(t->out, size);
    sync_buf_u64(t->out, (uint64_t)st.st_mtim.tv_sec);
    sync_buf_u32(t->out, (uint32_t)st.st_mtim.tv_nsec);
    int rc = put(t, SYNC_TREE_FILE, path);
    for (uint64_t idx = 0; rc == 0;) {
        rc = sync_block_next_data(f, size, t->bs, &idx);
        if (rc < 0) {
            rc = tfail(t, rc, "%s: looking for data: %s", path, strerror(-rc));
            break;
        }
        if (rc == 0)
            break;
        uint32_t len = sync_block_len(size, t->bs, idx);
        if ((rc = sync_block_read(f, size, t->bs, idx, t->block)) < 0) {
            /* Shrunk while read: what it holds now goes next pass. */
            rc = rc == -EIO ? 0 : tfail(t, rc, "%s: reading: %s", path, strerror(-rc));
            break;
        }
        if (!sync_block_is_zero(t->block, len)) {
            uint8_t head[8];
            sync_le64(head, idx);
            if (t->rate)
                sync_rate_take(t->rate, (uint64_t)len + sizeof head + SYNC_HEADER_LEN);
            struct iovec v[2] = {{head, sizeof head}, {t->block, len}};
            if ((rc = sync_frame_writev(t->fd, SYNC_TREE_DATA, v, 2, &t->c->wire)) < 0) {
                rc = tfail(t, rc, "%s: sending: %s", path, strerror(-rc));
                break;
            }
            atomic_fetch_add(&t->c->sent, len);
            atomic_fetch_add(&t->c->blocks, 1);
        }
        idx++;
    }
    close(f);
    if (rc < 0)
        return rc;
    sync_buf_reset(t->out);
    if ((rc = put(t, SYNC_TREE_FILE_END, path)) < 0)
        return rc;
    t->r->files_sent++;
    return 0;
}

static int send_entry(tsend_t *t, const sync_tree_entry_t *e)
{
    sync_buf_reset(t->out);
    sync_buf_str(t->out, e->path);
    if (e->kind == SYNC_KIND_DIR) {
        sync_buf_u32(t->out, e->mode);
        t->r->dirs_made++;
        return put(t, SYNC_TREE_DIR, e->path);
    }
    if (e->kind == SYNC_KIND_LINK) {
        sync_buf_str(t->out, e->link);
        t->r->links_made++;
        return put(t, SYNC_TREE_LINK, e->path);
    }
    return send_file(t, e);
}

int sync_tree_send(int fd, const char *dir, uint32_t block_size, sync_rate_t *rate,
                   sync_counters_t *c, const atomic_bool *stop, sync_buf_t *in, sync_buf_t *out,
                   uint8_t *block, sync_tree_result_t *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    tsend_t t = {.fd = fd,
                 .dir = dir,
                 .bs = block_size,
                 .rate = rate,
                 .c = c,
                 .in = in,
                 .out = out,
                 .block = block,
                 .r = r,
                 .err = err,
                 .errlen = errlen};
    sync_tree_t mine = {0}, theirs = {0};
    int rc = read_listing(&t, &theirs);
    if (rc == 0) {
        rc = sync_tree_list(dir, block_size, stop, &mine, err, errlen);
        if (rc == -ECANCELED) {
            r->stopped = true;
            rc = 0;
        }
    }
    if (rc == 0 && !r->stopped) {
        r->entries = mine.n;
        sync_tree_digest(&mine, r->digest);
        for (size_t i = 0; i < mine.n; i++)
            if (mine.e[i].kind == SYNC_KIND_FILE &&
                !same(&mine.e[i], find(&theirs, mine.e[i].path)))
                atomic_fetch_add(&c->total, mine.e[i].size);
        /* What the target has that the source has not, or has as another kind: removed
         * deepest first (reverse path order puts "a/b" before "a"). */
        for (size_t i = theirs.n; rc == 0 && i-- > 0;) {
            const sync_tree_entry_t *m = find(&mine, theirs.e[i].path);
            if (m && m->kind == theirs.e[i].kind)
                continue;
            sync_buf_reset(out);
            sync_buf_str(out, theirs.e[i].path);
            rc = put(&t, SYNC_TREE_REMOVE, theirs.e[i].path);
            r->removed++;
        }
        for (size_t i = 0; rc == 0 && i < mine.n; i++) {
            if (stop && atomic_load(stop)) {
                r->stopped = true;
                break;
            }
            const sync_tree_entry_t *have = find(&theirs, mine.e[i].path);
            if (!same(&mine.e[i], have))
                rc = send_entry(&t, &mine.e[i]);
        }
    }
    if (rc == 0) {
        uint8_t flag = r->stopped ? 1 : 0;
        rc = sync_frame_write(fd, SYNC_TREE_DONE, &flag, 1, &c->wire);
        if (rc < 0)
            tfail(&t, rc, "ending the trees: %s", strerror(-rc));
    }
    sync_tree_free(&mine);
    sync_tree_free(&theirs);
    return rc;
}
