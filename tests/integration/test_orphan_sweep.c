/*
 * test_orphan_sweep.c -- a job that sits in a live runner's own list with no claim is
 * adopted by the runner's periodic sweep (RESYNC_SWEEP_MS in engine/run/runner.c).
 * The sweep is a safety net: every way known for a job to sit there unclaimed (a lost
 * claim answer; a BLMOVE whose answer nobody reads, test_restart_claim) makes the
 * runner read its list by itself. Here the orphan is made by hand: a job
 * delayed an hour is taken out of the delayed set and put into the runner's list, as
 * a BLMOVE would leave it. What the user sees is asserted: the job runs and succeeds,
 * its step started once, within the sweep's period and a margin, and the runner's log
 * names it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "world.h"

static itest_world_t W;

static int group_setup(void **state)
{
    (void)state;
    /* At debug level the runner says when its start-up reads of its list are over. */
    static const char *const extra[] = {"--log-level", "debug", NULL};
    itest_world_start(&W, "sweeper", NULL, extra);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    itest_world_stop(&W, 15000);
    return 0;
}

static void test_orphan_adopted(void **state)
{
    (void)state;
    itest_workflow_put_ok(
        &W.client, itest_fmt("{\"name\": \"orphan\", \"chain\": [{\"name\": \"a\", \"task\": "
                             "\"itest.record\", \"args\": {\"file\": \"%s\", \"ms\": 1}}]}",
                             W.side));
    /* The orphan is made once the runner has read its list a second time after its
     * start (when a BLMOVE of an earlier process under its id has surely ended): that
     * read would adopt it, not the sweep. */
    for (unsigned waited = 0;
         !itest_ternd_log_has(&W.ternd, "BLMOVEs whose answer we could not read have ended");
         waited += 10) {
        if (waited > 10000)
            fail_msg("the runner did not read its list again within 10 s of its start");
        itest_pause_ms(10);
    }
    char uuid[40], msg[512];
    int rc = itest_job_create(&W.client, "orphan", NULL, NULL, clock_wall_ms() + 3600 * 1000, NULL,
                              uuid, msg, sizeof msg);
    if (rc != 0)
        fail_msg("create refused: %s", msg);
    assert_int_equal(itest_redis_int(&W.redis, "ZREM tern:delayed %s", uuid), 1);
    assert_int_equal(itest_redis_int(&W.redis, "LPUSH tern:r:sweeper:jobs %s", uuid), 1);
    json_t *job = itest_wait_finished_ok(&W.client, uuid, 25000);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_int_equal(itest_side_count(W.side, "start", uuid), 1);
    json_decref(job);
    assert_true(itest_ternd_log_has(&W.ternd, "found in our list with no claim"));
    assert_int_equal(itest_redis_int(&W.redis, "LLEN tern:r:sweeper:jobs"), 0);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_orphan_adopted),
    };
    return cmocka_run_group_tests_name("orphan_sweep", tests, group_setup, group_teardown);
}
