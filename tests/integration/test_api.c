/*
 * test_api.c -- the HTTP API of a real ternd, driven over HTTP with libcurl: every
 * node-workflow endpoint with its shapes and status codes, tern's additions, every
 * error path (and that none of them changes what Redis holds), keep-alive across
 * answers of every status, bearer-token auth, TLS and the body limit.
 *
 * One redis-server and one ternd (api and runner) serve most tests; the auth, TLS and
 * body-limit tests start an api-only ternd of their own with the flags they test.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api_calls.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "base/ident.h"
#include "base/iso8601.h"
#include "world.h"

static itest_world_t W;
static http_sync_t http;    /* a client of W's API */
static itest_fleet_t fleet; /* further ternds a test starts (stopped by the teardown too) */
static char quick_uuid[40]; /* workflow api-quick: one core.noop step */

/* ---- helpers ------------------------------------------------------------------ */

static void call(http_sync_resp_t *out, const char *method, const char *path, const char *body)
{
    itest_api_call(&http, out, method, path, body);
}

/* Stores a workflow over HTTP and returns its uuid in `uuid`. */
static void put_workflow(const char *json, char uuid[40])
{
    http_sync_resp_t r;
    call(&r, "POST", "/workflows", json);
    if (r.status != 201 && r.status != 200)
        fail_msg("workflow refused (%ld): %s", r.status, r.body);
    snprintf(uuid, 40, "%s", itest_str_of(r.json, "uuid"));
    http_sync_resp_dispose(&r);
}

/* Creates a job over HTTP (201 expected); its uuid goes to `uuid`, the answer to
 * *job (new reference) when job is not NULL. */
static void create_job(const char *body, char uuid[40], json_t **job)
{
    http_sync_resp_t r;
    call(&r, "POST", "/jobs", body);
    itest_expect_status(&r, 201);
    snprintf(uuid, 40, "%s", itest_str_of(r.json, "uuid"));
    if (job != NULL)
        *job = json_incref(r.json);
    http_sync_resp_dispose(&r);
}

static json_t *get_json(const char *path)
{
    http_sync_resp_t r;
    call(&r, "GET", path, NULL);
    itest_expect_status(&r, 200);
    json_t *v = json_incref(r.json);
    http_sync_resp_dispose(&r);
    return v;
}

/* What the error paths must leave alone: the number of keys, jobs and workflows. */
typedef struct snapshot {
    long long keys, jobs, workflows;
} snapshot_t;

static snapshot_t snap(void)
{
    snapshot_t s = {
        .keys = itest_redis_int(&W.redis, "DBSIZE"),
        .jobs = itest_jobs_indexed(&W.redis),
        .workflows = itest_redis_int(&W.redis, "ZCARD tern:wf:all"),
    };
    return s;
}

static void expect_unchanged(snapshot_t before)
{
    snapshot_t now = snap();
    assert_int_equal(now.keys, before.keys);
    assert_int_equal(now.jobs, before.jobs);
    assert_int_equal(now.workflows, before.workflows);
}

/* An ISO 8601 time `secs` from now, as JavaScript writes it. */
static const char *iso_in(long secs, char out[32])
{
    iso8601_format(clock_wall_ms() + (uint64_t)(secs * 1000), out);
    return out;
}

/* ---- group -------------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    itest_world_start(&W, "api1", NULL, NULL);
    http_sync_open(&http, W.base);
    put_workflow(
        "{\"name\": \"api-quick\", \"chain\": [{\"name\": \"n\", \"task\": \"core.noop\"}]}",
        quick_uuid);
    char ignored[40];
    put_workflow("{\"name\": \"api-wait\", \"chain\": ["
                 "{\"name\": \"w\", \"task\": \"itest.wait\"},"
                 "{\"name\": \"after\", \"task\": \"core.log\","
                 " \"args\": {\"msg\": \"answer ${steps.w.result.answer:-none}\"}}]}",
                 ignored);
    put_workflow("{\"name\": \"api-slow\", \"chain\": ["
                 "{\"name\": \"s\", \"task\": \"core.sleep\", \"args\": {\"ms\": 60000}}]}",
                 ignored);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    http_sync_close(&http);
    itest_fleet_stop(&fleet, 10000);
    itest_world_stop(&W, 10000);
    return 0;
}

/* ---- /ping, /tasks, unknown routes -------------------------------------------- */

static void test_ping_and_tasks(void **state)
{
    (void)state;
    http_sync_resp_t r;
    call(&r, "GET", "/ping", NULL);
    itest_expect_status(&r, 200);
    assert_string_equal(itest_str_of(r.json, "ping"), "pong");
    assert_string_equal(itest_str_of(r.json, "backend"), "up");
    assert_true(json_integer_value(json_object_get(r.json, "pid")) == W.ternd.pid);
    http_sync_resp_dispose(&r);

    call(&r, "GET", "/tasks", NULL);
    itest_expect_status(&r, 200);
    assert_non_null(strstr(r.body, "noop"));
    http_sync_resp_dispose(&r);
}

static void test_unknown_route_and_method(void **state)
{
    (void)state;
    snapshot_t before = snap();
    http_sync_resp_t r;
    call(&r, "GET", "/nothing/here", NULL);
    itest_expect_error(&r, 404, "ResourceNotFound", "/nothing/here");
    http_sync_resp_dispose(&r);
    call(&r, "PUT", "/jobs", "{}");
    itest_expect_error(&r, 405, "MethodNotAllowed", "PUT");
    char allow[128];
    assert_non_null(http_sync_header(&r, "Allow", allow, sizeof allow));
    assert_string_equal(allow, "GET, HEAD, POST");
    http_sync_resp_dispose(&r);
    call(&r, "DELETE", "/jobs/1b4e28ba-2fa1-11d2-883f-0016d3cca427", NULL);
    itest_expect_error(&r, 405, "MethodNotAllowed", "DELETE");
    http_sync_resp_dispose(&r);
    call(&r, "DELETE", "/jobs/1b4e28ba-2fa1-11d2-883f-0016d3cca427/info", NULL);
    itest_expect_error(&r, 405, "MethodNotAllowed", NULL);
    http_sync_resp_dispose(&r);
    expect_unchanged(before);
}

/* ---- /workflows --------------------------------------------------------------- */

static void test_workflow_post_and_get(void **state)
{
    (void)state;
    const char *def = "{\"name\": \"api-wf\", \"version\": \"1.0.0\", \"timeout\": 60,"
                      " \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}]}";
    http_sync_resp_t r;
    call(&r, "POST", "/workflows", def);
    itest_expect_status(&r, 201);
    char uuid[40], loc[128], want[128];
    snprintf(uuid, sizeof uuid, "%s", itest_str_of(r.json, "uuid"));
    assert_true(uuid_valid(uuid));
    assert_string_equal(itest_str_of(r.json, "name"), "api-wf");
    assert_int_equal(json_integer_value(json_object_get(r.json, "timeout")), 60);
    assert_int_equal(json_array_size(json_object_get(r.json, "chain")), 1);
    snprintf(want, sizeof want, "/workflows/%s", uuid);
    assert_string_equal(http_sync_header(&r, "Location", loc, sizeof loc), want);
    http_sync_resp_dispose(&r);

    /* The same definition again is the same version: 200, same uuid. */
    call(&r, "POST", "/workflows", def);
    itest_expect_status(&r, 200);
    assert_string_equal(itest_str_of(r.json, "uuid"), uuid);
    http_sync_resp_dispose(&r);

    json_t *by_uuid = get_json(want);
    assert_string_equal(itest_str_of(by_uuid, "uuid"), uuid);
    json_t *by_name = get_json("/workflows/api-wf");
    assert_true(json_equal(by_uuid, by_name));
    json_t *by_version = get_json("/workflows/api-wf@1.0.0");
    assert_true(json_equal(by_uuid, by_version));
    json_decref(by_uuid);
    json_decref(by_name);
    json_decref(by_version);

    call(&r, "GET", "/workflows/no-such-workflow", NULL);
    itest_expect_error(&r, 404, "ResourceNotFound", "no-such-workflow");
    http_sync_resp_dispose(&r);
}

static void test_workflow_refusals_change_nothing(void **state)
{
    (void)state;
    char uuid[40];
    put_workflow("{\"name\": \"api-imm\", \"version\": \"1\", \"chain\": ["
                 "{\"name\": \"a\", \"task\": \"core.noop\"}]}",
                 uuid);
    snapshot_t before = snap();
    http_sync_resp_t r;
    /* Versions are immutable. */
    call(&r, "POST", "/workflows",
         "{\"name\": \"api-imm\", \"version\": \"1\", \"chain\": ["
         "{\"name\": \"b\", \"task\": \"core.noop\"}]}");
    itest_expect_error(&r, 409, "Conflict", "new version");
    http_sync_resp_dispose(&r);
    /* node-workflow's JavaScript bodies are refused with the path of the code. */
    call(&r, "POST", "/workflows",
         "{\"name\": \"api-js\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"},"
         "{\"name\": \"b\", \"body\": \"function (job, cb) { return cb(null); }\"}]}");
    itest_expect_error(&r, 409, "InvalidArgument", "chain[1].body");
    http_sync_resp_dispose(&r);
    call(&r, "POST", "/workflows",
         "{\"name\": \"api-bad\", \"chain\": [{\"name\": \"a\", \"task\": \"core.nosuch\"}]}");
    itest_expect_error(&r, 409, "InvalidArgument", "chain[0].task");
    http_sync_resp_dispose(&r);
    call(&r, "POST", "/workflows", "{\"name\": 7, \"chain\": []}");
    itest_expect_error(&r, 409, "InvalidArgument", "name");
    http_sync_resp_dispose(&r);
    call(&r, "POST", "/workflows", "{\"name\": \"x\", \"chain\": [");
    itest_expect_error(&r, 400, "InvalidContent", "not JSON");
    http_sync_resp_dispose(&r);
    call(&r, "POST", "/workflows", "[1, 2]");
    itest_expect_error(&r, 400, "InvalidContent", "object");
    http_sync_resp_dispose(&r);
    call(&r, "POST", "/workflows", NULL);
    itest_expect_error(&r, 409, "InvalidArgument", "body");
    http_sync_resp_dispose(&r);
    /* A uuid that already names another version. */
    call(&r, "POST", "/workflows",
         itest_fmt("{\"name\": \"api-other\", \"uuid\": \"%s\", \"chain\": ["
                   "{\"name\": \"a\", \"task\": \"core.noop\"}]}",
                   uuid));
    itest_expect_error(&r, 409, "Conflict", uuid);
    http_sync_resp_dispose(&r);
    expect_unchanged(before);
    json_t *wf = get_json(itest_fmt("/workflows/%s", uuid));
    assert_string_equal(itest_str_of(json_array_get(json_object_get(wf, "chain"), 0), "name"), "a");
    json_decref(wf);
}

static void test_workflow_list_pages(void **state)
{
    (void)state;
    char uuids[5][40];
    for (int i = 0; i < 5; i++)
        put_workflow(itest_fmt("{\"name\": \"api-list\", \"version\": \"%d\", \"chain\": ["
                               "{\"name\": \"a\", \"task\": \"core.noop\"}]}",
                               i + 1),
                     uuids[i]);
    /* Newest first (by the time each was stored: versions stored in the same
     * millisecond come in uuid order), two at a time, following the marker to the end;
     * each version exactly once. */
    char path[256], marker[128];
    snprintf(path, sizeof path, "/workflows?name=api-list&limit=2");
    int seen = 0, found[5] = {0};
    long long prev_time = -1;
    for (int page = 0; page < 3; page++) {
        http_sync_resp_t r;
        call(&r, "GET", path, NULL);
        itest_expect_status(&r, 200);
        assert_true(json_is_array(r.json));
        size_t n = json_array_size(r.json);
        assert_int_equal(n, page < 2 ? 2 : 1);
        for (size_t i = 0; i < n; i++, seen++) {
            const char *u = itest_str_of(json_array_get(r.json, i), "uuid");
            long long t = itest_redis_int(&W.redis, "ZSCORE tern:wf:all %s", u);
            assert_true(prev_time < 0 || t <= prev_time);
            prev_time = t;
            for (int k = 0; k < 5; k++)
                found[k] += strcmp(u, uuids[k]) == 0;
        }
        const char *m = http_sync_header(&r, "x-tern-next-marker", marker, sizeof marker);
        if (page < 2) {
            assert_non_null(m);
            snprintf(path, sizeof path, "/workflows?name=api-list&limit=2&marker=%s", m);
        } else {
            assert_null(m);
        }
        http_sync_resp_dispose(&r);
    }
    assert_int_equal(seen, 5);
    for (int k = 0; k < 5; k++)
        assert_int_equal(found[k], 1);

    /* wf-client's findWorkflow: GET /workflows?name=..., the first is the latest. */
    json_t *list = get_json("/workflows?name=api-list&version=3");
    assert_int_equal(json_array_size(list), 1);
    assert_string_equal(itest_str_of(json_array_get(list, 0), "uuid"), uuids[2]);
    json_decref(list);
    list = get_json("/workflows?name=api-none");
    assert_int_equal(json_array_size(list), 0);
    json_decref(list);
    list = get_json("/workflows");
    assert_true(json_array_size(list) >= 8);
    json_decref(list);

    http_sync_resp_t r;
    call(&r, "GET", "/workflows?limit=x", NULL);
    itest_expect_error(&r, 409, "InvalidArgument", "limit");
    http_sync_resp_dispose(&r);
    call(&r, "GET", "/workflows?marker=nope", NULL);
    itest_expect_error(&r, 409, "InvalidArgument", "marker");
    http_sync_resp_dispose(&r);
    call(&r, "GET", "/workflows?timeout=60", NULL);
    itest_expect_error(&r, 409, "InvalidArgument", "timeout");
    http_sync_resp_dispose(&r);
}

static void test_workflow_put(void **state)
{
    (void)state;
    char uuid[40];
    put_workflow("{\"name\": \"api-put\", \"version\": \"1.0.0\", \"chain\": ["
                 "{\"name\": \"a\", \"task\": \"core.noop\"}]}",
                 uuid);
    char path[96];
    snprintf(path, sizeof path, "/workflows/%s", uuid);
    http_sync_resp_t r;

    /* The same definition (version left out: the stored one) changes nothing. */
    call(&r, "PUT", path, "{\"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}]}");
    itest_expect_status(&r, 200);
    assert_string_equal(itest_str_of(r.json, "uuid"), uuid);
    http_sync_resp_dispose(&r);

    /* Another definition under the same version is refused, and nothing changes. */
    snapshot_t before = snap();
    call(&r, "PUT", path,
         "{\"name\": \"api-put\", \"chain\": [{\"name\": \"b\", \"task\": \"core.noop\"}]}");
    itest_expect_error(&r, 409, "Conflict", "version");
    http_sync_resp_dispose(&r);
    call(&r, "PUT", path,
         "{\"name\": \"api-renamed\", \"version\": \"2\", \"chain\": ["
         "{\"name\": \"b\", \"task\": \"core.noop\"}]}");
    itest_expect_error(&r, 409, "InvalidArgument", "name");
    http_sync_resp_dispose(&r);
    call(&r, "PUT", "/workflows/1b4e28ba-2fa1-11d2-883f-0016d3cca427",
         "{\"chain\": [{\"name\": \"b\", \"task\": \"core.noop\"}]}");
    itest_expect_error(&r, 404, "ResourceNotFound", "1b4e28ba-2fa1-11d2-883f-0016d3cca427");
    http_sync_resp_dispose(&r);
    expect_unchanged(before);
    json_t *wf = get_json(path);
    assert_string_equal(itest_str_of(json_array_get(json_object_get(wf, "chain"), 0), "name"), "a");
    json_decref(wf);

    /* A new version is stored beside the old one and becomes the name's latest. */
    call(&r, "PUT", path,
         "{\"version\": \"1.1.0\", \"chain\": [{\"name\": \"b\", \"task\": \"core.noop\"}]}");
    itest_expect_status(&r, 200);
    char new_uuid[40], loc[128];
    snprintf(new_uuid, sizeof new_uuid, "%s", itest_str_of(r.json, "uuid"));
    assert_string_not_equal(new_uuid, uuid);
    assert_string_equal(itest_str_of(r.json, "version"), "1.1.0");
    assert_non_null(http_sync_header(&r, "Location", loc, sizeof loc));
    assert_non_null(strstr(loc, new_uuid));
    http_sync_resp_dispose(&r);
    wf = get_json(path);
    assert_string_equal(itest_str_of(wf, "version"), "1.0.0");
    json_decref(wf);
    wf = get_json("/workflows/api-put");
    assert_string_equal(itest_str_of(wf, "uuid"), new_uuid);
    json_decref(wf);
}

static void test_workflow_delete_keeps_jobs(void **state)
{
    (void)state;
    char wf_uuid[40], job_uuid[40], when[32];
    put_workflow(
        "{\"name\": \"api-del\", \"chain\": [{\"name\": \"only\", \"task\": \"core.noop\"}]}",
        wf_uuid);
    create_job(
        itest_fmt("{\"workflow\": \"%s\", \"exec_after\": \"%s\"}", wf_uuid, iso_in(3600, when)),
        job_uuid, NULL);
    char path[96];
    snprintf(path, sizeof path, "/workflows/%s", wf_uuid);
    http_sync_resp_t r;
    call(&r, "DELETE", path, NULL);
    itest_expect_status(&r, 204);
    assert_int_equal(r.body_len, 0);
    http_sync_resp_dispose(&r);
    call(&r, "GET", path, NULL);
    itest_expect_error(&r, 404, "ResourceNotFound", wf_uuid);
    http_sync_resp_dispose(&r);
    call(&r, "GET", "/workflows/api-del", NULL);
    itest_expect_error(&r, 404, "ResourceNotFound", "api-del");
    http_sync_resp_dispose(&r);
    call(&r, "DELETE", path, NULL);
    itest_expect_error(&r, 404, "ResourceNotFound", wf_uuid);
    http_sync_resp_dispose(&r);
    /* The job keeps its frozen copy. */
    json_t *job = get_json(itest_fmt("/jobs/%s", job_uuid));
    assert_string_equal(itest_str_of(json_array_get(json_object_get(job, "chain"), 0), "name"),
                        "only");
    json_decref(job);
    /* And no new job can be made of it. */
    snapshot_t before = snap();
    call(&r, "POST", "/jobs", itest_fmt("{\"workflow\": \"%s\"}", wf_uuid));
    itest_expect_error(&r, 404, "ResourceNotFound", wf_uuid);
    http_sync_resp_dispose(&r);
    expect_unchanged(before);
}

/* ---- POST /jobs --------------------------------------------------------------- */

static void test_job_create_shape(void **state)
{
    (void)state;
    char uuid[40], when[32];
    json_t *job;
    iso_in(3600, when);
    http_sync_resp_t r;
    call(&r, "POST", "/jobs",
         itest_fmt("{\"workflow\": \"%s\", \"target\": \"/vms/alpha\", \"exec_after\": \"%s\","
                   " \"vm_uuid\": \"alpha\", \"count\": 3, \"num_attempts\": 2,"
                   " \"post_back_urls\": [\"http://127.0.0.1:9/done\"]}",
                   quick_uuid, when));
    itest_expect_status(&r, 201);
    job = json_incref(r.json);
    snprintf(uuid, sizeof uuid, "%s", itest_str_of(job, "uuid"));
    char loc[128];
    assert_string_equal(http_sync_header(&r, "Location", loc, sizeof loc),
                        itest_fmt("/jobs/%s", uuid));
    http_sync_resp_dispose(&r);

    /* node-workflow's job: the body's other members are the params. */
    assert_string_equal(itest_str_of(job, "execution"), "queued");
    assert_string_equal(itest_str_of(job, "workflow_uuid"), quick_uuid);
    assert_string_equal(itest_str_of(job, "name"), "api-quick");
    assert_string_equal(itest_str_of(job, "target"), "/vms/alpha");
    assert_string_equal(itest_str_of(job, "exec_after"), when);
    json_t *params = json_object_get(job, "params");
    assert_string_equal(itest_str_of(params, "vm_uuid"), "alpha");
    assert_int_equal(json_integer_value(json_object_get(params, "count")), 3);
    assert_int_equal(json_object_size(params), 2);
    assert_int_equal(json_array_size(json_object_get(job, "chain")), 1);
    assert_int_equal(json_array_size(json_object_get(job, "chain_results")), 0);
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(job, "post_back_urls"), 0)),
        "http://127.0.0.1:9/done");
    assert_non_null(json_object_get(job, "created_at"));

    /* GET shows the same job, member for member (it is delayed: nothing changed since):
     * the create's answer is made from what was sent, the GET's from what is stored. */
    json_t *again = get_json(itest_fmt("/jobs/%s", uuid));
    if (!json_equal(again, job)) {
        char *a = json_dumps(job, JSON_COMPACT | JSON_SORT_KEYS),
             *b = json_dumps(again, JSON_COMPACT | JSON_SORT_KEYS);
        fail_msg("the create answered\n%s\nGET answers\n%s", a, b);
    }
    json_decref(again);
    json_decref(job);

    /* By name, with a params object and top-level members merged into it. */
    create_job("{\"workflow\": \"api-quick\", \"params\": {\"a\": 1}, \"b\": \"two\","
               " \"a\": 1, \"exec_after\": 4102444800000}",
               uuid, &job);
    params = json_object_get(job, "params");
    assert_int_equal(json_integer_value(json_object_get(params, "a")), 1);
    assert_string_equal(itest_str_of(params, "b"), "two");
    assert_string_equal(itest_str_of(job, "exec_after"), "2100-01-01T00:00:00.000Z");
    json_decref(job);
}

/* The create's answer is written as text from what was sent, a GET's encoded from the
 * tree of what is stored (job_view.c): the two must be the same bytes, whatever the job
 * holds. Every job here waits (exec_after), so nothing changes between the two. */
static void test_job_create_answer_is_get(void **state)
{
    (void)state;
    char wf_uuid[40];
    put_workflow("{\"name\": \"api-full\", \"version\": \"2.0.1-rc.1\", \"timeout\": 90,"
                 " \"queue\": \"q-full\", \"description\": \"d \\\"q\\\" \\u00e9\","
                 " \"chain\": [{\"name\": \"first\", \"task\": \"core.set_state\", \"timeout\": 30,"
                 "   \"args\": {\"values\": {\"s\": \"a\\\"b\\\\c\\n\\u0001 \\u00e9 \\u2028 /\","
                 "   \"r\": 0.1}}},"
                 "  {\"name\": \"second\", \"task\": \"core.noop\"}],"
                 " \"onerror\": [{\"name\": \"undo\", \"task\": \"core.noop\"}],"
                 " \"oncancel\": [{\"name\": \"tidy\", \"task\": \"core.noop\"}]}",
                 wf_uuid);
    char when[32];
    iso_in(3600, when);
    /* Strings a client chose, with everything that needs escaping or may be mangled:
     * quotes, backslashes, control characters, non-ASCII, U+2028, slashes; params of
     * every JSON type, reals among them; a given uuid, post-back URLs, locks. */
    static const char tricky[] =
        "\"target\": \"/vms/\\\"a\\\"\\\\b\\n\\t\\r\\b\\f\\u0001\\u001f\\u007f \\u00e9\\u2028 "
        "x/y\","
        " \"params\": {\"k\\\"ey\\n\": \"v\\\\\\u0002\", \"n\": -12, \"big\": 9007199254740993,"
        " \"r\": 0.1, \"e\": 1e2, \"neg0\": -0.0, \"t\": true, \"f\": false, \"z\": null,"
        " \"o\": {\"a\": [], \"b\": {}, \"c\": [1, \"\\u00fc\", {\"d\": 2.5}]}, \"u\": "
        "\"\\ud83d\\ude00\"},"
        " \"top\": \"level \\\"member\\\"\","
        " \"post_back_urls\": [\"http://127.0.0.1:9/done?a=1&b=%22\", \"https://h.example/x\"],"
        " \"locks\": \"^/vms/none$\"";
    char *bodies[] = {
        xasprintf("{\"workflow\": \"api-full\", \"exec_after\": \"%s\"}", when),
        xasprintf("{\"workflow\": \"%s\", \"exec_after\": \"%s\", %s}", wf_uuid, when, tricky),
        xasprintf("{\"workflow\": \"api-full@2.0.1-rc.1\", \"exec_after\": 4102444800000,"
                  " \"uuid\": \"0b7a2bd2-8b47-4e7f-9a55-3d0f0c8a6e21\", \"target\": \"t\","
                  " \"params\": {}}"),
        xasprintf("{\"workflow\": \"api-quick\", \"exec_after\": \"%s\", \"target\": \"q\"}", when),
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(bodies); i++) {
        char *body = bodies[i];
        http_sync_resp_t created, got;
        call(&created, "POST", "/jobs", body);
        itest_expect_status(&created, 201);
        call(&got, "GET", itest_fmt("/jobs/%s", itest_str_of(created.json, "uuid")), NULL);
        itest_expect_status(&got, 200);
        if (created.body_len != got.body_len || memcmp(created.body, got.body, got.body_len) != 0)
            fail_msg("body %zu: %s\nthe create answered\n%s\nGET answers\n%s", i, body,
                     created.body, got.body);
        http_sync_resp_dispose(&created);
        http_sync_resp_dispose(&got);
        free(body);
    }
}

/* The latest dates there are, sent as ISO text and as milliseconds, read back as they
 * were sent; a later one is refused naming exec_after and the limit. (Lua writes a
 * number of 10^14 or more, the year 5138 on, as "2.53402300799e+14" with tostring: a
 * job due then read back as due in 1970.) */
static void test_job_exec_after_far_dates(void **state)
{
    (void)state;
    static const struct {
        const char *sent, *read;
    } kept[] = {
        {"\"9999-12-31T23:59:59Z\"", "9999-12-31T23:59:59.000Z"},
        {"\"9999-12-31T23:59:59.999Z\"", "9999-12-31T23:59:59.999Z"},
        {"\"6000-06-01T12:00:00.250Z\"", "6000-06-01T12:00:00.250Z"},
        {"253402300799999", "9999-12-31T23:59:59.999Z"},
        {"100000000000000", "5138-11-16T09:46:40.000Z"},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(kept); i++) {
        char uuid[40];
        json_t *job;
        create_job(itest_fmt("{\"workflow\": \"api-quick\", \"exec_after\": %s}", kept[i].sent),
                   uuid, &job);
        assert_string_equal(itest_str_of(job, "exec_after"), kept[i].read);
        json_decref(job);
        job = get_json(itest_fmt("/jobs/%s", uuid));
        if (strcmp(itest_str_of(job, "exec_after"), kept[i].read) != 0)
            fail_msg("exec_after %s reads back as %s", kept[i].sent,
                     itest_str_of(job, "exec_after"));
        assert_string_equal(itest_execution(job), "queued");
        json_decref(job);
    }

    snapshot_t before = snap();
    static const char *const refused[] = {
        "\"10000-01-01\"", "\"+10000-01-01T00:00:00Z\"", "\"9999-12-31T23:00:00-05:00\"",
        "253402300800000", "9223372036854775807",
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(refused); i++) {
        http_sync_resp_t r;
        call(&r, "POST", "/jobs",
             itest_fmt("{\"workflow\": \"api-quick\", \"exec_after\": %s}", refused[i]));
        itest_expect_error(&r, 409, "InvalidArgument", "exec_after");
        if (strstr(itest_str_of(r.json, "message"), "9999-12-31") == NULL)
            fail_msg("%s: the message does not give the limit: %s", refused[i], r.body);
        http_sync_resp_dispose(&r);
    }
    expect_unchanged(before);
}

static void test_job_create_refusals_change_nothing(void **state)
{
    (void)state;
    snapshot_t before = snap();
    static const struct {
        const char *body;
        long status;
        const char *code, *needle;
    } cases[] = {
        {"{\"target\": \"x\"}", 409, "InvalidArgument", "workflow"},
        {"{\"workflow\": 12}", 409, "InvalidArgument", "workflow"},
        {"{\"workflow\": \"api-nosuch\"}", 404, "ResourceNotFound", "api-nosuch"},
        {"{\"workflow\": \"1b4e28ba-2fa1-11d2-883f-0016d3cca427\"}", 404, "ResourceNotFound",
         "1b4e28ba-2fa1-11d2-883f-0016d3cca427"},
        {"{\"workflow\": \"api-quick\", \"target\": 5}", 409, "InvalidArgument", "target"},
        {"{\"workflow\": \"api-quick\", \"target\": \"\"}", 409, "InvalidArgument", "target"},
        {"{\"workflow\": \"api-quick\", \"exec_after\": \"tomorrow\"}", 409, "InvalidArgument",
         "exec_after"},
        {"{\"workflow\": \"api-quick\", \"exec_after\": \"2026-02-30T00:00:00Z\"}", 409,
         "InvalidArgument", "exec_after"},
        {"{\"workflow\": \"api-quick\", \"exec_after\": true}", 409, "InvalidArgument",
         "exec_after"},
        {"{\"workflow\": \"api-quick\", \"params\": [1]}", 409, "InvalidArgument", "params"},
        {"{\"workflow\": \"api-quick\", \"params\": {\"a\": 1}, \"a\": 2}", 409, "InvalidArgument",
         "a: given both"},
        {"{\"workflow\": \"api-quick\", \"locks\": \"(\"}", 409, "InvalidArgument", "locks"},
        {"{\"workflow\": \"api-quick\", \"locks\": 3}", 409, "InvalidArgument", "locks"},
        {"{\"workflow\": \"api-quick\", \"uuid\": \"nope\"}", 409, "InvalidArgument", "uuid"},
        {"{\"workflow\": \"api-quick\", \"post_back_urls\": \"http://x\"}", 409, "InvalidArgument",
         "post_back_urls"},
        {"{\"workflow\": \"api-quick\", \"post_back_urls\": [\"http://a/\", \"ftp://x\"]}", 409,
         "InvalidArgument", "post_back_urls[1]"},
        {"{\"workflow\": \"api-quick\", \"post_back_urls\": [7]}", 409, "InvalidArgument",
         "post_back_urls[0]"},
        {"{\"workflow\": \"api-quick\"", 400, "InvalidContent", "not JSON"},
        {"\"api-quick\"", 400, "InvalidContent", NULL},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(cases); i++) {
        http_sync_resp_t r;
        call(&r, "POST", "/jobs", cases[i].body);
        itest_expect_error(&r, cases[i].status, cases[i].code, cases[i].needle);
        http_sync_resp_dispose(&r);
    }
    http_sync_resp_t r;
    call(&r, "POST", "/jobs", NULL);
    itest_expect_error(&r, 409, "InvalidArgument", "workflow");
    http_sync_resp_dispose(&r);
    expect_unchanged(before);
}

static void test_job_conflicts(void **state)
{
    (void)state;
    char first[40], when[32];
    iso_in(3600, when);
    create_job(itest_fmt("{\"workflow\": \"api-quick\", \"target\": \"vm-7\", \"size\": 10,"
                         " \"exec_after\": \"%s\", \"locks\": \"^host-7\"}",
                         when),
               first, NULL);
    snapshot_t before = snap();
    http_sync_resp_t r;
    /* The same target and params while the first is unfinished. */
    call(&r, "POST", "/jobs", "{\"workflow\": \"api-quick\", \"target\": \"vm-7\", \"size\": 10}");
    itest_expect_error(&r, 409, "Conflict", first);
    http_sync_resp_dispose(&r);
    /* A target the first job locks. */
    call(&r, "POST", "/jobs", "{\"workflow\": \"api-quick\", \"target\": \"host-7/disk\"}");
    itest_expect_error(&r, 409, "Conflict", first);
    http_sync_resp_dispose(&r);
    /* A uuid that is already a job's. */
    call(&r, "POST", "/jobs", itest_fmt("{\"workflow\": \"api-quick\", \"uuid\": \"%s\"}", first));
    itest_expect_error(&r, 409, "Conflict", first);
    http_sync_resp_dispose(&r);
    expect_unchanged(before);
    /* Once it is canceled, the target is free again. */
    call(&r, "POST", itest_fmt("/jobs/%s/cancel", first), NULL);
    itest_expect_status(&r, 200);
    http_sync_resp_dispose(&r);
    char second[40];
    create_job("{\"workflow\": \"api-quick\", \"target\": \"vm-7\", \"size\": 10}", second, NULL);
    json_t *job = itest_wait_finished(&W.client, second, 20000);
    assert_non_null(job);
    assert_string_equal(itest_execution(job), "succeeded");
    json_decref(job);
}

/* ---- GET /jobs/:uuid and a job's life ----------------------------------------- */

static void test_job_get_and_run(void **state)
{
    (void)state;
    char uuid[40];
    create_job("{\"workflow\": \"api-quick\", \"run\": \"to the end\"}", uuid, NULL);
    json_t *done = itest_wait_finished(&W.client, uuid, 20000);
    assert_non_null(done);
    json_decref(done);
    json_t *job = get_json(itest_fmt("/jobs/%s", uuid));
    assert_string_equal(itest_str_of(job, "execution"), "succeeded");
    /* A finished job has no runner (node-workflow drops runner_id when a job ends). */
    assert_true(json_is_null(json_object_get(job, "runner_id")));
    assert_int_equal(json_array_size(json_object_get(job, "chain_results")), 1);
    assert_string_equal(
        itest_str_of(json_array_get(json_object_get(job, "chain_results"), 0), "name"), "n");
    json_decref(job);

    http_sync_resp_t r;
    call(&r, "GET", "/jobs/1b4e28ba-2fa1-11d2-883f-0016d3cca427", NULL);
    itest_expect_error(&r, 404, "ResourceNotFound", "1b4e28ba-2fa1-11d2-883f-0016d3cca427");
    http_sync_resp_dispose(&r);
    /* node-workflow answers 404 for any job it cannot find, UUID or not. */
    call(&r, "GET", "/jobs/not-a-uuid", NULL);
    itest_expect_error(&r, 404, "ResourceNotFound", "not-a-uuid");
    http_sync_resp_dispose(&r);
}

/* ---- GET /jobs ---------------------------------------------------------------- */

/* ---- direct start ------------------------------------------------------------ */

/* POST /jobs on another ternd's API (`h`); returns the answer (new reference). */
static json_t *create_on(http_sync_t *h, const char *body)
{
    http_sync_resp_t r;
    itest_api_call(h, &r, "POST", "/jobs", body);
    itest_expect_status(&r, 201);
    json_t *job = json_incref(r.json);
    http_sync_resp_dispose(&r);
    return job;
}

/* Waits (bounded) until the job's execution is `want`, read over W's API. */
static void wait_execution(const char *uuid, const char *want)
{
    for (int i = 0; i < 400; i++) {
        json_t *job = get_json(itest_fmt("/jobs/%s", uuid));
        bool there = strcmp(itest_str_of(job, "execution"), want) == 0;
        json_decref(job);
        if (there)
            return;
        itest_pause_ms(50);
    }
    fail_msg("job %s did not become %s within 20 s", uuid, want);
}

/* The number of jobs runner `id` started straight from creates, as GET /runners shows
 * it in a heartbeat sent after `after` (an ISO time of a job's): waits (bounded) for
 * such a heartbeat. */
static long long started_direct_after(const char *id, const char *after)
{
    uint64_t t0 = 0;
    if (iso8601_parse_ms(after, &t0) != 0)
        fail_msg("not a time: %s", after);
    for (int i = 0; i < 200; i++) {
        json_t *runners = get_json("/runners");
        long long n = -1;
        size_t k;
        json_t *r;
        json_array_foreach(runners, k, r)
        {
            uint64_t seen = 0;
            if (strcmp(itest_str_of(r, "id"), id) == 0 &&
                iso8601_parse_ms(itest_str_of(r, "last_seen_at"), &seen) == 0 && seen > t0)
                n = json_integer_value(
                    json_object_get(json_object_get(r, "info"), "started_direct"));
        }
        json_decref(runners);
        if (n >= 0)
            return n;
        itest_pause_ms(50);
    }
    fail_msg("runner %s sent no heartbeat after %s within 10 s", id, after);
    return -1;
}

/* A ternd with both roles starts a job created through it at once, on its own runner,
 * when it has a free slot and the queue is empty: the job never waits in the queue
 * (its runner counts it in GET /runners), and it has started when the create is
 * answered. The answer still shows the job as created, queued: node-workflow's clients
 * require that. With no free slot the job is queued and runs when one frees; with
 * --direct-start 0 every job goes through its queue. */
static void test_direct_start(void **state)
{
    (void)state;
    char ignored[40];
    put_workflow("{\"name\": \"api-solo\", \"queue\": \"solo\", \"chain\": ["
                 "{\"name\": \"s\", \"task\": \"core.sleep\", \"args\": {\"ms\": 60000}}]}",
                 ignored);
    put_workflow("{\"name\": \"api-solo-quick\", \"queue\": \"solo\", \"chain\": ["
                 "{\"name\": \"n\", \"task\": \"core.noop\"}]}",
                 ignored);
    /* Two slots: one for a direct start, one for the claimer waiting on the queue. */
    const char *two[] = {"--concurrency", "2", NULL};
    itest_ternd_t *solo = itest_fleet_start(&fleet, &W.redis, &W.dir, "solo1", "solo", two);
    http_sync_t h;
    http_sync_open(&h, itest_fmt("http://127.0.0.1:%d", solo->api_port));

    json_t *a = create_on(&h, "{\"workflow\": \"api-solo\"}");
    assert_string_equal(itest_str_of(a, "execution"), "queued");
    json_t *got = get_json(itest_fmt("/jobs/%s", itest_str_of(a, "uuid")));
    assert_string_equal(itest_str_of(got, "execution"), "running");
    assert_string_equal(itest_str_of(got, "runner_id"), "solo1");
    /* Started in the create's own step: at the very time it was created. */
    uint64_t created = 0;
    assert_int_equal(iso8601_parse_ms(itest_str_of(got, "created_at"), &created), 0);
    assert_int_equal(json_integer_value(json_object_get(got, "started")), (long long)created);
    assert_int_equal(started_direct_after("solo1", itest_str_of(got, "created_at")), 1);
    json_decref(got);

    /* The other slot is the claimer's: the next job goes through the queue to it, and
     * the one after that waits in the queue, until a slot frees. */
    json_t *b = create_on(&h, "{\"workflow\": \"api-solo\"}");
    wait_execution(itest_str_of(b, "uuid"), "running");
    json_t *c = create_on(&h, "{\"workflow\": \"api-solo-quick\"}");
    got = get_json(itest_fmt("/jobs/%s", itest_str_of(c, "uuid")));
    assert_string_equal(itest_str_of(got, "execution"), "queued");
    json_decref(got);
    char msg[1024];
    assert_int_equal(itest_job_cancel(&W.client, itest_str_of(a, "uuid"), msg, sizeof msg), 0);
    wait_execution(itest_str_of(a, "uuid"), "canceled");
    json_t *done = itest_wait_finished(&W.client, itest_str_of(c, "uuid"), 20000);
    if (done == NULL)
        fail_msg("queued job %s did not finish within 20 s", itest_str_of(c, "uuid"));
    assert_string_equal(itest_execution(done), "succeeded");
    /* b and c were claimed from the queue, not started directly. */
    assert_int_equal(started_direct_after("solo1", itest_str_of(done, "finished_at")), 1);
    json_decref(done);
    assert_int_equal(itest_job_cancel(&W.client, itest_str_of(b, "uuid"), msg, sizeof msg), 0);
    wait_execution(itest_str_of(b, "uuid"), "canceled");
    json_decref(a);
    json_decref(b);
    json_decref(c);
    http_sync_close(&h);

    /* Turned off: the job goes through the queue (and still runs). */
    itest_ternd_signal(solo, SIGTERM, 10000);
    solo->pid = 0;
    const char *off[] = {"--direct-start", "0", NULL};
    itest_ternd_t *queued = itest_fleet_start(&fleet, &W.redis, &W.dir, "solo2", "solo", off);
    http_sync_open(&h, itest_fmt("http://127.0.0.1:%d", queued->api_port));
    json_t *d = create_on(&h, "{\"workflow\": \"api-solo-quick\"}");
    done = itest_wait_finished(&W.client, itest_str_of(d, "uuid"), 20000);
    if (done == NULL)
        fail_msg("job %s did not finish within 20 s", itest_str_of(d, "uuid"));
    assert_string_equal(itest_execution(done), "succeeded");
    assert_int_equal(started_direct_after("solo2", itest_str_of(done, "finished_at")), 0);
    json_decref(done);
    json_decref(d);
    http_sync_close(&h);
    itest_fleet_stop(&fleet, 10000);
}

static void test_job_list_pages(void **state)
{
    (void)state;
    char uuids[7][40], when[32];
    iso_in(3600, when);
    for (int i = 0; i < 7; i++)
        create_job(itest_fmt("{\"workflow\": \"api-quick\", \"batch\": \"b7\", \"i\": %d,"
                             " \"exec_after\": \"%s\"}",
                             i, when),
                   uuids[i], NULL);
    /* Newest first by creation time, three at a time; every job exactly once. */
    char path[256], marker[128];
    snprintf(path, sizeof path, "/jobs?batch=b7&limit=3");
    json_t *seen = json_array();
    for (int page = 0; page < 3; page++) {
        http_sync_resp_t r;
        call(&r, "GET", path, NULL);
        itest_expect_status(&r, 200);
        assert_int_equal(json_array_size(r.json), page < 2 ? 3 : 1);
        size_t i;
        json_t *job;
        json_array_foreach(r.json, i, job)
        {
            json_t *prev = json_array_get(seen, json_array_size(seen) - 1);
            if (prev != NULL)
                assert_true(
                    strcmp(itest_str_of(prev, "created_at"), itest_str_of(job, "created_at")) >= 0);
            assert_string_equal(itest_str_of(json_object_get(job, "params"), "batch"), "b7");
            json_array_append(seen, job);
        }
        const char *m = http_sync_header(&r, "x-tern-next-marker", marker, sizeof marker);
        if (page < 2) {
            assert_non_null(m);
            snprintf(path, sizeof path, "/jobs?batch=b7&limit=3&marker=%s", m);
        } else {
            assert_null(m);
        }
        http_sync_resp_dispose(&r);
    }
    assert_int_equal(json_array_size(seen), 7);
    for (int i = 0; i < 7; i++) {
        int found = 0;
        size_t k;
        json_t *job;
        json_array_foreach(seen, k, job) found += strcmp(itest_str_of(job, "uuid"), uuids[i]) == 0;
        assert_int_equal(found, 1);
    }
    json_decref(seen);

    /* Unfiltered, the newest job is (one created in the same millisecond as) the last
     * one created. */
    json_t *last = get_json(itest_fmt("/jobs/%s", uuids[6]));
    json_t *list = get_json("/jobs?limit=1");
    assert_int_equal(json_array_size(list), 1);
    assert_string_equal(itest_str_of(json_array_get(list, 0), "created_at"),
                        itest_str_of(last, "created_at"));
    json_decref(list);
    json_decref(last);
    /* By execution, and numbers filter as text. */
    list = get_json("/jobs?execution=queued&batch=b7");
    assert_int_equal(json_array_size(list), 7);
    json_decref(list);
    http_sync_resp_t counted;
    char count[24];
    call(&counted, "GET", "/jobs?execution=queued&limit=1", NULL);
    itest_expect_status(&counted, 200);
    assert_non_null(http_sync_header(&counted, "x-count", count, sizeof count));
    assert_int_equal(atoll(count), itest_redis_int(&W.redis, "ZCARD tern:jobs:queued"));
    http_sync_resp_dispose(&counted);
    call(&counted, "GET", "/jobs?batch=b7&limit=1", NULL);
    assert_null(http_sync_header(&counted, "x-count", count, sizeof count));
    http_sync_resp_dispose(&counted);
    list = get_json("/jobs?execution=succeeded&batch=b7");
    assert_int_equal(json_array_size(list), 0);
    json_decref(list);
    list = get_json("/jobs?batch=b7&i=4");
    assert_int_equal(json_array_size(list), 1);
    assert_string_equal(itest_str_of(json_array_get(list, 0), "uuid"), uuids[4]);
    json_decref(list);
    /* node-workflow's offset still works. */
    list = get_json("/jobs?batch=b7&offset=5&limit=10");
    assert_int_equal(json_array_size(list), 2);
    json_decref(list);
    /* A limit over the maximum is the maximum. */
    list = get_json("/jobs?limit=5000&batch=b7");
    assert_int_equal(json_array_size(list), 7);
    json_decref(list);

    static const struct {
        const char *path, *needle;
    } bad[] = {
        {"/jobs?execution=sleeping", "execution"},
        {"/jobs?limit=0", "limit"},
        {"/jobs?limit=ten", "limit"},
        {"/jobs?offset=-1", "offset"},
        {"/jobs?marker=12345", "marker"},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(bad); i++) {
        http_sync_resp_t r;
        call(&r, "GET", bad[i].path, NULL);
        itest_expect_error(&r, 409, "InvalidArgument", bad[i].needle);
        http_sync_resp_dispose(&r);
    }
}

/* Jobs created in the same millisecond page in the order of their uuids' bytes,
 * descending, the order Redis gives members of equal score; an upper-case uuid (which
 * a client may choose) sorts before every lower-case one. Half the jobs are canceled,
 * so the listing of every job merges two indexes, ties included. The creation times
 * are forced equal in the indexes to make the tie certain. */
static void test_job_list_ties(void **state)
{
    (void)state;
    char uuids[6][40], when[32];
    iso_in(3600, when);
    for (int i = 0; i < 6; i++) {
        const char *own = i == 2 ? ", \"uuid\": \"ABCDEF00-1111-4222-8333-444455556666\"" : "";
        create_job(itest_fmt("{\"workflow\": \"api-quick\", \"batch\": \"tie\", \"i\": %d,"
                             " \"exec_after\": \"%s\"%s}",
                             i, when, own),
                   uuids[i], NULL);
    }
    char msg[1024];
    for (int i = 1; i < 6; i += 2)
        assert_int_equal(itest_job_cancel(&W.client, uuids[i], msg, sizeof msg), 0);
    /* Every job gets the first one's creation time in the index it is in. */
    char *t0 = itest_redis_str(&W.redis, "ZSCORE tern:jobs:queued %s", uuids[0]);
    assert_non_null(t0);
    for (int i = 1; i < 6; i++) {
        const char *index = i % 2 ? "canceled" : "queued";
        assert_int_equal(itest_redis_int(&W.redis, "ZSCORE tern:jobs:%s %s", index, uuids[i]) > 0,
                         true);
        assert_int_equal(
            itest_redis_int(&W.redis, "ZADD tern:jobs:%s XX %s %s", index, t0, uuids[i]), 0);
    }
    free(t0);
    char path[256], marker[128], prev[40] = "";
    int seen = 0;
    bool upper_seen = false;
    snprintf(path, sizeof path, "/jobs?batch=tie&limit=2");
    for (int page = 0; page < 3; page++) {
        http_sync_resp_t r;
        call(&r, "GET", path, NULL);
        itest_expect_status(&r, 200);
        assert_int_equal(json_array_size(r.json), 2);
        size_t i;
        json_t *job;
        json_array_foreach(r.json, i, job)
        {
            const char *u = itest_str_of(job, "uuid");
            if (prev[0] != '\0')
                assert_true(memcmp(prev, u, 36) > 0);
            snprintf(prev, sizeof prev, "%s", u);
            upper_seen |= strcmp(u, "ABCDEF00-1111-4222-8333-444455556666") == 0;
            seen++;
        }
        const char *m = http_sync_header(&r, "x-tern-next-marker", marker, sizeof marker);
        assert_true(page < 2 ? m != NULL : m == NULL);
        if (m != NULL)
            snprintf(path, sizeof path, "/jobs?batch=tie&limit=2&marker=%s", m);
        http_sync_resp_dispose(&r);
    }
    assert_int_equal(seen, 6);
    assert_true(upper_seen);
}

/* ---- cancel, resume, retry ---------------------------------------------------- */

static void test_job_cancel(void **state)
{
    (void)state;
    char queued[40], when[32];
    create_job(itest_fmt("{\"workflow\": \"api-quick\", \"c\": 1, \"exec_after\": \"%s\"}",
                         iso_in(3600, when)),
               queued, NULL);
    http_sync_resp_t r;
    call(&r, "POST", itest_fmt("/jobs/%s/cancel", queued), NULL);
    itest_expect_status(&r, 200);
    assert_string_equal(itest_str_of(r.json, "uuid"), queued);
    assert_string_equal(itest_str_of(r.json, "execution"), "canceled");
    assert_int_equal(json_array_size(json_object_get(r.json, "history")), 1);
    http_sync_resp_dispose(&r);
    /* A finished job cannot be canceled. */
    snapshot_t before = snap();
    call(&r, "POST", itest_fmt("/jobs/%s/cancel", queued), NULL);
    itest_expect_error(&r, 409, "Conflict", "finished");
    http_sync_resp_dispose(&r);
    call(&r, "POST", "/jobs/1b4e28ba-2fa1-11d2-883f-0016d3cca427/cancel", NULL);
    itest_expect_error(&r, 404, "ResourceNotFound", "1b4e28ba-2fa1-11d2-883f-0016d3cca427");
    http_sync_resp_dispose(&r);
    call(&r, "POST", "/jobs/zzz/cancel", NULL);
    itest_expect_error(&r, 404, "ResourceNotFound", "zzz");
    http_sync_resp_dispose(&r);
    expect_unchanged(before);

    /* A running job: its runner is told, and the answer says so. */
    char running[40];
    create_job("{\"workflow\": \"api-slow\"}", running, NULL);
    json_t *ev = itest_wait_event(&W.client, running, "running", NULL, 10000);
    assert_non_null(ev);
    json_decref(ev);
    call(&r, "POST", itest_fmt("/jobs/%s/cancel", running), NULL);
    itest_expect_status(&r, 200);
    assert_true(json_is_true(json_object_get(r.json, "cancel_requested")) ||
                strcmp(itest_str_of(r.json, "execution"), "canceled") == 0);
    http_sync_resp_dispose(&r);
    json_t *job = itest_wait_finished(&W.client, running, 20000);
    assert_non_null(job);
    assert_string_equal(itest_execution(job), "canceled");
    json_decref(job);
}

static void test_job_resume(void **state)
{
    (void)state;
    char uuid[40];
    create_job("{\"workflow\": \"api-wait\", \"n\": 1}", uuid, NULL);
    json_t *ev = itest_wait_event(&W.client, uuid, "waiting", NULL, 10000);
    assert_non_null(ev);
    json_decref(ev);
    http_sync_resp_t r;
    call(&r, "POST", itest_fmt("/jobs/%s/resume", uuid), "{\"result\": {\"answer\": 42}}");
    itest_expect_status(&r, 200);
    assert_string_equal(itest_str_of(r.json, "uuid"), uuid);
    http_sync_resp_dispose(&r);
    json_t *job = itest_wait_finished(&W.client, uuid, 20000);
    assert_non_null(job);
    assert_string_equal(itest_execution(job), "succeeded");
    json_t *results = json_object_get(job, "chain_results");
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(json_array_get(results, 0), "result"), "answer")),
                     42);
    assert_string_equal(itest_str_of(json_object_get(json_array_get(results, 1), "result"), "msg"),
                        "answer 42");
    json_decref(job);

    /* Resumed with an error (node-workflow: a message), the step fails. */
    create_job("{\"workflow\": \"api-wait\", \"n\": 2}", uuid, NULL);
    ev = itest_wait_event(&W.client, uuid, "waiting", NULL, 10000);
    assert_non_null(ev);
    json_decref(ev);
    snapshot_t before = snap();
    call(&r, "POST", itest_fmt("/jobs/%s/resume", uuid), "{\"error\": 42}");
    itest_expect_error(&r, 409, "InvalidArgument", "error");
    http_sync_resp_dispose(&r);
    expect_unchanged(before);
    call(&r, "POST", itest_fmt("/jobs/%s/resume", uuid), "{\"error\": \"remote side failed\"}");
    itest_expect_status(&r, 200);
    http_sync_resp_dispose(&r);
    job = itest_wait_finished(&W.client, uuid, 20000);
    assert_non_null(job);
    assert_string_equal(itest_execution(job), "failed");
    json_t *err =
        json_object_get(json_array_get(json_object_get(job, "chain_results"), 0), "error");
    assert_string_equal(itest_str_of(err, "code"), "ExternalTaskError");
    assert_string_equal(itest_str_of(err, "message"), "remote side failed");
    json_decref(job);

    /* Only a waiting job can be resumed. */
    before = snap();
    call(&r, "POST", itest_fmt("/jobs/%s/resume", uuid), "{}");
    itest_expect_error(&r, 409, "Conflict", "waiting");
    http_sync_resp_dispose(&r);
    call(&r, "POST", "/jobs/1b4e28ba-2fa1-11d2-883f-0016d3cca427/resume", "{}");
    itest_expect_error(&r, 404, "ResourceNotFound", NULL);
    http_sync_resp_dispose(&r);
    expect_unchanged(before);

    /* tern's retry of the failed job answers with the job too. */
    call(&r, "POST", itest_fmt("/jobs/%s/retry", uuid), "{}");
    itest_expect_status(&r, 200);
    assert_string_equal(itest_str_of(r.json, "uuid"), uuid);
    http_sync_resp_dispose(&r);
    ev = itest_wait_event(&W.client, uuid, "redrive", NULL, 10000);
    assert_non_null(ev);
    json_decref(ev);
}

/* What a refused action must leave as it was: the job's execution, history and
 * results (a new reference). */
static json_t *job_story(const char *uuid)
{
    json_t *job = get_json(itest_fmt("/jobs/%s", uuid));
    json_t *story = json_pack(
        "{s:O, s:O*, s:O*, s:O*}", "execution", json_object_get(job, "execution"), "history",
        json_object_get(job, "history"), "chain_results", json_object_get(job, "chain_results"),
        "onerror_results", json_object_get(job, "onerror_results"));
    json_decref(job);
    return story;
}

static void expect_story(const char *uuid, const json_t *before)
{
    json_t *now = job_story(uuid);
    if (!json_equal(now, before)) {
        char *a = json_dumps(before, JSON_COMPACT), *b = json_dumps(now, JSON_COMPACT);
        fail_msg("a refused request changed the job\nbefore: %s\nafter:  %s", a, b);
    }
    json_decref(now);
}

/* Members a resume or a retry does not take are refused, as in workflows, rather than
 * ignored (a misspelt "from" would retry from the failed step, "reslt" would resume
 * with "OK"); so is a resume with both a result and an error. Nothing changes: the
 * job is resumed or retried afterwards as if those requests had not been made. */
static void test_job_resume_retry_unknown_members(void **state)
{
    (void)state;
    char uuid[40];
    create_job("{\"workflow\": \"api-wait\", \"n\": 3}", uuid, NULL);
    json_t *ev = itest_wait_event(&W.client, uuid, "waiting", NULL, 10000);
    assert_non_null(ev);
    json_decref(ev);
    snapshot_t before = snap();
    json_t *story = job_story(uuid);
    assert_string_equal(itest_str_of(story, "execution"), "waiting");
    static const struct {
        const char *body, *needle;
    } resumes[] = {
        {"{\"reslt\": {\"answer\": 1}}", "reslt: unknown member"},
        {"{\"result\": {\"answer\": 1}, \"comment\": \"x\"}", "comment: unknown member"},
        {"{\"error\": \"e\", \"uuid\": \"x\"}", "uuid: unknown member"},
        {"{\"result\": {\"answer\": 1}, \"error\": \"remote side failed\"}", "given both"},
        {"{\"result\": 0, \"error\": {\"code\": \"E\", \"message\": \"m\"}}", "given both"},
    };
    http_sync_resp_t r;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(resumes); i++) {
        call(&r, "POST", itest_fmt("/jobs/%s/resume", uuid), resumes[i].body);
        itest_expect_error(&r, 409, "InvalidArgument", resumes[i].needle);
        http_sync_resp_dispose(&r);
    }
    expect_unchanged(before);
    expect_story(uuid, story);
    json_decref(story);

    /* Still waiting: an error resume fails it, and a retry is refused the same way. */
    call(&r, "POST", itest_fmt("/jobs/%s/resume", uuid), "{\"error\": \"remote side failed\"}");
    itest_expect_status(&r, 200);
    http_sync_resp_dispose(&r);
    json_t *job = itest_wait_finished(&W.client, uuid, 20000);
    assert_non_null(job);
    assert_string_equal(itest_execution(job), "failed");
    json_decref(job);
    before = snap();
    story = job_story(uuid);
    static const struct {
        const char *body, *needle;
    } retries[] = {
        {"{\"from\": \"w\"}", "from: unknown member"},
        {"{\"from_step\": \"w\", \"param\": {\"n\": 4}}", "param: unknown member"},
        {"{\"result\": 1}", "result: unknown member"},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(retries); i++) {
        call(&r, "POST", itest_fmt("/jobs/%s/retry", uuid), retries[i].body);
        itest_expect_error(&r, 409, "InvalidArgument", retries[i].needle);
        http_sync_resp_dispose(&r);
    }
    expect_unchanged(before);
    expect_story(uuid, story);
    json_decref(story);
    call(&r, "POST", itest_fmt("/jobs/%s/retry", uuid), "{\"from_step\": \"w\"}");
    itest_expect_status(&r, 200);
    http_sync_resp_dispose(&r);
    ev = itest_wait_event(&W.client, uuid, "redrive", NULL, 10000);
    assert_non_null(ev);
    json_decref(ev);
}

/* ---- info --------------------------------------------------------------------- */

static void test_job_info(void **state)
{
    (void)state;
    char uuid[40], when[32];
    create_job(itest_fmt("{\"workflow\": \"api-quick\", \"info\": 1, \"exec_after\": \"%s\"}",
                         iso_in(3600, when)),
               uuid, NULL);
    char path[96];
    snprintf(path, sizeof path, "/jobs/%s/info", uuid);
    json_t *info = get_json(path);
    assert_int_equal(json_array_size(info), 0);
    json_decref(info);
    http_sync_resp_t r;
    call(&r, "POST", path, "{\"message\": {\"10%\": \"step one\"}}");
    itest_expect_status(&r, 200);
    assert_int_equal(r.body_len, 0);
    http_sync_resp_dispose(&r);
    call(&r, "POST", path, "{\"message\": {\"20%\": \"step two\"}}");
    itest_expect_status(&r, 200);
    http_sync_resp_dispose(&r);
    info = get_json(path);
    assert_int_equal(json_array_size(info), 2);
    assert_string_equal(itest_str_of(json_object_get(json_array_get(info, 0), "message"), "10%"),
                        "step one");
    assert_string_equal(itest_str_of(json_object_get(json_array_get(info, 1), "message"), "20%"),
                        "step two");
    json_decref(info);

    snapshot_t before = snap();
    long long entries = itest_redis_int(&W.redis, "LLEN tern:job:%s:info", uuid);
    call(&r, "POST", path, "{\"message\": 42}");
    itest_expect_error(&r, 409, "InvalidArgument", "message");
    http_sync_resp_dispose(&r);
    call(&r, "POST", path, NULL);
    itest_expect_error(&r, 409, "InvalidArgument", "body");
    http_sync_resp_dispose(&r);
    call(&r, "POST", path, "[\"x\"]");
    itest_expect_error(&r, 400, "InvalidContent", NULL);
    http_sync_resp_dispose(&r);
    call(&r, "POST", "/jobs/1b4e28ba-2fa1-11d2-883f-0016d3cca427/info", "{\"message\": {}}");
    itest_expect_error(&r, 404, "ResourceNotFound", "1b4e28ba-2fa1-11d2-883f-0016d3cca427");
    http_sync_resp_dispose(&r);
    call(&r, "GET", "/jobs/1b4e28ba-2fa1-11d2-883f-0016d3cca427/info", NULL);
    itest_expect_error(&r, 404, "ResourceNotFound", "1b4e28ba-2fa1-11d2-883f-0016d3cca427");
    http_sync_resp_dispose(&r);
    call(&r, "GET", "/jobs/nope/info", NULL);
    itest_expect_error(&r, 404, "ResourceNotFound", "nope");
    http_sync_resp_dispose(&r);
    expect_unchanged(before);
    assert_int_equal(itest_redis_int(&W.redis, "LLEN tern:job:%s:info", uuid), entries);
}

/* ---- /stats and /runners ------------------------------------------------------ */

static void test_stats(void **state)
{
    (void)state;
    json_t *stats = get_json("/stats");
    static const char *const periods[] = {"all_time", "past_24h", "past_hour", "current", "total"};
    static const char *const executions[] = {"queued",  "failed",  "succeeded", "canceled",
                                             "running", "retried", "waiting"};
    for (size_t p = 0; p < TERN_ARRAY_SIZE(periods); p++) {
        json_t *period = json_object_get(stats, periods[p]);
        assert_non_null(period);
        for (size_t e = 0; e < TERN_ARRAY_SIZE(executions); e++)
            assert_true(json_is_integer(json_object_get(period, executions[e])));
    }
    /* Every job of these tests was created within the hour and the periods do not
     * overlap, so each execution's current count is its total; all executions add up
     * to every job (a job may change execution meanwhile, never disappear). */
    long long sum = 0;
    for (size_t e = 0; e < TERN_ARRAY_SIZE(executions); e++) {
        json_int_t total =
            json_integer_value(json_object_get(json_object_get(stats, "total"), executions[e]));
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(stats, "current"), executions[e])),
            total);
        for (size_t p = 0; p < 3; p++)
            assert_int_equal(json_integer_value(json_object_get(json_object_get(stats, periods[p]),
                                                                executions[e])),
                             0);
        sum += total;
    }
    assert_int_equal(sum, itest_job_hashes(&W.redis));
    assert_true(
        json_integer_value(json_object_get(json_object_get(stats, "current"), "succeeded")) >= 1);
    json_decref(stats);
}

static void test_runners(void **state)
{
    (void)state;
    json_t *runners = get_json("/runners");
    assert_true(json_is_array(runners));
    json_t *mine = NULL;
    size_t i;
    json_t *r;
    json_array_foreach(runners, i, r) if (strcmp(itest_str_of(r, "id"), "api1") == 0) mine = r;
    assert_non_null(mine);
    assert_true(json_is_true(json_object_get(mine, "alive")));
    assert_true(json_integer_value(json_object_get(mine, "lease_ms_left")) > 0);
    assert_true(json_is_string(json_object_get(mine, "lease_expires_at")));
    assert_true(json_is_string(json_object_get(mine, "last_seen_at")));
    assert_true(json_is_integer(json_object_get(json_object_get(mine, "info"), "concurrency")));
    json_decref(runners);
}

/* ---- connections -------------------------------------------------------------- */

static void test_keep_alive_across_statuses(void **state)
{
    (void)state;
    http_sync_t h;
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", W.ternd.api_port);
    http_sync_open(&h, base);
    char when[32];
    iso_in(3600, when);
    struct {
        const char *method, *path, *body;
        long status;
    } seq[] = {
        {"POST", "/jobs",
         itest_fmt("{\"workflow\": \"api-quick\", \"ka\": 1, \"exec_after\": \"%s\"}", when), 201},
        {"GET", "/jobs/1b4e28ba-2fa1-11d2-883f-0016d3cca427", NULL, 404},
        {"POST", "/jobs", "{\"workflow\": 1}", 409},
        {"POST", "/jobs", "{", 400},
        {"PUT", "/jobs", "{}", 405},
        {"GET", "/ping", NULL, 200},
        {"HEAD", "/stats", NULL, 200},
        {"DELETE", "/workflows/1b4e28ba-2fa1-11d2-883f-0016d3cca427", NULL, 404},
        {"GET", "/stats", NULL, 200},
    };
    char first_body[512];
    snprintf(first_body, sizeof first_body, "%s", seq[0].body);
    seq[0].body = first_body;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(seq); i++) {
        http_sync_resp_t r;
        itest_api_call(&h, &r, seq[i].method, seq[i].path, seq[i].body);
        itest_expect_status(&r, seq[i].status);
        /* HEAD: the length a GET would have, and no body, which would otherwise be
         * read as the next answer on this connection. */
        if (strcmp(seq[i].method, "HEAD") == 0) {
            char len[32];
            assert_int_equal(r.body_len, 0);
            assert_non_null(http_sync_header(&r, "Content-Length", len, sizeof len));
            assert_true(atoi(len) > 0);
        }
        /* One connection for the whole sequence. */
        if (r.connects != (i == 0 ? 1 : 0))
            fail_msg("request %zu (%s %s, %ld) opened %ld connections", i, seq[i].method,
                     seq[i].path, r.status, r.connects);
        http_sync_resp_dispose(&r);
    }
    http_sync_close(&h);
}

/* ---- auth, TLS, body limit (a ternd of their own) ----------------------------- */

static void test_auth_token(void **state)
{
    (void)state;
    const char *token = "s3cret-token-for-the-api-test";
    setenv("TERN_API_TOKEN", token, 1);
    itest_ternd_t t;
    itest_world_start_api_only(&W, &t, "auth", NULL);
    unsetenv("TERN_API_TOKEN");
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", t.api_port);
    http_sync_t h;
    http_sync_open(&h, base);
    snapshot_t before = snap();
    http_sync_resp_t r;
    itest_api_call(&h, &r, "GET", "/jobs", NULL);
    itest_expect_error(&r, 401, "InvalidCredentials", "Bearer");
    http_sync_resp_dispose(&r);
    itest_api_call(&h, &r, "POST", "/jobs", "{\"workflow\": \"api-quick\"}");
    itest_expect_error(&r, 401, "InvalidCredentials", NULL);
    http_sync_resp_dispose(&r);
    snprintf(h.auth, sizeof h.auth, "Authorization: Bearer %s-wrong", token);
    itest_api_call(&h, &r, "GET", "/stats", NULL);
    itest_expect_error(&r, 401, "InvalidCredentials", NULL);
    http_sync_resp_dispose(&r);
    expect_unchanged(before);
    /* The health check needs no token. */
    h.auth[0] = '\0';
    itest_api_call(&h, &r, "GET", "/ping", NULL);
    itest_expect_status(&r, 200);
    http_sync_resp_dispose(&r);
    snprintf(h.auth, sizeof h.auth, "Authorization: Bearer %s", token);
    itest_api_call(&h, &r, "GET", "/jobs?limit=1", NULL);
    itest_expect_status(&r, 200);
    http_sync_resp_dispose(&r);
    itest_api_call(&h, &r, "GET", "/workflows/api-quick", NULL);
    itest_expect_status(&r, 200);
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
    assert_int_equal(itest_ternd_signal(&t, SIGTERM, 10000), 0);
}

/* Runs `openssl req` to make a self-signed certificate for 127.0.0.1. */
static void make_cert(const char *cert, const char *key)
{
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        dup2(devnull, 2);
        execlp("openssl", "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
               key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
               "subjectAltName=IP:127.0.0.1", (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("openssl req failed (status %d)", st);
}

static void test_tls(void **state)
{
    (void)state;
    char cert[300], key[300], token_file[300];
    snprintf(cert, sizeof cert, "%s/cert.pem", W.dir.path);
    snprintf(key, sizeof key, "%s/key.pem", W.dir.path);
    snprintf(token_file, sizeof token_file, "%s/token", W.dir.path);
    make_cert(cert, key);
    FILE *f = fopen(token_file, "w");
    assert_non_null(f);
    fputs("token-from-a-file-0123456789\n", f);
    fclose(f);
    const char *flags[] = {"--tls-cert",       cert,       "--tls-key", key,
                           "--api-token-file", token_file, NULL};
    itest_ternd_t t;
    itest_world_start_api_only(&W, &t, "tls", flags);
    char base[64];
    snprintf(base, sizeof base, "https://127.0.0.1:%d", t.api_port);
    http_sync_t h;
    http_sync_open(&h, base);
    snprintf(h.ca_file, sizeof h.ca_file, "%s", cert);
    snprintf(h.auth, sizeof h.auth, "Authorization: Bearer token-from-a-file-0123456789");
    http_sync_resp_t r;
    itest_api_call(&h, &r, "GET", "/workflows/api-quick", NULL);
    itest_expect_status(&r, 200);
    assert_string_equal(itest_str_of(r.json, "uuid"), quick_uuid);
    http_sync_resp_dispose(&r);
    /* Over HTTP/1.1 too, and the connection is kept. */
    h.http1_only = true;
    itest_api_call(&h, &r, "GET", "/ping", NULL);
    itest_expect_status(&r, 200);
    http_sync_resp_dispose(&r);
    itest_api_call(&h, &r, "GET", "/jobs/1b4e28ba-2fa1-11d2-883f-0016d3cca427", NULL);
    itest_expect_error(&r, 404, "ResourceNotFound", NULL);
    assert_int_equal(r.connects, 0);
    http_sync_resp_dispose(&r);
    http_sync_close(&h);

    /* Plain HTTP to the TLS port gets no answer. */
    snprintf(base, sizeof base, "http://127.0.0.1:%d", t.api_port);
    http_sync_open(&h, base);
    int rc = http_sync_do(&h, "GET", "/ping", NULL, 0, NULL, &r);
    assert_true(rc != 0 || r.status == 400 || r.status == 0);
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
    assert_int_equal(itest_ternd_signal(&t, SIGTERM, 10000), 0);
}

static void test_body_limit(void **state)
{
    (void)state;
    const char *flags[] = {"--max-body-bytes", "4096", NULL};
    itest_ternd_t t;
    itest_world_start_api_only(&W, &t, "limit", flags);
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", t.api_port);
    http_sync_t h;
    http_sync_open(&h, base);
    h.http1_only = true; /* HTTP/2: h2o resets the stream (RST_STREAM) instead */
    snapshot_t before = snap();
    /* A valid job whose params make the body 8 KiB. */
    size_t pad = 8192;
    char *body = malloc(pad + 128);
    int n = snprintf(body, pad + 128, "{\"workflow\": \"api-quick\", \"pad\": \"");
    memset(body + n, 'x', pad);
    snprintf(body + n + pad, 128, "\"}");
    http_sync_resp_t r;
    itest_api_call(&h, &r, "POST", "/jobs", body);
    itest_expect_status(&r, 413);
    http_sync_resp_dispose(&r);
    itest_api_call(&h, &r, "POST", "/workflows", body);
    itest_expect_status(&r, 413);
    http_sync_resp_dispose(&r);
    free(body);
    expect_unchanged(before);
    /* Under the limit, the same server serves. */
    itest_api_call(&h, &r, "GET", "/workflows/api-quick", NULL);
    itest_expect_status(&r, 200);
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
    assert_int_equal(itest_ternd_signal(&t, SIGTERM, 10000), 0);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ping_and_tasks),
        cmocka_unit_test(test_unknown_route_and_method),
        cmocka_unit_test(test_workflow_post_and_get),
        cmocka_unit_test(test_workflow_refusals_change_nothing),
        cmocka_unit_test(test_workflow_list_pages),
        cmocka_unit_test(test_workflow_put),
        cmocka_unit_test(test_workflow_delete_keeps_jobs),
        cmocka_unit_test(test_job_create_shape),
        cmocka_unit_test(test_job_create_answer_is_get),
        cmocka_unit_test(test_job_create_refusals_change_nothing),
        cmocka_unit_test(test_job_exec_after_far_dates),
        cmocka_unit_test(test_job_conflicts),
        cmocka_unit_test(test_job_get_and_run),
        cmocka_unit_test(test_direct_start),
        cmocka_unit_test(test_job_list_pages),
        cmocka_unit_test(test_job_list_ties),
        cmocka_unit_test(test_job_cancel),
        cmocka_unit_test(test_job_resume),
        cmocka_unit_test(test_job_resume_retry_unknown_members),
        cmocka_unit_test(test_job_info),
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_runners),
        cmocka_unit_test(test_keep_alive_across_statuses),
        cmocka_unit_test(test_auth_token),
        cmocka_unit_test(test_tls),
        cmocka_unit_test(test_body_limit),
    };
    int failures = cmocka_run_group_tests(tests, group_setup, group_teardown);
    curl_global_cleanup();
    return failures == 0 ? 0 : 1;
}
