/*
 * redis_embedded.c -- the private redis-server child of the embedded default.
 *
 * This file owns the child process (started with fork + exec, no shell; stopped by
 * PID), the files it writes in the data directory (redis.conf, redis.lock, and the
 * socket it removes when stale) and the strings of a redis_embedded_t. It does not
 * own the data itself: redis-server writes redis.log, the append-only files and the
 * socket.
 *
 * Ownership of a data directory is settled twice:
 *   - redis.lock carries an exclusive flock(2). The lock is taken before anything is
 *     touched and its file description is inherited by redis-server, so the lock
 *     lives exactly as long as that server does: two ternd starting at once on one
 *     directory cannot both spawn a server (two servers would share the AOF).
 *   - a socket that answers PING belongs to someone else (perhaps a redis-server an
 *     operator started by hand, which holds no lock); a socket that does not answer
 *     is a leftover of a crash and is removed.
 *
 * The child dies with ternd: it asks the kernel for SIGTERM when its parent thread
 * exits (PR_SET_PDEATHSIG; start it from the main thread), and it runs in a process
 * group of its own so a Ctrl-C at the terminal reaches ternd only, which then stops
 * the server in order. Its stdout and stderr go to redis.log too, so errors printed
 * before redis-server opens its log file (a bad configuration) show in our message.
 *
 * Everything here blocks (waitpid, a synchronous hiredis connection, short sleeps):
 * it runs before the loop starts and after it ends.
 */
#include "redis/redis_embedded.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/fd_inherit.h"

#define PING_TIMEOUT_MS  250 /* per attempt: connect and reply */
#define POLL_INTERVAL_MS 20
#define LOG_TAIL_LINES   8
#define LOG_TAIL_BYTES   4096

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Creates dir and its missing parents (new directories get mode 0700). */
static int make_dirs(const char *dir, char *err, size_t errlen)
{
    char *p = xstrdup(dir);
    int rc = 0;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char saved = *s;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST) {
            rc = err_set(err, errlen, TERN_EIO,
                         "embedded redis: cannot create data directory %s: %s", p, strerror(errno));
            break;
        }
        *s = saved;
        if (saved == '\0')
            break;
    }
    free(p);
    if (rc == 0) {
        struct stat st;
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            rc = err_set(err, errlen, TERN_EIO,
                         "embedded redis: data directory %s is not a directory", dir);
    }
    return rc;
}

/* Connects to the socket and sends PING. Returns 1 on PONG, 0 when nothing answers
 * (or the server is still loading its data), and sets *loading on "-LOADING". */
static int ping_socket(const char *path, bool *loading)
{
    struct timeval tv = {.tv_sec = 0, .tv_usec = PING_TIMEOUT_MS * 1000};
    if (loading != NULL)
        *loading = false;
    redisContext *rc = redisConnectUnixWithTimeout(path, tv);
    if (rc == NULL)
        return 0;
    int ok = 0;
    if (rc->err == 0 && redisSetTimeout(rc, tv) == REDIS_OK) {
        redisReply *r = redisCommand(rc, "PING");
        if (r != NULL) {
            if (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0)
                ok = 1;
            else if (r->type == REDIS_REPLY_ERROR && loading != NULL &&
                     strncmp(r->str, "LOADING", 7) == 0)
                *loading = true;
            freeReplyObject(r);
        }
    }
    redisFree(rc);
    return ok;
}

/* Finds `name` in PATH (or checks it when it holds a '/'). Returns a malloc'd path or
 * NULL with the message in err. */
static char *find_program(const char *name, char *err, size_t errlen)
{
    if (name == NULL || name[0] == '\0') {
        err_set(err, errlen, TERN_EINVAL, "embedded redis: empty redis-server name");
        return NULL;
    }
    if (strchr(name, '/') != NULL) {
        if (access(name, X_OK) != 0) {
            err_set(err, errlen, TERN_ENOENT, "embedded redis: %s: %s (pass --redis-server)", name,
                    strerror(errno));
            return NULL;
        }
        return xstrdup(name);
    }
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path;;) {
        size_t n = strcspn(p, ":");
        char *cand = n == 0 ? xasprintf("./%s", name) : xasprintf("%.*s/%s", (int)n, p, name);
        struct stat st;
        if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
            return cand;
        free(cand);
        if (p[n] == '\0')
            break;
        p += n + 1;
    }
    err_set(err, errlen, TERN_ENOENT,
            "embedded redis: %s not found in PATH (install the redis-server package or "
            "pass --redis)",
            name);
    return NULL;
}

/* Appends `s` to f as a redis.conf double-quoted string. */
static void conf_quoted(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static int write_conf(const char *conf, const char *dir, const char *sock, const char *logf,
                      char *err, size_t errlen)
{
    int fd = open(conf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (f == NULL) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return err_set(err, errlen, TERN_EIO, "embedded redis: cannot write %s: %s", conf,
                       strerror(e));
    }
    fputs("# Written by ternd at each start of its embedded Redis; edits are lost.\n"
          "# Unix socket only (port 0 opens no TCP listener), append-only persistence.\n",
          f);
    fputs("port 0\nbind 127.0.0.1\nunixsocket ", f);
    conf_quoted(f, sock);
    fputs("\nunixsocketperm 700\ndir ", f);
    conf_quoted(f, dir);
    fputs("\nappendonly yes\nappendfsync everysec\ndaemonize no\nlogfile ", f);
    conf_quoted(f, logf);
    fputs("\nsave \"\"\nprotected-mode yes\n", f);
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad)
        return err_set(err, errlen, TERN_EIO, "embedded redis: cannot write %s", conf);
    return 0;
}

/* The last lines of the log written since byte `from`, for an error message. */
static void log_tail(const char *logf, off_t from, char *out, size_t cap)
{
    out[0] = '\0';
    int fd = open(logf, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= from) {
        close(fd);
        return;
    }
    off_t start = st.st_size - from > LOG_TAIL_BYTES ? st.st_size - LOG_TAIL_BYTES : from;
    char buf[LOG_TAIL_BYTES + 1];
    ssize_t n = pread(fd, buf, LOG_TAIL_BYTES, start);
    close(fd);
    if (n <= 0)
        return;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    buf[n] = '\0';
    /* Keep the last LOG_TAIL_LINES lines. */
    const char *p = buf + n;
    int lines = 0;
    while (p > buf) {
        if (p[-1] == '\n' && ++lines == LOG_TAIL_LINES)
            break;
        p--;
    }
    size_t len = strlen(p);
    if (len >= cap)
        p += len - (cap - 1); /* keep the end: the cause is usually last */
    len = strlen(p);
    memcpy(out, p, len + 1);
}

/* Describes how a child ended: "exited with status 1" or "was killed by signal 9". */
static void describe_status(int status, char *out, size_t cap)
{
    if (WIFEXITED(status))
        snprintf(out, cap, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, cap, "was killed by signal %d", WTERMSIG(status));
    else
        snprintf(out, cap, "ended (status 0x%x)", (unsigned)status);
}

/* Moves a close-on-exec descriptor to a number above 3 (closing the original), so the
 * child's dup2 onto 0-3 cannot clobber it even when ternd runs with stdio closed.
 * Returns the descriptor, or -1 with errno set (and fd closed). */
static int fd_above_3(int fd)
{
    if (fd > 3)
        return fd;
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, 4);
    int e = errno;
    close(fd);
    errno = e;
    return moved;
}

/* Kills and reaps a child that failed to start. */
static void kill_child(pid_t pid)
{
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

/* In the child, between fork and exec: only async-signal-safe calls. On failure the
 * errno is written to `report` (close-on-exec, so EOF means exec succeeded). */
static void __attribute__((noreturn))
child_exec(pid_t parent, int lockfd, int logfd, int report, const char *prog, char *const argv[])
{
    int e;
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) {
        /* The parent died before prctl took effect: nobody would stop this server. */
        _exit(126);
    }
    setpgid(0, 0);

    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            sigaction(sig, &dfl, NULL); /* fails harmlessly for reserved numbers */

    /* lockfd, logfd and report are all above 3 (fd_above_3), so these dup2 calls
     * cannot clobber them; dup2 clears close-on-exec on the copies. */
    int nul = open("/dev/null", O_RDONLY);
    if (nul < 0 || dup2(nul, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0)
        goto Fail;
    /* fd 3: the lock, inherited by redis-server so it lives as long as the server. */
    if (dup2(lockfd, 3) < 0)
        goto Fail;
    /* Everything else ternd had open is not the server's business: mark it
     * close-on-exec (`report` already is, and must stay open until exec). */
    if (close_range(4, ~0u, CLOSE_RANGE_CLOEXEC) != 0) {
        for (int fd = 4; fd < 4096; fd++)
            if (fd != report)
                close(fd);
    }
    execv(prog, argv);
Fail:
    e = errno;
    (void)!write(report, &e, sizeof e);
    _exit(127);
}

int redis_embedded_start(const char *data_dir, const char *redis_server, unsigned timeout_ms,
                         redis_embedded_t *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    uint64_t deadline = clock_mono_ms() + timeout_ms;
    int rc = 0;
    int lockfd = -1, logfd = -1, pipefd[2] = {-1, -1};
    char *dir = NULL, *sock = NULL, *conf = NULL, *logf = NULL, *lockf = NULL, *prog = NULL;
    pid_t pid = -1;

    if (data_dir == NULL || data_dir[0] == '\0')
        return err_set(err, errlen, TERN_EINVAL, "embedded redis: empty data directory");
    rc = make_dirs(data_dir, err, errlen);
    if (rc != 0)
        return rc;
    dir = realpath(data_dir, NULL);
    if (dir == NULL)
        return err_set(err, errlen, TERN_EIO, "embedded redis: %s: %s", data_dir, strerror(errno));
    sock = xasprintf("%s/redis.sock", dir);
    conf = xasprintf("%s/redis.conf", dir);
    logf = xasprintf("%s/redis.log", dir);
    lockf = xasprintf("%s/redis.lock", dir);
    if (strlen(sock) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        rc = err_set(err, errlen, TERN_EINVAL,
                     "embedded redis: socket path %s is longer than %zu bytes; use a "
                     "shorter --data-dir",
                     sock, sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
        goto Error;
    }

    prog = find_program(redis_server, err, errlen);
    if (prog == NULL) {
        rc = TERN_ENOENT;
        goto Error;
    }

    /* Ownership, first by lock, then by asking the socket. A lock held by a server
     * that does not answer is most likely the previous server still flushing after
     * its ternd died: wait for it, within the same deadline. */
    lockfd = open(lockf, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lockfd < 0 || (lockfd = fd_above_3(lockfd)) < 0) {
        rc = err_set(err, errlen, TERN_EIO, "embedded redis: cannot open %s: %s", lockf,
                     strerror(errno));
        goto Error;
    }
    while (flock(lockfd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR)
            continue;
        if (ping_socket(sock, NULL)) {
            rc = err_set(err, errlen, TERN_EEXIST,
                         "embedded redis: %s already answers PING: another ternd owns data "
                         "directory %s; stop it or use another --data-dir",
                         sock, dir);
            goto Error;
        }
        if (clock_mono_ms() >= deadline) {
            rc = err_set(err, errlen, TERN_EEXIST,
                         "embedded redis: data directory %s is in use (%s stayed locked for "
                         "%u ms by a server that does not answer); stop it or use another "
                         "--data-dir",
                         dir, lockf, timeout_ms);
            goto Error;
        }
        sleep_ms(POLL_INTERVAL_MS);
    }
    struct stat st;
    if (lstat(sock, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            rc = err_set(err, errlen, TERN_EEXIST,
                         "embedded redis: %s exists and is not a socket; remove it", sock);
            goto Error;
        }
        if (ping_socket(sock, NULL)) {
            rc = err_set(err, errlen, TERN_EEXIST,
                         "embedded redis: %s already answers PING: another redis-server "
                         "owns data directory %s; stop it or use another --data-dir",
                         sock, dir);
            goto Error;
        }
        if (unlink(sock) != 0 && errno != ENOENT) {
            rc = err_set(err, errlen, TERN_EIO, "embedded redis: cannot remove stale socket %s: %s",
                         sock, strerror(errno));
            goto Error;
        }
    }

    rc = write_conf(conf, dir, sock, logf, err, errlen);
    if (rc != 0)
        goto Error;
    logfd = open(logf, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (logfd < 0 || (logfd = fd_above_3(logfd)) < 0) {
        rc = err_set(err, errlen, TERN_EIO, "embedded redis: cannot open %s: %s", logf,
                     strerror(errno));
        goto Error;
    }
    off_t log_start = lseek(logfd, 0, SEEK_END);
    if (log_start < 0)
        log_start = 0;
    if (pipe2(pipefd, O_CLOEXEC) != 0 || (pipefd[0] = fd_above_3(pipefd[0])) < 0 ||
        (pipefd[1] = fd_above_3(pipefd[1])) < 0) {
        rc = err_set(err, errlen, TERN_EIO, "embedded redis: pipe: %s", strerror(errno));
        goto Error;
    }

    /* redis-server gets what the child's dup2 calls give it, nothing else of ternd. */
    if ((rc = fd_inherit_none(err, errlen)) != 0)
        goto Error;
    char *argv[] = {prog, conf, NULL};
    pid_t parent = getpid();
    pid = fork();
    if (pid < 0) {
        rc = err_set(err, errlen, TERN_EIO, "embedded redis: fork: %s", strerror(errno));
        goto Error;
    }
    if (pid == 0)
        child_exec(parent, lockfd, logfd, pipefd[1], prog, argv);

    close(pipefd[1]);
    pipefd[1] = -1;
    int child_errno = 0;
    ssize_t n;
    do {
        n = read(pipefd[0], &child_errno, sizeof child_errno);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
        waitpid(pid, NULL, 0);
        pid = -1;
        rc = err_set(err, errlen, TERN_EIO, "embedded redis: cannot run %s: %s", prog,
                     strerror(child_errno));
        goto Error;
    }

    /* Wait, with a bound, until it answers. */
    bool loading = false;
    for (;;) {
        int status;
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            char how[64], tail[2048];
            describe_status(status, how, sizeof how);
            log_tail(logf, log_start, tail, sizeof tail);
            pid = -1;
            rc = err_set(err, errlen, TERN_EIO,
                         "embedded redis: %s %s before answering PING; last lines of "
                         "%s:\n%s",
                         prog, how, logf, tail[0] != '\0' ? tail : "(empty)");
            goto Error;
        }
        if (access(sock, F_OK) == 0 && ping_socket(sock, &loading))
            break;
        if (clock_mono_ms() >= deadline) {
            char tail[2048];
            kill_child(pid);
            pid = -1;
            log_tail(logf, log_start, tail, sizeof tail);
            rc = err_set(err, errlen, TERN_EIO,
                         "embedded redis: %s did not answer PING on %s within %u ms%s; "
                         "last lines of %s:\n%s",
                         prog, sock, timeout_ms,
                         loading ? " (still loading its data: raise the timeout)" : "", logf,
                         tail[0] != '\0' ? tail : "(empty)");
            goto Error;
        }
        sleep_ms(POLL_INTERVAL_MS);
    }

    r->pid = pid;
    r->dir = dir;
    r->socket_path = sock;
    dir = sock = NULL;
    rc = 0;
    goto Exit;

Error:
    if (pid > 0)
        kill_child(pid);
Exit:
    if (pipefd[0] >= 0)
        close(pipefd[0]);
    if (pipefd[1] >= 0)
        close(pipefd[1]);
    if (logfd >= 0)
        close(logfd);
    if (lockfd >= 0)
        close(lockfd); /* the server keeps its own copy, and with it the lock */
    free(dir);
    free(sock);
    free(conf);
    free(logf);
    free(lockf);
    free(prog);
    return rc;
}

void redis_embedded_stop(redis_embedded_t *r, unsigned timeout_ms)
{
    if (r == NULL)
        return;
    if (r->pid > 0) {
        pid_t pid = r->pid;
        bool reaped = false;
        if (kill(pid, SIGTERM) == 0) {
            uint64_t deadline = clock_mono_ms() + timeout_ms;
            for (;;) {
                pid_t w = waitpid(pid, NULL, WNOHANG);
                if (w == pid || (w < 0 && errno == ECHILD)) {
                    reaped = true;
                    break;
                }
                if (clock_mono_ms() >= deadline)
                    break;
                sleep_ms(POLL_INTERVAL_MS / 2);
            }
        }
        if (!reaped)
            kill_child(pid);
    }
    free(r->dir);
    free(r->socket_path);
    memset(r, 0, sizeof *r);
}
