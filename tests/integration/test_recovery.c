/*
 * test_recovery.c -- what survives what, on real processes: a runner killed with
 * SIGKILL mid-job (its job finishes on another runner, finished steps never run
 * again), an irreversible step interrupted the same way (the job fails with
 * StepInterrupted instead of running it twice, and an operator retry runs it), Redis
 * killed and restarted under 30 jobs in flight, a runner stopped with SIGTERM (it
 * finishes its step and hands the job back), and isolated steps that crash, hang or
 * report twice without taking the runner down.
 *
 * Also: the helper process of an isolated step dies with its runner (else it would
 * go on working while the step runs again elsewhere), and a runner restarted at once
 * under the same --runner-id keeps the same promises as a takeover by another.
 *
 * The group starts one redis-server and the client; each test starts the runners it
 * needs (which ones, and how many, is what each scenario is about) and serves a queue
 * of its own, so a job left over by a failed test cannot run on a later test's runner.
 * Every wait is bounded and waits on the event itself: a job's events, a side-channel
 * line, a log line, a process exit.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "events/events.h"
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
    itest_fleet_world_stop(&W, 10000);
    return 0;
}

/* Stops, by PID, the runners a test left running, and brings Redis back if a test
 * failed while it was down (a failed assertion skips the test's own clean-up). */
static int test_teardown(void **state)
{
    (void)state;
    if (W.redis.pid <= 0) {
        itest_redis_restart(&W.redis);
        itest_client_wait_state(&W.client, true, 15000);
    }
    itest_fleet_stop(&W.fleet, 10000);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------ */

static itest_ternd_t *start_runner(const char *id, const char *queue)
{
    return itest_fleet_start(&W.fleet, &W.redis, &W.dir, id, queue, NULL);
}

static itest_ternd_t *runner_by_id(const char *id)
{
    for (size_t i = 0; i < W.fleet.n; i++)
        if (strcmp(W.fleet.runners[i].id, id) == 0)
            return &W.fleet.runners[i];
    return NULL;
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

/* The highest chain index of `uuid` started within the first `bytes` of the side
 * channel, or -1. */
static int last_started_within(const char *side, long bytes, const char *uuid)
{
    FILE *f = fopen(side, "r");
    if (f == NULL)
        return -1;
    char line[1024], what[32], k[512];
    int last = -1;
    size_t ulen = strlen(uuid);
    while (ftell(f) < bytes && fgets(line, sizeof line, f) != NULL) {
        int idx;
        if (sscanf(line, "%31s %511s", what, k) == 2 && strcmp(what, "start") == 0 &&
            strncmp(k, uuid, ulen) == 0 && sscanf(k + ulen, "/0/%d", &idx) == 1 && idx > last)
            last = idx;
    }
    fclose(f);
    return last;
}

/* Waits until the side channel holds at least `n` start lines with `prefix`. The
 * plugin writes a line when a task starts, so this waits on that start itself. */
static void wait_side(const char *side, const char *prefix, int n, unsigned timeout_ms)
{
    itest_side_wait(side, "start", prefix, n, timeout_ms);
}

/* The `nth` event of a job with `type` and, when given, `status` and chain `index`;
 * fails the test after timeout_ms. */
static json_t *wait_match(const char *uuid, const char *type, const char *status, long long index,
                          int nth, unsigned timeout_ms)
{
    json_t *ev = itest_wait_event_nth(&W.client, uuid, type, status, index, nth, timeout_ms);
    if (ev == NULL)
        fail_msg("job %s: no event %s%s%s (index %lld, occurrence %d) within %u ms", uuid, type,
                 status ? "/" : "", status ? status : "", index, nth, timeout_ms);
    return ev;
}

/* A chain of `n` itest.record steps of `ms` on `queue`; step `irreversible` (or -1)
 * is marked "idempotent": false. */
static void put_records(const char *name, const char *queue, int n, int ms, const char *side,
                        int irreversible)
{
    char steps[8192] = "";
    for (int i = 0; i < n; i++)
        snprintf(steps + strlen(steps), sizeof steps - strlen(steps),
                 "%s{\"name\": \"s%d\", \"task\": \"itest.record\", %s"
                 "\"args\": {\"file\": \"%s\", \"ms\": %d}}",
                 i ? "," : "", i, i == irreversible ? "\"idempotent\": false, " : "", side, ms);
    put(itest_fmt("{\"name\": \"%s\", \"queue\": \"%s\", \"chain\": [%s]}", name, queue, steps));
}

/* ---- 1. SIGKILL of a runner mid-job ------------------------------------------- */

static void test_killed_runner_job_finishes_elsewhere(void **state)
{
    (void)state;
    char side[320];
    itest_fleet_world_side_path(&W, side, sizeof side, "kill");
    put_records("rec-kill", "rec-kill", 10, 150, side, -1);
    start_runner("kill-a", "rec-kill");
    start_runner("kill-b", "rec-kill");
    char uuid[40];
    create("rec-kill", NULL, uuid);

    json_t *ev = wait_match(uuid, "step", "succeeded", 3, 1, 10000);
    json_decref(ev);
    json_t *job = itest_job_get(&W.client, uuid);
    char holder[64];
    snprintf(holder, sizeof holder, "%s", itest_str_of(job, "runner_id"));
    json_decref(job);
    itest_ternd_t *victim = runner_by_id(holder);
    if (victim == NULL)
        fail_msg("job %s is held by \"%s\", not by a runner of this test", uuid, holder);
    const char *survivor = strcmp(holder, "kill-a") == 0 ? "kill-b" : "kill-a";
    assert_int_equal(itest_ternd_signal(victim, SIGKILL, 5000), 128 + SIGKILL);

    /* Lease 1 s, heartbeat 200 ms: the survivor re-queues the job within ~1.2 s. */
    job = finished(uuid, 20000);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_int_equal(json_array_size(json_object_get(job, "chain_results")), 10);
    assert_true(json_integer_value(json_object_get(job, "retried")) >= 1);

    /* Where the job went: re-queued as `retried` once the victim's lease expired, then
     * run on the survivor. The step interrupted is the one after the last step that
     * succeeded before the `retried` event. */
    json_t *events = itest_events(&W.client, uuid);
    size_t i;
    json_t *e;
    int done_before = 0, retried_events = 0;
    const char *last_runner = "";
    json_array_foreach(events, i, e)
    {
        const char *type = itest_str_of(e, "type");
        if (strcmp(type, "retried") == 0) {
            retried_events++;
            assert_string_equal(itest_str_of(e, "runner"), holder);
        } else if (strcmp(type, "step") == 0 && retried_events == 0 &&
                   strcmp(itest_str_of(e, "status"), "succeeded") == 0) {
            done_before++;
        } else if (strcmp(type, "running") == 0) {
            last_runner = itest_str_of(e, "runner");
        }
    }
    assert_true(retried_events >= 1);
    assert_string_equal(last_runner, survivor);
    print_message("steps finished before the kill: %d\n", done_before);
    assert_true(done_before >= 4); /* step 3 had succeeded before the kill */
    assert_true(done_before < 10); /* the kill was mid-job */
    for (int s = 0; s < 10; s++) {
        int n = itest_side_starts(side, uuid, 0, s);
        if (s == done_before) {
            /* Interrupted: at most once on each runner. */
            assert_in_range(n, 1, 2);
        } else if (n != 1) {
            fail_msg("step %d started %d times", s, n);
        }
    }
    json_decref(events);
    json_decref(job);
}

/* ---- 1b. an isolated step's helper dies with its runner ------------------------- */

/* The pid of the isolated-task helper whose parent is `parent`, or 0. */
static pid_t helper_of(pid_t parent)
{
    DIR *d = opendir("/proc");
    pid_t found = 0;
    struct dirent *de;
    while (d != NULL && found == 0 && (de = readdir(d)) != NULL) {
        pid_t pid = (pid_t)atoi(de->d_name);
        pid_t ppid = 0;
        if (pid <= 0 || itest_proc_state(pid, &ppid) == '\0' || ppid != parent)
            continue;
        char path[64], cmd[256] = "";
        snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        size_t n = fread(cmd, 1, sizeof cmd - 1, f);
        fclose(f);
        /* Arguments are separated by NULs: look at the second one. */
        size_t first = strnlen(cmd, n);
        if (first + 1 < n && strcmp(cmd + first + 1, "--task-helper") == 0)
            found = pid;
    }
    if (d != NULL)
        closedir(d);
    return found;
}

static void test_killed_runner_takes_its_helper_along(void **state)
{
    (void)state;
    char side[320];
    itest_fleet_world_side_path(&W, side, sizeof side, "helper");
    put(itest_fmt("{\"name\": \"rec-helper\", \"queue\": \"rec-helper\", \"chain\": ["
                  "{\"name\": \"long\", \"task\": \"itest.record\", \"isolate\": true, "
                  "\"args\": {\"file\": \"%s\", \"ms\": 3000}}]}",
                  side));
    start_runner("helper-a", "rec-helper");
    start_runner("helper-b", "rec-helper");
    char uuid[40];
    create("rec-helper", NULL, uuid);
    char key[96];
    snprintf(key, sizeof key, "%s/0/0", uuid);
    wait_side(side, key, 1, 10000);
    json_t *job = itest_job_get(&W.client, uuid);
    itest_ternd_t *victim = runner_by_id(itest_str_of(job, "runner_id"));
    json_decref(job);
    assert_non_null(victim);
    pid_t helper = helper_of(victim->pid);
    if (helper == 0)
        fail_msg("no helper process under runner %s (pid %d)", victim->id, (int)victim->pid);
    assert_int_equal(itest_ternd_signal(victim, SIGKILL, 5000), 128 + SIGKILL);

    /* The job is re-queued and its step runs again on the survivor: the first attempt
     * must not go on meanwhile (it would run for 3 s; the kernel ends it at once). */
    char st = 'R';
    for (unsigned waited = 0; waited < 1000; waited += 10) {
        st = itest_proc_state(helper, NULL);
        if (st == '\0' || st == 'Z')
            break;
        itest_pause_ms(10);
    }
    if (st != '\0' && st != 'Z')
        fail_msg("helper %d of the killed runner still runs (state %c)", (int)helper, st);
    job = finished(uuid, 20000);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_int_equal(itest_side_starts(side, uuid, 0, 0), 2);
    json_decref(job);
}

/* ---- 2. an irreversible step interrupted -------------------------------------- */

static void test_interrupted_irreversible_step_fails_then_retry(void **state)
{
    (void)state;
    char side[320];
    itest_fleet_world_side_path(&W, side, sizeof side, "irrev");
    put(itest_fmt("{\"name\": \"rec-irrev\", \"queue\": \"rec-irrev\", \"chain\": ["
                  "{\"name\": \"before\", \"task\": \"itest.record\", \"args\": {\"file\": "
                  "\"%s\", \"ms\": 10}},"
                  "{\"name\": \"switch\", \"task\": \"itest.record\", \"idempotent\": false, "
                  "\"args\": {\"file\": \"%s\", \"ms\": 1500}},"
                  "{\"name\": \"after\", \"task\": \"itest.record\", \"args\": {\"file\": "
                  "\"%s\", \"ms\": 10}}]}",
                  side, side, side));
    start_runner("irrev-a", "rec-irrev");
    start_runner("irrev-b", "rec-irrev");
    char uuid[40];
    create("rec-irrev", NULL, uuid);

    /* Kill while the irreversible step runs: it has started (its side-channel line). */
    char key[96];
    snprintf(key, sizeof key, "%s/0/1", uuid);
    wait_side(side, key, 1, 10000);
    json_t *job = itest_job_get(&W.client, uuid);
    itest_ternd_t *victim = runner_by_id(itest_str_of(job, "runner_id"));
    json_decref(job);
    assert_non_null(victim);
    assert_int_equal(itest_ternd_signal(victim, SIGKILL, 5000), 128 + SIGKILL);

    job = finished(uuid, 20000);
    assert_string_equal(itest_execution(job), "failed");
    assert_string_equal(itest_error_code_of(job), "StepInterrupted");
    assert_int_equal(json_array_size(json_object_get(job, "chain_results")), 1);
    assert_int_equal(itest_side_starts(side, uuid, 0, 1), 1);
    assert_int_equal(itest_side_starts(side, uuid, 0, 2), 0);
    json_decref(job);
    json_t *ev = wait_match(uuid, "step_interrupted", NULL, -1, 1, 1000);
    json_decref(ev);

    /* The operator decides the step may run again: retry from the failed step. */
    char msg[1024];
    if (itest_job_redrive(&W.client, uuid, NULL, NULL, msg, sizeof msg) != 0)
        fail_msg("retry refused: %s", msg);
    ev = wait_match(uuid, "finished", NULL, -1, 2, 20000);
    json_decref(ev);
    job = itest_job_get(&W.client, uuid);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_int_equal(json_array_size(json_object_get(job, "chain_results")), 3);
    assert_int_equal(itest_side_starts(side, uuid, 0, 0), 1);
    assert_int_equal(itest_side_starts(side, uuid, 0, 1), 2);
    assert_int_equal(itest_side_starts(side, uuid, 0, 2), 1);
    json_decref(job);
}

/* ---- 2b. a runner restarted under the same id ----------------------------------- */

/* Runners often come back under a fixed --runner-id (a service manager restarting
 * ternd at once): the restarted runner adopts the jobs it held before its lease even
 * expires. The same rules hold as for a takeover: finished steps are not run again,
 * an interrupted irreversible step is not run again either. */
static void test_runner_restarted_under_same_id(void **state)
{
    (void)state;
    char side[320];
    itest_fleet_world_side_path(&W, side, sizeof side, "same");
    put_records("rec-same", "rec-same", 6, 150, side, -1);
    put(itest_fmt("{\"name\": \"rec-same-irrev\", \"queue\": \"rec-same\", \"chain\": ["
                  "{\"name\": \"before\", \"task\": \"itest.record\", \"args\": {\"file\": "
                  "\"%s\", \"ms\": 10}},"
                  "{\"name\": \"switch\", \"task\": \"itest.record\", \"idempotent\": false, "
                  "\"args\": {\"file\": \"%s\", \"ms\": 2000}}]}",
                  side, side));
    itest_ternd_t *r = start_runner("same-a", "rec-same");
    char plain[40], irrev[40];
    create("rec-same", NULL, plain);
    create("rec-same-irrev", NULL, irrev);

    /* Kill while the irreversible step runs and after two steps of the other job. */
    char key[96];
    snprintf(key, sizeof key, "%s/0/1", irrev);
    wait_side(side, key, 1, 10000);
    json_decref(wait_match(plain, "step", "succeeded", 1, 1, 10000));
    assert_int_equal(itest_ternd_signal(r, SIGKILL, 5000), 128 + SIGKILL);
    const char *extra[] = {"--queues", "rec-same", NULL};
    itest_ternd_start(r, &W.redis, &W.dir, "same-a", extra);

    json_t *job = finished(irrev, 20000);
    assert_string_equal(itest_execution(job), "failed");
    assert_string_equal(itest_error_code_of(job), "StepInterrupted");
    assert_int_equal(itest_side_starts(side, irrev, 0, 1), 1);
    json_decref(job);

    job = finished(plain, 20000);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_int_equal(json_array_size(json_object_get(job, "chain_results")), 6);
    json_decref(job);
    /* Steps that succeeded before the job was claimed again ran once; the one that
     * was interrupted, at most twice. */
    json_t *events = itest_events(&W.client, plain);
    size_t i;
    json_t *e;
    int claims = 0, done_before = 0;
    json_array_foreach(events, i, e)
    {
        const char *type = itest_str_of(e, "type");
        if (strcmp(type, "running") == 0)
            claims++;
        else if (strcmp(type, "step") == 0 && claims == 1 &&
                 strcmp(itest_str_of(e, "status"), "succeeded") == 0)
            done_before++;
    }
    json_decref(events);
    assert_int_equal(claims, 2);
    assert_true(done_before >= 2);
    for (int s = 0; s < 6; s++) {
        int n = itest_side_starts(side, plain, 0, s);
        if (s == done_before)
            assert_in_range(n, 1, 2);
        else if (n != 1)
            fail_msg("step %d started %d times", s, n);
    }

    /* The operator's retry runs the irreversible step on the restarted runner. */
    char msg[1024];
    if (itest_job_redrive(&W.client, irrev, NULL, NULL, msg, sizeof msg) != 0)
        fail_msg("retry refused: %s", msg);
    json_decref(wait_match(irrev, "finished", NULL, -1, 2, 20000));
    job = itest_job_get(&W.client, irrev);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_int_equal(itest_side_starts(side, irrev, 0, 1), 2);
    json_decref(job);
}

/* ---- 3. Redis killed and restarted mid-run ------------------------------------ */

#define REDIS_JOBS  30
#define REDIS_STEPS 5

static void test_redis_restart_mid_run(void **state)
{
    (void)state;
    char side[320];
    itest_fleet_world_side_path(&W, side, sizeof side, "redis");
    put_records("rec-redis", "rec-redis", REDIS_STEPS, 100, side, -1);
    itest_ternd_t *r = start_runner("redis-a", "rec-redis");
    static char uuids[REDIS_JOBS][40];
    for (int i = 0; i < REDIS_JOBS; i++)
        create("rec-redis", itest_fmt("{\"n\": %d}", i), uuids[i]);

    /* Some steps have run everywhere (about two per job) when Redis dies. */
    wait_side(side, "", REDIS_JOBS * 2, 15000);
    /* What had started before the kill: lines past this size started later. */
    long before_kill = itest_file_size(side);
    itest_redis_stop(&W.redis, SIGKILL);
    itest_client_wait_state(&W.client, false, 5000);
    for (unsigned waited = 0; !itest_ternd_log_has(r, "Redis is unreachable"); waited += 10) {
        if (waited > 5000)
            fail_msg("the runner did not notice that Redis died");
        itest_pause_ms(10);
    }
    /* The outage itself: steps in flight end meanwhile and their commits must wait. */
    itest_pause_ms(1000);
    itest_redis_restart(&W.redis);
    itest_client_wait_state(&W.client, true, 15000);
    /* New work is claimed too: the runner's blocking claim was re-armed. */
    char late[40];
    create("rec-redis", "{\"n\": \"late\"}", late);

    int twice = 0;
    for (int i = 0; i < REDIS_JOBS; i++) {
        json_t *job = finished(uuids[i], 30000);
        if (strcmp(itest_execution(job), "succeeded") != 0)
            fail_msg("job %d (%s) ended %s", i, uuids[i], itest_execution(job));
        assert_int_equal(json_array_size(json_object_get(job, "chain_results")), REDIS_STEPS);
        /* Only the step in flight when Redis died may have run again: the last one
         * started before the kill (or the next, started in the instant between the
         * size snapshot and the kill, its predecessor then being committed). */
        int in_flight = last_started_within(side, before_kill, uuids[i]);
        for (int s = 0; s < REDIS_STEPS; s++) {
            int n = itest_side_starts(side, uuids[i], 0, s);
            bool may_repeat = s == in_flight || s == in_flight + 1;
            if (n < 1 || n > (may_repeat ? 2 : 1))
                fail_msg("job %d step %d started %d times (step %d was in flight)", i, s, n,
                         in_flight);
            twice += n == 2;
        }
        json_decref(job);
    }
    print_message("steps started twice: %d\n", twice);
    json_t *job = finished(late, 30000);
    assert_string_equal(itest_execution(job), "succeeded");
    for (int s = 0; s < REDIS_STEPS; s++)
        assert_int_equal(itest_side_starts(side, late, 0, s), 1);
    json_decref(job);
    assert_true(kill(r->pid, 0) == 0);
}

/* ---- 4. SIGTERM: finish the step, hand the job back --------------------------- */

/* A runner holding a job of 6 steps of 300 ms gets SIGTERM while step 2 runs; a
 * second runner is started before the signal (`second_first`: it must not take the
 * job while the first still finishes its step) or after the first has exited. */
static void sigterm_scenario(const char *tag, bool second_first)
{
    char side[320], queue[64], name_a[64], name_b[64];
    itest_fleet_world_side_path(&W, side, sizeof side, tag);
    snprintf(queue, sizeof queue, "rec-%s", tag);
    snprintf(name_a, sizeof name_a, "%s-a", tag);
    snprintf(name_b, sizeof name_b, "%s-b", tag);
    put_records(queue, queue, 6, 300, side, -1);
    itest_ternd_t *a = start_runner(name_a, queue);
    char uuid[40];
    create(queue, NULL, uuid);

    /* Mid-step: step 2 has started on the first runner (the only one up so far). */
    char key[96];
    snprintf(key, sizeof key, "%s/0/2", uuid);
    wait_side(side, key, 1, 10000);
    if (second_first)
        start_runner(name_b, queue);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(itest_ternd_signal(a, SIGTERM, 8000), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long long ms = (t1.tv_sec - t0.tv_sec) * 1000LL + (t1.tv_nsec - t0.tv_nsec) / 1000000LL;
    print_message("%s exited %lld ms after SIGTERM\n", name_a, ms);
    assert_true(ms < 5000); /* within the grace period */
    if (!second_first)
        start_runner(name_b, queue);

    json_t *job = finished(uuid, 20000);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_int_equal(json_array_size(json_object_get(job, "chain_results")), 6);
    assert_int_equal(json_integer_value(json_object_get(job, "retried")), 0);
    for (int s = 0; s < 6; s++)
        if (itest_side_starts(side, uuid, 0, s) != 1)
            fail_msg("step %d started %d times", s, itest_side_starts(side, uuid, 0, s));

    /* The story in the events: the step in flight succeeded on the first runner, which
     * then handed the job back ("released", not "retried"), and the second runner
     * claimed it after that and ran the rest. */
    json_t *events = itest_events(&W.client, uuid);
    size_t i;
    json_t *e;
    const char *running_on = "";
    bool step2_done = false, released = false, resumed = false;
    json_array_foreach(events, i, e)
    {
        const char *type = itest_str_of(e, "type");
        assert_string_not_equal(type, "retried");
        if (strcmp(type, "running") == 0) {
            running_on = itest_str_of(e, "runner");
            if (strcmp(running_on, name_b) == 0) {
                assert_true(released);
                resumed = true;
            }
        } else if (strcmp(type, "step") == 0 &&
                   json_integer_value(json_object_get(e, "index")) == 2 &&
                   strcmp(itest_str_of(e, "status"), "succeeded") == 0) {
            assert_string_equal(running_on, name_a);
            step2_done = true;
        } else if (strcmp(type, "released") == 0) {
            assert_true(step2_done);
            assert_string_equal(itest_str_of(e, "runner"), name_a);
            released = true;
        }
    }
    assert_true(released);
    assert_true(resumed);
    assert_string_equal(running_on, name_b);
    json_decref(events);
    json_decref(job);
}

static void test_sigterm_hands_job_back(void **state)
{
    (void)state;
    sigterm_scenario("term", false);
}

static void test_sigterm_hands_job_to_runner_up(void **state)
{
    (void)state;
    sigterm_scenario("term2", true);
}

/* ---- 5. isolation and misbehaving tasks --------------------------------------- */

static void run_ok_job(const char *side)
{
    char uuid[40];
    create("rec-iso-ok", NULL, uuid);
    json_t *job = finished(uuid, 20000);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_int_equal(itest_side_starts(side, uuid, 0, 0), 1);
    json_decref(job);
}

static void test_isolated_crash_hang_twice(void **state)
{
    (void)state;
    char side[320];
    itest_fleet_world_side_path(&W, side, sizeof side, "iso");
    put(itest_fmt("{\"name\": \"rec-iso-crash\", \"queue\": \"rec-iso\", \"chain\": ["
                  "{\"name\": \"boom\", \"task\": \"itest.crash\", \"isolate\": true, "
                  "\"args\": {\"file\": \"%s\"}}],"
                  "\"onerror\": [{\"name\": \"report\", \"task\": \"core.log\", \"args\": "
                  "{\"msg\": \"${error.code}: ${error.message}\"}}]}",
                  side));
    put(itest_fmt("{\"name\": \"rec-iso-ok\", \"queue\": \"rec-iso\", \"chain\": ["
                  "{\"name\": \"fine\", \"task\": \"itest.record\", \"args\": {\"file\": "
                  "\"%s\", \"ms\": 10}}]}",
                  side));
    put(itest_fmt("{\"name\": \"rec-hang\", \"queue\": \"rec-iso\", \"chain\": ["
                  "{\"name\": \"stuck\", \"task\": \"itest.hang\", \"timeout\": 0.3, "
                  "\"args\": {\"file\": \"%s\"}}]}",
                  side));
    /* In a helper, itest.hang would leave the helper's loop with nothing to run (it
     * exits at once without an outcome); a task still busy long past its timeout is
     * what a hung isolated task looks like. */
    put(itest_fmt("{\"name\": \"rec-slow-iso\", \"queue\": \"rec-iso\", \"chain\": ["
                  "{\"name\": \"stuck\", \"task\": \"itest.record\", \"timeout\": 0.3, "
                  "\"isolate\": true, \"args\": {\"file\": \"%s\", \"ms\": 5000}}]}",
                  side));
    put(itest_fmt("{\"name\": \"rec-twice\", \"queue\": \"rec-iso\", \"chain\": ["
                  "{\"name\": \"chatty\", \"task\": \"itest.twice\", \"args\": {\"file\": "
                  "\"%s\"}}]}",
                  side));

    /* The crash is deliberate: a sanitizer build must let the helper die of the signal
     * instead of reporting it (a report in the runner's log fails the test). */
    const char *asan = getenv("ASAN_OPTIONS");
    char *saved = asan != NULL ? strdup(asan) : NULL;
    setenv("ASAN_OPTIONS", itest_fmt("%s%shandle_segv=0", asan ? asan : "", asan ? ":" : ""), 1);
    itest_ternd_t *r = start_runner("iso-a", "rec-iso");
    if (saved != NULL)
        setenv("ASAN_OPTIONS", saved, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(saved);

    /* A segfault in an isolated step fails the step and the job, not the runner. */
    char uuid[40];
    create("rec-iso-crash", NULL, uuid);
    json_t *job = finished(uuid, 20000);
    assert_string_equal(itest_execution(job), "failed");
    json_t *entry = json_array_get(json_object_get(job, "chain_results"), 0);
    assert_string_equal(itest_error_code_of(entry), "TaskCrashed");
    const char *message = itest_str_of(json_object_get(entry, "error"), "message");
    print_message("crash: %s\n", message);
    if (strstr(message, "SIGSEGV") == NULL)
        fail_msg("the crash message does not name the signal: %s", message);
    assert_string_equal(itest_error_code_of(job), "TaskCrashed");
    json_t *oe = json_object_get(job, "onerror_results");
    assert_int_equal(json_array_size(oe), 1);
    assert_non_null(strstr(itest_str_of(json_object_get(json_array_get(oe, 0), "result"), "msg"),
                           "TaskCrashed: "));
    assert_int_equal(itest_side_starts(side, uuid, 0, 0), 1);
    json_decref(job);
    assert_true(kill(r->pid, 0) == 0);
    run_ok_job(side);

    /* A task that never reports is stopped by its step timeout, in process or not. */
    const char *hangs[] = {"rec-hang", "rec-slow-iso"};
    for (size_t h = 0; h < 2; h++) {
        create(hangs[h], NULL, uuid);
        job = finished(uuid, 20000);
        assert_string_equal(itest_execution(job), "failed");
        entry = json_array_get(json_object_get(job, "chain_results"), 0);
        assert_string_equal(itest_error_code_of(entry), "TaskTimeout");
        assert_int_equal(itest_side_starts(side, uuid, 0, 0), 1);
        json_decref(job);
        json_t *ev = wait_match(uuid, "step", "failed", 0, 1, 1000);
        /* About 300 ms: the timer counts from the loop's cached time, the duration from
         * a fresh clock reading, so it may read a few ms short. */
        json_int_t took = json_integer_value(json_object_get(ev, "duration_ms"));
        assert_in_range(took, 250, 4000);
        json_decref(ev);
    }
    run_ok_job(side);

    /* A task that reports twice: the first report counts, the second is logged. */
    create("rec-twice", NULL, uuid);
    job = finished(uuid, 20000);
    assert_string_equal(itest_execution(job), "succeeded");
    json_t *res = json_object_get(job, "chain_results");
    assert_int_equal(json_array_size(res), 1);
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(json_array_get(res, 0), "result"), "report")),
                     1);
    json_decref(job);
    json_t *events = itest_events(&W.client, uuid);
    size_t i;
    json_t *e;
    int step_events = 0;
    json_array_foreach(events, i, e) step_events += strcmp(itest_str_of(e, "type"), "step") == 0;
    assert_int_equal(step_events, 1);
    json_decref(events);
    assert_true(itest_ternd_log_has(r, "task itest.twice reported done after its outcome"));
    run_ok_job(side);
    assert_true(kill(r->pid, 0) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_killed_runner_job_finishes_elsewhere, test_teardown),
        cmocka_unit_test_teardown(test_killed_runner_takes_its_helper_along, test_teardown),
        cmocka_unit_test_teardown(test_interrupted_irreversible_step_fails_then_retry,
                                  test_teardown),
        cmocka_unit_test_teardown(test_runner_restarted_under_same_id, test_teardown),
        cmocka_unit_test_teardown(test_redis_restart_mid_run, test_teardown),
        cmocka_unit_test_teardown(test_sigterm_hands_job_back, test_teardown),
        cmocka_unit_test_teardown(test_sigterm_hands_job_to_runner_up, test_teardown),
        cmocka_unit_test_teardown(test_isolated_crash_hang_twice, test_teardown),
    };
    int failures = cmocka_run_group_tests(tests, group_setup, group_teardown);
    return failures == 0 ? 0 : 1;
}
