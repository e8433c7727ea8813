/*
 * sync_send.c -- one pass of the block transfer, from the source (sync_send.h).
 *
 * Order: read the source disks' sizes and generations; connect (retrying); prove the
 * secret; read the target's manifest; walk every disk and plan its items (data blocks
 * to send, blocks to punch); then send disk by disk, window by window, paced by the
 * token bucket; then removals, vm.json and pass-end.
 */
#include "sync_send.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "sync_addr.h"
#include "sync_auth.h"
#include "sync_block.h"
#include "sync_digest.h"
#include "sync_manifest.h"
#include "sync_rate.h"
#include "sync_tree.h"
#include "sync_tree_xfer.h"
#include "sync_wire.h"

#define IO_TIMEOUT_S     600
#define WINDOW_MAX_ITEMS 4096
#define VMJSON_MAX       (1u << 20)

typedef struct item {
    uint64_t idx;
    uint8_t kind;
    size_t rec; /* a data item's entry in its disk's recs (with o->digests), else NO_REC */
} item_t;

#define NO_REC SIZE_MAX

/* A data block's hash for the disk's digest, in block order: known from the walk, or
 * pending until the block is read to be sent (and then zero when it was all zeros). */
typedef struct digest_rec {
    uint64_t idx;
    uint8_t hash[SYNC_HASH_LEN];
    uint8_t state;
} digest_rec_t;

enum { REC_KNOWN, REC_PENDING, REC_ZERO };

/* A disk on either side: the source's file, the target's manifest, the plan. */
typedef struct pdisk {
    bool on_source, on_target;
    int fd;
    uint64_t size;
    char generation[SYNC_GENERATION_MAX];
    uint64_t t_size;
    char t_generation[SYNC_GENERATION_MAX];
    sync_entry_t *entries; /* the target's, sorted */
    uint64_t n_entries;
    bool reset;
    item_t *items;
    size_t n_items, cap_items;
    digest_rec_t *recs; /* with o->digests: every data block not all zero, by index */
    size_t n_recs, cap_recs;
} pdisk_t;

typedef struct pass {
    const sync_send_opts_t *o;
    sync_counters_t *c;
    sync_pass_result_t *r;
    char *err;
    size_t errlen;
    int fd;
    pdisk_t disks[SYNC_DISKS_MAX];
    sync_buf_t in, out;
    uint8_t *block;
    char *vmjson;
    size_t vmjson_len;
} pass_t;

static int fail(pass_t *p, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(pass_t *p, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, p->errlen, fmt, ap);
    va_end(ap);
    return rc;
}

static void add_item(pdisk_t *d, uint64_t idx, uint8_t kind, size_t rec)
{
    if (d->n_items == d->cap_items) {
        d->cap_items = d->cap_items ? d->cap_items * 2 : 256;
        d->items = realloc(d->items, d->cap_items * sizeof *d->items);
        if (!d->items)
            abort(); /* out of memory */
    }
    d->items[d->n_items++] = (item_t){idx, kind, rec};
}

/* A new digest entry of block idx (hash NULL: pending), its position; NO_REC when the
 * pass takes no digests. */
static size_t add_rec(const pass_t *p, pdisk_t *d, uint64_t idx, const uint8_t *hash)
{
    if (!p->o->digests)
        return NO_REC;
    if (d->n_recs == d->cap_recs) {
        d->cap_recs = d->cap_recs ? d->cap_recs * 2 : 256;
        d->recs = realloc(d->recs, d->cap_recs * sizeof *d->recs);
        if (!d->recs)
            abort(); /* out of memory */
    }
    digest_rec_t *r = &d->recs[d->n_recs];
    r->idx = idx;
    r->state = hash ? REC_KNOWN : REC_PENDING;
    if (hash)
        memcpy(r->hash, hash, SYNC_HASH_LEN);
    return d->n_recs++;
}

/* Disk n's digest from its entries, as sync_disk_digest computes it from the file:
 * SHA-256 over (u64 LE index, block SHA-256) of each block not all zero, then u64 LE
 * size. */
static void finish_digest(pass_t *p, unsigned n, const pdisk_t *d)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
        abort(); /* out of memory */
    for (size_t i = 0; i < d->n_recs; i++) {
        if (d->recs[i].state != REC_KNOWN)
            continue;
        uint8_t rec[8 + SYNC_HASH_LEN];
        sync_le64(rec, d->recs[i].idx);
        memcpy(rec + 8, d->recs[i].hash, SYNC_HASH_LEN);
        EVP_DigestUpdate(md, rec, sizeof rec);
    }
    uint8_t tail[8], out[SYNC_HASH_LEN];
    unsigned int len = sizeof out;
    sync_le64(tail, d->size);
    EVP_DigestUpdate(md, tail, sizeof tail);
    EVP_DigestFinal_ex(md, out, &len);
    EVP_MD_CTX_free(md);
    for (int i = 0; i < SYNC_HASH_LEN; i++)
        snprintf(p->r->digest[n] + 2 * i, 3, "%02x", out[i]);
    p->r->digest_size[n] = d->size;
    p->r->digested[n] = true;
}

/* The `id` of disk n in vm.json (by its pci_slot "0:4:n"), or "". */
static const char *disk_id(json_t *vm, unsigned n)
{
    size_t i;
    json_t *disk;
    char slot[16];
    snprintf(slot, sizeof slot, "0:4:%u", n);
    json_array_foreach(json_object_get(vm, "disks"), i, disk)
    {
        const char *s = json_string_value(json_object_get(disk, "pci_slot"));
        const char *id = json_string_value(json_object_get(disk, "id"));
        if (s && id && !strcmp(s, slot))
            return id;
    }
    return "";
}

/* The source: vm.json (kept to send) and every disks/disk<N>.img, opened. */
static int read_source(pass_t *p)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/vm.json", p->o->instance_dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return fail(p, -e, "%s: %s", path, strerror(e));
    }
    if ((uint64_t)st.st_size > VMJSON_MAX) {
        close(fd);
        return fail(p, -EFBIG, "%s: %lld bytes, more than %u", path, (long long)st.st_size,
                    VMJSON_MAX);
    }
    p->vmjson = malloc((size_t)st.st_size + 1);
    if (!p->vmjson)
        abort(); /* out of memory */
    ssize_t got = read(fd, p->vmjson, (size_t)st.st_size);
    close(fd);
    if (got != st.st_size)
        return fail(p, -EIO, "%s: short read", path);
    p->vmjson_len = (size_t)got;
    json_error_t jerr;
    json_t *vm = json_loadb(p->vmjson, p->vmjson_len, 0, &jerr);
    if (!json_is_object(vm)) {
        json_decref(vm);
        return fail(p, -EINVAL, "%s: not a JSON object (%s)", path, jerr.text);
    }
    snprintf(path, sizeof path, "%s/disks", p->o->instance_dir);
    DIR *dh = opendir(path);
    if (!dh) {
        int e = errno;
        json_decref(vm);
        return e == ENOENT ? 0 : fail(p, -e, "%s: %s", path, strerror(e));
    }
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(dh))) {
        int n = sync_disk_number(de->d_name);
        if (n < 0)
            continue;
        pdisk_t *d = &p->disks[n];
        char f[PATH_MAX + 300];
        snprintf(f, sizeof f, "%s/%s", path, de->d_name);
        d->fd = open(f, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (d->fd < 0 || fstat(d->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
            rc = fail(p, d->fd < 0 ? -errno : -EINVAL, "%s: %s", f,
                      d->fd < 0 ? strerror(errno) : "not a regular file");
            break;
        }
        d->on_source = true;
        d->size = (uint64_t)st.st_size;
        snprintf(d->generation, sizeof d->generation, "%llu-%.60s", (unsigned long long)st.st_ino,
                 disk_id(vm, (unsigned)n));
    }
    closedir(dh);
    json_decref(vm);
    return rc;
}

static int connect_once(const struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* Connects, retrying every 100 ms until connect_timeout_ms: a target agent restarting
 * comes back on the same port. */
static int connect_retrying(pass_t *p)
{
    struct sockaddr_in sa;
    int rc = sync_addr_parse(p->o->addr, &sa, p->err, p->errlen);
    if (rc < 0)
        return rc;
    uint64_t deadline = sync_now_ns() + (uint64_t)p->o->connect_timeout_ms * 1000000ull;
    for (;;) {
        int fd = connect_once(&sa);
        if (fd >= 0) {
            struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
            int one = 1;
            if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0 ||
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) {
                int e = errno;
                close(fd);
                return fail(p, -e, "connecting to %s: %s", p->o->addr, strerror(e));
            }
            return fd;
        }
        bool retry = fd == -ECONNREFUSED || fd == -ECONNRESET || fd == -ETIMEDOUT ||
                     fd == -EAGAIN || fd == -EINTR || fd == -ENETUNREACH || fd == -EHOSTUNREACH;
        if (!retry || sync_now_ns() >= deadline)
            return fail(p, fd, "connecting to %s: %s (for %u ms)", p->o->addr, strerror(-fd),
                        p->o->connect_timeout_ms);
        struct timespec ts = {.tv_nsec = 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* A frame the target sent instead of the one expected: its ERROR text, or a protocol
 * error. */
static int unexpected(pass_t *p, uint32_t type, const char *waiting)
{
    if (type == SYNC_ERROR) {
        int n = (int)(p->in.len > 400 ? 400 : p->in.len);
        const char *t = (const char *)p->in.p;
        if (n >= 15 && !strncmp(t, "TransferRefused", 15))
            return fail(p, -EACCES, "%.*s", n, t);
        return fail(p, -EIO, "%.*s", n, t);
    }
    return fail(p, -EPROTO, "%s: unexpected frame type %u from the target", waiting, type);
}

static int read_frame(pass_t *p, uint32_t *type, size_t max, const char *waiting)
{
    int rc = sync_frame_read(p->fd, type, &p->in, max, &p->c->wire);
    if (rc < 0)
        return fail(p, rc, "%s: %s", waiting, strerror(-rc));
    return 0;
}

static int authenticate(pass_t *p)
{
    uint32_t type;
    int rc = read_frame(p, &type, 1024, "waiting for the target's hello");
    if (rc < 0)
        return rc;
    if (type != SYNC_HELLO || p->in.len != SYNC_NONCE_LEN + 4)
        return unexpected(p, type, "waiting for the target's hello");
    if (sync_get_le32(p->in.p + SYNC_NONCE_LEN) != SYNC_PROTOCOL_VERSION)
        return fail(p, -EPROTO, "the target speaks transfer protocol %u, this source %u",
                    sync_get_le32(p->in.p + SYNC_NONCE_LEN), SYNC_PROTOCOL_VERSION);
    uint8_t mac[SYNC_HASH_LEN];
    if (sync_auth_mac(p->o->secret, p->in.p, p->o->migration_uuid, mac) < 0)
        return fail(p, -EIO, "cannot compute the proof of the secret");
    sync_buf_reset(&p->out);
    sync_buf_str(&p->out, p->o->migration_uuid);
    sync_buf_str(&p->out, p->o->vm_uuid);
    sync_buf_put(&p->out, mac, sizeof mac);
    if ((rc = sync_frame_write(p->fd, SYNC_AUTH, p->out.p, p->out.len, &p->c->wire)) < 0)
        return fail(p, rc, "sending the proof: %s", strerror(-rc));
    if ((rc = read_frame(p, &type, 1024, "waiting for the target's answer")) < 0) {
        /* A target that closes on a proof without a word is refusing it too. */
        return rc == -ECONNRESET ? fail(p, -EACCES,
                                        "TransferRefused: the target closed the "
                                        "connection on the proof")
                                 : rc;
    }
    return type == SYNC_AUTH_OK ? 0 : unexpected(p, type, "authenticating");
}

static int read_manifest(pass_t *p)
{
    sync_buf_reset(&p->out);
    sync_buf_u32(&p->out, p->o->block_size);
    int rc = sync_frame_write(p->fd, SYNC_MANIFEST_REQ, p->out.p, p->out.len, &p->c->wire);
    if (rc < 0)
        return fail(p, rc, "asking for the manifest: %s", strerror(-rc));
    pdisk_t *cur = NULL;
    for (;;) {
        uint32_t type;
        if ((rc = read_frame(p, &type, SYNC_CONTROL_MAX, "reading the manifest")) < 0)
            return rc;
        sync_cur_t c = {.p = p->in.p, .left = p->in.len};
        if (type == SYNC_MANIFEST_END)
            break;
        if (type == SYNC_MANIFEST_DISK) {
            char name[64];
            sync_cur_str(&c, name, sizeof name);
            uint64_t size = sync_cur_u64(&c);
            char gen[SYNC_GENERATION_MAX];
            sync_cur_str(&c, gen, sizeof gen);
            uint64_t k = sync_cur_u64(&c);
            int n = sync_disk_number(name);
            if (c.bad || n < 0 || k > sync_block_count(size, p->o->block_size) + 1)
                return fail(p, -EPROTO, "bad manifest disk \"%.64s\"", name);
            cur = &p->disks[n];
            cur->on_target = true;
            cur->t_size = size;
            snprintf(cur->t_generation, sizeof cur->t_generation, "%s", gen);
            free(cur->entries);
            cur->entries = calloc(k ? k : 1, sizeof *cur->entries);
            if (!cur->entries)
                abort(); /* out of memory */
            cur->n_entries = 0;
            continue;
        }
        if (type == SYNC_MANIFEST_ENTRIES && cur) {
            while (c.left >= 8 + SYNC_HASH_LEN) {
                uint64_t idx = sync_cur_u64(&c);
                if (cur->n_entries > 0 && idx <= cur->entries[cur->n_entries - 1].idx)
                    return fail(p, -EPROTO, "manifest entries out of order");
                cur->entries[cur->n_entries].idx = idx;
                sync_cur_bytes(&c, cur->entries[cur->n_entries].hash, SYNC_HASH_LEN);
                cur->n_entries++;
            }
            if (c.left)
                return fail(p, -EPROTO, "manifest entries: a torn entry");
            continue;
        }
        return unexpected(p, type, "reading the manifest");
    }
    return 0;
}

/* Walks one source disk against the target's entries: what to send, what to punch.
 * Returns 0, 1 when *stop became true during the walk (the plan left unfinished), or a
 * negative errno. */
static int plan_disk(pass_t *p, unsigned n, pdisk_t *d, const atomic_bool *stop)
{
    uint32_t bs = p->o->block_size;
    uint64_t nblocks = sync_block_count(d->size, bs);
    d->reset = !d->on_target || strcmp(d->generation, d->t_generation) != 0;
    const sync_entry_t *e = d->reset ? NULL : d->entries;
    uint64_t ne = d->reset ? 0 : d->n_entries, j = 0;
    uint64_t idx = 0;
    for (;;) {
        int rc = sync_block_next_data(d->fd, d->size, bs, &idx);
        if (rc < 0)
            return fail(p, rc, "disk%u.img: looking for data: %s", n, strerror(-rc));
        uint64_t upto = rc ? idx : nblocks;
        /* The target's data blocks in the source's holes: punch. */
        for (; j < ne && e[j].idx < upto; j++)
            add_item(d, e[j].idx, SYNC_ITEM_PUNCH, NO_REC);
        if (!rc)
            break;
        /* A disk the target mostly has is read and hashed whole before anything is
         * sent: a pause or abort must not wait for that (test_sync_resume's
         * test_stopped_during_walk_then_resumed). */
        uint64_t walked = atomic_fetch_add(&p->c->walked, 1);
        if (stop && walked % SYNC_WALK_STOP_BLOCKS == 0 && atomic_load(stop))
            return 1;
        const uint8_t *have = j < ne && e[j].idx == idx ? e[j].hash : NULL;
        if (have)
            j++;
        uint32_t len = sync_block_len(d->size, bs, idx);
        if (!have) {
            /* The target has nothing here: no need to read the block now. It is read
             * once, as it is sent; one found all zero then is sent as such (the
             * target keeps a hole) and taken off the total. */
            add_item(d, idx, SYNC_ITEM_DATA, add_rec(p, d, idx, NULL));
            atomic_fetch_add(&p->c->total, len);
            idx++;
            continue;
        }
        if ((rc = sync_block_read(d->fd, d->size, bs, idx, p->block)) < 0)
            return fail(p, rc, "disk%u.img: reading block %llu: %s", n, (unsigned long long)idx,
                        strerror(-rc));
        if (sync_block_is_zero(p->block, len)) {
            add_item(d, idx, SYNC_ITEM_PUNCH, NO_REC);
        } else {
            uint8_t h[SYNC_HASH_LEN];
            sync_block_sha256(p->block, len, h);
            size_t rec = add_rec(p, d, idx, h);
            if (memcmp(h, have, SYNC_HASH_LEN)) {
                add_item(d, idx, SYNC_ITEM_DATA, rec);
                atomic_fetch_add(&p->c->total, len);
            }
        }
        idx++;
    }
    return 0;
}

static int send_disk_frame(pass_t *p, unsigned n, pdisk_t *d)
{
    char name[32];
    snprintf(name, sizeof name, "disk%u.img", n);
    sync_buf_reset(&p->out);
    sync_buf_str(&p->out, name);
    sync_buf_u64(&p->out, d->size);
    sync_buf_str(&p->out, d->generation);
    sync_buf_u8(&p->out, d->reset ? 1 : 0);
    int rc = sync_frame_write(p->fd, SYNC_DISK, p->out.p, p->out.len, &p->c->wire);
    return rc < 0 ? fail(p, rc, "%s: sending its size: %s", name, strerror(-rc)) : 0;
}

/* One window of disk n: the list, then each data block read, hashed, paced and sent. */
static int send_window(pass_t *p, unsigned n, pdisk_t *d, size_t from, size_t count,
                       sync_rate_t *rate)
{
    uint32_t bs = p->o->block_size;
    sync_buf_reset(&p->out);
    sync_buf_u32(&p->out, (uint32_t)count);
    for (size_t i = from; i < from + count; i++) {
        sync_buf_u64(&p->out, d->items[i].idx);
        sync_buf_u8(&p->out, d->items[i].kind);
    }
    int rc = sync_frame_write(p->fd, SYNC_WINDOW, p->out.p, p->out.len, &p->c->wire);
    if (rc < 0)
        return fail(p, rc, "disk%u.img: sending a window: %s", n, strerror(-rc));
    for (size_t i = from; i < from + count; i++) {
        uint64_t idx = d->items[i].idx;
        if (d->items[i].kind == SYNC_ITEM_PUNCH) {
            atomic_fetch_add(&p->c->holes, 1);
            continue;
        }
        uint32_t len = sync_block_len(d->size, bs, idx);
        if ((rc = sync_block_read(d->fd, d->size, bs, idx, p->block)) < 0)
            return fail(p, rc, "disk%u.img: reading block %llu: %s", n, (unsigned long long)idx,
                        strerror(-rc));
        uint8_t head[8 + SYNC_HASH_LEN];
        sync_le64(head, idx);
        /* A block all zero by now carries no bytes: the target keeps a hole. Else its
         * hash goes with it: hashing here, on the side that reads, leaves the target's
         * one thread only writing (bench_sync's full pass). */
        bool zero = sync_block_is_zero(p->block, len);
        if (!zero)
            sync_block_sha256(p->block, len, head + 8);
        /* The digest takes what was sent: the bytes the target now holds. */
        if (d->items[i].rec != NO_REC) {
            digest_rec_t *r = &d->recs[d->items[i].rec];
            r->state = zero ? REC_ZERO : REC_KNOWN;
            if (!zero)
                memcpy(r->hash, head + 8, SYNC_HASH_LEN);
        }
        size_t hlen = zero ? 8 : sizeof head;
        sync_rate_take(rate, (zero ? 0 : (uint64_t)len) + hlen + SYNC_HEADER_LEN);
        struct iovec v[2] = {{.iov_base = head, .iov_len = hlen},
                             {.iov_base = p->block, .iov_len = zero ? 0 : len}};
        if ((rc = sync_frame_writev(p->fd, SYNC_BLOCK, v, 2, &p->c->wire)) < 0)
            return fail(p, rc, "disk%u.img: sending block %llu: %s", n, (unsigned long long)idx,
                        strerror(-rc));
        if (zero) {
            atomic_fetch_sub(&p->c->total, len);
            continue;
        }
        atomic_fetch_add(&p->c->sent, len);
        atomic_fetch_add(&p->c->blocks, 1);
    }
    return 0;
}

/* After a write failed: the target may have said why before closing. */
static int why_closed(pass_t *p, int rc)
{
    uint32_t type;
    struct timeval tv = {.tv_sec = 2};
    if (setsockopt(p->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0 &&
        sync_frame_read(p->fd, &type, &p->in, SYNC_CONTROL_MAX, &p->c->wire) == 0 &&
        type == SYNC_ERROR)
        return unexpected(p, type, "sending");
    return rc;
}

/* An image pass (sync_wire.h): the image's digest announced, its data blocks sent
 * unless the target has that digest already, then the target's PASS_DONE once its
 * copy is whole and checked. */
static int send_image(pass_t *p, const atomic_bool *stop)
{
    const sync_send_opts_t *o = p->o;
    char digest[65];
    uint64_t size = 0;
    int rc = sync_disk_digest(o->image_path, o->block_size, digest, &size, p->err, p->errlen);
    if (rc < 0)
        return rc;
    int file = open(o->image_path, O_RDONLY | O_CLOEXEC);
    if (file < 0)
        return fail(p, -errno, "%s: %s", o->image_path, strerror(errno));
    p->disks[0].fd = file; /* closed with the pass */
    if ((rc = connect_retrying(p)) < 0)
        return rc;
    p->fd = rc;
    if ((rc = authenticate(p)) < 0)
        return rc;
    sync_buf_reset(&p->out);
    sync_buf_str(&p->out, o->image_uuid);
    sync_buf_u64(&p->out, size);
    sync_buf_str(&p->out, digest);
    sync_buf_u32(&p->out, o->block_size);
    if ((rc = sync_frame_write(p->fd, SYNC_IMAGE, p->out.p, p->out.len, &p->c->wire)) < 0)
        return fail(p, rc, "announcing the image: %s", strerror(-rc));
    uint32_t type;
    if ((rc = read_frame(p, &type, 1024, "waiting for the target's answer on the image")) < 0)
        return rc;
    if (type != SYNC_IMAGE_HAVE || p->in.len != 1)
        return unexpected(p, type, "waiting for the target's answer on the image");
    p->r->image_present = p->in.p[0] != 0;
    if (!p->r->image_present) {
        atomic_store(&p->c->total, size);
        uint8_t head[8];
        for (uint64_t idx = 0;;) {
            if (stop && atomic_load(stop))
                return fail(p, -ECANCELED, "the image pass was stopped");
            rc = sync_block_next_data(file, size, o->block_size, &idx);
            if (rc < 0)
                return fail(p, rc, "%s: finding its data: %s", o->image_path, strerror(-rc));
            if (rc == 0)
                break;
            uint32_t len = sync_block_len(size, o->block_size, idx);
            if ((rc = sync_block_read(file, size, o->block_size, idx, p->block)) < 0)
                return fail(p, rc, "%s: reading block %llu: %s", o->image_path,
                            (unsigned long long)idx, strerror(-rc));
            if (!sync_block_is_zero(p->block, len)) {
                sync_le64(head, idx);
                struct iovec iov[2] = {{head, sizeof head}, {p->block, len}};
                if ((rc = sync_frame_writev(p->fd, SYNC_IMAGE_DATA, iov, 2, &p->c->wire)) < 0)
                    return why_closed(p, fail(p, rc, "sending the image: %s", strerror(-rc)));
                atomic_fetch_add(&p->c->sent, len);
                atomic_fetch_add(&p->c->blocks, 1);
            }
            idx++;
        }
        if ((rc = sync_frame_write(p->fd, SYNC_IMAGE_END, NULL, 0, &p->c->wire)) < 0)
            return why_closed(p, fail(p, rc, "ending the image: %s", strerror(-rc)));
    }
    if ((rc = read_frame(p, &type, SYNC_CONTROL_MAX, "waiting for the target's image check")) < 0)
        return rc;
    return type == SYNC_PASS_DONE ? 0 : unexpected(p, type, "waiting for the target's image check");
}

static int run_pass(pass_t *p, const atomic_bool *stop)
{
    if (p->o->image_uuid)
        return send_image(p, stop);
    const sync_send_opts_t *o = p->o;
    int rc;
    if ((rc = read_source(p)) < 0)
        return rc;
    if ((rc = connect_retrying(p)) < 0)
        return rc;
    p->fd = rc;
    if ((rc = authenticate(p)) < 0 || (rc = read_manifest(p)) < 0)
        return rc;
    bool stopped = false;
    for (unsigned n = 0; n < SYNC_DISKS_MAX && !stopped; n++) {
        pdisk_t *d = &p->disks[n];
        if (!d->on_source)
            continue;
        if ((rc = plan_disk(p, n, d, stop)) < 0)
            return rc;
        stopped = rc == 1;
    }
    sync_rate_t rate;
    sync_rate_init(&rate, o->rate_bytes_s, (uint64_t)o->block_size * o->window_blocks);
    for (unsigned n = 0; n < SYNC_DISKS_MAX && !stopped; n++) {
        pdisk_t *d = &p->disks[n];
        if (!d->on_source)
            continue;
        if (stop && atomic_load(stop)) {
            stopped = true;
            break;
        }
        if ((rc = send_disk_frame(p, n, d)) < 0)
            return why_closed(p, rc);
        if (!d->on_target)
            p->r->disks_created++;
        else if (d->reset)
            p->r->disks_reset++;
        else if (d->t_size != d->size)
            p->r->truncates++;
        for (size_t i = 0; i < d->n_items; i += o->window_blocks) {
            if (i > 0 && stop && atomic_load(stop)) {
                stopped = true;
                break;
            }
            size_t k = d->n_items - i < o->window_blocks ? d->n_items - i : o->window_blocks;
            if ((rc = send_window(p, n, d, i, k, &rate)) < 0)
                return why_closed(p, rc);
        }
        if (!stopped && o->digests)
            finish_digest(p, n, d);
    }
    if (!stopped && sync_tree_present(o->instance_dir)) {
        sync_tree_result_t tr;
        rc = sync_tree_send(p->fd, o->instance_dir, o->block_size, &rate, p->c, stop, &p->in,
                            &p->out, p->block, &tr, p->err, p->errlen);
        if (rc < 0)
            return why_closed(p, rc);
        stopped = tr.stopped;
        p->r->tree = true;
        p->r->tree_entries = tr.entries;
        p->r->tree_files_sent = tr.files_sent;
        p->r->tree_removed = tr.removed;
        memcpy(p->r->tree_digest, tr.digest, sizeof tr.digest);
    }
    if (!stopped) {
        for (unsigned n = 0; n < SYNC_DISKS_MAX; n++) {
            pdisk_t *d = &p->disks[n];
            if (d->on_source || !d->on_target)
                continue;
            char name[32];
            snprintf(name, sizeof name, "disk%u.img", n);
            sync_buf_reset(&p->out);
            sync_buf_str(&p->out, name);
            if ((rc = sync_frame_write(p->fd, SYNC_REMOVE, p->out.p, p->out.len, &p->c->wire)) < 0)
                return why_closed(p, fail(p, rc, "removing %s: %s", name, strerror(-rc)));
            p->r->disks_removed++;
        }
        rc = sync_frame_write(p->fd, SYNC_VMJSON, p->vmjson, p->vmjson_len, &p->c->wire);
        if (rc < 0)
            return why_closed(p, fail(p, rc, "sending vm.json: %s", strerror(-rc)));
    }
    uint8_t flag = stopped ? 1 : 0;
    if ((rc = sync_frame_write(p->fd, SYNC_PASS_END, &flag, 1, &p->c->wire)) < 0)
        return why_closed(p, fail(p, rc, "ending the pass: %s", strerror(-rc)));
    uint32_t type;
    if ((rc = read_frame(p, &type, SYNC_CONTROL_MAX, "waiting for the target's pass end")) < 0)
        return rc;
    if (type != SYNC_PASS_DONE)
        return unexpected(p, type, "waiting for the target's pass end");
    p->r->stopped = stopped;
    return 0;
}

int sync_send_pass(const sync_send_opts_t *o, sync_counters_t *c, const atomic_bool *stop,
                   sync_pass_result_t *r, char *err, size_t errlen)
{
    sync_counters_t own;
    if (!c)
        c = &own;
    atomic_store(&c->total, 0);
    atomic_store(&c->sent, 0);
    atomic_store(&c->wire, 0);
    atomic_store(&c->blocks, 0);
    atomic_store(&c->holes, 0);
    atomic_store(&c->walked, 0);
    memset(r, 0, sizeof *r);
    if (!o || !(o->image_uuid ? o->image_path : o->instance_dir) || !o->vm_uuid ||
        !o->migration_uuid || !o->secret || !o->addr) {
        snprintf(err, errlen,
                 "sync pass: instance_dir, vm_uuid, migration_uuid, secret and "
                 "addr are required");
        return -EINVAL;
    }
    if (!sync_uuid_ok(o->vm_uuid) || !sync_uuid_ok(o->migration_uuid) ||
        (o->image_uuid && !sync_uuid_ok(o->image_uuid))) {
        snprintf(err, errlen,
                 "sync pass: vm_uuid \"%.40s\", migration_uuid \"%.40s\" or image_uuid "
                 "\"%.40s\" is not a uuid",
                 o->vm_uuid, o->migration_uuid, o->image_uuid ? o->image_uuid : "");
        return -EINVAL;
    }
    if (o->block_size < SYNC_BLOCK_MIN || o->block_size > SYNC_BLOCK_MAX ||
        o->block_size % SYNC_BLOCK_MIN || o->window_blocks < 1 ||
        o->window_blocks > WINDOW_MAX_ITEMS) {
        snprintf(err, errlen,
                 "sync pass: block_size %u (a multiple of %u up to %u) or "
                 "window_blocks %u (1..%u) out of range",
                 o->block_size, SYNC_BLOCK_MIN, SYNC_BLOCK_MAX, o->window_blocks, WINDOW_MAX_ITEMS);
        return -EINVAL;
    }
    pass_t p = {.o = o, .c = c, .r = r, .err = err, .errlen = errlen, .fd = -1};
    for (unsigned n = 0; n < SYNC_DISKS_MAX; n++)
        p.disks[n].fd = -1;
    p.block = malloc(o->block_size);
    if (!p.block)
        abort(); /* out of memory */
    uint64_t t0 = sync_now_ns();
    int rc = run_pass(&p, stop);
    r->duration_ms = (sync_now_ns() - t0) / 1000000;
    r->total = atomic_load(&c->total);
    r->sent = atomic_load(&c->sent);
    r->wire = atomic_load(&c->wire);
    r->blocks = atomic_load(&c->blocks);
    r->holes = atomic_load(&c->holes);
    if (p.fd >= 0)
        close(p.fd);
    for (unsigned n = 0; n < SYNC_DISKS_MAX; n++) {
        if (p.disks[n].fd >= 0)
            close(p.disks[n].fd);
        free(p.disks[n].entries);
        free(p.disks[n].items);
        free(p.disks[n].recs);
    }
    sync_buf_free(&p.in);
    sync_buf_free(&p.out);
    free(p.block);
    free(p.vmjson);
    return rc;
}
