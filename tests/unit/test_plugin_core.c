/*
 * test_plugin_core.c -- the built core plugin (argv[1]: path of core.so), run through
 * task_harness with the engine's real task context: each task's outcome, sleep timing
 * and cancel, fail codes, state changes, log lines, argument checks, and that every
 * task's args_schema compiles.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "model/args_schema.h"
#include "task_harness.h"

#define BOUND_MS 10000

static const char *plugin_path;

typedef struct fixture {
    task_harness_t *h;
    harness_run_t run;
    int log_fd;
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = xcalloc(1, sizeof *f);
    f->log_fd = memfd_create("core_log", 0);
    if (f->log_fd < 0)
        return -1;
    log_init("test_plugin_core", TERN_LOG_TRACE, f->log_fd);
    f->h = task_harness_new(plugin_path, NULL);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    harness_run_dispose(&f->run);
    task_harness_free(f->h);
    log_init("test_plugin_core", TERN_LOG_INFO, 2);
    close(f->log_fd);
    free(f);
    return 0;
}

/* Runs `entry` with args parsed from JSON text; returns task_harness_run's result. */
static int run(fixture_t *f, const char *entry, const char *args_json, uint64_t bound_ms,
               uint64_t cancel_after_ms)
{
    json_t *args = task_harness_json(args_json);
    harness_run_dispose(&f->run);
    int rc = task_harness_run(f->h, entry, args, NULL, NULL, bound_ms, cancel_after_ms, &f->run);
    json_decref(args);
    return rc;
}

static void test_noop(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(run(f, "noop", "{}", BOUND_MS, 0), 0);
    assert_int_equal(f->run.outcome.kind, TASK_DONE);
    assert_true(json_is_object(f->run.outcome.result));
    assert_int_equal(json_object_size(f->run.outcome.result), 0);
    assert_null(f->run.outcome.state_changes);
    /* The qualified name works as well. */
    assert_int_equal(run(f, "core.noop", "{}", BOUND_MS, 0), 0);
    assert_int_equal(run(f, "nope", "{}", BOUND_MS, 0), -ENOENT);
}

static void test_sleep_duration(void **state)
{
    fixture_t *f = *state;
    uint64_t t0 = clock_mono_ms();
    assert_int_equal(run(f, "sleep", "{\"ms\": 150}", BOUND_MS, 0), 0);
    uint64_t took = clock_mono_ms() - t0;
    assert_int_equal(f->run.outcome.kind, TASK_DONE);
    assert_int_equal(json_integer_value(json_object_get(f->run.outcome.result, "slept_ms")), 150);
    assert_true(f->run.outcome.elapsed_ms >= 150);
    assert_true(took >= 150);
    assert_true(took < 5000);

    assert_int_equal(run(f, "sleep", "{\"ms\": 0}", BOUND_MS, 0), 0);
    assert_int_equal(f->run.outcome.kind, TASK_DONE);
}

static void test_sleep_cancel_stops_early(void **state)
{
    fixture_t *f = *state;
    uint64_t t0 = clock_mono_ms();
    assert_int_equal(run(f, "sleep", "{\"ms\": 60000}", BOUND_MS, 50), -ECANCELED);
    uint64_t took = clock_mono_ms() - t0;
    assert_false(f->run.finished);
    assert_true(took >= 50);
    assert_true(took < 5000);
    /* The bound cancels too. */
    assert_int_equal(run(f, "sleep", "{\"ms\": 60000}", 80, 0), -ETIMEDOUT);
    assert_false(f->run.finished);
}

static void test_sleep_bad_args(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(run(f, "sleep", "{\"ms\": \"soon\"}", BOUND_MS, 0), 0);
    harness_run_assert_failed(&f->run, "InvalidArgument", "\"ms\" must be an integer");
    assert_int_equal(run(f, "sleep", "{\"ms\": -1}", BOUND_MS, 0), 0);
    harness_run_assert_failed(&f->run, "InvalidArgument", "\"ms\"");
    assert_int_equal(run(f, "sleep", "{}", BOUND_MS, 0), 0);
    harness_run_assert_failed(&f->run, "InvalidArgument", "\"ms\"");
}

static void test_fail(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(
        run(f, "fail", "{\"code\": \"DiskFull\", \"message\": \"no room on /data\"}", BOUND_MS, 0),
        0);
    harness_run_assert_failed(&f->run, "DiskFull", "no room on /data");
    assert_string_equal(f->run.outcome.message, "no room on /data");

    assert_int_equal(run(f, "fail", "{}", BOUND_MS, 0), 0);
    harness_run_assert_failed(&f->run, "TaskFailed", "asked to fail");

    /* A message with printf directives is taken as text. */
    assert_int_equal(run(f, "fail", "{\"code\": \"X\", \"message\": \"100%s %d\"}", BOUND_MS, 0),
                     0);
    assert_string_equal(f->run.outcome.message, "100%s %d");
}

static void test_set_state(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(run(f, "set_state",
                         "{\"values\": {\"ip\": \"10.0.0.5\", \"disk.size\": {\"gb\": 20}}}",
                         BOUND_MS, 0),
                     0);
    assert_int_equal(f->run.outcome.kind, TASK_DONE);
    json_t *want = json_loads("{\"ip\": \"10.0.0.5\", \"disk.size\": {\"gb\": 20}}", 0, NULL);
    assert_true(json_equal(f->run.outcome.result, want));
    assert_true(json_equal(f->run.outcome.state_changes, want));
    json_decref(want);

    assert_int_equal(run(f, "set_state", "{\"values\": {\"bad key\": 1}}", BOUND_MS, 0), 0);
    harness_run_assert_failed(&f->run, "InvalidArgument", "\"bad key\"");
    assert_int_equal(run(f, "set_state", "{\"values\": [1]}", BOUND_MS, 0), 0);
    harness_run_assert_failed(&f->run, "InvalidArgument", "\"values\" must be an object");
}

static void test_log(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(
        run(f, "log", "{\"msg\": \"resize of disk0 failed\", \"level\": \"warn\"}", BOUND_MS, 0),
        0);
    assert_int_equal(f->run.outcome.kind, TASK_DONE);
    assert_string_equal(json_string_value(json_object_get(f->run.outcome.result, "msg")),
                        "resize of disk0 failed");

    off_t n = lseek(f->log_fd, 0, SEEK_END);
    char *log = xcalloc(1, (size_t)n + 1);
    assert_int_equal(pread(f->log_fd, log, (size_t)n, 0), n);
    const char *line = strstr(log, "\"msg\":\"resize of disk0 failed\"");
    assert_non_null(line);
    assert_non_null(strstr(log, "\"level\":40"));
    assert_non_null(strstr(log, "\"task\":\"core.log\""));
    free(log);

    assert_int_equal(run(f, "log", "{\"msg\": \"x\"}", BOUND_MS, 0), 0);
    assert_int_equal(f->run.outcome.kind, TASK_DONE);
    assert_int_equal(run(f, "log", "{\"msg\": \"x\", \"level\": \"loud\"}", BOUND_MS, 0), 0);
    harness_run_assert_failed(&f->run, "InvalidArgument", "\"level\"");
    assert_int_equal(run(f, "log", "{}", BOUND_MS, 0), 0);
    harness_run_assert_failed(&f->run, "InvalidArgument", "\"msg\"");
}

/* Every task has a schema the engine accepts, and InvalidArgument is never retried. */
static void test_descriptors(void **state)
{
    (void)state;
    void *dl = NULL;
    const tern_plugin *p = task_harness_plugin_open(plugin_path, &dl);
    assert_non_null(dl);
    assert_string_equal(p->name, "core");
    const char *names[] = {"noop", "sleep", "fail", "set_state", "log"};
    size_t n = 0;
    for (const tern_task_def *const *t = p->tasks; *t != NULL; t++, n++) {
        assert_string_equal((*t)->name, names[n]);
        assert_int_equal((*t)->size, sizeof(tern_task_def));
        assert_non_null((*t)->summary);
        args_schema_t *schema = NULL;
        char err[256] = "";
        if (args_schema_compile((*t)->args_schema, (*t)->name, &schema, err, sizeof err) != 0)
            fail_msg("%s", err);
        args_schema_free(schema);
        assert_non_null((*t)->fatal_codes);
        assert_string_equal((*t)->fatal_codes[0], "InvalidArgument");
    }
    assert_int_equal(n, 5);
    dlclose(dl);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s path/to/core.so\n", argv[0]);
        return 1;
    }
    plugin_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_noop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sleep_duration, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sleep_cancel_stops_early, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sleep_bad_args, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_state, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log, setup, teardown),
        cmocka_unit_test(test_descriptors),
    };
    int failures = cmocka_run_group_tests_name("plugin_core", tests, NULL, NULL);
    return failures == 0 ? 0 : 1;
}
