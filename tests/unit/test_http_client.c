/*
 * test_http_client.c -- engine/run/http_client.c against mini_http_server on one loop:
 * methods, bodies and headers in both directions, status passthrough, connection
 * refused, the response size limit, timeouts, cancel, teardown with requests in
 * flight and many concurrent requests. Every test closes what it opened and asserts
 * uv_loop_close() == 0.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "loop_util.h"
#include "mini_http_server.h"
#include "run/http_client.h"

#define BOUND_MS 10000

typedef struct fixture {
    uv_loop_t loop;
    http_client_t *client;
    mini_http_server_t *server;
} fixture_t;

/* What one request's callback saw. */
typedef struct reply {
    bool done;
    int calls;
    long status;
    char *error;
    char *body;
    size_t body_len;
    char *content_type;
    uint64_t elapsed_ms;
} reply_t;

static void on_reply(void *data, const tern_http_res *res)
{
    reply_t *r = data;
    r->done = true;
    r->calls++;
    r->status = res->status;
    r->error = res->error ? xstrdup(res->error) : NULL;
    r->body = xstrndup(res->body, res->body_len);
    r->body_len = res->body_len;
    r->content_type = res->content_type ? xstrdup(res->content_type) : NULL;
    r->elapsed_ms = res->elapsed_ms;
}

static void reply_dispose(reply_t *r)
{
    free(r->error);
    free(r->body);
    free(r->content_type);
}

static int setup(void **state)
{
    fixture_t *f = xcalloc(1, sizeof *f);
    if (uv_loop_init(&f->loop) != 0)
        return -1;
    f->client = http_client_new(&f->loop);
    f->server = mini_http_server_new(&f->loop);
    if (f->server == NULL)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    http_client_free(f->client);
    mini_http_server_free(f->server);
    int rc = loop_close_bounded(&f->loop, BOUND_MS);
    free(f);
    assert_int_equal(rc, 0);
    return 0;
}

static http_request_t *start(fixture_t *f, const tern_http_req *req, reply_t *r)
{
    char err[256] = "";
    http_request_t *hr = http_client_request(f->client, req, on_reply, r, err, sizeof err);
    if (hr == NULL)
        fail_msg("http_client_request: %s", err);
    return hr;
}

static void test_get_with_headers(void **state)
{
    fixture_t *f = *state;
    const char *res_headers[] = {"Content-Type: application/json", "X-Answer: yes", NULL};
    mini_http_server_script(
        f->server, "/thing",
        &(mini_http_response_t){.status = 200, .body = "{\"a\": 1}", .headers = res_headers});
    char url[128];
    const char *headers[] = {"X-Test: one", "Accept: application/json", NULL};
    reply_t r = {0};
    start(f,
          &(tern_http_req){.size = sizeof(tern_http_req),
                           .url = mini_http_server_url(f->server, "/thing?x=1", url, sizeof url),
                           .headers = headers},
          &r);
    assert_int_equal(loop_run_until_flag(&f->loop, &r.done, BOUND_MS), 0);

    assert_null(r.error);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"a\": 1}");
    assert_int_equal(r.body_len, 8);
    assert_non_null(r.content_type);
    assert_string_equal(r.content_type, "application/json");

    assert_int_equal(mini_http_server_request_count(f->server), 1);
    const mini_http_request_t *got = mini_http_server_request(f->server, 0);
    assert_string_equal(got->method, "GET");
    assert_string_equal(got->path, "/thing?x=1");
    assert_string_equal(mini_http_request_header(got, "x-test"), "one");
    assert_string_equal(mini_http_request_header(got, "Accept"), "application/json");
    assert_null(mini_http_request_header(got, "Expect"));
    assert_int_equal(got->body_len, 0);
    reply_dispose(&r);
}

static void test_post_and_put_bodies(void **state)
{
    fixture_t *f = *state;
    mini_http_server_script(f->server, "/items",
                            &(mini_http_response_t){.status = 201, .body = "created"});
    char url[128];
    mini_http_server_url(f->server, "/items", url, sizeof url);
    const char *headers[] = {"Content-Type: application/json", NULL};
    /* A body larger than curl's Expect: 100-continue threshold, with a NUL in it. */
    size_t big_len = 5000;
    char *big = xmalloc(big_len);
    for (size_t i = 0; i < big_len; i++)
        big[i] = (char)('a' + i % 26);
    big[100] = '\0';

    reply_t post = {0}, put = {0}, del = {0};
    start(f,
          &(tern_http_req){.size = sizeof(tern_http_req),
                           .method = "POST",
                           .url = url,
                           .headers = headers,
                           .body = "{\"k\":\"v\"}",
                           .body_len = 9},
          &post);
    assert_int_equal(loop_run_until_flag(&f->loop, &post.done, BOUND_MS), 0);
    start(f,
          &(tern_http_req){.size = sizeof(tern_http_req),
                           .method = "PUT",
                           .url = url,
                           .body = big,
                           .body_len = big_len},
          &put);
    free(big); /* the client copied it */
    assert_int_equal(loop_run_until_flag(&f->loop, &put.done, BOUND_MS), 0);
    start(f, &(tern_http_req){.size = sizeof(tern_http_req), .method = "DELETE", .url = url}, &del);
    assert_int_equal(loop_run_until_flag(&f->loop, &del.done, BOUND_MS), 0);

    assert_null(post.error);
    assert_int_equal(post.status, 201);
    assert_string_equal(post.body, "created");
    assert_null(put.error);
    assert_int_equal(put.status, 201);
    assert_null(del.error);

    assert_int_equal(mini_http_server_request_count(f->server), 3);
    const mini_http_request_t *p = mini_http_server_request(f->server, 0);
    assert_string_equal(p->method, "POST");
    assert_string_equal(p->body, "{\"k\":\"v\"}");
    assert_string_equal(mini_http_request_header(p, "Content-Type"), "application/json");
    const mini_http_request_t *u = mini_http_server_request(f->server, 1);
    assert_string_equal(u->method, "PUT");
    assert_int_equal(u->body_len, big_len);
    assert_int_equal(u->body[101], 'a' + 101 % 26);
    assert_int_equal(u->body[100], '\0');
    assert_string_equal(mini_http_server_request(f->server, 2)->method, "DELETE");
    /* Keep-alive: the three requests shared one connection. */
    assert_int_equal(mini_http_server_connections(f->server), 1);
    reply_dispose(&post);
    reply_dispose(&put);
    reply_dispose(&del);
}

static void test_status_passthrough(void **state)
{
    fixture_t *f = *state;
    mini_http_server_script(f->server, "/missing",
                            &(mini_http_response_t){.status = 404, .body = "no such thing"});
    mini_http_server_script(f->server, "/broken",
                            &(mini_http_response_t){.status = 500, .body = "oops"});
    char u1[128], u2[128];
    reply_t a = {0}, b = {0};
    start(f,
          &(tern_http_req){.size = sizeof(tern_http_req),
                           .url = mini_http_server_url(f->server, "/missing", u1, sizeof u1)},
          &a);
    start(f,
          &(tern_http_req){.size = sizeof(tern_http_req),
                           .url = mini_http_server_url(f->server, "/broken", u2, sizeof u2)},
          &b);
    assert_int_equal(loop_run_until_flag(&f->loop, &a.done, BOUND_MS), 0);
    assert_int_equal(loop_run_until_flag(&f->loop, &b.done, BOUND_MS), 0);
    assert_null(a.error);
    assert_int_equal(a.status, 404);
    assert_string_equal(a.body, "no such thing");
    assert_null(a.content_type);
    assert_null(b.error);
    assert_int_equal(b.status, 500);
    assert_string_equal(b.body, "oops");
    reply_dispose(&a);
    reply_dispose(&b);
}

static void test_connection_refused(void **state)
{
    fixture_t *f = *state;
    int port = loop_closed_port(&f->loop, BOUND_MS);
    assert_true(port > 0);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/x", port);
    reply_t r = {0};
    start(f, &(tern_http_req){.size = sizeof(tern_http_req), .url = url}, &r);
    assert_int_equal(loop_run_until_flag(&f->loop, &r.done, BOUND_MS), 0);
    assert_int_equal(r.status, 0);
    assert_non_null(r.error);
    assert_non_null(strstr(r.error, "onnect")); /* "Failed to connect ...: Connection refused" */
    assert_string_equal(r.body, "");
    reply_dispose(&r);
}

/* An allow-list from JSON text (caller frees). */
static net_allow_t *allow_list(const char *json)
{
    json_t *list = json_loads(json, 0, NULL);
    assert_non_null(list);
    net_allow_t *a = NULL;
    char err[256] = "";
    if (net_allow_parse(list, "test.allow_networks", &a, err, sizeof err) != 0)
        fail_msg("%s: %s", json, err);
    json_decref(list);
    return a;
}

/* A reply that also stops the loop: a refused request ends inside curl's timer
 * callback, after which a UV_RUN_ONCE pass would wait in poll for the next timer. */
typedef struct stop_reply {
    reply_t *r;
    uv_loop_t *loop;
} stop_reply_t;

static void on_reply_stop(void *data, const tern_http_res *res)
{
    stop_reply_t *s = data;
    on_reply(s->r, res);
    uv_stop(s->loop);
}

/* Runs one request limited by `allow` to `url` and returns what the callback saw. */
static void run_allowed(fixture_t *f, const net_allow_t *allow, const char *url, reply_t *r)
{
    char err[256] = "";
    stop_reply_t s = {.r = r, .loop = &f->loop};
    http_request_t *hr = http_client_request_allowed(
        f->client, &(tern_http_req){.size = sizeof(tern_http_req), .url = url}, allow,
        on_reply_stop, &s, err, sizeof err);
    if (hr == NULL)
        fail_msg("http_client_request_allowed: %s", err);
    assert_int_equal(loop_run_until_flag(&f->loop, &r->done, BOUND_MS), 0);
}

/* An allow-list without loopback refuses the receiver on loopback, by address or by a
 * name that resolves there, before any byte is sent (the server sees no connection);
 * one with it delivers. */
static void test_allow_networks(void **state)
{
    fixture_t *f = *state;
    net_allow_t *no_loopback = allow_list("[\"10.0.0.0/8\", \"fd00::/8\"]");
    net_allow_t *loopback = allow_list("[\"10.0.0.0/8\", \"127.0.0.1/32\"]");
    char url[128];
    mini_http_server_url(f->server, "/a", url, sizeof url);

    reply_t r = {0};
    run_allowed(f, no_loopback, url, &r);
    assert_int_equal(r.status, 0);
    assert_non_null(r.error);
    assert_string_equal(r.error, "network not allowed: 127.0.0.1 is not in test.allow_networks");
    reply_dispose(&r);

    char by_name[128];
    snprintf(by_name, sizeof by_name, "http://localhost:%d/a", mini_http_server_port(f->server));
    r = (reply_t){0};
    run_allowed(f, no_loopback, by_name, &r);
    assert_int_equal(r.status, 0);
    assert_non_null(r.error);
    if (strncmp(r.error, HTTP_CLIENT_NOT_ALLOWED, strlen(HTTP_CLIENT_NOT_ALLOWED)) != 0)
        fail_msg("localhost was not refused: %s", r.error);
    reply_dispose(&r);
    assert_int_equal(mini_http_server_connections(f->server), 0);
    assert_int_equal(mini_http_server_request_count(f->server), 0);

    r = (reply_t){0};
    run_allowed(f, loopback, url, &r);
    assert_null(r.error);
    assert_int_equal(r.status, 200);
    assert_int_equal(mini_http_server_request_count(f->server), 1);
    reply_dispose(&r);

    /* The connection that request left open is not reused by one that may not reach
     * its address. */
    assert_int_equal(mini_http_server_connections(f->server), 1);
    r = (reply_t){0};
    run_allowed(f, no_loopback, url, &r);
    assert_int_equal(r.status, 0);
    assert_non_null(r.error);
    assert_string_equal(r.error, "network not allowed: 127.0.0.1 is not in test.allow_networks");
    reply_dispose(&r);
    assert_int_equal(mini_http_server_request_count(f->server), 1);

    net_allow_free(no_loopback);
    net_allow_free(loopback);
}

static void test_response_size_limit(void **state)
{
    fixture_t *f = *state;
    char *big = xmalloc(100001);
    memset(big, 'x', 100000);
    big[100000] = '\0';
    mini_http_server_script(f->server, "/big", &(mini_http_response_t){.body = big});
    mini_http_server_script(f->server, "/small", &(mini_http_response_t){.body = "12345"});
    free(big);
    char u1[128], u2[128];
    reply_t over = {0}, exact = {0};
    start(f,
          &(tern_http_req){.size = sizeof(tern_http_req),
                           .url = mini_http_server_url(f->server, "/big", u1, sizeof u1),
                           .max_response_bytes = 1000},
          &over);
    start(f,
          &(tern_http_req){.size = sizeof(tern_http_req),
                           .url = mini_http_server_url(f->server, "/small", u2, sizeof u2),
                           .max_response_bytes = 5},
          &exact);
    assert_int_equal(loop_run_until_flag(&f->loop, &over.done, BOUND_MS), 0);
    assert_int_equal(loop_run_until_flag(&f->loop, &exact.done, BOUND_MS), 0);
    assert_non_null(over.error);
    assert_string_equal(over.error, "response larger than 1000 bytes (max_response_bytes)");
    assert_true(over.body_len <= 1000);
    assert_null(exact.error);
    assert_string_equal(exact.body, "12345");
    reply_dispose(&over);
    reply_dispose(&exact);
}

static void test_timeout(void **state)
{
    fixture_t *f = *state;
    mini_http_server_script(f->server, "/slow",
                            &(mini_http_response_t){.body = "late", .delay_ms = 5000});
    char url[128];
    reply_t r = {0};
    start(f,
          &(tern_http_req){.size = sizeof(tern_http_req),
                           .url = mini_http_server_url(f->server, "/slow", url, sizeof url),
                           .timeout_ms = 200},
          &r);
    assert_int_equal(loop_run_until_flag(&f->loop, &r.done, BOUND_MS), 0);
    assert_non_null(r.error);
    assert_non_null(strstr(r.error, "timed out after 200 ms"));
    assert_in_range(r.elapsed_ms, 190, 3000);
    reply_dispose(&r);
}

static void test_close_without_answer(void **state)
{
    fixture_t *f = *state;
    mini_http_server_script(f->server, "/hangup",
                            &(mini_http_response_t){.close_without_answer = true});
    char url[128];
    reply_t r = {0};
    start(f,
          &(tern_http_req){.size = sizeof(tern_http_req),
                           .url = mini_http_server_url(f->server, "/hangup", url, sizeof url)},
          &r);
    assert_int_equal(loop_run_until_flag(&f->loop, &r.done, BOUND_MS), 0);
    assert_int_equal(r.status, 0);
    assert_non_null(r.error);
    reply_dispose(&r);
}

static bool server_saw_one_close(void *data)
{
    fixture_t *f = data;
    return mini_http_server_request_count(f->server) >= 1 &&
           mini_http_server_closed(f->server) >= 1;
}

static bool server_has_request(void *data)
{
    return mini_http_server_request_count(((fixture_t *)data)->server) >= 1;
}

static void test_cancel_means_no_callback(void **state)
{
    fixture_t *f = *state;
    mini_http_server_script(f->server, "/slow",
                            &(mini_http_response_t){.body = "late", .delay_ms = 300});
    char url[128];
    mini_http_server_url(f->server, "/slow", url, sizeof url);

    /* Cancelled before it even started: nothing reaches the server. */
    reply_t early = {0};
    http_request_cancel(
        start(f, &(tern_http_req){.size = sizeof(tern_http_req), .url = url}, &early));

    /* Cancelled while the server holds the answer back: curl drops the connection. */
    reply_t r = {0};
    http_request_t *hr = start(f, &(tern_http_req){.size = sizeof(tern_http_req), .url = url}, &r);
    assert_int_equal(loop_run_until(&f->loop, server_has_request, f, BOUND_MS), 0);
    http_request_cancel(hr);
    assert_int_equal(loop_run_until(&f->loop, server_saw_one_close, f, BOUND_MS), 0);

    /* A later request on the same client completes; no stray callback came before. */
    reply_t after = {0};
    start(f, &(tern_http_req){.size = sizeof(tern_http_req), .url = url}, &after);
    assert_int_equal(loop_run_until_flag(&f->loop, &after.done, BOUND_MS), 0);
    assert_int_equal(after.status, 200);
    assert_int_equal(early.calls, 0);
    assert_int_equal(r.calls, 0);
    assert_int_equal(mini_http_server_request_count(f->server), 2);
    reply_dispose(&after);
}

static void test_free_with_requests_in_flight(void **state)
{
    fixture_t *f = *state;
    mini_http_server_script(f->server, "/slow",
                            &(mini_http_response_t){.body = "late", .delay_ms = 2000});
    char url[128];
    mini_http_server_url(f->server, "/slow", url, sizeof url);
    reply_t r[3] = {{0}};
    for (int i = 0; i < 3; i++)
        start(f, &(tern_http_req){.size = sizeof(tern_http_req), .url = url}, &r[i]);
    assert_int_equal(loop_run_until(&f->loop, server_has_request, f, BOUND_MS), 0);
    http_client_free(f->client);
    f->client = NULL; /* teardown's http_client_free(NULL) is a no-op */
    mini_http_server_free(f->server);
    f->server = NULL;
    assert_int_equal(loop_close_bounded(&f->loop, BOUND_MS), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(r[i].calls, 0);
    /* Reopen the loop so teardown's close succeeds. */
    assert_int_equal(uv_loop_init(&f->loop), 0);
}

/* A callback that frees the client while other requests are in flight. */
typedef struct free_in_cb {
    http_client_t *client;
    bool done;
    int calls;
} free_in_cb_t;

static void on_reply_free_client(void *data, const tern_http_res *res)
{
    (void)res;
    free_in_cb_t *x = data;
    x->calls++;
    x->done = true;
    http_client_free(x->client);
}

static void test_free_from_callback(void **state)
{
    fixture_t *f = *state;
    mini_http_server_script(f->server, "/slow",
                            &(mini_http_response_t){.body = "late", .delay_ms = 2000});
    char fast[128], slow[128];
    mini_http_server_url(f->server, "/fast", fast, sizeof fast);
    mini_http_server_url(f->server, "/slow", slow, sizeof slow);
    free_in_cb_t x = {.client = f->client};
    reply_t r = {0};
    char err[128];
    assert_non_null(
        http_client_request(f->client, &(tern_http_req){.size = sizeof(tern_http_req), .url = slow},
                            on_reply, &r, err, sizeof err));
    assert_non_null(
        http_client_request(f->client, &(tern_http_req){.size = sizeof(tern_http_req), .url = fast},
                            on_reply_free_client, &x, err, sizeof err));
    assert_int_equal(loop_run_until_flag(&f->loop, &x.done, BOUND_MS), 0);
    f->client = NULL;
    mini_http_server_free(f->server);
    f->server = NULL;
    assert_int_equal(loop_close_bounded(&f->loop, BOUND_MS), 0);
    assert_int_equal(x.calls, 1);
    assert_int_equal(r.calls, 0);
    assert_int_equal(uv_loop_init(&f->loop), 0);
}

static void test_refuses_bad_requests(void **state)
{
    fixture_t *f = *state;
    char err[256];
    reply_t r = {0};
    assert_null(http_client_request(
        f->client, &(tern_http_req){.size = sizeof(tern_http_req), .url = "ftp://example.com/x"},
        on_reply, &r, err, sizeof err));
    assert_string_equal(
        err, "http request \"ftp://example.com/x\": url must start with http:// or https://");
    assert_null(http_client_request(f->client, &(tern_http_req){.size = sizeof(tern_http_req)},
                                    on_reply, &r, err, sizeof err));
    assert_string_equal(err, "http request: missing url");
    const char *bad_headers[] = {"X-Evil: a\r\nInjected: b", NULL};
    assert_null(http_client_request(f->client,
                                    &(tern_http_req){.size = sizeof(tern_http_req),
                                                     .url = "http://127.0.0.1:1/",
                                                     .headers = bad_headers},
                                    on_reply, &r, err, sizeof err));
    assert_non_null(strstr(err, "bad header"));
    assert_null(http_client_request(f->client,
                                    &(tern_http_req){.size = sizeof(tern_http_req),
                                                     .method = "GE T",
                                                     .url = "http://127.0.0.1:1/"},
                                    on_reply, &r, err, sizeof err));
    assert_non_null(strstr(err, "bad method"));
    assert_int_equal(r.calls, 0);
}

#define MANY 200

typedef struct many {
    reply_t replies[MANY];
    int done;
} many_t;

static bool all_done(void *data)
{
    many_t *m = data;
    m->done = 0;
    for (int i = 0; i < MANY; i++)
        m->done += m->replies[i].done;
    return m->done == MANY;
}

static void test_many_concurrent(void **state)
{
    fixture_t *f = *state;
    /* Half the answers are held back a little, so the requests really overlap. */
    mini_http_server_script(f->server, "/slow",
                            &(mini_http_response_t){.body = "slow", .delay_ms = 50});
    many_t *m = xcalloc(1, sizeof *m);
    for (int i = 0; i < MANY; i++) {
        char path[32], url[128];
        snprintf(path, sizeof path, i % 2 ? "/slow?i=%d" : "/fast?i=%d", i);
        start(f,
              &(tern_http_req){.size = sizeof(tern_http_req),
                               .url = mini_http_server_url(f->server, path, url, sizeof url)},
              &m->replies[i]);
    }
    assert_int_equal(loop_run_until(&f->loop, all_done, m, 20000), 0);
    for (int i = 0; i < MANY; i++) {
        assert_int_equal(m->replies[i].calls, 1);
        assert_null(m->replies[i].error);
        assert_int_equal(m->replies[i].status, 200);
        assert_string_equal(m->replies[i].body, i % 2 ? "slow" : "ok");
        reply_dispose(&m->replies[i]);
    }
    assert_int_equal(mini_http_server_request_count(f->server), MANY);
    free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_get_with_headers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_post_and_put_bodies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_passthrough, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_allow_networks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_response_size_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_without_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_means_no_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_with_requests_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_from_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_bad_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_concurrent, setup, teardown),
    };
    int failures = cmocka_run_group_tests_name("http_client", tests, NULL, NULL);
    return failures == 0 ? 0 : 1;
}
