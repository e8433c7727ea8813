/*
 * test_restart_claim.c -- a runner started again under its id while a BLMOVE of the
 * process it replaces is still blocked in Redis claims the job that BLMOVE moves into
 * its list, within the BLMOVE's timeout and a margin of its start.
 *
 * Redis ends a blocked BLMOVE at its timeout or when it sees the connection close, not
 * when the process that sent it dies; it serves blocked clients oldest first. So after
 * a kill -9 and a quick restart, the dead process's BLMOVE can take the next job of the
 * queue and move it into the runner's own list, with its answer going to a connection
 * nobody reads; the new process has read its list already (test_provision.py's
 * test_fault_after_disks, then a provision on the same server, met it). Here the test
 * holds that BLMOVE itself, on a connection of its own that it never closes before the
 * job is moved: the runner then starts under the same id, reads its list, blocks behind
 * it, and a job is created on its queue. Redis hands the job to the test's BLMOVE (its
 * answer, the job's uuid, proves the interleaving happened); the runner must claim it
 * on its own. Its heartbeat is longer than the test, so its periodic sweep of its list
 * (RESYNC_SWEEP_MS in engine/run/runner.c) cannot be what claims it.
 *
 * What the user sees is asserted: the job succeeds within CLAIMED_WITHIN_MS of its
 * creation, its step started once, and nothing is left in the runner's list.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "base/clock.h"
#include "world.h"

/* The runner reads its list again once BLMOVEs it cannot see have surely ended: 2.5 s
 * after its store came up (BLOCK_MS and UNSEEN_MARGIN_MS in engine/run/runner.c). The
 * bound leaves room for a loaded machine and stays well below the sweep's 10 s. */
#define CLAIMED_WITHIN_MS 6000
/* The held BLMOVE's timeout, as a runner's (BLOCK_SECONDS). */
#define HELD_BLOCK_SECONDS "2"
/* Tries at setting the stage: ternd must start and block within the held BLMOVE's
 * timeout, which a loaded machine may not give the first time. */
#define ATTEMPTS 3

static itest_fleet_world_t W;

static int setup(void **state)
{
    (void)state;
    itest_fleet_world_start(&W);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    itest_fleet_stop(&W.fleet, 15000);
    itest_fleet_world_stop(&W, 15000);
    return 0;
}

/* True when CLIENT LIST shows a client named `name` blocked (flag b). */
static bool client_blocked(const char *name)
{
    char *list = itest_redis_str(&W.redis, "CLIENT LIST");
    bool blocked = false;
    char needle[160];
    snprintf(needle, sizeof needle, " name=%s ", name);
    for (char *line = list; line != NULL && *line != '\0';) {
        char *end = strchr(line, '\n');
        if (end != NULL)
            *end = '\0';
        if (strstr(line, needle) != NULL && strstr(line, " flags=b ") != NULL)
            blocked = true;
        line = end != NULL ? end + 1 : NULL;
    }
    free(list);
    return blocked;
}

/* Opens a connection, names it `name`, and leaves BLMOVE from `queue` into runner
 * `id`'s list blocked on it, unanswered: what Redis holds of a runner killed while it
 * waited for work. Fails the test unless Redis shows it blocked within 5 s. */
static redisContext *hold_blmove(const char *name, const char *queue, const char *id)
{
    struct timeval tv = {.tv_sec = 5};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", W.redis.port, tv);
    if (c == NULL || c->err)
        fail_msg("cannot connect to redis-server on port %d", W.redis.port);
    redisSetTimeout(c, tv);
    redisReply *reply = redisCommand(c, "CLIENT SETNAME %s", name);
    assert_non_null(reply);
    freeReplyObject(reply);
    char src[128], dst[128];
    snprintf(src, sizeof src, "tern:q:%s", queue);
    snprintf(dst, sizeof dst, "tern:r:%s:jobs", id);
    assert_int_equal(
        redisAppendCommand(c, "BLMOVE %s %s RIGHT LEFT %s", src, dst, HELD_BLOCK_SECONDS),
        REDIS_OK);
    int done = 0;
    while (!done)
        assert_int_equal(redisBufferWrite(c, &done), REDIS_OK);
    for (unsigned waited = 0; !client_blocked(name); waited += 10) {
        if (waited > 5000)
            fail_msg("the held BLMOVE did not block within 5 s");
        itest_pause_ms(10);
    }
    return c;
}

/* One try: holds the earlier process's BLMOVE, starts runner `id` on queue `id` behind
 * it, creates a job there. Returns true when the held BLMOVE took the job (its uuid
 * into `uuid`); false when it had timed out first (the runner was slow to start), the
 * job then claimed the ordinary way. */
static bool restart_behind_held_blmove(const char *id, char uuid[40], uint64_t *created_mono)
{
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"%s\", \"queue\": \"%s\", \"chain\": [{\"name\": "
                                    "\"a\", \"task\": \"itest.record\", \"args\": {\"file\": "
                                    "\"%s\", \"ms\": 1}}]}",
                                    id, id, W.side));
    char held_name[96], claimer_name[160];
    snprintf(held_name, sizeof held_name, "%s-earlier-process", id);
    snprintf(claimer_name, sizeof claimer_name, "tern-%s-claim-%s", id, id);
    redisContext *held = hold_blmove(held_name, id, id);

    /* A heartbeat longer than the test: no sweep, no periodic tick. */
    static const char *const flags[] = {"--heartbeat-ms", "60000", "--lease-ms", "120000", NULL};
    itest_fleet_start(&W.fleet, &W.redis, &W.dir, id, id, flags);
    /* The runner blocks in its BLMOVE once its start-up read of its list is answered. */
    for (unsigned waited = 0; !client_blocked(claimer_name); waited += 10) {
        if (waited > 10000)
            fail_msg("runner %s did not block in BLMOVE within 10 s", id);
        itest_pause_ms(10);
    }
    itest_job_create_ok(&W.client, id, NULL, uuid);
    *created_mono = clock_mono_ms();

    redisReply *reply = NULL;
    if (redisGetReply(held, (void **)&reply) != REDIS_OK || reply == NULL)
        fail_msg("no answer to the held BLMOVE");
    bool took = reply->type == REDIS_REPLY_STRING && strcmp(reply->str, uuid) == 0;
    if (!took && reply->type == REDIS_REPLY_STRING)
        fail_msg("the held BLMOVE took %s, not the job created (%s)", reply->str, uuid);
    freeReplyObject(reply);
    redisFree(held);
    if (!took)
        print_message("the held BLMOVE timed out before the job came (the runner was slow to "
                      "start); trying again\n");
    return took;
}

static void test_job_moved_by_earlier_blmove_is_claimed(void **state)
{
    (void)state;
    char uuid[40] = "", id[32] = "";
    uint64_t created_mono = 0;
    bool staged = false;
    for (int i = 1; i <= ATTEMPTS && !staged; i++) {
        snprintf(id, sizeof id, "restarted-%d", i);
        staged = restart_behind_held_blmove(id, uuid, &created_mono);
        if (!staged) {
            json_t *job = itest_wait_finished_ok(&W.client, uuid, 15000);
            json_decref(job);
        }
    }
    if (!staged)
        fail_msg("the stage was not set in %d tries: the runner never started within the held "
                 "BLMOVE's timeout",
                 ATTEMPTS);
    /* The held BLMOVE moved the job into the runner's list; only the test read its
     * answer. */
    assert_true(itest_redis_int(&W.redis, "LPOS tern:r:%s:jobs %s", id, uuid) >= 0);

    json_t *job = itest_wait_finished_ok(&W.client, uuid, CLAIMED_WITHIN_MS);
    uint64_t took_ms = clock_mono_ms() - created_mono;
    print_message("claimed and finished %llu ms after its creation\n", (unsigned long long)took_ms);
    assert_string_equal(itest_execution(job), "succeeded");
    json_decref(job);
    assert_int_equal(itest_side_count(W.side, "start", uuid), 1);
    assert_int_equal(itest_redis_int(&W.redis, "LLEN tern:r:%s:jobs", id), 0);
    itest_ternd_t *t = &W.fleet.runners[W.fleet.n - 1];
    assert_true(itest_ternd_log_has(t, "once BLMOVEs whose answer we could not read had ended"));
    assert_false(itest_ternd_log_has(t, "found in our list with no claim"));
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_job_moved_by_earlier_blmove_is_claimed, setup,
                                        teardown),
    };
    return cmocka_run_group_tests_name("restart_claim", tests, NULL, NULL);
}
