/*
 * test_jobs.c -- the life of a job on a real ternd and redis-server: steps run in
 * order and once each, retries with backoff, non-retryable codes, fallback, onerror,
 * and one Redis round trip per step commit.
 */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/ident.h"
#include "events/events.h"
#include "world.h"

static itest_world_t W;

static int group_setup(void **state)
{
    (void)state;
    itest_world_start(&W, "r1", NULL, NULL);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    itest_world_stop(&W, 10000);
    return 0;
}

static void put(const char *json)
{
    itest_workflow_put_ok(&W.client, json);
}

static json_t *run(const char *workflow, const char *params, char uuid[40])
{
    char msg[1024];
    int rc = itest_job_create(&W.client, workflow, params, NULL, 0, NULL, uuid, msg, sizeof msg);
    if (rc != 0)
        fail_msg("job create refused: %s", msg);
    json_t *job = itest_wait_finished(&W.client, uuid, 20000);
    if (job == NULL)
        fail_msg("job %s did not finish within 20 s", uuid);
    return job;
}

static void test_steps_run_in_order_once(void **state)
{
    (void)state;
    put(itest_fmt(
        "{\"name\": \"three\", \"chain\": ["
        "{\"name\": \"a\", \"task\": \"itest.record\", \"args\": {\"file\": \"%s\", \"ms\": 5}},"
        "{\"name\": \"b\", \"task\": \"itest.record\", \"args\": {\"file\": \"%s\", \"ms\": 5}},"
        "{\"name\": \"c\", \"task\": \"core.log\", \"args\": {\"msg\": \"b said "
        "${steps.b.result.recorded}\"}}]}",
        W.side, W.side));
    char uuid[40];
    json_t *job = run("three", NULL, uuid);
    assert_string_equal(itest_execution(job), "succeeded");
    json_t *res = json_object_get(job, "chain_results");
    assert_int_equal(json_array_size(res), 3);
    const char *names[] = {"a", "b", "c"};
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(res, i), "name")),
                            names[i]);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(res, 2), "result"), "msg")),
                        "b said true");
    char key[64];
    snprintf(key, sizeof key, "%s/0/0", uuid);
    assert_int_equal(itest_side_count(W.side, "start", key), 1);
    snprintf(key, sizeof key, "%s/0/1", uuid);
    assert_int_equal(itest_side_count(W.side, "start", key), 1);
    json_decref(job);
}

static void test_retry_with_backoff(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"flaky\", \"chain\": [{\"name\": \"f\", \"task\": \"itest.flaky\","
                  "\"retry\": {\"max_attempts\": 5, \"backoff\": \"constant\", \"initial_ms\": 150,"
                  "\"jitter\": false}, \"args\": {\"file\": \"%s\", \"fail_times\": 2}}]}",
                  W.side));
    char uuid[40];
    json_t *job = run("flaky", NULL, uuid);
    assert_string_equal(itest_execution(job), "succeeded");
    json_t *entry = json_array_get(json_object_get(job, "chain_results"), 0);
    assert_int_equal(json_integer_value(json_object_get(entry, "attempts")), 3);
    /* Two retries, each after the policy's delay. */
    json_t *events = itest_events(&W.client, uuid);
    size_t i;
    json_t *ev;
    int retries = 0;
    json_int_t last_retry = 0, gap_min = 1000000;
    json_array_foreach(events, i, ev)
    {
        const char *status = json_string_value(json_object_get(ev, "status"));
        json_int_t t = json_integer_value(json_object_get(ev, "time"));
        if (status != NULL && strcmp(status, "retry") == 0) {
            assert_int_equal(json_integer_value(json_object_get(ev, "delay_ms")), 150);
            retries++;
            last_retry = t;
        } else if (last_retry != 0 && status != NULL) {
            gap_min = t - last_retry < gap_min ? t - last_retry : gap_min;
            last_retry = 0;
        }
    }
    assert_int_equal(retries, 2);
    /* libuv's loop clock is the kernel's coarse monotonic clock (a few ms per tick),
     * while event times are wall-clock ms: allow one tick of difference. Without the
     * backoff the gap would be a few ms, so the assertion still bites. */
    print_message("smallest gap between a retry and the next attempt's end: %lld ms\n",
                  (long long)gap_min);
    assert_true(gap_min >= 150 - 10);
    json_decref(events);
    json_decref(job);
}

static void test_fatal_code_is_not_retried(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"fatal\", \"chain\": [{\"name\": \"f\", \"task\": \"itest.fatal\","
                  "\"retry\": 5, \"args\": {\"file\": \"%s\"}}]}",
                  W.side));
    char uuid[40];
    json_t *job = run("fatal", NULL, uuid);
    assert_string_equal(itest_execution(job), "failed");
    assert_string_equal(json_string_value(json_object_get(json_object_get(job, "error"), "code")),
                        "FatalThing");
    char key[64];
    snprintf(key, sizeof key, "%s/0/0", uuid);
    assert_int_equal(itest_side_count(W.side, "start", key), 1);
    json_decref(job);
}

static void test_fallback_after_retries(void **state)
{
    (void)state;
    put(itest_fmt(
        "{\"name\": \"fb\", \"chain\": [{\"name\": \"s\", \"task\": \"itest.flaky\","
        "\"retry\": {\"max_attempts\": 2, \"initial_ms\": 10}, \"args\": {\"file\": \"%s\", "
        "\"fail_times\": 100}, \"fallback\": {\"task\": \"core.log\", \"args\": "
        "{\"msg\": \"fell back after ${error.code}\"}}}]}",
        W.side));
    char uuid[40];
    json_t *job = run("fb", NULL, uuid);
    assert_string_equal(itest_execution(job), "succeeded");
    json_t *entry = json_array_get(json_object_get(job, "chain_results"), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(entry, "result"), "msg")),
                        "fell back after Flaky");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(entry, "step_error"), "code")), "Flaky");
    char key[64];
    snprintf(key, sizeof key, "%s/0/0", uuid);
    assert_int_equal(itest_side_count(W.side, "start", key), 2);
    json_decref(job);
}

static void test_onerror_runs_with_the_error(void **state)
{
    (void)state;
    put(itest_fmt("{\"name\": \"oe\", \"chain\": [{\"name\": \"c\", \"task\": \"itest.check\","
                  "\"args\": {\"file\": \"%s\", \"ok\": \"${params.ok}\"}}, "
                  "{\"name\": \"never\", \"task\": \"itest.record\", \"args\": {\"file\": \"%s\", "
                  "\"ms\": 1}}],"
                  "\"onerror\": [{\"name\": \"report\", \"task\": \"core.log\", \"args\": "
                  "{\"msg\": \"${error.step} failed: ${error.message}\"}}]}",
                  W.side, W.side));
    char uuid[40];
    json_t *job = run("oe", "{\"ok\": false}", uuid);
    assert_string_equal(itest_execution(job), "failed");
    json_t *oe = json_object_get(job, "onerror_results");
    assert_int_equal(json_array_size(oe), 1);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(json_array_get(oe, 0), "result"), "msg")),
        "c failed: ok is not true");
    char key[64];
    snprintf(key, sizeof key, "%s/0/1", uuid);
    assert_int_equal(itest_side_count(W.side, "start", key), 0);
    json_decref(job);
}

static void test_one_round_trip_per_step(void **state)
{
    (void)state;
    char steps[4096] = "";
    for (int i = 0; i < 20; i++)
        snprintf(steps + strlen(steps), sizeof steps - strlen(steps),
                 "%s{\"name\": \"n%d\", \"task\": \"core.noop\"}", i ? "," : "", i);
    put(itest_fmt("{\"name\": \"noop20\", \"chain\": [%s]}", steps));
    long long before =
        itest_redis_int(&W.redis, "EVAL %s 0",
                        "return tonumber(string.match(redis.call('INFO','commandstats'),"
                        "'cmdstat_evalsha:calls=(%d+)'))");
    char uuid[40];
    json_t *job = run("noop20", NULL, uuid);
    long long after =
        itest_redis_int(&W.redis, "EVAL %s 0",
                        "return tonumber(string.match(redis.call('INFO','commandstats'),"
                        "'cmdstat_evalsha:calls=(%d+)'))");
    assert_string_equal(itest_execution(job), "succeeded");
    /* 20 commits, the claim, the create (two scripts the first time a client names a
     * workflow), the read, and heartbeats of the runner meanwhile (every 200 ms). Two
     * round trips per step would be 40 or more. */
    long long used = after - before;
    print_message("scripts run for a 20-step job: %lld\n", used);
    assert_true(used >= 20);
    assert_true(used <= 20 + 4 + 10);
    json_decref(job);
}

static long long evalsha_calls(void)
{
    return itest_redis_int(&W.redis, "EVAL %s 0",
                           "return tonumber(string.match(redis.call('INFO','commandstats'),"
                           "'cmdstat_evalsha:calls=(%d+)'))");
}

/* What a follower of the global stream saw: "created" and "finished" events, in the
 * order it saw them, as [job, type] pairs. */
static bool on_burst_event(void *data, const char *id, const json_t *ev)
{
    (void)id;
    const char *job = json_string_value(json_object_get(ev, "job"));
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (job != NULL && type != NULL &&
        (strcmp(type, "created") == 0 || strcmp(type, "finished") == 0))
        json_array_append_new(data, json_pack("[ss]", job, type));
    return true;
}

/* Counts the "finished" events of the jobs in `uuids` among `seen`; each must follow
 * that job's "created" (else *out_of_order is bumped). */
static int burst_count(const json_t *seen, char (*uuids)[40], int n, int *created,
                       int *out_of_order)
{
    int finished = 0;
    *created = 0;
    *out_of_order = 0;
    for (int i = 0; i < n; i++) {
        int state = 0; /* 0 nothing, 1 created, 2 finished */
        size_t k;
        json_t *e;
        json_array_foreach(seen, k, e)
        {
            if (strcmp(json_string_value(json_array_get(e, 0)), uuids[i]) != 0)
                continue;
            bool fin = strcmp(json_string_value(json_array_get(e, 1)), "finished") == 0;
            *out_of_order += fin ? state != 1 : state != 0;
            *created += !fin;
            finished += fin;
            state = fin ? 2 : 1;
        }
    }
    return finished;
}

/* Creates made in one turn of the loop go to Redis together, and each gets its own
 * answer: one refused create (a uuid already taken in the same batch) refuses only
 * itself, and every other job is stored, runs and finishes. The workflow is new to
 * this client: one create asks for it and the others wait for that answer. */
static void test_creates_in_one_turn_share_a_call(void **state)
{
    (void)state;
    put("{\"name\": \"batched\", \"chain\": [{\"name\": \"n\", \"task\": \"core.noop\"}]}");
    enum { N = 50 };
    itest_answer_t answers[N];
    memset(answers, 0, sizeof answers);
    char first[40];
    uuid_v4(first);
    json_t *other = json_pack("{s:b}", "other", 1);
    /* A follower of the global stream from its newest entry: the burst's events reach
     * it although they share entries (stream_entry.h). */
    char *from = itest_redis_str(&W.redis, "EVAL %s 0",
                                 "local r = redis.call('XREVRANGE', 'tern:events', '+', '-', "
                                 "'COUNT', 1) return r[1] and r[1][1] or '0-0'");
    assert_non_null(from);
    long long entries_before = itest_redis_int(&W.redis, "XLEN tern:events");
    static char uuids[N][40];
    int n_uuids = 0;
    json_t *seen = json_array();
    events_follow_t *follower =
        events_follow(&W.client.loop, &W.client.addr, NULL, from, on_burst_event, seen);
    free(from);
    long long before = evalsha_calls();
    for (int i = 0; i < N; i++) {
        /* Jobs 0 and N-1 ask for the same uuid with other params: the later one must
         * be refused. */
        job_create_req_t req = {.workflow = "batched",
                                .uuid = i == 0 || i == N - 1 ? first : NULL,
                                .params = i == N - 1 ? other : NULL};
        job_ops_create(W.client.ops, &req, itest_on_answer, &answers[i]);
    }
    int created = 0;
    json_t *jobs[N] = {0};
    for (int i = 0; i < N; i++) {
        int rc = itest_answer_wait(&W.client, &answers[i], &jobs[i], NULL, 0);
        if (rc == 0)
            created++;
    }
    long long calls = evalsha_calls() - before;
    json_decref(other);
    assert_int_equal(created, N - 1);
    assert_int_equal(answers[N - 1].status, TERN_EEXIST);
    assert_non_null(strstr(answers[N - 1].msg, "already exists"));
    /* One call for the 50 creates, plus whatever the runner ran meanwhile (claims,
     * commits, heartbeats): far fewer than one per create. */
    print_message("script calls while 50 creates were answered: %lld\n", calls);
    assert_true(calls < N / 2);
    for (int i = 0; i < N - 1; i++) {
        const char *u = json_string_value(json_object_get(jobs[i], "uuid"));
        assert_non_null(u);
        snprintf(uuids[n_uuids++], sizeof uuids[0], "%s", u);
    }
    for (int i = 0; i < N - 1; i++) {
        const char *u = json_string_value(json_object_get(jobs[i], "uuid"));
        json_t *job = itest_wait_finished_ok(&W.client, u, 20000);
        assert_string_equal(itest_execution(job), "succeeded");
        json_decref(job);
    }
    for (int i = 0; i < N; i++)
        json_decref(jobs[i]);
    /* Every job's "created" and "finished" reached the follower once, in order. */
    int seen_created = 0, out_of_order = 0, finished = 0;
    uint64_t t0 = clock_wall_ms();
    while ((finished = burst_count(seen, uuids, n_uuids, &seen_created, &out_of_order)) < n_uuids &&
           clock_wall_ms() - t0 < 10000)
        uv_run(&W.client.loop, UV_RUN_ONCE);
    events_follow_stop(follower);
    json_decref(seen);
    print_message("global stream: %d created and %d finished events of %d jobs\n", seen_created,
                  finished, n_uuids);
    assert_int_equal(n_uuids, N - 1);
    assert_int_equal(seen_created, N - 1);
    assert_int_equal(finished, N - 1);
    assert_int_equal(out_of_order, 0);
    /* The jobs' 4 events each (created, running, step, finished) took far fewer
     * entries: the creates' events share one, and so do those of commits made together. */
    long long entries = itest_redis_int(&W.redis, "XLEN tern:events") - entries_before;
    print_message("global stream entries for %d events: %lld\n", 4 * (N - 1), entries);
    assert_true(entries < 2 * (N - 1));

    /* A burst naming a workflow that does not exist: every create is told so. */
    itest_answer_t missing[3];
    memset(missing, 0, sizeof missing);
    for (int i = 0; i < 3; i++) {
        job_create_req_t req = {.workflow = "no-such-workflow"};
        job_ops_create(W.client.ops, &req, itest_on_answer, &missing[i]);
    }
    for (int i = 0; i < 3; i++) {
        char msg[256];
        assert_int_equal(itest_answer_wait(&W.client, &missing[i], NULL, msg, sizeof msg),
                         TERN_ENOENT);
        assert_non_null(strstr(msg, "does not exist"));
    }
}

typedef struct raw_answer {
    bool done;
    int status;
    char text[256]; /* the error, or the first element of the answer */
} raw_answer_t;

static void on_raw_answer(void *data, int status, const redisReply *reply, const char *errmsg)
{
    raw_answer_t *a = data;
    a->done = true;
    a->status = status;
    const redisReply *first = store_reply_at(reply, 0);
    snprintf(a->text, sizeof a->text, "%s",
             status != 0           ? (errmsg ? errmsg : "")
             : first && first->str ? first->str
                                   : "");
}

/* A batched script call whose item fails (here a malformed commit) answers that item
 * with the error and still runs the others of its batch. */
static void test_a_failing_item_fails_alone(void **state)
{
    (void)state;
    raw_answer_t bad = {0}, good = {0};
    store_args_t a;
    /* An item without arguments fails in the script (no job uuid to look up). */
    store_args_init(&a);
    assert_int_equal(store_eval(W.client.store, SCRIPT_STEP_COMMIT, &a, on_raw_answer, &bad), 0);
    const char *args[] = {
        "00000000-0000-4000-8000-00000000000a", "nobody", "1", "0", "0", "next", "", "{}", "", "0"};
    for (size_t k = 0; k < TERN_ARRAY_SIZE(args); k++)
        store_args_push(&a, args[k]);
    assert_int_equal(store_eval(W.client.store, SCRIPT_STEP_COMMIT, &a, on_raw_answer, &good), 0);
    store_args_dispose(&a);
    assert_true(itest_client_run_until(&W.client, &good.done, 10000));
    assert_true(bad.done);
    assert_int_equal(bad.status, TERN_EINVAL);
    assert_true(strlen(bad.text) > 0);
    assert_int_equal(good.status, 0);
    assert_string_equal(good.text, "STALE"); /* no such job: nothing to commit */
}

/* An isolated step (its own helper process) reports progress while it runs: the
 * reports reach the job's events before the step ends, as an in-process step's do. */
/* A create repeated with the same uuid, workflow, params and target (a client that
 * lost the answer and tries again) gets the job it made, not a second one nor an
 * error; the same uuid with other params is refused. */
static void test_repeated_create_is_answered(void **state)
{
    (void)state;
    put("{\"name\": \"repeatable\", \"chain\": [{\"name\": \"n\", \"task\": \"core.noop\"}]}");
    char uuid[40];
    uuid_v4(uuid);
    json_t *params = json_pack("{s:s}", "vm", "v1");
    job_create_req_t req = {
        .workflow = "repeatable", .uuid = uuid, .params = params, .target = "vm-v1"};
    json_t *first = NULL, *again = NULL;
    itest_answer_t a = {0}, b = {0}, c = {0};
    job_ops_create(W.client.ops, &req, itest_on_answer, &a);
    assert_int_equal(itest_answer_wait(&W.client, &a, &first, NULL, 0), 0);
    json_t *done = itest_wait_finished_ok(&W.client, uuid, 20000);
    json_decref(done);
    job_ops_create(W.client.ops, &req, itest_on_answer, &b);
    assert_int_equal(itest_answer_wait(&W.client, &b, &again, NULL, 0), 0);
    assert_string_equal(json_string_value(json_object_get(again, "uuid")), uuid);
    assert_string_equal(json_string_value(json_object_get(again, "created_at")),
                        json_string_value(json_object_get(first, "created_at")));
    assert_string_equal(itest_execution(again), "succeeded"); /* as it is now: not re-run */
    assert_int_equal(json_array_size(json_object_get(again, "chain_results")), 1);
    json_object_set_new(params, "vm", json_string("v2"));
    char msg[256];
    job_ops_create(W.client.ops, &req, itest_on_answer, &c);
    assert_int_equal(itest_answer_wait(&W.client, &c, NULL, msg, sizeof msg), TERN_EEXIST);
    assert_non_null(strstr(msg, "already exists"));
    json_decref(first);
    json_decref(again);
    json_decref(params);
}

/* A target that is not valid UTF-8 (`ternd run --target` takes its bytes from the
 * command line) is refused by name, and nothing is stored: every answer shows the
 * target as a JSON string. */
static void test_target_not_utf8_is_refused(void **state)
{
    (void)state;
    put("{\"name\": \"utf8-target\", \"chain\": [{\"name\": \"n\", \"task\": \"core.noop\"}]}");
    char uuid[40];
    uuid_v4(uuid);
    job_create_req_t req = {.workflow = "utf8-target", .uuid = uuid, .target = "vm-\xe9"};
    itest_answer_t a = {0}, g = {0};
    char msg[256];
    job_ops_create(W.client.ops, &req, itest_on_answer, &a);
    assert_int_equal(itest_answer_wait(&W.client, &a, NULL, msg, sizeof msg), TERN_EINVAL);
    assert_string_equal(msg, "target: not valid UTF-8");
    job_ops_get(W.client.ops, uuid, itest_on_answer, &g);
    assert_int_equal(itest_answer_wait(&W.client, &g, NULL, msg, sizeof msg), TERN_ENOENT);
}

static void test_isolated_step_progress(void **state)
{
    (void)state;
    put("{\"name\": \"iso-progress\", \"chain\": [{\"name\": \"copy\", \"task\": "
        "\"itest.progress\", \"isolate\": true, \"args\": {\"total\": 1000, \"reports\": 6, "
        "\"every_ms\": 300}}]}");
    char uuid[40];
    itest_job_create_ok(&W.client, "iso-progress", NULL, uuid);
    bool seen = false;
    for (uint64_t t0 = clock_mono_ms(); !seen && clock_mono_ms() - t0 < 10000;) {
        json_t *events = itest_events(&W.client, uuid);
        size_t i;
        json_t *ev;
        json_array_foreach(events, i, ev)
        {
            if (strcmp(json_string_value(json_object_get(ev, "type")), "progress") == 0) {
                seen = true;
                assert_string_equal(json_string_value(json_object_get(ev, "name")), "copy");
                assert_non_null(json_object_get(json_object_get(ev, "progress"), "percent"));
            }
        }
        json_decref(events);
        if (!seen)
            itest_pause_ms(50);
    }
    assert_true(seen);
    /* The first report came while the step still ran (six reports take 1.8 s). */
    json_t *job = itest_job_get(&W.client, uuid);
    assert_string_equal(itest_execution(job), "running");
    json_decref(job);
    job = itest_wait_finished_ok(&W.client, uuid, 15000);
    assert_string_equal(itest_execution(job), "succeeded");
    json_decref(job);
}

static void test_plugin_redis_namespace(void **state)
{
    (void)state;
    put("{\"name\": \"count\", \"chain\": [{\"name\": \"c\", \"task\": \"itest.counter\","
        "\"args\": {\"key\": \"hits\"}}]}");
    for (int i = 1; i <= 2; i++) {
        char uuid[40];
        json_t *job = run("count", NULL, uuid);
        assert_string_equal(itest_execution(job), "succeeded");
        json_t *entry = json_array_get(json_object_get(job, "chain_results"), 0);
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(entry, "result"), "value")), i);
        json_decref(job);
    }
    /* The key lives in the plugin's namespace, nowhere else. */
    assert_int_equal(itest_redis_int(&W.redis, "GET tern:p:itest:hits"), 2);
    assert_int_equal(itest_redis_int(&W.redis, "EXISTS hits"), 0);
}

static long long script_calls(const char *cmd)
{
    return itest_redis_int(&W.redis, "EVAL %s 0",
                           itest_fmt("local s = string.match(redis.call('INFO','commandstats'),"
                                     "'cmdstat_%s:calls=(%%d+)') return tonumber(s or '0')",
                                     cmd));
}

/* A Redis that lost its script cache (SCRIPT FLUSH, a failover to a replica that never
 * loaded them) answers NOSCRIPT; the store sends the script's source instead and the
 * job goes on. */
static void test_script_cache_lost(void **state)
{
    (void)state;
    put("{\"name\": \"after-flush\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"},"
        "{\"name\": \"b\", \"task\": \"core.noop\"}]}");
    char *ok = itest_redis_str(&W.redis, "SCRIPT FLUSH");
    assert_non_null(ok);
    free(ok);
    long long evals_before = script_calls("eval");
    char uuid[40];
    json_t *job = run("after-flush", NULL, uuid);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_int_equal(json_array_size(json_object_get(job, "chain_results")), 2);
    /* The fallback really ran: EVAL with the source, not only EVALSHA. */
    assert_true(script_calls("eval") > evals_before);
    json_decref(job);
}

/* A job keeps the workflow it was created from: a newer version stored while the job
 * waits to run changes nothing for it, and new jobs get the newer version. */
static void test_queued_job_keeps_its_workflow(void **state)
{
    (void)state;
    put("{\"name\": \"frozen\", \"version\": \"1.0.0\", \"chain\": [{\"name\": \"say\","
        "\"task\": \"core.log\", \"args\": {\"msg\": \"version one\"}}]}");
    char old_job[40], msg[1024];
    assert_int_equal(itest_job_create(&W.client, "frozen", NULL, NULL, clock_wall_ms() + 1200, NULL,
                                      old_job, msg, sizeof msg),
                     0);
    put("{\"name\": \"frozen\", \"version\": \"2.0.0\", \"chain\": [{\"name\": \"say\","
        "\"task\": \"core.log\", \"args\": {\"msg\": \"version two\"}}]}");
    json_t *job = itest_wait_finished(&W.client, old_job, 20000);
    assert_non_null(job);
    json_t *entry = json_array_get(json_object_get(job, "chain_results"), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(entry, "result"), "msg")),
                        "version one");
    assert_string_equal(json_string_value(json_object_get(job, "version")), "1.0.0");
    json_decref(job);
    char uuid[40];
    job = run("frozen", NULL, uuid);
    entry = json_array_get(json_object_get(job, "chain_results"), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(entry, "result"), "msg")),
                        "version two");
    json_decref(job);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steps_run_in_order_once),
        cmocka_unit_test(test_retry_with_backoff),
        cmocka_unit_test(test_fatal_code_is_not_retried),
        cmocka_unit_test(test_fallback_after_retries),
        cmocka_unit_test(test_onerror_runs_with_the_error),
        cmocka_unit_test(test_one_round_trip_per_step),
        cmocka_unit_test(test_creates_in_one_turn_share_a_call),
        cmocka_unit_test(test_a_failing_item_fails_alone),
        cmocka_unit_test(test_repeated_create_is_answered),
        cmocka_unit_test(test_target_not_utf8_is_refused),
        cmocka_unit_test(test_isolated_step_progress),
        cmocka_unit_test(test_plugin_redis_namespace),
        cmocka_unit_test(test_script_cache_lost),
        cmocka_unit_test(test_queued_job_keeps_its_workflow),
    };
    int failures = cmocka_run_group_tests(tests, group_setup, group_teardown);
    return failures == 0 ? 0 : 1;
}
