/*
 * test_plugin_exec.c -- the exec plugin (tasks/exec/exec.c) run through the task
 * harness and the engine's real task context: results, each failure code and its
 * message, the minimal and inherited environments, shell only on request, stdin, cwd,
 * tails, timeouts and a cancel that kills the child. Also loads exec.so with the real
 * loader, so its descriptor and args_schema pass every check.
 *
 * Usage: test_plugin_exec <path of exec.so>
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "plugin_loader.h"
#include "task_harness.h"

#define BOUND_MS 10000

static const char *exec_so;

static int group_setup(void **state)
{
    *state = task_harness_new(exec_so, NULL);
    return *state == NULL ? -1 : 0;
}

static int group_teardown(void **state)
{
    task_harness_free(*state);
    return 0;
}

/* Runs exec.run with args given as JSON text. */
static void run(void **state, const char *args_text, harness_run_t *out)
{
    json_error_t jerr;
    json_t *args = json_loads(args_text, 0, &jerr);
    if (args == NULL)
        fail_msg("bad test JSON %s: %s", args_text, jerr.text);
    int rc = task_harness_run(*state, "run", args, NULL, NULL, BOUND_MS, 0, out);
    json_decref(args);
    assert_int_equal(rc, 0);
    assert_true(out->finished);
}

static void assert_done(const harness_run_t *r)
{
    if (r->outcome.kind != TASK_DONE)
        fail_msg("expected success, got %s: %s", r->outcome.code, r->outcome.message);
}

static void assert_failed(const harness_run_t *r, const char *code, const char *message)
{
    assert_int_equal(r->outcome.kind, TASK_FAILED);
    assert_string_equal(r->outcome.code, code);
    assert_string_equal(r->outcome.message, message);
}

static const char *result_str(const harness_run_t *r, const char *key)
{
    const char *s = json_string_value(json_object_get(r->outcome.result, key));
    assert_non_null(s);
    return s;
}

static void test_result_shape(void **state)
{
    harness_run_t r;
    run(state, "{\"argv\": [\"sh\", \"-c\", \"echo out; echo err >&2\"]}", &r);
    assert_done(&r);
    const json_t *res = r.outcome.result;
    assert_int_equal(json_object_size(res), 4);
    assert_int_equal(json_integer_value(json_object_get(res, "exit_status")), 0);
    assert_string_equal(result_str(&r, "stdout"), "out\n");
    assert_string_equal(result_str(&r, "stderr"), "err\n");
    assert_true(json_is_integer(json_object_get(res, "elapsed_ms")));
    assert_in_range(json_integer_value(json_object_get(res, "elapsed_ms")), 0, BOUND_MS);
    harness_run_dispose(&r);
}

static void test_nonzero_exit(void **state)
{
    harness_run_t r;
    run(state, "{\"argv\": [\"sh\", \"-c\", \"echo partial; echo disk full >&2; exit 4\"]}", &r);
    assert_failed(&r, "ExecNonZeroExit", "exited with status 4: disk full");
    harness_run_dispose(&r);

    run(state, "{\"argv\": [\"false\"]}", &r);
    assert_failed(&r, "ExecNonZeroExit", "exited with status 1 (no stderr)");
    harness_run_dispose(&r);
}

static void test_killed_by_signal(void **state)
{
    harness_run_t r;
    run(state, "{\"argv\": [\"sh\", \"-c\", \"echo dying >&2; kill -KILL $$\"]}", &r);
    assert_failed(&r, "ExecKilled", "killed by signal 9 (SIGKILL): dying");
    harness_run_dispose(&r);
}

static void test_timeout(void **state)
{
    harness_run_t r;
    run(state, "{\"argv\": [\"sleep\", \"30\"], \"timeout_ms\": 200}", &r);
    assert_failed(&r, "ExecTimeout",
                  "timed out after 200 ms, killed by signal 15 (SIGTERM) (no stderr)");
    assert_true(r.elapsed_ms < 2000);
    harness_run_dispose(&r);
}

static void test_spawn_error(void **state)
{
    harness_run_t r;
    run(state, "{\"argv\": [\"/bin/nope\", \"x\"]}", &r);
    assert_failed(&r, "ExecSpawnError", "spawn \"/bin/nope\": no such file or directory");
    harness_run_dispose(&r);
}

static void test_no_shell_unless_asked(void **state)
{
    harness_run_t r;
    /* Without a shell, shell syntax is just arguments. */
    run(state, "{\"argv\": [\"echo\", \"$HOME\", \"|\", \"x\"]}", &r);
    assert_done(&r);
    assert_string_equal(result_str(&r, "stdout"), "$HOME | x\n");
    harness_run_dispose(&r);

    run(state, "{\"argv\": \"echo $((1 + 2)) | tr 3 x\", \"shell\": true}", &r);
    assert_done(&r);
    assert_string_equal(result_str(&r, "stdout"), "x\n");
    harness_run_dispose(&r);

    run(state, "{\"argv\": \"echo hi\"}", &r);
    assert_failed(&r, "InvalidArgument",
                  "argv: expected an array of strings, got a string; a command line runs "
                  "through /bin/sh only with \"shell\": true");
    harness_run_dispose(&r);

    run(state, "{\"argv\": [\"echo\", \"hi\"], \"shell\": true}", &r);
    assert_failed(&r, "InvalidArgument",
                  "argv: with \"shell\": true, expected one non-empty string (the command line "
                  "for /bin/sh -c), got array");
    harness_run_dispose(&r);
}

static void test_minimal_environment(void **state)
{
    setenv("TERN_EXEC_TEST", "from-ternd", 1);
    harness_run_t r;
    run(state, "{\"argv\": [\"env\"]}", &r);
    assert_done(&r);
    assert_string_equal(result_str(&r, "stdout"), "PATH=/usr/local/bin:/usr/bin:/bin\n");
    harness_run_dispose(&r);

    run(state, "{\"argv\": [\"env\"], \"env\": {\"A\": \"1\", \"B\": \"two words\"}}", &r);
    assert_done(&r);
    assert_string_equal(result_str(&r, "stdout"),
                        "PATH=/usr/local/bin:/usr/bin:/bin\nA=1\nB=two words\n");
    harness_run_dispose(&r);

    run(state, "{\"argv\": [\"env\"], \"env\": {\"PATH\": \"/bin\"}}", &r);
    assert_done(&r);
    assert_string_equal(result_str(&r, "stdout"), "PATH=/bin\n");
    harness_run_dispose(&r);

    /* Inherited, with env on top. */
    run(state, "{\"argv\": [\"env\"], \"inherit_env\": true}", &r);
    assert_done(&r);
    assert_non_null(strstr(result_str(&r, "stdout"), "TERN_EXEC_TEST=from-ternd\n"));
    harness_run_dispose(&r);

    run(state,
        "{\"argv\": [\"env\"], \"inherit_env\": true, \"env\": {\"TERN_EXEC_TEST\": \"step\"}}",
        &r);
    assert_done(&r);
    const char *out = result_str(&r, "stdout");
    assert_non_null(strstr(out, "TERN_EXEC_TEST=step\n"));
    assert_null(strstr(out, "from-ternd"));
    harness_run_dispose(&r);
    unsetenv("TERN_EXEC_TEST");
}

static void test_cwd_stdin_tail(void **state)
{
    harness_run_t r;
    run(state, "{\"argv\": [\"pwd\"], \"cwd\": \"/tmp\"}", &r);
    assert_done(&r);
    assert_string_equal(result_str(&r, "stdout"), "/tmp\n");
    harness_run_dispose(&r);

    run(state, "{\"argv\": [\"cat\"], \"stdin\": \"hello\\nworld\"}", &r);
    assert_done(&r);
    assert_string_equal(result_str(&r, "stdout"), "hello\nworld");
    harness_run_dispose(&r);

    run(state, "{\"argv\": [\"seq\", \"1\", \"1000\"], \"tail_bytes\": 9}", &r);
    assert_done(&r);
    assert_string_equal(result_str(&r, "stdout"), "999\n1000\n");
    harness_run_dispose(&r);
}

static void test_invalid_arguments(void **state)
{
    static const struct {
        const char *args;
        const char *message;
    } cases[] = {
        {"{\"argv\": []}", "argv: expected a non-empty array of strings, got an empty array"},
        {"{}", "argv: expected a non-empty array of strings, got nothing"},
        {"{\"argv\": [\"ls\", 3]}", "argv[1]: expected string, got integer"},
        {"{\"argv\": [\"\"]}", "argv[0]: empty program name"},
        {"{\"argv\": [\"ls\"], \"env\": {\"A\": 1}}", "env.A: expected string, got integer"},
        {"{\"argv\": [\"ls\"], \"env\": {\"A=B\": \"x\"}}", "env: invalid variable name \"A=B\""},
        {"{\"argv\": [\"ls\"], \"env\": []}", "env: expected object, got array"},
        {"{\"argv\": [\"ls\"], \"timeout_ms\": -1}", "timeout_ms: -1 is out of range 0.."},
        {"{\"argv\": [\"ls\"], \"tail_bytes\": 2000000}",
         "tail_bytes: 2000000 is out of range 0..1048576"},
        {"{\"argv\": [\"ls\"], \"timeout_ms\": \"5\"}", "timeout_ms: expected integer, got string"},
        {"{\"argv\": [\"ls\"], \"shell\": \"yes\"}", "shell: expected boolean, got string"},
        {"{\"argv\": [\"ls\"], \"cwd\": 5}", "cwd: expected string, got integer"},
        {"{\"argv\": [\"ls\"], \"stdin\": []}", "stdin: expected string, got array"},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(cases); i++) {
        harness_run_t r;
        run(state, cases[i].args, &r);
        assert_int_equal(r.outcome.kind, TASK_FAILED);
        assert_string_equal(r.outcome.code, "InvalidArgument");
        if (strncmp(r.outcome.message, cases[i].message, strlen(cases[i].message)) != 0)
            fail_msg("%s: got \"%s\", expected \"%s\"", cases[i].args, r.outcome.message,
                     cases[i].message);
        harness_run_dispose(&r);
    }
}

static void test_cancel_kills_child(void **state)
{
    json_t *args = json_pack("{s:[s,s]}", "argv", "sleep", "30");
    harness_run_t r;
    uint64_t t0 = tern_mono_ms();
    int rc = task_harness_run(*state, "run", args, NULL, NULL, BOUND_MS, 100, &r);
    json_decref(args);
    assert_int_equal(rc, -ECANCELED);
    assert_false(r.finished);
    /* The run returns once the context is gone, i.e. once the child was reaped. */
    assert_true(tern_mono_ms() - t0 < 1900);
    harness_run_dispose(&r);
}

/* The real loader accepts exec.so, and its schema is what workflows are checked with. */
static void test_loader_accepts_exec(void **state)
{
    (void)state;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", exec_so);
    static const tern_host host = {.size = sizeof(tern_host)};
    char err[2 * PATH_MAX];
    plugin_registry_t *reg = plugin_registry_new(dirname(dir), &host, err, sizeof err);
    assert_non_null(reg);
    if (plugin_registry_load(reg, "exec.so", NULL, err, sizeof err) != 0)
        fail_msg("%s", err);
    const tern_task_def *def = plugin_registry_find(reg, "exec.run", NULL);
    assert_non_null(def);
    assert_true(plugin_task_code_is_fatal(def, "ExecSpawnError"));
    assert_true(plugin_task_code_is_fatal(def, "InvalidArgument"));
    assert_false(plugin_task_code_is_fatal(def, "ExecNonZeroExit"));
    assert_false(plugin_task_code_is_fatal(def, "ExecTimeout"));

    json_t *args =
        json_pack("{s:s, s:b, s:s}", "argv", "ls -l", "shell", 1, "timeout_ms", "${params.t}");
    assert_int_equal(plugin_registry_check_task(reg, "exec.run", args, "chain[0]", err, sizeof err),
                     0);
    json_decref(args);
    args = json_pack("{s:[s], s:b}", "argv", "ls", "shel", 1);
    assert_int_equal(plugin_registry_check_task(reg, "exec.run", args, "chain[0]", err, sizeof err),
                     TERN_EINVAL);
    assert_string_equal(err, "chain[0].args: unknown argument \"shel\"");
    json_decref(args);
    args = json_pack("{s:i}", "argv", 1);
    assert_int_equal(plugin_registry_check_task(reg, "exec.run", args, "chain[0]", err, sizeof err),
                     TERN_EINVAL);
    assert_string_equal(err, "chain[0].args.argv: expected array or string, got integer");
    json_decref(args);
    plugin_registry_free(reg);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s <path of exec.so>\n", argv[0]);
        return 1;
    }
    exec_so = argv[1];
    signal(SIGPIPE, SIG_IGN); /* as ternd does at start-up */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_result_shape),        cmocka_unit_test(test_nonzero_exit),
        cmocka_unit_test(test_killed_by_signal),    cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_spawn_error),         cmocka_unit_test(test_no_shell_unless_asked),
        cmocka_unit_test(test_minimal_environment), cmocka_unit_test(test_cwd_stdin_tail),
        cmocka_unit_test(test_invalid_arguments),   cmocka_unit_test(test_cancel_kills_child),
        cmocka_unit_test(test_loader_accepts_exec),
    };
    int failures = cmocka_run_group_tests_name("plugin_exec", tests, group_setup, group_teardown);
    return failures == 0 ? 0 : 1;
}
