/*
 * test_http_guard.c -- who may drive a real ternd over HTTP: a web page may not (Host,
 * Origin and Content-Type checks, each alone and together, over HTTP/1.1 and HTTP/2),
 * a submit token may not do an operator's work, nothing about routes is told before
 * the token is checked, a malformed token file stops ternd naming the line, and the
 * token of $TERN_API_TOKEN reaches no child (exec steps, isolated helpers, the
 * embedded redis-server) nor /proc/<ternd>/environ.
 *
 * The group's ternd runs with the default settings (no token, exec plugin loaded), the
 * setting under which a page could run a command before; the token tests start
 * api-only ternds of their own.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_calls.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "world.h"

static itest_world_t W;
static http_sync_t http;

/* ---- helpers ------------------------------------------------------------------ */

static void call_with(http_sync_t *h, http_sync_resp_t *out, const char *method, const char *path,
                      const char *body, const char *const *headers)
{
    int rc = http_sync_do(h, method, path, body, body != NULL ? strlen(body) : 0, headers, out);
    if (rc != 0)
        fail_msg("%s %s (%s): transport error: %s", method, path,
                 headers != NULL && headers[0] != NULL ? headers[0] : "", out->error);
}

/* The number of workflows stored under `name` (GET /workflows?name=). */
static size_t workflows_named(const char *name)
{
    http_sync_resp_t r;
    char path[200];
    snprintf(path, sizeof path, "/workflows?name=%s", name);
    call_with(&http, &r, "GET", path, NULL, NULL);
    itest_expect_status(&r, 200);
    size_t n = json_array_size(r.json);
    http_sync_resp_dispose(&r);
    return n;
}

/* Sends `request` as is over a new HTTP/1.1 connection (curl would merge or drop a
 * repeated header) and returns the answer's text, read until ternd closes or 5 s pass
 * (malloc'd; the caller frees it). */
static char *raw_exchange(const char *request)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)W.ternd.api_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        fail_msg("connect: %s", strerror(errno));
    size_t n = strlen(request);
    if (send(fd, request, n, MSG_NOSIGNAL) != (ssize_t)n)
        fail_msg("send: %s", strerror(errno));
    size_t cap = 8192, len = 0;
    char *got = xmalloc(cap);
    got[0] = '\0';
    uint64_t start = clock_mono_ms();
    while (clock_mono_ms() - start < 5000 && len + 1 < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t k = recv(fd, got + len, cap - 1 - len, 0);
        if (k <= 0)
            break;
        len += (size_t)k;
        got[len] = '\0';
    }
    close(fd);
    return got;
}

/* Starts an api-only ternd with the NULL-terminated `flags`. */
/* ---- a web page cannot store a workflow or create a job ----------------------- */

/* The request a page could make before: a cross-origin, rebinding-style POST of a
 * workflow with a shell step, as text/plain (no preflight), then a job of it. */
static void test_csrf_reproduction_refused(void **state)
{
    (void)state;
    char pwned[400];
    snprintf(pwned, sizeof pwned, "%s/csrf-pwned", W.dir.path);
    const char *wf = itest_fmt("{\"name\":\"csrf\",\"version\":\"1\",\"chain\":[{\"name\":\"a\","
                               "\"task\":\"exec.run\",\"args\":{\"argv\":\"id > %s\","
                               "\"shell\":true}}]}",
                               pwned);
    char wf_copy[1024];
    snprintf(wf_copy, sizeof wf_copy, "%s", wf);
    const char *const page[] = {"Origin: http://evil.example", "Host: evil.example",
                                "Content-Type: text/plain", NULL};
    http_sync_resp_t r;
    call_with(&http, &r, "POST", "/workflows", wf_copy, page);
    if (r.status >= 200 && r.status < 300)
        fail_msg("a page stored a workflow: %ld %s", r.status, r.body);
    http_sync_resp_dispose(&r);
    call_with(&http, &r, "POST", "/jobs", "{\"workflow\":\"csrf\",\"target\":\"csrf\"}", page);
    if (r.status >= 200 && r.status < 300)
        fail_msg("a page created a job: %ld %s", r.status, r.body);
    http_sync_resp_dispose(&r);
    assert_int_equal(workflows_named("csrf"), 0);
    struct stat st;
    assert_int_not_equal(stat(pwned, &st), 0);
}

/* Each check refuses on its own, over HTTP/1.1 and HTTP/2 (:authority is the Host). */
static void check_each_alone(http_sync_t *h)
{
    const char *wf =
        "{\"name\":\"guard-alone\",\"chain\":[{\"name\":\"n\",\"task\":\"core.noop\"}]}";
    http_sync_resp_t r;

    const char *const host_only[] = {"Host: evil.example", NULL};
    call_with(h, &r, "POST", "/workflows", wf, host_only);
    itest_expect_error(&r, 421, "MisdirectedRequest", "--allowed-hosts");
    http_sync_resp_dispose(&r);
    call_with(h, &r, "GET", "/jobs", NULL, host_only);
    itest_expect_error(&r, 421, "MisdirectedRequest", "evil.example");
    http_sync_resp_dispose(&r);

    const char *const origin_only[] = {"Origin: http://evil.example", NULL};
    call_with(h, &r, "POST", "/workflows", wf, origin_only);
    itest_expect_error(&r, 403, "Forbidden", "http://evil.example");
    http_sync_resp_dispose(&r);
    call_with(h, &r, "GET", "/jobs", NULL, origin_only); /* every route */
    itest_expect_error(&r, 403, "Forbidden", NULL);
    http_sync_resp_dispose(&r);
    const char *const origin_null[] = {"Origin: null", NULL};
    call_with(h, &r, "POST", "/jobs", "{\"workflow\":\"guard-alone\"}", origin_null);
    itest_expect_error(&r, 403, "Forbidden", "null");
    http_sync_resp_dispose(&r);
    /* A page on a public address is not ternd's origin either. */
    const char *const origin_ip[] = {"Origin: http://203.0.113.7", NULL};
    call_with(h, &r, "POST", "/jobs/00000000-0000-4000-8000-000000000000/cancel", NULL, origin_ip);
    itest_expect_error(&r, 403, "Forbidden", NULL);
    http_sync_resp_dispose(&r);

    const char *const plain[] = {"Content-Type: text/plain", NULL};
    call_with(h, &r, "POST", "/workflows", wf, plain);
    itest_expect_error(&r, 415, "UnsupportedMediaType", "text/plain");
    http_sync_resp_dispose(&r);
    const char *const form[] = {"Content-Type: application/x-www-form-urlencoded", NULL};
    call_with(h, &r, "POST", "/jobs", "{\"workflow\":\"guard-alone\"}", form);
    itest_expect_error(&r, 415, "UnsupportedMediaType", "application/x-www-form-urlencoded");
    http_sync_resp_dispose(&r);
    assert_int_equal(workflows_named("guard-alone"), 0);

    /* What tools send is accepted: IP literals and localhost with any port, JSON with
     * parameters, ternd's own origin. */
    const char *const fine[] = {"Host: localhost:1",
                                "Content-Type: application/json; charset=utf-8", NULL};
    call_with(h, &r, "POST", "/workflows", wf, fine);
    itest_expect_status(&r, 201);
    char gone[120];
    snprintf(gone, sizeof gone, "/workflows/%s", itest_str_of(r.json, "uuid"));
    http_sync_resp_dispose(&r);
    const char *const v6[] = {"Host: [::1]:8080", NULL};
    call_with(h, &r, "GET", "/workflows/guard-alone", NULL, v6);
    itest_expect_status(&r, 200);
    http_sync_resp_dispose(&r);
    char own[120];
    snprintf(own, sizeof own, "Origin: %s", W.base);
    const char *const own_origin[] = {own, NULL};
    call_with(h, &r, "DELETE", gone, NULL, own_origin);
    itest_expect_status(&r, 204);
    http_sync_resp_dispose(&r);
}

static void test_each_check_alone_http1(void **state)
{
    (void)state;
    http_sync_t h;
    http_sync_open(&h, W.base);
    h.http1_only = true;
    check_each_alone(&h);
    /* HTTP/1.1 without Host is malformed. */
    const char *const no_host[] = {"Host:", NULL};
    http_sync_resp_t r;
    call_with(&h, &r, "GET", "/ping", NULL, no_host);
    itest_expect_error(&r, 400, "BadRequest", "Host");
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
}

static void test_each_check_alone_http2(void **state)
{
    (void)state;
    http_sync_t h;
    http_sync_open(&h, W.base);
    h.http2_prior = true;
    /* A second request on one cleartext HTTP/2 connection fails between curl 7.88 and
     * h2o 2.2 whatever it asks, so each request has a connection of its own. */
    h.fresh = true;
    check_each_alone(&h);
    http_sync_close(&h);
}

/* A request with two Host, two Origin or two Content-Type headers is refused whichever
 * comes first: the checks read one value, and what reads the request next may go by
 * the other. */
static void test_repeated_headers_refused(void **state)
{
    (void)state;
    const char *wf = "{\"name\":\"guard-twice\",\"chain\":[{\"name\":\"n\",\"task\":"
                     "\"core.noop\"}]}";
    char own[120];
    snprintf(own, sizeof own, "Origin: %s", W.base);
    const char *const cases[][3] = {
        /* first, second, what the message names */
        {"Content-Type: application/json", "Content-Type: text/plain", "2 Content-Type headers"},
        {"Content-Type: text/plain", "Content-Type: application/json", "2 Content-Type headers"},
        {own, "Origin: http://evil.example", "2 Origin headers"},
        {"Origin: http://evil.example", own, "2 Origin headers"},
        /* h2o takes the last Host; a proxy in front may go by the first */
        {"Host: evil.example", "Host: 127.0.0.1", "2 Host headers"},
        {"Host: 127.0.0.1", "Host: 127.0.0.1", "2 Host headers"},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(cases); i++) {
        bool types = strncmp(cases[i][0], "Content-Type", 12) == 0;
        bool hosts = strncmp(cases[i][0], "Host", 4) == 0;
        char req[1024];
        snprintf(req, sizeof req,
                 "POST /workflows HTTP/1.1\r\n%sConnection: close\r\n%s\r\n%s\r\n%sContent-Length: "
                 "%zu\r\n\r\n%s",
                 hosts ? "" : "Host: 127.0.0.1\r\n", cases[i][0], cases[i][1],
                 types ? "" : "Content-Type: application/json\r\n", strlen(wf), wf);
        char *got = raw_exchange(req);
        if (strncmp(got, "HTTP/1.1 400 ", 13) != 0 || strstr(got, "BadRequest") == NULL ||
            strstr(got, cases[i][2]) == NULL)
            fail_msg("%s then %s: expected 400 naming %s, got: %.300s", cases[i][0], cases[i][1],
                     cases[i][2], got);
        free(got);
    }
    assert_int_equal(workflows_named("guard-twice"), 0);
}

/* Names and origins of the settings are accepted; others still are not. */
static void test_allowed_hosts_and_origins(void **state)
{
    (void)state;
    itest_ternd_t t;
    const char *const flags[] = {"--allowed-hosts", "tern.example,API.Example.org",
                                 "--allowed-origins", "http://ui.example:3000", NULL};
    itest_world_start_api_only(&W, &t, "names", flags);
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", t.api_port);
    http_sync_t h;
    http_sync_open(&h, base);
    http_sync_resp_t r;
    const char *const named[] = {"Host: api.example.org:443", "Origin: http://ui.example:3000",
                                 NULL};
    call_with(&h, &r, "GET", "/jobs?limit=1", NULL, named);
    itest_expect_status(&r, 200);
    http_sync_resp_dispose(&r);
    const char *const other[] = {"Host: tern.example.evil", NULL};
    call_with(&h, &r, "GET", "/jobs?limit=1", NULL, other);
    itest_expect_error(&r, 421, "MisdirectedRequest", NULL);
    http_sync_resp_dispose(&r);
    const char *const other_origin[] = {"Origin: http://ui.example:3001", NULL};
    call_with(&h, &r, "GET", "/jobs?limit=1", NULL, other_origin);
    itest_expect_error(&r, 403, "Forbidden", NULL);
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
    assert_int_equal(itest_ternd_signal(&t, SIGTERM, 10000), 0);
}

/* ---- tokens and scopes --------------------------------------------------------- */

#define SUBMIT_TOKEN   "submit-token-0123456789abcdef"
#define OPERATOR_TOKEN "operator-token-0123456789abcdef"

static void test_scopes(void **state)
{
    (void)state;
    char file[400];
    snprintf(file, sizeof file, "%s/tokens", W.dir.path);
    itest_write_file(file, "# the API's callers\n"
                           "submit   " SUBMIT_TOKEN "\n"
                           "\n"
                           "operator " OPERATOR_TOKEN "\r\n");
    itest_ternd_t t;
    const char *const flags[] = {"--api-token-file", file, NULL};
    itest_world_start_api_only(&W, &t, "scopes", flags);
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", t.api_port);
    http_sync_t h;
    http_sync_open(&h, base);
    http_sync_resp_t r;
    const char *wf = "{\"name\":\"scoped\",\"chain\":[{\"name\":\"n\",\"task\":\"core.noop\"}]}";

    /* Without a token nothing about routes is told: not 404, not 405. */
    call_with(&h, &r, "GET", "/no-such-route", NULL, NULL);
    itest_expect_error(&r, 401, "InvalidCredentials", NULL);
    http_sync_resp_dispose(&r);
    call_with(&h, &r, "DELETE", "/jobs", NULL, NULL);
    itest_expect_error(&r, 401, "InvalidCredentials", NULL);
    http_sync_resp_dispose(&r);
    call_with(&h, &r, "GET", "/ping", NULL, NULL);
    itest_expect_status(&r, 200);
    http_sync_resp_dispose(&r);

    /* submit: no workflows stored, no operator routes; jobs and reads work. */
    snprintf(h.auth, sizeof h.auth, "Authorization: Bearer %s", SUBMIT_TOKEN);
    call_with(&h, &r, "POST", "/workflows", wf, NULL);
    itest_expect_error(&r, 403, "NotAuthorized", "scope operator; this token has scope submit");
    http_sync_resp_dispose(&r);
    call_with(&h, &r, "GET", "/stats", NULL, NULL);
    itest_expect_error(&r, 403, "NotAuthorized", "operator");
    http_sync_resp_dispose(&r);
    call_with(&h, &r, "GET", "/no-such-route", NULL, NULL);
    itest_expect_error(&r, 404, "ResourceNotFound", NULL);
    http_sync_resp_dispose(&r);
    assert_int_equal(workflows_named("scoped"), 0);

    snprintf(h.auth, sizeof h.auth, "Authorization: Bearer %s", OPERATOR_TOKEN);
    call_with(&h, &r, "POST", "/workflows", wf, NULL);
    itest_expect_status(&r, 201);
    http_sync_resp_dispose(&r);
    call_with(&h, &r, "GET", "/stats", NULL, NULL);
    itest_expect_status(&r, 200);
    http_sync_resp_dispose(&r);
    call_with(&h, &r, "DELETE", "/jobs", NULL, NULL);
    itest_expect_error(&r, 405, "MethodNotAllowed", NULL);
    http_sync_resp_dispose(&r);

    snprintf(h.auth, sizeof h.auth, "Authorization: Bearer %s", SUBMIT_TOKEN);
    call_with(&h, &r, "GET", "/workflows?name=scoped", NULL, NULL);
    itest_expect_status(&r, 200);
    assert_int_equal(json_array_size(r.json), 1);
    http_sync_resp_dispose(&r);
    call_with(&h, &r, "GET", "/tasks", NULL, NULL);
    itest_expect_status(&r, 200);
    http_sync_resp_dispose(&r);
    call_with(&h, &r, "POST", "/jobs", "{\"workflow\":\"scoped\",\"target\":\"s1\"}", NULL);
    itest_expect_status(&r, 201);
    char path[120];
    snprintf(path, sizeof path, "/jobs/%s", itest_str_of(r.json, "uuid"));
    http_sync_resp_dispose(&r);
    call_with(&h, &r, "GET", path, NULL, NULL);
    itest_expect_status(&r, 200);
    http_sync_resp_dispose(&r);
    call_with(&h, &r, "DELETE", "/workflows/scoped", NULL, NULL);
    itest_expect_error(&r, 403, "NotAuthorized", "submit");
    http_sync_resp_dispose(&r);
    assert_int_equal(workflows_named("scoped"), 1);

    http_sync_close(&h);
    assert_int_equal(itest_ternd_signal(&t, SIGTERM, 10000), 0);
}

/* A sanitizer build reports into the output of the ternds this file runs itself. */
static void expect_no_sanitizer_report(const char *out)
{
    static const char *const marks[] = {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                                        "runtime error:"};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(marks); i++)
        if (strstr(out, marks[i]) != NULL)
            fail_msg("sanitizer report: %s", out);
}

/* Runs ternd with `flags` expecting it to refuse to start; returns its output. */
static char *run_refused(const char *flags)
{
    char cmd[1600];
    snprintf(cmd, sizeof cmd,
             "timeout 20 %s --role api --listen 127.0.0.1:0 --redis %s --plugin-dir %s %s 2>&1",
             getenv("TERN_BIN"), W.redis.url, getenv("TERN_TASKS"), flags);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *out = xcalloc(1, 65536);
    size_t n = fread(out, 1, 65535, p);
    out[n] = '\0';
    int st = pclose(p);
    if (st == 0)
        fail_msg("ternd started with %s: %s", flags, out);
    expect_no_sanitizer_report(out);
    return out;
}

static void test_malformed_token_file(void **state)
{
    (void)state;
    char file[400], flags[500];
    snprintf(file, sizeof file, "%s/bad-tokens", W.dir.path);
    snprintf(flags, sizeof flags, "--api-token-file %s", file);
    static const struct {
        const char *text;
        const char *needle;
    } cases[] = {
        {"submit " SUBMIT_TOKEN "\nadmin " OPERATOR_TOKEN "\n",
         "line 2: unknown scope \\\"admin\\\""},
        {"# only a comment\n\n", "no token in the file"},
        {"operator short\n", "line 1: a token needs at least 16 characters"},
        {"submit " SUBMIT_TOKEN "\noperator " SUBMIT_TOKEN "\n", "line 2: the same token"},
        {"operator a b c d e f g h i j\n", "line 1: expected"},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(cases); i++) {
        itest_write_file(file, cases[i].text);
        char *out = run_refused(flags);
        if (strstr(out, cases[i].needle) == NULL || strstr(out, file) == NULL)
            fail_msg("case %zu: output does not name %s and %s: %s", i, file, cases[i].needle, out);
        free(out);
    }
}

/* ---- the token reaches no child ------------------------------------------------ */

#define ENV_TOKEN "env-token-that-no-child-may-see-0123"

/* The job's whole document as text (malloc'd). */
static char *job_text(http_sync_t *h, const char *uuid)
{
    http_sync_resp_t r;
    char path[120];
    snprintf(path, sizeof path, "/jobs/%s", uuid);
    call_with(h, &r, "GET", path, NULL, NULL);
    itest_expect_status(&r, 200);
    char *s = xstrdup(r.body);
    http_sync_resp_dispose(&r);
    return s;
}

static void test_env_token_not_in_children(void **state)
{
    (void)state;
    setenv("TERN_API_TOKEN", ENV_TOKEN, 1);
    itest_ternd_t t;
    itest_ternd_start(&t, &W.redis, &W.dir, "envtok", NULL);
    unsetenv("TERN_API_TOKEN");
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", t.api_port);
    http_sync_t h;
    http_sync_open(&h, base);
    snprintf(h.auth, sizeof h.auth, "Authorization: Bearer %s", ENV_TOKEN);

    /* ternd's environment as /proc shows it, the step's own (inherited) environment,
     * and an isolated helper's (the step inherits the helper's). */
    char wf[2048];
    snprintf(wf, sizeof wf,
             "{\"name\":\"envtok\",\"chain\":["
             "{\"name\":\"parent\",\"task\":\"exec.run\",\"args\":{\"argv\":[\"cat\","
             "\"/proc/%d/environ\"]}},"
             "{\"name\":\"own\",\"task\":\"exec.run\",\"args\":{\"argv\":[\"env\"],"
             "\"inherit_env\":true}},"
             "{\"name\":\"helper\",\"task\":\"exec.run\",\"isolate\":true,\"args\":{\"argv\":"
             "[\"env\"],\"inherit_env\":true}}],"
             "\"onerror\":["
             "{\"name\":\"own2\",\"task\":\"exec.run\",\"args\":{\"argv\":[\"env\"],"
             "\"inherit_env\":true}},"
             "{\"name\":\"helper2\",\"task\":\"exec.run\",\"isolate\":true,\"args\":{\"argv\":"
             "[\"env\"],\"inherit_env\":true}}]}",
             (int)t.pid);
    http_sync_resp_t r;
    call_with(&h, &r, "POST", "/workflows", wf, NULL);
    itest_expect_status(&r, 201);
    http_sync_resp_dispose(&r);
    call_with(&h, &r, "POST", "/jobs", "{\"workflow\":\"envtok\",\"target\":\"e\"}", NULL);
    itest_expect_status(&r, 201);
    char uuid[40];
    snprintf(uuid, sizeof uuid, "%s", itest_str_of(r.json, "uuid"));
    http_sync_resp_dispose(&r);
    json_t *job = itest_wait_finished_ok(&W.client, uuid, 20000);
    json_decref(job);
    char *text = job_text(&h, uuid);
    if (strstr(text, ENV_TOKEN) != NULL)
        fail_msg("a child saw the token: %s", text);
    /* The children did run: their environments are in the results. */
    if (strstr(text, "PATH=") == NULL)
        fail_msg("no step printed an environment: %s", text);
    free(text);
    http_sync_close(&h);
    assert_int_equal(itest_ternd_signal(&t, SIGTERM, 10000), 0);
}

/* The embedded redis-server, started by ternd itself, gets no token either. Redis
 * rewrites the memory /proc/PID/environ shows (its process title), so the server is
 * started through a wrapper that writes its environment down first. */
static void test_env_token_not_in_embedded_redis(void **state)
{
    (void)state;
    char wrapper[400], seen[400], data[400], log[400], cmd[1600];
    snprintf(wrapper, sizeof wrapper, "%s/redis-wrapper.sh", W.dir.path);
    snprintf(seen, sizeof seen, "%s/redis-env", W.dir.path);
    snprintf(data, sizeof data, "%s/embedded", W.dir.path);
    snprintf(log, sizeof log, "%s/embedded.log", W.dir.path);
    itest_write_file(wrapper, itest_fmt("#!/bin/sh\nenv > %s.tmp && mv %s.tmp %s\n"
                                        "exec redis-server \"$@\"\n",
                                        seen, seen, seen));
    assert_int_equal(chmod(wrapper, 0700), 0);
    snprintf(cmd, sizeof cmd,
             "TERN_API_TOKEN=%s exec %s --role api --listen 127.0.0.1:0 --data-dir %s "
             "--plugin-dir %s --redis-server %s > %s 2>&1 & echo $!",
             ENV_TOKEN, getenv("TERN_BIN"), data, getenv("TERN_TASKS"), wrapper, log);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int pid = 0;
    assert_int_equal(fscanf(p, "%d", &pid), 1);
    pclose(p);
    FILE *f = NULL;
    for (int i = 0; i < 300 && (f = fopen(seen, "r")) == NULL; i++)
        itest_pause_ms(50);
    if (f == NULL) {
        kill(pid, SIGKILL);
        fail_msg("ternd did not start its embedded Redis (see %s)", log);
    }
    char env[65536];
    size_t n = fread(env, 1, sizeof env - 1, f);
    fclose(f);
    env[n] = '\0';
    kill(pid, SIGTERM);
    for (int i = 0; i < 200 && kill(pid, 0) == 0; i++)
        itest_pause_ms(50);
    FILE *lf = fopen(log, "r");
    assert_non_null(lf);
    char *text = xcalloc(1, 1 << 20);
    size_t tn = fread(text, 1, (1 << 20) - 1, lf);
    text[tn] = '\0';
    fclose(lf);
    expect_no_sanitizer_report(text);
    free(text);
    if (strstr(env, ENV_TOKEN) != NULL)
        fail_msg("the embedded redis-server inherited the token");
    assert_non_null(strstr(env, "PATH="));
}

/* ---- group -------------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    itest_world_start(&W, "guard1", NULL, NULL);
    http_sync_open(&http, W.base);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    http_sync_close(&http);
    itest_world_stop(&W, 10000);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csrf_reproduction_refused),
        cmocka_unit_test(test_each_check_alone_http1),
        cmocka_unit_test(test_each_check_alone_http2),
        cmocka_unit_test(test_repeated_headers_refused),
        cmocka_unit_test(test_allowed_hosts_and_origins),
        cmocka_unit_test(test_scopes),
        cmocka_unit_test(test_malformed_token_file),
        cmocka_unit_test(test_env_token_not_in_children),
        cmocka_unit_test(test_env_token_not_in_embedded_redis),
    };
    /* TERN_TEST_FILTER=test_name runs one test (for a check by hand). */
    if (getenv("TERN_TEST_FILTER") != NULL)
        cmocka_set_test_filter(getenv("TERN_TEST_FILTER"));
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
