/*
 * test_admission.c -- admission checks of a real ternd (docs/WORKFLOWS.md, "Admission
 * checks"), driven over HTTP: checks that pass leave their results for the job's steps
 * and holds (on the direct start and on the claim); a refusal answers the task's status,
 * code and message and stores nothing (no job, uniqueness key, lock or event); a check
 * that hangs is a 503 within its bound, its cancel hook run; an isolated check that
 * crashes is a 503 and ternd still serves; a check that waits is a 503 naming the
 * misuse; bad admission lists are refused at POST /workflows with their JSON path; a
 * ternd stopped while a check runs cancels it and exits at once; ternd --run prints a
 * refusal and exits 1.
 *
 * One redis-server and one ternd (API and runner, admission_timeout_ms 400,
 * max_params_bytes 4096) serve the
 * group; the itest plugin's admit_* tasks are the checks.
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
#include "world.h"

#define DEFAULT_BOUND_MS 400 /* the group's admission_timeout_ms */

static itest_world_t W;
static http_sync_t http;

/* ---- helpers ------------------------------------------------------------------ */

static void call(http_sync_resp_t *out, const char *method, const char *path, const char *body)
{
    itest_api_call(&http, out, method, path, body);
}

/* Stores a workflow (JSON text with "%s" standing for the side channel's path in
 * every place it occurs, at most three). */
static void put_workflow(const char *fmt)
{
    char *json = xasprintf(fmt, W.side, W.side, W.side);
    http_sync_resp_t r;
    call(&r, "POST", "/workflows", json);
    if (r.status != 201 && r.status != 200)
        fail_msg("workflow refused (%ld): %s\n%s", r.status, r.body, json);
    http_sync_resp_dispose(&r);
    free(json);
}

/* What a refused create must leave alone: every key, and the keys a create writes
 * first (the uniqueness index, the locks, the global event stream). */
typedef struct snapshot {
    long long keys, jobs, unique, locks, events;
} snapshot_t;

static snapshot_t snap(void)
{
    snapshot_t s = {
        .keys = itest_redis_int(&W.redis, "DBSIZE"),
        .jobs = itest_jobs_indexed(&W.redis),
        .unique = itest_redis_int(&W.redis, "HLEN tern:unique"),
        .locks = itest_redis_int(&W.redis, "HLEN tern:locks"),
        .events = itest_redis_int(&W.redis, "XLEN tern:events"),
    };
    return s;
}

/* The number of jobs GET /jobs lists. */
static size_t jobs_listed(void)
{
    http_sync_resp_t r;
    call(&r, "GET", "/jobs?limit=1000", NULL);
    itest_expect_status(&r, 200);
    size_t n = json_array_size(r.json);
    http_sync_resp_dispose(&r);
    return n;
}

/* Asserts that nothing of job `uuid` was stored and nothing changed since `before`. */
static void expect_nothing_stored(snapshot_t before, size_t listed, const char *uuid)
{
    snapshot_t now = snap();
    assert_int_equal(itest_redis_int(&W.redis, "EXISTS tern:job:%s", uuid), 0);
    assert_int_equal(itest_redis_int(&W.redis, "EXISTS tern:job:%s:events", uuid), 0);
    assert_int_equal(now.keys, before.keys);
    assert_int_equal(now.jobs, before.jobs);
    assert_int_equal(now.unique, before.unique);
    assert_int_equal(now.locks, before.locks);
    assert_int_equal(now.events, before.events);
    assert_int_equal(jobs_listed(), listed);
    http_sync_resp_t r;
    char path[80];
    snprintf(path, sizeof path, "/jobs/%s", uuid);
    call(&r, "GET", path, NULL);
    itest_expect_status(&r, 404);
    http_sync_resp_dispose(&r);
}

/* POST /jobs of `workflow` with uuid, target, a lock and `params` (members of the body,
 * JSON text without braces); the answer in *r (the caller disposes it). Returns the ms
 * it took. */
static uint64_t create(http_sync_resp_t *r, const char *workflow, const char *uuid,
                       const char *params)
{
    char *body = xasprintf("{\"workflow\": \"%s\", \"uuid\": \"%s\", \"target\": \"t-%s\","
                           " \"locks\": \"^t-%s$\"%s%s}",
                           workflow, uuid, uuid, uuid, params[0] != '\0' ? ", " : "", params);
    uint64_t ms = itest_api_call(&http, r, "POST", "/jobs", body);
    free(body);
    return ms;
}

/* ---- group -------------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    itest_world_start(&W, "adm1", "{\"admission_timeout_ms\": 400, \"max_params_bytes\": 4096}",
                      NULL);
    http_sync_open(&http, W.base);
    /* Two checks, the second reading the first; a step reading both; job holds naming
     * a check's result (so the job is queued and claimed, not started directly). */
    put_workflow("{\"name\": \"adm-pass\","
                 " \"holds\": [\"ram:${admission.package.result.args.ram}\"],"
                 " \"admission\": ["
                 "  {\"name\": \"package\", \"task\": \"itest.admit_ok\","
                 "   \"args\": {\"file\": \"%s\", \"ram\": \"${params.ram}\","
                 "              \"who\": \"${job.target}\"}},"
                 "  {\"name\": \"quota\", \"task\": \"itest.admit_ok\", \"timeout\": 1,"
                 "   \"args\": {\"file\": \"%s\","
                 "              \"left\": \"${admission.package.result.args.ram}\"}}],"
                 " \"chain\": [{\"name\": \"use\", \"task\": \"itest.admit_ok\","
                 "  \"args\": {\"file\": \"%s\", \"ram\": \"${admission.quota.result.args.left}\","
                 "   \"job\": \"${admission.package.result.job}\","
                 "   \"text\": \"ram ${admission.package.result.args.ram}\"}}]}");
    /* The same without holds: started at once on the local runner (direct start). */
    put_workflow("{\"name\": \"adm-direct\","
                 " \"admission\": [{\"name\": \"package\", \"task\": \"itest.admit_ok\","
                 "   \"args\": {\"file\": \"%s\", \"ram\": \"${params.ram}\"}}],"
                 " \"chain\": [{\"name\": \"use\", \"task\": \"itest.admit_ok\","
                 "  \"args\": {\"ram\": \"${admission.package.result.args.ram}\"}}]}");
    /* A check that passes, then one that refuses with the status the params ask for,
     * then one that must never run. */
    put_workflow(
        "{\"name\": \"adm-refuse\","
        " \"admission\": ["
        "  {\"name\": \"first\", \"task\": \"itest.admit_ok\", \"args\": {\"file\": \"%s\"}},"
        "  {\"name\": \"package\", \"task\": \"itest.admit_refuse\","
        "   \"args\": {\"file\": \"%s\", \"status\": \"${params.status}\","
        "    \"code\": \"NoSuchPackage\","
        "    \"message\": \"package ${params.pkg} does not exist\"}},"
        "  {\"name\": \"never\", \"task\": \"itest.admit_ok\", \"args\": {\"file\": \"%s\"}}],"
        " \"chain\": [{\"name\": \"n\", \"task\": \"core.noop\"}]}");
    put_workflow("{\"name\": \"adm-hang\","
                 " \"admission\": [{\"name\": \"slow\", \"task\": \"itest.admit_hang\","
                 "   \"timeout\": 0.3, \"args\": {\"file\": \"%s\"}}],"
                 " \"chain\": [{\"name\": \"n\", \"task\": \"core.noop\"}]}");
    put_workflow("{\"name\": \"adm-hang-default\","
                 " \"admission\": [{\"name\": \"slow\", \"task\": \"itest.admit_hang\","
                 "   \"args\": {\"file\": \"%s\"}}],"
                 " \"chain\": [{\"name\": \"n\", \"task\": \"core.noop\"}]}");
    put_workflow("{\"name\": \"adm-hang-long\","
                 " \"admission\": [{\"name\": \"slow\", \"task\": \"itest.admit_hang\","
                 "   \"timeout\": 30, \"args\": {\"file\": \"%s\"}}],"
                 " \"chain\": [{\"name\": \"n\", \"task\": \"core.noop\"}]}");
    put_workflow("{\"name\": \"adm-crash\","
                 " \"admission\": [{\"name\": \"boom\", \"task\": \"itest.admit_crash\","
                 "   \"isolate\": true, \"args\": {\"file\": \"%s\"}}],"
                 " \"chain\": [{\"name\": \"n\", \"task\": \"core.noop\"}]}");
    put_workflow("{\"name\": \"adm-poll\","
                 " \"admission\": [{\"name\": \"polled\", \"task\": \"itest.poll\","
                 "   \"args\": {\"file\": \"%s\", \"times\": 3, \"delay_ms\": 10}}],"
                 " \"chain\": [{\"name\": \"n\", \"task\": \"core.noop\"}]}");
    /* tern_task_refuse in a step of a chain: a failure of the step, as tern_task_fail. */
    put_workflow("{\"name\": \"adm-step-refuse\", \"chain\": ["
                 " {\"name\": \"r\", \"task\": \"itest.admit_refuse\", \"retry\": 2,"
                 "  \"args\": {\"file\": \"%s\", \"status\": 404, \"code\": \"Gone\","
                 "   \"message\": \"not there\"}}]}");
    put_workflow("{\"name\": \"adm-wait\","
                 " \"admission\": [{\"name\": \"parked\", \"task\": \"itest.wait\","
                 "   \"args\": {\"file\": \"%s\"}}],"
                 " \"chain\": [{\"name\": \"n\", \"task\": \"core.noop\"}]}");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    http_sync_close(&http);
    itest_world_stop(&W, 10000);
    return 0;
}

/* ---- passing checks ----------------------------------------------------------- */

/* Both checks run in order, the job is stored with their results, and its holds and
 * its step read them (the job went through the queue and the claim). */
static void test_pass_results_reach_holds_and_steps(void **state)
{
    (void)state;
    char uuid[40];
    uuid_v4(uuid);
    http_sync_resp_t r;
    create(&r, "adm-pass", uuid, "\"ram\": 512");
    itest_expect_status(&r, 201);
    const json_t *adm = json_object_get(r.json, "admission");
    json_t *pkg = json_object_get(json_object_get(adm, "package"), "result");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(pkg, "args"), "ram")), 512);
    char target[64];
    snprintf(target, sizeof target, "t-%s", uuid);
    assert_string_equal(itest_str_of(json_object_get(pkg, "args"), "who"), target);
    assert_string_equal(itest_str_of(pkg, "job"), uuid);
    http_sync_resp_dispose(&r);
    /* In order, once each. */
    char key[64];
    snprintf(key, sizeof key, "%s/admission/0", uuid);
    assert_int_equal(itest_side_count_exact(W.side, "start", key), 1);
    snprintf(key, sizeof key, "%s/admission/1", uuid);
    assert_int_equal(itest_side_count_exact(W.side, "start", key), 1);
    /* The job's holds were expanded with a check's result. */
    char *holds = itest_redis_str(&W.redis, "HGET tern:job:%s holds", uuid);
    assert_non_null(holds);
    assert_non_null(strstr(holds, "ram:512"));
    free(holds);

    json_t *job = itest_wait_finished_ok(&W.client, uuid, 10000);
    const json_t *res =
        json_object_get(json_array_get(json_object_get(job, "chain_results"), 0), "result");
    const json_t *args = json_object_get(res, "args");
    assert_int_equal(json_integer_value(json_object_get(args, "ram")), 512);
    assert_string_equal(itest_str_of(args, "job"), uuid);
    assert_string_equal(itest_str_of(args, "text"), "ram 512");
    /* GET /jobs/:uuid shows the results. */
    json_t *quota = json_object_get(json_object_get(job, "admission"), "quota");
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(json_object_get(quota, "result"), "args"), "left")),
                     512);
    json_decref(job);
}

/* A job started at once on the local runner (no holds) reads the results too. */
static void test_pass_direct_start(void **state)
{
    (void)state;
    char uuid[40];
    uuid_v4(uuid);
    http_sync_resp_t r;
    create(&r, "adm-direct", uuid, "\"ram\": {\"gb\": 4}");
    itest_expect_status(&r, 201);
    http_sync_resp_dispose(&r);
    json_t *job = itest_wait_finished_ok(&W.client, uuid, 10000);
    const json_t *res =
        json_object_get(json_array_get(json_object_get(job, "chain_results"), 0), "result");
    const json_t *ram = json_object_get(json_object_get(res, "args"), "ram");
    assert_int_equal(json_integer_value(json_object_get(ram, "gb")), 4);
    json_decref(job);
}

/* A create sent again with its uuid (after a lost answer) gets the job as it is, without
 * its checks running again (they could refuse what they admitted); the uuid with other
 * params is refused, without running them either. */
static void test_repeated_create_runs_no_check(void **state)
{
    (void)state;
    char uuid[40], key[64];
    uuid_v4(uuid);
    snprintf(key, sizeof key, "%s/admission/0", uuid);
    http_sync_resp_t r;
    create(&r, "adm-pass", uuid, "\"ram\": 64");
    itest_expect_status(&r, 201);
    http_sync_resp_dispose(&r);
    assert_int_equal(itest_side_count_exact(W.side, "start", key), 1);
    create(&r, "adm-pass", uuid, "\"ram\": 64");
    itest_expect_status(&r, 201);
    assert_string_equal(itest_str_of(r.json, "uuid"), uuid);
    http_sync_resp_dispose(&r);
    create(&r, "adm-pass", uuid, "\"ram\": 65");
    itest_expect_error(&r, 409, "Conflict", uuid);
    http_sync_resp_dispose(&r);
    assert_int_equal(itest_side_count_exact(W.side, "start", key), 1);
    json_decref(itest_wait_finished_ok(&W.client, uuid, 10000));
}

/* ---- refusals ------------------------------------------------------------------ */

/* Each status a check may choose is answered as it chose; any other is 422. Nothing is
 * stored: no job, uniqueness key, lock or event, and the later check never runs. */
static void test_refusal_stores_nothing(void **state)
{
    (void)state;
    static const struct {
        const char *asked;
        long status;
    } cases[] = {{"403", 403}, {"404", 404}, {"409", 409}, {"422", 422},
                 {"401", 422}, {"500", 422}, {"200", 422}, {"0", 422}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snapshot_t before = snap();
        size_t listed = jobs_listed();
        char uuid[40], params[96], key[64];
        uuid_v4(uuid);
        snprintf(params, sizeof params, "\"status\": %s, \"pkg\": \"base-64\"", cases[i].asked);
        http_sync_resp_t r;
        create(&r, "adm-refuse", uuid, params);
        itest_expect_error(&r, cases[i].status, "NoSuchPackage", "package base-64 does not exist");
        assert_string_equal(itest_str_of(r.json, "message"), "package base-64 does not exist");
        assert_int_equal(json_object_size(r.json), 2); /* {"code", "message"} */
        http_sync_resp_dispose(&r);
        expect_nothing_stored(before, listed, uuid);
        snprintf(key, sizeof key, "%s/admission/1", uuid);
        assert_int_equal(itest_side_count_exact(W.side, "start", key), 1);
        snprintf(key, sizeof key, "%s/admission/2", uuid);
        assert_int_equal(itest_side_count_exact(W.side, "start", key), 0);
    }
}

/* A template of a check that names nothing refuses the job (422 TemplateError). */
static void test_template_error_refuses(void **state)
{
    (void)state;
    snapshot_t before = snap();
    size_t listed = jobs_listed();
    char uuid[40];
    uuid_v4(uuid);
    http_sync_resp_t r;
    create(&r, "adm-refuse", uuid, "\"status\": 404"); /* no "pkg" */
    itest_expect_error(&r, 422, "TemplateError", "admission[1].args.message: ${params.pkg}");
    http_sync_resp_dispose(&r);
    expect_nothing_stored(before, listed, uuid);
}

/* Results larger than max_params_bytes (4096 here) are refused as params would be: two
 * checks each echo a 3000-byte param. */
static void test_results_over_the_limit(void **state)
{
    (void)state;
    snapshot_t before = snap();
    size_t listed = jobs_listed();
    char uuid[40];
    uuid_v4(uuid);
    char *big = xcalloc(1, 3100);
    memset(big, 'x', 3000);
    char *params = xasprintf("\"ram\": \"%s\"", big);
    http_sync_resp_t r;
    create(&r, "adm-pass", uuid, params);
    itest_expect_error(&r, 413, "RequestEntityTooLarge", "the limit is 4096 (max_params_bytes)");
    http_sync_resp_dispose(&r);
    free(params);
    free(big);
    expect_nothing_stored(before, listed, uuid);
}

/* ---- checks that do not answer ---------------------------------------------------- */

/* A check that never reports is a 503 within its bound: its cancel hook runs and the
 * request never hangs. Without a timeout of its own, ternd's admission_timeout_ms
 * bounds it. */
static void test_hang_is_a_503_within_the_bound(void **state)
{
    (void)state;
    static const struct {
        const char *workflow;
        uint64_t bound_ms;
    } cases[] = {{"adm-hang", 300}, {"adm-hang-default", DEFAULT_BOUND_MS}};
    for (size_t i = 0; i < 2; i++) {
        snapshot_t before = snap();
        size_t listed = jobs_listed();
        char uuid[40], key[64];
        uuid_v4(uuid);
        http_sync_resp_t r;
        uint64_t ms = create(&r, cases[i].workflow, uuid, "");
        print_message("%s: answered in %llu ms\n", cases[i].workflow, (unsigned long long)ms);
        itest_expect_error(&r, 503, "AdmissionTimeout", "admission check \"slow\"");
        http_sync_resp_dispose(&r);
        assert_true(ms >= cases[i].bound_ms);
        assert_true(ms < cases[i].bound_ms + 2000);
        snprintf(key, sizeof key, "%s/admission/0", uuid);
        assert_int_equal(itest_side_count_exact(W.side, "start", key), 1);
        assert_int_equal(itest_side_count_exact(W.side, "cancel", key), 1);
        expect_nothing_stored(before, listed, uuid);
    }
}

/* An isolated check whose plugin aborts is a 503; ternd still serves, and creates. */
static void test_isolated_crash_is_a_503(void **state)
{
    (void)state;
    snapshot_t before = snap();
    size_t listed = jobs_listed();
    char uuid[40], key[64];
    uuid_v4(uuid);
    http_sync_resp_t r;
    create(&r, "adm-crash", uuid, "");
    itest_expect_error(&r, 503, "AdmissionCheckFailed", "admission check \"boom\"");
    assert_non_null(strstr(itest_str_of(r.json, "message"), "SIGABRT"));
    http_sync_resp_dispose(&r);
    snprintf(key, sizeof key, "%s/admission/0", uuid);
    assert_int_equal(itest_side_count_exact(W.side, "start", key), 1);
    expect_nothing_stored(before, listed, uuid);

    call(&r, "GET", "/ping", NULL);
    itest_expect_status(&r, 200);
    http_sync_resp_dispose(&r);
    uuid_v4(uuid);
    create(&r, "adm-direct", uuid, "\"ram\": 1");
    itest_expect_status(&r, 201);
    http_sync_resp_dispose(&r);
    json_decref(itest_wait_finished_ok(&W.client, uuid, 10000));
}

/* A check that asks the job to wait, or to be re-queued, is a 503 naming the misuse. */
static void test_wait_is_a_misuse(void **state)
{
    (void)state;
    static const struct {
        const char *workflow, *call, *check;
    } cases[] = {{"adm-wait", "called tern_task_wait", "admission check \"parked\""},
                 {"adm-poll", "called tern_task_requeue", "admission check \"polled\""}};
    for (size_t i = 0; i < 2; i++) {
        snapshot_t before = snap();
        size_t listed = jobs_listed();
        char uuid[40];
        uuid_v4(uuid);
        http_sync_resp_t r;
        create(&r, cases[i].workflow, uuid, "");
        itest_expect_error(&r, 503, "AdmissionCheckFailed", cases[i].call);
        assert_non_null(strstr(itest_str_of(r.json, "message"), cases[i].check));
        http_sync_resp_dispose(&r);
        expect_nothing_stored(before, listed, uuid);
    }
}

/* In a step, tern_task_refuse is tern_task_fail: the step fails with the task's code,
 * is retried as its policy says, and the job fails. */
static void test_refuse_in_a_step_is_a_failure(void **state)
{
    (void)state;
    char uuid[40], key[64];
    itest_api_create_ok(&http, "{\"workflow\": \"adm-step-refuse\"}", uuid);
    json_t *job = itest_wait_finished(&W.client, uuid, 10000);
    assert_string_equal(itest_execution(job), "failed");
    json_t *res = json_array_get(json_object_get(job, "chain_results"), 0);
    assert_string_equal(itest_error_code_of(res), "Gone");
    assert_string_equal(itest_str_of(json_object_get(res, "error"), "message"), "not there");
    json_decref(job);
    snprintf(key, sizeof key, "%s/0/0", uuid);
    assert_int_equal(itest_side_count_exact(W.side, "start", key), 2);
}

/* ---- shutdown and ternd --run ---------------------------------------------------- */

/* A ternd stopped while a create waits on a long check cancels the check (its cancel
 * hook runs), stores nothing and exits at once, without waiting for the check's 30 s
 * bound (and, in a sanitizer build, without a report). */
static void test_shutdown_cancels_a_running_check(void **state)
{
    (void)state;
    itest_ternd_t api;
    itest_world_start_api_only(&W, &api, "adm-api", NULL);
    snapshot_t before = snap();
    char uuid[40], key[64], base[64];
    uuid_v4(uuid);
    snprintf(key, sizeof key, "%s/admission/0", uuid);
    snprintf(base, sizeof base, "http://127.0.0.1:%d", api.api_port);
    /* The create waits in a child of ours; its answer, or none, does not matter. */
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        http_sync_t h;
        http_sync_resp_t r;
        http_sync_open(&h, base);
        char *body = xasprintf("{\"workflow\": \"adm-hang-long\", \"uuid\": \"%s\"}", uuid);
        http_sync_do(&h, "POST", "/jobs", body, strlen(body), NULL, &r);
        _exit(0);
    }
    itest_side_wait(W.side, "start", key, 1, 10000);
    uint64_t t0 = clock_mono_ms();
    int rc = itest_ternd_signal(&api, SIGTERM, 10000);
    uint64_t took = clock_mono_ms() - t0;
    print_message("ternd stopped in %llu ms with %d\n", (unsigned long long)took, rc);
    assert_int_equal(rc, 0);
    assert_true(took < 10000);
    int st = 0;
    for (unsigned waited = 0; waited < 10000 && waitpid(child, &st, WNOHANG) == 0; waited += 10)
        itest_pause_ms(10);
    if (waitpid(child, &st, WNOHANG) == 0) {
        kill(child, SIGKILL);
        waitpid(child, &st, 0);
    }
    assert_int_equal(itest_side_count_exact(W.side, "cancel", key), 1);
    assert_int_equal(itest_redis_int(&W.redis, "EXISTS tern:job:%s", uuid), 0);
    snapshot_t now = snap();
    assert_int_equal(now.jobs, before.jobs);
    assert_int_equal(now.unique, before.unique);
    assert_int_equal(now.events, before.events);
}

/* ternd --run of a workflow whose check refuses prints the code and message and exits
 * 1, having stored nothing. */
static void test_run_mode_prints_the_refusal(void **state)
{
    (void)state;
    snapshot_t before = snap();
    const char *const extra[] = {"--role",     "api",      "--run",
                                 "adm-refuse", "--params", "{\"status\": 409, \"pkg\": \"p9\"}",
                                 NULL};
    /* ternd --run may exit before or after it says it is ready: started by hand. */
    char out[400];
    snprintf(out, sizeof out, "%s/run.out", W.dir.path);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        const char *argv[16];
        size_t n = 0;
        argv[n++] = getenv("TERN_BIN");
        argv[n++] = "--redis";
        argv[n++] = W.redis.url;
        argv[n++] = "--plugin-dir";
        argv[n++] = W.ternd.plugin_dir;
        argv[n++] = "--runner-id";
        argv[n++] = "adm-run";
        argv[n++] = "--listen";
        argv[n++] = "127.0.0.1:0";
        for (size_t i = 0; extra[i] != NULL; i++)
            argv[n++] = extra[i];
        argv[n] = NULL;
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    unsigned waited = 0;
    for (; waited < 15000 && waitpid(pid, &st, WNOHANG) == 0; waited += 10)
        itest_pause_ms(10);
    if (waited >= 15000) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        fail_msg("ternd --run did not exit within 15 s (output %s)", out);
    }
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 1);
    FILE *f = fopen(out, "r");
    assert_non_null(f);
    char text[8192];
    size_t len = fread(text, 1, sizeof text - 1, f);
    text[len] = '\0';
    fclose(f);
    if (strstr(text, "cannot create a job of adm-refuse: NoSuchPackage: package p9 does not "
                     "exist") == NULL)
        fail_msg("ternd --run said:\n%s", text);
    if (strstr(text, "Sanitizer") != NULL || strstr(text, "runtime error:") != NULL)
        fail_msg("ternd --run: sanitizer report:\n%s", text);
    snapshot_t now = snap();
    assert_int_equal(now.jobs, before.jobs);
    assert_int_equal(now.unique, before.unique);
}

/* ---- bad admission lists --------------------------------------------------------- */

static void test_bad_lists_refused_at_store(void **state)
{
    (void)state;
    static const struct {
        const char *admission;
        const char *needle;
    } cases[] = {
        {"[{\"name\": \"a\", \"task\": \"core.noop\"}, {\"name\": \"b\", \"task\": \"x.y\"}]",
         "admission[1].task: unknown task \"x.y\""},
        {"[{\"name\": \"a\", \"task\": \"core.noop\", \"args\": {\"v\": "
         "\"${admission.b.result}\"}}, {\"name\": \"b\", \"task\": \"core.noop\"}]",
         "admission[0].args.v: ${admission.b.result} names admission check \"b\", which does "
         "not run before this"},
        {"[{\"name\": \"a\", \"task\": \"core.noop\", \"args\": {\"v\": \"${steps.x.result}\"}}]",
         "admission[0].args.v: ${steps.x.result} uses steps"},
        {"[{\"name\": \"a\", \"task\": \"core.noop\"}, {\"name\": \"a\", \"task\": \"core.noop\"}]",
         "admission[1].name: duplicate admission check name \"a\""},
        {"[{\"name\": \"a\", \"task\": \"core.noop\", \"timeout\": -1}]",
         "admission[0].timeout: expected a number of seconds greater than 0 and at most 60"},
        {"[{\"name\": \"a\", \"task\": \"core.sleep\", \"args\": {\"ms\": -1}}]",
         "admission[0].args.ms: expected an integer from 0 to"},
    };
    long long workflows = itest_redis_int(&W.redis, "ZCARD tern:wf:all");
    long long keys = itest_redis_int(&W.redis, "DBSIZE");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *json = xasprintf("{\"name\": \"adm-bad-%zu\", \"admission\": %s,"
                               " \"chain\": [{\"name\": \"n\", \"task\": \"core.noop\"}]}",
                               i, cases[i].admission);
        http_sync_resp_t r;
        call(&r, "POST", "/workflows", json);
        print_message("%ld %s\n", r.status, r.body);
        assert_true(r.status == 409 || r.status == 404);
        assert_non_null(strstr(itest_str_of(r.json, "message"), cases[i].needle));
        http_sync_resp_dispose(&r);
        free(json);
    }
    assert_int_equal(itest_redis_int(&W.redis, "ZCARD tern:wf:all"), workflows);
    assert_int_equal(itest_redis_int(&W.redis, "DBSIZE"), keys);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pass_results_reach_holds_and_steps),
        cmocka_unit_test(test_pass_direct_start),
        cmocka_unit_test(test_repeated_create_runs_no_check),
        cmocka_unit_test(test_refusal_stores_nothing),
        cmocka_unit_test(test_template_error_refuses),
        cmocka_unit_test(test_results_over_the_limit),
        cmocka_unit_test(test_hang_is_a_503_within_the_bound),
        cmocka_unit_test(test_isolated_crash_is_a_503),
        cmocka_unit_test(test_wait_is_a_misuse),
        cmocka_unit_test(test_refuse_in_a_step_is_a_failure),
        cmocka_unit_test(test_bad_lists_refused_at_store),
        cmocka_unit_test(test_shutdown_cancels_a_running_check),
        cmocka_unit_test(test_run_mode_prints_the_refusal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
