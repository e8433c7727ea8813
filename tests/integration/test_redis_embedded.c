/*
 * test_redis_embedded.c -- engine/redis/redis_embedded.c against the real redis-server.
 *
 * Each test works in a fresh directory under a mkdtemp base. Every server a test
 * starts is recorded in the fixture and stopped by PID in the teardown if the test
 * did not get to stop it itself (an assertion failed), so a failing test leaves no
 * redis-server behind. The process is made a child subreaper so that a server whose
 * ternd died is reparented to this test, which can then wait for it with a bound.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/error.h"
#include "redis/redis_embedded.h"

#define START_TIMEOUT_MS 10000
#define STOP_TIMEOUT_MS  5000

typedef struct fixture {
    char base[64];
    char dir[128]; /* this test's data directory: <base>/<n>/data (not created) */
    int n;
    redis_embedded_t r[2];
    pid_t extra_pid; /* a helper process or orphan a test must not leave behind */
} fixture_t;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int group_setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    if (f == NULL)
        return -1;
    snprintf(f->base, sizeof f->base, "/tmp/tern-test-embedded-XXXXXX");
    if (mkdtemp(f->base) == NULL)
        return -1;
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
        return -1;
    *state = f;
    return 0;
}

static int group_teardown(void **state)
{
    fixture_t *f = *state;
    nftw(f->base, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static int setup(void **state)
{
    fixture_t *f = *state;
    f->n++;
    snprintf(f->dir, sizeof f->dir, "%s/%d/data", f->base, f->n);
    memset(f->r, 0, sizeof f->r);
    f->extra_pid = 0;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(f->r); i++)
        redis_embedded_stop(&f->r[i], STOP_TIMEOUT_MS);
    if (f->extra_pid > 0) {
        kill(f->extra_pid, SIGKILL);
        waitpid(f->extra_pid, NULL, 0);
    }
    return 0;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Sends one command on a fresh connection to the socket; returns the reply. */
static redisReply *command(const char *sock, const char *fmt, ...)
{
    struct timeval tv = {.tv_sec = 2};
    redisContext *c = redisConnectUnixWithTimeout(sock, tv);
    assert_non_null(c);
    if (c->err != 0)
        fail_msg("connect %s: %s", sock, c->errstr);
    redisSetTimeout(c, tv);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    assert_non_null(r);
    return r;
}

static bool answers_ping(const char *sock)
{
    struct timeval tv = {.tv_sec = 1};
    redisContext *c = redisConnectUnixWithTimeout(sock, tv);
    bool ok = false;
    if (c != NULL && c->err == 0) {
        redisReply *r = redisCommand(c, "PING");
        ok = r != NULL && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
        if (r != NULL)
            freeReplyObject(r);
    }
    if (c != NULL)
        redisFree(c);
    return ok;
}

static void start_ok(fixture_t *f, int slot)
{
    char err[2048] = "";
    int rc = redis_embedded_start(f->dir, "redis-server", START_TIMEOUT_MS, &f->r[slot], err,
                                  sizeof err);
    if (rc != 0)
        fail_msg("start failed (%d): %s", rc, err);
    assert_true(f->r[slot].pid > 0);
}

/* True when the process is gone (reaped, or a zombie nobody reaped yet). */
static bool process_gone(pid_t pid)
{
    if (kill(pid, 0) != 0)
        return errno == ESRCH;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return true;
    bool zombie = fgets(buf, sizeof buf, fp) != NULL && strstr(buf, ") Z ") != NULL;
    fclose(fp);
    return zombie;
}

static void test_start_persist_restart(void **state)
{
    fixture_t *f = *state;
    start_ok(f, 0);

    /* The data directory was created (with its parent), private to its owner. */
    struct stat st;
    assert_int_equal(stat(f->dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    char sock[256];
    snprintf(sock, sizeof sock, "%s/redis.sock", f->r[0].dir);
    assert_string_equal(f->r[0].socket_path, sock);
    assert_int_equal(f->r[0].dir[0], '/');

    redisReply *r = command(sock, "PING");
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    assert_string_equal(r->str, "PONG");
    freeReplyObject(r);

    r = command(sock, "CONFIG GET appendonly");
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 2);
    assert_string_equal(r->element[1]->str, "yes");
    freeReplyObject(r);
    /* No TCP listener: only the socket reaches it. */
    r = command(sock, "CONFIG GET port");
    assert_string_equal(r->element[1]->str, "0");
    freeReplyObject(r);
    r = command(sock, "CONFIG GET save");
    assert_string_equal(r->element[1]->str, "");
    freeReplyObject(r);

    r = command(sock, "SET %s %s", "tern:test:key", "survives a restart");
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);

    pid_t pid = f->r[0].pid;
    redis_embedded_stop(&f->r[0], STOP_TIMEOUT_MS);
    assert_int_equal(f->r[0].pid, 0);
    assert_null(f->r[0].dir);
    assert_true(process_gone(pid));
    assert_false(answers_ping(sock));

    /* Same directory again: the append-only file is replayed. */
    start_ok(f, 0);
    assert_int_not_equal(f->r[0].pid, pid);
    r = command(sock, "GET %s", "tern:test:key");
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, "survives a restart");
    freeReplyObject(r);
    redis_embedded_stop(&f->r[0], STOP_TIMEOUT_MS);
}

static void test_second_start_refused(void **state)
{
    fixture_t *f = *state;
    start_ok(f, 0);
    char err[2048] = "";
    int rc =
        redis_embedded_start(f->dir, "redis-server", START_TIMEOUT_MS, &f->r[1], err, sizeof err);
    assert_int_equal(rc, TERN_EEXIST);
    assert_int_equal(f->r[1].pid, 0);
    char expect[1024];
    snprintf(expect, sizeof expect,
             "embedded redis: %s already answers PING: another ternd owns data directory %s; "
             "stop it or use another --data-dir",
             f->r[0].socket_path, f->r[0].dir);
    assert_string_equal(err, expect);
    /* The first server was not disturbed. */
    assert_true(answers_ping(f->r[0].socket_path));
    redis_embedded_stop(&f->r[0], STOP_TIMEOUT_MS);
}

static void test_foreign_server_refused(void **state)
{
    fixture_t *f = *state;
    /* A redis-server that holds no lock (started by hand) but answers on the socket. */
    start_ok(f, 0);
    char lock[256];
    snprintf(lock, sizeof lock, "%s/redis.lock", f->r[0].dir);
    /* Simulate "no lock" by moving the directory's lock file away: the new start
     * creates and locks a fresh one, so only the PING check can refuse it. */
    char moved[300];
    snprintf(moved, sizeof moved, "%s.old", lock);
    assert_int_equal(rename(lock, moved), 0);
    char err[2048] = "";
    int rc =
        redis_embedded_start(f->dir, "redis-server", START_TIMEOUT_MS, &f->r[1], err, sizeof err);
    assert_int_equal(rc, TERN_EEXIST);
    assert_non_null(strstr(err, "already answers PING: another redis-server owns data "
                                "directory"));
    assert_true(answers_ping(f->r[0].socket_path));
    redis_embedded_stop(&f->r[0], STOP_TIMEOUT_MS);
}

static void test_locked_dir_refused(void **state)
{
    fixture_t *f = *state;
    /* Someone holds the lock but nothing answers: refused once the bound passes. */
    char parent[160], lockpath[300];
    snprintf(parent, sizeof parent, "%s/%d", f->base, f->n);
    snprintf(lockpath, sizeof lockpath, "%s/redis.lock", f->dir);
    assert_int_equal(mkdir(parent, 0700), 0);
    assert_int_equal(mkdir(f->dir, 0700), 0);
    int fd = open(lockpath, O_RDWR | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX), 0);

    char err[2048] = "";
    uint64_t t0 = clock_mono_ms();
    int rc = redis_embedded_start(f->dir, "redis-server", 300, &f->r[0], err, sizeof err);
    uint64_t took = clock_mono_ms() - t0;
    close(fd);
    assert_int_equal(rc, TERN_EEXIST);
    assert_in_range(took, 250, 3000);
    char *real = realpath(f->dir, NULL);
    char expect[1024];
    snprintf(expect, sizeof expect,
             "embedded redis: data directory %s is in use (%s/redis.lock stayed locked for "
             "300 ms by a server that does not answer); stop it or use another --data-dir",
             real, real);
    free(real);
    assert_string_equal(err, expect);

    /* Once the lock is released the directory is usable. */
    start_ok(f, 0);
    redis_embedded_stop(&f->r[0], STOP_TIMEOUT_MS);
}

static void test_stale_socket_removed(void **state)
{
    fixture_t *f = *state;
    /* A socket file left by a crash: bound once, nobody listening. */
    start_ok(f, 0);
    char sock[256];
    snprintf(sock, sizeof sock, "%s", f->r[0].socket_path);
    redis_embedded_stop(&f->r[0], STOP_TIMEOUT_MS);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    assert_true(strlen(sock) < sizeof sa.sun_path);
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    unlink(sock);
    assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
    close(s);
    struct stat st;
    assert_int_equal(lstat(sock, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_false(answers_ping(sock));

    start_ok(f, 0);
    assert_true(answers_ping(sock));
    redis_embedded_stop(&f->r[0], STOP_TIMEOUT_MS);
}

static void test_missing_binary(void **state)
{
    fixture_t *f = *state;
    char *saved = getenv("PATH") != NULL ? strdup(getenv("PATH")) : NULL;
    char empty[160];
    snprintf(empty, sizeof empty, "%s/empty-bin", f->base);
    mkdir(empty, 0700);
    setenv("PATH", empty, 1);
    char err[1024] = "";
    int rc =
        redis_embedded_start(f->dir, "redis-server", START_TIMEOUT_MS, &f->r[0], err, sizeof err);
    if (saved != NULL) {
        setenv("PATH", saved, 1);
        free(saved);
    }
    assert_int_equal(rc, TERN_ENOENT);
    assert_string_equal(err, "embedded redis: redis-server not found in PATH (install the "
                             "redis-server package or pass --redis)");
    assert_int_equal(f->r[0].pid, 0);

    rc = redis_embedded_start(f->dir, "/nonexistent/redis-server", START_TIMEOUT_MS, &f->r[0], err,
                              sizeof err);
    assert_int_equal(rc, TERN_ENOENT);
    assert_string_equal(err, "embedded redis: /nonexistent/redis-server: No such file or "
                             "directory (pass --redis-server)");
}

/* Writes an executable shell script (the fake server) and returns its path. */
static void write_script(const char *path, const char *body)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp, "#!/bin/sh\n%s\n", body);
    assert_int_equal(fclose(fp), 0);
    assert_int_equal(chmod(path, 0700), 0);
}

static void test_failing_server_log_tail(void **state)
{
    fixture_t *f = *state;
    char script[200];
    snprintf(script, sizeof script, "%s/fails-%d.sh", f->base, f->n);
    write_script(script, "echo \"FATAL CONFIG FILE ERROR: it is $1\" >&2\nexit 3");
    char err[2048] = "";
    int rc = redis_embedded_start(f->dir, script, START_TIMEOUT_MS, &f->r[0], err, sizeof err);
    assert_int_equal(rc, TERN_EIO);
    char *real = realpath(f->dir, NULL);
    char expect[1024];
    snprintf(expect, sizeof expect,
             "embedded redis: %s exited with status 3 before answering PING; last lines of "
             "%s/redis.log:\nFATAL CONFIG FILE ERROR: it is %s/redis.conf",
             script, real, real);
    free(real);
    assert_string_equal(err, expect);
    assert_int_equal(f->r[0].pid, 0);
}

static void test_timeout_kills_child(void **state)
{
    fixture_t *f = *state;
    char script[200], pidfile[200];
    snprintf(script, sizeof script, "%s/hangs-%d.sh", f->base, f->n);
    snprintf(pidfile, sizeof pidfile, "%s/hangs-%d.pid", f->base, f->n);
    char body[512];
    snprintf(body, sizeof body, "echo $$ > %s\necho 'starting slowly'\nexec sleep 30", pidfile);
    write_script(script, body);
    char err[2048] = "";
    uint64_t t0 = clock_mono_ms();
    int rc = redis_embedded_start(f->dir, script, 300, &f->r[0], err, sizeof err);
    uint64_t took = clock_mono_ms() - t0;
    assert_int_equal(rc, TERN_EIO);
    assert_in_range(took, 250, 3000);
    char *real = realpath(f->dir, NULL);
    char expect[1024];
    snprintf(expect, sizeof expect,
             "embedded redis: %s did not answer PING on %s/redis.sock within 300 ms; last lines "
             "of %s/redis.log:\nstarting slowly",
             script, real, real);
    free(real);
    assert_string_equal(err, expect);

    FILE *fp = fopen(pidfile, "r");
    assert_non_null(fp);
    int pid = 0;
    assert_int_equal(fscanf(fp, "%d", &pid), 1);
    fclose(fp);
    assert_true(pid > 0);
    assert_true(process_gone(pid)); /* killed and reaped, not left sleeping */
}

static void test_dies_with_ternd(void **state)
{
    fixture_t *f = *state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t helper = fork();
    assert_true(helper >= 0);
    if (helper == 0) {
        /* A stand-in for ternd: start the server, report its PID, then wait to die. */
        close(p[0]);
        redis_embedded_t r;
        char err[1024];
        int pid = -1;
        if (redis_embedded_start(f->dir, "redis-server", START_TIMEOUT_MS, &r, err, sizeof err) ==
            0)
            pid = r.pid;
        (void)!write(p[1], &pid, sizeof pid);
        for (;;)
            pause();
    }
    f->extra_pid = helper;
    close(p[1]);
    int pid = -1;
    assert_int_equal(read(p[0], &pid, sizeof pid), (ssize_t)sizeof pid);
    close(p[0]);
    assert_true(pid > 0);
    char sock[256];
    snprintf(sock, sizeof sock, "%s/redis.sock", f->dir);
    assert_true(answers_ping(sock));

    /* kill -9 the "ternd": its server gets SIGTERM from the kernel and exits. */
    assert_int_equal(kill(helper, SIGKILL), 0);
    assert_int_equal(waitpid(helper, NULL, 0), helper);
    f->extra_pid = pid; /* reparented to us (subreaper): the teardown's to kill if needed */
    bool gone = false;
    for (int i = 0; i < 250 && !gone; i++) {
        pid_t w = waitpid(pid, NULL, WNOHANG);
        gone = w == pid || (w < 0 && errno == ECHILD && process_gone(pid));
        if (!gone)
            sleep_ms(20);
    }
    assert_true(gone);
    f->extra_pid = 0;
    assert_false(answers_ping(sock));

    /* And the directory is free for the next ternd. */
    start_ok(f, 0);
    redis_embedded_stop(&f->r[0], STOP_TIMEOUT_MS);
}

/* ---- ternd itself on the embedded default -------------------------------------- */

/* Runs the built ternd (TERN_BIN) on data directory `dir` with the flags `more`
 * (NULL-terminated), stdout and stderr to `out`, and waits at most 60 s for it to
 * exit. Returns its exit status (128+signal when killed). */
static int run_ternd(fixture_t *f, const char *dir, const char *out, const char *const *more)
{
    const char *bin = getenv("TERN_BIN"), *tasks = getenv("TERN_TASKS");
    const char *workflows = getenv("TERN_WORKFLOWS");
    if (bin == NULL || tasks == NULL || workflows == NULL)
        fail_msg("TERN_BIN, TERN_TASKS and TERN_WORKFLOWS must be set (meson test sets them)");
    const char *argv[32] = {bin,           "--data-dir", dir,           "--plugin-dir", tasks,
                            "--workflows", workflows,    "--log-level", "info"};
    size_t n = 9;
    for (size_t i = 0; more[i] != NULL && n < TERN_ARRAY_SIZE(argv) - 1; i++)
        argv[n++] = more[i];
    argv[n] = NULL;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(127);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    f->extra_pid = pid;
    int status = 0;
    bool ended = false;
    for (int i = 0; i < 3000 && !ended; i++) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        assert_true(w >= 0);
        ended = w == pid;
        if (!ended)
            sleep_ms(20);
    }
    if (!ended)
        fail_msg("ternd did not exit within 60 s (output in %s)", out);
    f->extra_pid = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The whole text of a file (malloc'd), or fails the test. */
static char *read_all(const char *path)
{
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        fail_msg("%s: %s", path, strerror(errno));
    char *buf = calloc(1, 65537);
    assert_non_null(buf);
    size_t n = fread(buf, 1, 65536, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

/* The PID of the embedded Redis that ternd's log announced, or 0. */
static pid_t announced_redis_pid(const char *log)
{
    const char *p = strstr(log, "embedded Redis started (pid ");
    return p != NULL ? (pid_t)atol(p + strlen("embedded Redis started (pid ")) : 0;
}

/* Asserts that the redis-server `pid` is gone: ternd stopped it before exiting. (This
 * process is a subreaper: a server ternd left running would be ours now, and alive.) */
static void assert_redis_gone(fixture_t *f, pid_t pid, const char *log)
{
    if (pid <= 0)
        fail_msg("ternd did not announce its embedded Redis:\n%s", log);
    if (!process_gone(pid)) {
        f->extra_pid = pid; /* the teardown's to kill */
        fail_msg("ternd exited and left its redis-server (pid %d) running:\n%s", (int)pid, log);
    }
    while (waitpid(pid, NULL, WNOHANG) > 0)
        ; /* a zombie reparented here, if ternd did not reap it */
}

/* A data directory whose name holds a space, quotes, a backslash, a '%' and a newline
 * (anything a path may hold): ternd starts its Redis there, runs a job, stops, and no
 * redis-server is left. (The socket's URL was "unix:///... my data/redis.sock", which
 * the address parser refused after the server had started.) */
static void test_ternd_data_dir_any_name(void **state)
{
    fixture_t *f = *state;
    char dir[256], out[256];
    snprintf(dir, sizeof dir, "%s/%d/my data 'q' \"x\" \\ %%20\nend", f->base, f->n);
    snprintf(out, sizeof out, "%s/ternd-%d.out", f->base, f->n);
    const char *const more[] = {"--listen", "127.0.0.1:0", "--run", "noop-1", NULL};
    int rc = run_ternd(f, dir, out, more);
    char *log = read_all(out);
    if (rc != 0)
        fail_msg("ternd exited with %d:\n%s", rc, log);
    if (strstr(log, "succeeded in") == NULL)
        fail_msg("the job did not succeed:\n%s", log);
    assert_redis_gone(f, announced_redis_pid(log), log);
    char sock[300];
    snprintf(sock, sizeof sock, "%s/redis.sock", dir);
    assert_false(answers_ping(sock));
    free(log);
}

/* ternd fails after its Redis started (the API port is taken): it stops that Redis. */
static void test_ternd_failing_start_stops_redis(void **state)
{
    fixture_t *f = *state;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(s >= 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sin;
    assert_int_equal(bind(s, (struct sockaddr *)&sin, sizeof sin), 0);
    assert_int_equal(listen(s, 1), 0);
    assert_int_equal(getsockname(s, (struct sockaddr *)&sin, &len), 0);
    char listen_at[32], out[256];
    snprintf(listen_at, sizeof listen_at, "127.0.0.1:%d", ntohs(sin.sin_port));
    snprintf(out, sizeof out, "%s/ternd-%d.out", f->base, f->n);
    const char *const more[] = {"--listen", listen_at, NULL};
    int rc = run_ternd(f, f->dir, out, more);
    close(s);
    char *log = read_all(out);
    if (rc == 0)
        fail_msg("ternd started on a taken port:\n%s", log);
    assert_redis_gone(f, announced_redis_pid(log), log);
    free(log);
}

static void test_stop_zeroed_is_safe(void **state)
{
    (void)state;
    redis_embedded_t r;
    memset(&r, 0, sizeof r);
    redis_embedded_stop(&r, 100);
    redis_embedded_stop(NULL, 100);
    assert_int_equal(r.pid, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_start_persist_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_start_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_server_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_locked_dir_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_socket_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_binary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failing_server_log_tail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_kills_child, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dies_with_ternd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ternd_data_dir_any_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ternd_failing_start_stops_redis, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_zeroed_is_safe, setup, teardown),
    };
    int failures =
        cmocka_run_group_tests_name("redis_embedded", tests, group_setup, group_teardown);
    return failures == 0 ? 0 : 1;
}
