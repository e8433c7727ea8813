/*
 * test_resync_claim.c -- a runner that reads its own list to adopt what it left there
 * (a resync) while the reply to one of its blocking claims (BLMOVE) is still on its
 * way must not claim the moved job a second time. The two claims would give the job
 * two fences in one process: the later one voids what was done under the earlier one
 * (an irreversible step in flight fails the job with StepInterrupted; a commit sent
 * with the earlier fence is refused as another process's takeover), although nobody
 * but this process ever ran the job.
 *
 * The ordering is forced, not hoped for: ternd reaches Redis through hold_proxy, which
 * holds the reply to the runner's BLMOVE while the test makes the runner resync (a
 * commit of another job refused because another runner holds that job now), and lets
 * it go only when the resync is over; for the commit, it also holds the answers of the
 * runner's other connections until the commit has run in Redis. What the user sees is
 * asserted: the job succeeds, its step started once, no step was reported
 * interrupted, and nothing is left in the runner's list.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hold_proxy.h"
#include "world.h"

enum { SEEN_LRANGE, SEEN_TICK, SEEN_FINISH };

static itest_fleet_world_t W;
static itest_redis_t via; /* the same Redis, reached through the proxy */
static hold_proxy_t *proxy;

static int group_setup(void **state)
{
    (void)state;
    itest_fleet_world_start(&W);
    /* An LRANGE command: a resync's read of the runner's list (scripts loaded name it
     * too, in their text); "in_flight": a heartbeat tick (its runner info); "finish": a
     * step commit that ends a job (its action). */
    static const char *const watch[] = {"*4\r\n$6\r\nLRANGE\r\n", "\"in_flight\"",
                                        "$6\r\nfinish\r\n", NULL};
    proxy = hold_proxy_start(W.redis.port, watch);
    via = W.redis;
    snprintf(via.url, sizeof via.url, "redis://127.0.0.1:%d", hold_proxy_port(proxy));
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (proxy != NULL) {
        hold_proxy_hold_blocking(proxy, false);
        hold_proxy_hold_others(proxy, false);
    }
    itest_fleet_stop(&W.fleet, 15000);
    hold_proxy_stop(proxy);
    itest_fleet_world_stop(&W, 15000);
    return 0;
}

/* Waits until `uuid` is in runner `id`'s list (moved there by its BLMOVE). (LPOS
 * answers nil, read as -1, for a job not in the list.) */
static void wait_in_runner_list(const char *id, const char *uuid, unsigned timeout_ms)
{
    for (unsigned waited = 0; waited <= timeout_ms; waited += 10) {
        if (itest_redis_int(&W.redis, "LPOS tern:r:%s:jobs %s", id, uuid) >= 0)
            return;
        itest_pause_ms(10);
    }
    fail_msg("job %s did not reach the list of runner %s within %u ms", uuid, id, timeout_ms);
}

static void wait_log(const itest_ternd_t *t, const char *needle, unsigned timeout_ms)
{
    for (unsigned waited = 0; waited <= timeout_ms; waited += 10) {
        if (itest_ternd_log_has(t, needle))
            return;
        itest_pause_ms(10);
    }
    fail_msg("runner %s did not log \"%s\" within %u ms (log %s)", t->id, needle, timeout_ms,
             t->log);
}

static void wait_seen(unsigned what, unsigned n, unsigned timeout_ms)
{
    for (unsigned waited = 0; waited <= timeout_ms; waited += 10) {
        if (hold_proxy_seen(proxy, what) >= n)
            return;
        itest_pause_ms(10);
    }
    fail_msg("the proxy saw %u of %u commands (watch %u) within %u ms",
             hold_proxy_seen(proxy, what), n, what, timeout_ms);
}

/* Puts workflow `name` of queue `queue`: one itest.record step of `ms`, idempotent or
 * not. */
static void put_workflow(const char *name, const char *queue, bool idempotent, int ms)
{
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"%s\", \"queue\": \"%s\", \"chain\": ["
                                    "{\"name\": \"a\", \"task\": \"itest.record\", "
                                    "\"idempotent\": %s, \"args\": {\"file\": \"%s\", "
                                    "\"ms\": %d}}]}",
                                    name, queue, idempotent ? "true" : "false", W.side, ms));
}

/* Sets the stage: runner `id` (2 slots, serving queue `id`) runs a job that keeps it
 * busy and blocks in BLMOVE for its second slot; the reply that brings it job `once`
 * (one step of `ms`, idempotent or not) is held; then another runner takes the busy
 * job over, so the runner's commit of it is refused and it resyncs. Returns true when
 * it read its list meanwhile, the claim's reply still held; the step of `once` has
 * started then, under that read's own claim. The held reply is still held on return. */
static bool stage(const char *id, bool idempotent, int ms, itest_ternd_t **t, char once[40])
{
    hold_proxy_hold_blocking(proxy, false);
    hold_proxy_hold_others(proxy, false);
    char busy_wf[64], once_wf[64];
    snprintf(busy_wf, sizeof busy_wf, "%s-busy", id);
    snprintf(once_wf, sizeof once_wf, "%s-once", id);
    put_workflow(busy_wf, id, true, 1500);
    put_workflow(once_wf, id, idempotent, ms);
    static const char *const flags[] = {"--concurrency", "2", NULL};
    *t = itest_fleet_start(&W.fleet, &via, &W.dir, id, id, flags);

    char busy[40], key[96];
    itest_job_create_ok(&W.client, busy_wf, NULL, busy);
    snprintf(key, sizeof key, "%s/0/0", busy);
    itest_side_wait(W.side, "start", key, 1, 10000);

    hold_proxy_hold_blocking(proxy, true);
    itest_job_create_ok(&W.client, once_wf, NULL, once);
    wait_in_runner_list(id, once, 10000);
    unsigned lranges = hold_proxy_seen(proxy, SEEN_LRANGE);

    /* Another runner holds `busy` now: the runner's commit of it is refused, and the
     * runner resyncs to adopt whatever is still its own. */
    char *reply = itest_redis_str(&W.redis, "HSET tern:job:%s runner elsewhere", busy);
    free(reply);
    wait_log(*t, "job no longer held by this runner", 10000);
    /* Two more heartbeats: the resync, if any, was asked for with the first one's
     * answer, and so was sent before the second one. */
    unsigned ticks = hold_proxy_seen(proxy, SEEN_TICK);
    wait_seen(SEEN_TICK, ticks + 2, 5000);
    if (hold_proxy_seen(proxy, SEEN_LRANGE) == lranges)
        return false;
    /* The list was read while the claim's reply was held: that read's own claim starts
     * the step before the held reply comes in. */
    print_message("the list was read with a blocking claim's reply pending\n");
    snprintf(key, sizeof key, "%s/0/0", once);
    itest_side_wait(W.side, "start", key, 1, 10000);
    return true;
}

/* Asserts that job `uuid` succeeded within `timeout_ms`, its step started once, and
 * no step of it was reported interrupted; then that the resync happened anyway once
 * no claim was in flight: the job another runner took over left runner `id`'s list. */
static void assert_ran_once(const itest_ternd_t *t, const char *id, const char *uuid,
                            unsigned timeout_ms)
{
    json_t *job = itest_wait_finished(&W.client, uuid, timeout_ms);
    if (job == NULL)
        fail_msg("job %s did not finish within %u ms%s (log %s)", uuid, timeout_ms,
                 itest_ternd_log_has(t, "another process runs under runner id")
                     ? "; its runner gave it up to another process under its id, and there "
                       "is none"
                     : "",
                 t->log);
    json_t *events = itest_events(&W.client, uuid);
    char key[96];
    snprintf(key, sizeof key, "%s/0/0", uuid);
    int interrupted = itest_count_events(events, "step_interrupted", NULL);
    int starts = itest_side_count_exact(W.side, "start", key);
    print_message("execution %s, starts %d, step_interrupted events %d\n", itest_execution(job),
                  starts, interrupted);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_int_equal(starts, 1);
    assert_int_equal(interrupted, 0);
    json_decref(events);
    json_decref(job);

    for (unsigned waited = 0;; waited += 10) {
        if (itest_redis_int(&W.redis, "LLEN tern:r:%s:jobs", id) == 0)
            break;
        if (waited > 10000)
            fail_msg("the list of runner %s still holds jobs after 10 s", id);
        itest_pause_ms(10);
    }
}

/* The held claim comes in after the read's claim began an irreversible step. */
static void test_irreversible_step_not_interrupted(void **state)
{
    (void)state;
    itest_ternd_t *t;
    char once[40];
    stage("rs1", false, 300, &t, once);
    hold_proxy_hold_blocking(proxy, false);
    assert_ran_once(t, "rs1", once, 15000);
    itest_fleet_stop(&W.fleet, 15000);
}

/* The held claim runs in Redis, then the step's commit does, before the claim's answer
 * is read: the commit carries the fence the runner knows then. */
static void test_commit_not_refused_as_takeover(void **state)
{
    (void)state;
    itest_ternd_t *t;
    char once[40];
    if (stage("rs2", true, 1000, &t, once)) {
        unsigned commits = hold_proxy_seen(proxy, SEEN_FINISH);
        hold_proxy_hold_others(proxy, true);
        hold_proxy_hold_blocking(proxy, false);
        wait_seen(SEEN_FINISH, commits + 1, 5000);
        hold_proxy_hold_others(proxy, false);
    } else {
        hold_proxy_hold_blocking(proxy, false);
    }
    assert_ran_once(t, "rs2", once, 10000);
    itest_fleet_stop(&W.fleet, 15000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_irreversible_step_not_interrupted),
        cmocka_unit_test(test_commit_not_refused_as_takeover),
    };
    return cmocka_run_group_tests_name("resync_claim", tests, group_setup, group_teardown);
}
