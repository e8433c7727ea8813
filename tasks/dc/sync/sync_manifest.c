/*
 * sync_manifest.c -- the receiver's durable record of the target's disks
 * (sync_manifest.h).
 */
#include "sync_manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sync_block.h"

#define KEY_EMPTY  0
#define KEY_GONE   UINT64_MAX
#define HEADER_LEN 16
static const char magic[8] = {'T', 'S', 'Y', 'N', 'C', 'M', 'F', '1'};

enum record_type { R_DISK = 1, R_RESET = 2, R_BLOCK = 3, R_DROP = 4, R_REMOVE = 5 };

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n, sz);
    if (!p)
        abort(); /* out of memory */
    return p;
}

/* ---- the in-memory map of one disk ---- */

static size_t slot_of(uint64_t key, size_t cap)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 17) & (cap - 1);
}

static void map_put(sync_mdisk_t *d, uint64_t idx, const uint8_t *hash);

static void map_grow(sync_mdisk_t *d)
{
    sync_entry_t *old = d->tab;
    size_t oldcap = d->cap;
    size_t cap = oldcap ? oldcap : 64;
    while (cap < (d->count + 1) * 3)
        cap *= 2;
    d->tab = xcalloc(cap, sizeof *d->tab);
    d->cap = cap;
    d->count = d->used = 0;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].idx != KEY_EMPTY && old[i].idx != KEY_GONE)
            map_put(d, old[i].idx - 1, old[i].hash);
    free(old);
}

static sync_entry_t *map_find(const sync_mdisk_t *d, uint64_t idx)
{
    if (!d->cap)
        return NULL;
    uint64_t key = idx + 1;
    for (size_t i = slot_of(key, d->cap), k = 0; k < d->cap; i = (i + 1) & (d->cap - 1), k++) {
        if (d->tab[i].idx == KEY_EMPTY)
            return NULL;
        if (d->tab[i].idx == key)
            return &d->tab[i];
    }
    return NULL;
}

static void map_put(sync_mdisk_t *d, uint64_t idx, const uint8_t *hash)
{
    sync_entry_t *e = map_find(d, idx);
    if (e) {
        memcpy(e->hash, hash, SYNC_HASH_LEN);
        return;
    }
    if ((d->used + 1) * 2 > d->cap)
        map_grow(d);
    uint64_t key = idx + 1;
    size_t i = slot_of(key, d->cap);
    while (d->tab[i].idx != KEY_EMPTY && d->tab[i].idx != KEY_GONE)
        i = (i + 1) & (d->cap - 1);
    if (d->tab[i].idx == KEY_EMPTY)
        d->used++;
    d->tab[i].idx = key;
    memcpy(d->tab[i].hash, hash, SYNC_HASH_LEN);
    d->count++;
}

static void map_del(sync_mdisk_t *d, uint64_t idx)
{
    sync_entry_t *e = map_find(d, idx);
    if (e) {
        e->idx = KEY_GONE;
        d->count--;
    }
}

static void map_clear(sync_mdisk_t *d)
{
    free(d->tab);
    d->tab = NULL;
    d->cap = d->count = d->used = 0;
}

const uint8_t *sync_mdisk_get(const sync_mdisk_t *d, uint64_t idx)
{
    sync_entry_t *e = map_find(d, idx);
    return e ? e->hash : NULL;
}

static int by_idx(const void *a, const void *b)
{
    uint64_t x = ((const sync_entry_t *)a)->idx, y = ((const sync_entry_t *)b)->idx;
    return x < y ? -1 : x > y;
}

sync_entry_t *sync_mdisk_sorted(const sync_mdisk_t *d, size_t *n)
{
    sync_entry_t *out = xcalloc(d->count ? d->count : 1, sizeof *out);
    size_t k = 0;
    for (size_t i = 0; i < d->cap; i++)
        if (d->tab[i].idx != KEY_EMPTY && d->tab[i].idx != KEY_GONE) {
            out[k] = d->tab[i];
            out[k].idx--;
            k++;
        }
    qsort(out, k, sizeof *out, by_idx);
    *n = k;
    return out;
}

/* ---- changes: applied in memory, logged as records ---- */

static sync_mdisk_t *disk_get_or_add(sync_manifest_t *m, unsigned n)
{
    if (!m->disks[n]) {
        m->disks[n] = xcalloc(1, sizeof(sync_mdisk_t));
        m->disks[n]->n = n;
    }
    return m->disks[n];
}

sync_mdisk_t *sync_manifest_disk(sync_manifest_t *m, unsigned n)
{
    return n < SYNC_DISKS_MAX ? m->disks[n] : NULL;
}

static void drop_past(sync_mdisk_t *d, uint64_t nblocks)
{
    for (size_t i = 0; i < d->cap; i++)
        if (d->tab[i].idx != KEY_EMPTY && d->tab[i].idx != KEY_GONE &&
            d->tab[i].idx - 1 >= nblocks) {
            d->tab[i].idx = KEY_GONE;
            d->count--;
        }
}

static void apply_disk(sync_manifest_t *m, unsigned n, uint64_t size, const char *gen)
{
    sync_mdisk_t *d = disk_get_or_add(m, n);
    d->size = size;
    snprintf(d->generation, sizeof d->generation, "%s", gen);
    d->must_zero = false;
    drop_past(d, sync_block_count(size, m->block_size));
}

static void apply_reset(sync_manifest_t *m, unsigned n)
{
    sync_mdisk_t *d = disk_get_or_add(m, n);
    map_clear(d);
    d->must_zero = true;
    d->generation[0] = '\0';
}

static void apply_remove(sync_manifest_t *m, unsigned n)
{
    if (m->disks[n]) {
        map_clear(m->disks[n]);
        free(m->disks[n]);
        m->disks[n] = NULL;
    }
}

/* Appends one record to b: u32 length, u64 FNV-1a, payload [at, end). */
static size_t record_begin(sync_buf_t *b)
{
    size_t at = b->len;
    uint8_t zero[12] = {0};
    sync_buf_put(b, zero, sizeof zero);
    return at;
}

static void record_end(sync_buf_t *b, size_t at)
{
    size_t plen = b->len - at - 12;
    sync_le32(b->p + at, (uint32_t)plen);
    sync_le64(b->p + at + 4, fnv1a(b->p + at + 12, plen));
}

static void log_disk(sync_buf_t *b, unsigned n, uint64_t size, const char *gen)
{
    size_t at = record_begin(b);
    sync_buf_u8(b, R_DISK);
    sync_buf_u32(b, n);
    sync_buf_u64(b, size);
    sync_buf_str(b, gen);
    record_end(b, at);
}

static void log_block(sync_buf_t *b, unsigned n, uint64_t idx, const uint8_t *hash)
{
    size_t at = record_begin(b);
    sync_buf_u8(b, R_BLOCK);
    sync_buf_u32(b, n);
    sync_buf_u64(b, idx);
    sync_buf_put(b, hash, SYNC_HASH_LEN);
    record_end(b, at);
}

static void log_simple(sync_buf_t *b, uint8_t type, unsigned n, uint64_t idx)
{
    size_t at = record_begin(b);
    sync_buf_u8(b, type);
    sync_buf_u32(b, n);
    if (type == R_DROP)
        sync_buf_u64(b, idx);
    record_end(b, at);
}

void sync_manifest_set_disk(sync_manifest_t *m, unsigned n, uint64_t size, const char *generation)
{
    apply_disk(m, n, size, generation);
    log_disk(&m->pending, n, size, generation);
}

void sync_manifest_reset(sync_manifest_t *m, unsigned n)
{
    apply_reset(m, n);
    log_simple(&m->pending, R_RESET, n, 0);
}

void sync_manifest_set_block(sync_manifest_t *m, unsigned n, uint64_t idx,
                             const uint8_t hash[SYNC_HASH_LEN])
{
    map_put(disk_get_or_add(m, n), idx, hash);
    log_block(&m->pending, n, idx, hash);
}

void sync_manifest_drop_block(sync_manifest_t *m, unsigned n, uint64_t idx)
{
    if (m->disks[n])
        map_del(m->disks[n], idx);
    log_simple(&m->pending, R_DROP, n, idx);
}

void sync_manifest_remove(sync_manifest_t *m, unsigned n)
{
    apply_remove(m, n);
    log_simple(&m->pending, R_REMOVE, n, 0);
}

/* Replays one record's payload. false: not a record this code wrote. */
static bool replay(sync_manifest_t *m, const uint8_t *p, size_t len)
{
    sync_cur_t c = {.p = p, .left = len};
    uint8_t type = sync_cur_u8(&c);
    uint32_t n = sync_cur_u32(&c);
    if (c.bad || n >= SYNC_DISKS_MAX)
        return false;
    switch (type) {
    case R_DISK: {
        uint64_t size = sync_cur_u64(&c);
        char gen[SYNC_GENERATION_MAX];
        sync_cur_str(&c, gen, sizeof gen);
        if (c.bad)
            return false;
        apply_disk(m, n, size, gen);
        return true;
    }
    case R_RESET:
        apply_reset(m, n);
        return true;
    case R_BLOCK: {
        uint64_t idx = sync_cur_u64(&c);
        uint8_t hash[SYNC_HASH_LEN];
        sync_cur_bytes(&c, hash, sizeof hash);
        if (c.bad)
            return false;
        map_put(disk_get_or_add(m, n), idx, hash);
        return true;
    }
    case R_DROP: {
        uint64_t idx = sync_cur_u64(&c);
        if (c.bad)
            return false;
        if (m->disks[n])
            map_del(m->disks[n], idx);
        return true;
    }
    case R_REMOVE:
        apply_remove(m, n);
        return true;
    }
    return false;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void header(uint8_t h[HEADER_LEN], uint32_t block_size)
{
    memset(h, 0, HEADER_LEN);
    memcpy(h, magic, sizeof magic);
    sync_le32(h + 8, block_size);
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

/* Reads the whole log and replays it; a torn or foreign tail is cut off. A header of
 * another block size (or none) starts the file afresh. */
static int load(sync_manifest_t *m, char *err, size_t errlen)
{
    struct stat st;
    if (fstat(m->fd, &st) < 0)
        return -errno;
    size_t len = (size_t)st.st_size;
    uint8_t *all = malloc(len ? len : 1);
    if (!all)
        return -ENOMEM;
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(m->fd, all + got, len - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            free(all);
            snprintf(err, errlen, "%s: %s", m->path, strerror(e));
            return -e;
        }
        got += (size_t)r;
    }
    size_t good = 0;
    if (len >= HEADER_LEN && !memcmp(all, magic, sizeof magic) &&
        sync_get_le32(all + 8) == m->block_size) {
        good = HEADER_LEN;
        while (good + 12 <= len) {
            uint32_t plen = sync_get_le32(all + good);
            if (plen > len - good - 12)
                break;
            if (sync_get_le64(all + good + 4) != fnv1a(all + good + 12, plen))
                break;
            if (!replay(m, all + good + 12, plen))
                break;
            good += 12 + plen;
            m->log_records++;
        }
    }
    free(all);
    if (good == 0) {
        /* No manifest, or one of another block size: nothing is known of the files,
         * which sync_manifest_disk answering NULL for every disk says. */
        uint8_t h[HEADER_LEN];
        header(h, m->block_size);
        int rc;
        if (ftruncate(m->fd, 0) < 0 || pwrite(m->fd, h, HEADER_LEN, 0) != HEADER_LEN ||
            fsync(m->fd) < 0) {
            rc = -errno;
            snprintf(err, errlen, "%s: %s", m->path, strerror(errno));
            return rc;
        }
        if ((rc = fsync_dir(m->dir)) < 0) {
            snprintf(err, errlen, "%s: %s", m->dir, strerror(-rc));
            return rc;
        }
        good = HEADER_LEN;
    } else if (good < len && ftruncate(m->fd, (off_t)good) < 0) {
        int rc = -errno;
        snprintf(err, errlen, "%s: %s", m->path, strerror(errno));
        return rc;
    }
    if (lseek(m->fd, (off_t)good, SEEK_SET) < 0)
        return -errno;
    return 0;
}

/* See sync_manifest.h. */
int sync_disk_number(const char *name)
{
    unsigned n = 0;
    const char *p = name;
    if (strncmp(p, "disk", 4))
        return -1;
    p += 4;
    if (*p < '0' || *p > '9' || (*p == '0' && p[1] != '.'))
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        n = n * 10 + (unsigned)(*p - '0');
        if (n >= SYNC_DISKS_MAX)
            return -1;
    }
    return strcmp(p, ".img") ? -1 : (int)n;
}

int sync_manifest_open(const char *dir, uint32_t block_size, sync_manifest_t **out, char *err,
                       size_t errlen)
{
    sync_manifest_t *m = xcalloc(1, sizeof *m);
    m->fd = -1;
    m->block_size = block_size;
    int rc;
    if (snprintf(m->dir, sizeof m->dir, "%s", dir) >= (int)sizeof m->dir ||
        snprintf(m->path, sizeof m->path, "%s/manifest", dir) >= (int)sizeof m->path) {
        snprintf(err, errlen, "manifest path too long");
        rc = -ENAMETOOLONG;
        goto fail;
    }
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        goto fail;
    }
    m->fd = open(m->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (m->fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", m->path, strerror(errno));
        goto fail;
    }
    if ((rc = load(m, err, errlen)) < 0)
        goto fail;
    *out = m;
    return 0;
fail:
    sync_manifest_close(m);
    return rc;
}

void sync_manifest_close(sync_manifest_t *m)
{
    if (!m)
        return;
    for (unsigned i = 0; i < SYNC_DISKS_MAX; i++)
        apply_remove(m, i);
    if (m->fd >= 0)
        close(m->fd);
    sync_buf_free(&m->pending);
    free(m);
}

int sync_manifest_commit(sync_manifest_t *m, char *err, size_t errlen)
{
    if (!m->pending.len)
        return 0;
    int rc = write_all(m->fd, m->pending.p, m->pending.len);
    if (rc == 0 && fdatasync(m->fd) < 0)
        rc = -errno;
    if (rc < 0) {
        snprintf(err, errlen, "%s: %s", m->path, strerror(-rc));
        return rc;
    }
    sync_buf_reset(&m->pending);
    m->log_records++;
    return 0;
}

int sync_manifest_compact(sync_manifest_t *m, char *err, size_t errlen)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", m->path);
    sync_buf_t b = {0};
    uint8_t h[HEADER_LEN];
    header(h, m->block_size);
    sync_buf_put(&b, h, HEADER_LEN);
    for (unsigned n = 0; n < SYNC_DISKS_MAX; n++) {
        sync_mdisk_t *d = m->disks[n];
        if (!d)
            continue;
        if (d->must_zero) {
            log_simple(&b, R_RESET, n, 0);
            continue;
        }
        log_disk(&b, n, d->size, d->generation);
        size_t k;
        sync_entry_t *e = sync_mdisk_sorted(d, &k);
        for (size_t i = 0; i < k; i++)
            log_block(&b, n, e[i].idx, e[i].hash);
        free(e);
    }
    int rc = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || (rc = write_all(fd, b.p, b.len)) < 0 || fsync(fd) < 0 ||
        rename(tmp, m->path) < 0) {
        rc = rc ? rc : -errno;
        snprintf(err, errlen, "%s: %s", tmp, strerror(-rc));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        sync_buf_free(&b);
        return rc;
    }
    sync_buf_free(&b);
    if ((rc = fsync_dir(m->dir)) < 0) {
        close(fd);
        snprintf(err, errlen, "%s: %s", m->dir, strerror(-rc));
        return rc;
    }
    close(m->fd);
    m->fd = fd;
    /* The new file was opened write-only; appends need only that. */
    if (lseek(m->fd, 0, SEEK_END) < 0)
        return -errno;
    sync_buf_reset(&m->pending);
    m->log_records = 0;
    return 0;
}
