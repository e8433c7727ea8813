/*
 * bench_sync.c -- the block transfer of a migration (tasks/dc/sync) measured against
 * its baselines in one run, on the same files (docs/PERFORMANCE.md, "The block
 * transfer"):
 *
 *   full         a whole pass of sparse disks vs `cp --sparse=always` of the same files
 *                and a sync of each copy (the pass makes its writes durable too):
 *                the pass's rate over cp's;
 *   incremental  after D MiB written in 1 MiB blocks at random, for 3 values of D:
 *                bytes on the wire against 1.05 * D + the manifest (the wire of a pass
 *                with nothing to send), and the time;
 *   apparent     the same data in a 1 GiB and in a 100 GiB apparent-size disk: the
 *                time of a whole pass of each;
 *   rate         a pass held to a limit: the rate it went at over the limit.
 *
 * Medians of R runs (-r, default 5), each ratio against the baseline measured in the
 * same run. Prints one JSON line per measurement and a table. Needs only a directory
 * (-d, default /tmp) with room for the data written (-m MiB of data per disk, default
 * 256) and a listener on 127.0.0.1.
 *
 *   build/tests/bench/bench_sync [-r RUNS] [-m MIB] [-d DIR]
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sync_listener.h"
#include "sync_rate.h"
#include "sync_send.h"

#define MIB      (1ull << 20)
#define GIB      (1ull << 30)
#define VM       "6f1c2b1e-8a4d-4c3e-9f5a-2d7b9c0e1a11"
#define MIG      "0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f70"
#define SECRET   "5ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2"
#define RUNS_MAX 31

static char top[512], src[700], dst[700], addr[64];
static sync_listener_t *listener;

static void die(const char *what)
{
    fprintf(stderr, "bench_sync: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void run(const char *cmd)
{
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_sync: failed: %s\n", cmd);
        exit(1);
    }
}

static double now_s(void)
{
    return (double)sync_now_ns() / 1e9;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        die(path);
}

/* Fills [at, at + len) of a file with bytes that are never zero. */
static void fill(const char *path, uint64_t at, uint64_t len, unsigned seed)
{
    int fd = open(path, O_RDWR);
    if (fd < 0)
        die(path);
    static uint8_t buf[1 << 20];
    uint32_t x = seed * 2654435761u + 7;
    for (uint64_t done = 0; done < len;) {
        size_t k = len - done < sizeof buf ? (size_t)(len - done) : sizeof buf;
        for (size_t i = 0; i < k; i++) {
            x = x * 1103515245u + 12345u;
            buf[i] = (uint8_t)((x >> 16) | 1);
        }
        if (pwrite(fd, buf, k, (off_t)(at + done)) != (ssize_t)k)
            die(path);
        done += k;
    }
    if (fsync(fd) < 0)
        die(path);
    close(fd);
}

static void make_disk(unsigned n, uint64_t size)
{
    char p[800];
    snprintf(p, sizeof p, "%s/disks/disk%u.img", src, n);
    unlink(p);
    int fd = open(p, O_RDWR | O_CREAT, 0644);
    if (fd < 0 || ftruncate(fd, (off_t)size) < 0)
        die(p);
    close(fd);
}

/* The target as recv_open leaves it: no disks, no manifest, the session. */
static void empty_target(void)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/disks' '%s/.migration/manifest' && mkdir -p '%s/disks'",
             dst, dst, dst);
    run(cmd);
}

static sync_pass_result_t pass(uint64_t rate)
{
    sync_send_opts_t o = {.instance_dir = src,
                          .vm_uuid = VM,
                          .migration_uuid = MIG,
                          .secret = SECRET,
                          .addr = addr,
                          .rate_bytes_s = rate,
                          .block_size = (uint32_t)MIB,
                          .window_blocks = 16,
                          .connect_timeout_ms = 2000};
    sync_counters_t c;
    sync_pass_result_t r;
    char err[512];
    if (sync_send_pass(&o, &c, NULL, &r, err, sizeof err) != 0) {
        fprintf(stderr, "bench_sync: pass: %s\n", err);
        exit(1);
    }
    return r;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Time of `cp --sparse=always` of every source disk into a fresh directory, and a sync
 * of each copy. */
static double time_cp(unsigned disks)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/cp' && mkdir -p '%s/cp'", top, top);
    run(cmd);
    double t0 = now_s();
    for (unsigned n = 0; n < disks; n++) {
        snprintf(cmd, sizeof cmd,
                 "cp --sparse=always '%s/disks/disk%u.img' '%s/cp/disk%u.img' && sync "
                 "'%s/cp/disk%u.img'",
                 src, n, top, n, top, n);
        run(cmd);
    }
    return now_s() - t0;
}

int main(int argc, char **argv)
{
    int runs = 5;
    uint64_t data_mib = 256;
    const char *base = "/tmp";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-r"))
            runs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-m"))
            data_mib = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "-d"))
            base = argv[i + 1];
    }
    if (runs < 1 || runs > RUNS_MAX || data_mib < 16 || data_mib > 65536) {
        fprintf(stderr, "usage: bench_sync [-r RUNS (1..%d)] [-m MIB (16..65536)] [-d DIR]\n",
                RUNS_MAX);
        return 2;
    }
    snprintf(top, sizeof top, "%s/bench_sync.XXXXXX", base);
    if (!mkdtemp(top))
        die(top);
    char p[1000], cmd[8192];
    snprintf(src, sizeof src, "%s/source/%s", top, VM);
    snprintf(dst, sizeof dst, "%s/target/%s", top, VM);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/disks' '%s/disks' '%s/.migration'", src, dst, dst);
    run(cmd);
    snprintf(p, sizeof p, "%s/vm.json", src);
    write_text(p, "{\"uuid\": \"" VM "\", \"disks\": []}\n");
    snprintf(p, sizeof p, "%s/vm.json", dst);
    write_text(p, "{\"uuid\": \"" VM "\", \"do_not_inventory\": true, \"autoboot\": false}\n");
    snprintf(p, sizeof p, "%s/.migration/session.json", dst);
    write_text(p, "{\"migration_uuid\": \"" MIG "\", \"secret\": \"" SECRET "\"}\n");
    char root[700], err[256];
    snprintf(root, sizeof root, "%s/target", top);
    if (sync_listener_start("127.0.0.1:0", root, &listener, err, sizeof err) < 0) {
        fprintf(stderr, "bench_sync: %s\n", err);
        return 1;
    }
    snprintf(addr, sizeof addr, "127.0.0.1:%u", sync_listener_port(listener));
    uint64_t data = data_mib * MIB;

    /* ---- full pass vs cp: two 10 GiB disks, data_mib MiB written in each in runs of
     * 4 MiB spread over the disk ---- */
    make_disk(0, 10 * GIB);
    make_disk(1, 10 * GIB);
    for (unsigned n = 0; n < 2; n++) {
        snprintf(p, sizeof p, "%s/disks/disk%u.img", src, n);
        uint64_t runs4 = data / (4 * MIB);
        for (uint64_t k = 0; k < runs4; k++)
            fill(p, (k * (10 * GIB / runs4)) & ~(MIB - 1), 4 * MIB, (unsigned)(k + 10 * n));
    }
    double t_pass[RUNS_MAX], t_cp[RUNS_MAX], ratio[RUNS_MAX];
    for (int i = 0; i < runs; i++) {
        t_cp[i] = time_cp(2);
        empty_target();
        double t0 = now_s();
        sync_pass_result_t r = pass(0);
        t_pass[i] = now_s() - t0;
        if (r.sent != 2 * data) {
            fprintf(stderr, "bench_sync: full pass sent %llu bytes, expected %llu\n",
                    (unsigned long long)r.sent, (unsigned long long)(2 * data));
            return 1;
        }
        ratio[i] = t_cp[i] / t_pass[i];
    }
    double mp = median(t_pass, runs), mc = median(t_cp, runs), mr = median(ratio, runs);
    printf("{\"bench\":\"sync_full\",\"data_mib\":%llu,\"runs\":%d,\"pass_s\":%.3f,\"cp_s\":%.3f,"
           "\"pass_mib_s\":%.1f,\"cp_mib_s\":%.1f,\"rate_ratio\":%.3f}\n",
           (unsigned long long)(2 * data_mib), runs, mp, mc, 2.0 * (double)data_mib / mp,
           2.0 * (double)data_mib / mc, mr);

    /* ---- incremental: D MiB in 1 MiB blocks at random over disk0 ---- */
    sync_pass_result_t idle = pass(0);
    printf("{\"bench\":\"sync_manifest\",\"manifest_wire_bytes\":%llu}\n",
           (unsigned long long)idle.wire);
    uint64_t ds[3] = {data_mib / 16, data_mib / 4, data_mib};
    srand(34);
    for (int k = 0; k < 3; k++) {
        double t[RUNS_MAX], over[RUNS_MAX];
        uint64_t wire_last = 0;
        for (int i = 0; i < runs; i++) {
            snprintf(p, sizeof p, "%s/disks/disk0.img", src);
            uint64_t nblocks = 10 * GIB / MIB;
            /* Distinct blocks: a stride through the disk from a random start. */
            uint64_t start = (uint64_t)rand() % nblocks, stride = 7919;
            for (uint64_t b = 0; b < ds[k]; b++)
                fill(p, ((start + b * stride) % nblocks) * MIB, MIB, (unsigned)(rand()));
            double t0 = now_s();
            sync_pass_result_t r = pass(0);
            t[i] = now_s() - t0;
            /* The wire over what it should be at most: 1.05 D + the manifest. */
            over[i] = (double)r.wire / (1.05 * (double)(ds[k] * MIB) + (double)idle.wire);
            wire_last = r.wire;
            if (r.sent != ds[k] * MIB) {
                fprintf(stderr, "bench_sync: incremental of %llu MiB sent %llu bytes\n",
                        (unsigned long long)ds[k], (unsigned long long)r.sent);
                return 1;
            }
        }
        printf("{\"bench\":\"sync_incremental\",\"d_mib\":%llu,\"runs\":%d,\"pass_s\":%.3f,"
               "\"wire_bytes\":%llu,\"wire_over_bound\":%.4f}\n",
               (unsigned long long)ds[k], runs, median(t, runs), (unsigned long long)wire_last,
               median(over, runs));
    }

    /* ---- the same data in a 1 GiB and a 100 GiB apparent-size disk ---- */
    snprintf(cmd, sizeof cmd, "rm -f '%s/disks/'*.img", src);
    run(cmd);
    double t_small[RUNS_MAX], t_big[RUNS_MAX], app[RUNS_MAX];
    uint64_t part = data / 2 < 512 * MIB ? data / 2 : 512 * MIB;
    for (int i = 0; i < runs; i++) {
        for (int big = 0; big < 2; big++) {
            make_disk(0, big ? 100 * GIB : 1 * GIB);
            snprintf(p, sizeof p, "%s/disks/disk0.img", src);
            fill(p, 0, part / 2, 1);
            fill(p, 512 * MIB, part / 2, 2);
            empty_target();
            double t0 = now_s();
            pass(0);
            (big ? t_big : t_small)[i] = now_s() - t0;
        }
        app[i] = t_big[i] / t_small[i];
    }
    printf("{\"bench\":\"sync_apparent\",\"data_mib\":%llu,\"runs\":%d,\"pass_1g_s\":%.3f,"
           "\"pass_100g_s\":%.3f,\"ratio\":%.3f}\n",
           (unsigned long long)(part / MIB), runs, median(t_small, runs), median(t_big, runs),
           median(app, runs));

    /* ---- the rate limit: 64 MiB at 32 MiB/s ---- */
    double rr[RUNS_MAX];
    make_disk(0, 1 * GIB);
    snprintf(p, sizeof p, "%s/disks/disk0.img", src);
    fill(p, 0, 64 * MIB, 3);
    for (int i = 0; i < runs; i++) {
        empty_target();
        double t0 = now_s();
        sync_pass_result_t r = pass(32 * MIB);
        rr[i] = ((double)r.sent / (now_s() - t0)) / (double)(32 * MIB);
    }
    printf("{\"bench\":\"sync_rate\",\"limit_mib_s\":32,\"runs\":%d,\"rate_over_limit\":%.3f}\n",
           runs, median(rr, runs));

    sync_listener_stop(listener);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    run(cmd);
    return 0;
}
