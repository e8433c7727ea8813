/*
 * test_views.c -- plugins' read views on a real ternd: the itest plugin's task
 * itest.note writes notes into its Redis namespace through a job's step, and its views
 * read them back through GET: a list paged by limit and marker (three pages) or
 * offset, filtered by a query parameter, an item by a path parameter (404 when there
 * is none), GET /views, an unknown query parameter refused 409 naming it, failing
 * scripts (an error, a write, text that is not JSON) answered 500 naming the view and
 * changing nothing, a script past its bound answered 503 in time and killed, and views
 * behind tokens.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api_calls.h"
#include "base/clock.h"
#include "http_sync.h"
#include "world.h"

#define NOTES 7

static itest_world_t W;

static int group_setup(void **state)
{
    (void)state;
    itest_world_start(&W, "views", NULL, NULL);
    itest_workflow_put_ok(&W.client, "{\"name\": \"note\", \"chain\": [{\"name\": \"n\", \"task\": "
                                     "\"itest.note\", \"args\": {\"id\": \"${params.id}\", "
                                     "\"kind\": \"${params.kind}\"}}]}");
    /* n1..n7, kinds a b a b a b a: written by the steps of seven jobs. */
    for (int i = 1; i <= NOTES; i++) {
        char params[96], uuid[40];
        snprintf(params, sizeof params, "{\"id\": \"n%d\", \"kind\": \"%s\"}", i,
                 i % 2 == 1 ? "a" : "b");
        itest_job_create_ok(&W.client, "note", params, uuid);
        json_t *job = itest_wait_finished_ok(&W.client, uuid, 15000);
        if (strcmp(itest_execution(job), "succeeded") != 0)
            fail_msg("note job %s ended %s", uuid, itest_execution(job));
        json_decref(job);
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    itest_world_stop(&W, 15000);
    return 0;
}

/* The ids of an answer's notes, "n1,n2,n3". */
static const char *ids_of(const json_t *notes)
{
    static char ids[256];
    ids[0] = '\0';
    size_t i;
    const json_t *n;
    json_array_foreach(notes, i, n)
    {
        size_t len = strlen(ids);
        snprintf(ids + len, sizeof ids - len, "%s%s", len > 0 ? "," : "", itest_str_of(n, "id"));
    }
    return ids;
}

static void get_ok(http_sync_t *h, http_sync_resp_t *r, const char *path)
{
    itest_api_call(h, r, "GET", path, NULL);
    if (r->status != 200)
        fail_msg("GET %s: %ld %s", path, r->status, r->body);
}

static void test_list_pages_by_marker(void **state)
{
    (void)state;
    http_sync_t h;
    http_sync_open(&h, W.base);
    http_sync_resp_t r;
    char marker[64], count[24], path[128];

    get_ok(&h, &r, "/itest/notes?limit=3");
    assert_string_equal(ids_of(r.json), "n1,n2,n3");
    assert_non_null(http_sync_header(&r, "x-tern-next-marker", marker, sizeof marker));
    assert_string_equal(http_sync_header(&r, "x-count", count, sizeof count), "7");
    http_sync_resp_dispose(&r);

    snprintf(path, sizeof path, "/itest/notes?limit=3&marker=%s", marker);
    get_ok(&h, &r, path);
    assert_string_equal(ids_of(r.json), "n4,n5,n6");
    assert_non_null(http_sync_header(&r, "x-tern-next-marker", marker, sizeof marker));
    http_sync_resp_dispose(&r);

    snprintf(path, sizeof path, "/itest/notes?limit=3&marker=%s", marker);
    get_ok(&h, &r, path);
    assert_string_equal(ids_of(r.json), "n7");
    assert_null(http_sync_header(&r, "x-tern-next-marker", marker, sizeof marker));
    http_sync_resp_dispose(&r);

    /* No limit: GET /jobs' default of 100, so all of them and no marker. */
    get_ok(&h, &r, "/itest/notes");
    assert_string_equal(ids_of(r.json), "n1,n2,n3,n4,n5,n6,n7");
    assert_null(http_sync_header(&r, "x-tern-next-marker", marker, sizeof marker));
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
}

static void test_list_offset_and_filter(void **state)
{
    (void)state;
    http_sync_t h;
    http_sync_open(&h, W.base);
    http_sync_resp_t r;
    char buf[64];
    get_ok(&h, &r, "/itest/notes?offset=5&limit=10");
    assert_string_equal(ids_of(r.json), "n6,n7");
    http_sync_resp_dispose(&r);

    get_ok(&h, &r, "/itest/notes?kind=b");
    assert_string_equal(ids_of(r.json), "n2,n4,n6");
    assert_null(http_sync_header(&r, "x-count", buf, sizeof buf)); /* unknown when filtered */
    http_sync_resp_dispose(&r);

    get_ok(&h, &r, "/itest/notes?kind=a&limit=2");
    assert_string_equal(ids_of(r.json), "n1,n3");
    assert_string_equal(http_sync_header(&r, "x-tern-next-marker", buf, sizeof buf), "n3");
    http_sync_resp_dispose(&r);

    get_ok(&h, &r, "/itest/notes?kind=none");
    assert_true(json_is_array(r.json));
    assert_int_equal(json_array_size(r.json), 0);
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
}

static void test_item_by_path_param(void **state)
{
    (void)state;
    http_sync_t h;
    http_sync_open(&h, W.base);
    http_sync_resp_t r;
    get_ok(&h, &r, "/itest/notes/n4");
    assert_string_equal(itest_str_of(r.json, "id"), "n4");
    assert_string_equal(itest_str_of(r.json, "kind"), "b");
    http_sync_resp_dispose(&r);

    /* HEAD as GET, with no body. */
    itest_api_call(&h, &r, "HEAD", "/itest/notes/n4", NULL);
    itest_expect_status(&r, 200);
    http_sync_resp_dispose(&r);

    itest_api_call(&h, &r, "GET", "/itest/notes/n99", NULL);
    itest_expect_error(&r, 404, "ResourceNotFound", "/itest/notes/n99 does not exist");
    http_sync_resp_dispose(&r);

    /* A view is GET only. */
    itest_api_call(&h, &r, "POST", "/itest/notes/n4", "{}");
    itest_expect_error(&r, 405, "MethodNotAllowed", NULL);
    char allow[64];
    assert_string_equal(http_sync_header(&r, "allow", allow, sizeof allow), "GET, HEAD");
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
}

static void test_bad_query_refused(void **state)
{
    (void)state;
    http_sync_t h;
    http_sync_open(&h, W.base);
    http_sync_resp_t r;
    itest_api_call(&h, &r, "GET", "/itest/notes?kind=a&color=red", NULL);
    itest_expect_error(&r, 409, "InvalidArgument",
                       "color: view \"/itest/notes\" of plugin \"itest\" takes no such query "
                       "parameter (it takes kind, limit, offset, marker)");
    http_sync_resp_dispose(&r);
    /* A parameter of another view is not this one's. */
    itest_api_call(&h, &r, "GET", "/itest/notes/n1?kind=a", NULL);
    itest_expect_error(&r, 409, "InvalidArgument", "kind: view \"/itest/notes/:id\"");
    http_sync_resp_dispose(&r);
    itest_api_call(&h, &r, "GET", "/itest/notes?limit=0", NULL);
    itest_expect_error(&r, 409, "InvalidArgument", "limit: expected at least 1");
    http_sync_resp_dispose(&r);
    itest_api_call(&h, &r, "GET", "/itest/notes?offset=x", NULL);
    itest_expect_error(&r, 409, "InvalidArgument", "offset: expected an integer");
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
}

static void test_failing_scripts_answer_500(void **state)
{
    (void)state;
    http_sync_t h;
    http_sync_open(&h, W.base);
    http_sync_resp_t r;
    uint64_t ms = itest_api_call(&h, &r, "GET", "/itest/broken", NULL);
    itest_expect_error(&r, 500, "ViewScriptError",
                       "view \"/itest/broken\" of plugin \"itest\": the script failed: ");
    assert_true(ms < 5000);
    http_sync_resp_dispose(&r);

    /* Views are read-only: a write is refused by Redis, and nothing changed. */
    itest_api_call(&h, &r, "GET", "/itest/write", NULL);
    itest_expect_error(&r, 500, "ViewScriptError", "Write commands are not allowed");
    http_sync_resp_dispose(&r);
    char count[24];
    get_ok(&h, &r, "/itest/notes");
    assert_string_equal(http_sync_header(&r, "x-count", count, sizeof count), "7");
    http_sync_resp_dispose(&r);

    /* A marker goes into a header: one that would break the header is refused. */
    itest_api_call(&h, &r, "GET", "/itest/bad_marker", NULL);
    itest_expect_error(&r, 500, "ViewScriptError", "a next marker that is empty");
    char hdr[64];
    assert_null(http_sync_header(&r, "x-injected", hdr, sizeof hdr));
    assert_null(http_sync_header(&r, "x-tern-next-marker", hdr, sizeof hdr));
    http_sync_resp_dispose(&r);

    itest_api_call(&h, &r, "GET", "/itest/not_json", NULL);
    itest_expect_error(&r, 500, "ViewScriptError",
                       "view \"/itest/not_json\" of plugin \"itest\": the script answered text "
                       "that is not JSON");
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
}

/* A script may refuse a request with its own status and code (a parameter it finds
 * wrong, a record it must not show); anything else that looks like it fails as any
 * script error does. */
static void test_scripts_refuse_with_their_status(void **state)
{
    (void)state;
    http_sync_t h;
    http_sync_open(&h, W.base);
    http_sync_resp_t r;
    itest_api_call(&h, &r, "GET", "/itest/refuse", NULL);
    itest_expect_error(&r, 409, "InvalidArgument", "kind: not one of a, b");
    http_sync_resp_dispose(&r);
    itest_api_call(&h, &r, "GET", "/itest/refuse?as=404%20NoteNotFound", NULL);
    itest_expect_error(&r, 404, "NoteNotFound", "kind: not one of a, b");
    http_sync_resp_dispose(&r);
    static const char *const not_refusals[] = {"500%20Oops", "409", "409%20%20X", "40%20X",
                                               "409%20Bad-Code"};
    for (size_t i = 0; i < sizeof not_refusals / sizeof not_refusals[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "/itest/refuse?as=%s", not_refusals[i]);
        itest_api_call(&h, &r, "GET", path, NULL);
        itest_expect_error(&r, 500, "ViewScriptError", "the script failed: REFUSED ");
        http_sync_resp_dispose(&r);
    }
    http_sync_close(&h);
}

static void test_views_listed(void **state)
{
    (void)state;
    http_sync_t h;
    http_sync_open(&h, W.base);
    http_sync_resp_t r;
    get_ok(&h, &r, "/views");
    json_t *want_notes =
        json_pack("{s:s, s:s, s:s, s:[], s:[s], s:b}", "plugin", "itest", "path", "/itest/notes",
                  "summary", "The notes itest.note recorded, in id order.", "path_params", "params",
                  "kind", "stream", 0);
    json_t *want_note = json_pack("{s:s, s:s, s:s, s:[s], s:[], s:b}", "plugin", "itest", "path",
                                  "/itest/notes/:id", "summary", "One note.", "path_params", "id",
                                  "params", "stream", 0);
    bool saw_notes = false, saw_note = false;
    size_t i;
    json_t *v;
    json_array_foreach(r.json, i, v)
    {
        saw_notes = saw_notes || json_equal(v, want_notes);
        saw_note = saw_note || json_equal(v, want_note);
    }
    if (!saw_notes || !saw_note)
        fail_msg("GET /views: %s", r.body);
    json_decref(want_notes);
    json_decref(want_note);
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
}

/* A script past its bound is answered 503 ViewTimeout naming the view, in about the
 * bound (the caller never hangs), and killed: Redis serves everyone again after its
 * busy-reply-threshold (5 s by default), long before the script's own 60 s. Its own
 * API-only ternd, with a 300 ms bound. */
static void test_slow_script_bounded(void **state)
{
    (void)state;
    itest_ternd_t t;
    const char *const flags[] = {"--view-timeout-ms", "300", NULL};
    itest_world_start_api_only(&W, &t, "slow", flags);
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", t.api_port);
    http_sync_t h;
    http_sync_open(&h, base);
    http_sync_resp_t r;
    uint64_t started = clock_mono_ms();
    uint64_t ms = itest_api_call(&h, &r, "GET", "/itest/slow?ms=60000", NULL);
    itest_expect_error(&r, 503, "ViewTimeout",
                       "view \"/itest/slow\" of plugin \"itest\": the script did not answer "
                       "within 300 ms");
    if (ms >= 3000)
        fail_msg("the slow view was answered after %llu ms, past its bound of 300 ms",
                 (unsigned long long)ms);
    http_sync_resp_dispose(&r);
    /* Redis answers again once the script is killed, well before the script's 60 s. */
    uint64_t until = started + 20000;
    long status = 0;
    while (status != 200 && clock_mono_ms() < until) {
        itest_api_call(&h, &r, "GET", "/itest/notes/n1", NULL);
        status = r.status;
        http_sync_resp_dispose(&r);
        if (status != 200) {
            struct timespec ts = {0, 100 * 1000000L}; /* a bounded poll */
            nanosleep(&ts, NULL);
        }
    }
    if (status != 200)
        fail_msg("views still unanswered %llu ms after the slow one: the script was not killed",
                 (unsigned long long)(clock_mono_ms() - started));
    /* ternd says so. */
    until = clock_mono_ms() + 5000;
    while (!itest_ternd_log_has(&t, "Redis's busy-reply-threshold: killed") &&
           clock_mono_ms() < until) {
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_true(itest_ternd_log_has(&t, "Redis's busy-reply-threshold: killed"));
    http_sync_close(&h);
    assert_int_equal(itest_ternd_signal(&t, SIGTERM, 10000), 0);
}

#define SUBMIT_TOKEN "views-submit-token-0123456789"

static void test_views_need_a_token(void **state)
{
    (void)state;
    char file[400];
    snprintf(file, sizeof file, "%s/view-tokens", W.dir.path);
    itest_write_file(file, "submit " SUBMIT_TOKEN "\n");
    itest_ternd_t t;
    const char *const flags[] = {"--api-token-file", file, NULL};
    itest_world_start_api_only(&W, &t, "tokens", flags);
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", t.api_port);
    http_sync_t h;
    http_sync_open(&h, base);
    http_sync_resp_t r;
    itest_api_call(&h, &r, "GET", "/itest/notes/n1", NULL);
    itest_expect_error(&r, 401, "InvalidCredentials", NULL);
    http_sync_resp_dispose(&r);
    itest_api_call(&h, &r, "GET", "/views", NULL);
    itest_expect_error(&r, 401, "InvalidCredentials", NULL);
    http_sync_resp_dispose(&r);
    snprintf(h.auth, sizeof h.auth, "Authorization: Bearer %s", "not-the-token-0123456789");
    itest_api_call(&h, &r, "GET", "/itest/notes", NULL);
    itest_expect_error(&r, 401, "InvalidCredentials", NULL);
    http_sync_resp_dispose(&r);
    /* Views are reads: a submit token is enough. */
    snprintf(h.auth, sizeof h.auth, "Authorization: Bearer %s", SUBMIT_TOKEN);
    get_ok(&h, &r, "/itest/notes/n1");
    assert_string_equal(itest_str_of(r.json, "id"), "n1");
    http_sync_resp_dispose(&r);
    get_ok(&h, &r, "/views");
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
    assert_int_equal(itest_ternd_signal(&t, SIGTERM, 10000), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_pages_by_marker),
        cmocka_unit_test(test_list_offset_and_filter),
        cmocka_unit_test(test_item_by_path_param),
        cmocka_unit_test(test_bad_query_refused),
        cmocka_unit_test(test_failing_scripts_answer_500),
        cmocka_unit_test(test_scripts_refuse_with_their_status),
        cmocka_unit_test(test_views_listed),
        cmocka_unit_test(test_views_need_a_token),
        cmocka_unit_test(test_slow_script_bounded),
    };
    return cmocka_run_group_tests_name("views", tests, group_setup, group_teardown) == 0 ? 0 : 1;
}
