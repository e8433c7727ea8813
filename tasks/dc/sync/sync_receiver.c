/*
 * sync_receiver.c -- the target agent's listener and the receiving side of a pass
 * (sync_listener.h): authentication, the manifest, windows of blocks made durable one
 * at a time, disks resized, made and removed, vm.json written.
 *
 * Threads: one accepts; one per connection runs a session. A connection thread never
 * closes its socket: the thread that joins it does (the acceptor, reaping, or
 * sync_listener_stop), so stop can shut down any connection's socket without racing
 * the reuse of its descriptor number.
 */
#include "sync_listener.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "sync_addr.h"
#include "sync_auth.h"
#include "sync_block.h"
#include "sync_image.h"
#include "sync_manifest.h"
#include "sync_tree_xfer.h"
#include "sync_wire.h"

/* A sender silent this long is gone (seconds). A pass at the lowest rate still sends a
 * frame far more often. */
#define IDLE_TIMEOUT_S   600
#define WINDOW_MAX_ITEMS 4096
/* How long a pass waits for the lock an earlier connection of the instance holds (ms). */
#define LOCK_WAIT_MS 5000
/* Longest data root (bytes, with its NUL): every path under it then fits PATH_MAX. */
#define ROOT_MAX (PATH_MAX - 512)
/* Largest disk a pass may make (bytes): 64 TiB. */
#define DISK_SIZE_MAX (64ull << 40)

typedef struct conn_slot {
    pthread_t thread;
    int fd;
    bool used, done;
    char peer[64];
    struct sync_listener *l;
} conn_slot_t;

struct sync_listener {
    int lfd;
    unsigned port;
    char root[ROOT_MAX];
    int wake[2]; /* a byte written to wake[1] stops the acceptor */
    pthread_t acceptor;
    pthread_mutex_t mu;
    conn_slot_t conns[SYNC_LISTENER_MAX_CONNS];
    sync_log_fn log;
    void *log_data;
    atomic_uint_fast64_t refusals;
};

__attribute__((format(printf, 3, 4))) static void say(const struct sync_listener *l, int level,
                                                      const char *fmt, ...)
{
    if (!l->log)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    l->log(l->log_data, level, msg);
}

/* ---- one session ---- */

typedef struct session {
    struct sync_listener *l;
    int fd;
    const char *peer;
    char vm[SYNC_UUID_LEN + 1], migration[SYNC_UUID_LEN + 1];
    char dir[ROOT_MAX + 64];    /* <root>/<vm> */
    char disks[ROOT_MAX + 128]; /* <dir>/disks */
    char mdir[ROOT_MAX + 128];  /* <dir>/.migration */
    int lock_fd;
    sync_manifest_t *m;
    uint32_t bs;
    int disk_fd[SYNC_DISKS_MAX];
    int cur; /* the disk of the last DISK frame, -1 before */
    sync_buf_t in, out;
    char *vmjson;
    size_t vmjson_len;
    bool image; /* an image pass (sync_image.h): no manifest, no frames after it */
    char err[512];
} session_t;

static void disk_path(const session_t *s, unsigned n, char *out)
{
    snprintf(out, PATH_MAX, "%s/disk%u.img", s->disks, n);
}

static int fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

static int fail(session_t *s, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(session_t *s, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    return rc;
}

static int send_error(session_t *s, const char *msg)
{
    return sync_frame_write(s->fd, SYNC_ERROR, msg, strlen(msg), NULL);
}

/* Reads the sender's proof and checks it against the instance's session. 0 when it
 * holds; else logs the refusal and tells the sender. */
static int authenticate(session_t *s)
{
    uint8_t hello[SYNC_NONCE_LEN + 4];
    if (sync_auth_nonce(hello) < 0)
        return fail(s, -EIO, "no random bytes for a nonce");
    sync_le32(hello + SYNC_NONCE_LEN, SYNC_PROTOCOL_VERSION);
    int rc = sync_frame_write(s->fd, SYNC_HELLO, hello, sizeof hello, NULL);
    uint32_t type;
    if (rc < 0 || (rc = sync_frame_read(s->fd, &type, &s->in, 1024, NULL)) < 0)
        return fail(s, rc, "before authentication: %s", strerror(-rc));
    sync_cur_t c = {.p = s->in.p, .left = s->in.len};
    char mig[128], vm[128];
    uint8_t mac[SYNC_HASH_LEN];
    sync_cur_str(&c, mig, sizeof mig);
    sync_cur_str(&c, vm, sizeof vm);
    sync_cur_bytes(&c, mac, sizeof mac);
    char why[400];
    char secret[SYNC_SECRET_MAX], want_mig[SYNC_UUID_LEN + 1];
    bool ok = false;
    if (type != SYNC_AUTH || c.bad || c.left) {
        snprintf(why, sizeof why, "not an authentication frame (type %u)", type);
    } else if (!sync_uuid_ok(vm) || !sync_uuid_ok(mig)) {
        snprintf(why, sizeof why, "malformed vm or migration uuid");
    } else if (sync_session_load(s->l->root, vm, want_mig, secret, why, sizeof why) < 0) {
        /* why says it */
    } else if (strcasecmp(want_mig, mig)) {
        snprintf(why, sizeof why, "the target's session is for migration %s", want_mig);
    } else if (!sync_auth_check(secret, hello, mig, mac)) {
        snprintf(why, sizeof why, "wrong proof of the migration's secret");
    } else {
        ok = true;
    }
    explicit_bzero(secret, sizeof secret);
    if (!ok) {
        atomic_fetch_add(&s->l->refusals, 1);
        say(s->l, SYNC_LOG_WARN,
            "migration transfer refused: peer %s, migration %.40s, vm %.40s: %s", s->peer,
            sync_uuid_ok(mig) ? mig : "(malformed)", sync_uuid_ok(vm) ? vm : "(malformed)", why);
        char msg[512];
        snprintf(msg, sizeof msg, "TransferRefused: %s", why);
        /* The sender learns why; its own failure to read it changes nothing here. */
        if (send_error(s, msg) < 0)
            return -EACCES;
        return -EACCES;
    }
    snprintf(s->vm, sizeof s->vm, "%.36s", vm);
    snprintf(s->migration, sizeof s->migration, "%.36s", mig);
    return sync_frame_write(s->fd, SYNC_AUTH_OK, NULL, 0, NULL);
}

/* The instance's directory, its disks/ and .migration/, and its lock. */
static int open_instance(session_t *s)
{
    struct stat st;
    snprintf(s->dir, sizeof s->dir, "%s/%s", s->l->root, s->vm);
    snprintf(s->disks, sizeof s->disks, "%s/disks", s->dir);
    snprintf(s->mdir, sizeof s->mdir, "%s/.migration", s->dir);
    if (lstat(s->dir, &st) < 0 || !S_ISDIR(st.st_mode))
        return fail(s, -ENOENT, "no instance directory %s", s->dir);
    if (mkdir(s->disks, 0755) < 0 && errno != EEXIST)
        return fail(s, -errno, "%s: %s", s->disks, strerror(errno));
    if (lstat(s->disks, &st) < 0 || !S_ISDIR(st.st_mode))
        return fail(s, -ENOTDIR, "%s is not a directory", s->disks);
    char lock[PATH_MAX + 8];
    snprintf(lock, sizeof lock, "%s/lock", s->mdir);
    s->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (s->lock_fd < 0)
        return fail(s, -errno, "%s: %s", lock, strerror(errno));
    /* A sender that reconnects at once after a kill finds the connection of its dead
     * pass still holding the lock until that thread reads the end of its stream: wait
     * for it a little before refusing. */
    for (int tries = 0; flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0; tries++) {
        if (errno != EWOULDBLOCK || tries >= LOCK_WAIT_MS / 50)
            return fail(s, -EBUSY, "another pass of vm %s is running", s->vm);
        struct timespec ts = {.tv_nsec = 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* The file of disk n, opened once per session (made when `create`). -errno. */
static int disk_fd(session_t *s, unsigned n, bool create)
{
    if (s->disk_fd[n] >= 0)
        return s->disk_fd[n];
    char path[PATH_MAX];
    disk_path(s, n, path);
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0600);
    if (fd < 0)
        return -errno;
    s->disk_fd[n] = fd;
    return fd;
}

/* Marks unknown every entry of d at or past block `from` that the new size keeps, so
 * that what a resize changes is never claimed (they are sent again or punched). */
static void unknown_from(session_t *s, sync_mdisk_t *d, uint64_t from, uint64_t new_size)
{
    size_t k;
    sync_entry_t *e = sync_mdisk_sorted(d, &k);
    uint64_t keep = sync_block_count(new_size, s->bs);
    for (size_t i = 0; i < k; i++)
        if (e[i].idx >= from && e[i].idx < keep)
            sync_manifest_set_block(s->m, d->n, e[i].idx, sync_hash_unknown);
    free(e);
}

/* Makes the manifest agree with the files after a kill: a disk whose file is gone is
 * reset; a file whose size differs from its entry (killed between the truncate and
 * the record) has its entries past the shorter size dropped or marked unknown. */
static int reconcile(session_t *s)
{
    for (unsigned n = 0; n < SYNC_DISKS_MAX; n++) {
        sync_mdisk_t *d = sync_manifest_disk(s->m, n);
        if (!d || d->must_zero)
            continue;
        char path[PATH_MAX];
        struct stat st;
        disk_path(s, n, path);
        if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
            sync_manifest_reset(s->m, n);
            continue;
        }
        uint64_t a = (uint64_t)st.st_size;
        if (a != d->size) {
            uint64_t lo = a < d->size ? a : d->size;
            char gen[SYNC_GENERATION_MAX];
            snprintf(gen, sizeof gen, "%s", d->generation);
            unknown_from(s, d, lo / s->bs, a);
            sync_manifest_set_disk(s->m, n, a, gen);
        }
    }
    return sync_manifest_commit(s->m, s->err, sizeof s->err);
}

static int send_manifest(session_t *s)
{
    uint32_t type;
    int rc = sync_frame_read(s->fd, &type, &s->in, 1024, NULL);
    if (rc < 0)
        return fail(s, rc, "waiting for the manifest request: %s", strerror(-rc));
    if (type == SYNC_IMAGE) {
        s->image = true;
        return sync_image_receive(s->fd, s->l->root, &s->in, s->err, sizeof s->err);
    }
    sync_cur_t c = {.p = s->in.p, .left = s->in.len};
    uint32_t bs = sync_cur_u32(&c);
    if (type != SYNC_MANIFEST_REQ || c.bad)
        return fail(s, -EPROTO, "expected a manifest request, got frame type %u", type);
    if (bs < SYNC_BLOCK_MIN || bs > SYNC_BLOCK_MAX || bs % SYNC_BLOCK_MIN)
        return fail(s, -EINVAL, "block size %u is not a multiple of %u up to %u", bs,
                    SYNC_BLOCK_MIN, SYNC_BLOCK_MAX);
    s->bs = bs;
    if ((rc = sync_manifest_open(s->mdir, bs, &s->m, s->err, sizeof s->err)) < 0)
        return rc;
    if ((rc = reconcile(s)) < 0)
        return rc;
    for (unsigned n = 0; n < SYNC_DISKS_MAX; n++) {
        sync_mdisk_t *d = sync_manifest_disk(s->m, n);
        if (!d)
            continue;
        size_t k = 0;
        sync_entry_t *e = d->must_zero ? NULL : sync_mdisk_sorted(d, &k);
        char name[32];
        snprintf(name, sizeof name, "disk%u.img", n);
        sync_buf_reset(&s->out);
        sync_buf_str(&s->out, name);
        sync_buf_u64(&s->out, d->size);
        sync_buf_str(&s->out, d->must_zero ? "" : d->generation);
        sync_buf_u64(&s->out, k);
        rc = sync_frame_write(s->fd, SYNC_MANIFEST_DISK, s->out.p, s->out.len, NULL);
        size_t per = SYNC_CONTROL_MAX / (8 + SYNC_HASH_LEN);
        for (size_t i = 0; rc == 0 && i < k; i += per) {
            sync_buf_reset(&s->out);
            for (size_t j = i; j < k && j < i + per; j++) {
                sync_buf_u64(&s->out, e[j].idx);
                sync_buf_put(&s->out, e[j].hash, SYNC_HASH_LEN);
            }
            rc = sync_frame_write(s->fd, SYNC_MANIFEST_ENTRIES, s->out.p, s->out.len, NULL);
        }
        free(e);
        if (rc < 0)
            return fail(s, rc, "sending the manifest: %s", strerror(-rc));
    }
    return sync_frame_write(s->fd, SYNC_MANIFEST_END, NULL, 0, NULL);
}

/* DISK: the disk the next windows are of, made, emptied or resized first. */
static int on_disk(session_t *s)
{
    sync_cur_t c = {.p = s->in.p, .left = s->in.len};
    char name[64], gen[SYNC_GENERATION_MAX];
    sync_cur_str(&c, name, sizeof name);
    uint64_t size = sync_cur_u64(&c);
    sync_cur_str(&c, gen, sizeof gen);
    uint8_t reset = sync_cur_u8(&c);
    int n = sync_disk_number(name);
    if (c.bad || n < 0)
        return fail(s, -EPROTO, "bad disk frame (disk name \"%.64s\")", name);
    if (size > DISK_SIZE_MAX)
        return fail(s, -EFBIG, "%s: size %llu is over the bound", name, (unsigned long long)size);
    sync_mdisk_t *d = sync_manifest_disk(s->m, (unsigned)n);
    int rc, fd;
    char path[PATH_MAX];
    disk_path(s, (unsigned)n, path);
    if (reset || !d || d->must_zero || strcmp(d->generation, gen)) {
        /* Nothing the file holds is trusted: recorded first (must_zero), then emptied. */
        sync_manifest_reset(s->m, (unsigned)n);
        if ((rc = sync_manifest_commit(s->m, s->err, sizeof s->err)) < 0)
            return rc;
        if ((fd = disk_fd(s, (unsigned)n, true)) < 0)
            return fail(s, fd, "%s: %s", path, strerror(-fd));
        if (ftruncate(fd, 0) < 0 || ftruncate(fd, (off_t)size) < 0 || fsync(fd) < 0 ||
            (rc = fsync_path(s->disks)) < 0)
            return fail(s, -errno, "%s: %s", path, strerror(errno));
    } else {
        if ((fd = disk_fd(s, (unsigned)n, false)) < 0)
            return fail(s, fd, "%s: %s", path, strerror(-fd));
        if (d->size != size) {
            uint64_t lo = d->size < size ? d->size : size;
            unknown_from(s, d, lo / s->bs, size);
            if ((rc = sync_manifest_commit(s->m, s->err, sizeof s->err)) < 0)
                return rc;
            if (ftruncate(fd, (off_t)size) < 0 || fsync(fd) < 0)
                return fail(s, -errno, "%s: %s", path, strerror(errno));
        }
    }
    sync_manifest_set_disk(s->m, (unsigned)n, size, gen);
    if ((rc = sync_manifest_commit(s->m, s->err, sizeof s->err)) < 0)
        return rc;
    s->cur = n;
    return 0;
}

/* Writes one block's data at its offset, page by page: runs of zero pages are not
 * written (they stay holes, or are punched when the block held data before), so the
 * target allocates no more than the source for blocks that are only partly data. */
static int write_block(session_t *s, int fd, uint64_t idx, const uint8_t *data, uint32_t len,
                       bool had_data)
{
    const uint32_t page = 4096;
    uint64_t base = idx * s->bs;
    for (uint32_t at = 0; at < len;) {
        uint32_t end = at;
        bool zero = sync_block_is_zero(data + at, len - at < page ? len - at : page);
        while (end < len) {
            uint32_t k = len - end < page ? len - end : page;
            if (sync_block_is_zero(data + end, k) != zero)
                break;
            end += k;
        }
        if (zero) {
            if (had_data && fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                      (off_t)(base + at), end - at) < 0)
                return fail(s, -errno, "disk%d.img: punching in block %llu: %s", s->cur,
                            (unsigned long long)idx, strerror(errno));
        } else {
            for (uint32_t got = at; got < end;) {
                ssize_t w = pwrite(fd, data + got, end - got, (off_t)(base + got));
                if (w < 0 && errno == EINTR)
                    continue;
                if (w < 0)
                    return fail(s, -errno, "disk%d.img: writing block %llu: %s", s->cur,
                                (unsigned long long)idx, strerror(errno));
                got += (uint32_t)w;
            }
            /* Writeback starts now rather than at the window's fdatasync, so the disk
             * works while the next blocks arrive (bench_sync's full pass). Only a hint:
             * the fdatasync decides durability. */
            if (sync_file_range(fd, (off_t)(base + at), end - at, SYNC_FILE_RANGE_WRITE) < 0 &&
                errno != ENOSYS && errno != EINVAL)
                return fail(s, -errno, "disk%d.img: starting writeback of block %llu: %s", s->cur,
                            (unsigned long long)idx, strerror(errno));
        }
        at = end;
    }
    return 0;
}

/* WINDOW and its BLOCK frames: items marked unknown (durable), punches made, blocks
 * written, the file synced, then the entries set (durable). */
static int on_window(session_t *s)
{
    if (s->cur < 0)
        return fail(s, -EPROTO, "a window before any disk");
    unsigned n = (unsigned)s->cur;
    sync_mdisk_t *d = sync_manifest_disk(s->m, n);
    int fd = s->disk_fd[n];
    sync_cur_t c = {.p = s->in.p, .left = s->in.len};
    uint32_t count = sync_cur_u32(&c);
    if (c.bad || count > WINDOW_MAX_ITEMS || c.left != (size_t)count * 9)
        return fail(s, -EPROTO, "bad window frame (%u items)", count);
    uint64_t idxs[WINDOW_MAX_ITEMS];
    uint8_t kinds[WINDOW_MAX_ITEMS];
    bool had[WINDOW_MAX_ITEMS];
    uint64_t nblocks = sync_block_count(d->size, s->bs);
    for (uint32_t i = 0; i < count; i++) {
        idxs[i] = sync_cur_u64(&c);
        kinds[i] = sync_cur_u8(&c);
        if (idxs[i] >= nblocks || (kinds[i] != SYNC_ITEM_DATA && kinds[i] != SYNC_ITEM_PUNCH))
            return fail(s, -EPROTO, "window item %u: block %llu of %llu, kind %u", i,
                        (unsigned long long)idxs[i], (unsigned long long)nblocks, kinds[i]);
        had[i] = sync_mdisk_get(d, idxs[i]) != NULL;
        sync_manifest_set_block(s->m, n, idxs[i], sync_hash_unknown);
    }
    int rc = sync_manifest_commit(s->m, s->err, sizeof s->err);
    if (rc < 0)
        return rc;
    uint8_t hashes[WINDOW_MAX_ITEMS][SYNC_HASH_LEN];
    for (uint32_t i = 0; i < count; i++) {
        uint32_t len = sync_block_len(d->size, s->bs, idxs[i]);
        if (kinds[i] == SYNC_ITEM_PUNCH) {
            if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(idxs[i] * s->bs),
                          len) < 0)
                return fail(s, -errno, "disk%u.img: punching block %llu: %s", n,
                            (unsigned long long)idxs[i], strerror(errno));
            continue;
        }
        uint32_t type;
        rc = sync_frame_read(s->fd, &type, &s->in, (size_t)s->bs + 8 + SYNC_HASH_LEN, NULL);
        if (rc < 0)
            return fail(s, rc, "disk%u.img: waiting for block %llu: %s", n,
                        (unsigned long long)idxs[i], strerror(-rc));
        if (type != SYNC_BLOCK ||
            (s->in.len != (size_t)len + 8 + SYNC_HASH_LEN && s->in.len != 8) ||
            sync_get_le64(s->in.p) != idxs[i])
            return fail(s, -EPROTO, "disk%u.img: expected block %llu of %u bytes", n,
                        (unsigned long long)idxs[i], len);
        const uint8_t *data = s->in.p + 8 + SYNC_HASH_LEN;
        /* No bytes: the block is all zero on the source by now. Zeros written since the
         * walk count the same. Either way the target keeps a hole. */
        if (s->in.len == 8 || sync_block_is_zero(data, len)) {
            kinds[i] = SYNC_ITEM_PUNCH;
            if (had[i] && fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                    (off_t)(idxs[i] * s->bs), len) < 0)
                return fail(s, -errno, "disk%u.img: punching block %llu: %s", n,
                            (unsigned long long)idxs[i], strerror(errno));
            continue;
        }
        /* The sender's hash of the bytes it read: the connection is authenticated, and
         * the verify before a switch compares digests this side computes itself. */
        memcpy(hashes[i], s->in.p + 8, SYNC_HASH_LEN);
        if ((rc = write_block(s, fd, idxs[i], data, len, had[i])) < 0)
            return rc;
    }
    if (count && fdatasync(fd) < 0)
        return fail(s, -errno, "disk%u.img: %s", n, strerror(errno));
    /* The entries go out with the next commit: the next window's (one fsync for this
     * window's entries and that window's unknown marks), the next disk's, the pass
     * end's, or the session's end, whichever comes first. Until then they are only
     * missing, which loses nothing but this window if the target dies meanwhile. */
    for (uint32_t i = 0; i < count; i++) {
        if (kinds[i] == SYNC_ITEM_DATA)
            sync_manifest_set_block(s->m, n, idxs[i], hashes[i]);
        else
            sync_manifest_drop_block(s->m, n, idxs[i]);
    }
    return 0;
}

static int on_remove(session_t *s)
{
    sync_cur_t c = {.p = s->in.p, .left = s->in.len};
    char name[64];
    sync_cur_str(&c, name, sizeof name);
    int n = sync_disk_number(name);
    if (c.bad || n < 0)
        return fail(s, -EPROTO, "bad remove frame (disk name \"%.64s\")", name);
    char path[PATH_MAX];
    disk_path(s, (unsigned)n, path);
    if (s->disk_fd[n] >= 0) {
        close(s->disk_fd[n]);
        s->disk_fd[n] = -1;
    }
    if (unlink(path) < 0 && errno != ENOENT)
        return fail(s, -errno, "%s: %s", path, strerror(errno));
    int rc = fsync_path(s->disks);
    if (rc < 0)
        return fail(s, rc, "%s: %s", s->disks, strerror(-rc));
    if (s->cur == n)
        s->cur = -1;
    sync_manifest_remove(s->m, (unsigned)n);
    return sync_manifest_commit(s->m, s->err, sizeof s->err);
}

/* The target's own flags of vm.json, kept over what the source sends. */
static const char *const target_keys[] = {"do_not_inventory", "autoboot", "nics",
                                          "migration_target", NULL};

/* Writes the source's vm.json as the target's: the target's own flags kept, disk paths
 * under the target's instance directory. Temp file, fsync, rename, fsync. */
static int write_vmjson(session_t *s)
{
    json_error_t jerr;
    json_t *doc = json_loadb(s->vmjson, s->vmjson_len, 0, &jerr);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return fail(s, -EINVAL, "vm.json sent: not a JSON object (%s)", jerr.text);
    }
    char path[PATH_MAX + 16], tmp[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/vm.json", s->dir);
    snprintf(tmp, sizeof tmp, "%s/vm.json.sync", s->dir);
    json_t *mine = json_load_file(path, 0, &jerr);
    for (int i = 0; target_keys[i]; i++) {
        json_t *v = mine ? json_object_get(mine, target_keys[i]) : NULL;
        if (v)
            json_object_set(doc, target_keys[i], v);
        else
            json_object_del(doc, target_keys[i]);
    }
    json_decref(mine);
    size_t i;
    json_t *disk;
    json_array_foreach(json_object_get(doc, "disks"), i, disk)
    {
        const char *p = json_string_value(json_object_get(disk, "path"));
        const char *tail = p ? strrchr(p, '/') : NULL;
        if (tail && sync_disk_number(tail + 1) >= 0) {
            char np[PATH_MAX + 64];
            snprintf(np, sizeof np, "%s%s", s->disks, tail);
            json_object_set_new(disk, "path", json_string(np));
        }
    }
    int rc = json_dump_file(doc, tmp, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(doc);
    if (rc < 0)
        return fail(s, -EIO, "%s: cannot write", tmp);
    if ((rc = fsync_path(tmp)) < 0 || rename(tmp, path) < 0 || (rc = fsync_path(s->dir)) < 0)
        return fail(s, rc ? rc : -errno, "%s: %s", path, strerror(rc ? -rc : errno));
    return 0;
}

/* Disk files no manifest entry describes (left by an earlier instance or a reset never
 * finished) are removed at the end of a whole pass. */
static int remove_strays(session_t *s)
{
    DIR *dh = opendir(s->disks);
    if (!dh)
        return fail(s, -errno, "%s: %s", s->disks, strerror(errno));
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(dh))) {
        int n = sync_disk_number(de->d_name);
        if (n < 0 || sync_manifest_disk(s->m, (unsigned)n))
            continue;
        char path[PATH_MAX];
        disk_path(s, (unsigned)n, path);
        if (unlink(path) < 0 && errno != ENOENT) {
            rc = fail(s, -errno, "%s: %s", path, strerror(errno));
            break;
        }
    }
    closedir(dh);
    return rc ? rc : fsync_path(s->disks);
}

static int on_pass_end(session_t *s, bool *done)
{
    sync_cur_t c = {.p = s->in.p, .left = s->in.len};
    bool stopped = sync_cur_u8(&c) != 0;
    int rc;
    if (!stopped) {
        if (s->vmjson && (rc = write_vmjson(s)) < 0)
            return rc;
        if ((rc = remove_strays(s)) < 0)
            return rc;
    }
    if ((rc = sync_manifest_compact(s->m, s->err, sizeof s->err)) < 0)
        return rc;
    *done = true;
    return sync_frame_write(s->fd, SYNC_PASS_DONE, NULL, 0, NULL);
}

static int run_frames(session_t *s)
{
    for (;;) {
        uint32_t type;
        int rc = sync_frame_read(s->fd, &type, &s->in, SYNC_CONTROL_MAX, NULL);
        if (rc < 0)
            return fail(s, rc, "reading the next frame: %s", strerror(-rc));
        bool done = false;
        switch (type) {
        case SYNC_DISK:
            rc = on_disk(s);
            break;
        case SYNC_WINDOW:
            rc = on_window(s);
            break;
        case SYNC_REMOVE:
            rc = on_remove(s);
            break;
        case SYNC_TREE_REQ:
            rc = sync_tree_receive(s->fd, s->dir, s->mdir, &s->in, &s->out, s->err, sizeof s->err);
            break;
        case SYNC_VMJSON:
            free(s->vmjson);
            s->vmjson = malloc(s->in.len ? s->in.len : 1);
            if (!s->vmjson)
                abort(); /* out of memory */
            memcpy(s->vmjson, s->in.p, s->in.len);
            s->vmjson_len = s->in.len;
            break;
        case SYNC_PASS_END:
            rc = on_pass_end(s, &done);
            break;
        default:
            rc = fail(s, -EPROTO, "unexpected frame type %u", type);
        }
        if (rc < 0 || done)
            return rc;
    }
}

static void run_session(conn_slot_t *slot)
{
    session_t s = {.l = slot->l, .fd = slot->fd, .peer = slot->peer, .lock_fd = -1, .cur = -1};
    for (unsigned i = 0; i < SYNC_DISKS_MAX; i++)
        s.disk_fd[i] = -1;
    struct timeval tv = {.tv_sec = IDLE_TIMEOUT_S};
    int one = 1;
    if (setsockopt(s.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
        setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
        say(s.l, SYNC_LOG_WARN, "migration transfer: peer %s: socket options: %s", s.peer,
            strerror(errno));
    int rc = authenticate(&s);
    if (rc == -EACCES)
        goto out;
    if (rc == 0)
        rc = open_instance(&s);
    if (rc == 0)
        rc = send_manifest(&s);
    if (rc == 0 && !s.image)
        rc = run_frames(&s);
    if (rc < 0 && rc != -ECONNRESET) {
        say(s.l, SYNC_LOG_ERROR, "migration transfer failed: peer %s, migration %s, vm %s: %s",
            s.peer, s.migration[0] ? s.migration : "-", s.vm[0] ? s.vm : "-", s.err);
        char msg[600];
        snprintf(msg, sizeof msg, "target: %s", s.err);
        /* The sender may be gone already: nothing more to tell it then. */
        if (send_error(&s, msg) < 0)
            goto out;
    } else if (rc == 0) {
        say(s.l, SYNC_LOG_INFO, "migration transfer pass done: peer %s, migration %s, vm %s",
            s.peer, s.migration, s.vm);
    }
    /* The last window's entries, when the pass ended without a commit after it (the
     * sender gone, the listener stopping): its data is already synced. */
    if (s.m && sync_manifest_commit(s.m, s.err, sizeof s.err) < 0)
        say(s.l, SYNC_LOG_ERROR, "migration transfer: vm %s: %s", s.vm, s.err);
out:
    for (unsigned i = 0; i < SYNC_DISKS_MAX; i++)
        if (s.disk_fd[i] >= 0)
            close(s.disk_fd[i]);
    sync_manifest_close(s.m);
    if (s.lock_fd >= 0)
        close(s.lock_fd);
    sync_buf_free(&s.in);
    sync_buf_free(&s.out);
    free(s.vmjson);
}

/* ---- threads ---- */

static void *conn_main(void *arg)
{
    conn_slot_t *slot = arg;
    run_session(slot);
    pthread_mutex_lock(&slot->l->mu);
    slot->done = true;
    pthread_mutex_unlock(&slot->l->mu);
    return NULL;
}

/* Joins and frees the slots of finished connections. Called with mu held. */
static void reap(struct sync_listener *l, bool all)
{
    for (int i = 0; i < SYNC_LISTENER_MAX_CONNS; i++) {
        conn_slot_t *c = &l->conns[i];
        if (!c->used || (!c->done && !all))
            continue;
        if (all && !c->done)
            shutdown(c->fd, SHUT_RDWR);
        pthread_mutex_unlock(&l->mu);
        pthread_join(c->thread, NULL);
        pthread_mutex_lock(&l->mu);
        close(c->fd);
        c->used = c->done = false;
    }
}

static void *accept_main(void *arg)
{
    struct sync_listener *l = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = l->lfd, .events = POLLIN},
                              {.fd = l->wake[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            say(l, SYNC_LOG_ERROR, "migration listener: poll: %s", strerror(errno));
            break;
        }
        if (p[1].revents)
            break;
        struct sockaddr_in peer;
        socklen_t plen = sizeof peer;
        int fd = accept4(l->lfd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
        if (fd < 0)
            continue; /* a connection reset before it was accepted, or no descriptor left */
        char name[64], ip[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof ip);
        snprintf(name, sizeof name, "%s:%u", ip, ntohs(peer.sin_port));
        pthread_mutex_lock(&l->mu);
        reap(l, false);
        conn_slot_t *slot = NULL;
        for (int i = 0; i < SYNC_LISTENER_MAX_CONNS && !slot; i++)
            if (!l->conns[i].used)
                slot = &l->conns[i];
        if (slot) {
            *slot = (conn_slot_t){.fd = fd, .used = true, .l = l};
            snprintf(slot->peer, sizeof slot->peer, "%s", name);
            if (pthread_create(&slot->thread, NULL, conn_main, slot) != 0) {
                slot->used = false;
                slot = NULL;
            }
        }
        pthread_mutex_unlock(&l->mu);
        if (!slot) {
            char msg[96];
            snprintf(msg, sizeof msg, "target: busy: %d transfers at once already",
                     SYNC_LISTENER_MAX_CONNS);
            say(l, SYNC_LOG_WARN, "migration transfer: peer %s refused: %s", name, msg);
            /* Best effort: the peer learns why, or only that it was closed. */
            if (sync_frame_write(fd, SYNC_ERROR, msg, strlen(msg), NULL) < 0)
                shutdown(fd, SHUT_RDWR);
            close(fd);
        }
    }
    return NULL;
}

int sync_listener_start_logged(const char *listen_addr, const char *data_root, sync_log_fn log,
                               void *log_data, sync_listener_t **out, char *err, size_t errlen)
{
    struct sockaddr_in sa;
    int rc = sync_addr_parse(listen_addr, &sa, err, errlen);
    if (rc < 0)
        return rc;
    struct sync_listener *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    l->lfd = -1;
    l->wake[0] = l->wake[1] = -1;
    l->log = log;
    l->log_data = log_data;
    if (!data_root || strlen(data_root) >= ROOT_MAX) {
        snprintf(err, errlen, "migration listener: data root longer than %d bytes", ROOT_MAX - 1);
        free(l);
        return -ENAMETOOLONG;
    }
    snprintf(l->root, sizeof l->root, "%s", data_root);
    pthread_mutex_init(&l->mu, NULL);
    int one = 1;
    socklen_t slen = sizeof sa;
    l->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l->lfd < 0 || setsockopt(l->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(l->lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(l->lfd, 64) < 0 ||
        getsockname(l->lfd, (struct sockaddr *)&sa, &slen) < 0 || pipe2(l->wake, O_CLOEXEC) < 0) {
        rc = -errno;
        snprintf(err, errlen, "migration listener on %s: %s", listen_addr, strerror(errno));
        goto fail;
    }
    l->port = ntohs(sa.sin_port);
    if ((rc = pthread_create(&l->acceptor, NULL, accept_main, l)) != 0) {
        snprintf(err, errlen, "migration listener on %s: no thread: %s", listen_addr, strerror(rc));
        rc = -rc;
        goto fail;
    }
    *out = l;
    return 0;
fail:
    if (l->lfd >= 0)
        close(l->lfd);
    if (l->wake[0] >= 0) {
        close(l->wake[0]);
        close(l->wake[1]);
    }
    pthread_mutex_destroy(&l->mu);
    free(l);
    return rc;
}

int sync_listener_start(const char *listen_addr, const char *data_root, sync_listener_t **out,
                        char *err, size_t errlen)
{
    return sync_listener_start_logged(listen_addr, data_root, NULL, NULL, out, err, errlen);
}

unsigned sync_listener_port(const sync_listener_t *l)
{
    return l->port;
}

uint64_t sync_listener_refusals(const sync_listener_t *l)
{
    return atomic_load(&((sync_listener_t *)l)->refusals);
}

void sync_listener_stop(sync_listener_t *l)
{
    if (!l)
        return;
    char b = 1;
    while (write(l->wake[1], &b, 1) < 0 && errno == EINTR)
        ;
    pthread_join(l->acceptor, NULL);
    close(l->lfd);
    pthread_mutex_lock(&l->mu);
    reap(l, true);
    pthread_mutex_unlock(&l->mu);
    close(l->wake[0]);
    close(l->wake[1]);
    pthread_mutex_destroy(&l->mu);
    free(l);
}
