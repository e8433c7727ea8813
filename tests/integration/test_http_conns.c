/*
 * test_http_conns.c -- the API's connections are bounded, over raw sockets to a real
 * ternd with small limits: connections over the cap are closed at once while a job
 * with an exec step still runs, a half-sent header, a kept-alive idle connection and a
 * slowly sent body are each closed within their timeout, a client that stops reading
 * an answer is cut off, and an event stream that lasts longer than every timeout is
 * not cut.
 *
 * Every wait is for the close itself (a read returning 0 or an error), bounded.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "http_sync.h"
#include "world.h"

#define MAX_CONNECTIONS 4
#define HEADER_MS       800
#define BODY_MS         800
#define IDLE_MS         1500
#define SLACK_MS        1000 /* the check runs every 200 ms; the rest is for a busy machine */
#define CLOSE_BOUND_MS  6000 /* far below the 60 s ternd used to hold such connections */

/* h2o's own request timer, which ternd sets to IDLE_MS + HEADER_MS + BODY_MS as a
 * backstop, must not be what closes the connections below: each bound is under it. */
_Static_assert(HEADER_MS + SLACK_MS < IDLE_MS + HEADER_MS + BODY_MS, "header bound");
_Static_assert(IDLE_MS + SLACK_MS < IDLE_MS + HEADER_MS + BODY_MS, "idle bound");

static itest_world_t W;

/* ---- raw sockets --------------------------------------------------------------- */

static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)W.ternd.api_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        fail_msg("connect: %s", strerror(errno));
    return fd;
}

static void send_text(int fd, const char *s)
{
    size_t n = strlen(s);
    if (send(fd, s, n, MSG_NOSIGNAL) != (ssize_t)n)
        fail_msg("send: %s", strerror(errno));
}

/* Waits at most bound_ms for the peer to close (read returns 0 or fails), discarding
 * what it sends meanwhile into `got` (NUL-terminated, may be NULL). Returns the ms it
 * took, or -1 when the connection is still open at the bound. */
static long wait_closed(int fd, unsigned bound_ms, char *got, size_t cap)
{
    uint64_t start = clock_mono_ms();
    size_t len = 0;
    if (got != NULL)
        got[0] = '\0';
    for (;;) {
        uint64_t now = clock_mono_ms();
        if (now - start >= bound_ms)
            return -1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int rc = poll(&p, 1, (int)(bound_ms - (now - start)));
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            return -1;
        char buf[4096];
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0)
            return (long)(clock_mono_ms() - start);
        if (got != NULL && len + 1 < cap) {
            size_t k = (size_t)n < cap - len - 1 ? (size_t)n : cap - len - 1;
            memcpy(got + len, buf, k);
            len += k;
            got[len] = '\0';
        }
    }
}

/* Reads until `needle` arrived (at most bound_ms); true when it did. */
static bool read_until(int fd, const char *needle, unsigned bound_ms)
{
    char got[8192];
    size_t len = 0;
    uint64_t start = clock_mono_ms();
    while (clock_mono_ms() - start < bound_ms) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = recv(fd, got + len, sizeof got - 1 - len, 0);
        if (n <= 0)
            return false;
        len += (size_t)n;
        got[len] = '\0';
        if (strstr(got, needle) != NULL)
            return true;
    }
    return false;
}

/* ---- tests --------------------------------------------------------------------- */

static void test_half_header_closed(void **state)
{
    (void)state;
    int fd = dial();
    send_text(fd, "GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept:");
    long ms = wait_closed(fd, CLOSE_BOUND_MS, NULL, 0);
    close(fd);
    if (ms < 0 || ms > HEADER_MS + SLACK_MS)
        fail_msg("a half-sent header kept its connection open %ld ms (header timeout %d ms)", ms,
                 HEADER_MS);
    assert_true(ms >= HEADER_MS / 2);
}

/* A slowloris drip: one byte of header at a time, each well within the timeout. */
static void test_dripped_header_closed(void **state)
{
    (void)state;
    int fd = dial();
    const char *head = "GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaa";
    long closed_ms = -1;
    uint64_t start = clock_mono_ms();
    for (size_t i = 0; head[i] != '\0' && closed_ms < 0; i++) {
        char one[2] = {head[i], '\0'};
        if (send(fd, one, 1, MSG_NOSIGNAL) != 1)
            break; /* closed under us */
        closed_ms = wait_closed(fd, 150, NULL, 0);
    }
    if (closed_ms < 0)
        closed_ms = wait_closed(fd, CLOSE_BOUND_MS, NULL, 0);
    long total = (long)(clock_mono_ms() - start);
    close(fd);
    if (closed_ms < 0 || total > HEADER_MS + SLACK_MS)
        fail_msg("a dripped header held its connection %ld ms (header timeout %d ms)", total,
                 HEADER_MS);
}

static void test_idle_keep_alive_closed(void **state)
{
    (void)state;
    int fd = dial();
    send_text(fd, "GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    assert_true(read_until(fd, "pong", 5000));
    uint64_t answered = clock_mono_ms();
    long ms = wait_closed(fd, CLOSE_BOUND_MS, NULL, 0);
    close(fd);
    long idle = (long)(clock_mono_ms() - answered);
    if (ms < 0 || idle > IDLE_MS + SLACK_MS)
        fail_msg("an idle keep-alive connection stayed open %ld ms (idle timeout %d ms)", idle,
                 IDLE_MS);
    /* Not closed right after the answer: kept alive for the idle timeout. */
    assert_true(idle >= IDLE_MS / 2);
}

static void test_slow_body_cut_off(void **state)
{
    (void)state;
    int fd = dial();
    send_text(fd, "POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  "Content-Length: 200\r\n\r\n{");
    uint64_t start = clock_mono_ms();
    long closed_ms = -1;
    for (int i = 0; i < 100 && closed_ms < 0; i++) {
        if (send(fd, " ", 1, MSG_NOSIGNAL) != 1)
            break;
        closed_ms = wait_closed(fd, 100, NULL, 0);
    }
    if (closed_ms < 0)
        closed_ms = wait_closed(fd, CLOSE_BOUND_MS, NULL, 0);
    long total = (long)(clock_mono_ms() - start);
    close(fd);
    if (closed_ms < 0 || total > HEADER_MS + BODY_MS + SLACK_MS)
        fail_msg("a slow body held its connection %ld ms", total);
}

/* Over the cap, connections are closed at once (a 503 first), the runner still runs
 * an exec step, and once clients leave new connections are served again. */
static void test_cap_refuses_and_runner_runs(void **state)
{
    (void)state;
    itest_workflow_put_ok(&W.client, "{\"name\": \"conns-exec\", \"chain\": [{\"name\": \"e\","
                                     " \"task\": \"exec.run\", \"args\": {\"argv\": [\"echo\","
                                     " \"still running\"]}}]}");
    itest_workflow_put_ok(&W.client, "{\"name\": \"conns-hold\", \"chain\": [{\"name\": \"s\","
                                     " \"task\": \"core.sleep\", \"args\": {\"ms\": 60000}}]}");
    char holder[40];
    itest_job_create_ok(&W.client, "conns-hold", NULL, holder);
    /* Fill the table with event streams: requests in progress, which no timeout ends. */
    int held[MAX_CONNECTIONS];
    size_t n_held = 0;
    char req[200];
    snprintf(req, sizeof req, "GET /jobs/%s/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", holder);
    for (int i = 0; i < MAX_CONNECTIONS; i++) {
        held[n_held] = dial();
        send_text(held[n_held], req);
        assert_true(read_until(held[n_held], "200 OK", 5000));
        n_held++;
    }
    /* Over the cap: closed at once, after a 503 that says why. */
    for (int i = 0; i < 3; i++) {
        int fd = dial();
        char got[2048];
        long ms = wait_closed(fd, CLOSE_BOUND_MS, got, sizeof got);
        close(fd);
        if (ms < 0)
            fail_msg("connection %d over the cap was kept open", i + 1);
        assert_true(ms < 2000);
        if (got[0] != '\0' && strstr(got, "503") == NULL)
            fail_msg("a connection over the cap got: %s", got);
    }
    /* The runner's child pipes do not depend on the API's connections. */
    char uuid[40];
    itest_job_create_ok(&W.client, "conns-exec", NULL, uuid);
    json_t *job = itest_wait_finished_ok(&W.client, uuid, 20000);
    assert_string_equal(itest_execution(job), "succeeded");
    json_decref(job);
    for (size_t i = 0; i < n_held; i++)
        close(held[i]);
    /* The table frees its slots as the sockets close; a new client is served. */
    bool served = false;
    for (int i = 0; i < 50 && !served; i++) {
        int fd = dial();
        send_text(fd, "GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        served = read_until(fd, "pong", 1000);
        close(fd);
        if (!served)
            itest_pause_ms(50);
    }
    assert_true(served);
    char msg[256];
    assert_int_equal(itest_job_cancel(&W.client, holder, msg, sizeof msg), 0);
}

/* With few descriptors, accepting stops at RLIMIT_NOFILE less fd_reserve: a ternd
 * limited to 256 descriptors with 200 in reserve keeps at most 56 connections, closes
 * the rest at once, and its runner still starts an exec step's child. */
static void test_fd_reserve_caps_connections(void **state)
{
    (void)state;
    char wrapper[400], config[400];
    snprintf(wrapper, sizeof wrapper, "%s/ternd-lowfd.sh", W.dir.path);
    snprintf(config, sizeof config, "%s/lowfd.json", W.dir.path);
    FILE *f = fopen(wrapper, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\nulimit -n 256 || exit 1\nexec %s \"$@\"\n", getenv("TERN_BIN"));
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(wrapper, 0700), 0);
    f = fopen(config, "w");
    assert_non_null(f);
    fputs("{\"fd_reserve\": 200, \"queues\": [\"lowfd\"]}", f);
    assert_int_equal(fclose(f), 0);
    char *real = xstrdup(getenv("TERN_BIN"));
    setenv("TERN_BIN", wrapper, 1);
    itest_ternd_t t;
    const char *const extra[] = {"--config", config, NULL};
    itest_ternd_start(&t, &W.redis, &W.dir, "lowfd", extra);
    setenv("TERN_BIN", real, 1);
    free(real);

    enum { OPENED = 80, CAP = 56 };
    int fds[OPENED];
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)t.api_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < OPENED; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        assert_int_equal(connect(fds[i], (struct sockaddr *)&a, sizeof a), 0);
    }
    /* Those over the cap end at once (all within one 3 s deadline, far below the 10 s
     * header timeout); the others stay. */
    int closed = 0;
    uint64_t deadline = clock_mono_ms() + 3000;
    for (int i = CAP; i < OPENED; i++) {
        uint64_t now = clock_mono_ms();
        if (wait_closed(fds[i], now < deadline ? (unsigned)(deadline - now) : 1, NULL, 0) >= 0)
            closed++;
    }
    for (int i = 0; i < CAP; i++)
        if (wait_closed(fds[i], 1, NULL, 0) >= 0)
            fail_msg("connection %d of %d, under the cap, was closed", i + 1, CAP);
    if (closed != OPENED - CAP)
        fail_msg("%d of the %d connections over the cap were closed at once", closed, OPENED - CAP);

    itest_workflow_put_ok(&W.client, "{\"name\": \"lowfd-exec\", \"queue\": \"lowfd\", "
                                     "\"chain\": [{\"name\": \"e\", \"task\": \"exec.run\","
                                     " \"args\": {\"argv\": [\"echo\", \"spare fds\"]}}]}");
    char uuid[40];
    itest_job_create_ok(&W.client, "lowfd-exec", NULL, uuid);
    json_t *job = itest_wait_finished_ok(&W.client, uuid, 20000);
    assert_string_equal(itest_execution(job), "succeeded");
    json_decref(job);
    for (int i = 0; i < OPENED; i++)
        close(fds[i]);
    assert_int_equal(itest_ternd_signal(&t, SIGTERM, 10000), 0);
}

/* A client that stops reading an answer is cut off after io_timeout_ms without
 * progress: the answer (a job's info, about 9 MB) stays half sent. */
static void test_stalled_reader_cut_off(void **state)
{
    (void)state;
    itest_workflow_put_ok(&W.client, "{\"name\": \"conns-info\", \"chain\": [{\"name\": \"n\","
                                     " \"task\": \"core.noop\"}]}");
    char uuid[40];
    itest_job_create_ok(&W.client, "conns-info", NULL, uuid);
    enum { ENTRIES = 150, ENTRY_BYTES = 60000 }; /* 9 MB: more than the socket buffers hold */
    char *entry = xmalloc(ENTRY_BYTES + 64);
    int n = snprintf(entry, 64, "{\"message\": \"");
    memset(entry + n, 'x', ENTRY_BYTES);
    snprintf(entry + n + ENTRY_BYTES, 8, "\"}");
    http_sync_t h;
    http_sync_open(&h, W.base);
    char path[120];
    snprintf(path, sizeof path, "/jobs/%s/info", uuid);
    for (int i = 0; i < ENTRIES; i++) {
        http_sync_resp_t r;
        if (http_sync_do(&h, "POST", path, entry, strlen(entry), NULL, &r) != 0 || r.status != 200)
            fail_msg("POST %s: %ld %s", path, r.status, r.error);
        http_sync_resp_dispose(&r);
    }
    http_sync_close(&h);
    free(entry);

    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int small = 4096;
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)W.ternd.api_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char req[200];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
    send_text(fd, req);
    /* The event: ternd logs the cut (the client cannot see it without reading). */
    bool cut = false;
    for (int i = 0; i < 200 && !cut; i++) {
        cut = itest_ternd_log_has(&W.ternd, "a write made no progress");
        if (!cut)
            itest_pause_ms(50);
    }
    if (!cut)
        fail_msg("a client that stopped reading was not cut off within 10 s");
    /* What it can still read ends early: the answer was not completed. */
    size_t total = 0;
    char buf[65536];
    for (int i = 0; i < 100000; i++) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 5000) <= 0)
            fail_msg("the cut connection did not end");
        ssize_t got = recv(fd, buf, sizeof buf, 0);
        if (got <= 0)
            break;
        total += (size_t)got;
    }
    close(fd);
    assert_true(total < (size_t)ENTRIES * ENTRY_BYTES);
}

/* An event stream outlives the header, body and idle timeouts: it is a request in
 * progress, kept alive by heartbeats, not an idle connection. */
static void test_event_stream_not_cut(void **state)
{
    (void)state;
    itest_workflow_put_ok(&W.client, "{\"name\": \"conns-slow\", \"chain\": [{\"name\": \"s\","
                                     " \"task\": \"core.sleep\", \"args\": {\"ms\": 4000}}]}");
    char uuid[40];
    itest_job_create_ok(&W.client, "conns-slow", NULL, uuid);
    http_sync_t h;
    http_sync_open(&h, W.base);
    http_sync_resp_t r;
    char path[120];
    snprintf(path, sizeof path, "/jobs/%s/events", uuid);
    uint64_t start = clock_mono_ms();
    int rc = http_sync_do(&h, "GET", path, NULL, 0, NULL, &r);
    uint64_t took = clock_mono_ms() - start;
    if (rc != 0 || r.status != 200)
        fail_msg("event stream: curl %d, status %ld: %s", rc, r.status, r.error);
    assert_non_null(strstr(r.body, "\"finished\""));
    assert_true(took >= IDLE_MS + HEADER_MS + BODY_MS);
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
}

/* ---- group -------------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    itest_world_start(&W, "conns1",
                      itest_fmt("{\"max_connections\": %d, \"header_timeout_ms\": %d,"
                                " \"body_timeout_ms\": %d, \"idle_timeout_ms\": %d,"
                                " \"io_timeout_ms\": 2000, \"event_heartbeat_ms\": 200}",
                                MAX_CONNECTIONS, HEADER_MS, BODY_MS, IDLE_MS),
                      NULL);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    itest_world_stop(&W, 10000);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half_header_closed),
        cmocka_unit_test(test_dripped_header_closed),
        cmocka_unit_test(test_idle_keep_alive_closed),
        cmocka_unit_test(test_slow_body_cut_off),
        cmocka_unit_test(test_cap_refuses_and_runner_runs),
        cmocka_unit_test(test_fd_reserve_caps_connections),
        cmocka_unit_test(test_stalled_reader_cut_off),
        cmocka_unit_test(test_event_stream_not_cut),
    };
    /* TERN_TEST_FILTER=test_name runs one test (for a check by hand). */
    if (getenv("TERN_TEST_FILTER") != NULL)
        cmocka_set_test_filter(getenv("TERN_TEST_FILTER"));
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
