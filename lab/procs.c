/*
 * procs.c -- starting, finding and stopping a lab's processes (procs.h). Owns nothing
 * past a call: the descriptors it opens are closed before it returns.
 */
#include "procs.h"

#include "proc_check.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KILL_WAIT_MS 5000
#define POLL_MS      20
#define TAIL_BYTES   2048

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Writes all of buf to fd (a pipe in the child: async-signal-safe calls only). */
static void write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

/* Reads exactly n bytes unless EOF comes first; returns the bytes read. */
static size_t read_full(int fd, void *buf, size_t n)
{
    char *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

int procs_spawn_detached(char *const argv[], const char *cwd, const char *log_path, pid_t *pid,
                         char *err, size_t errlen)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    int logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logfd < 0) {
        snprintf(err, errlen, "%s: %s", log_path, strerror(errno));
        close(p[0]);
        close(p[1]);
        return -1;
    }
    fflush(NULL);
    pid_t mid = fork();
    if (mid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        close(logfd);
        return -1;
    }
    if (mid == 0) {
        /* The middle process: a new session, then the real child, then gone. */
        close(p[0]);
        if (setsid() < 0)
            _exit(1);
        pid_t child = fork();
        if (child != 0)
            _exit(child < 0 ? 1 : 0);
        pid_t self = getpid();
        write_all(p[1], &self, sizeof self);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        int nul = open("/dev/null", O_RDONLY);
        int e = 0;
        if (nul < 0 || dup2(nul, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0 ||
            (cwd != NULL && chdir(cwd) != 0)) {
            e = errno;
        } else {
            execv(argv[0], argv);
            e = errno;
        }
        write_all(p[1], &e, sizeof e);
        _exit(127);
    }
    close(p[1]);
    close(logfd);
    while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
        ;
    pid_t child = 0;
    int e = 0;
    size_t got = read_full(p[0], &child, sizeof child);
    size_t got_e = got == sizeof child ? read_full(p[0], &e, sizeof e) : 0;
    close(p[0]);
    if (got != sizeof child) {
        snprintf(err, errlen, "%s: could not be started (fork or setsid failed)", argv[0]);
        return -1;
    }
    if (got_e == sizeof e) {
        snprintf(err, errlen, "%s: %s", argv[0], strerror(e));
        return -1;
    }
    *pid = child;
    return 0;
}

int procs_pidfile_write(const char *path, pid_t pid)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    char line[32];
    int n = snprintf(line, sizeof line, "%ld\n", (long)pid);
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

int procs_stop(proc_entry_t *entries, size_t n, unsigned grace_ms)
{
    bool *live = calloc(n == 0 ? 1 : n, sizeof *live);
    if (live == NULL)
        abort();
    size_t left = 0;
    int not_stopped = 0;
    for (size_t i = 0; i < n; i++) {
        proc_entry_t *e = &entries[i];
        /* A process killed -9 before (its main thread a zombie) may still have a
         * thread running, holding its Redis connections: it is waited for like a live
         * one, or a successor would start beside it (test_restart_claim). */
        live[i] = !dc_proc_gone(e->pid, e->comm);
        if (!live[i]) {
            printf("%s: not running (stale pid file %s)\n", e->name, e->pidfile);
            unlink(e->pidfile); /* may be gone already: nothing to report */
            continue;
        }
        if (kill(e->pid, SIGTERM) != 0 && errno != ESRCH) {
            printf("%s: cannot signal pid %ld: %s\n", e->name, (long)e->pid, strerror(errno));
            live[i] = false;
            not_stopped++;
            continue;
        }
        left++;
    }
    for (int round = 0; round < 2 && left > 0; round++) {
        uint64_t deadline = now_ms() + (round == 0 ? grace_ms : KILL_WAIT_MS);
        for (;;) {
            size_t still = 0;
            for (size_t i = 0; i < n; i++) {
                if (!live[i])
                    continue;
                if (!dc_proc_gone(entries[i].pid, entries[i].comm)) {
                    still++;
                    continue;
                }
                live[i] = false;
                printf("%s: stopped (pid %ld%s)\n", entries[i].name, (long)entries[i].pid,
                       round == 0 ? "" : ", killed after the grace period");
                unlink(entries[i].pidfile); /* the process may have removed it itself */
            }
            left = still;
            if (still == 0 || now_ms() >= deadline)
                break;
            sleep_ms(POLL_MS);
        }
        if (round == 0)
            for (size_t i = 0; i < n; i++)
                if (live[i])
                    kill(entries[i].pid, SIGKILL); /* it may end on its own meanwhile */
    }
    for (size_t i = 0; i < n; i++) {
        if (live[i]) {
            printf("%s: still running (pid %ld) after SIGKILL\n", entries[i].name,
                   (long)entries[i].pid);
            not_stopped++;
        }
    }
    free(live);
    return not_stopped;
}

const char *procs_log_tail(const char *path)
{
    static char buf[TAIL_BYTES + 1];
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return buf;
    struct stat st;
    off_t from = 0;
    if (fstat(fd, &st) == 0 && st.st_size > TAIL_BYTES)
        from = st.st_size - TAIL_BYTES;
    ssize_t n = pread(fd, buf, TAIL_BYTES, from);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    /* Started mid-file: drop the partial first line. */
    char *nl = from > 0 ? strchr(buf, '\n') : NULL;
    if (nl != NULL)
        memmove(buf, nl + 1, strlen(nl + 1) + 1);
    return buf;
}
