/*
 * test_plugin_http.c -- the built http plugin (argv[1]: path of http.so), run through
 * task_harness against mini_http_server on the harness's loop: results with parsed
 * JSON or text, request bodies and headers as sent, the error code of each failure
 * (and whether it is fatal), the expect list, timeouts, the size limit, argument
 * checks and cancel while a request is in flight.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "loop_util.h"
#include "mini_http_server.h"
#include "model/args_schema.h"
#include "task_harness.h"

#define BOUND_MS 10000

static const char *plugin_path;

typedef struct fixture {
    task_harness_t *h;
    mini_http_server_t *server;
    harness_run_t run;
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = xcalloc(1, sizeof *f);
    f->h = task_harness_new(plugin_path, NULL);
    f->server = mini_http_server_new(task_harness_loop(f->h));
    if (f->server == NULL)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    harness_run_dispose(&f->run);
    mini_http_server_free(f->server);
    task_harness_free(f->h);
    free(f);
    return 0;
}

/* Runs http.request with args built by json_pack-style format. */
static int run_args(fixture_t *f, json_t *args, uint64_t cancel_after_ms)
{
    harness_run_dispose(&f->run);
    int rc =
        task_harness_run(f->h, "request", args, NULL, NULL, BOUND_MS, cancel_after_ms, &f->run);
    json_decref(args);
    return rc;
}

static char *url(fixture_t *f, const char *path, char *buf, size_t len)
{
    return mini_http_server_url(f->server, path, buf, len);
}

static bool code_is_fatal(const char *code)
{
    void *dl = NULL;
    const tern_task_def *def = task_harness_plugin_open(plugin_path, &dl)->tasks[0];
    bool fatal = false;
    for (const char *const *c = def->fatal_codes; c != NULL && *c != NULL; c++)
        fatal = fatal || strcmp(*c, code) == 0;
    dlclose(dl);
    return fatal;
}

static void test_get_json(void **state)
{
    fixture_t *f = *state;
    const char *headers[] = {"Content-Type: application/json; charset=utf-8", NULL};
    mini_http_server_script(f->server, "/vms/1",
                            &(mini_http_response_t){.body = "{\"uuid\": \"v1\", \"disks\": [1, 2]}",
                                                    .headers = headers});
    char u[128];
    assert_int_equal(run_args(f, json_pack("{s:s}", "url", url(f, "/vms/1", u, sizeof u)), 0), 0);
    assert_int_equal(f->run.outcome.kind, TASK_DONE);
    json_t *r = f->run.outcome.result;
    assert_int_equal(json_integer_value(json_object_get(r, "status")), 200);
    json_t *want = json_pack("{s:s, s:[i,i]}", "uuid", "v1", "disks", 1, 2);
    assert_true(json_equal(json_object_get(r, "body"), want));
    json_decref(want);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(r, "headers"), "content-type")),
        "application/json; charset=utf-8");
    assert_true(json_is_integer(json_object_get(r, "elapsed_ms")));
    assert_string_equal(mini_http_server_request(f->server, 0)->method, "GET");
}

static void test_text_body_and_post(void **state)
{
    fixture_t *f = *state;
    const char *headers[] = {"Content-Type: text/plain", NULL};
    mini_http_server_script(
        f->server, "/echo",
        &(mini_http_response_t){.status = 201, .body = "{not json", .headers = headers});
    char u[128];
    url(f, "/echo", u, sizeof u);
    assert_int_equal(run_args(f,
                              json_pack("{s:s, s:{s:[i,s]}, s:{s:s}}", "url", u, "body", "list", 1,
                                        "two", "headers", "X-Request-Id", "r-1"),
                              0),
                     0);
    assert_int_equal(f->run.outcome.kind, TASK_DONE);
    json_t *r = f->run.outcome.result;
    assert_int_equal(json_integer_value(json_object_get(r, "status")), 201);
    assert_string_equal(json_string_value(json_object_get(r, "body")), "{not json");
    const mini_http_request_t *got = mini_http_server_request(f->server, 0);
    assert_string_equal(got->method, "POST"); /* a body without a method means POST */
    assert_string_equal(got->body, "{\"list\":[1,\"two\"]}");
    assert_string_equal(mini_http_request_header(got, "Content-Type"), "application/json");
    assert_string_equal(mini_http_request_header(got, "X-Request-Id"), "r-1");

    assert_int_equal(run_args(f,
                              json_pack("{s:s, s:s, s:s}", "url", u, "method", "put", "body_text",
                                        "plain words"),
                              0),
                     0);
    assert_int_equal(f->run.outcome.kind, TASK_DONE);
    got = mini_http_server_request(f->server, 1);
    assert_string_equal(got->method, "PUT");
    assert_string_equal(got->body, "plain words");
    assert_string_equal(mini_http_request_header(got, "Content-Type"), "text/plain; charset=utf-8");
}

static void test_client_error_is_fatal(void **state)
{
    fixture_t *f = *state;
    mini_http_server_script(f->server, "/missing",
                            &(mini_http_response_t){.status = 404, .body = "no such vm\nat all"});
    char u[128];
    assert_int_equal(run_args(f, json_pack("{s:s}", "url", url(f, "/missing", u, sizeof u)), 0), 0);
    char want[256];
    snprintf(want, sizeof want, "GET %s: HTTP 404: no such vm at all", u);
    harness_run_assert_failed(&f->run, "HttpClientError", want);
    assert_true(code_is_fatal("HttpClientError"));
}

static void test_server_error_is_retryable(void **state)
{
    fixture_t *f = *state;
    mini_http_server_script(f->server, "/broken",
                            &(mini_http_response_t){.status = 503, .body = "try later"});
    mini_http_server_script(f->server, "/busy", &(mini_http_response_t){.status = 429});
    char u[128];
    assert_int_equal(
        run_args(f,
                 json_pack("{s:s, s:s}", "url", url(f, "/broken", u, sizeof u), "method", "DELETE"),
                 0),
        0);
    char want[256];
    snprintf(want, sizeof want, "DELETE %s: HTTP 503: try later", u);
    harness_run_assert_failed(&f->run, "HttpServerError", want);
    assert_false(code_is_fatal("HttpServerError"));

    assert_int_equal(run_args(f, json_pack("{s:s}", "url", url(f, "/busy", u, sizeof u)), 0), 0);
    harness_run_assert_failed(&f->run, "HttpTooManyRequests", "HTTP 429");
    assert_false(code_is_fatal("HttpTooManyRequests"));
}

static void test_connection_refused(void **state)
{
    fixture_t *f = *state;
    int port = loop_closed_port(task_harness_loop(f->h), BOUND_MS);
    assert_true(port > 0);

    char u[128];
    snprintf(u, sizeof u, "http://127.0.0.1:%d/vms", port);
    assert_int_equal(run_args(f, json_pack("{s:s}", "url", u), 0), 0);
    char want[160];
    snprintf(want, sizeof want, "GET %s: ", u);
    harness_run_assert_failed(&f->run, "HttpConnectError", want);
    assert_false(code_is_fatal("HttpConnectError"));
}

/* One request to the receiver on loopback by a harness configured with
 * {"allow_networks": <list>}; returns the run (disposed by the caller) and the number
 * of connections the receiver accepted. */
static size_t run_with_allow_list(const char *list, harness_run_t *run)
{
    json_t *config = json_pack("{s:o}", "allow_networks", json_loads(list, 0, NULL));
    task_harness_t *h = task_harness_new(plugin_path, config);
    json_decref(config);
    mini_http_server_t *server = mini_http_server_new(task_harness_loop(h));
    assert_non_null(server);
    char u[128];
    mini_http_server_url(server, "/meta", u, sizeof u);
    json_t *args = json_pack("{s:s}", "url", u);
    assert_int_equal(task_harness_run(h, "request", args, NULL, NULL, BOUND_MS, 0, run), 0);
    json_decref(args);
    /* A connection the client made is accepted by now or on this pass. */
    uv_run(task_harness_loop(h), UV_RUN_NOWAIT);
    size_t connections = mini_http_server_connections(server);
    mini_http_server_free(server);
    task_harness_free(h);
    return connections;
}

/* With allow_networks leaving loopback out, a request to a receiver on loopback fails
 * with NetworkNotAllowed (never retried), naming the address and the setting, and the
 * receiver gets no connection; with loopback in, it goes through. */
static void test_allow_networks(void **state)
{
    (void)state;
    harness_run_t run = {0};
    size_t connections = run_with_allow_list("[\"10.0.0.0/8\", \"::1/128\"]", &run);
    assert_true(run.finished);
    assert_int_equal(run.outcome.kind, TASK_FAILED);
    assert_string_equal(run.outcome.code, "NetworkNotAllowed");
    if (strstr(run.outcome.message,
               "network not allowed: 127.0.0.1 is not in plugins.http.allow_networks") == NULL)
        fail_msg("message: %s", run.outcome.message);
    assert_true(code_is_fatal("NetworkNotAllowed"));
    assert_int_equal(connections, 0);
    harness_run_dispose(&run);

    run = (harness_run_t){0};
    connections = run_with_allow_list("[\"127.0.0.0/8\"]", &run);
    assert_true(run.finished);
    if (run.outcome.kind != TASK_DONE)
        fail_msg("refused: %s %s", run.outcome.code, run.outcome.message);
    assert_int_equal(connections, 1);
    harness_run_dispose(&run);
}

static void test_expect_list(void **state)
{
    fixture_t *f = *state;
    mini_http_server_script(f->server, "/ok", &(mini_http_response_t){.status = 200});
    mini_http_server_script(f->server, "/gone", &(mini_http_response_t){.status = 404});
    mini_http_server_script(
        f->server, "/moved",
        &(mini_http_response_t){.status = 302, .headers = (const char *[]){"Location: /x", NULL}});
    char u[128];
    /* 200 is a 2xx but not the 201 asked for. */
    assert_int_equal(
        run_args(f, json_pack("{s:s, s:[i]}", "url", url(f, "/ok", u, sizeof u), "expect", 201), 0),
        0);
    harness_run_assert_failed(&f->run, "HttpUnexpectedStatus", "HTTP 200, expected 201");
    assert_true(code_is_fatal("HttpUnexpectedStatus"));
    /* A 404 listed in expect is success (e.g. "make sure it is deleted"). */
    assert_int_equal(run_args(f,
                              json_pack("{s:s, s:[i,i]}", "url", url(f, "/gone", u, sizeof u),
                                        "expect", 200, 404),
                              0),
                     0);
    assert_int_equal(f->run.outcome.kind, TASK_DONE);
    assert_int_equal(json_integer_value(json_object_get(f->run.outcome.result, "status")), 404);
    /* Redirects are not followed and are not 2xx. */
    assert_int_equal(run_args(f, json_pack("{s:s}", "url", url(f, "/moved", u, sizeof u)), 0), 0);
    harness_run_assert_failed(&f->run, "HttpUnexpectedStatus", "HTTP 302");
}

static void test_timeout_and_size_limit(void **state)
{
    fixture_t *f = *state;
    mini_http_server_script(f->server, "/slow",
                            &(mini_http_response_t){.body = "late", .delay_ms = 5000});
    char big[4096];
    memset(big, 'b', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    mini_http_server_script(f->server, "/big", &(mini_http_response_t){.body = big});
    char u[128];
    assert_int_equal(
        run_args(f, json_pack("{s:s, s:i}", "url", url(f, "/slow", u, sizeof u), "timeout_ms", 150),
                 0),
        0);
    harness_run_assert_failed(&f->run, "HttpTimeout", "timed out after 150 ms");
    assert_false(code_is_fatal("HttpTimeout"));
    assert_true(f->run.elapsed_ms < 5000);

    assert_int_equal(run_args(f,
                              json_pack("{s:s, s:i}", "url", url(f, "/big", u, sizeof u),
                                        "max_response_bytes", 1000),
                              0),
                     0);
    harness_run_assert_failed(&f->run, "HttpResponseTooLarge", "larger than 1000 bytes");
    assert_true(code_is_fatal("HttpResponseTooLarge"));
}

static void test_bad_args(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(run_args(f, json_pack("{s:s}", "url", "ftp://x/y"), 0), 0);
    harness_run_assert_failed(&f->run, "InvalidArgument", "http:// or https://");
    assert_int_equal(run_args(f, json_pack("{}"), 0), 0);
    harness_run_assert_failed(&f->run, "InvalidArgument", "\"url\"");
    assert_int_equal(run_args(f,
                              json_pack("{s:s, s:{}, s:s}", "url", "http://127.0.0.1:1/", "body",
                                        "body_text", "x"),
                              0),
                     0);
    harness_run_assert_failed(&f->run, "InvalidArgument", "cannot both");
    assert_int_equal(run_args(f,
                              json_pack("{s:s, s:{s:s}}", "url", "http://127.0.0.1:1/", "headers",
                                        "X-A", "a\r\nInjected: 1"),
                              0),
                     0);
    harness_run_assert_failed(&f->run, "InvalidArgument", "one-line");
    assert_int_equal(
        run_args(f, json_pack("{s:s, s:[s]}", "url", "http://127.0.0.1:1/", "expect", "200"), 0),
        0);
    harness_run_assert_failed(&f->run, "InvalidArgument", "\"expect\"");
    assert_int_equal(mini_http_server_request_count(f->server), 0);
}

static bool server_has_request(void *data)
{
    return mini_http_server_request_count(data) >= 1;
}

static void test_cancel_in_flight(void **state)
{
    fixture_t *f = *state;
    mini_http_server_script(f->server, "/slow",
                            &(mini_http_response_t){.body = "late", .delay_ms = 5000});
    char u[128];
    uint64_t t0 = clock_mono_ms();
    assert_int_equal(run_args(f, json_pack("{s:s}", "url", url(f, "/slow", u, sizeof u)), 100),
                     -ECANCELED);
    assert_false(f->run.finished);
    assert_true(clock_mono_ms() - t0 < 5000);
    /* The request had reached the server; the plugin's bookkeeping is freed by its
     * cancel hook (ASan builds would report it otherwise). */
    assert_int_equal(
        loop_run_until(task_harness_loop(f->h), server_has_request, f->server, BOUND_MS), 0);
}

static void test_descriptor(void **state)
{
    (void)state;
    void *dl = NULL;
    const tern_plugin *p = task_harness_plugin_open(plugin_path, &dl);
    assert_non_null(dl);
    assert_string_equal(p->name, "http");
    const tern_task_def *def = p->tasks[0];
    assert_string_equal(def->name, "request");
    assert_null(p->tasks[1]);
    args_schema_t *schema = NULL;
    char err[256] = "";
    if (args_schema_compile(def->args_schema, "http.request", &schema, err, sizeof err) != 0)
        fail_msg("%s", err);
    json_t *args = json_pack("{s:s, s:i}", "url", "http://x/", "timeout_ms", 5);
    assert_int_equal(args_schema_check(schema, args, "args", ARGS_SCHEMA_EXPANDED, err, sizeof err),
                     0);
    json_object_set_new(args, "urll", json_string("typo"));
    assert_int_not_equal(
        args_schema_check(schema, args, "args", ARGS_SCHEMA_EXPANDED, err, sizeof err), 0);
    json_decref(args);
    args_schema_free(schema);
    dlclose(dl);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s path/to/http.so\n", argv[0]);
        return 1;
    }
    plugin_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_get_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_body_and_post, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_error_is_fatal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_error_is_retryable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_refused, setup, teardown),
        cmocka_unit_test(test_allow_networks),
        cmocka_unit_test_setup_teardown(test_expect_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_and_size_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_args, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_in_flight, setup, teardown),
        cmocka_unit_test(test_descriptor),
    };
    int failures = cmocka_run_group_tests_name("plugin_http", tests, NULL, NULL);
    return failures == 0 ? 0 : 1;
}
