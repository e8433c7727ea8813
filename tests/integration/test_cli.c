/*
 * test_cli.c -- the `tern` command-line client against a real ternd (API and runner)
 * and redis-server: what an operator sees and what a script relies on. Each check runs
 * the built binary (TERN_CLI) as a child with TERN_URL and TERN_TOKEN set, captures its
 * stdout, stderr and exit status, and bounds it in time.
 *
 *   - a 3-step job created with --watch: three check-mark lines and the outcome;
 *   - -j output parses as JSON, -o picks columns, -H drops the header;
 *   - exit statuses: 0, 1 (failed or canceled job), 2 (usage), 3 (API error), 4 (no
 *     API), 130 (Ctrl-C, and the job goes on);
 *   - resume, cancel and retry through the CLI;
 *   - piped output holds no escape code, even with TERM set;
 *   - the polling fallback draws the same story, and is used (and said so) when the
 *     API has no event stream; a dropped stream is resumed after the last event drawn.
 *     These two run against a scripted fake API (mini_http_server in a child process).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/ident.h"
#include "base/iso8601.h"
#include "mini_http_server.h"
#include "world.h"

#define TOKEN        "cli-test-token-0123456789"
#define SUBMIT_TOKEN "cli-submit-token-0123456789"
#define RUN_MS       30000 /* bound on one CLI run */
#define WAIT_MS      15000 /* bound on waiting for a job's event */
#define CHECK        "\u2713"
#define CROSS        "\u2717"

static itest_world_t W;

/* ---- running the CLI ----------------------------------------------------------- */

typedef struct child {
    pid_t pid;
    int out_fd, err_fd;
    char *out, *err; /* what was read so far (malloc'd, NUL-terminated) */
    size_t out_len, err_len;
    int status; /* exit status, or 128 + signal */
} child_t;

static const char *cli_path(void)
{
    const char *p = getenv("TERN_CLI");
    if (p == NULL || p[0] == '\0')
        fail_msg("TERN_CLI is not set (the path of the built tern)");
    return p;
}

/* Starts tern with `args` (NULL-terminated, without argv[0]) and the environment of the
 * test plus `env` ("NAME=value" sets, "NAME=" unsets; NULL-terminated or NULL). */
static void child_start(child_t *c, const char *const *args, const char *const *env)
{
    memset(c, 0, sizeof *c);
    int out[2], err[2];
    if (pipe(out) != 0 || pipe(err) != 0)
        fail_msg("pipe: %s", strerror(errno));
    const char *argv[64];
    size_t n = 0;
    argv[n++] = "tern";
    for (size_t i = 0; args[i] != NULL && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        dup2(err[1], 2);
        close(out[0]);
        close(err[0]);
        close(out[1]);
        close(err[1]);
        setenv("TERN_URL", W.base, 1);
        setenv("TERN_TOKEN", TOKEN, 1);
        /* Even with a capable terminal named, piped output must stay plain. */
        setenv("TERM", "xterm-256color", 1);
        unsetenv("NO_COLOR");
        for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
            const char *eq = strchr(env[i], '=');
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(eq - env[i]), env[i]);
            if (eq[1] == '\0')
                unsetenv(name);
            else
                setenv(name, eq + 1, 1);
        }
        execv(cli_path(), (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    c->pid = pid;
    c->out_fd = out[0];
    c->err_fd = err[0];
    c->out = xcalloc(1, 1);
    c->err = xcalloc(1, 1);
}

static void append(char **buf, size_t *len, const char *p, size_t n)
{
    *buf = xrealloc(*buf, *len + n + 1);
    memcpy(*buf + *len, p, n);
    *len += n;
    (*buf)[*len] = '\0';
}

/* Reads what the child writes for at most `ms`, or until stdout holds `needle` (when
 * not NULL), or until both pipes are closed. Returns true when the needle was seen or
 * the pipes closed. */
static bool child_read(child_t *c, const char *needle, unsigned ms)
{
    uint64_t until = clock_mono_ms() + ms;
    while (c->out_fd >= 0 || c->err_fd >= 0) {
        if (needle != NULL && strstr(c->out, needle) != NULL)
            return true;
        uint64_t now = clock_mono_ms();
        if (now >= until)
            return false;
        struct pollfd fds[2] = {{.fd = c->out_fd, .events = POLLIN},
                                {.fd = c->err_fd, .events = POLLIN}};
        int r = poll(fds, 2, (int)(until - now));
        if (r < 0 && errno != EINTR)
            fail_msg("poll: %s", strerror(errno));
        for (int i = 0; i < 2 && r > 0; i++) {
            if (fds[i].fd < 0 || fds[i].revents == 0)
                continue;
            char buf[4096];
            ssize_t got = read(fds[i].fd, buf, sizeof buf);
            if (got > 0) {
                if (i == 0)
                    append(&c->out, &c->out_len, buf, (size_t)got);
                else
                    append(&c->err, &c->err_len, buf, (size_t)got);
            } else {
                close(fds[i].fd);
                if (i == 0)
                    c->out_fd = -1;
                else
                    c->err_fd = -1;
            }
        }
    }
    return needle == NULL || strstr(c->out, needle) != NULL;
}

/* Reads to the end and reaps the child, within `ms`; kills it (by its PID) and fails
 * the test if it does not end in time. */
static void child_finish(child_t *c, unsigned ms)
{
    uint64_t until = clock_mono_ms() + ms;
    child_read(c, NULL, ms);
    int st = 0;
    for (;;) {
        pid_t r = waitpid(c->pid, &st, WNOHANG);
        if (r == c->pid)
            break;
        if (clock_mono_ms() >= until) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &st, 0);
            fail_msg("tern did not end within %u ms; stdout:\n%s\nstderr:\n%s", ms, c->out, c->err);
        }
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL); /* the pipes are closed; the exit is imminent */
    }
    if (c->out_fd >= 0)
        close(c->out_fd);
    if (c->err_fd >= 0)
        close(c->err_fd);
    c->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void child_dispose(child_t *c)
{
    free(c->out);
    free(c->err);
}

/* Runs tern to the end. */
static void run_env(child_t *c, const char *const *env, const char *const *args)
{
    child_start(c, args, env);
    child_finish(c, RUN_MS);
}

#define RUN(c, ...)          run_env((c), NULL, (const char *const[]){__VA_ARGS__, NULL})
#define RUN_ENV(c, env, ...) run_env((c), (env), (const char *const[]){__VA_ARGS__, NULL})

/* Fails with everything the run printed unless its exit status is `want`. */
static void expect_status(const child_t *c, int want)
{
    if (c->status != want)
        fail_msg("tern exited %d, expected %d; stdout:\n%s\nstderr:\n%s", c->status, want, c->out,
                 c->err);
}

static void expect_in(const char *haystack, const char *needle)
{
    if (haystack == NULL || strstr(haystack, needle) == NULL)
        fail_msg("\"%s\" not found in:\n%s", needle, haystack != NULL ? haystack : "(nothing)");
}

static void expect_plain(const child_t *c)
{
    if (strchr(c->out, '\033') != NULL || strchr(c->err, '\033') != NULL)
        fail_msg("escape code in piped output:\n%s\n%s", c->out, c->err);
    if (strchr(c->out, '\r') != NULL)
        fail_msg("carriage return in piped output:\n%s", c->out);
}

/* The number of lines of `s` starting with `prefix`. */
static int lines_starting(const char *s, const char *prefix)
{
    int n = 0;
    for (const char *p = s; *p != '\0';) {
        if (strncmp(p, prefix, strlen(prefix)) == 0)
            n++;
        const char *nl = strchr(p, '\n');
        if (nl == NULL)
            break;
        p = nl + 1;
    }
    return n;
}

/* The last non-empty line of s (static buffer). */
static const char *last_line(const char *s)
{
    static char line[1024];
    size_t len = strlen(s);
    while (len > 0 && s[len - 1] == '\n')
        len--;
    size_t start = len;
    while (start > 0 && s[start - 1] != '\n')
        start--;
    snprintf(line, sizeof line, "%.*s", (int)(len - start), s + start);
    return line;
}

/* `tern job create ARGS...` without --watch: returns the uuid it printed. */
static void create_job(char uuid[40], const char *const *args)
{
    const char *argv[32] = {"job", "create"};
    size_t n = 2;
    for (size_t i = 0; args[i] != NULL && n < 31; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    child_t c;
    run_env(&c, NULL, argv);
    expect_status(&c, 0);
    size_t len = strlen(c.out);
    if (len != 37 || c.out[36] != '\n')
        fail_msg("job create printed \"%s\", expected a uuid and a newline", c.out);
    snprintf(uuid, 40, "%.36s", c.out);
    assert_true(uuid_valid(uuid));
    child_dispose(&c);
}

#define CREATE(uuid, ...) create_job((uuid), (const char *const[]){__VA_ARGS__, NULL})

static void must_see_event(const char *uuid, const char *type, const char *status)
{
    json_t *ev = itest_wait_event(&W.client, uuid, type, status, WAIT_MS);
    if (ev == NULL)
        fail_msg("job %s: no \"%s\" event within %u ms", uuid, type, WAIT_MS);
    json_decref(ev);
}

/* ---- fixtures -------------------------------------------------------------------- */

static void write_file(const char *name, const char *text)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s", W.dir.path, name);
    itest_write_file(path, text);
}

static const char *path_of(const char *name)
{
    static char path[4][400];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, 400, "%s/%s", W.dir.path, name);
    return p;
}

static int group_setup(void **state)
{
    (void)state;
    itest_world_start_redis(&W);
    /* The operator's token bare (as one-token files always were), and a submit one. */
    write_file("token", TOKEN "\nsubmit " SUBMIT_TOKEN "\n");
    const char *extra[] = {"--api-token-file", path_of("token"), NULL};
    itest_world_start_ternd(&W, "r1", NULL, extra);

    write_file("three.json",
               "{\"name\": \"cli-three\", \"version\": \"1.0.0\", \"chain\": ["
               " {\"name\": \"prepare\", \"task\": \"core.noop\"},"
               " {\"name\": \"copy\", \"task\": \"core.sleep\", \"args\": {\"ms\": 50}},"
               " {\"name\": \"report\", \"task\": \"core.log\", \"args\": {\"msg\": \"done\"}}]}");
    write_file("fail.json", "{\"name\": \"cli-fail\", \"version\": \"1.0.0\", \"chain\": ["
                            " {\"name\": \"one\", \"task\": \"core.noop\"},"
                            " {\"name\": \"boom\", \"task\": \"core.fail\","
                            "  \"args\": {\"code\": \"Boom\", \"message\": \"it broke\"}}],"
                            " \"onerror\": [{\"name\": \"report\", \"task\": \"core.log\","
                            "  \"args\": {\"msg\": \"failed: ${error.message}\"}}]}");
    write_file("wait.json",
               itest_fmt("{\"name\": \"cli-wait\", \"version\": \"1.0.0\", \"chain\": ["
                         " {\"name\": \"approve\", \"task\": \"itest.wait\","
                         "  \"args\": {\"file\": \"%s\"}},"
                         " {\"name\": \"after\", \"task\": \"core.noop\"}]}",
                         W.side));
    write_file("long.json", "{\"name\": \"cli-long\", \"version\": \"1.0.0\", \"chain\": ["
                            " {\"name\": \"nap\", \"task\": \"core.sleep\","
                            "  \"args\": {\"ms\": \"${params.ms:-60000}\"}}],"
                            " \"oncancel\": [{\"name\": \"cleanup\", \"task\": \"core.noop\"}]}");
    write_file("check.json",
               itest_fmt("{\"name\": \"cli-check\", \"version\": \"1.0.0\", \"chain\": ["
                         " {\"name\": \"first\", \"task\": \"core.noop\"},"
                         " {\"name\": \"check\", \"task\": \"itest.check\","
                         "  \"args\": {\"file\": \"%s\", \"ok\": \"${params.ok}\"}}]}",
                         W.side));
    write_file("bad.json", "{\"name\": \"cli-bad\", \"version\": \"1.0.0\", \"chain\": ["
                           " {\"name\": \"x\", \"task\": \"core.lgo\"}]}");
    write_file("broken.json", "{\"name\": \"cli-broken\",\n \"chain\": [}");
    write_file("params.json", "{\"disk\": {\"size\": 5, \"id\": 1}, \"owner\": \"ops\"}");
    write_file("progress.json",
               itest_fmt("{\"name\": \"cli-progress\", \"version\": \"1.0.0\", \"chain\": ["
                         " {\"name\": \"copy\", \"task\": \"itest.progress\","
                         "  \"args\": {\"file\": \"%s\", \"total\": 10485760,"
                         "  \"reports\": 4, \"every_ms\": 250}}]}",
                         W.side));

    child_t c;
    RUN(&c, "workflow", "load", path_of("three.json"), path_of("fail.json"), path_of("wait.json"),
        path_of("long.json"));
    expect_status(&c, 0);
    child_dispose(&c);
    RUN(&c, "workflow", "load", path_of("check.json"), path_of("progress.json"));
    expect_status(&c, 0);
    child_dispose(&c);
    return 0;
}

/* The API token was sent with every request of the group (and refused ones were
 * logged): it must appear in no log line. */
static void test_token_never_logged(void **state)
{
    (void)state;
    assert_true(itest_ternd_log_has(&W.ternd, "\"status\":401"));
    assert_false(itest_ternd_log_has(&W.ternd, TOKEN));
}

static int group_teardown(void **state)
{
    (void)state;
    itest_world_stop(&W, 10000);
    return 0;
}

/* ---- a scripted fake API ------------------------------------------------------- */

/* A mini_http_server in a child process of ours, so that the test can run tern (which
 * blocks) meanwhile. On SIGTERM it writes the requests it received ("METHOD PATH" and
 * the Authorization and Last-Event-ID headers, one request per line) to `log` and
 * exits. */
typedef struct fake_api {
    pid_t pid;
    int port;
    char log[400];
    char url[64];
} fake_api_t;

typedef struct fake_script {
    const char *path;
    mini_http_response_t res;
} fake_script_t;

typedef struct fake_run {
    mini_http_server_t *server;
    const char *log;
    uv_signal_t sig;
} fake_run_t;

static void on_fake_sigterm(uv_signal_t *h, int signum)
{
    (void)signum;
    fake_run_t *f = h->data;
    FILE *out = fopen(f->log, "w");
    for (size_t i = 0; out != NULL && i < mini_http_server_request_count(f->server); i++) {
        const mini_http_request_t *r = mini_http_server_request(f->server, i);
        const char *auth = mini_http_request_header(r, "authorization");
        const char *last = mini_http_request_header(r, "last-event-id");
        fprintf(out, "%s %s auth=%s last-event-id=%s\n", r->method, r->path,
                auth != NULL ? auth : "-", last != NULL ? last : "-");
    }
    if (out != NULL)
        fclose(out);
    uv_stop(h->loop);
}

static void fake_api_start(fake_api_t *f, const fake_script_t *script)
{
    memset(f, 0, sizeof *f);
    snprintf(f->log, sizeof f->log, "%s/fake-%d.log", W.dir.path, (int)clock_mono_ms());
    int p[2];
    if (pipe(p) != 0)
        fail_msg("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        uv_loop_t loop;
        uv_loop_init(&loop);
        fake_run_t run = {.log = f->log};
        run.server = mini_http_server_new(&loop);
        if (run.server == NULL)
            _exit(1);
        for (size_t i = 0; script[i].path != NULL; i++)
            mini_http_server_script(run.server, script[i].path, &script[i].res);
        uv_signal_init(&loop, &run.sig);
        run.sig.data = &run;
        uv_signal_start(&run.sig, on_fake_sigterm, SIGTERM);
        int port = mini_http_server_port(run.server);
        if (write(p[1], &port, sizeof port) != (ssize_t)sizeof port)
            _exit(1);
        close(p[1]);
        uv_run(&loop, UV_RUN_DEFAULT);
        _exit(0);
    }
    close(p[1]);
    struct pollfd pfd = {.fd = p[0], .events = POLLIN};
    if (poll(&pfd, 1, 10000) != 1 || read(p[0], &f->port, sizeof f->port) != sizeof f->port)
        fail_msg("the fake API did not start");
    close(p[0]);
    f->pid = pid;
    snprintf(f->url, sizeof f->url, "TERN_URL=http://127.0.0.1:%d", f->port);
}

/* Stops the fake API (by its PID) and returns its request log (malloc'd). */
static char *fake_api_stop(fake_api_t *f)
{
    kill(f->pid, SIGTERM);
    int st;
    uint64_t until = clock_mono_ms() + 10000;
    while (waitpid(f->pid, &st, WNOHANG) != f->pid) {
        if (clock_mono_ms() > until) {
            kill(f->pid, SIGKILL);
            waitpid(f->pid, &st, 0);
            fail_msg("the fake API did not stop");
        }
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
    FILE *in = fopen(f->log, "r");
    char *text = xcalloc(1, 65536);
    if (in != NULL) {
        size_t n = fread(text, 1, 65535, in);
        text[n] = '\0';
        fclose(in);
    }
    return text;
}

#define FAKE_UUID "0b5e2c1a-1d6f-4e8a-9b3c-7a1e2f3d4c5b"

/* A job view of the fake API with `n` of the three chain steps done. */
static const char *fake_job(const char *execution, int n)
{
    static char buf[4][2048];
    static int next;
    char *b = buf[next++ % 4];
    char results[1024] = "";
    static const char *const names[] = {"fetch", "build", "ship"};
    for (int i = 0; i < n; i++)
        snprintf(results + strlen(results), sizeof results - strlen(results),
                 "%s{\"name\": \"%s\", \"task\": \"core.noop\", \"result\": {},"
                 " \"error\": null, \"attempts\": 1,"
                 " \"started_at\": \"2026-11-21T04:47:28.000Z\","
                 " \"finished_at\": \"2026-11-21T04:47:28.250Z\"}",
                 i > 0 ? ", " : "", names[i]);
    snprintf(b, 2048,
             "{\"uuid\": \"" FAKE_UUID "\", \"name\": \"fake\", \"version\": \"2.0.0\","
             " \"execution\": \"%s\", \"elapsed\": 0.75,"
             " \"chain\": [{\"name\": \"fetch\"}, {\"name\": \"build\"}, {\"name\": \"ship\"}],"
             " \"onerror\": [], \"oncancel\": [],"
             " \"chain_results\": [%s], \"onerror_results\": [], \"oncancel_results\": []}",
             execution, results);
    return b;
}

/* An API without an event stream: the watch polls the job, and says so. */
static void test_fallback_to_polling_without_event_route(void **state)
{
    (void)state;
    const fake_script_t script[] = {
        {"/jobs/" FAKE_UUID, {.body = fake_job("running", 0)}},
        {"/jobs/" FAKE_UUID, {.body = fake_job("running", 1)}},
        {"/jobs/" FAKE_UUID, {.body = fake_job("running", 2)}},
        {"/jobs/" FAKE_UUID, {.body = fake_job("succeeded", 3)}},
        {"/jobs/" FAKE_UUID "/events",
         {.status = 404,
          .body =
              "{\"code\": \"ResourceNotFound\", \"message\": \"/jobs/x/events does not exist\"}"}},
        {NULL, {0}},
    };
    fake_api_t f;
    fake_api_start(&f, script);
    const char *env[] = {f.url, NULL};
    child_t c;
    RUN_ENV(&c, env, "job", "watch", FAKE_UUID);
    char *log = fake_api_stop(&f);
    expect_status(&c, 0);
    expect_plain(&c);
    expect_in(c.err, "has no event stream");
    expect_in(c.err, "polling the job every 500 ms");
    assert_string_equal(c.out, "Job " FAKE_UUID " (fake 2.0.0):\n" CHECK " fetch (250ms)\n" CHECK
                               " build (250ms)\n" CHECK " ship (250ms)\n"
                               "Job succeeded in 750ms.\n");
    /* One try of the stream, then the job polled; the token on every request. */
    assert_int_equal(lines_starting(log, "GET /jobs/" FAKE_UUID "/events"), 1);
    assert_true(lines_starting(log, "GET /jobs/" FAKE_UUID " ") >= 4);
    assert_int_equal(lines_starting(log, ""), lines_starting(log, "GET "));
    char auth[128];
    snprintf(auth, sizeof auth, "auth=Bearer %s", TOKEN);
    expect_in(log, auth);
    assert_null(strstr(log, "auth=-"));
    free(log);
    child_dispose(&c);
}

/* A stream that ends before the job does is resumed after the last event drawn: no
 * step is drawn twice or lost. */
static void test_dropped_stream_resumes_after_last_event(void **state)
{
    (void)state;
    static const char *const sse_headers[] = {"Content-Type: text/event-stream", NULL};
    const fake_script_t script[] = {
        {"/jobs/" FAKE_UUID, {.body = fake_job("running", 1)}},
        {"/jobs/" FAKE_UUID, {.body = fake_job("succeeded", 3)}},
        {"/jobs/" FAKE_UUID "/events",
         {.headers = sse_headers,
          .body = ": connected\n\n"
                  "id: 100-0\ndata: {\"type\": \"created\", \"time\": 1}\n\n"
                  "id: 101-0\ndata: {\"type\": \"running\", \"time\": 2}\n\n"
                  "id: 102-0\ndata: {\"type\": \"step\", \"status\": \"succeeded\","
                  " \"phase\": \"chain\", \"index\": 0, \"name\": \"fetch\","
                  " \"attempt\": 1, \"duration_ms\": 5}\n\n"}},
        {"/jobs/" FAKE_UUID "/events",
         {.headers = sse_headers,
          .body = "id: 103-0\ndata: {\"type\": \"step\", \"status\": \"succeeded\","
                  " \"phase\": \"chain\", \"index\": 1, \"name\": \"build\","
                  " \"attempt\": 1, \"duration_ms\": 6}\n\n"
                  "id: 104-0\ndata: {\"type\": \"step\", \"status\": \"succeeded\","
                  " \"phase\": \"chain\", \"index\": 2, \"name\": \"ship\","
                  " \"attempt\": 1, \"duration_ms\": 7}\n\n"
                  "id: 105-0\ndata: {\"type\": \"finished\", \"execution\": \"succeeded\"}\n\n"}},
        {NULL, {0}},
    };
    fake_api_t f;
    fake_api_start(&f, script);
    const char *env[] = {f.url, NULL};
    child_t c;
    RUN_ENV(&c, env, "job", "watch", FAKE_UUID);
    char *log = fake_api_stop(&f);
    expect_status(&c, 0);
    assert_string_equal(c.out, "Job " FAKE_UUID " (fake 2.0.0):\n" CHECK " fetch (5ms)\n" CHECK
                               " build (6ms)\n" CHECK " ship (7ms)\n"
                               "Job succeeded in 750ms.\n");
    expect_in(log, "GET /jobs/" FAKE_UUID "/events auth=");
    expect_in(log, "GET /jobs/" FAKE_UUID "/events?from=102-0 auth=");
    free(log);
    child_dispose(&c);
}

/* Something that is not ternd's API: a 2xx that is not JSON is "cannot reach" (4); an
 * error page is an API error (3) named by its status. */
static void test_answers_that_are_not_the_api(void **state)
{
    (void)state;
    static const char *const html[] = {"Content-Type: text/html", NULL};
    const fake_script_t script[] = {
        {"/stats", {.headers = html, .body = "<html>welcome</html>"}},
        {"/runners", {.status = 502, .headers = html, .body = "Bad gateway\n<p>upstream</p>"}},
        {NULL, {0}},
    };
    fake_api_t f;
    fake_api_start(&f, script);
    const char *env[] = {f.url, NULL};
    child_t c;
    RUN_ENV(&c, env, "stats");
    expect_status(&c, 4);
    expect_in(c.err, "not JSON");
    child_dispose(&c);
    RUN_ENV(&c, env, "runners");
    expect_status(&c, 3);
    expect_in(c.err, "tern: HTTP 502: Bad gateway\n");
    child_dispose(&c);
    free(fake_api_stop(&f));
}

/* ---- tests ----------------------------------------------------------------------- */

/* The flagship: create --watch of a 3-step workflow. */
static void test_create_watch_draws_each_step(void **state)
{
    (void)state;
    child_t c;
    RUN(&c, "job", "create", "cli-three", "--watch");
    expect_status(&c, 0);
    expect_plain(&c);
    assert_int_equal(lines_starting(c.out, CHECK " "), 3);
    assert_int_equal(lines_starting(c.out, "Job "), 2); /* the header and the outcome */
    assert_int_equal(strncmp(c.out, "Job ", 4), 0);
    expect_in(c.out, "(cli-three 1.0.0):\n");
    expect_in(c.out, CHECK " prepare (");
    expect_in(c.out, CHECK " copy (");
    expect_in(c.out, CHECK " report (");
    /* In order. */
    assert_true(strstr(c.out, "prepare (") < strstr(c.out, "copy ("));
    assert_true(strstr(c.out, "copy (") < strstr(c.out, "report ("));
    const char *last = last_line(c.out);
    if (strncmp(last, "Job succeeded in ", 17) != 0)
        fail_msg("last line \"%s\", expected \"Job succeeded in ...\"", last);
    assert_string_equal(c.err, "");
    child_dispose(&c);
}

/* A task that reports progress: piped, watch prints a progress line per tenth of the
 * work with percent and bytes, before the step's check mark. */
static void test_watch_shows_progress(void **state)
{
    (void)state;
    child_t c;
    RUN(&c, "job", "create", "cli-progress", "--watch");
    expect_status(&c, 0);
    expect_plain(&c);
    const char *first = strstr(c.out, "\u2610 copy");
    if (first == NULL)
        fail_msg("no progress line for step copy in:\n%s", c.out);
    expect_in(c.out, "50%");
    expect_in(c.out, "MiB");
    assert_true(lines_starting(c.out, "\u2610 copy") >= 3);
    const char *done = strstr(c.out, CHECK " copy (");
    assert_non_null(done);
    assert_true(first < done);
    child_dispose(&c);
}

static void test_json_columns_and_no_header(void **state)
{
    (void)state;
    char uuid[40];
    CREATE(uuid, "cli-three", "--target", "vm-json");
    json_t *job = itest_wait_finished(&W.client, uuid, WAIT_MS);
    assert_non_null(job);
    json_decref(job);

    child_t c;
    RUN(&c, "job", "get", uuid, "-j");
    expect_status(&c, 0);
    json_t *doc = json_loads(c.out, 0, NULL);
    if (doc == NULL)
        fail_msg("-j output is not JSON:\n%s", c.out);
    assert_string_equal(json_string_value(json_object_get(doc, "uuid")), uuid);
    assert_string_equal(json_string_value(json_object_get(doc, "execution")), "succeeded");
    assert_int_equal(json_array_size(json_object_get(doc, "chain_results")), 3);
    json_decref(doc);
    child_dispose(&c);

    /* -o with -H: exactly the values, two spaces apart. */
    RUN(&c, "job", "get", uuid, "-o", "uuid,execution,target", "-H");
    expect_status(&c, 0);
    char want[128];
    snprintf(want, sizeof want, "%s  succeeded  vm-json\n", uuid);
    assert_string_equal(c.out, want);
    child_dispose(&c);

    /* -o without -H: a header of the column names. */
    RUN(&c, "-o", "execution", "job", "get", uuid);
    expect_status(&c, 0);
    assert_string_equal(c.out, "EXECUTION\nsucceeded\n");
    child_dispose(&c);

    /* JSON paths as columns. */
    RUN(&c, "job", "get", uuid, "-H", "-o", "chain_results.1.name,cursor.phase");
    expect_status(&c, 0);
    assert_string_equal(c.out, "copy  chain\n");
    child_dispose(&c);

    /* The human view names the steps. */
    RUN(&c, "job", "get", uuid);
    expect_status(&c, 0);
    expect_plain(&c);
    expect_in(c.out, "execution  succeeded\n");
    expect_in(c.out, "PHASE  STEP     TASK        OUTCOME");
    expect_in(c.out, "chain  copy     core.sleep  ok");
    child_dispose(&c);

    /* Lists: the table has a header unless -H; -j -o gives an array of objects. */
    RUN(&c, "job", "list", "--execution", "succeeded", "-n", "1000");
    expect_status(&c, 0);
    assert_int_equal(strncmp(c.out, "UUID ", 5), 0);
    expect_in(c.out, uuid);
    child_dispose(&c);
    RUN(&c, "job", "list", "--execution", "succeeded", "-o", "execution", "-H");
    expect_status(&c, 0);
    assert_true(lines_starting(c.out, "succeeded\n") >= 2);
    assert_int_equal(lines_starting(c.out, "succeeded\n"), lines_starting(c.out, ""));
    child_dispose(&c);
    RUN(&c, "-j", "job", "list", "-o", "uuid,execution");
    expect_status(&c, 0);
    doc = json_loads(c.out, 0, NULL);
    if (!json_is_array(doc))
        fail_msg("job list -j -o is not a JSON array:\n%s", c.out);
    bool found = false;
    size_t i;
    json_t *row;
    json_array_foreach(doc, i, row)
    {
        assert_int_equal(json_object_size(row), 2);
        found = found || strcmp(json_string_value(json_object_get(row, "uuid")), uuid) == 0;
    }
    assert_true(found);
    json_decref(doc);
    child_dispose(&c);

    /* Paging: --limit 1 shows one job and where the rest starts. */
    RUN(&c, "job", "list", "-n", "1", "-H", "-o", "uuid");
    expect_status(&c, 0);
    assert_int_equal(lines_starting(c.out, ""), 1);
    expect_in(c.err, "--marker ");
    child_dispose(&c);
}

static void test_params_from_flags_and_file(void **state)
{
    (void)state;
    char uuid[40];
    CREATE(uuid, "cli-three", "-f", path_of("params.json"), "-p", "disk.size=10", "-p", "name=db1",
           "-p", "force=true", "-p", "meta={\"a\":[1,2]}", "-p", "id=007");
    child_t c;
    RUN(&c, "job", "get", uuid, "-j", "-o", "params");
    expect_status(&c, 0);
    json_t *doc = json_loads(c.out, 0, NULL);
    assert_non_null(doc);
    json_t *want = json_loads("{\"disk\": {\"size\": 10, \"id\": 1}, \"owner\": \"ops\","
                              " \"name\": \"db1\", \"force\": true, \"meta\": {\"a\": [1, 2]},"
                              " \"id\": \"007\"}",
                              0, NULL);
    json_t *got = json_object_get(json_array_get(doc, 0), "params");
    if (!json_equal(got, want))
        fail_msg("params: %s", c.out);
    json_decref(want);
    json_decref(doc);
    child_dispose(&c);
    json_decref(itest_wait_finished(&W.client, uuid, WAIT_MS));
}

/* --exec-after: an ISO time or +N from now; the job waits in its queue until then. */
static void test_exec_after(void **state)
{
    (void)state;
    char uuid[40];
    CREATE(uuid, "cli-three", "--target", "later", "--exec-after", "+1h");
    child_t c;
    RUN(&c, "job", "get", uuid, "-j");
    expect_status(&c, 0);
    json_t *job = json_loads(c.out, 0, NULL);
    assert_non_null(job);
    assert_string_equal(itest_execution(job), "queued");
    const char *exec_after = json_string_value(json_object_get(job, "exec_after"));
    if (exec_after == NULL)
        fail_msg("no exec_after in %s", c.out);
    /* An hour from now, give or take the time this test took. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t now_ms = (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u;
    char iso[32];
    iso8601_format(now_ms + 3600000u, iso);
    assert_int_equal(strncmp(exec_after, iso, 13), 0); /* the same hour */
    json_decref(job);
    child_dispose(&c);
    CREATE(uuid, "cli-three", "--target", "later-iso", "--exec-after", "2030-01-02T03:04:05Z");
    RUN(&c, "job", "get", uuid, "-o", "exec_after,execution", "-H");
    expect_status(&c, 0);
    assert_string_equal(c.out, "2030-01-02T03:04:05.000Z  queued\n");
    child_dispose(&c);
    RUN(&c, "job", "cancel", uuid, "--watch");
    expect_status(&c, 1);
    assert_int_equal(strncmp(last_line(c.out), "Job canceled", 12), 0);
    child_dispose(&c);
}

static void test_failed_job_exits_1(void **state)
{
    (void)state;
    child_t c;
    RUN(&c, "job", "create", "cli-fail", "--watch");
    expect_status(&c, 1);
    expect_plain(&c);
    expect_in(c.out, CHECK " one (");
    expect_in(c.out, CROSS " boom (");
    expect_in(c.out, "Boom: it broke");
    expect_in(c.out, CHECK " onerror: report (");
    const char *last = last_line(c.out);
    if (strncmp(last, "Job failed after ", 17) != 0 || strstr(last, "(step boom)") == NULL)
        fail_msg("last line \"%s\"", last);
    child_dispose(&c);
}

static void test_usage_errors_exit_2(void **state)
{
    (void)state;
    static const char *const cases[][8] = {
        {NULL},
        {"job", NULL},
        {"bogus", NULL},
        {"job", "bogus", NULL},
        {"job", "create", NULL},
        {"job", "create", "cli-three", "-p", "novalue", NULL},
        {"job", "create", "cli-three", "-p", "a=1", "-p", "a.b=2", NULL},
        {"job", "create", "cli-three", "--exec-after", "tomorrow", NULL},
        {"job", "create", "cli-three", "-f", "/nonexistent/params.json", NULL},
        {"job", "get", NULL},
        {"job", "get", "a", "b", NULL},
        {"job", "list", "--limit", "ten", NULL},
        {"job", "list", "--frobnicate", NULL},
        {"job", "resume", "x", "--result", "{not json", NULL},
        {"job", "resume", "x", "--result", "1", "--error", "E:m", NULL},
        {"job", "cancel", "x", "--from", "s", NULL},
        {"--url", "ftp://127.0.0.1:1", "stats", NULL},
        {"workflow", "load", "/nonexistent.json", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        child_t c;
        run_env(&c, NULL, cases[i]);
        if (c.status != 2)
            fail_msg("case %zu (%s %s %s): exit %d, expected 2; stderr:\n%s", i,
                     cases[i][0] ? cases[i][0] : "", cases[i][0] && cases[i][1] ? cases[i][1] : "",
                     cases[i][0] && cases[i][1] && cases[i][2] ? cases[i][2] : "", c.status, c.err);
        assert_string_equal(c.out, "");
        expect_in(c.err, i == 0 ? "Usage: tern" : "tern: ");
        child_dispose(&c);
    }
    /* Help is not an error. */
    child_t c;
    RUN(&c, "job", "create", "--help");
    expect_status(&c, 0);
    expect_in(c.out, "Usage: tern job create WORKFLOW");
    child_dispose(&c);
    RUN(&c, "--help");
    expect_status(&c, 0);
    expect_in(c.out, "Exit status:");
    expect_in(c.out, "130");
    child_dispose(&c);
}

static void test_api_errors_exit_3(void **state)
{
    (void)state;
    child_t c;
    RUN(&c, "job", "get", "1b4e28ba-2fa1-11d2-883f-0016d3cca427");
    expect_status(&c, 3);
    expect_in(c.err, "tern: ResourceNotFound: ");
    assert_string_equal(c.out, "");
    child_dispose(&c);

    RUN(&c, "workflow", "get", "no-such-workflow");
    expect_status(&c, 3);
    expect_in(c.err, "tern: ResourceNotFound: ");
    child_dispose(&c);

    RUN(&c, "job", "create", "no-such-workflow");
    expect_status(&c, 3);
    expect_in(c.err, "tern: ");
    child_dispose(&c);

    /* A job refused by an admission check: its code and message, nothing on stdout. */
    write_file("refuse.json", "{\"name\": \"cli-refuse\", \"version\": \"1.0.0\", \"admission\": ["
                              " {\"name\": \"package\", \"task\": \"itest.admit_refuse\","
                              "  \"args\": {\"status\": 404, \"code\": \"NoSuchPackage\","
                              "  \"message\": \"package ${params.pkg} does not exist\"}}],"
                              " \"chain\": [{\"name\": \"n\", \"task\": \"core.noop\"}]}");
    RUN(&c, "workflow", "load", path_of("refuse.json"));
    expect_status(&c, 0);
    child_dispose(&c);
    RUN(&c, "job", "create", "cli-refuse", "-p", "pkg=base-64");
    expect_status(&c, 3);
    expect_in(c.err, "tern: NoSuchPackage: package base-64 does not exist");
    assert_string_equal(c.out, "");
    child_dispose(&c);

    /* 409: canceling a job that already finished. */
    char uuid[40];
    CREATE(uuid, "cli-three", "--target", "vm-409");
    json_decref(itest_wait_finished(&W.client, uuid, WAIT_MS));
    RUN(&c, "job", "cancel", uuid);
    expect_status(&c, 3);
    expect_in(c.err, "tern: Conflict: ");
    child_dispose(&c);
    RUN(&c, "job", "resume", uuid);
    expect_status(&c, 3);
    expect_in(c.err, "tern: Conflict: ");
    child_dispose(&c);

    /* The same workflow version with another definition. */
    write_file("three-changed.json",
               "{\"name\": \"cli-three\", \"version\": \"1.0.0\", \"chain\": ["
               " {\"name\": \"other\", \"task\": \"core.noop\"}]}");
    RUN(&c, "workflow", "load", path_of("three-changed.json"));
    expect_status(&c, 3);
    expect_in(c.err, "tern: Conflict: ");
    expect_in(c.err, "three-changed.json: ");
    child_dispose(&c);

    /* No token: 401. */
    static const char *const no_token[] = {"TERN_TOKEN=", NULL};
    RUN_ENV(&c, no_token, "stats");
    expect_status(&c, 3);
    expect_in(c.err, "tern: InvalidCredentials: ");
    expect_in(c.err, "Set TERN_TOKEN");
    child_dispose(&c);

    /* A submit token: jobs yes, workflows no, and the refusal says which scope. */
    static const char *const submit[] = {"TERN_TOKEN=" SUBMIT_TOKEN, NULL};
    RUN_ENV(&c, submit, "job", "list", "--limit", "1");
    expect_status(&c, 0);
    child_dispose(&c);
    RUN_ENV(&c, submit, "workflow", "load", path_of("three.json"));
    expect_status(&c, 3);
    expect_in(c.err, "tern: NotAuthorized: ");
    expect_in(c.err, "POST /workflows needs a token of scope operator; this token has scope "
                     "submit");
    expect_in(c.err, "--api-token-file gives each token its scope");
    child_dispose(&c);
}

/* tern schedule: create prints the uuid; list, get, resume and delete show it; a bad
 * cron is the API's message (exit 3), a missing -w a usage error (exit 2); a submit
 * token reads schedules but cannot change one. */
static void test_schedule_commands(void **state)
{
    (void)state;
    child_t c;
    RUN(&c, "schedule", "create", "-w", "cli-three", "--cron", "0 25 * * *");
    expect_status(&c, 3);
    expect_in(c.err, "tern: InvalidArgument: cron: hour \"25\": 25 is out of range 0-23");
    child_dispose(&c);
    RUN(&c, "schedule", "create", "--every", "1h");
    expect_status(&c, 2);
    expect_in(c.err, "missing -w WORKFLOW");
    child_dispose(&c);
    RUN(&c, "schedule", "create", "-w", "cli-three", "--every", "1h", "--cron", "* * * * *");
    expect_status(&c, 2);
    child_dispose(&c);

    RUN(&c, "schedule", "create", "-w", "cli-three", "--cron", "30 2 * * *", "--tz", "Europe/Paris",
        "-p", "n=1", "--paused");
    expect_status(&c, 0);
    char uuid[40];
    /* The line is the new schedule's uuid: longer than one is a fault, not to be cut. */
    int n = snprintf(uuid, sizeof uuid, "%s", last_line(c.out));
    assert_true(n > 0 && (size_t)n < sizeof uuid);
    assert_true(uuid_valid(uuid));
    child_dispose(&c);
    RUN(&c, "schedule", "list");
    expect_status(&c, 0);
    expect_in(c.out, uuid);
    expect_in(c.out, "30 2 * * * Europe/Paris");
    child_dispose(&c);
    RUN(&c, "schedule", "get", uuid, "-o", "paused,params.n", "-H");
    expect_status(&c, 0);
    assert_string_equal(last_line(c.out), "true  1");
    child_dispose(&c);
    RUN(&c, "schedule", "resume", uuid);
    expect_status(&c, 0);
    expect_in(c.out, "paused     false");
    child_dispose(&c);

    static const char *const submit[] = {"TERN_TOKEN=" SUBMIT_TOKEN, NULL};
    RUN_ENV(&c, submit, "schedule", "get", uuid);
    expect_status(&c, 0);
    expect_in(c.out, "cli-three");
    child_dispose(&c);
    RUN_ENV(&c, submit, "schedule", "pause", uuid);
    expect_status(&c, 3);
    expect_in(c.err, "tern: NotAuthorized: ");
    child_dispose(&c);

    RUN(&c, "schedule", "delete", uuid);
    expect_status(&c, 0);
    expect_in(c.out, "deleted");
    child_dispose(&c);
    RUN(&c, "schedule", "get", uuid);
    expect_status(&c, 3);
    expect_in(c.err, "tern: ResourceNotFound: ");
    child_dispose(&c);
}

static void test_unreachable_exits_4(void **state)
{
    (void)state;
    /* A port that was free a moment ago: nothing listens there. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(a.sin_port));
    child_t c;
    RUN(&c, "--url", url, "job", "list");
    expect_status(&c, 4);
    expect_in(c.err, "tern: cannot reach the API at ");
    child_dispose(&c);
    char env_url[80];
    snprintf(env_url, sizeof env_url, "TERN_URL=%s", url);
    const char *env[] = {env_url, NULL};
    RUN_ENV(&c, env, "job", "watch", "1b4e28ba-2fa1-11d2-883f-0016d3cca427");
    expect_status(&c, 4);
    child_dispose(&c);
}

static void test_resume_through_cli(void **state)
{
    (void)state;
    char uuid[40];
    CREATE(uuid, "cli-wait", "--target", "resume-ok");
    must_see_event(uuid, "waiting", NULL);
    child_t c;
    RUN(&c, "job", "get", uuid, "-o", "execution", "-H");
    assert_string_equal(c.out, "waiting\n");
    child_dispose(&c);
    RUN(&c, "job", "resume", uuid, "--result", "{\"approved_by\": \"ops\"}");
    expect_status(&c, 0);
    expect_in(c.out, "resumed");
    child_dispose(&c);
    RUN(&c, "job", "watch", uuid);
    expect_status(&c, 0);
    expect_plain(&c);
    expect_in(c.out, "\u23f8 approve (");
    expect_in(c.out, "\u25b6 resumed\n");
    expect_in(c.out, CHECK " after (");
    assert_int_equal(strncmp(last_line(c.out), "Job succeeded", 13), 0);
    child_dispose(&c);
    json_t *job = itest_job_get(&W.client, uuid);
    const json_t *result =
        json_object_get(json_array_get(json_object_get(job, "chain_results"), 0), "result");
    assert_string_equal(json_string_value(json_object_get(result, "approved_by")), "ops");
    json_decref(job);

    /* Resumed with an error: the step fails, so does the job. */
    CREATE(uuid, "cli-wait", "--target", "resume-error");
    must_see_event(uuid, "waiting", NULL);
    RUN(&c, "job", "resume", uuid, "--error", "Denied:not today", "--watch");
    expect_status(&c, 1);
    expect_in(c.out, CROSS " approve (");
    expect_in(c.out, "Denied: not today");
    child_dispose(&c);
}

static void test_cancel_through_cli(void **state)
{
    (void)state;
    char uuid[40];
    CREATE(uuid, "cli-long", "--target", "cancel-me");
    must_see_event(uuid, "running", NULL);
    child_t c;
    RUN(&c, "job", "cancel", uuid);
    expect_status(&c, 0);
    expect_in(c.out, uuid);
    child_dispose(&c);
    RUN(&c, "job", "watch", uuid);
    expect_status(&c, 1);
    expect_plain(&c);
    expect_in(c.out, "\u2298 nap (");
    expect_in(c.out, CHECK " oncancel: cleanup (");
    assert_int_equal(strncmp(last_line(c.out), "Job canceled", 12), 0);
    child_dispose(&c);
}

static void test_retry_through_cli(void **state)
{
    (void)state;
    child_t c;
    RUN(&c, "job", "create", "cli-check", "-p", "ok=false", "--watch");
    expect_status(&c, 1);
    expect_in(c.out, CROSS " check (");
    char uuid[40];
    snprintf(uuid, sizeof uuid, "%.36s", c.out + 4); /* "Job <uuid> (...)" */
    assert_true(uuid_valid(uuid));
    child_dispose(&c);
    RUN(&c, "job", "retry", uuid, "-p", "ok=true", "--watch");
    expect_status(&c, 0);
    expect_plain(&c);
    /* The whole story: the first run, its end, the retry, the second run. */
    expect_in(c.out, CROSS " check (");
    expect_in(c.out, CROSS " job failed\n");
    expect_in(c.out, "\u21ba retry from step check\n");
    assert_true(strstr(c.out, "retry from step check") < strstr(c.out, CHECK " check ("));
    assert_int_equal(lines_starting(c.out, CHECK " first ("), 1); /* not run again */
    assert_int_equal(strncmp(last_line(c.out), "Job succeeded", 13), 0);
    child_dispose(&c);
    json_t *job = itest_job_get(&W.client, uuid);
    assert_true(json_is_true(json_object_get(json_object_get(job, "params"), "ok")));
    json_decref(job);
}

/* Ctrl-C stops the watching, never the job. */
static void test_ctrl_c_stops_watching_only(void **state)
{
    (void)state;
    char uuid[40];
    CREATE(uuid, "cli-long", "--target", "ctrl-c");
    must_see_event(uuid, "running", NULL);
    child_t c;
    child_start(&c, (const char *const[]){"job", "watch", uuid, NULL}, NULL);
    if (!child_read(&c, "(cli-long 1.0.0):\n", RUN_MS))
        fail_msg("no header from tern job watch: %s / %s", c.out, c.err);
    kill(c.pid, SIGINT);
    child_finish(&c, RUN_MS);
    expect_status(&c, 130);
    expect_in(c.err, "stopped watching");
    child_dispose(&c);
    json_t *job = itest_job_get(&W.client, uuid);
    assert_string_equal(itest_execution(job), "running");
    json_decref(job);
    char msg[256];
    assert_int_equal(itest_job_cancel(&W.client, uuid, msg, sizeof msg), 0);
    json_decref(itest_wait_finished(&W.client, uuid, WAIT_MS));
}

static void test_polling_draws_the_same(void **state)
{
    (void)state;
    child_t c;
    RUN(&c, "job", "create", "cli-three", "--target", "poll", "--watch", "--poll");
    expect_status(&c, 0);
    expect_plain(&c);
    assert_int_equal(lines_starting(c.out, CHECK " "), 3);
    assert_int_equal(strncmp(last_line(c.out), "Job succeeded", 13), 0);
    child_dispose(&c);
    RUN(&c, "job", "create", "cli-fail", "--target", "poll", "--watch", "--poll");
    expect_status(&c, 1);
    expect_in(c.out, CROSS " boom (");
    expect_in(c.out, CHECK " onerror: report (");
    child_dispose(&c);
}

static void test_watch_json_events(void **state)
{
    (void)state;
    child_t c;
    RUN(&c, "-j", "job", "create", "cli-three", "--target", "ndjson", "--watch");
    expect_status(&c, 0);
    int steps = 0, lines = 0;
    bool finished = false;
    for (char *line = strtok(c.out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        json_t *ev = json_loads(line, 0, NULL);
        if (ev == NULL)
            fail_msg("not a JSON line: %s", line);
        const char *type = json_string_value(json_object_get(ev, "type"));
        steps += type != NULL && strcmp(type, "step") == 0;
        finished = finished || (type != NULL && strcmp(type, "finished") == 0);
        lines++;
        json_decref(ev);
    }
    assert_int_equal(steps, 3);
    assert_true(finished);
    child_dispose(&c);
}

static void test_workflow_commands(void **state)
{
    (void)state;
    child_t c;
    RUN(&c, "workflow", "list", "-H", "-o", "name");
    expect_status(&c, 0);
    expect_in(c.out, "cli-three\n");
    expect_in(c.out, "cli-wait\n");
    child_dispose(&c);
    RUN(&c, "workflow", "get", "cli-three", "-j");
    expect_status(&c, 0);
    json_t *doc = json_loads(c.out, 0, NULL);
    assert_non_null(doc);
    assert_int_equal(json_array_size(json_object_get(doc, "chain")), 3);
    json_decref(doc);
    child_dispose(&c);
    RUN(&c, "workflow", "get", "cli-three@1.0.0");
    expect_status(&c, 0);
    expect_in(c.out, "chain  1  copy     core.sleep");
    child_dispose(&c);
    /* Loading again changes nothing. */
    RUN(&c, "workflow", "load", path_of("three.json"), "-H");
    expect_status(&c, 0);
    assert_int_equal(strncmp(c.out, "unchanged  cli-three  1.0.0  ", 29), 0);
    child_dispose(&c);
    /* Validation: against the API's tasks, or the form only. */
    RUN(&c, "workflow", "validate", path_of("three.json"), path_of("wait.json"));
    expect_status(&c, 0);
    expect_in(c.out, "three.json: valid (cli-three 1.0.0, 3 steps)\n");
    child_dispose(&c);
    RUN(&c, "workflow", "validate", path_of("three.json"), path_of("bad.json"),
        path_of("broken.json"));
    expect_status(&c, 1);
    expect_in(c.out, "bad.json: invalid: chain[0].task: unknown task \"core.lgo\"\n");
    expect_in(c.out, "broken.json: invalid: line 2, column ");
    child_dispose(&c);
    RUN(&c, "workflow", "validate", "--offline", path_of("bad.json"));
    expect_status(&c, 0);
    expect_in(c.out, "tasks not checked");
    child_dispose(&c);
    /* What validate accepts, load accepts; what it refuses, load refuses too. */
    RUN(&c, "workflow", "load", path_of("bad.json"));
    expect_status(&c, 3);
    expect_in(c.err, "chain[0].task: unknown task \"core.lgo\"");
    child_dispose(&c);
}

static void test_status_commands(void **state)
{
    (void)state;
    child_t c;
    RUN(&c, "tasks", "-H", "-o", "task");
    expect_status(&c, 0);
    expect_in(c.out, "core.noop\n");
    expect_in(c.out, "itest.wait\n");
    child_dispose(&c);
    RUN(&c, "runners", "-j");
    expect_status(&c, 0);
    json_t *doc = json_loads(c.out, 0, NULL);
    assert_true(json_is_array(doc));
    assert_string_equal(json_string_value(json_object_get(json_array_get(doc, 0), "id")), "r1");
    json_decref(doc);
    child_dispose(&c);
    RUN(&c, "runners");
    expect_status(&c, 0);
    assert_int_equal(strncmp(c.out, "ID ", 3), 0);
    expect_in(c.out, "\nr1 ");
    child_dispose(&c);
    RUN(&c, "stats");
    expect_status(&c, 0);
    assert_int_equal(strncmp(c.out, "EXECUTION", 9), 0);
    expect_in(c.out, "\nsucceeded ");
    child_dispose(&c);
    RUN(&c, "stats", "-j");
    expect_status(&c, 0);
    doc = json_loads(c.out, 0, NULL);
    assert_true(json_integer_value(json_object_get(json_object_get(doc, "total"), "succeeded")) >=
                1);
    json_decref(doc);
    child_dispose(&c);
}

/* `tern get` on the itest plugin's views, over notes its task wrote. */
static void test_get_views(void **state)
{
    (void)state;
    itest_workflow_put_ok(&W.client, "{\"name\": \"cli-note\", \"chain\": [{\"name\": \"n\", "
                                     "\"task\": \"itest.note\", \"args\": {\"id\": "
                                     "\"${params.id}\", \"kind\": \"${params.kind}\"}}]}");
    for (int i = 1; i <= 5; i++) {
        char uuid[40];
        itest_job_create_ok(
            &W.client, "cli-note",
            itest_fmt("{\"id\": \"g%d\", \"kind\": \"%s\"}", i, i % 2 == 1 ? "a" : "b"), uuid);
        json_decref(itest_wait_finished_ok(&W.client, uuid, WAIT_MS));
    }
    child_t c;
    /* A list: a table whose columns are the first object's keys. */
    RUN(&c, "get", "/itest/notes");
    expect_status(&c, 0);
    assert_string_equal(c.out, "ID  KIND\ng1  a\ng2  b\ng3  a\ng4  b\ng5  a\n");
    child_dispose(&c);
    /* --limit reads that many and tells how to go on; the view's own filter rides along. */
    RUN(&c, "get", "/itest/notes?kind=a", "--limit", "2", "-H", "-o", "id");
    expect_status(&c, 0);
    assert_string_equal(c.out, "g1\ng3\n");
    expect_in(c.err, "tern: more: tern get '/itest/notes?kind=a' --marker g3");
    child_dispose(&c);
    RUN(&c, "get", "/itest/notes?kind=a", "--marker", "g3", "-H", "-o", "id");
    expect_status(&c, 0);
    assert_string_equal(c.out, "g5\n");
    child_dispose(&c);
    /* An object: KEY VALUE lines, or its JSON with -j. */
    RUN(&c, "get", "/itest/notes/g2");
    expect_status(&c, 0);
    assert_string_equal(c.out, "id    g2\nkind  b\n");
    child_dispose(&c);
    RUN(&c, "get", "/itest/notes/g2", "-j");
    expect_status(&c, 0);
    json_t *doc = json_loads(c.out, 0, NULL);
    assert_string_equal(itest_str_of(doc, "kind"), "b");
    json_decref(doc);
    child_dispose(&c);
    RUN(&c, "get", "/views", "-H", "-o", "path");
    expect_status(&c, 0);
    expect_in(c.out, "/itest/notes\n/itest/notes/:id\n");
    child_dispose(&c);
    /* Errors as every API error: exit status 3 and the API's code. */
    RUN(&c, "get", "/itest/notes?color=red");
    expect_status(&c, 3);
    expect_in(c.err, "tern: InvalidArgument: color: view \"/itest/notes\" of plugin \"itest\"");
    child_dispose(&c);
    RUN(&c, "get", "/itest/broken");
    expect_status(&c, 3);
    expect_in(c.err, "tern: ViewScriptError: view \"/itest/broken\" of plugin \"itest\"");
    child_dispose(&c);
    RUN(&c, "get", "/itest/notes/g9");
    expect_status(&c, 3);
    expect_in(c.err, "tern: ResourceNotFound: /itest/notes/g9 does not exist");
    child_dispose(&c);
    RUN(&c, "get", "itest/notes");
    expect_status(&c, 2);
    expect_in(c.err, "expected a path of the API");
    child_dispose(&c);
}

static void test_job_info(void **state)
{
    (void)state;
    char uuid[40];
    CREATE(uuid, "cli-three", "--target", "info");
    child_t c;
    RUN(&c, "job", "info", uuid, "--add", "{\"note\": \"hello\", \"n\": 1}");
    expect_status(&c, 0);
    child_dispose(&c);
    RUN(&c, "job", "info", uuid);
    expect_status(&c, 0);
    expect_in(c.out, "{\"note\":\"hello\",\"n\":1}\n");
    child_dispose(&c);
    RUN(&c, "job", "info", uuid, "-o", "note", "-H");
    expect_status(&c, 0);
    assert_string_equal(c.out, "hello\n");
    child_dispose(&c);
    RUN(&c, "job", "info", uuid, "--add", "[1]");
    expect_status(&c, 2);
    child_dispose(&c);
    json_decref(itest_wait_finished(&W.client, uuid, WAIT_MS));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_watch_draws_each_step),
        cmocka_unit_test(test_watch_shows_progress),
        cmocka_unit_test(test_json_columns_and_no_header),
        cmocka_unit_test(test_params_from_flags_and_file),
        cmocka_unit_test(test_exec_after),
        cmocka_unit_test(test_failed_job_exits_1),
        cmocka_unit_test(test_usage_errors_exit_2),
        cmocka_unit_test(test_api_errors_exit_3),
        cmocka_unit_test(test_unreachable_exits_4),
        cmocka_unit_test(test_resume_through_cli),
        cmocka_unit_test(test_cancel_through_cli),
        cmocka_unit_test(test_retry_through_cli),
        cmocka_unit_test(test_ctrl_c_stops_watching_only),
        cmocka_unit_test(test_polling_draws_the_same),
        cmocka_unit_test(test_watch_json_events),
        cmocka_unit_test(test_workflow_commands),
        cmocka_unit_test(test_status_commands),
        cmocka_unit_test(test_job_info),
        cmocka_unit_test(test_get_views),
        cmocka_unit_test(test_fallback_to_polling_without_event_route),
        cmocka_unit_test(test_dropped_stream_resumes_after_last_event),
        cmocka_unit_test(test_answers_that_are_not_the_api),
        cmocka_unit_test(test_token_never_logged),
        cmocka_unit_test(test_schedule_commands),
    };
    return cmocka_run_group_tests_name("cli", tests, group_setup, group_teardown) == 0 ? 0 : 1;
}
