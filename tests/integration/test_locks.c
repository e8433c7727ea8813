/*
 * test_locks.c -- job locks on a real ternd (runner and API in one process) over HTTP:
 * locks that would take the process's loop for seconds are refused at once; a lock
 * stored by an earlier version that this one refuses blocks no create; creates of many
 * targets against many locks are answered within a bound while the runner's jobs keep
 * running; a retry is refused, and changes nothing, while another job locks its target.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_calls.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "model/lock_pattern.h"
#include "world.h"

static itest_world_t W;
static http_sync_t http;

static int group_setup(void **state)
{
    (void)state;
    itest_world_start(&W, "r1", NULL, NULL);
    http_sync_open(&http, W.base);
    itest_workflow_put_ok(&W.client, "{\"name\": \"lk-quick\", \"chain\": [{\"name\": \"n\", "
                                     "\"task\": \"core.noop\"}]}");
    itest_workflow_put_ok(&W.client, "{\"name\": \"lk-fail\", \"chain\": [{\"name\": \"f\", "
                                     "\"task\": \"core.fail\"}]}");
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"lk-steps\", \"chain\": ["
                                    "{\"name\": \"s1\", \"task\": \"itest.record\", \"args\": "
                                    "{\"file\": \"%s\", \"ms\": 300}},"
                                    "{\"name\": \"s2\", \"task\": \"itest.record\", \"args\": "
                                    "{\"file\": \"%s\", \"ms\": 300}},"
                                    "{\"name\": \"s3\", \"task\": \"itest.record\", \"args\": "
                                    "{\"file\": \"%s\", \"ms\": 300}}]}",
                                    W.side, W.side, W.side));
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    http_sync_close(&http);
    itest_world_stop(&W, 10000);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------- */

/* Sends a request on the group's client; see itest_api_call. */
static uint64_t call(http_sync_resp_t *out, const char *method, const char *path, const char *body)
{
    return itest_api_call(&http, out, method, path, body);
}

/* The number of lines of ternd's log holding both needles. */
static int log_lines_with(const char *a, const char *b)
{
    FILE *f = fopen(W.ternd.log, "r");
    assert_non_null(f);
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (strstr(line, a) != NULL && strstr(line, b) != NULL)
            n++;
    fclose(f);
    return n;
}

/* An hour from now in ms since the epoch: a job created so stays queued (unfinished,
 * its lock held) and costs the runner nothing. */
static unsigned long long later_ms(void)
{
    return (unsigned long long)clock_wall_ms() + 3600 * 1000;
}

/* ---- locks that would stall the loop --------------------------------------------- */

static void test_stalling_locks_refused_at_once(void **state)
{
    (void)state;
    long long jobs = itest_job_hashes(&W.redis);
    http_sync_resp_t r;
    /* 17 bytes that expand to a million states. */
    uint64_t ms = call(&r, "POST", "/jobs",
                       "{\"workflow\": \"lk-quick\", \"target\": \"a\", "
                       "\"locks\": \"a{1,1000}{1,1000}\"}");
    itest_expect_error(&r, 413, "RequestEntityTooLarge", "more than 2500 instructions");
    http_sync_resp_dispose(&r);
    if (ms > 1000)
        fail_msg("the refusal of a{1,1000}{1,1000} took %llu ms", (unsigned long long)ms);
    /* Back-references: exponential for glibc on every later create. */
    ms = call(&r, "POST", "/jobs",
              "{\"workflow\": \"lk-quick\", \"target\": \"a\", "
              "\"locks\": \"(.*)(.*)(.*)(.*)(.*)\\\\5\\\\4\\\\3\\\\2\\\\1x\"}");
    itest_expect_error(&r, 409, "InvalidArgument",
                       "back-reference \\5 at offset 20 is not supported");
    http_sync_resp_dispose(&r);
    if (ms > 1000)
        fail_msg("the refusal of a back-reference took %llu ms", (unsigned long long)ms);
    /* Too long. */
    char *body = xmalloc(LOCK_PATTERN_MAX_BYTES + 200);
    int n = snprintf(body, 200, "{\"workflow\": \"lk-quick\", \"locks\": \"");
    memset(body + n, 'a', LOCK_PATTERN_MAX_BYTES + 1);
    snprintf(body + n + LOCK_PATTERN_MAX_BYTES + 1, 8, "\"}");
    call(&r, "POST", "/jobs", body);
    itest_expect_error(&r, 413, "RequestEntityTooLarge", "2049 bytes, the limit is 2048");
    http_sync_resp_dispose(&r);
    free(body);
    assert_int_equal(itest_job_hashes(&W.redis), jobs);
}

/* A job stored by an earlier version with a lock this version refuses: every create
 * goes on, quickly, and the log says once which lock is ignored. */
static void test_refused_stored_lock_blocks_nothing(void **state)
{
    (void)state;
    char holder[40], uuid[40];
    itest_api_create_ok(
        &http,
        itest_fmt("{\"workflow\": \"lk-quick\", \"exec_after\": %llu, \"locks\": \"^old$\"}",
                  later_ms()),
        holder);
    static const char old[] = "(.*)(.*)(.*)(.*)(.*)\\5\\4\\3\\2\\1x";
    assert_true(itest_redis_int(&W.redis, "HSET tern:job:%s locks %s", holder, old) >= 0);
    assert_true(itest_redis_int(&W.redis, "HSET tern:locks %s %s", holder, old) >= 0);
    assert_true(itest_redis_int(&W.redis, "INCR tern:locks:version") > 0);
    /* 44 characters: 4.6 s each for glibc's backtracking. Each create after the first
     * reads the table again (the version moved): the lock is compiled, and refused, once. */
    for (int i = 0; i < 3; i++) {
        if (i > 0)
            assert_true(itest_redis_int(&W.redis, "INCR tern:locks:version") > 0);
        char target[45];
        snprintf(target, sizeof target, "%043d%c", i, 'a' + i);
        http_sync_resp_t r;
        uint64_t ms = call(&r, "POST", "/jobs",
                           itest_fmt("{\"workflow\": \"lk-quick\", \"target\": \"%s\"}", target));
        if (r.status != 201)
            fail_msg("create of %s refused (%ld): %s", target, r.status, r.body);
        snprintf(uuid, sizeof uuid, "%s", itest_str_of(r.json, "uuid"));
        http_sync_resp_dispose(&r);
        if (ms > 1000)
            fail_msg("the create of a 44-character target took %llu ms", (unsigned long long)ms);
        json_t *job = itest_wait_finished_ok(&W.client, uuid, 10000);
        assert_string_equal(itest_execution(job), "succeeded");
        json_decref(job);
    }
    assert_int_equal(log_lines_with(holder, "not accepted by this version"), 1);
    itest_api_cancel_ok(&http, &W.client, holder);
}

/* ---- many locks, many creates --------------------------------------------------- */

#define N_LOCKERS 20  /* unfinished jobs holding the worst lock within the limits */
#define N_CREATES 100 /* creates of 1024-character targets against them */

static void test_creates_against_many_locks(void **state)
{
    (void)state;
    /* A running job with an ordinary lock, and a job of several steps whose lease must
     * not expire meanwhile (1 s lease, 200 ms heartbeat: a loop held for a second loses
     * it and the job is retried). */
    char holder[40], steps[40], lockers[N_LOCKERS][40];
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"lk-hold\", \"chain\": [{\"name\": \"h\", "
                                    "\"task\": \"itest.wait\", \"args\": {\"file\": \"%s\"}}]}",
                                    W.side));
    itest_api_create_ok(&http,
                        "{\"workflow\": \"lk-hold\", \"target\": \"rack-9\", "
                        "\"locks\": \"^(vm-1[0-9]|vm-2[0-9])$\"}",
                        holder);
    json_decref(itest_wait_event(&W.client, holder, "waiting", NULL, 10000));
    for (int i = 0; i < N_LOCKERS; i++)
        itest_api_create_ok(&http,
                            itest_fmt("{\"workflow\": \"lk-quick\", \"exec_after\": %llu, "
                                      "\"params\": {\"i\": %d}, \"locks\": \"(.?){1240}x\"}",
                                      later_ms(), i),
                            lockers[i]);
    itest_api_create_ok(&http, "{\"workflow\": \"lk-steps\"}", steps);

    char target[1025];
    memset(target, 'a', 1024);
    target[1024] = '\0';
    uint64_t worst = 0, total = 0;
    for (int i = 0; i < N_CREATES; i++) {
        char num[16];
        int n = snprintf(num, sizeof num, "%d", i);
        memcpy(target, num, (size_t)n); /* distinct targets */
        http_sync_resp_t r;
        uint64_t ms =
            call(&r, "POST", "/jobs",
                 itest_fmt("{\"workflow\": \"lk-quick\", \"target\": \"%s\", \"exec_after\": %llu}",
                           target, later_ms()));
        if (r.status != 201)
            fail_msg("create %d refused (%ld): %s", i, r.status, r.body);
        http_sync_resp_dispose(&r);
        total += ms;
        worst = ms > worst ? ms : worst;
    }
    print_message("%d creates of 1024-byte targets against %d locks of %d instructions: "
                  "%llu ms in all, %llu ms at most\n",
                  N_CREATES, N_LOCKERS, 2482, (unsigned long long)total, (unsigned long long)worst);
    if (worst > 2000)
        fail_msg("a create took %llu ms", (unsigned long long)worst);
    /* The ordinary lock still refuses what it covers. */
    http_sync_resp_t r;
    call(&r, "POST", "/jobs", "{\"workflow\": \"lk-quick\", \"target\": \"vm-17\"}");
    itest_expect_error(&r, 409, "Conflict", holder);
    http_sync_resp_dispose(&r);

    /* The runner's job ran on, each step once, never re-queued. */
    json_t *job = itest_wait_finished_ok(&W.client, steps, 20000);
    assert_string_equal(itest_execution(job), "succeeded");
    json_decref(job);
    json_t *events = itest_events(&W.client, steps);
    assert_int_equal(itest_count_events(events, "retried", NULL), 0);
    json_decref(events);
    assert_int_equal(itest_side_count(W.side, "start", steps), 3);

    itest_api_cancel_ok(&http, &W.client, holder);
    for (int i = 0; i < N_LOCKERS; i++)
        itest_api_cancel_ok(&http, &W.client, lockers[i]);
}

/* ---- retry ---------------------------------------------------------------------- */

static void test_retry_respects_locks(void **state)
{
    (void)state;
    char failed[40], locker[40];
    itest_api_create_ok(&http, "{\"workflow\": \"lk-fail\", \"target\": \"vm-42\"}", failed);
    json_t *job = itest_wait_finished_ok(&W.client, failed, 10000);
    assert_string_equal(itest_execution(job), "failed");
    json_decref(job);
    itest_api_create_ok(&http,
                        itest_fmt("{\"workflow\": \"lk-quick\", \"exec_after\": %llu, "
                                  "\"locks\": \"^vm-4[0-9]$\"}",
                                  later_ms()),
                        locker);

    json_t *before = itest_job_get(&W.client, failed);
    long long keys = itest_redis_int(&W.redis, "DBSIZE");
    http_sync_resp_t r;
    call(&r, "POST", itest_fmt("/jobs/%s/retry", failed), NULL);
    itest_expect_error(&r, 409, "Conflict", locker);
    if (strstr(itest_str_of(r.json, "message"), "^vm-4[0-9]$") == NULL)
        fail_msg("the refusal does not name the lock: %s", itest_str_of(r.json, "message"));
    http_sync_resp_dispose(&r);
    /* Nothing changed: the job is failed as it was, with the same history. */
    json_t *after = itest_job_get(&W.client, failed);
    assert_string_equal(itest_execution(after), "failed");
    assert_int_equal(json_array_size(json_object_get(after, "history")),
                     json_array_size(json_object_get(before, "history")));
    assert_true(json_equal(json_object_get(after, "chain_results"),
                           json_object_get(before, "chain_results")));
    assert_int_equal(itest_redis_int(&W.redis, "DBSIZE"), keys);
    json_decref(before);
    json_decref(after);

    /* The lock goes with its job: the retry runs. */
    itest_api_cancel_ok(&http, &W.client, locker);
    call(&r, "POST", itest_fmt("/jobs/%s/retry", failed), NULL);
    if (r.status != 200)
        fail_msg("retry refused (%ld): %s", r.status, r.body);
    http_sync_resp_dispose(&r);
    json_decref(itest_wait_event_nth(&W.client, failed, "finished", NULL, -1, 2, 10000));
}

/* The other way round is not checked, as at create: a retried job's own locks are not
 * matched against the targets of jobs that started while it had ended. */
static void test_retry_own_locks_not_checked(void **state)
{
    (void)state;
    char failed[40], other[40];
    itest_api_create_ok(&http, "{\"workflow\": \"lk-fail\", \"locks\": \"^db-1$\"}", failed);
    json_decref(itest_wait_finished_ok(&W.client, failed, 10000));
    itest_api_create_ok(
        &http,
        itest_fmt("{\"workflow\": \"lk-quick\", \"target\": \"db-1\", \"exec_after\": %llu}",
                  later_ms()),
        other);
    http_sync_resp_t r;
    call(&r, "POST", itest_fmt("/jobs/%s/retry", failed), NULL);
    if (r.status != 200)
        fail_msg("retry refused (%ld): %s", r.status, r.body);
    http_sync_resp_dispose(&r);
    json_decref(itest_wait_event_nth(&W.client, failed, "finished", NULL, -1, 2, 10000));
    itest_api_cancel_ok(&http, &W.client, other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stalling_locks_refused_at_once),
        cmocka_unit_test(test_refused_stored_lock_blocks_nothing),
        cmocka_unit_test(test_creates_against_many_locks),
        cmocka_unit_test(test_retry_respects_locks),
        cmocka_unit_test(test_retry_own_locks_not_checked),
    };
    int failures = cmocka_run_group_tests(tests, group_setup, group_teardown);
    return failures == 0 ? 0 : 1;
}
