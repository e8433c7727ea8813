/*
 * workload.c -- tern-workload, the programs the lab's instances run:
 *
 *   tern-workload idle   --dir INSTANCE_DIR [--daemonize] [--pidfile FILE]
 *   tern-workload writer --dir INSTANCE_DIR [--file DISK] [--rate N[/s]]
 *                        [--daemonize] [--pidfile FILE]
 *   tern-workload share  --dir STORAGE_DIR [--health-ms N] [--daemonize] [--pidfile FILE]
 *   tern-workload verify FILE
 *
 * `idle` waits for SIGTERM. `share` is a storage instance's share process (the lab's
 * stand-in for a user-mode NFS server, docs/VOLUMES.md "Share states"): it starts only
 * if <STORAGE_DIR>/export is a directory of its own (not a symlink) in which it can
 * make and remove a probe file, and only then writes its pid file, which is its
 * readiness. It repeats that check every --health-ms (default 5000); after
 * SHARE_FAILURES_MAX failures in a row it says why in its log, removes its pid file
 * and exits 1, never serving on from an export that is gone. `writer` writes numbered, checksummed
 * records of RECORD_SIZE bytes into the instance's data disk, record n at byte n * RECORD_SIZE, at
 * N records a second (default 10), and syncs them (fdatasync) before it counts them written. Its
 * disk is --file, or <INSTANCE_DIR>/disks/data.img; the file must exist (the instance's disk, made
 * by whoever made the instance), and its size never changes: when it is full the writer says so in
 * its log and idles. On start it scans the disk from the start and continues at the first slot that
 * does not hold the record of its number: a torn record at the tail (a crash mid-write) is ignored
 * and written over. An exclusive flock on the disk keeps two writers off one disk.
 *
 * `verify` prints the number of valid records (one line, the number alone) and exits
 * 1 when a record is missing (an empty or broken slot before the last valid record)
 * or out of place (a record whose number is not its slot's): what a migration test
 * runs on the target's disk to prove no write was lost.
 *
 * --daemonize detaches: fork, setsid, fork again, so the workload is never the child
 * of whoever started it (an agent that restarts or is killed never takes an instance
 * with it); stdin is /dev/null, stdout and stderr go to <INSTANCE_DIR>/workload.log,
 * and every other descriptor it inherited is closed.
 * The starting process returns once the workload runs, exit 0, or prints why it
 * could not start and exits 1. The pid file (the pid and a newline) is written only
 * once the workload runs, as a temporary file renamed into place, and removed on a
 * clean stop. SIGTERM or SIGINT stops the workload after the record in hand.
 *
 * The record (little-endian):
 *   0  "TWRK"        4  u32 RECORD_SIZE    8  u64 number     16 u64 unix time (ms)
 *   24 u64 writer pid                      32 payload (deterministic, from the number)
 *   RECORD_SIZE-8 u64 FNV-1a 64 of every byte before it
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RECORD_SIZE             512
#define RECORD_MAGIC            "TWRK"
#define SCAN_BUF                (1u << 20) /* bytes read at a time when scanning a disk */
#define RATE_MAX                100000     /* records a second */
#define BATCH_MAX               1000       /* records written between two syncs at most */
#define DEFAULT_RATE            10
#define SHARE_HEALTH_MS_DEFAULT 5000
#define SHARE_HEALTH_MS_MIN     10      /* tests check often; below this it would spin */
#define SHARE_HEALTH_MS_MAX     3600000 /* an hour */
#define SHARE_FAILURES_MAX      3       /* checks failed in a row before the share exits */
#define SHARE_PROBE_NAME        ".tern-share-probe"

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* ---- messages ------------------------------------------------------------------------ */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A line on stderr (the log when daemonized), with the time. */
static void say(const char *fmt, ...)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(stderr, "%s.%03ldZ tern-workload[%ld]: ", when, ts.tv_nsec / 1000000L, (long)getpid());
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}

/* ---- records ------------------------------------------------------------------------- */

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void record_make(unsigned char *r, uint64_t number, uint64_t now_ms)
{
    memcpy(r, RECORD_MAGIC, 4);
    r[4] = RECORD_SIZE & 0xff;
    r[5] = (RECORD_SIZE >> 8) & 0xff;
    r[6] = r[7] = 0;
    put64(r + 8, number);
    put64(r + 16, now_ms);
    put64(r + 24, (uint64_t)getpid());
    uint64_t x = number * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 32; i < RECORD_SIZE - 8; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        put64(r + i, x);
    }
    put64(r + RECORD_SIZE - 8, fnv1a(r, RECORD_SIZE - 8));
}

/* true when r is a whole record; its number in *number. */
static bool record_valid(const unsigned char *r, uint64_t *number)
{
    if (memcmp(r, RECORD_MAGIC, 4) != 0 || r[4] != (RECORD_SIZE & 0xff) ||
        r[5] != ((RECORD_SIZE >> 8) & 0xff) || r[6] != 0 || r[7] != 0)
        return false;
    if (get64(r + RECORD_SIZE - 8) != fnv1a(r, RECORD_SIZE - 8))
        return false;
    *number = get64(r + 8);
    return true;
}

/* What a scan of a disk found. */
typedef struct scan {
    uint64_t slots;      /* records the disk has room for */
    uint64_t valid;      /* whole records anywhere */
    uint64_t contiguous; /* records 0..contiguous-1 each in place: where a writer goes on */
    uint64_t last_slot;  /* slot of the last valid record (when valid > 0) */
    uint64_t faults;     /* missing or misplaced records before the last valid one */
} scan_t;

/* Reads every data extent of fd (holes hold no record) and checks each slot. With
 * `report`, each fault is described on stderr. Returns 0, or -1 with errno. */
static int scan_disk(int fd, bool report, scan_t *s)
{
    memset(s, 0, sizeof *s);
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -1;
    s->slots = (uint64_t)st.st_size / RECORD_SIZE;
    unsigned char *buf = malloc(SCAN_BUF);
    if (buf == NULL)
        abort();
    uint64_t expect = 0; /* the next slot that should hold a valid record */
    bool broken = false; /* a record was missing or out of place before this one */
    off_t end = (off_t)(s->slots * RECORD_SIZE);
    for (off_t pos = 0; pos < end;) {
        off_t data = lseek(fd, pos, SEEK_DATA);
        if (data < 0 && errno == ENXIO)
            break;
        if (data < 0)
            goto Error;
        off_t hole = lseek(fd, data, SEEK_HOLE);
        if (hole < 0)
            goto Error;
        off_t from = data / RECORD_SIZE * RECORD_SIZE;
        off_t to = hole < end ? hole : end;
        while (from < to) {
            size_t want = (size_t)(to - from) < SCAN_BUF ? (size_t)(to - from) : SCAN_BUF;
            want = (want + RECORD_SIZE - 1) / RECORD_SIZE * RECORD_SIZE;
            if ((off_t)want > end - from)
                want = (size_t)(end - from);
            ssize_t got = pread(fd, buf, want, from);
            if (got < 0 && errno == EINTR)
                continue;
            if (got < 0)
                goto Error;
            if (got < RECORD_SIZE)
                break;
            for (size_t at = 0; at + RECORD_SIZE <= (size_t)got; at += RECORD_SIZE) {
                uint64_t slot = (uint64_t)(from + (off_t)at) / RECORD_SIZE, number;
                if (!record_valid(buf + at, &number))
                    continue;
                if (slot != expect) {
                    if (report)
                        fprintf(stderr,
                                "records %llu to %llu are missing (record %llu follows them)\n",
                                (unsigned long long)expect, (unsigned long long)slot - 1,
                                (unsigned long long)slot);
                    s->faults++;
                }
                if (number != slot) {
                    if (report)
                        fprintf(stderr, "slot %llu holds record %llu (%s)\n",
                                (unsigned long long)slot, (unsigned long long)number,
                                number < slot ? "repeated" : "out of place");
                    s->faults++;
                }
                /* A writer goes on after the records that are all in place from 0. */
                if (!broken && slot == s->contiguous && number == slot)
                    s->contiguous++;
                else
                    broken = true;
                expect = slot + 1;
                s->valid++;
                s->last_slot = slot;
            }
            from += (off_t)((size_t)got / RECORD_SIZE * RECORD_SIZE);
        }
        pos = hole;
    }
    free(buf);
    return 0;
Error:
    free(buf);
    return -1;
}

/* ---- pid files and detaching ------------------------------------------------------------ */

/* Writes "<pid>\n" to path through a temporary file and a rename, so a reader never
 * sees a partial pid. Returns 0 or -1 with errno. */
static int pidfile_write(const char *path)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    char line[32];
    int n = snprintf(line, sizeof line, "%ld\n", (long)getpid());
    if (write(fd, line, (size_t)n) != n || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        errno = e;
        return -1;
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}

/* Removes the pid file if it still names this process. */
static void pidfile_remove(const char *path)
{
    FILE *f = fopen(path, "r");
    long pid = 0;
    if (f == NULL)
        return;
    if (fscanf(f, "%ld", &pid) == 1 && pid == (long)getpid())
        unlink(path);
    fclose(f);
}

/* true when `pid` is a live (not zombie) process named tern-workload. */
static bool is_workload(long pid)
{
    char path[64], stat[512] = "";
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    bool ok = fgets(stat, sizeof stat, f) != NULL;
    fclose(f);
    /* "<pid> (<comm>) <state> ...": comm may hold anything, so its end is the last ')'. */
    const char *close = strrchr(stat, ')');
    return ok && close != NULL && close[1] == ' ' && close[2] != 'Z' && close[2] != 'X' &&
           strncmp(stat + strcspn(stat, "("), "(tern-workload)", 15) == 0;
}

/* Refuses a pid file that names a running workload. */
static int pidfile_check(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    long pid = 0;
    if (f == NULL)
        return 0;
    int got = fscanf(f, "%ld", &pid);
    fclose(f);
    if (got == 1 && pid > 0 && pid != (long)getpid() && is_workload(pid)) {
        snprintf(err, errlen, "%s names pid %ld, a tern-workload still running", path, pid);
        return -1;
    }
    return 0;
}

/* The descriptor the starting process waits on, in the detached workload (or -1). */
static int ready_fd = -1;

/* Tells the starting process the outcome: "" for running, else the reason. */
static void report_ready(const char *msg)
{
    if (ready_fd < 0)
        return;
    size_t n = strlen(msg);
    while (n > 0) {
        ssize_t w = write(ready_fd, msg, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        msg += w;
        n -= (size_t)w;
    }
    close(ready_fd);
    ready_fd = -1;
}

/* Closes every descriptor above stderr but `keep`. Whoever started the workload may
 * have left descriptors open across exec (a ternd's Redis connection, say): a
 * workload that outlives its starter must not keep them open, or a Redis connection
 * of an agent killed -9 would stay alive and go on taking jobs off its queue. */
static void close_inherited(int keep)
{
    unsigned from = 3, skip = keep >= 3 ? (unsigned)keep : 0;
    if (skip > from && close_range(from, skip - 1, 0) != 0)
        for (unsigned fd = from; fd < skip; fd++)
            close((int)fd); /* a kernel without close_range: one at a time */
    from = skip >= from ? skip + 1 : from;
    if (close_range(from, ~0u, 0) != 0) {
        long max = sysconf(_SC_OPEN_MAX);
        for (long fd = from; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
            close((int)fd);
    }
}

/* Detaches. Returns false in the workload (with ready_fd set), true in the starting
 * process with its exit status in *status (0 once the workload runs, 1 when it could
 * not start); the middle process exits at once. */
static bool daemonize(const char *log_path, int *status)
{
    int p[2];
    *status = 1;
    if (pipe2(p, O_CLOEXEC) != 0) {
        fprintf(stderr, "tern-workload: pipe: %s\n", strerror(errno));
        return true;
    }
    fflush(NULL);
    pid_t mid = fork();
    if (mid < 0) {
        fprintf(stderr, "tern-workload: fork: %s\n", strerror(errno));
        close(p[0]);
        close(p[1]);
        return true;
    }
    if (mid > 0) {
        close(p[1]);
        char msg[1024];
        size_t len = 0;
        for (;;) {
            ssize_t r = read(p[0], msg + len, sizeof msg - 1 - len);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0 || (len += (size_t)r) == sizeof msg - 1)
                break;
        }
        msg[len] = '\0';
        close(p[0]);
        while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
            ;
        /* An empty message means running, but only if the workload said so: a pipe
         * closed by a crash also reads empty, and then the pid file is not there. */
        if (len > 0)
            fprintf(stderr, "tern-workload: %s\n", msg);
        *status = len > 0 ? 1 : 0;
        return true;
    }
    close(p[0]);
    if (setsid() < 0)
        _exit(1);
    pid_t pid = fork();
    if (pid < 0)
        _exit(1);
    if (pid > 0)
        _exit(0); /* the workload is now the child of init (or a subreaper) */
    ready_fd = p[1];
    close_inherited(ready_fd);
    umask(022);
    int nul = open("/dev/null", O_RDWR);
    int log = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (nul < 0 || log < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(log, 2) < 0) {
        char m[PATH_MAX + 128];
        if (snprintf(m, sizeof m, "cannot open /dev/null or the log %s: %s", log_path,
                     strerror(errno)) >= (int)sizeof m)
            m[sizeof m - 1] = '\0';
        report_ready(m);
        _exit(1);
    }
    if (nul > 2)
        close(nul);
    if (log > 2)
        close(log);
    return false;
}

/* ---- the workloads ----------------------------------------------------------------------- */

typedef struct opts {
    const char *mode;
    char *dir;     /* absolute */
    char *file;    /* absolute, writer only */
    char *pidfile; /* absolute, or NULL */
    unsigned rate;
    unsigned health_ms; /* share only */
    bool daemonize;
} opts_t;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000ull + (uint64_t)ts.tv_nsec / 1000000ull;
}

/* Waits up to ns (UINT64_MAX: for ever) or until SIGTERM/SIGINT. The signals are
 * blocked except inside ppoll, so one that comes between the check and the wait is
 * not lost. */
static void wait_ns(uint64_t ns, const sigset_t *unblocked)
{
    if (stop_requested)
        return;
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                          .tv_nsec = (long)(ns % 1000000000ull)};
    ppoll(NULL, 0, ns == UINT64_MAX ? NULL : &ts, unblocked);
}

static int run_writer(const opts_t *o, const sigset_t *unblocked)
{
    char err[512];
    int fd = open(o->file, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, sizeof err, "writer: data disk %s: %s", o->file, strerror(errno));
        goto Fail;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(err, sizeof err, "writer: data disk %s: %s", o->file,
                 errno == EWOULDBLOCK ? "another writer holds it" : strerror(errno));
        goto Fail;
    }
    scan_t s;
    if (scan_disk(fd, false, &s) != 0) {
        snprintf(err, sizeof err, "writer: scanning %s: %s", o->file, strerror(errno));
        goto Fail;
    }
    if (s.slots == 0) {
        snprintf(err, sizeof err, "writer: data disk %s has no room for one record", o->file);
        goto Fail;
    }
    if (o->pidfile != NULL && pidfile_write(o->pidfile) != 0) {
        snprintf(err, sizeof err, "cannot write pid file %s: %s", o->pidfile, strerror(errno));
        goto Fail;
    }
    say("writer: %s: continuing at record %llu of %llu (%u a second)", o->file,
        (unsigned long long)s.contiguous, (unsigned long long)s.slots, o->rate);
    report_ready("");

    uint64_t next = s.contiguous, written = 0;
    uint64_t start = mono_ns(), period = 1000000000ull / o->rate;
    unsigned char *batch = malloc((size_t)BATCH_MAX * RECORD_SIZE);
    if (batch == NULL)
        abort();
    bool full_said = false;
    int rc = 0;
    for (;;) {
        /* A writer that is behind never waits, so it lets pending signals in here:
         * otherwise a SIGTERM stays blocked for as long as it cannot keep up (the
         * fast writer of tests/integration/test_workload.py). */
        wait_ns(0, unblocked);
        if (stop_requested)
            break;
        if (next >= s.slots) {
            if (!full_said)
                say("writer: %s is full after %llu records; idling", o->file,
                    (unsigned long long)next);
            full_said = true;
            wait_ns(UINT64_MAX, unblocked);
            continue;
        }
        uint64_t now = mono_ns();
        uint64_t due = (now - start) / period + 1; /* records owed since start */
        if (due <= written) {
            wait_ns(start + written * period - now, unblocked);
            continue;
        }
        uint64_t n = due - written;
        if (n > BATCH_MAX)
            n = BATCH_MAX;
        if (n > s.slots - next)
            n = s.slots - next;
        uint64_t ms = wall_ms();
        for (uint64_t i = 0; i < n; i++)
            record_make(batch + i * RECORD_SIZE, next + i, ms);
        size_t len = (size_t)n * RECORD_SIZE;
        off_t at = (off_t)(next * RECORD_SIZE);
        for (size_t done = 0; done < len;) {
            ssize_t w = pwrite(fd, batch + done, len - done, at + (off_t)done);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                say("writer: write to %s at %lld: %s", o->file, (long long)(at + (off_t)done),
                    w < 0 ? strerror(errno) : "nothing written");
                rc = 1;
                goto Out;
            }
            done += (size_t)w;
        }
        if (fdatasync(fd) != 0) {
            say("writer: fdatasync %s: %s", o->file, strerror(errno));
            rc = 1;
            goto Out;
        }
        next += n;
        written += n;
    }
Out:
    say("writer: stopping after record %llu", next > 0 ? (unsigned long long)next - 1 : 0ull);
    free(batch);
    close(fd);
    if (o->pidfile != NULL)
        pidfile_remove(o->pidfile);
    return rc;
Fail:
    if (fd >= 0)
        close(fd);
    if (ready_fd >= 0)
        report_ready(err);
    else
        fprintf(stderr, "tern-workload: %s\n", err);
    return 1;
}

static int run_idle(const opts_t *o, const sigset_t *unblocked)
{
    if (o->pidfile != NULL && pidfile_write(o->pidfile) != 0) {
        char err[512];
        snprintf(err, sizeof err, "cannot write pid file %s: %s", o->pidfile, strerror(errno));
        if (ready_fd >= 0)
            report_ready(err);
        else
            fprintf(stderr, "tern-workload: %s\n", err);
        return 1;
    }
    say("idle: running in %s", o->dir);
    report_ready("");
    while (!stop_requested)
        wait_ns(UINT64_MAX, unblocked);
    say("idle: stopping");
    if (o->pidfile != NULL)
        pidfile_remove(o->pidfile);
    return 0;
}

/* The share's health check: <dir>/export is a directory of its own (opened without
 * following a symlink, looked up again each time, so an export renamed away fails)
 * in which a probe file can be made and removed. 0, or -1 with the reason in err. */
static int share_check(const char *dir, char *err, size_t errlen)
{
    char export[PATH_MAX];
    if (snprintf(export, sizeof export, "%s/export", dir) >= (int)sizeof export) {
        snprintf(err, errlen, "%s/export: path too long", dir);
        return -1;
    }
    int dfd = open(export, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        snprintf(err, errlen, "export %s: %s", export,
                 errno == ELOOP || errno == ENOTDIR ? "not a directory of its own (a symlink or "
                                                      "a file)"
                                                    : strerror(errno));
        return -1;
    }
    int fd =
        openat(dfd, SHARE_PROBE_NAME, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    int rc = 0;
    if (fd < 0 || close(fd) != 0 || unlinkat(dfd, SHARE_PROBE_NAME, 0) != 0) {
        snprintf(err, errlen, "export %s: cannot make and remove a probe file: %s", export,
                 strerror(errno));
        rc = -1;
    }
    close(dfd);
    return rc;
}

static int run_share(const opts_t *o, const sigset_t *unblocked)
{
    char err[PATH_MAX + 256];
    if (share_check(o->dir, err, sizeof err) != 0) {
        char msg[sizeof err + 32];
        snprintf(msg, sizeof msg, "share: refusing to start: %s", err);
        if (ready_fd >= 0) {
            say("%s", msg); /* in the log too: the starter's stderr may be nobody's */
            report_ready(msg);
        } else {
            fprintf(stderr, "tern-workload: %s\n", msg);
        }
        return 1;
    }
    if (o->pidfile != NULL && pidfile_write(o->pidfile) != 0) {
        snprintf(err, sizeof err, "cannot write pid file %s: %s", o->pidfile, strerror(errno));
        if (ready_fd >= 0)
            report_ready(err);
        else
            fprintf(stderr, "tern-workload: %s\n", err);
        return 1;
    }
    say("share: serving %s/export (health check every %u ms)", o->dir, o->health_ms);
    report_ready("");
    unsigned failures = 0;
    int rc = 0;
    uint64_t period = (uint64_t)o->health_ms * 1000000ull, due = mono_ns() + period;
    while (!stop_requested) {
        /* ppoll returns early for any signal let in: wait out the period. */
        uint64_t now = mono_ns();
        if (now < due) {
            wait_ns(due - now, unblocked);
            continue;
        }
        due = now + period;
        if (share_check(o->dir, err, sizeof err) == 0) {
            if (failures > 0)
                say("share: health check passes again after %u failure(s)", failures);
            failures = 0;
            continue;
        }
        failures++;
        say("share: health check %u of %d failed: %s", failures, SHARE_FAILURES_MAX, err);
        if (failures >= SHARE_FAILURES_MAX) {
            say("share: %d health checks failed in a row: exiting", SHARE_FAILURES_MAX);
            rc = 1;
            break;
        }
    }
    if (rc == 0)
        say("share: stopping");
    if (o->pidfile != NULL)
        pidfile_remove(o->pidfile);
    return rc;
}

static int run_verify(const char *file)
{
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    scan_t s;
    if (fd < 0 || scan_disk(fd, true, &s) != 0) {
        fprintf(stderr, "tern-workload verify: %s: %s\n", file, strerror(errno));
        if (fd >= 0)
            close(fd);
        return 2;
    }
    close(fd);
    printf("%llu\n", (unsigned long long)s.valid);
    if (s.faults > 0) {
        fprintf(stderr, "tern-workload verify: %s: %llu fault(s) before record %llu\n", file,
                (unsigned long long)s.faults, (unsigned long long)s.last_slot);
        return 1;
    }
    return 0;
}

/* ---- arguments ----------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fputs("usage: tern-workload idle --dir INSTANCE_DIR [--daemonize] [--pidfile FILE]\n"
          "       tern-workload writer --dir INSTANCE_DIR [--file DISK] [--rate N[/s]]\n"
          "                            [--daemonize] [--pidfile FILE]\n"
          "       tern-workload share --dir STORAGE_DIR [--health-ms N] [--daemonize]\n"
          "                           [--pidfile FILE]\n"
          "       tern-workload verify FILE\n"
          "\n"
          "  --dir DIR       the instance's directory (its log is DIR/workload.log)\n"
          "  --file DISK     the writer's data disk (default DIR/disks/data.img)\n"
          "  --rate N        records a second, 1 to 100000 (default 10)\n"
          "  --health-ms N   the share's health check period, 10 to 3600000 (default 5000)\n"
          "  --daemonize     detach (never a child of the caller); return once running\n"
          "  --pidfile FILE  written once running, removed on a clean stop\n",
          f);
}

/* An absolute form of `path`, the directory of which must exist. */
static char *absolute(const char *path)
{
    if (path[0] == '/')
        return strdup(path);
    char cwd[PATH_MAX];
    char *out = NULL;
    if (getcwd(cwd, sizeof cwd) == NULL || asprintf(&out, "%s/%s", cwd, path) < 0)
        return NULL;
    return out;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    opts_t o = {.mode = argv[1], .rate = DEFAULT_RATE, .health_ms = SHARE_HEALTH_MS_DEFAULT};
    if (strcmp(o.mode, "--help") == 0 || strcmp(o.mode, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(o.mode, "verify") == 0) {
        if (argc != 3) {
            usage(stderr);
            return 2;
        }
        return run_verify(argv[2]);
    }
    if (strcmp(o.mode, "idle") != 0 && strcmp(o.mode, "writer") != 0 &&
        strcmp(o.mode, "share") != 0) {
        fprintf(stderr, "tern-workload: unknown workload \"%s\" (idle, writer, share or verify)\n",
                o.mode);
        return 2;
    }
    const char *dir = NULL, *file = NULL, *pidfile = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--daemonize") == 0) {
            o.daemonize = true;
            continue;
        }
        if (v == NULL ||
            (strcmp(a, "--dir") != 0 && strcmp(a, "--file") != 0 && strcmp(a, "--rate") != 0 &&
             strcmp(a, "--pidfile") != 0 && strcmp(a, "--health-ms") != 0)) {
            fprintf(stderr, "tern-workload: %s: %s\n", a,
                    v == NULL ? "expected a value" : "unknown option");
            usage(stderr);
            return 2;
        }
        i++;
        if (strcmp(a, "--dir") == 0) {
            dir = v;
        } else if (strcmp(a, "--file") == 0) {
            file = v;
        } else if (strcmp(a, "--pidfile") == 0) {
            pidfile = v;
        } else if (strcmp(a, "--health-ms") == 0) {
            char *end = NULL;
            errno = 0;
            unsigned long ms = strtoul(v, &end, 10);
            if (end == v || *end != '\0' || errno != 0 || v[0] == '-' || ms < SHARE_HEALTH_MS_MIN ||
                ms > SHARE_HEALTH_MS_MAX) {
                fprintf(stderr, "tern-workload: --health-ms: expected %d to %d, got \"%s\"\n",
                        SHARE_HEALTH_MS_MIN, SHARE_HEALTH_MS_MAX, v);
                return 2;
            }
            if (strcmp(o.mode, "share") != 0) {
                fprintf(stderr, "tern-workload: --health-ms is the share's\n");
                return 2;
            }
            o.health_ms = (unsigned)ms;
        } else {
            char *end = NULL;
            errno = 0;
            unsigned long r = strtoul(v, &end, 10);
            if (end == v || errno != 0 || r < 1 || r > RATE_MAX ||
                !(*end == '\0' || strcmp(end, "/s") == 0)) {
                fprintf(stderr,
                        "tern-workload: --rate: expected 1 to %d records a second, "
                        "got \"%s\"\n",
                        RATE_MAX, v);
                return 2;
            }
            o.rate = (unsigned)r;
        }
    }
    if (dir == NULL) {
        fprintf(stderr, "tern-workload: --dir is required\n");
        return 2;
    }
    if (file != NULL && strcmp(o.mode, "writer") != 0) {
        fprintf(stderr, "tern-workload: --file is the writer's\n");
        return 2;
    }
    struct stat st;
    int st_rc = stat(dir, &st);
    if (st_rc != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "tern-workload: --dir %s: %s\n", dir,
                st_rc != 0 ? strerror(errno) : "not a directory");
        return 2;
    }
    o.dir = realpath(dir, NULL);
    if (file != NULL)
        o.file = absolute(file);
    else if (asprintf(&o.file, "%s/disks/data.img", o.dir) < 0)
        o.file = NULL;
    o.pidfile = pidfile != NULL ? absolute(pidfile) : NULL;
    int rc = 1;
    if (o.dir == NULL || o.file == NULL || (pidfile != NULL && o.pidfile == NULL)) {
        fprintf(stderr, "tern-workload: %s\n", strerror(errno));
        rc = 2;
        goto Done;
    }
    char err[512];
    if (o.pidfile != NULL && pidfile_check(o.pidfile, err, sizeof err) != 0) {
        fprintf(stderr, "tern-workload: %s\n", err);
        goto Done;
    }

    /* SIGTERM and SIGINT are blocked but while waiting (wait_ns); their handler only
     * sets a flag. */
    sigset_t block, unblocked;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &unblocked);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGHUP, SIG_IGN); /* a closing terminal is not a stop */

    if (o.daemonize) {
        char log[PATH_MAX];
        snprintf(log, sizeof log, "%s/workload.log", o.dir);
        if (daemonize(log, &rc))
            goto Done; /* the starting process: the workload runs detached, or failed */
    }
    if (strcmp(o.mode, "writer") == 0)
        rc = run_writer(&o, &unblocked);
    else if (strcmp(o.mode, "share") == 0)
        rc = run_share(&o, &unblocked);
    else
        rc = run_idle(&o, &unblocked);
Done:
    free(o.dir);
    free(o.file);
    free(o.pidfile);
    return rc;
}
