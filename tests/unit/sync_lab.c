/*
 * sync_lab.c -- the directories, listener and checks of the block transfer's tests
 * (sync_lab.h).
 */
#include "sync_lab.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "sync_manifest.h"

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static void on_log(void *data, int level, const char *msg)
{
    sync_lab_t *lab = data;
    (void)level; /* every line is kept whatever its level: the tests read the text */
    pthread_mutex_lock(&log_mu);
    size_t used = strlen(lab->log);
    if (used + strlen(msg) + 2 >= sizeof lab->log)
        used = 0;
    snprintf(lab->log + used, sizeof lab->log - used, "%s\n", msg);
    pthread_mutex_unlock(&log_mu);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

static void mkdir_ok(const char *path)
{
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        fail_msg("mkdir %s: %s", path, strerror(errno));
}

void sync_lab_open(sync_lab_t *lab, const char *name)
{
    memset(lab, 0, sizeof *lab);
    snprintf(lab->dir, sizeof lab->dir, "/tmp/%s.XXXXXX", name);
    assert_non_null(mkdtemp(lab->dir));
    snprintf(lab->src_root, sizeof lab->src_root, "%s/source", lab->dir);
    snprintf(lab->dst_root, sizeof lab->dst_root, "%s/target", lab->dir);
    snprintf(lab->src, sizeof lab->src, "%s/%s", lab->src_root, SYNC_LAB_VM);
    snprintf(lab->dst, sizeof lab->dst, "%s/%s", lab->dst_root, SYNC_LAB_VM);
    char p[1024];
    mkdir_ok(lab->src_root);
    mkdir_ok(lab->dst_root);
    mkdir_ok(lab->src);
    mkdir_ok(lab->dst);
    snprintf(p, sizeof p, "%s/disks", lab->src);
    mkdir_ok(p);
    snprintf(p, sizeof p, "%s/disks", lab->dst);
    mkdir_ok(p);
    snprintf(p, sizeof p, "%s/.migration", lab->dst);
    mkdir_ok(p);
    snprintf(p, sizeof p, "%s/vm.json", lab->src);
    write_text(p, "{\"uuid\": \"" SYNC_LAB_VM "\", \"autoboot\": true, \"ram\": 1024,"
                  " \"nics\": [{\"mac\": \"90:b8:d0:00:00:01\"}],"
                  " \"disks\": [{\"id\": \"d0\", \"pci_slot\": \"0:4:0\", \"path\": "
                  "\"/somewhere/source/" SYNC_LAB_VM "/disks/disk0.img\"},"
                  " {\"id\": \"d1\", \"pci_slot\": \"0:4:1\"}]}\n");
    snprintf(p, sizeof p, "%s/vm.json", lab->dst);
    write_text(p, "{\"uuid\": \"" SYNC_LAB_VM "\", \"autoboot\": false, \"do_not_inventory\": "
                  "true, \"nics\": [], \"migration_target\": \"" SYNC_LAB_MIGRATION "\"}\n");
    snprintf(p, sizeof p, "%s/.migration/session.json", lab->dst);
    write_text(p, "{\"migration_uuid\": \"" SYNC_LAB_MIGRATION "\", \"secret\": \"" SYNC_LAB_SECRET
                  "\"}\n");
    assert_int_equal(chmod(p, 0600), 0);
    char err[256];
    int rc = sync_listener_start_logged("127.0.0.1:0", lab->dst_root, on_log, lab, &lab->l, err,
                                        sizeof err);
    if (rc < 0)
        fail_msg("listener: %s", err);
    snprintf(lab->addr, sizeof lab->addr, "127.0.0.1:%u", sync_listener_port(lab->l));
    lab->o = (sync_send_opts_t){.instance_dir = lab->src,
                                .vm_uuid = SYNC_LAB_VM,
                                .migration_uuid = SYNC_LAB_MIGRATION,
                                .secret = SYNC_LAB_SECRET,
                                .addr = lab->addr,
                                .block_size = (uint32_t)MIB,
                                .window_blocks = 16,
                                .connect_timeout_ms = 2000};
}

void sync_lab_restart(sync_lab_t *lab)
{
    char err[256], addr[64];
    sync_listener_stop(lab->l);
    lab->l = NULL;
    snprintf(addr, sizeof addr, "%s", lab->addr);
    int rc = sync_listener_start_logged(addr, lab->dst_root, on_log, lab, &lab->l, err, sizeof err);
    if (rc < 0)
        fail_msg("listener again on %s: %s", addr, err);
}

void sync_lab_close(sync_lab_t *lab)
{
    sync_listener_stop(lab->l);
    lab->l = NULL;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", lab->dir);
    assert_int_equal(system(cmd), 0);
}

static char *disk_path(const char *inst, unsigned n, char *buf)
{
    snprintf(buf, 1024, "%s/disks/disk%u.img", inst, n);
    return buf;
}

const char *sync_lab_src_disk(const sync_lab_t *lab, unsigned n)
{
    static char buf[1024];
    return disk_path(lab->src, n, buf);
}

const char *sync_lab_dst_disk(const sync_lab_t *lab, unsigned n)
{
    static char buf[1024];
    return disk_path(lab->dst, n, buf);
}

void sync_lab_disk(const sync_lab_t *lab, unsigned n, uint64_t size)
{
    char p[1024];
    int fd = open(disk_path(lab->src, n, p), O_RDWR | O_CREAT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    close(fd);
}

void sync_lab_write(const sync_lab_t *lab, unsigned n, uint64_t at, uint64_t len, unsigned seed)
{
    char p[1024];
    int fd = open(disk_path(lab->src, n, p), O_RDWR);
    assert_true(fd >= 0);
    uint8_t buf[65536];
    uint32_t x = seed * 2654435761u + 1;
    for (uint64_t done = 0; done < len;) {
        size_t k = len - done < sizeof buf ? (size_t)(len - done) : sizeof buf;
        for (size_t i = 0; i < k; i++) {
            x = x * 1103515245u + 12345u;
            buf[i] = (uint8_t)((x >> 16) | 1);
        }
        assert_int_equal(pwrite(fd, buf, k, (off_t)(at + done)), (ssize_t)k);
        done += k;
    }
    close(fd);
}

void sync_lab_punch(const sync_lab_t *lab, unsigned n, uint64_t at, uint64_t len)
{
    char p[1024];
    int fd = open(disk_path(lab->src, n, p), O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)at, (off_t)len), 0);
    close(fd);
}

sync_pass_result_t sync_lab_pass(sync_lab_t *lab)
{
    sync_pass_result_t r;
    sync_counters_t c;
    char err[512];
    int rc = sync_send_pass(&lab->o, &c, NULL, &r, err, sizeof err);
    if (rc != 0)
        fail_msg("pass: %d %s (listener: %s)", rc, err, lab->log);
    assert_int_equal(atomic_load(&c.sent), r.sent);
    return r;
}

void sync_lab_sha256(const char *path, char hex[65])
{
    hex[0] = '\0';
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    assert_true(EVP_DigestInit_ex(md, EVP_sha256(), NULL));
    static uint8_t buf[1 << 20];
    ssize_t r;
    /* Holes are read as zeros: the content, whatever the allocation. Reading a 1 GiB
     * sparse file costs little (the kernel returns zero pages). */
    while ((r = read(fd, buf, sizeof buf)) > 0)
        EVP_DigestUpdate(md, buf, (size_t)r);
    close(fd);
    uint8_t out[32];
    unsigned n = 32;
    EVP_DigestFinal_ex(md, out, &n);
    EVP_MD_CTX_free(md);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", out[i]);
}

uint64_t sync_lab_allocated(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (uint64_t)st.st_blocks * 512;
}

/* The next offset >= at where either file has data, or size. */
static uint64_t next_data(int a, int b, uint64_t at, uint64_t size)
{
    off_t x = lseek(a, (off_t)at, SEEK_DATA), y = lseek(b, (off_t)at, SEEK_DATA);
    uint64_t nx = x < 0 ? size : (uint64_t)x, ny = y < 0 ? size : (uint64_t)y;
    return nx < ny ? nx : ny;
}

void sync_lab_assert_same(const sync_lab_t *lab, unsigned n)
{
    char pa[1024], pb[1024];
    struct stat sa, sb;
    disk_path(lab->src, n, pa);
    disk_path(lab->dst, n, pb);
    assert_int_equal(stat(pa, &sa), 0);
    if (stat(pb, &sb) < 0)
        fail_msg("target disk%u.img is missing", n);
    assert_int_equal(sa.st_size, sb.st_size);
    /* Content compared wherever either file has data (both read zeros elsewhere). */
    int a = open(pa, O_RDONLY), b = open(pb, O_RDONLY);
    assert_true(a >= 0 && b >= 0);
    static uint8_t ba[1 << 20], bb[1 << 20];
    uint64_t size = (uint64_t)sa.st_size;
    for (uint64_t at = next_data(a, b, 0, size); at < size; at = next_data(a, b, at, size)) {
        size_t k = size - at < sizeof ba ? (size_t)(size - at) : sizeof ba;
        assert_int_equal(pread(a, ba, k, (off_t)at), (ssize_t)k);
        assert_int_equal(pread(b, bb, k, (off_t)at), (ssize_t)k);
        if (memcmp(ba, bb, k))
            fail_msg("disk%u.img differs in [%llu, %llu)", n, (unsigned long long)at,
                     (unsigned long long)(at + k));
        at += k;
    }
    close(a);
    close(b);
    uint64_t alloc_src = sync_lab_allocated(pa), alloc_dst = sync_lab_allocated(pb);
    if (alloc_dst > alloc_src + lab->o.block_size)
        fail_msg("disk%u.img: target allocates %llu bytes, source %llu", n,
                 (unsigned long long)alloc_dst, (unsigned long long)alloc_src);
}

uint64_t sync_lab_manifest_blocks(const sync_lab_t *lab)
{
    char dir[1024], err[256];
    snprintf(dir, sizeof dir, "%s/.migration", lab->dst);
    /* A copy, so that the receiver's own file is never cut or rewritten by the test. */
    char copy[1100], cmd[4800];
    snprintf(copy, sizeof copy, "%s/.peek", lab->dir);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && cp '%s/manifest' '%s/' 2>/dev/null",
             copy, copy, dir, copy);
    if (system(cmd) != 0)
        return 0;
    sync_manifest_t *m;
    if (sync_manifest_open(copy, lab->o.block_size, &m, err, sizeof err) < 0)
        return 0;
    uint64_t k = 0;
    for (unsigned n = 0; n < SYNC_DISKS_MAX; n++) {
        sync_mdisk_t *d = sync_manifest_disk(m, n);
        if (!d)
            continue;
        size_t cnt;
        sync_entry_t *e = sync_mdisk_sorted(d, &cnt);
        for (size_t i = 0; i < cnt; i++)
            k += memcmp(e[i].hash, "\xff\xff\xff\xff\xff\xff\xff\xff", 8) != 0;
        free(e);
    }
    sync_manifest_close(m);
    return k;
}
