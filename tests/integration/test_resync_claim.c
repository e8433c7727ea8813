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
 * it go only when the resync is over. What the user sees is asserted: the job
 * succeeds, its step started once, and no step was reported interrupted.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hold_proxy.h"

enum { SEEN_LRANGE, SEEN_TICK };

typedef struct world {
    itest_dir_t dir;
    itest_redis_t redis;
    itest_redis_t via; /* the same Redis, reached through the proxy */
    itest_client_t client;
    itest_fleet_t fleet;
    hold_proxy_t *proxy;
    char side[320];
} world_t;

static world_t W;

static int group_setup(void **state)
{
    (void)state;
    itest_dir_make(&W.dir);
    itest_redis_start(&W.redis, W.dir.path);
    itest_client_open(&W.client, &W.redis);
    /* An LRANGE command: a resync's read of the runner's list (scripts loaded name it
     * too, in their text); "in_flight": a heartbeat tick (its runner info). */
    static const char *const watch[] = {"*4\r\n$6\r\nLRANGE\r\n", "\"in_flight\"", NULL};
    W.proxy = hold_proxy_start(W.redis.port, watch);
    W.via = W.redis;
    snprintf(W.via.url, sizeof W.via.url, "redis://127.0.0.1:%d", hold_proxy_port(W.proxy));
    snprintf(W.side, sizeof W.side, "%s/side", W.dir.path);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (W.proxy != NULL)
        hold_proxy_hold_blocking(W.proxy, false);
    itest_fleet_stop(&W.fleet, 15000);
    hold_proxy_stop(W.proxy);
    itest_client_close(&W.client);
    itest_redis_stop(&W.redis, SIGTERM);
    itest_dir_remove(&W.dir);
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
        if (hold_proxy_seen(W.proxy, what) >= n)
            return;
        itest_pause_ms(10);
    }
    fail_msg("the proxy saw %u of %u commands (watch %u) within %u ms",
             hold_proxy_seen(W.proxy, what), n, what, timeout_ms);
}

static void test_resync_during_blocking_claim_claims_once(void **state)
{
    (void)state;
    /* `long` keeps the runner busy while the stage is set; `once` is the job whose
     * claim reply is held: its step is irreversible (not idempotent). */
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"long\", \"queue\": \"resync\", \"chain\": ["
                                    "{\"name\": \"a\", \"task\": \"itest.record\", \"args\": "
                                    "{\"file\": \"%s\", \"ms\": 1500}}]}",
                                    W.side));
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"once\", \"queue\": \"resync\", \"chain\": ["
                                    "{\"name\": \"a\", \"task\": \"itest.record\", \"idempotent\": "
                                    "false, \"args\": {\"file\": \"%s\", \"ms\": 300}}]}",
                                    W.side));
    static const char *const flags[] = {"--concurrency", "2", NULL};
    itest_ternd_t *t = itest_fleet_start(&W.fleet, &W.via, &W.dir, "rs", "resync", flags);

    char busy[40], once[40], key[96];
    itest_job_create_ok(&W.client, "long", NULL, busy);
    snprintf(key, sizeof key, "%s/0/0", busy);
    itest_side_wait(W.side, "start", key, 1, 10000);

    /* The runner blocks in BLMOVE for its second slot; the reply that will bring
     * `once` is held. */
    hold_proxy_hold_blocking(W.proxy, true);
    itest_job_create_ok(&W.client, "once", NULL, once);
    wait_in_runner_list("rs", once, 10000);
    unsigned lranges = hold_proxy_seen(W.proxy, SEEN_LRANGE);

    /* Another runner holds `busy` now: the runner's commit of it is refused, and the
     * runner resyncs to adopt whatever is still its own. */
    char *reply = itest_redis_str(&W.redis, "HSET tern:job:%s runner elsewhere", busy);
    free(reply);
    wait_log(t, "job no longer held by this runner", 10000);
    /* Two more heartbeats: the resync, if any, was asked for with the first one's
     * answer, and so was sent before the second one. */
    unsigned ticks = hold_proxy_seen(W.proxy, SEEN_TICK);
    wait_seen(SEEN_TICK, ticks + 2, 5000);
    snprintf(key, sizeof key, "%s/0/0", once);
    if (hold_proxy_seen(W.proxy, SEEN_LRANGE) > lranges) {
        /* The list was read while the claim's reply was held: let that read's own claim
         * start the step before the held reply comes in. */
        print_message("the list was read with a blocking claim's reply pending\n");
        itest_side_wait(W.side, "start", key, 1, 10000);
    }
    hold_proxy_hold_blocking(W.proxy, false);

    json_t *job = itest_wait_finished(&W.client, once, 15000);
    if (job == NULL)
        fail_msg("job %s did not finish within 15 s (log %s)", once, t->log);
    json_t *events = itest_events(&W.client, once);
    int interrupted = itest_count_events(events, "step_interrupted", NULL);
    int starts = itest_side_count_exact(W.side, "start", key);
    print_message("execution %s, starts %d, step_interrupted events %d\n", itest_execution(job),
                  starts, interrupted);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_int_equal(starts, 1);
    assert_int_equal(interrupted, 0);
    json_decref(events);
    json_decref(job);

    /* The resync still happens once no claim is in flight: `busy`, another runner's
     * now, leaves this runner's list. */
    for (unsigned waited = 0;; waited += 10) {
        if (itest_redis_int(&W.redis, "LPOS tern:r:rs:jobs %s", busy) < 0)
            break;
        if (waited > 10000)
            fail_msg("job %s is still in the list of runner rs after 10 s", busy);
        itest_pause_ms(10);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resync_during_blocking_claim_claims_once),
    };
    return cmocka_run_group_tests_name("resync_claim", tests, group_setup, group_teardown);
}
