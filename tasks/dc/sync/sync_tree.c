/*
 * sync_tree.c -- a storage instance's trees listed, sorted and digested (sync_tree.h).
 */
#include "sync_tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "sync_digest.h"
#include "sync_wire.h"
#include "tree_copy.h"

const char *const sync_tree_tops[2] = {"export", "snapshots"};

/* A path a listing may hold: leaves room for the instance's directory before it. */
#define REL_MAX (PATH_MAX - 256)

static bool is_dir(const char *dir, const char *name)
{
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool sync_tree_present(const char *dir)
{
    return is_dir(dir, "export") || is_dir(dir, SYNC_TREE_FENCED);
}

int sync_tree_fence(const char *dir, bool on, char *err, size_t errlen)
{
    const char *from = on ? "export" : SYNC_TREE_FENCED, *to = on ? SYNC_TREE_FENCED : "export";
    bool have_from = is_dir(dir, from), have_to = is_dir(dir, to);
    if (!have_from)
        return 0;
    if (have_to) {
        snprintf(err, errlen, "%s: both export and " SYNC_TREE_FENCED " are there", dir);
        return -EEXIST;
    }
    char a[PATH_MAX], b[PATH_MAX];
    snprintf(a, sizeof a, "%s/%s", dir, from);
    snprintf(b, sizeof b, "%s/%s", dir, to);
    if (rename(a, b) < 0) {
        snprintf(err, errlen, "%s -> %s: %s", a, b, strerror(errno));
        return -errno;
    }
    return dc_tree_dir_sync(dir, err, errlen);
}

void sync_tree_add(sync_tree_t *t, const char *path, uint8_t kind, uint32_t mode, uint64_t size,
                   const char *hash, const char *link)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 64;
        t->e = realloc(t->e, t->cap * sizeof *t->e);
        if (!t->e)
            abort(); /* out of memory */
    }
    sync_tree_entry_t *e = &t->e[t->n++];
    memset(e, 0, sizeof *e);
    e->path = strdup(path);
    e->link = link ? strdup(link) : NULL;
    if (!e->path || (link && !e->link))
        abort(); /* out of memory */
    e->kind = kind;
    e->mode = mode & SYNC_TREE_MODE_BITS;
    e->size = size;
    snprintf(e->hash, sizeof e->hash, "%s", hash ? hash : "");
}

static bool under_export(const char *rel)
{
    return !strncmp(rel, "export", 6) && (rel[6] == '/' || rel[6] == '\0');
}

void sync_tree_file_path(const char *dir, const char *rel, char *out, size_t outlen)
{
    if (under_export(rel) && !is_dir(dir, "export") && is_dir(dir, SYNC_TREE_FENCED))
        snprintf(out, outlen, "%s/" SYNC_TREE_FENCED "%s", dir, rel + 6);
    else
        snprintf(out, outlen, "%s/%s", dir, rel);
}

int sync_tree_open_file(const char *dir, const char *rel)
{
    if (!sync_tree_path_ok(rel))
        return -EINVAL;
    int at = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (at < 0)
        return -errno;
    bool fenced = under_export(rel) && !is_dir(dir, "export") && is_dir(dir, SYNC_TREE_FENCED);
    char comp[NAME_MAX + 1];
    const char *p = rel;
    bool first = true;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len > NAME_MAX) {
            close(at);
            return -ENAMETOOLONG;
        }
        memcpy(comp, p, len);
        comp[len] = '\0';
        const char *name = first && fenced ? SYNC_TREE_FENCED : comp;
        first = false;
        int fd = openat(at, name,
                        O_RDONLY | O_CLOEXEC | O_NOFOLLOW | (slash ? O_DIRECTORY : O_NONBLOCK));
        int e = errno;
        close(at);
        if (fd < 0)
            return -e;
        if (!slash)
            return fd;
        at = fd;
        p = slash + 1;
    }
}

static int by_path(const void *a, const void *b)
{
    return strcmp(((const sync_tree_entry_t *)a)->path, ((const sync_tree_entry_t *)b)->path);
}

void sync_tree_sort(sync_tree_t *t)
{
    if (t->n > 1)
        qsort(t->e, t->n, sizeof *t->e, by_path);
}

void sync_tree_free(sync_tree_t *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->e[i].path);
        free(t->e[i].link);
    }
    free(t->e);
    memset(t, 0, sizeof *t);
}

typedef struct walk {
    const char *dir; /* the instance's directory */
    uint32_t bs;
    const atomic_bool *stop;
    bool fenced; /* export/ is read from SYNC_TREE_FENCED */
    sync_tree_t *t;
    char *err;
    size_t errlen;
} walk_t;

/* Adds rel (relative to w->dir) and, for a directory, everything under it. */
static int walk_path(walk_t *w, const char *rel)
{
    char path[PATH_MAX];
    /* export/ fenced: read from its fenced name, listed under its own. */
    if (w->fenced && under_export(rel))
        snprintf(path, sizeof path, "%s/" SYNC_TREE_FENCED "%s", w->dir, rel + 6);
    else
        snprintf(path, sizeof path, "%s/%s", w->dir, rel);
    struct stat st;
    if (lstat(path, &st) < 0) {
        /* Gone since its directory was read (a probe file the share removes). */
        if (errno == ENOENT)
            return 0;
        snprintf(w->err, w->errlen, "%s: %s", path, strerror(errno));
        return -errno;
    }
    if (strlen(rel) > REL_MAX) {
        snprintf(w->err, w->errlen, "%s: a path longer than %d bytes", path, REL_MAX);
        return -ENAMETOOLONG;
    }
    if (S_ISREG(st.st_mode)) {
        if (w->stop && atomic_load(w->stop)) {
            snprintf(w->err, w->errlen, "listing %s: stopped", w->dir);
            return -ECANCELED;
        }
        char hex[65];
        uint64_t size = 0;
        int rc = sync_disk_digest(path, w->bs, hex, &size, w->err, w->errlen);
        if (rc == -ENOENT)
            return 0;
        if (rc < 0)
            return rc;
        sync_tree_add(w->t, rel, SYNC_KIND_FILE, st.st_mode, size, hex, NULL);
        w->t->e[w->t->n - 1].mtime_s = st.st_mtim.tv_sec;
        w->t->e[w->t->n - 1].mtime_ns = (uint32_t)st.st_mtim.tv_nsec;
        return 0;
    }
    if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n < 0) {
            if (errno == ENOENT)
                return 0;
            snprintf(w->err, w->errlen, "%s: %s", path, strerror(errno));
            return -errno;
        }
        target[n] = '\0';
        sync_tree_add(w->t, rel, SYNC_KIND_LINK, 0777, 0, NULL, target);
        return 0;
    }
    if (!S_ISDIR(st.st_mode))
        return 0; /* sockets, fifos, devices: not carried */
    sync_tree_add(w->t, rel, SYNC_KIND_DIR, st.st_mode, 0, NULL, NULL);
    DIR *dh = opendir(path);
    if (!dh) {
        if (errno == ENOENT)
            return 0;
        snprintf(w->err, w->errlen, "%s: %s", path, strerror(errno));
        return -errno;
    }
    struct dirent *de;
    int rc = 0;
    while (rc == 0 && (de = readdir(dh))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char sub[PATH_MAX];
        int k = snprintf(sub, sizeof sub, "%s/%s", rel, de->d_name);
        if (k < 0 || (size_t)k >= sizeof sub) {
            snprintf(w->err, w->errlen, "%s/%s: a path too long", path, de->d_name);
            rc = -ENAMETOOLONG;
            break;
        }
        rc = walk_path(w, sub);
    }
    closedir(dh);
    return rc;
}

int sync_tree_list(const char *dir, uint32_t block_size, const atomic_bool *stop, sync_tree_t *out,
                   char *err, size_t errlen)
{
    sync_tree_free(out);
    walk_t w = {.dir = dir, .bs = block_size, .stop = stop, .t = out, .err = err, .errlen = errlen};
    w.fenced = !is_dir(dir, "export") && is_dir(dir, SYNC_TREE_FENCED);
    for (size_t i = 0; i < sizeof sync_tree_tops / sizeof *sync_tree_tops; i++) {
        int rc = walk_path(&w, sync_tree_tops[i]);
        if (rc < 0) {
            sync_tree_free(out);
            return rc;
        }
    }
    sync_tree_sort(out);
    return 0;
}

static void put_str(EVP_MD_CTX *md, const char *s)
{
    size_t n = strlen(s);
    uint8_t len[2] = {(uint8_t)(n & 0xff), (uint8_t)(n >> 8)};
    EVP_DigestUpdate(md, len, sizeof len);
    EVP_DigestUpdate(md, s, n);
}

void sync_tree_digest(const sync_tree_t *t, char hex[65])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
        abort(); /* out of memory */
    for (size_t i = 0; i < t->n; i++) {
        const sync_tree_entry_t *e = &t->e[i];
        uint8_t head[1 + 4 + 8];
        put_str(md, e->path);
        head[0] = e->kind;
        sync_le32(head + 1, e->mode);
        sync_le64(head + 5, e->size);
        EVP_DigestUpdate(md, head, sizeof head);
        put_str(md, e->kind == SYNC_KIND_LINK ? e->link : e->hash);
    }
    uint8_t out[32];
    unsigned int len = sizeof out;
    EVP_DigestFinal_ex(md, out, &len);
    EVP_MD_CTX_free(md);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", out[i]);
}

int sync_tree_dir_digest(const char *dir, uint32_t block_size, char hex[65], uint64_t *entries,
                         char *err, size_t errlen)
{
    sync_tree_t t = {0};
    int rc = sync_tree_list(dir, block_size, NULL, &t, err, errlen);
    if (rc < 0)
        return rc;
    sync_tree_digest(&t, hex);
    if (entries)
        *entries = t.n;
    sync_tree_free(&t);
    return 0;
}

bool sync_tree_path_ok(const char *rel)
{
    size_t n = strlen(rel);
    if (n == 0 || n > REL_MAX)
        return false;
    size_t top = 0;
    for (size_t i = 0; i < sizeof sync_tree_tops / sizeof *sync_tree_tops; i++) {
        size_t k = strlen(sync_tree_tops[i]);
        if (!strncmp(rel, sync_tree_tops[i], k) && (rel[k] == '\0' || rel[k] == '/'))
            top = k;
    }
    if (top == 0)
        return false;
    const char *p = rel + top;
    while (*p == '/') {
        const char *c = p + 1;
        const char *end = strchr(c, '/');
        size_t len = end ? (size_t)(end - c) : strlen(c);
        if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        p = c + len;
    }
    return *p == '\0';
}
