/*
 * test_step_queues.c -- steps that name the queue they run on, on real runners: each
 * step runs on a runner of its queue (every result entry names the runner that ran
 * it), a queue no runner serves keeps the job queued where GET /jobs/:uuid and
 * /metrics show it until a runner of that queue starts, a runner killed mid-step has
 * the step run again on a runner of the same queue (never on one that does not serve
 * it), a wait past the step's timeout fails the step with TaskTimeout and a wait past
 * the workflow's timeout runs onerror (both taking the job out of that queue), and a
 * queue template that gives no queue name fails its step with InvalidArgument.
 *
 * The group starts one redis-server and the client; each test starts the runners it
 * needs and uses queues of its own, so a job a failed test left behind cannot run on
 * a later test's runners. The itest plugin's side channel records the process of
 * every step start, which tells which runner started it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_sync.h"
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

static int test_teardown(void **state)
{
    (void)state;
    itest_fleet_stop(&W.fleet, 10000);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------ */

static itest_ternd_t *start_runner(const char *id, const char *queues)
{
    return itest_fleet_start(&W.fleet, &W.redis, &W.dir, id, queues, NULL);
}

static void create(const char *workflow, const char *params, char uuid[40])
{
    itest_job_create_ok(&W.client, workflow, params, uuid);
}

/* An itest.record step named `name` of `ms` on `queue` (NULL: none), recording to side. */
static const char *record_step(char *buf, size_t len, const char *name, int ms, const char *queue,
                               const char *side)
{
    snprintf(buf, len,
             "{\"name\": \"%s\", \"task\": \"itest.record\", %s%s%s"
             "\"args\": {\"file\": \"%s\", \"ms\": %d}}",
             name, queue ? "\"queue\": \"" : "", queue ? queue : "", queue ? "\", " : "", side, ms);
    return buf;
}

/* The runner id chain result `i` of `job` names. */
static const char *result_runner(const json_t *job, const char *list, size_t i)
{
    return itest_str_of(json_array_get(json_object_get(job, list), i), "runner");
}

static void assert_ran_on(const json_t *job, const char *list, size_t i, const char *runner)
{
    const char *got = result_runner(job, list, i);
    if (strcmp(got, runner) != 0)
        fail_msg("%s[%zu] ran on runner %s, expected %s", list, i, got, runner);
}

/* Waits until the job is queued in step queue `queue` (GET /jobs/:uuid shows it), or
 * fails the test after timeout_ms. The hop has no event of its own: this polls. */
static json_t *wait_step_queued(const char *uuid, const char *queue, unsigned timeout_ms)
{
    for (unsigned waited = 0;; waited += 50) {
        json_t *job = itest_job_get(&W.client, uuid);
        if (job != NULL && strcmp(itest_execution(job), "queued") == 0 &&
            strcmp(itest_str_of(job, "step_queue"), queue) == 0)
            return job;
        if (waited >= timeout_ms)
            fail_msg("job %s: not queued in %s within %u ms (execution %s, step_queue %s)", uuid,
                     queue, timeout_ms, itest_execution(job), itest_str_of(job, "step_queue"));
        json_decref(job);
        itest_pause_ms(50);
    }
}

/* GET /metrics of runner t (malloc'd body). */
static char *scrape(const itest_ternd_t *t)
{
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", t->api_port);
    http_sync_t h;
    http_sync_open(&h, base);
    http_sync_resp_t r;
    http_sync_do(&h, "GET", "/metrics", NULL, 0, NULL, &r);
    if (r.status != 200)
        fail_msg("GET /metrics answered %ld: %s", r.status, r.body ? r.body : r.error);
    char *body = r.body;
    r.body = NULL;
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
    return body;
}

/* ---- tests -------------------------------------------------------------------- */

/* A step naming a literal queue and one naming a queue templated from state run on
 * the runner of that queue; the steps without one on the workflow's runner. Every
 * result entry and step event names the runner that ran the step. */
static void test_steps_run_on_their_queues(void **state)
{
    (void)state;
    char side[400], s1[600], s2[600], s3[600], s4[600], uuid[40];
    itest_fleet_world_side_path(&W, side, sizeof side, "run");
    start_runner("sq-a", "sq1");
    start_runner("sq-b", "sq1-two");
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"sq-run\", \"queue\": \"sq1\", \"chain\": ["
                                    "{\"name\": \"s0\", \"task\": \"core.set_state\","
                                    " \"args\": {\"values\": {\"q\": \"two\"}}}, %s, %s, %s, %s]}",
                                    record_step(s1, sizeof s1, "s1", 0, "sq1-two", side),
                                    record_step(s2, sizeof s2, "s2", 0, NULL, side),
                                    record_step(s3, sizeof s3, "s3", 0, "sq1-${state.q}", side),
                                    record_step(s4, sizeof s4, "s4", 0, NULL, side)));
    create("sq-run", NULL, uuid);
    json_t *job = itest_wait_finished_ok(&W.client, uuid, 20000);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_ran_on(job, "chain_results", 0, "sq-a");
    assert_ran_on(job, "chain_results", 1, "sq-b");
    assert_ran_on(job, "chain_results", 2, "sq-a");
    assert_ran_on(job, "chain_results", 3, "sq-b");
    assert_ran_on(job, "chain_results", 4, "sq-a");
    assert_true(json_is_null(json_object_get(job, "step_queue")));
    json_decref(job);

    /* The step events say the same. */
    json_t *events = itest_events(&W.client, uuid);
    size_t i;
    json_t *ev;
    int seen = 0;
    json_array_foreach(events, i, ev)
    {
        if (strcmp(itest_str_of(ev, "type"), "step") != 0)
            continue;
        long long index = json_integer_value(json_object_get(ev, "index"));
        assert_string_equal(itest_str_of(ev, "runner"), index % 2 == 1 ? "sq-b" : "sq-a");
        seen++;
    }
    assert_int_equal(seen, 5);
    json_decref(events);
}

/* A step whose queue no runner serves (here the first step, so the runner that claims
 * the job moves it without running it) keeps the job queued, shown in GET /jobs/:uuid
 * and in the queue's depth in /metrics; a runner of that queue started later runs it,
 * and the job comes back to the workflow's runner for the next step. */
static void test_unserved_queue_waits(void **state)
{
    (void)state;
    char side[400], s0[600], s1[600], uuid[40];
    itest_fleet_world_side_path(&W, side, sizeof side, "unserved");
    itest_ternd_t *a = start_runner("sq-c", "sq2");
    itest_workflow_put_ok(&W.client, itest_fmt("{\"name\": \"sq-unserved\", \"queue\": \"sq2\","
                                               " \"chain\": [%s, %s]}",
                                               record_step(s0, sizeof s0, "s0", 0, "sq2-gpu", side),
                                               record_step(s1, sizeof s1, "s1", 0, NULL, side)));
    create("sq-unserved", NULL, uuid);
    json_t *job = wait_step_queued(uuid, "sq2-gpu", 10000);
    assert_int_equal(json_array_size(json_object_get(job, "chain_results")), 0);
    json_decref(job);
    char *page = scrape(a);
    double depth = itest_metric_sample(page, "tern_queue_depth{queue=\"sq2-gpu\"}");
    if (depth != 1)
        fail_msg("tern_queue_depth of sq2-gpu is %g, expected 1:\n%s", depth, page);
    free(page);
    assert_int_equal(itest_side_count(side, "start", uuid), 0);

    start_runner("sq-gpu", "sq2-gpu");
    job = itest_wait_finished_ok(&W.client, uuid, 20000);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_ran_on(job, "chain_results", 0, "sq-gpu");
    assert_ran_on(job, "chain_results", 1, "sq-c");
    json_decref(job);
}

/* The start lines of chain step `idx` of `uuid` must all come from the processes in
 * `pids` (n of them); returns how many there are. */
static int starts_only_by(const char *side, const char *uuid, int idx, const pid_t *pids, int n)
{
    itest_side_line_t lines[8];
    char key[80];
    snprintf(key, sizeof key, "%s/0/%d", uuid, idx);
    int got = itest_side_lines(side, "start", key, lines, 8);
    for (int i = 0; i < got && i < 8; i++) {
        bool ok = false;
        for (int k = 0; k < n; k++)
            ok = ok || lines[i].pid == (long)pids[k];
        if (!ok)
            fail_msg("step %s started by process %ld, which does not serve its queue", key,
                     lines[i].pid);
    }
    return got;
}

/* A runner serving both queues runs the step of the second without a hop; killed with
 * SIGKILL mid-step, the step goes back to its own queue (GET /jobs/:uuid says which),
 * where the runner serving only the workflow's queue never takes it; a runner of that
 * queue started later runs it again. */
static void test_dead_runner_step_stays_on_its_queue(void **state)
{
    (void)state;
    char side[400], s0[600], s1[600], s2[600], uuid[40];
    itest_fleet_world_side_path(&W, side, sizeof side, "dead");
    itest_ternd_t *both = start_runner("sq-both", "sq3,sq3-two");
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"sq-dead\", \"queue\": \"sq3\", \"chain\": "
                                    "[%s, %s, %s]}",
                                    record_step(s0, sizeof s0, "s0", 0, NULL, side),
                                    record_step(s1, sizeof s1, "s1", 60000, "sq3-two", side),
                                    record_step(s2, sizeof s2, "s2", 0, NULL, side)));
    create("sq-dead", NULL, uuid);
    char key[80];
    snprintf(key, sizeof key, "%s/0/1", uuid);
    itest_side_wait(side, "start", key, 1, 15000);
    pid_t both_pid = both->pid;
    json_t *job = itest_job_get(&W.client, uuid);
    assert_string_equal(itest_str_of(job, "step_queue"), "sq3-two");
    json_decref(job);

    itest_ternd_t *home = start_runner("sq-home", "sq3");
    (void)home;
    itest_ternd_signal(both, SIGKILL, 5000);
    both->pid = 0;
    /* The home runner reaps the dead runner's job: back to sq3-two, not to sq3. */
    json_decref(itest_wait_event_ok(&W.client, uuid, "retried", 15000));
    job = itest_job_get(&W.client, uuid);
    assert_string_equal(itest_execution(job), "retried");
    assert_string_equal(itest_str_of(job, "step_queue"), "sq3-two");
    json_decref(job);
    assert_int_equal(itest_redis_int(&W.redis, "LLEN tern:q:sq3-two"), 1);

    /* A runner of sq3-two runs it again. */
    itest_ternd_t *two = start_runner("sq-two", "sq3-two");
    pid_t two_pid = two->pid;
    itest_side_wait(side, "start", key, 2, 15000);
    pid_t allowed[] = {both_pid, two_pid};
    assert_int_equal(starts_only_by(side, uuid, 1, allowed, 2), 2);
    /* Canceled rather than waited out: what this test is about has happened. */
    char msg[512];
    assert_int_equal(itest_job_cancel(&W.client, uuid, msg, sizeof msg), 0);
    job = itest_wait_finished_ok(&W.client, uuid, 20000);
    assert_string_equal(itest_execution(job), "canceled");
    json_decref(job);
}

/* A step that waits in its queue past its timeout fails with TaskTimeout naming the
 * queue, through its retries and onerror, and leaves that queue: no runner of it
 * will run it later. */
static void test_step_timeout_while_queued(void **state)
{
    (void)state;
    char side[400], s0[600], o0[600], uuid[40];
    itest_fleet_world_side_path(&W, side, sizeof side, "steptimeout");
    start_runner("sq-d", "sq4");
    itest_workflow_put_ok(
        &W.client,
        itest_fmt("{\"name\": \"sq-steptimeout\", \"queue\": \"sq4\", \"chain\": [%s,"
                  " {\"name\": \"far\", \"task\": \"itest.record\", \"queue\": \"sq4-nobody\","
                  " \"timeout\": 0.5, \"retry\": {\"max_attempts\": 2, \"initial_ms\": 10},"
                  " \"args\": {\"file\": \"%s\", \"ms\": 0}}],"
                  " \"onerror\": [%s]}",
                  record_step(s0, sizeof s0, "s0", 0, NULL, side), side,
                  record_step(o0, sizeof o0, "o0", 0, NULL, side)));
    create("sq-steptimeout", NULL, uuid);
    json_t *job = itest_wait_finished_ok(&W.client, uuid, 20000);
    assert_string_equal(itest_execution(job), "failed");
    json_t *far = json_array_get(json_object_get(job, "chain_results"), 1);
    assert_string_equal(itest_error_code_of(far), "TaskTimeout");
    const char *message = itest_str_of(json_object_get(far, "error"), "message");
    if (strstr(message, "sq4-nobody") == NULL)
        fail_msg("TaskTimeout message names no queue: %s", message);
    assert_int_equal(json_integer_value(json_object_get(far, "attempts")), 2);
    assert_ran_on(job, "onerror_results", 0, "sq-d");
    assert_string_equal(itest_error_code_of(job), "TaskTimeout");
    json_decref(job);
    assert_int_equal(itest_redis_int(&W.redis, "LLEN tern:q:sq4-nobody"), 0);
    assert_int_equal(itest_redis_int(&W.redis, "ZCARD tern:queue_waits"), 0);
    char key[80];
    snprintf(key, sizeof key, "%s/0/1", uuid);
    assert_int_equal(itest_side_count(side, "start", key), 0);
}

/* A job waiting in a step queue past its workflow's timeout runs onerror on the
 * workflow's queue and leaves the step queue. */
static void test_workflow_timeout_while_queued(void **state)
{
    (void)state;
    char side[400], s0[600], s1[600], o0[600], uuid[40];
    itest_fleet_world_side_path(&W, side, sizeof side, "wftimeout");
    start_runner("sq-e", "sq5");
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"sq-wftimeout\", \"queue\": \"sq5\", \"timeout\": "
                                    "1, \"chain\": [%s, %s], \"onerror\": [%s]}",
                                    record_step(s0, sizeof s0, "s0", 0, NULL, side),
                                    record_step(s1, sizeof s1, "s1", 0, "sq5-nobody", side),
                                    record_step(o0, sizeof o0, "o0", 0, NULL, side)));
    create("sq-wftimeout", NULL, uuid);
    json_t *job = itest_wait_finished_ok(&W.client, uuid, 20000);
    assert_string_equal(itest_execution(job), "failed");
    assert_string_equal(itest_error_code_of(job), "WorkflowTimeout");
    assert_ran_on(job, "onerror_results", 0, "sq-e");
    json_decref(job);
    assert_int_equal(itest_redis_int(&W.redis, "LLEN tern:q:sq5-nobody"), 0);
}

/* A queue template that gives no queue name (an empty value, a value with a space)
 * fails its step with InvalidArgument naming the step, the template and the value. */
static void test_bad_templated_queue(void **state)
{
    (void)state;
    char side[400], s1[600], uuid[40];
    itest_fleet_world_side_path(&W, side, sizeof side, "badqueue");
    start_runner("sq-f", "sq6");
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"sq-badqueue\", \"queue\": \"sq6\", \"chain\": ["
                                    "{\"name\": \"s0\", \"task\": \"core.set_state\", \"args\": "
                                    "{\"values\": {\"q\": \"${params.q}\"}}}, %s]}",
                                    record_step(s1, sizeof s1, "s1", 0, "${state.q}", side)));
    static const char *const values[] = {"", "Not A Queue"};
    for (size_t i = 0; i < 2; i++) {
        create("sq-badqueue", itest_fmt("{\"q\": \"%s\"}", values[i]), uuid);
        json_t *job = itest_wait_finished_ok(&W.client, uuid, 20000);
        assert_string_equal(itest_execution(job), "failed");
        json_t *r = json_array_get(json_object_get(job, "chain_results"), 1);
        assert_string_equal(itest_error_code_of(r), "InvalidArgument");
        const char *message = itest_str_of(json_object_get(r, "error"), "message");
        char value[64];
        snprintf(value, sizeof value, "\"%s\"", values[i]);
        if (strstr(message, "s1") == NULL || strstr(message, "${state.q}") == NULL ||
            strstr(message, value) == NULL)
            fail_msg("message does not name the step, the template and the value: %s", message);
        json_decref(job);
    }
}

/* A step that waited past its timeout in its queue runs its fallback on that same
 * queue: the runner that failed the step sends the fallback there with the step's
 * error, and a runner of the queue started later runs the fallback (not the step). */
static void test_fallback_runs_on_its_steps_queue(void **state)
{
    (void)state;
    char side[400], uuid[40];
    itest_fleet_world_side_path(&W, side, sizeof side, "fallback");
    start_runner("sq-g", "sq7");
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"sq-fallback\", \"queue\": \"sq7\", \"chain\": ["
                                    "{\"name\": \"far\", \"task\": \"itest.record\", \"queue\": "
                                    "\"sq7-two\", \"timeout\": 0.5, \"args\": {\"file\": \"%s\"},"
                                    " \"fallback\": {\"task\": \"itest.record\", \"timeout\": 30,"
                                    " \"args\": {\"file\": \"%s\"}}}]}",
                                    side, side));
    create("sq-fallback", NULL, uuid);
    json_decref(itest_wait_event_ok(&W.client, uuid, "queue_timeout", 15000));
    start_runner("sq-two", "sq7-two");
    json_t *job = itest_wait_finished_ok(&W.client, uuid, 20000);
    assert_string_equal(itest_execution(job), "succeeded");
    json_t *far = json_array_get(json_object_get(job, "chain_results"), 0);
    assert_string_equal(itest_str_of(far, "fallback"), "itest.record");
    assert_string_equal(itest_str_of(json_object_get(far, "step_error"), "code"), "TaskTimeout");
    assert_ran_on(job, "chain_results", 0, "sq-two");
    json_decref(job);
    char key[80];
    snprintf(key, sizeof key, "%s/0/0", uuid);
    assert_int_equal(itest_side_count_exact(side, "start", key), 0);
    snprintf(key, sizeof key, "%s/0/0/fallback", uuid);
    assert_int_equal(itest_side_count_exact(side, "start", key), 1);
}

/* A redriven job goes back to its workflow's queue; the runner there sends it on to
 * the step's queue (one hop) when the step names one. */
static void test_redrive_hops_to_the_steps_queue(void **state)
{
    (void)state;
    char side[400], s0[600], uuid[40], msg[512];
    itest_fleet_world_side_path(&W, side, sizeof side, "redrive");
    start_runner("sq-h", "sq8");
    itest_workflow_put_ok(
        &W.client,
        itest_fmt("{\"name\": \"sq-redrive\", \"queue\": \"sq8\", \"chain\": [%s,"
                  " {\"name\": \"check\", \"task\": \"itest.check\", \"queue\": \"sq8-two\","
                  " \"args\": {\"file\": \"%s\", \"ok\": \"${params.ok}\"}}]}",
                  record_step(s0, sizeof s0, "s0", 0, NULL, side), side));
    start_runner("sq-two", "sq8-two");
    create("sq-redrive", "{\"ok\": false}", uuid);
    json_t *job = itest_wait_finished_ok(&W.client, uuid, 20000);
    assert_string_equal(itest_execution(job), "failed");
    assert_ran_on(job, "chain_results", 1, "sq-two");
    json_decref(job);
    assert_int_equal(itest_job_redrive(&W.client, uuid, "check", "{\"ok\": true}", msg, sizeof msg),
                     0);
    /* The job's stream holds the first run's end too: wait for the second. */
    json_t *ev = itest_wait_event_nth(&W.client, uuid, "finished", NULL, -1, 2, 20000);
    if (ev == NULL)
        fail_msg("job %s: not finished again within 20 s of its redrive", uuid);
    json_decref(ev);
    job = itest_job_get(&W.client, uuid);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_ran_on(job, "chain_results", 0, "sq-h");
    assert_ran_on(job, "chain_results", 1, "sq-two");
    json_decref(job);
}

/* Waits until the job sits in Redis's list of queue `queue`, or fails after timeout_ms
 * (a promotion from the delayed set, a resume: no event says where the job went). */
static void wait_in_queue(const char *uuid, const char *queue, unsigned timeout_ms)
{
    for (unsigned waited = 0;; waited += 50) {
        if (itest_redis_int(&W.redis, "LPOS tern:q:%s %s", queue, uuid) >= 0)
            return;
        if (waited >= timeout_ms)
            fail_msg("job %s: not in queue %s within %u ms", uuid, queue, timeout_ms);
        itest_pause_ms(50);
    }
}

/* A retry that leaves the runner (its delay is long) and a resumed waiting step go
 * back to the step's queue, not to the workflow's: with no runner of the step's queue
 * up, the job is found there; a runner of it started then runs the step. */
static void test_delayed_retry_and_resume_stay_on_the_steps_queue(void **state)
{
    (void)state;
    char side[400], s0[600], uuid[40], msg[512];
    itest_fleet_world_side_path(&W, side, sizeof side, "later");
    start_runner("sq-i", "sq9");
    itest_ternd_t *two = start_runner("sq-two-a", "sq9-two");
    itest_workflow_put_ok(
        &W.client,
        itest_fmt("{\"name\": \"sq-later\", \"queue\": \"sq9\", \"chain\": [%s,"
                  " {\"name\": \"flaky\", \"task\": \"itest.flaky\", \"queue\": \"sq9-two\","
                  " \"retry\": {\"max_attempts\": 2, \"backoff\": \"constant\","
                  " \"initial_ms\": 3000}, \"args\": {\"file\": \"%s\", \"fail_times\": 1}},"
                  " {\"name\": \"wait\", \"task\": \"itest.wait\", \"queue\": \"sq9-two\","
                  " \"args\": {\"file\": \"%s\"}}]}",
                  record_step(s0, sizeof s0, "s0", 0, NULL, side), side, side));
    create("sq-later", NULL, uuid);
    json_decref(itest_wait_event(&W.client, uuid, "step", "retry", 15000));
    itest_ternd_signal(two, SIGTERM, 10000);
    wait_in_queue(uuid, "sq9-two", 10000);
    assert_int_equal(itest_redis_int(&W.redis, "LLEN tern:q:sq9"), 0);

    two = start_runner("sq-two-b", "sq9-two");
    json_decref(itest_wait_event_ok(&W.client, uuid, "waiting", 15000));
    json_t *job = itest_job_get(&W.client, uuid);
    assert_string_equal(itest_execution(job), "waiting");
    assert_string_equal(itest_str_of(job, "step_queue"), "sq9-two");
    json_decref(job);
    itest_ternd_signal(two, SIGTERM, 10000);
    assert_int_equal(itest_job_resume(&W.client, uuid, "{\"done\": true}", NULL, msg, sizeof msg),
                     0);
    wait_in_queue(uuid, "sq9-two", 10000);

    start_runner("sq-two-c", "sq9-two");
    job = itest_wait_finished_ok(&W.client, uuid, 20000);
    assert_string_equal(itest_execution(job), "succeeded");
    assert_ran_on(job, "chain_results", 0, "sq-i");
    assert_ran_on(job, "chain_results", 1, "sq-two-b");
    assert_ran_on(job, "chain_results", 2, "sq-two-c");
    json_decref(job);
}

/* A runner serving both queues that claims a job whose first step names the second
 * records that queue before it runs the step, so that the job would go back there,
 * not to the workflow's queue, should the runner die. */
static void test_first_step_queue_recorded(void **state)
{
    (void)state;
    char side[400], s0[600], uuid[40], msg[512];
    itest_fleet_world_side_path(&W, side, sizeof side, "first");
    itest_ternd_t *both = start_runner("sq-both", "sq10,sq10-two");
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"sq-first\", \"queue\": \"sq10\", \"chain\": "
                                    "[%s]}",
                                    record_step(s0, sizeof s0, "s0", 60000, "sq10-two", side)));
    create("sq-first", NULL, uuid);
    char key[80];
    snprintf(key, sizeof key, "%s/0/0", uuid);
    itest_side_wait(side, "start", key, 1, 15000);
    json_t *job = itest_job_get(&W.client, uuid);
    assert_string_equal(itest_execution(job), "running");
    assert_string_equal(itest_str_of(job, "step_queue"), "sq10-two");
    json_decref(job);
    itest_ternd_signal(both, SIGKILL, 5000);
    start_runner("sq-home", "sq10");
    json_decref(itest_wait_event_ok(&W.client, uuid, "retried", 15000));
    wait_in_queue(uuid, "sq10-two", 10000);
    assert_int_equal(itest_job_cancel(&W.client, uuid, msg, sizeof msg), 0);
    job = itest_wait_finished_ok(&W.client, uuid, 20000);
    assert_string_equal(itest_execution(job), "canceled");
    json_decref(job);
    assert_int_equal(itest_side_count(side, "start", key), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_steps_run_on_their_queues, test_teardown),
        cmocka_unit_test_teardown(test_unserved_queue_waits, test_teardown),
        cmocka_unit_test_teardown(test_dead_runner_step_stays_on_its_queue, test_teardown),
        cmocka_unit_test_teardown(test_step_timeout_while_queued, test_teardown),
        cmocka_unit_test_teardown(test_workflow_timeout_while_queued, test_teardown),
        cmocka_unit_test_teardown(test_bad_templated_queue, test_teardown),
        cmocka_unit_test_teardown(test_fallback_runs_on_its_steps_queue, test_teardown),
        cmocka_unit_test_teardown(test_redrive_hops_to_the_steps_queue, test_teardown),
        cmocka_unit_test_teardown(test_delayed_retry_and_resume_stay_on_the_steps_queue,
                                  test_teardown),
        cmocka_unit_test_teardown(test_first_step_queue_recorded, test_teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
