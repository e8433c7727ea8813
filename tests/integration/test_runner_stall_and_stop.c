/*
 * test_runner_stall_and_stop.c -- a runner that stalls or stops mid-job, on real
 * processes (docs/ARCHITECTURE.md, "The life of a job"):
 *
 *   - a runner that stalled past its lease and comes back cannot commit for a job that
 *     was re-queued (or failed with StepInterrupted) meanwhile: its commits are refused,
 *     not taken for repeats, so the job never runs on two runners, finished steps never
 *     run twice and no step runs after an interrupted irreversible one;
 *   - a stop whose grace period ends while a step's commit waits on Redis exits
 *     cleanly, and the step's outcome is kept;
 *   - a claim answered after a stop began hands the job back before its first step.
 *
 * Each test serves queues of its own and starts the runners it needs; the teardown
 * stops them by PID (and resumes any process a failed test left stopped).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "world.h"

static itest_fleet_world_t W;
static bool redis_stopped; /* SIGSTOP'd by the current test */

static int group_setup(void **state)
{
    (void)state;
    itest_fleet_world_start(&W);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    itest_fleet_world_stop(&W, 15000);
    return 0;
}

static int test_teardown(void **state)
{
    (void)state;
    if (redis_stopped) {
        kill(W.redis.pid, SIGCONT);
        redis_stopped = false;
    }
    itest_fleet_stop(&W.fleet, 15000);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------ */

/* Starts a runner serving `queue`, with the NULL-terminated extra flags `more`. */
static itest_ternd_t *start_runner(const char *id, const char *queue, const char *const *more)
{
    return itest_fleet_start(&W.fleet, &W.redis, &W.dir, id, queue, more);
}

static void put(const char *json)
{
    itest_workflow_put_ok(&W.client, json);
}

static void create(const char *workflow, const char *params, char uuid[40])
{
    itest_job_create_ok(&W.client, workflow, params, uuid);
}

static json_t *finished(const char *uuid, unsigned timeout_ms)
{
    return itest_wait_finished_ok(&W.client, uuid, timeout_ms);
}

/* Closes the runner's pub/sub connection from the server side, so that what is
 * published until it reconnects never reaches the runner (a lost connection). */
/* ---- 1. a runner back from a stall longer than its lease ------------------------ */

static void test_stalled_runner_cannot_commit_after_requeue(void **state)
{
    (void)state;
    char side[320];
    itest_fleet_world_side_path(&W, side, sizeof side, "stall");
    put(itest_fmt("{\"name\": \"rv-stall\", \"queue\": \"rv-stall\", \"chain\": ["
                  "{\"name\": \"s0\", \"task\": \"itest.record\", \"args\": {\"file\": \"%s\", "
                  "\"ms\": 600}},"
                  "{\"name\": \"s1\", \"task\": \"itest.record\", \"args\": {\"file\": \"%s\", "
                  "\"ms\": 20}},"
                  "{\"name\": \"s2\", \"task\": \"itest.record\", \"args\": {\"file\": \"%s\", "
                  "\"ms\": 20}}]}",
                  side, side, side));
    /* One slot: the stalled runner takes the job again only once it let it go. */
    static const char *const one[] = {"--concurrency", "1", NULL};
    itest_ternd_t *a = start_runner("stall-a", "rv-stall", one);
    /* The other runner serves another queue: it only re-queues the stalled one's job. */
    start_runner("stall-b", "rv-stall-other", NULL);
    char uuid[40];
    create("rv-stall", NULL, uuid);
    char key[64];
    snprintf(key, sizeof key, "%s/0/0", uuid);
    itest_side_wait(side, "start", key, 1, 10000);

    /* The runner stalls mid-step for longer than its lease: the job is re-queued. */
    kill(a->pid, SIGSTOP);
    json_decref(itest_wait_event_ok(&W.client, uuid, "retried", 10000));
    /* It comes back; its step has ended meanwhile and its commit goes out. */
    kill(a->pid, SIGCONT);

    json_t *job = finished(uuid, 20000);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_int_equal(json_array_size(json_object_get(job, "chain_results")), 3);
    /* The step in flight at the stall may run again; the steps after it ran once,
     * under the runner's new claim: the stale claim's commit was refused. */
    print_message("s0 %d, s1 %d, s2 %d starts\n", itest_side_starts(side, uuid, 0, 0),
                  itest_side_starts(side, uuid, 0, 1), itest_side_starts(side, uuid, 0, 2));
    assert_in_range(itest_side_starts(side, uuid, 0, 0), 1, 2);
    assert_int_equal(itest_side_starts(side, uuid, 0, 1), 1);
    assert_int_equal(itest_side_starts(side, uuid, 0, 2), 1);
    assert_true(itest_ternd_log_has(a, "job no longer held by this runner"));
    json_decref(job);
}

/* The same stall during an irreversible step: the job fails with StepInterrupted, and
 * the runner that comes back must not go on with the steps after the point of no
 * return of a job that is failed. */
static void test_stalled_runner_cannot_go_past_an_interrupted_step(void **state)
{
    (void)state;
    char side[320];
    itest_fleet_world_side_path(&W, side, sizeof side, "stall-irrev");
    put(itest_fmt("{\"name\": \"rv-stall-irrev\", \"queue\": \"rv-stall-irrev\", \"chain\": ["
                  "{\"name\": \"switch\", \"task\": \"itest.record\", \"idempotent\": false, "
                  "\"args\": {\"file\": \"%s\", \"ms\": 600}},"
                  "{\"name\": \"delete-source\", \"task\": \"itest.record\", \"args\": "
                  "{\"file\": \"%s\", \"ms\": 20}}]}",
                  side, side));
    static const char *const one[] = {"--concurrency", "1", NULL};
    itest_ternd_t *a = start_runner("stall-irrev-a", "rv-stall-irrev", one);
    start_runner("stall-irrev-b", "rv-stall-irrev-other", NULL);
    char uuid[40];
    create("rv-stall-irrev", NULL, uuid);
    char key[64];
    snprintf(key, sizeof key, "%s/0/0", uuid);
    itest_side_wait(side, "start", key, 1, 10000);

    kill(a->pid, SIGSTOP);
    json_t *job = finished(uuid, 10000);
    assert_string_equal(itest_execution(job), "failed");
    assert_string_equal(itest_error_code_of(job), "StepInterrupted");
    json_decref(job);
    kill(a->pid, SIGCONT);

    /* The runner's commit of the interrupted step is refused and it drops the job. */
    for (unsigned waited = 0; !itest_ternd_log_has(a, "job no longer held by this runner");
         waited += 10) {
        if (waited > 10000)
            fail_msg("runner %s did not drop the job it lost", a->id);
        itest_pause_ms(10);
    }
    assert_int_equal(itest_side_starts(side, uuid, 0, 1), 0);
    job = itest_job_get(&W.client, uuid);
    assert_string_equal(itest_execution(job), "failed");
    assert_int_equal(json_array_size(json_object_get(job, "chain_results")), 0);
    json_decref(job);
}

/* ---- 2. the grace period ends while a commit waits on Redis --------------------- */

static void test_grace_over_with_commit_in_flight(void **state)
{
    (void)state;
    char side[320];
    itest_fleet_world_side_path(&W, side, sizeof side, "grace");
    put(itest_fmt("{\"name\": \"rv-grace\", \"queue\": \"rv-grace\", \"chain\": ["
                  "{\"name\": \"s0\", \"task\": \"itest.record\", \"args\": {\"file\": \"%s\", "
                  "\"ms\": 300}},"
                  "{\"name\": \"s1\", \"task\": \"itest.record\", \"args\": {\"file\": \"%s\", "
                  "\"ms\": 20}}]}",
                  side, side));
    static const char *const short_grace[] = {"--shutdown-grace-ms", "300", NULL};
    itest_ternd_t *a = start_runner("grace-a", "rv-grace", short_grace);
    char uuid[40];
    create("rv-grace", NULL, uuid);
    char key[64];
    snprintf(key, sizeof key, "%s/0/0", uuid);
    itest_side_wait(side, "start", key, 1, 10000);

    /* Redis stops answering; the step ends and its commit waits for an answer. */
    kill(W.redis.pid, SIGSTOP);
    redis_stopped = true;
    itest_pause_ms(600);
    /* A stop whose grace ends with the commit still unanswered. */
    kill(a->pid, SIGTERM);
    itest_pause_ms(800);
    kill(W.redis.pid, SIGCONT);
    redis_stopped = false;
    /* The answer then reaches a runner that gave the job up: a clean exit. */
    assert_int_equal(itest_ternd_signal(a, SIGTERM, 15000), 0);

    /* The commit happened: another runner goes on from the next step. */
    start_runner("grace-b", "rv-grace", NULL);
    json_t *job = finished(uuid, 20000);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_int_equal(json_array_size(json_object_get(job, "chain_results")), 2);
    assert_int_equal(itest_side_starts(side, uuid, 0, 0), 1);
    assert_int_equal(itest_side_starts(side, uuid, 0, 1), 1);
    json_decref(job);
}

/* ---- 3. a claim answered after the stop began ----------------------------------- */

static void test_claim_answered_during_stop_is_handed_back(void **state)
{
    (void)state;
    char side[320];
    itest_fleet_world_side_path(&W, side, sizeof side, "stopclaim");
    char steps[2048] = "";
    for (int i = 0; i < 4; i++)
        snprintf(steps + strlen(steps), sizeof steps - strlen(steps),
                 "%s{\"name\": \"s%d\", \"task\": \"itest.record\", \"args\": {\"file\": "
                 "\"%s\", \"ms\": 700}}",
                 i ? "," : "", i, side);
    put(itest_fmt("{\"name\": \"rv-stopclaim\", \"queue\": \"rv-stopclaim\", \"chain\": [%s]}",
                  steps));
    static const char *const grace[] = {"--shutdown-grace-ms", "1000", NULL};
    itest_ternd_t *a = start_runner("stopclaim-a", "rv-stopclaim", grace);
    itest_pause_ms(300); /* its blocking claim is armed */

    /* While the runner is stopped, the job is moved to it and the answer waits in its
     * socket; it then gets SIGTERM and resumes: the claim is answered during the stop. */
    kill(a->pid, SIGSTOP);
    char uuid[40];
    create("rv-stopclaim", NULL, uuid);
    itest_pause_ms(200);
    kill(a->pid, SIGTERM);
    kill(a->pid, SIGCONT);
    assert_int_equal(itest_ternd_signal(a, SIGTERM, 15000), 0);

    start_runner("stopclaim-b", "rv-stopclaim", NULL);
    json_t *job = finished(uuid, 20000);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_int_equal(json_array_size(json_object_get(job, "chain_results")), 4);
    /* Handed back, not abandoned mid-step: no step ran twice. */
    for (int s = 0; s < 4; s++)
        if (itest_side_starts(side, uuid, 0, s) != 1)
            fail_msg("step %d started %d times", s, itest_side_starts(side, uuid, 0, s));
    json_decref(job);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_stalled_runner_cannot_commit_after_requeue, test_teardown),
        cmocka_unit_test_teardown(test_stalled_runner_cannot_go_past_an_interrupted_step,
                                  test_teardown),
        cmocka_unit_test_teardown(test_grace_over_with_commit_in_flight, test_teardown),
        cmocka_unit_test_teardown(test_claim_answered_during_stop_is_handed_back, test_teardown),
    };
    int failures = cmocka_run_group_tests(tests, group_setup, group_teardown);
    return failures == 0 ? 0 : 1;
}
