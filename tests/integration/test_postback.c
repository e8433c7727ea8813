/*
 * test_postback.c -- post-backs on real ternd processes: a job created through the API
 * with "post_back_urls" has its outcome POSTed to each URL when it ends (the receiver
 * is tests/support/mini_http_server on the test's loop); a receiver that fails twice
 * gets a third attempt after the backoff, and the job's "post_backs" show all three; a
 * receiver that never answers is given up on at the attempt limit, every attempt on
 * record; and with two ternds delivering, each post-back is made exactly once.
 *
 * ternd runs with small post-back settings from its config file: 100 ms first delay,
 * at most 3 attempts, 300 ms per POST.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "api_calls.h"
#include "loop_util.h"
#include "mini_http_server.h"
#include "world.h"

static itest_world_t W;
static mini_http_server_t *receiver; /* the post-backs' receiver, on the client's loop */

static int group_setup(void **state)
{
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    itest_world_start(&W, "p1",
                      "{\"postback_initial_ms\": 100, \"postback_max_ms\": 1000,"
                      " \"postback_max_attempts\": 3, \"postback_timeout_ms\": 300}",
                      NULL);
    receiver = mini_http_server_new(&W.client.loop);
    assert_non_null(receiver);
    char msg[1024];
    if (itest_workflow_put(&W.client,
                           "{\"name\": \"pb-ok\", \"version\": \"1.0.0\", \"chain\": ["
                           " {\"name\": \"a\", \"task\": \"core.noop\", \"args\": {}}]}",
                           NULL, msg, sizeof msg) != 0 ||
        itest_workflow_put(&W.client,
                           "{\"name\": \"pb-fail\", \"version\": \"1.0.0\", \"chain\": ["
                           " {\"name\": \"a\", \"task\": \"core.fail\","
                           "  \"args\": {\"code\": \"Broken\", \"message\": \"it broke\"}}]}",
                           NULL, msg, sizeof msg) != 0)
        fail_msg("workflow refused: %s", msg);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    mini_http_server_free(receiver);
    itest_world_stop(&W, 15000);
    curl_global_cleanup();
    return 0;
}

/* ---- helpers ------------------------------------------------------------------- */

/* Creates a job through POST /jobs with the given post_back_urls (a JSON array text);
 * returns its uuid in `uuid`. */
static void create_job(const char *workflow, const char *params, const char *urls, char uuid[40])
{
    http_sync_t h;
    http_sync_open(&h, W.base);
    char body[4096];
    snprintf(body, sizeof body, "{\"workflow\": \"%s\", \"params\": %s, \"post_back_urls\": %s}",
             workflow, params, urls);
    itest_api_create_ok(&h, body, uuid);
    http_sync_close(&h);
}

static const char *url_of(const char *path)
{
    static char url[4][128];
    static int next;
    char *u = url[next++ % 4];
    return mini_http_server_url(receiver, path, u, 128);
}

/* Requests the receiver got on `path` (all of them when NULL). */
static size_t requests_on(const char *path)
{
    size_t n = 0;
    for (size_t i = 0; i < mini_http_server_request_count(receiver); i++) {
        const mini_http_request_t *r = mini_http_server_request(receiver, i);
        if (path == NULL || strcmp(r->path, path) == 0)
            n++;
    }
    return n;
}

/* The k-th request on `path`, or NULL. */
static const mini_http_request_t *request_on(const char *path, size_t k)
{
    for (size_t i = 0; i < mini_http_server_request_count(receiver); i++) {
        const mini_http_request_t *r = mini_http_server_request(receiver, i);
        if (strcmp(r->path, path) == 0 && k-- == 0)
            return r;
    }
    return NULL;
}

typedef struct count_wait {
    const char *path;
    size_t n;
} count_wait_t;

static bool enough_requests(void *data)
{
    count_wait_t *w = data;
    return requests_on(w->path) >= w->n;
}

/* Runs the test's loop (where the receiver lives) until `path` got n requests. */
static void wait_requests(const char *path, size_t n, unsigned ms)
{
    count_wait_t w = {path, n};
    if (loop_run_until(&W.client.loop, enough_requests, &w, ms) != 0)
        fail_msg("%s: %zu requests after %u ms, expected %zu", path ? path : "receiver",
                 requests_on(path), ms, n);
}

/* Reads the job until its "post_backs" hold n entries (the record is written right
 * after the receiver answered, so this is a short bounded wait). */
static json_t *wait_post_backs(const char *uuid, size_t n, unsigned ms)
{
    for (unsigned waited = 0;; waited += 20) {
        json_t *job = itest_job_get(&W.client, uuid);
        if (json_array_size(json_object_get(job, "post_backs")) >= n)
            return job;
        if (waited > ms)
            fail_msg("job %s: %zu post_backs after %u ms, expected %zu", uuid,
                     json_array_size(json_object_get(job, "post_backs")), ms, n);
        json_decref(job);
        itest_pause_ms(20);
    }
}

static uint64_t iso_ms(const char *iso)
{
    struct tm tm = {0};
    int ms = 0;
    if (iso == NULL || sscanf(iso, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                              &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7)
        fail_msg("not an ISO time: %s", iso ? iso : "(null)");
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (uint64_t)timegm(&tm) * 1000u + (uint64_t)ms;
}

/* Nothing is scheduled or claimed any more for the job's deliveries. */
static void assert_nothing_pending(const char *uuid, size_t urls)
{
    for (size_t i = 0; i < urls; i++) {
        char *due = itest_redis_str(&W.redis, "ZSCORE tern:postbacks %s/%zu", uuid, i);
        char *lease = itest_redis_str(&W.redis, "ZSCORE tern:postbacks:lease %s/%zu", uuid, i);
        if (due != NULL || lease != NULL)
            fail_msg("delivery %s/%zu still scheduled (due %s, lease %s)", uuid, i, due ? due : "-",
                     lease ? lease : "-");
    }
}

static const mini_http_response_t ANSWER_500 = {.status = 500, .body = "not now"};
static const mini_http_response_t ANSWER_200 = {.status = 200, .body = "thanks"};

/* ---- tests --------------------------------------------------------------------- */

/* Each URL gets the outcome once, with the documented body and headers. */
static void test_delivered_to_every_url(void **state)
{
    (void)state;
    mini_http_server_script(receiver, "/a", &ANSWER_200);
    mini_http_server_script(receiver, "/b", &ANSWER_200);
    char urls[300], uuid[40];
    snprintf(urls, sizeof urls, "[\"%s\", \"%s\"]", url_of("/a"), url_of("/b"));
    create_job("pb-ok", "{\"vm\": \"v1\", \"sizes\": [1, 2]}", urls, uuid);
    wait_requests("/a", 1, 10000);
    wait_requests("/b", 1, 10000);
    const mini_http_request_t *r = request_on("/a", 0);
    assert_string_equal(r->method, "POST");
    assert_string_equal(mini_http_request_header(r, "Content-Type"), "application/json");
    assert_string_equal(mini_http_request_header(r, "X-Tern-Job"), uuid);
    json_t *body = json_loads(r->body, 0, NULL);
    assert_non_null(body);
    assert_string_equal(json_string_value(json_object_get(body, "uuid")), uuid);
    assert_string_equal(json_string_value(json_object_get(body, "workflow")), "pb-ok");
    assert_string_equal(json_string_value(json_object_get(body, "execution")), "succeeded");
    json_t *params = json_pack("{s:s, s:[i,i]}", "vm", "v1", "sizes", 1, 2);
    assert_true(json_equal(json_object_get(body, "params"), params));
    json_decref(params);
    assert_true(json_is_null(json_object_get(body, "error")));
    json_t *job = wait_post_backs(uuid, 2, 5000);
    assert_string_equal(json_string_value(json_object_get(body, "finished_at")),
                        json_string_value(json_object_get(job, "finished_at")));
    json_decref(body);
    size_t i;
    json_t *pb;
    json_array_foreach(json_object_get(job, "post_backs"), i, pb)
    {
        assert_true(json_is_true(json_object_get(pb, "delivered")));
        assert_int_equal(json_integer_value(json_object_get(pb, "status")), 200);
        assert_int_equal(json_integer_value(json_object_get(pb, "attempt")), 1);
    }
    json_decref(job);
    assert_nothing_pending(uuid, 2);
    assert_int_equal(requests_on("/a"), 1);
    assert_int_equal(requests_on("/b"), 1);
}

/* 500, 500, then 200: three attempts, spaced by the backoff, all on record. */
static void test_fails_twice_then_accepts(void **state)
{
    (void)state;
    mini_http_server_script(receiver, "/flaky", &ANSWER_500);
    mini_http_server_script(receiver, "/flaky", &ANSWER_500);
    mini_http_server_script(receiver, "/flaky", &ANSWER_200);
    char urls[200], uuid[40];
    snprintf(urls, sizeof urls, "[\"%s\"]", url_of("/flaky"));
    create_job("pb-ok", "{}", urls, uuid);
    wait_requests("/flaky", 3, 10000);
    json_t *job = wait_post_backs(uuid, 3, 5000);
    json_t *pbs = json_object_get(job, "post_backs");
    assert_int_equal(json_array_size(pbs), 3);
    /* One delivery id for the three attempts of this end: <uuid>/<url>/<end ms>. */
    char delivery[160];
    snprintf(delivery, sizeof delivery, "%s/0/%llu", uuid,
             (unsigned long long)iso_ms(json_string_value(json_object_get(job, "finished_at"))));
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(mini_http_request_header(request_on("/flaky", i), "X-Tern-Delivery"),
                            delivery);
    static const long statuses[] = {500, 500, 200};
    uint64_t times[3];
    for (size_t i = 0; i < 3; i++) {
        json_t *pb = json_array_get(pbs, i);
        assert_int_equal(json_integer_value(json_object_get(pb, "attempt")), (long)i + 1);
        assert_int_equal(json_integer_value(json_object_get(pb, "status")), statuses[i]);
        assert_int_equal(json_is_true(json_object_get(pb, "delivered")), i == 2);
        assert_string_equal(json_string_value(json_object_get(pb, "url")), url_of("/flaky"));
        times[i] = iso_ms(json_string_value(json_object_get(pb, "time")));
    }
    /* 100 ms after the first failure, 200 ms after the second. */
    assert_int_equal(json_integer_value(json_object_get(json_array_get(pbs, 0), "retry_in_ms")),
                     100);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(pbs, 1), "retry_in_ms")),
                     200);
    assert_true(times[1] - times[0] >= 100);
    assert_true(times[2] - times[1] >= 200);
    json_decref(job);
    assert_nothing_pending(uuid, 1);
    assert_int_equal(requests_on("/flaky"), 3);
}

/* A receiver that never answers: each POST times out, and after the third attempt the
 * delivery is given up, on record, and nothing more is scheduled. The body of a failed
 * job carries its error. */
static void test_never_answers_gives_up(void **state)
{
    (void)state;
    mini_http_response_t silent = {.status = 200, .delay_ms = 60000};
    mini_http_server_script(receiver, "/silent", &silent);
    char urls[200], uuid[40];
    snprintf(urls, sizeof urls, "[\"%s\"]", url_of("/silent"));
    create_job("pb-fail", "{}", urls, uuid);
    wait_requests("/silent", 3, 15000);
    json_t *job = wait_post_backs(uuid, 3, 5000);
    assert_string_equal(itest_execution(job), "failed");
    json_t *pbs = json_object_get(job, "post_backs");
    assert_int_equal(json_array_size(pbs), 3);
    size_t i;
    json_t *pb;
    json_array_foreach(pbs, i, pb)
    {
        assert_false(json_is_true(json_object_get(pb, "delivered")));
        assert_null(json_object_get(pb, "status"));
        const char *err = json_string_value(json_object_get(pb, "error"));
        assert_non_null(err);
        assert_non_null(strstr(err, "timed out"));
    }
    assert_true(json_is_true(json_object_get(json_array_get(pbs, 2), "gave_up")));
    assert_null(json_object_get(json_array_get(pbs, 1), "gave_up"));
    json_decref(job);
    assert_nothing_pending(uuid, 1);
    assert_int_equal(requests_on("/silent"), 3);
    json_t *body = json_loads(request_on("/silent", 0)->body, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(body, "execution")), "failed");
    assert_string_equal(json_string_value(json_object_get(json_object_get(body, "error"), "code")),
                        "Broken");
    json_decref(body);
}

/* Two ternds deliver: every job's post-back arrives exactly once. */
static void test_exactly_once_with_two_deliverers(void **state)
{
    (void)state;
    enum { N = 20 };
    itest_ternd_t second;
    const char *extra[] = {"--config", W.config, NULL};
    itest_ternd_start(&second, &W.redis, &W.dir, "p2", extra);
    mini_http_server_script(receiver, "/count", &ANSWER_200);
    char urls[200], uuids[N][40];
    snprintf(urls, sizeof urls, "[\"%s\"]", url_of("/count"));
    for (int i = 0; i < N; i++) {
        char params[64];
        snprintf(params, sizeof params, "{\"i\": %d}", i);
        create_job("pb-ok", params, urls, uuids[i]);
    }
    wait_requests("/count", N, 20000);
    for (int i = 0; i < N; i++) {
        json_t *job = wait_post_backs(uuids[i], 1, 5000);
        assert_int_equal(json_array_size(json_object_get(job, "post_backs")), 1);
        json_decref(job);
        assert_nothing_pending(uuids[i], 1);
        int seen = 0;
        for (size_t k = 0; k < requests_on("/count"); k++) {
            const char *job_hdr = mini_http_request_header(request_on("/count", k), "X-Tern-Job");
            seen += job_hdr != NULL && strcmp(job_hdr, uuids[i]) == 0;
        }
        assert_int_equal(seen, 1);
    }
    assert_int_equal(requests_on("/count"), N);
    assert_int_equal(itest_ternd_signal(&second, SIGTERM, 15000), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delivered_to_every_url),
        cmocka_unit_test(test_fails_twice_then_accepts),
        cmocka_unit_test(test_never_answers_gives_up),
        cmocka_unit_test(test_exactly_once_with_two_deliverers),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown) == 0 ? 0 : 1;
}
