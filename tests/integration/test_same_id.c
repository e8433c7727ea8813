/*
 * test_same_id.c -- a runner restarted under the same id while its old process is only
 * stalled, not dead: the new process adopts the job the old one held (a claim with a
 * new fence), and when the old process comes back, its commit of the step it was
 * running is refused, although it carries the same runner id. Only the fence tells the
 * two processes apart; without it the old process's result would be taken, the job
 * would move on under both, and the steps after would run twice.
 *
 * What the user sees is asserted: the step starts the itest plugin recorded (with the
 * process of each), the job's chain_results (one per step, all from the new process),
 * its execution and its events. The teardown resumes and stops by PID every process
 * the test started, also when an assertion failed.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/iso8601.h"
#include "world.h"

static itest_fleet_world_t W; /* its fleet: both processes of the runner id */

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

static long long wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The starts of chain step `idx` of the job, at most 8. */
static int starts(const char *uuid, int idx, itest_side_line_t out[8])
{
    char key[96];
    snprintf(key, sizeof key, "%.39s/0/%d", uuid, idx);
    return itest_side_lines(W.side, "start", key, out, 8);
}

/* Waits until runner `id`'s lease (its score in tern:runners, server ms) is in the past
 * on this machine's clock (the same clock: redis-server runs here). */
static void wait_lease_expired(const char *id, unsigned timeout_ms)
{
    for (unsigned waited = 0; waited <= timeout_ms; waited += 20) {
        char *score = itest_redis_str(&W.redis, "ZSCORE tern:runners %s", id);
        long long expiry = score != NULL ? atoll(score) : 0;
        free(score);
        if (expiry > 0 && expiry < wall_ms())
            return;
        itest_pause_ms(20);
    }
    fail_msg("the lease of runner %s did not expire within %u ms", id, timeout_ms);
}

/* Waits until the log of runner `t` holds `needle` on a line of process `pid`. */
static void wait_log_of(const itest_ternd_t *t, long pid, const char *needle, unsigned timeout_ms)
{
    char pid_field[32];
    snprintf(pid_field, sizeof pid_field, "\"pid\":%ld,", pid);
    for (unsigned waited = 0; waited <= timeout_ms; waited += 10) {
        if (itest_ternd_log_has_both(t, pid_field, needle))
            return;
        itest_pause_ms(10);
    }
    fail_msg("process %ld of runner %s did not log \"%s\" within %u ms", pid, t->id, needle,
             timeout_ms);
}

static void test_stalled_process_cannot_commit_after_restart(void **state)
{
    (void)state;
    /* Step a outlasts the stall and the restart, so that the old process's timer ends
     * while the new process still runs the same step under the same runner id: its
     * commit then meets a job at the same cursor, owned by the same id. */
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"same-id\", \"queue\": \"same-id\", \"chain\": ["
                                    "{\"name\": \"a\", \"task\": \"itest.record\", \"args\": "
                                    "{\"file\": \"%s\", \"ms\": 2500}},"
                                    "{\"name\": \"b\", \"task\": \"itest.record\", \"args\": "
                                    "{\"file\": \"%s\", \"ms\": 300}},"
                                    "{\"name\": \"c\", \"task\": \"itest.record\", \"args\": "
                                    "{\"file\": \"%s\", \"ms\": 10}}]}",
                                    W.side, W.side, W.side));
    /* A 1 s lease renewed every 200 ms (the harness's defaults, written out here). */
    static const char *const flags[] = {"--concurrency",  "1",   "--lease-ms", "1000",
                                        "--heartbeat-ms", "200", NULL};
    itest_ternd_t *old = itest_fleet_start(&W.fleet, &W.redis, &W.dir, "same-id", "same-id", flags);
    pid_t old_pid = old->pid;
    char uuid[40];
    itest_job_create_ok(&W.client, "same-id", NULL, uuid);
    char key_a[96];
    snprintf(key_a, sizeof key_a, "%s/0/0", uuid);
    itest_side_wait(W.side, "start", key_a, 1, 10000);

    /* The old process hangs mid-step until its lease has expired. */
    assert_int_equal(kill(old_pid, SIGSTOP), 0);
    wait_lease_expired("same-id", 10000);

    /* A new process under the same id takes over its list's job (a claim, new fence)
     * and starts the interrupted step again. Its log is the same file as the old
     * one's, so its readiness is seen in the side channel: the second start of a. */
    itest_ternd_t *fresh =
        itest_fleet_start(&W.fleet, &W.redis, &W.dir, "same-id", "same-id", flags);
    pid_t new_pid = fresh->pid;
    itest_side_wait(W.side, "start", key_a, 2, 15000);
    itest_side_line_t a[8];
    assert_int_equal(starts(uuid, 0, a), 2);
    assert_int_equal(a[0].pid, old_pid);
    assert_int_equal(a[1].pid, new_pid);

    /* The old process comes back; its step's timer ends and it sends the commit, a
     * second before the new process's own ends. */
    assert_int_equal(kill(old_pid, SIGCONT), 0);

    json_t *job = itest_wait_finished(&W.client, uuid, 20000);
    if (job == NULL)
        fail_msg("job %s did not finish within 20 s (side channel %s, log %s)", uuid, W.side,
                 old->log);
    assert_string_equal(itest_execution(job), "succeeded");

    /* Each step started once by each process at most: a by both (the old one before
     * its stall, the new one after), b and c by the new one only. */
    itest_side_line_t b[8], c[8];
    int na = starts(uuid, 0, a), nb = starts(uuid, 1, b), nc = starts(uuid, 2, c);
    print_message("starts: a %d, b %d, c %d\n", na, nb, nc);
    assert_int_equal(na, 2);
    assert_int_equal(a[0].pid, old_pid);
    assert_int_equal(a[1].pid, new_pid);
    assert_int_equal(nb, 1);
    assert_int_equal(b[0].pid, new_pid);
    assert_int_equal(nc, 1);
    assert_int_equal(c[0].pid, new_pid);

    /* One result per step, and a's is the new process's: it started after the stall. */
    json_t *results = json_object_get(job, "chain_results");
    assert_int_equal(json_array_size(results), 3);
    const char *names[] = {"a", "b", "c"};
    for (size_t i = 0; i < 3; i++) {
        json_t *r = json_array_get(results, i);
        assert_string_equal(json_string_value(json_object_get(r, "name")), names[i]);
        assert_true(json_is_true(json_object_get(json_object_get(r, "result"), "recorded")));
    }
    uint64_t ra_started = 0;
    const char *iso = json_string_value(json_object_get(json_array_get(results, 0), "started_at"));
    assert_non_null(iso);
    assert_int_equal(iso8601_parse_ms(iso, &ra_started), 0);
    print_message("a: old start %lld, new start %lld, result's start %lld\n", a[0].time_ms,
                  a[1].time_ms, (long long)ra_started);
    /* Both clocks are this machine's wall clock; allow a tick of granularity. The two
     * starts are more than a lease apart, so the old one's result cannot pass. */
    assert_true((long long)ra_started >= a[1].time_ms - 10);

    /* The events: one succeeded step event per step, and the job ran on two claims
     * (fences) of the same runner id, the second one to the end. */
    json_t *events = itest_events(&W.client, uuid);
    size_t i;
    json_t *ev;
    int step_ok[3] = {0, 0, 0};
    json_array_foreach(events, i, ev)
    {
        const char *type = json_string_value(json_object_get(ev, "type"));
        const char *status = json_string_value(json_object_get(ev, "status"));
        json_int_t idx = json_integer_value(json_object_get(ev, "index"));
        if (type != NULL && strcmp(type, "step") == 0 && status != NULL &&
            strcmp(status, "succeeded") == 0 && idx >= 0 && idx < 3)
            step_ok[idx]++;
    }
    print_message("step events: a %d, b %d, c %d; running events %d\n", step_ok[0], step_ok[1],
                  step_ok[2], itest_count_events(events, "running", NULL));
    for (size_t k = 0; k < 3; k++)
        assert_int_equal(step_ok[k], 1);
    assert_int_equal(itest_count_events(events, "finished", NULL), 1);
    json_decref(events);
    json_decref(job);

    /* Nothing ran after the end: no process started a step again. */
    assert_int_equal(starts(uuid, 0, a) + starts(uuid, 1, b) + starts(uuid, 2, c), 4);
    /* The old process was told, and let the job be. */
    wait_log_of(old, old_pid, "another process runs under runner id same-id", 5000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stalled_process_cannot_commit_after_restart),
    };
    return cmocka_run_group_tests_name("same_id", tests, group_setup, group_teardown);
}
