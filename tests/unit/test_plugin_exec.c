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
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/error.h"
#include "model/template.h"
#include "plugins/plugin_loader.h"
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

/* A harness whose exec plugin has the configuration given as JSON text. */
static task_harness_t *harness_with(const char *config_text)
{
    json_t *config = task_harness_json(config_text);
    task_harness_t *h = task_harness_new(exec_so, config);
    json_decref(config);
    return h;
}

/* Runs exec.run with args given as JSON text (no templates expanded). */
static void run_in(task_harness_t *h, const char *args_text, harness_run_t *out)
{
    json_t *args = task_harness_json(args_text);
    int rc = task_harness_run(h, "run", args, NULL, NULL, BOUND_MS, 0, out);
    json_decref(args);
    assert_int_equal(rc, 0);
    assert_true(out->finished);
}

static void run(void **state, const char *args_text, harness_run_t *out)
{
    run_in(*state, args_text, out);
}

/* The real loader with exec.so and `config_text` (JSON; NULL for none). */
static plugin_registry_t *registry_with(const char *config_text)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", exec_so);
    static const tern_host host = {.size = sizeof(tern_host)};
    char err[2 * PATH_MAX];
    plugin_registry_t *reg = plugin_registry_new(dirname(dir), &host, err, sizeof err);
    assert_non_null(reg);
    json_t *config = config_text != NULL ? task_harness_json(config_text) : NULL;
    if (plugin_registry_load(reg, "exec.so", config, err, sizeof err) != 0)
        fail_msg("%s", err);
    json_decref(config);
    return reg;
}

/* What storing a workflow with this step says: 0, or the code with its message in err. */
static int store_check(plugin_registry_t *reg, const char *args_text, char *err, size_t errlen)
{
    json_t *args = task_harness_json(args_text);
    int rc = plugin_registry_check_task(reg, "exec.run", args, "chain[0]", err, errlen);
    json_decref(args);
    return rc;
}

/* Runs a step as the runner does: its args' templates expanded against `params_text`
 * by the engine (plugin_registry_expand_args), then exec.run started with the result.
 * Returns 0, or TERN_EINVAL when expansion failed. */
static int run_step(task_harness_t *h, plugin_registry_t *reg, const char *args_text,
                    const char *params_text, harness_run_t *out)
{
    json_t *tmpl = task_harness_json(args_text), *params = task_harness_json(params_text);
    template_scope_t scope = {.params = params};
    char err[512];
    json_t *args = plugin_registry_expand_args(reg, "exec.run", tmpl, "chain[0].args", &scope, err,
                                               sizeof err);
    json_decref(tmpl);
    if (args == NULL) {
        json_decref(params);
        return TERN_EINVAL;
    }
    int rc = task_harness_run(h, "run", args, params, NULL, BOUND_MS, 0, out);
    json_decref(args);
    json_decref(params);
    assert_int_equal(rc, 0);
    assert_true(out->finished);
    return 0;
}

/* A path that does not exist yet, unique to this process and call. */
static void marker_path(char *out, size_t len)
{
    static unsigned n;
    snprintf(out, len, "/tmp/tern-exec-marker-%ld-%u", (long)getpid(), n++);
    unlink(out);
}

static void assert_no_file(const char *path)
{
    if (access(path, F_OK) == 0) {
        unlink(path);
        fail_msg("%s was created: a template's value ran as shell code", path);
    }
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

/* Runs exec.run under a configuration and asserts it succeeds printing `want`. */
static void assert_stdout_with(const char *config_text, const char *args_text, const char *want)
{
    task_harness_t *h = harness_with(config_text);
    harness_run_t r;
    run_in(h, args_text, &r);
    assert_done(&r);
    assert_string_equal(result_str(&r, "stdout"), want);
    harness_run_dispose(&r);
    task_harness_free(h);
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

    task_harness_t *shell_ok = harness_with("{\"allow_shell\": true}");
    run_in(shell_ok, "{\"argv\": \"echo $((1 + 2)) | tr 3 x\", \"shell\": true}", &r);
    assert_done(&r);
    assert_string_equal(result_str(&r, "stdout"), "x\n");
    harness_run_dispose(&r);
    task_harness_free(shell_ok);

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
    uint64_t t0 = clock_mono_ms();
    int rc = task_harness_run(*state, "run", args, NULL, NULL, BOUND_MS, 100, &r);
    json_decref(args);
    assert_int_equal(rc, -ECANCELED);
    assert_false(r.finished);
    /* The run returns once the context is gone, i.e. once the child was reaped. */
    assert_true(clock_mono_ms() - t0 < 1900);
    harness_run_dispose(&r);
}

/* ---- what the configuration allows ------------------------------------------- */

#define SHELL_REFUSED                                                                              \
    "\"shell\": true is not allowed; the exec plugin's configuration must say "                    \
    "\"allow_shell\": true ({\"plugins\": {\"exec\": {\"allow_shell\": true}}})"

static void test_shell_refused_by_default(void **state)
{
    char marker[64], args[256], err[1024];
    marker_path(marker, sizeof marker);
    snprintf(args, sizeof args, "{\"argv\": \"touch %s\", \"shell\": true}", marker);

    /* The default configuration: refused at run time, and nothing ran. */
    harness_run_t r;
    run(state, args, &r);
    assert_failed(&r, "ExecNotAllowed", SHELL_REFUSED);
    harness_run_dispose(&r);
    assert_no_file(marker);

    /* ... and when the workflow is stored, with the step's path. */
    plugin_registry_t *reg = registry_with(NULL);
    assert_int_equal(store_check(reg, args, err, sizeof err), TERN_EINVAL);
    assert_string_equal(err, "chain[0].args.shell: " SHELL_REFUSED);
    assert_int_equal(store_check(reg, "{\"argv\": [\"true\"]}", err, sizeof err), 0);
    plugin_registry_free(reg);

    /* Allowed: stored, and it runs. */
    reg = registry_with("{\"allow_shell\": true}");
    assert_int_equal(store_check(reg, args, err, sizeof err), 0);
    plugin_registry_free(reg);
    task_harness_t *h = harness_with("{\"allow_shell\": true}");
    run_in(h, args, &r);
    assert_done(&r);
    harness_run_dispose(&r);
    task_harness_free(h);
    assert_int_equal(access(marker, F_OK), 0);
    unlink(marker);
}

static void test_configuration_refused_at_load(void **state)
{
    (void)state;
    static const struct {
        const char *config;
        const char *message;
    } cases[] = {
        {"{\"allow_shel\": true}",
         "unknown setting \"allow_shel\" (expected allow_shell, programs, user)"},
        {"{\"allow_shell\": 1}", "allow_shell: expected boolean, got integer"},
        {"{\"programs\": \"cp\"}", "programs: expected an array of program names or paths"},
        {"{\"programs\": [\"bin/cp\"]}", "programs[0]: \"bin/cp\" is a relative path"},
        {"{\"programs\": [\"cp\", \"no-such-program-x\"]}",
         "programs[1]: \"no-such-program-x\" is not an executable file in /usr/local/bin"},
        {"{\"user\": \"no-such-user-x\"}", "user \"no-such-user-x\": no such user"},
    };
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", exec_so);
    static const tern_host host = {.size = sizeof(tern_host)};
    char err[2 * PATH_MAX];
    plugin_registry_t *reg = plugin_registry_new(dirname(dir), &host, err, sizeof err);
    assert_non_null(reg);
    for (size_t i = 0; i < TERN_ARRAY_SIZE(cases); i++) {
        json_t *config = task_harness_json(cases[i].config);
        assert_int_not_equal(plugin_registry_load(reg, "exec.so", config, err, sizeof err), 0);
        json_decref(config);
        if (strstr(err, cases[i].message) == NULL)
            fail_msg("%s: got \"%s\", expected \"%s\"", cases[i].config, err, cases[i].message);
    }
    plugin_registry_free(reg);
}

static void test_programs_allowlist(void **state)
{
    (void)state;
    char err[1024];
    task_harness_t *h = harness_with("{\"programs\": [\"echo\", \"/usr/bin/env\"]}");
    harness_run_t r;
    run_in(h, "{\"argv\": [\"echo\", \"hi\"]}", &r);
    assert_done(&r);
    assert_string_equal(result_str(&r, "stdout"), "hi\n");
    harness_run_dispose(&r);
    run_in(h, "{\"argv\": [\"/bin/echo\", \"via /bin\"]}", &r); /* same file by realpath */
    assert_done(&r);
    harness_run_dispose(&r);

    char cat_real[PATH_MAX], want[PATH_MAX + 128];
    assert_non_null(realpath("/usr/bin/cat", cat_real));
    snprintf(want, sizeof want,
             "program \"cat\" (%s) is not allowed: it is not in the exec plugin's \"programs\" "
             "list",
             cat_real);
    run_in(h, "{\"argv\": [\"cat\", \"/etc/hostname\"]}", &r);
    assert_failed(&r, "ExecNotAllowed", want);
    harness_run_dispose(&r);

    /* A program named "echo" planted in the step's cwd does not pass for echo, even with
     * the cwd first in PATH. */
    char dir[] = "/tmp/tern-exec-plant-XXXXXX", planted[PATH_MAX], marker[64];
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chmod(dir, 0755), 0);
    marker_path(marker, sizeof marker);
    snprintf(planted, sizeof planted, "%s/echo", dir);
    FILE *f = fopen(planted, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\ntouch %s\n", marker);
    fclose(f);
    assert_int_equal(chmod(planted, 0755), 0);
    char args[PATH_MAX + 256];
    snprintf(args, sizeof args,
             "{\"argv\": [\"echo\", \"x\"], \"cwd\": \"%s\", \"env\": {\"PATH\": \".:/usr/bin\"}}",
             dir);
    run_in(h, args, &r);
    assert_int_equal(r.outcome.kind, TASK_FAILED);
    assert_string_equal(r.outcome.code, "ExecNotAllowed");
    assert_non_null(strstr(r.outcome.message, "/echo) is not allowed"));
    harness_run_dispose(&r);
    snprintf(args, sizeof args, "{\"argv\": [\"./echo\"], \"cwd\": \"%s\"}", dir);
    run_in(h, args, &r);
    assert_string_equal(r.outcome.code, "ExecNotAllowed");
    harness_run_dispose(&r);
    assert_no_file(marker);
    unlink(planted);
    rmdir(dir);
    task_harness_free(h);

    /* Stored: a literal program outside the list is refused with its path. */
    plugin_registry_t *reg = registry_with("{\"programs\": [\"echo\"], \"allow_shell\": true}");
    assert_int_equal(store_check(reg, "{\"argv\": [\"cat\"]}", err, sizeof err), TERN_EINVAL);
    snprintf(want, sizeof want, "chain[0].args.argv[0]: program \"cat\" (%s) is not allowed",
             cat_real);
    assert_int_equal(strncmp(err, want, strlen(want)), 0);
    assert_int_equal(store_check(reg, "{\"argv\": [\"echo\"]}", err, sizeof err), 0);
    /* A shell step needs the shell itself among the programs. */
    assert_int_equal(store_check(reg, "{\"argv\": \"echo x\", \"shell\": true}", err, sizeof err),
                     TERN_EINVAL);
    assert_non_null(strstr(err, "chain[0].args.shell: program \"/bin/sh\""));
    assert_non_null(strstr(err, "(a shell step needs the shell, /bin/sh, among the programs)"));
    plugin_registry_free(reg);

    h = harness_with("{\"programs\": [\"echo\"], \"allow_shell\": true}");
    run_in(h, "{\"argv\": \"echo x\", \"shell\": true}", &r);
    assert_string_equal(r.outcome.code, "ExecNotAllowed");
    harness_run_dispose(&r);
    task_harness_free(h);
    assert_stdout_with("{\"programs\": [\"sh\"], \"allow_shell\": true}",
                       "{\"argv\": \"echo x\", \"shell\": true}", "x\n");
}

/* A program that acts on the name it is run by is allowed only by that name: "rbash"
 * listed does not let "bash" (the same file) run unrestricted. */
static void test_programs_alias_refused(void **state)
{
    (void)state;
    struct stat st;
    if (lstat("/usr/bin/rbash", &st) != 0 || !S_ISLNK(st.st_mode))
        skip(); /* Debian's rbash is a symlink to bash */
    task_harness_t *h = harness_with("{\"programs\": [\"rbash\"]}");
    harness_run_t r;
    run_in(h, "{\"argv\": [\"bash\", \"-c\", \"cd / && echo unrestricted\"]}", &r);
    if (r.outcome.kind == TASK_DONE)
        fail_msg("bash ran: %s", result_str(&r, "stdout"));
    assert_string_equal(r.outcome.code, "ExecNotAllowed");
    assert_non_null(strstr(r.outcome.message, "program \"bash\" (/usr/bin/bash) is not allowed: "
                                              "it is \"rbash\" of the exec plugin's \"programs\" "
                                              "list under another name"));
    harness_run_dispose(&r);
    /* by its own name it runs, and restricted: cd is refused */
    run_in(h, "{\"argv\": [\"rbash\", \"-c\", \"cd / && echo unrestricted\"]}", &r);
    assert_int_equal(r.outcome.kind, TASK_FAILED);
    assert_string_equal(r.outcome.code, "ExecNonZeroExit");
    assert_non_null(strstr(r.outcome.message, "restricted"));
    harness_run_dispose(&r);
    task_harness_free(h);
}

/* ---- templates and the shell ------------------------------------------------- */

/* Runs a shell step whose script is `script` (JSON string contents) with params. */
static void shell_step(task_harness_t *h, plugin_registry_t *reg, const char *script,
                       json_t *params, harness_run_t *r)
{
    json_t *args = json_pack("{s:s, s:b}", "argv", script, "shell", 1);
    char *args_text = json_dumps(args, 0), *params_text = json_dumps(params, 0);
    assert_int_equal(run_step(h, reg, args_text, params_text, r), 0);
    free(args_text);
    free(params_text);
    json_decref(args);
}

static void test_templates_never_reach_the_shell(void **state)
{
    (void)state;
    task_harness_t *h = harness_with("{\"allow_shell\": true}");
    plugin_registry_t *reg = registry_with("{\"allow_shell\": true}");
    char marker[64], value[256], want[512];
    harness_run_t r;

    /* The reproduction: a value with a command separator is printed, not run. */
    marker_path(marker, sizeof marker);
    snprintf(value, sizeof value, "x; touch %s", marker);
    json_t *params = json_pack("{s:s}", "name", value);
    shell_step(h, reg, "echo hello ${params.name}", params, &r);
    assert_no_file(marker);
    assert_done(&r);
    snprintf(want, sizeof want, "hello %s\n", value);
    assert_string_equal(result_str(&r, "stdout"), want);
    harness_run_dispose(&r);
    json_decref(params);

    /* Each value in each quoting context comes out as written, as one word. */
    static const char *const contexts[] = {
        "printf '<%s>' ${params.v}",                      /* unquoted */
        "printf '<%s>' \"${params.v}\"",                  /* double quotes */
        "printf '<%s>' '${params.v}'",                    /* single quotes */
        "printf '<%s>' \"$(printf %s \"${params.v}\")\"", /* inside $(...) */
        "printf '<%s>' pre${params.v}post",               /* glued to literal text */
    };
    static const char *const values[] = {
        "x; touch MARKER",
        "$(touch MARKER)",
        "`touch MARKER`",
        "a\ntouch MARKER\n#",
        "' ; touch MARKER; '",
        "\" ; touch MARKER; \"",
        "*",
        "a  b\tc",
        "${HOME} $1 $@ \\",
    };
    for (size_t c = 0; c < TERN_ARRAY_SIZE(contexts); c++) {
        for (size_t v = 0; v < TERN_ARRAY_SIZE(values); v++) {
            marker_path(marker, sizeof marker);
            char text[256] = "";
            const char *m = strstr(values[v], "MARKER");
            if (m != NULL)
                snprintf(text, sizeof text, "%.*s%s%s", (int)(m - values[v]), values[v], marker,
                         m + 6);
            else
                snprintf(text, sizeof text, "%s", values[v]);
            params = json_pack("{s:s}", "v", text);
            shell_step(h, reg, contexts[c], params, &r);
            assert_no_file(marker);
            if (r.outcome.kind != TASK_DONE)
                fail_msg("%s with %s: %s: %s", contexts[c], text, r.outcome.code,
                         r.outcome.message);
            if (c == 4)
                snprintf(want, sizeof want, "<pre%spost>", text);
            else
                snprintf(want, sizeof want, "<%s>", text);
            /* $(...) strips trailing newlines, as command substitution always does. */
            if (c == 3) {
                size_t n = strlen(want);
                while (n > 2 && want[n - 2] == '\n') {
                    want[n - 2] = '>';
                    want[--n] = '\0';
                }
            }
            if (strcmp(result_str(&r, "stdout"), want) != 0)
                fail_msg("%s with \"%s\": got \"%s\", expected \"%s\"", contexts[c], text,
                         result_str(&r, "stdout"), want);
            harness_run_dispose(&r);
            json_decref(params);
        }
    }

    /* Several templates, non-string values, and "$${" stays literal text. */
    params = json_pack("{s:s, s:i, s:{s:b}}", "a", "1 2", "n", 3, "o", "k", 1);
    shell_step(h, reg, "printf '<%s>' ${params.a} \"${params.n}\" '${params.o}' '$${x}'", params,
               &r);
    assert_done(&r);
    assert_string_equal(result_str(&r, "stdout"), "<1 2><3><{\"k\":true}><${x}>");
    harness_run_dispose(&r);
    json_decref(params);

    /* Backticks, and an arithmetic expansion before a template, keep the count. */
    params = json_pack("{s:s}", "v", "a  b;`touch x`");
    shell_step(h, reg, "printf '<%s>' $((1 + (2))) \"`printf %s ${params.v}`\"", params, &r);
    assert_done(&r);
    assert_string_equal(result_str(&r, "stdout"), "<3><a  b;`touch x`>");
    harness_run_dispose(&r);
    json_decref(params);

    /* Inside $((...)) a value would be read as an expression: refused. */
    params = json_pack("{s:s}", "v", "1");
    shell_step(h, reg, "echo $(( ${params.v} + 1 ))", params, &r);
    assert_failed(&r, "InvalidArgument",
                  "argv: template 1 is inside $((...)), where the shell reads a value as an "
                  "expression (bash runs the command substitutions in one); check the value in "
                  "the script before any arithmetic");
    harness_run_dispose(&r);
    json_decref(params);

    /* A backslash right before a template is refused rather than guessed at. */
    params = json_pack("{s:s}", "v", "x");
    shell_step(h, reg, "echo \\${params.v}", params, &r);
    assert_failed(&r, "InvalidArgument",
                  "argv: template 1 follows a backslash, which would quote the shell syntax "
                  "around its value; remove the backslash");
    harness_run_dispose(&r);
    json_decref(params);

    plugin_registry_free(reg);
    task_harness_free(h);
}

/* Scripts an author may well write, where reading the quoting wrongly would leave a
 * reference unquoted, so that the shell splits the value into words (an option among
 * them): each keeps the value one word, or is refused saying what is not followed. */
static void test_shell_quoting_misread_is_refused(void **state)
{
    (void)state;
    task_harness_t *h = harness_with("{\"allow_shell\": true}");
    plugin_registry_t *reg = registry_with("{\"allow_shell\": true}");
    /* a template inside command substitutions nested deeper than the lexer follows */
    char deep[1024] = "printf '<%s>' ";
    for (int d = 0; d < 16; d++)
        strcat(deep, "\"$(printf %s ");
    strcat(deep, "\"${params.v}\"");
    for (int d = 0; d < 16; d++)
        strcat(deep, ")\"");
    const struct {
        const char *script;
        const char *refusal; /* NULL: runs and prints `want` */
        const char *want;
    } cases[] = {
        /* a quote in a comment; "#" inside a word or ${#x} is no comment */
        {"# it's here\nprintf '<%s>' \"${params.v}\"", NULL, "<a  b -x>"},
        {"x=a#'b'; y=$${#x}; printf '<%s>' ${params.v} \"$y\"", NULL, "<a  b -x><3>"},
        {"printf '<%s>' ${params.v}#'it' \"${params.v}\"", NULL, "<a  b -x#it><a  b -x>"},
        /* a quote in a here-document */
        {"cat <<EOF >/dev/null\nit's\nEOF\nprintf '<%s>' \"${params.v}\"",
         "template 1 comes after a here-document (<<)"},
        /* a case pattern's ")" inside $(...) */
        {"printf '<%s>' \"$(case x in x) printf %s ${params.v};; esac)\"",
         "template 1 comes after a case statement inside parentheses or $(...)"},
        /* escaped double quotes inside backquotes inside double quotes */
        {"printf '<%s>' \"`printf %s \\\"${params.v}\\\"`\"",
         "template 1 comes after a backslash inside backquotes"},
        {deep, "template 1 comes after command substitutions nested more than 15 deep"},
    };
    json_t *params = json_pack("{s:s}", "v", "a  b -x");
    for (size_t i = 0; i < TERN_ARRAY_SIZE(cases); i++) {
        harness_run_t r;
        shell_step(h, reg, cases[i].script, params, &r);
        if (cases[i].refusal == NULL) {
            if (r.outcome.kind != TASK_DONE)
                fail_msg("case %zu: %s: %s", i, r.outcome.code, r.outcome.message);
            /* printf prints one "<...>" per argument */
            if (strcmp(result_str(&r, "stdout"), cases[i].want) != 0)
                fail_msg("case %zu split the value: \"%s\"", i, result_str(&r, "stdout"));
        } else {
            if (r.outcome.kind == TASK_DONE)
                fail_msg("case %zu ran: \"%s\"", i, result_str(&r, "stdout"));
            assert_string_equal(r.outcome.code, "InvalidArgument");
            if (strstr(r.outcome.message, cases[i].refusal) == NULL)
                fail_msg("case %zu: %s", i, r.outcome.message);
        }
        harness_run_dispose(&r);
    }
    json_decref(params);
    plugin_registry_free(reg);
    task_harness_free(h);
}

/* ["sh", "-c", SCRIPT] in an argv array: a template in the script would be code, so
 * it is refused; the value goes after the script, as "$1". */
static void test_argv_shell_script_template_refused(void **state)
{
    task_harness_t *h = *state;
    plugin_registry_t *reg = registry_with(NULL);
    char marker[64], params[512], want[512];
    harness_run_t r;
    marker_path(marker, sizeof marker);
    snprintf(params, sizeof params, "{\"v\": \"x; touch %s\"}", marker);
    static const char *const refused[] = {
        "{\"argv\": [\"sh\", \"-c\", \"echo ${params.v}\"]}",
        "{\"argv\": [\"/bin/bash\", \"-ec\", \"echo '${params.v}'\"]}",
        "{\"argv\": [\"bash\", \"-o\", \"pipefail\", \"-c\", \"echo ${params.v}\", \"sh\"]}",
        "{\"argv\": [\"dash\", \"-e\", \"-c\", \"echo \\\"${params.v}\\\"\"]}",
        "{\"argv\": [\"timeout\", \"5\", \"sh\", \"-c\", \"echo ${params.v}\"]}",
        "{\"argv\": [\"env\", \"X=1\", \"/bin/sh\", \"-xc\", \"echo ${params.v}\"]}",
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(refused); i++) {
        assert_int_equal(run_step(h, reg, refused[i], params, &r), 0);
        assert_no_file(marker);
        if (r.outcome.kind == TASK_DONE)
            fail_msg("%s ran: %s", refused[i], result_str(&r, "stdout"));
        assert_string_equal(r.outcome.code, "InvalidArgument");
        assert_non_null(strstr(r.outcome.message, "would make its value shell code"));
        harness_run_dispose(&r);
    }
    /* The value after the script is an argument of the script: printed, not run. */
    assert_int_equal(
        run_step(
            h, reg,
            "{\"argv\": [\"sh\", \"-c\", \"printf '<%s>' \\\"$1\\\"\", \"sh\", \"${params.v}\"]}",
            params, &r),
        0);
    assert_done(&r);
    snprintf(want, sizeof want, "<x; touch %s>", marker);
    assert_string_equal(result_str(&r, "stdout"), want);
    harness_run_dispose(&r);
    /* A script file named by a template is no -c script. */
    assert_int_equal(
        run_step(h, reg, "{\"argv\": [\"sh\", \"${params.f}\"]}", "{\"f\": \"/dev/null\"}", &r), 0);
    assert_done(&r);
    harness_run_dispose(&r);
    assert_no_file(marker);
    plugin_registry_free(reg);
}

static void test_argv_values_stay_one_argument(void **state)
{
    task_harness_t *h = *state;
    plugin_registry_t *reg = registry_with(NULL);
    char marker[64], params[512], want[512];
    harness_run_t r;

    marker_path(marker, sizeof marker);
    snprintf(params, sizeof params, "{\"v\": \"a b; touch %s\", \"opt\": \"-n\", \"n\": 2}",
             marker);
    assert_int_equal(
        run_step(h, reg, "{\"argv\": [\"printf\", \"<%s>\", \"${params.v}\", \"${params.n}\"]}",
                 params, &r),
        0);
    assert_no_file(marker);
    assert_done(&r);
    snprintf(want, sizeof want, "<a b; touch %s><2>", marker);
    assert_string_equal(result_str(&r, "stdout"), want);
    harness_run_dispose(&r);

    /* A value cannot add an option ... */
    assert_int_equal(
        run_step(h, reg, "{\"argv\": [\"echo\", \"${params.opt}\", \"x\"]}", params, &r), 0);
    assert_failed(&r, "InvalidArgument",
                  "argv[1]: the value of a template, \"-n\", begins the argument with '-', which "
                  "the program would read as an option; write a literal \"--\" argument before "
                  "it, or text before the template");
    harness_run_dispose(&r);
    /* ... unless the author ends the options or writes text before it. */
    assert_int_equal(run_step(h, reg,
                              "{\"argv\": [\"printf\", \"--\", \"<%s>\", \"${params.opt}\"]}",
                              params, &r),
                     0);
    assert_done(&r);
    assert_string_equal(result_str(&r, "stdout"), "<-n>");
    harness_run_dispose(&r);
    assert_int_equal(
        run_step(h, reg, "{\"argv\": [\"printf\", \"<%s>\", \"x=${params.opt}\"]}", params, &r), 0);
    assert_done(&r);
    assert_string_equal(result_str(&r, "stdout"), "<x=-n>");
    harness_run_dispose(&r);

    /* A whole argv from the job, and a string without a shell, as before. */
    assert_int_equal(run_step(h, reg, "{\"argv\": \"${params.cmd}\"}",
                              "{\"cmd\": [\"printf\", \"<%s>\", \"-x\"]}", &r),
                     0);
    assert_done(&r);
    assert_string_equal(result_str(&r, "stdout"), "<-x>");
    harness_run_dispose(&r);
    assert_int_equal(run_step(h, reg, "{\"argv\": \"echo ${params.v}\"}", params, &r), 0);
    assert_failed(&r, "InvalidArgument",
                  "argv: expected an array of strings, got a string; a command line runs "
                  "through /bin/sh only with \"shell\": true");
    harness_run_dispose(&r);
    plugin_registry_free(reg);
}

/* ---- whom children run as ------------------------------------------------------ */

static void test_runs_as_unprivileged_user(void **state)
{
    if (geteuid() != 0) {
        printf("# skipped test_runs_as_unprivileged_user: needs root (euid %u)\n",
               (unsigned)geteuid());
        return;
    }
    struct passwd *pw = getpwnam("nobody");
    assert_non_null(pw);
    char want[64];
    snprintf(want, sizeof want, "%u\n%u\n", (unsigned)pw->pw_uid, (unsigned)pw->pw_gid);
    /* The default as root: nobody, with its group only (ternd's supplementary groups,
     * given here so that there are some, are dropped). */
    gid_t saved[64];
    int n_saved = getgroups(64, saved);
    assert_true(n_saved >= 0);
    const gid_t extra[] = {0, 4};
    assert_int_equal(setgroups(2, extra), 0);
    harness_run_t r;
    run(state, "{\"argv\": [\"sh\", \"-c\", \"id -u; id -G\"]}", &r);
    assert_int_equal(setgroups((size_t)n_saved, saved), 0);
    assert_done(&r);
    assert_string_equal(result_str(&r, "stdout"), want);
    harness_run_dispose(&r);

    pw = getpwnam("daemon");
    assert_non_null(pw);
    snprintf(want, sizeof want, "%u\n%u\n", (unsigned)pw->pw_uid, (unsigned)pw->pw_gid);
    assert_stdout_with("{\"user\": \"daemon\"}", "{\"argv\": [\"sh\", \"-c\", \"id -u; id -G\"]}",
                       want);

    /* Root only when the configuration says so. */
    assert_stdout_with("{\"user\": \"root\"}", "{\"argv\": [\"id\", \"-u\"]}", "0\n");
}

/* A cwd the step's user may not reach is refused: the permissions of the directories
 * on its path hold for the child as they would for that user (the chdir is not made
 * with ternd's rights). Here the cwd itself is open to all, inside a root-only one. */
static void test_cwd_checked_as_the_step_user(void **state)
{
    if (geteuid() != 0) {
        printf("# skipped test_cwd_checked_as_the_step_user: needs root (euid %u)\n",
               (unsigned)geteuid());
        return;
    }
    char dir[] = "/tmp/tern-exec-private-XXXXXX", open_dir[128], file[256];
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chmod(dir, 0700), 0);
    snprintf(open_dir, sizeof open_dir, "%s/open", dir);
    assert_int_equal(mkdir(open_dir, 0755), 0);
    assert_int_equal(chmod(open_dir, 0755), 0);
    snprintf(file, sizeof file, "%s/readable", open_dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("not for nobody\n", f);
    fclose(f);
    assert_int_equal(chmod(file, 0644), 0);
    char args[PATH_MAX + 128];
    snprintf(args, sizeof args, "{\"argv\": [\"cat\", \"readable\"], \"cwd\": \"%s\"}", open_dir);
    harness_run_t r;
    run(state, args, &r);
    if (r.outcome.kind == TASK_DONE)
        fail_msg("nobody read a file below a root-only directory: %s", result_str(&r, "stdout"));
    assert_string_equal(r.outcome.code, "ExecSpawnError");
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "cwd \"%s\": permission denied", open_dir);
    if (strstr(r.outcome.message, want) == NULL)
        fail_msg("%s", r.outcome.message);
    harness_run_dispose(&r);
    unlink(file);
    rmdir(open_dir);
    rmdir(dir);
}

/* The real loader accepts exec.so, and its schema is what workflows are checked with. */
static void test_loader_accepts_exec(void **state)
{
    (void)state;
    char err[2 * PATH_MAX];
    plugin_registry_t *reg = registry_with("{\"allow_shell\": true}");
    const tern_task_def *def = plugin_registry_find(reg, "exec.run", NULL);
    assert_non_null(def);
    assert_true(plugin_task_code_is_fatal(def, "ExecSpawnError"));
    assert_true(plugin_task_code_is_fatal(def, "InvalidArgument"));
    assert_true(plugin_task_code_is_fatal(def, "ExecNotAllowed"));
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
        cmocka_unit_test(test_result_shape),
        cmocka_unit_test(test_nonzero_exit),
        cmocka_unit_test(test_killed_by_signal),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_spawn_error),
        cmocka_unit_test(test_no_shell_unless_asked),
        cmocka_unit_test(test_minimal_environment),
        cmocka_unit_test(test_cwd_stdin_tail),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(test_cancel_kills_child),
        cmocka_unit_test(test_loader_accepts_exec),
        cmocka_unit_test(test_shell_refused_by_default),
        cmocka_unit_test(test_configuration_refused_at_load),
        cmocka_unit_test(test_programs_allowlist),
        cmocka_unit_test(test_programs_alias_refused),
        cmocka_unit_test(test_templates_never_reach_the_shell),
        cmocka_unit_test(test_argv_values_stay_one_argument),
        cmocka_unit_test(test_argv_shell_script_template_refused),
        cmocka_unit_test(test_shell_quoting_misread_is_refused),
        cmocka_unit_test(test_runs_as_unprivileged_user),
        cmocka_unit_test(test_cwd_checked_as_the_step_user),
    };
    int failures = cmocka_run_group_tests_name("plugin_exec", tests, group_setup, group_teardown);
    return failures == 0 ? 0 : 1;
}
