/*
 * test_exec.c -- the exec plugin's configuration as ternd applies it: a shell step is
 * refused when a workflow is stored over HTTP (with the step's path) and again when a
 * runner whose configuration forbids it picks the job up; a runner that allows the
 * shell hands a job's values to the script as positional parameters, never as code;
 * and, as root, steps run as the configured unprivileged user.
 *
 * W's ternd has the default exec configuration (no shell, children as nobody when
 * root). A second runner, started by a test on queue "shellq", allows the shell and
 * runs children as "daemon".
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http_sync.h"
#include "world.h"

static itest_world_t W;
static http_sync_t http;
static itest_fleet_t fleet;    /* the shell runner, once a test started it */
static itest_fleet_t wf_fleet; /* a runner that loads a --workflows directory */
static char shell_config[400]; /* a configuration file that allows the shell */

static int group_setup(void **state)
{
    (void)state;
    itest_world_start(&W, "exec1", NULL, NULL);
    http_sync_open(&http, W.base);
    snprintf(shell_config, sizeof shell_config, "%s/shell.json", W.dir.path);
    FILE *f = fopen(shell_config, "w");
    assert_non_null(f);
    fputs("{\"plugins\": {\"exec\": {\"allow_shell\": true, \"user\": \"daemon\"}}}\n", f);
    assert_int_equal(fclose(f), 0);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    itest_fleet_stop(&fleet, 15000);
    itest_fleet_stop(&wf_fleet, 15000);
    http_sync_close(&http);
    itest_world_stop(&W, 15000);
    return 0;
}

/* The first chain result of a finished job. */
static const json_t *first_result(const json_t *job)
{
    return json_array_get(json_object_get(job, "chain_results"), 0);
}

/* A path in /tmp that does not exist, unique to this run: a step's child (not root)
 * could create it there, so its absence shows that nothing tried. */
static void marker_path(char *out, size_t len, const char *what)
{
    snprintf(out, len, "/tmp/tern-exec-%s-%ld", what, (long)getpid());
    unlink(out);
}

/* Fails the test, after removing it, when the marker exists: the step ran. */
static void assert_not_created(const char *marker)
{
    if (access(marker, F_OK) == 0) {
        unlink(marker);
        fail_msg("%s was created: the step ran", marker);
    }
}

static void start_shell_runner(void)
{
    if (fleet.n > 0)
        return;
    const char *more[] = {"--config", shell_config, NULL};
    itest_fleet_start(&fleet, &W.redis, &W.dir, "exec-shell", "shellq", more);
}

static void test_shell_refused_when_stored(void **state)
{
    (void)state;
    http_sync_resp_t r;
    const char *def = "{\"name\": \"exec-sh\", \"chain\": ["
                      "{\"name\": \"a\", \"task\": \"core.noop\"},"
                      "{\"name\": \"b\", \"task\": \"exec.run\","
                      " \"args\": {\"argv\": \"echo hi\", \"shell\": true}}]}";
    assert_int_equal(http_sync_do(&http, "POST", "/workflows", def, strlen(def), NULL, &r), 0);
    if (r.status != 409)
        fail_msg("expected 409, got %ld: %s", r.status, r.body);
    assert_string_equal(itest_str_of(r.json, "code"), "InvalidArgument");
    assert_string_equal(itest_str_of(r.json, "message"),
                        "chain[1].args.shell: \"shell\": true is not allowed; the exec plugin's "
                        "configuration must say \"allow_shell\": true ({\"plugins\": {\"exec\": "
                        "{\"allow_shell\": true}}})");
    http_sync_resp_dispose(&r);
    /* Nothing was stored. */
    assert_int_equal(http_sync_do(&http, "GET", "/workflows/exec-sh", NULL, 0, NULL, &r), 0);
    assert_int_equal(r.status, 404);
    http_sync_resp_dispose(&r);
}

/* The same refusal for a workflow file of --workflows DIR, logged with its path. */
static void test_shell_refused_from_workflows_dir(void **state)
{
    (void)state;
    char dir[400], file[480];
    snprintf(dir, sizeof dir, "%s/wf", W.dir.path);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(file, sizeof file, "%s/sh.json", dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("{\"name\": \"exec-sh-dir\", \"chain\": [{\"name\": \"s\", \"task\": \"exec.run\","
          " \"args\": {\"argv\": \"echo hi\", \"shell\": true}}]}\n",
          f);
    assert_int_equal(fclose(f), 0);
    const char *more[] = {"--workflows", dir, NULL};
    itest_ternd_t *t = itest_fleet_start(&wf_fleet, &W.redis, &W.dir, "exec-wf", "wfq", more);
    /* "ready" is logged once every file of the directory was stored or refused. */
    assert_true(itest_ternd_log_has(t, "chain[0].args.shell: \\\"shell\\\": true is not allowed"));
    itest_fleet_stop(&wf_fleet, 15000);
    http_sync_resp_t r;
    assert_int_equal(http_sync_do(&http, "GET", "/workflows/exec-sh-dir", NULL, 0, NULL, &r), 0);
    assert_int_equal(r.status, 404);
    http_sync_resp_dispose(&r);
}

/* Stored where the shell was allowed, run where it is not: refused, not retried. */
static void test_shell_refused_at_run_time(void **state)
{
    (void)state;
    char marker[128];
    marker_path(marker, sizeof marker, "ran");
    /* The test client stores without any plugin's check, as an API whose exec
     * configuration allowed the shell would. */
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"exec-sh-rt\", \"chain\": [{\"name\": \"s\","
                                    " \"task\": \"exec.run\", \"retry\": {\"max_attempts\": 3},"
                                    " \"args\": {\"argv\": \"touch %s\", \"shell\": true}}]}",
                                    marker));
    char uuid[40];
    itest_job_create_ok(&W.client, "exec-sh-rt", NULL, uuid);
    json_t *job = itest_wait_finished_ok(&W.client, uuid, 15000);
    assert_not_created(marker);
    assert_string_equal(itest_execution(job), "failed");
    const json_t *res = first_result(job);
    assert_int_equal(json_integer_value(json_object_get(res, "attempts")), 1);
    assert_string_equal(itest_str_of(json_object_get(job, "error"), "code"), "ExecNotAllowed");
    json_decref(job);
}

static void test_values_reach_the_shell_as_parameters(void **state)
{
    (void)state;
    start_shell_runner();
    char marker[128], params[256];
    marker_path(marker, sizeof marker, "injected");
    itest_workflow_put_ok(
        &W.client, "{\"name\": \"exec-hello\", \"queue\": \"shellq\", \"chain\": ["
                   "{\"name\": \"hello\", \"task\": \"exec.run\","
                   " \"args\": {\"argv\": \"echo hello ${params.name}\", \"shell\": true}}]}");
    snprintf(params, sizeof params, "{\"name\": \"x; touch %s\"}", marker);
    char uuid[40];
    itest_job_create_ok(&W.client, "exec-hello", params, uuid);
    json_t *job = itest_wait_finished_ok(&W.client, uuid, 15000);
    assert_not_created(marker);
    if (strcmp(itest_execution(job), "succeeded") != 0)
        fail_msg("job %s: %s", itest_execution(job), json_dumps(json_object_get(job, "error"), 0));
    char want[400];
    snprintf(want, sizeof want, "hello x; touch %s\n", marker);
    assert_string_equal(itest_str_of(json_object_get(first_result(job), "result"), "stdout"), want);
    json_decref(job);
}

static void test_steps_run_unprivileged(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        printf("# skipped test_steps_run_unprivileged: ternd is not root here (euid %u)\n",
               (unsigned)geteuid());
        return;
    }
    start_shell_runner();
    struct passwd *pw = getpwnam("nobody");
    assert_non_null(pw);
    uid_t nobody = pw->pw_uid;
    pw = getpwnam("daemon");
    assert_non_null(pw);
    uid_t daemon_uid = pw->pw_uid;

    static const struct {
        const char *queue;
        const char *name;
    } where[] = {{"default", "exec-id"}, {"shellq", "exec-id-q"}};
    for (size_t i = 0; i < 2; i++) {
        itest_workflow_put_ok(&W.client,
                              itest_fmt("{\"name\": \"%s\", \"queue\": \"%s\", \"chain\": ["
                                        "{\"name\": \"id\", \"task\": \"exec.run\","
                                        " \"args\": {\"argv\": [\"id\", \"-u\"]}}]}",
                                        where[i].name, where[i].queue));
        char uuid[40];
        itest_job_create_ok(&W.client, where[i].name, NULL, uuid);
        json_t *job = itest_wait_finished_ok(&W.client, uuid, 15000);
        assert_string_equal(itest_execution(job), "succeeded");
        char want[32];
        snprintf(want, sizeof want, "%u\n", (unsigned)(i == 0 ? nobody : daemon_uid));
        assert_string_equal(itest_str_of(json_object_get(first_result(job), "result"), "stdout"),
                            want);
        json_decref(job);
    }
}

/* A step's child inherits nothing of ternd but its standard streams: not its Redis
 * connections (a daemon a step started kept a dead runner's queue connection open,
 * and Redis went on handing that connection jobs), not its listening socket. `ls`
 * itself opens the directory it lists, as 3. */
static void test_children_inherit_no_descriptor(void **state)
{
    (void)state;
    itest_workflow_put_ok(&W.client,
                          "{\"name\": \"exec-fds\", \"chain\": [{\"name\": \"fds\","
                          " \"task\": \"exec.run\", \"args\": {\"argv\": [\"ls\", \"-1\","
                          " \"/proc/self/fd\"]}}]}");
    char uuid[40];
    itest_job_create_ok(&W.client, "exec-fds", NULL, uuid);
    json_t *job = itest_wait_finished_ok(&W.client, uuid, 15000);
    if (strcmp(itest_execution(job), "succeeded") != 0)
        fail_msg("job %s: %s", itest_execution(job), json_dumps(json_object_get(job, "error"), 0));
    assert_string_equal(itest_str_of(json_object_get(first_result(job), "result"), "stdout"),
                        "0\n1\n2\n3\n");
    json_decref(job);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shell_refused_when_stored),
        cmocka_unit_test(test_shell_refused_from_workflows_dir),
        cmocka_unit_test(test_shell_refused_at_run_time),
        cmocka_unit_test(test_values_reach_the_shell_as_parameters),
        cmocka_unit_test(test_steps_run_unprivileged),
        cmocka_unit_test(test_children_inherit_no_descriptor),
    };
    return cmocka_run_group_tests_name("exec", tests, group_setup, group_teardown);
}
