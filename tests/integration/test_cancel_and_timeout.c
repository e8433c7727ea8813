/*
 * test_cancel_and_timeout.c -- cancels and workflow timeouts that reach a job while
 * its runner does not hear of them or no runner holds it, on real processes
 * (docs/ARCHITECTURE.md, "The life of a job"):
 *
 *   - an operator's resume of a waiting step is not taken for the outcome of the
 *     first onerror step when the workflow timeout passes before a runner takes it;
 *   - a cancel the runner did not hear (its pub/sub connection was lost) still cancels
 *     the job at once: before its task asks to wait or to be retried later, or during
 *     a long step;
 *   - resource tickets of a job canceled or timed out while no runner held it are kept
 *     through its oncancel/onerror chain, and released when it ends;
 *   - a cancel during a step's fallback, then an oncancel step that falls back too,
 *     leaves nothing behind (a sanitizer build checks the runner's memory).
 *
 * Each test serves queues of its own and starts the runners it needs; the teardown
 * stops them by PID.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "world.h"

static itest_fleet_world_t W;

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

/* Server time of the job's first event of `type`. */
static json_int_t event_time(const char *uuid, const char *type)
{
    json_t *ev = itest_wait_event_ok(&W.client, uuid, type, 10000);
    json_int_t t = json_integer_value(json_object_get(ev, "time"));
    json_decref(ev);
    return t;
}

/* Closes the runner's pub/sub connection from the server side, so that what is
 * published until it reconnects never reaches the runner (a lost connection). */
static void kill_sub_connection(const char *runner_id)
{
    char *list = itest_redis_str(&W.redis, "CLIENT LIST");
    if (list == NULL)
        fail_msg("CLIENT LIST failed");
    char name[128];
    snprintf(name, sizeof name, " name=tern-%s-sub ", runner_id);
    char *hit = strstr(list, name);
    if (hit == NULL)
        fail_msg("no connection named tern-%s-sub in CLIENT LIST", runner_id);
    char *line = hit;
    while (line > list && line[-1] != '\n')
        line--;
    long long id = -1;
    if (sscanf(line, "id=%lld", &id) != 1)
        fail_msg("cannot read the connection id in: %.80s", line);
    free(list);
    assert_int_equal(itest_redis_int(&W.redis, "CLIENT KILL ID %lld", id), 1);
}

/* ---- 1. a resume that comes before the workflow timeout is noticed --------------- */

static void test_resume_is_not_the_outcome_of_onerror(void **state)
{
    (void)state;
    char side[320];
    itest_fleet_world_side_path(&W, side, sizeof side, "resume");
    put(itest_fmt("{\"name\": \"rv-resume\", \"queue\": \"rv-resume\", \"timeout\": 1, "
                  "\"chain\": [{\"name\": \"w\", \"task\": \"itest.wait\", \"args\": "
                  "{\"file\": \"%s\"}}],"
                  "\"onerror\": [{\"name\": \"cleanup\", \"task\": \"itest.record\", \"args\": "
                  "{\"file\": \"%s\", \"ms\": 10}}]}",
                  side, side));
    itest_ternd_t *a = start_runner("resume-a", "rv-resume", NULL);
    char uuid[40];
    create("rv-resume", NULL, uuid);
    json_decref(itest_wait_event_ok(&W.client, uuid, "waiting", 10000));
    /* No runner takes the job until its deadline has passed; it is resumed before. */
    assert_int_equal(itest_ternd_signal(a, SIGTERM, 10000), 0);
    char msg[1024];
    if (itest_job_resume(&W.client, uuid, "{\"from\": \"operator\"}", NULL, msg, sizeof msg) != 0)
        fail_msg("resume refused: %s", msg);
    itest_pause_ms(1500);
    start_runner("resume-b", "rv-resume", NULL);

    json_t *job = finished(uuid, 20000);
    assert_string_equal(itest_execution(job), "failed");
    assert_string_equal(itest_error_code_of(job), "WorkflowTimeout");
    /* The onerror step ran; the operator's outcome was not taken for its result. */
    json_t *oe = json_object_get(job, "onerror_results");
    assert_int_equal(json_array_size(oe), 1);
    json_t *result = json_object_get(json_array_get(oe, 0), "result");
    assert_null(json_object_get(result, "from"));
    assert_true(json_is_true(json_object_get(result, "recorded")));
    assert_int_equal(itest_side_starts(side, uuid, 1, 0), 1);
    json_decref(job);
}

/* ---- 2. a cancel the runner did not hear ----------------------------------------- */

/* The job's only step is `step` (its side channel `side`), on a queue of its own;
 * while it runs, the runner is stopped, loses its pub/sub connection and the job is
 * canceled; the runner resumes and the task then asks to leave the runner (wait, or
 * retry much later). */
static void cancel_unheard(const char *tag, const char *side, const char *step)
{
    char queue[64], id[64];
    snprintf(queue, sizeof queue, "rv-%s", tag);
    snprintf(id, sizeof id, "%s-a", tag);
    put(itest_fmt("{\"name\": \"%s\", \"queue\": \"%s\", \"chain\": [%s],"
                  "\"oncancel\": [{\"name\": \"undo\", \"task\": \"itest.record\", \"args\": "
                  "{\"file\": \"%s\", \"ms\": 10}}]}",
                  queue, queue, step, side));
    itest_ternd_t *a = start_runner(id, queue, NULL);
    char uuid[40];
    create(queue, NULL, uuid);
    char key[64];
    snprintf(key, sizeof key, "%s/0/0", uuid);
    itest_side_wait(side, "start", key, 1, 10000);

    kill(a->pid, SIGSTOP);
    kill_sub_connection(id);
    char msg[1024];
    if (itest_job_cancel(&W.client, uuid, msg, sizeof msg) != 0)
        fail_msg("cancel refused: %s", msg);
    itest_pause_ms(500); /* the step's time is up when the runner resumes */
    kill(a->pid, SIGCONT);

    json_t *job = finished(uuid, 10000);
    assert_string_equal(itest_execution(job), "canceled");
    assert_int_equal(json_array_size(json_object_get(job, "oncancel_results")), 1);
    assert_int_equal(itest_side_starts(side, uuid, 2, 0), 1);
    assert_int_equal(itest_side_starts(side, uuid, 0, 0), 1);
    json_decref(job);
}

static void test_cancel_unheard_before_wait(void **state)
{
    (void)state;
    char side[320], step[512];
    itest_fleet_world_side_path(&W, side, sizeof side, "cwait");
    snprintf(step, sizeof step,
             "{\"name\": \"w\", \"task\": \"itest.wait\", \"args\": {\"file\": \"%s\", "
             "\"ms\": 300}}",
             side);
    cancel_unheard("cwait", side, step);
}

static void test_cancel_unheard_before_delayed_retry(void **state)
{
    (void)state;
    char side[320], step[512];
    itest_fleet_world_side_path(&W, side, sizeof side, "cretry");
    snprintf(step, sizeof step,
             "{\"name\": \"h\", \"task\": \"itest.hang\", \"timeout\": 0.3, \"retry\": "
             "{\"max_attempts\": 3, \"backoff\": \"constant\", \"initial_ms\": 60000, "
             "\"jitter\": false}, \"args\": {\"file\": \"%s\"}}",
             side);
    cancel_unheard("cretry", side, step);
}

/* The cancel is lost with the pub/sub connection while a long step runs: the runner
 * learns of it once it is reconnected, not at the end of the step. */
static void test_cancel_unheard_during_a_long_step(void **state)
{
    (void)state;
    char side[320];
    itest_fleet_world_side_path(&W, side, sizeof side, "clong");
    put(itest_fmt("{\"name\": \"rv-clong\", \"queue\": \"rv-clong\", \"chain\": ["
                  "{\"name\": \"long\", \"task\": \"itest.record\", \"args\": {\"file\": "
                  "\"%s\", \"ms\": 8000}}],"
                  "\"oncancel\": [{\"name\": \"undo\", \"task\": \"itest.record\", \"args\": "
                  "{\"file\": \"%s\", \"ms\": 10}}]}",
                  side, side));
    itest_ternd_t *a = start_runner("clong-a", "rv-clong", NULL);
    char uuid[40];
    create("rv-clong", NULL, uuid);
    char key[64];
    snprintf(key, sizeof key, "%s/0/0", uuid);
    itest_side_wait(side, "start", key, 1, 10000);

    kill(a->pid, SIGSTOP);
    kill_sub_connection(a->id);
    char msg[1024];
    if (itest_job_cancel(&W.client, uuid, msg, sizeof msg) != 0)
        fail_msg("cancel refused: %s", msg);
    kill(a->pid, SIGCONT);

    /* Well before the step's 8 s are over. */
    json_t *job = finished(uuid, 4000);
    assert_string_equal(itest_execution(job), "canceled");
    assert_int_equal(itest_side_count(side, "cancel", key), 1);
    assert_int_equal(itest_side_starts(side, uuid, 2, 0), 1);
    json_decref(job);
}

/* ---- 3. tickets through oncancel and onerror ------------------------------------- */

static void test_tickets_kept_until_the_job_ends(void **state)
{
    (void)state;
    char side[320];
    itest_fleet_world_side_path(&W, side, sizeof side, "tickets");
    /* Jobs that hold the ticket and wait (one with a workflow timeout); their cleanup
     * chains take a while. */
    for (int timed = 0; timed < 2; timed++)
        put(itest_fmt("{\"name\": \"rv-hold-wait%s\", \"queue\": \"rv-hold\", %s"
                      "\"holds\": [\"rvres:${params.r}\"], \"chain\": [{\"name\": \"w\", "
                      "\"task\": \"itest.wait\", \"args\": {\"file\": \"%s\"}}],"
                      "\"onerror\": [{\"name\": \"fix\", \"task\": \"itest.record\", \"args\": "
                      "{\"file\": \"%s\", \"ms\": 600}}],"
                      "\"oncancel\": [{\"name\": \"undo\", \"task\": \"itest.record\", "
                      "\"args\": {\"file\": \"%s\", \"ms\": 600}}]}",
                      timed ? "-1s" : "", timed ? "\"timeout\": 1, " : "", side, side, side));
    put(itest_fmt("{\"name\": \"rv-hold-next\", \"queue\": \"rv-hold\", "
                  "\"holds\": [\"rvres:${params.r}\"], \"chain\": [{\"name\": \"n\", \"task\": "
                  "\"itest.record\", \"args\": {\"file\": \"%s\", \"ms\": 10}}]}",
                  side));
    start_runner("hold-a", "rv-hold", NULL);

    /* Canceled while it waits (no runner holds it): its oncancel runs holding the
     * ticket; the next job gets it when the canceled one has ended. */
    char first[40], next[40];
    create("rv-hold-wait", "{\"r\": \"c\"}", first);
    json_decref(itest_wait_event_ok(&W.client, first, "waiting", 10000));
    create("rv-hold-next", "{\"r\": \"c\"}", next);
    json_decref(itest_wait_event_ok(&W.client, next, "hold_wait", 10000));
    char msg[1024];
    if (itest_job_cancel(&W.client, first, msg, sizeof msg) != 0)
        fail_msg("cancel refused: %s", msg);
    json_t *j1 = finished(first, 10000), *j2 = finished(next, 10000);
    assert_string_equal(itest_execution(j1), "canceled");
    assert_int_equal(json_array_size(json_object_get(j1, "oncancel_results")), 1);
    assert_string_equal(itest_execution(j2), "succeeded");
    json_int_t ended = event_time(first, "finished"), started = event_time(next, "running");
    print_message("cancel: the next job ran %lld ms after the first ended\n",
                  (long long)(started - ended));
    assert_true(started >= ended);
    json_decref(j1);
    json_decref(j2);

    /* Timed out while it waits: the same for its onerror. */
    create("rv-hold-wait-1s", "{\"r\": \"t\"}", first);
    json_decref(itest_wait_event_ok(&W.client, first, "waiting", 10000));
    create("rv-hold-next", "{\"r\": \"t\"}", next);
    json_decref(itest_wait_event_ok(&W.client, next, "hold_wait", 10000));
    j1 = finished(first, 10000);
    j2 = finished(next, 10000);
    assert_string_equal(itest_execution(j1), "failed");
    assert_string_equal(itest_error_code_of(j1), "WorkflowTimeout");
    assert_int_equal(json_array_size(json_object_get(j1, "onerror_results")), 1);
    assert_string_equal(itest_execution(j2), "succeeded");
    ended = event_time(first, "finished");
    started = event_time(next, "running");
    print_message("timeout: the next job ran %lld ms after the first ended\n",
                  (long long)(started - ended));
    assert_true(started >= ended);
    json_decref(j1);
    json_decref(j2);

    /* Nothing is held or awaited any more. */
    assert_int_equal(itest_redis_int(&W.redis, "EVAL %s 0 %s",
                                     "return #redis.call('KEYS', ARGV[1])", "tern:hold:rvres:*"),
                     0);
}

/* ---- 4. cancel during a fallback, then a fallback in oncancel -------------------- */

static void test_cancel_in_fallback_then_oncancel_fallback(void **state)
{
    (void)state;
    char side[320];
    itest_fleet_world_side_path(&W, side, sizeof side, "fbcancel");
    put(itest_fmt("{\"name\": \"rv-fb\", \"queue\": \"rv-fb\", \"chain\": [{\"name\": \"s\", "
                  "\"task\": \"itest.flaky\", \"args\": {\"file\": \"%s\", \"fail_times\": 100}, "
                  "\"fallback\": {\"task\": \"itest.record\", \"args\": {\"file\": \"%s\", "
                  "\"ms\": 5000}}}],"
                  "\"oncancel\": [{\"name\": \"u\", \"task\": \"itest.flaky\", \"args\": "
                  "{\"file\": \"%s\", \"fail_times\": 100}, \"fallback\": {\"task\": "
                  "\"core.log\", \"args\": {\"msg\": \"undo fell back: ${error.code}\"}}}]}",
                  side, side, side));
    itest_ternd_t *a = start_runner("fb-a", "rv-fb", NULL);
    char uuid[40];
    create("rv-fb", NULL, uuid);
    char key[96];
    snprintf(key, sizeof key, "%s/0/0/fallback", uuid);
    itest_side_wait(side, "start", key, 1, 10000);
    char msg[1024];
    if (itest_job_cancel(&W.client, uuid, msg, sizeof msg) != 0)
        fail_msg("cancel refused: %s", msg);
    json_t *job = finished(uuid, 10000);
    assert_string_equal(itest_execution(job), "canceled");
    json_t *oc = json_object_get(job, "oncancel_results");
    assert_int_equal(json_array_size(oc), 1);
    assert_string_equal(itest_str_of(json_object_get(json_array_get(oc, 0), "result"), "msg"),
                        "undo fell back: Flaky");
    json_decref(job);
    /* A sanitizer build reports anything the runner leaked at exit. */
    assert_int_equal(itest_ternd_signal(a, SIGTERM, 10000), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_resume_is_not_the_outcome_of_onerror, test_teardown),
        cmocka_unit_test_teardown(test_cancel_unheard_before_wait, test_teardown),
        cmocka_unit_test_teardown(test_cancel_unheard_before_delayed_retry, test_teardown),
        cmocka_unit_test_teardown(test_cancel_unheard_during_a_long_step, test_teardown),
        cmocka_unit_test_teardown(test_tickets_kept_until_the_job_ends, test_teardown),
        cmocka_unit_test_teardown(test_cancel_in_fallback_then_oncancel_fallback, test_teardown),
    };
    int failures = cmocka_run_group_tests(tests, group_setup, group_teardown);
    return failures == 0 ? 0 : 1;
}
