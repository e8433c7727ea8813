/*
 * test_allow_networks.c -- the networks outbound HTTP may reach, on real ternd
 * processes: post-backs (postback_allow_networks) and the http plugin's http.request
 * (plugins.http.allow_networks), run in the runner and in an isolated helper process.
 *
 * Two worlds, each a redis-server and a ternd: `closed` allows 10.0.0.0/8 and fd00::/8
 * only, `open` allows loopback. The receivers are mini_http_servers on 127.0.0.1, one
 * on each world's client loop (which runs while the test waits on that world). In the
 * closed world nothing reaches its receiver: no connection is even accepted, the job's
 * record says why, and nothing is retried; in the open world everything arrives.
 */
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "api_calls.h"
#include "base/alloc.h"
#include "loop_util.h"
#include "mini_http_server.h"
#include "world.h"

#define SETTINGS                                                                                   \
    "\"postback_initial_ms\": 100, \"postback_max_ms\": 1000, \"postback_max_attempts\": 3, "      \
    "\"postback_timeout_ms\": 2000"

static itest_world_t closed, open_w;
static mini_http_server_t *closed_rx, *open_rx; /* on closed's and open_w's client loops */

static void put_workflows(itest_world_t *w)
{
    itest_workflow_put_ok(&w->client, "{\"name\": \"an-noop\", \"chain\": ["
                                      " {\"name\": \"a\", \"task\": \"core.noop\"}]}");
    /* Three attempts allowed: a refusal must not use them. */
    itest_workflow_put_ok(&w->client,
                          "{\"name\": \"an-http\", \"chain\": ["
                          " {\"name\": \"get\", \"task\": \"http.request\", \"retry\": 3,"
                          "  \"args\": {\"url\": \"${params.url}\"}}]}");
    itest_workflow_put_ok(&w->client,
                          "{\"name\": \"an-http-isolated\", \"chain\": ["
                          " {\"name\": \"get\", \"task\": \"http.request\", \"retry\": 3,"
                          "  \"isolate\": true, \"args\": {\"url\": \"${params.url}\"}}]}");
}

static int group_setup(void **state)
{
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    itest_world_start(&closed, "an-closed",
                      "{" SETTINGS ", \"postback_allow_networks\": [\"10.0.0.0/8\", \"fd00::/8\"],"
                      " \"plugins\": {\"http\": {\"allow_networks\": [\"10.0.0.0/8\"]}}}",
                      NULL);
    itest_world_start(&open_w, "an-open",
                      "{" SETTINGS ", \"postback_allow_networks\": [\"10.0.0.0/8\", "
                      "\"127.0.0.0/8\"],"
                      " \"plugins\": {\"http\": {\"allow_networks\": [\"127.0.0.1/32\"]}}}",
                      NULL);
    closed_rx = mini_http_server_new(&closed.client.loop);
    open_rx = mini_http_server_new(&open_w.client.loop);
    assert_non_null(closed_rx);
    assert_non_null(open_rx);
    put_workflows(&closed);
    put_workflows(&open_w);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    mini_http_server_free(closed_rx);
    mini_http_server_free(open_rx);
    itest_world_stop(&closed, 15000);
    itest_world_stop(&open_w, 15000);
    curl_global_cleanup();
    return 0;
}

/* ---- helpers ------------------------------------------------------------------- */

/* Creates a job through POST /jobs of world w; `extra` is added to the body. Returns
 * its uuid in `uuid`. */
static void create_job(itest_world_t *w, const char *workflow, const char *extra, char uuid[40])
{
    http_sync_t h;
    http_sync_open(&h, w->base);
    char body[2048];
    snprintf(body, sizeof body, "{\"workflow\": \"%s\", %s}", workflow, extra);
    itest_api_create_ok(&h, body, uuid);
    http_sync_close(&h);
}

/* Reads the job until its "post_backs" hold n entries. */
static json_t *wait_post_backs(itest_world_t *w, const char *uuid, size_t n, unsigned ms)
{
    for (unsigned waited = 0;; waited += 20) {
        json_t *job = itest_job_get(&w->client, uuid);
        if (json_array_size(json_object_get(job, "post_backs")) >= n)
            return job;
        if (waited > ms)
            fail_msg("job %s: %zu post_backs after %u ms, expected %zu", uuid,
                     json_array_size(json_object_get(job, "post_backs")), ms, n);
        json_decref(job);
        itest_pause_ms(20);
    }
}

/* Connections the receiver accepted: the record is written after the attempt ended,
 * so a connection ternd made is in the listener's queue by now, and one pass of the
 * loop accepts it. */
static size_t connections_now(itest_world_t *w, mini_http_server_t *rx)
{
    uv_run(&w->client.loop, UV_RUN_NOWAIT);
    return mini_http_server_connections(rx);
}

typedef struct rx_wait {
    mini_http_server_t *rx;
    size_t n;
} rx_wait_t;

static bool enough_requests(void *data)
{
    rx_wait_t *w = data;
    return mini_http_server_request_count(w->rx) >= w->n;
}

/* Runs w's client loop (where rx lives) until rx got n requests in all. */
static void wait_requests(itest_world_t *w, mini_http_server_t *rx, size_t n)
{
    rx_wait_t rw = {rx, n};
    if (loop_run_until(&w->client.loop, enough_requests, &rw, 10000) != 0)
        fail_msg("the receiver got %zu requests, expected %zu", mini_http_server_request_count(rx),
                 n);
}

/* The first chain result's error of a finished job (borrowed from job). */
static const json_t *step_error(const json_t *job)
{
    return json_object_get(json_array_get(json_object_get(job, "chain_results"), 0), "error");
}

/* ---- tests --------------------------------------------------------------------- */

/* A post-back to loopback from the closed world: one attempt, recorded with the
 * reason and given up on at once; the receiver never sees a connection. */
static void test_postback_refused(void **state)
{
    (void)state;
    char extra[256], uuid[40], u[128];
    snprintf(extra, sizeof extra, "\"post_back_urls\": [\"%s\"]",
             mini_http_server_url(closed_rx, "/pb", u, sizeof u));
    create_job(&closed, "an-noop", extra, uuid);
    json_t *job = wait_post_backs(&closed, uuid, 1, 10000);
    json_t *pb = json_array_get(json_object_get(job, "post_backs"), 0);
    const char *err = json_string_value(json_object_get(pb, "error"));
    if (err == NULL ||
        strcmp(err, "network not allowed: 127.0.0.1 is not in postback_allow_networks") != 0)
        fail_msg("post-back record: %s", json_dumps(pb, JSON_COMPACT));
    assert_false(json_is_true(json_object_get(pb, "delivered")));
    assert_true(json_is_true(json_object_get(pb, "gave_up")));
    assert_int_equal(json_integer_value(json_object_get(pb, "attempt")), 1);
    json_decref(job);
    /* Nothing left to retry. */
    char *due = itest_redis_str(&closed.redis, "ZSCORE tern:postbacks %s/0", uuid);
    char *lease = itest_redis_str(&closed.redis, "ZSCORE tern:postbacks:lease %s/0", uuid);
    assert_null(due);
    assert_null(lease);
    assert_int_equal(connections_now(&closed, closed_rx), 0);
    assert_int_equal(mini_http_server_request_count(closed_rx), 0);
}

/* The same from the open world, whose list holds loopback: delivered. */
static void test_postback_allowed(void **state)
{
    (void)state;
    char extra[256], uuid[40], u[128];
    snprintf(extra, sizeof extra, "\"post_back_urls\": [\"%s\"]",
             mini_http_server_url(open_rx, "/pb", u, sizeof u));
    size_t before = mini_http_server_request_count(open_rx);
    create_job(&open_w, "an-noop", extra, uuid);
    wait_requests(&open_w, open_rx, before + 1);
    json_t *job = wait_post_backs(&open_w, uuid, 1, 10000);
    json_t *pb = json_array_get(json_object_get(job, "post_backs"), 0);
    if (!json_is_true(json_object_get(pb, "delivered")))
        fail_msg("post-back record: %s", json_dumps(pb, JSON_COMPACT));
    json_decref(job);
    assert_int_equal(mini_http_server_request_count(open_rx), before + 1);
}

/* http.request to loopback from the closed world, in the runner and in an isolated
 * helper: the step fails with NetworkNotAllowed after one attempt of three, and the
 * receiver sees no connection. */
static void test_http_request_refused(void **state)
{
    (void)state;
    static const char *const workflows[] = {"an-http", "an-http-isolated"};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(workflows); i++) {
        char extra[256], uuid[40], u[128];
        snprintf(extra, sizeof extra, "\"params\": {\"url\": \"%s\"}",
                 mini_http_server_url(closed_rx, "/meta", u, sizeof u));
        create_job(&closed, workflows[i], extra, uuid);
        json_t *job = itest_wait_finished(&closed.client, uuid, 20000);
        assert_non_null(job);
        const json_t *err = step_error(job);
        const char *code = json_string_value(json_object_get(err, "code"));
        const char *msg = json_string_value(json_object_get(err, "message"));
        if (strcmp(itest_execution(job), "failed") != 0 || code == NULL ||
            strcmp(code, "NetworkNotAllowed") != 0 || msg == NULL ||
            strstr(msg, "127.0.0.1 is not in plugins.http.allow_networks") == NULL)
            fail_msg("%s: %s", workflows[i], json_dumps(job, JSON_COMPACT));
        assert_int_equal(json_integer_value(json_object_get(
                             json_array_get(json_object_get(job, "chain_results"), 0), "attempts")),
                         1);
        json_decref(job);
    }
    assert_int_equal(connections_now(&closed, closed_rx), 0);
    assert_int_equal(mini_http_server_request_count(closed_rx), 0);
}

/* The same from the open world: both requests arrive. */
static void test_http_request_allowed(void **state)
{
    (void)state;
    static const char *const workflows[] = {"an-http", "an-http-isolated"};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(workflows); i++) {
        char extra[256], uuid[40], u[128];
        snprintf(extra, sizeof extra, "\"params\": {\"url\": \"%s\"}",
                 mini_http_server_url(open_rx, "/meta", u, sizeof u));
        size_t before = mini_http_server_request_count(open_rx);
        create_job(&open_w, workflows[i], extra, uuid);
        json_t *job = itest_wait_finished(&open_w.client, uuid, 20000);
        assert_non_null(job);
        if (strcmp(itest_execution(job), "succeeded") != 0)
            fail_msg("%s: %s", workflows[i], json_dumps(job, JSON_COMPACT));
        json_decref(job);
        assert_int_equal(mini_http_server_request_count(open_rx), before + 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_postback_refused),
        cmocka_unit_test(test_postback_allowed),
        cmocka_unit_test(test_http_request_refused),
        cmocka_unit_test(test_http_request_allowed),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
