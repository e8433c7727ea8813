/*
 * test_admission.c -- engine/run/admission.c with the built core plugin (its directory
 * is the first argument) on a loop of its own: checks run in order and each sees the
 * results before it; a failing check is a 422 with its code; a template naming nothing, arguments
 * the schema refuses, an isolated check without a helper and a check past its timeout each answer
 * with their code, never inside admission_run_start; a cancelled run never answers; and the loop
 * closes with every handle closed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/error.h"
#include "loop_util.h"
#include "run/admission.h"

#define BOUND_MS 10000
#define UUID     "0b4cbd7e-5a0e-4c4b-9f53-7c1a6de7a0f1"

static const char *plugins_dir; /* argv[1] */

typedef struct fixture {
    uv_loop_t loop;
    plugin_registry_t *reg;
    admission_t *adm;
} fixture_t;

/* What a run answered. */
typedef struct answer {
    bool done;
    int calls;
    int status;
    char code[64];
    char message[512];
    json_t *results;
} answer_t;

static void on_verdict(void *data, const admission_verdict_t *v)
{
    answer_t *a = data;
    a->calls++;
    a->done = true;
    a->status = v->status;
    snprintf(a->code, sizeof a->code, "%s", v->code != NULL ? v->code : "");
    snprintf(a->message, sizeof a->message, "%s", v->message != NULL ? v->message : "");
    a->results = v->results != NULL ? json_deep_copy(v->results) : NULL;
}

static int setup(void **state)
{
    fixture_t *f = xcalloc(1, sizeof *f);
    char err[512];
    assert_int_equal(uv_loop_init(&f->loop), 0);
    f->reg = plugin_registry_new(plugins_dir, task_ctx_host(), err, sizeof err);
    if (f->reg == NULL)
        fail_msg("%s", err);
    if (plugin_registry_load(f->reg, "core.so", NULL, err, sizeof err) != 0)
        fail_msg("%s", err);
    admission_opts_t o = {.loop = &f->loop, .plugins = f->reg, .default_timeout_ms = 1000};
    f->adm = admission_new(&o);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(loop_close_bounded(&f->loop, BOUND_MS), 0);
    admission_free(f->adm);
    plugin_registry_free(f->reg);
    free(f);
    return 0;
}

static workflow_t *parse(fixture_t *f, const char *admission)
{
    char *text = xasprintf("{\"name\": \"w\", \"admission\": %s,"
                           " \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}]}",
                           admission);
    workflow_t *wf = NULL;
    char err[512];
    if (workflow_parse_text(text, strlen(text), plugin_registry_check_task, f->reg, &wf, err,
                            sizeof err) != 0)
        fail_msg("%s\n%s", err, text);
    free(text);
    return wf;
}

/* Runs the checks of `admission` for a job with `params` (JSON text) until they answer. */
static void run(fixture_t *f, const char *admission, const char *params, answer_t *a)
{
    workflow_t *wf = parse(f, admission);
    json_t *p = json_loads(params, 0, NULL);
    memset(a, 0, sizeof *a);
    admission_run_start(f->adm, wf, UUID, "vm-1", p, on_verdict, a);
    json_decref(p);
    assert_false(a->done); /* never inside the call */
    assert_int_equal(loop_run_until_flag(&f->loop, &a->done, BOUND_MS), 0);
    assert_int_equal(a->calls, 1);
    workflow_free(wf);
}

static void test_in_order_with_results(void **state)
{
    fixture_t *f = *state;
    answer_t a;
    run(f,
        "[{\"name\": \"pkg\", \"task\": \"core.set_state\","
        "  \"args\": {\"values\": {\"ram\": \"${params.ram}\", \"who\": \"${job.target}\","
        "   \"job\": \"${job.uuid}\"}}},"
        " {\"name\": \"quota\", \"task\": \"core.set_state\","
        "  \"args\": {\"values\": {\"left\": \"${admission.pkg.result.ram}\"}}}]",
        "{\"ram\": 512}", &a);
    assert_int_equal(a.status, 0);
    assert_string_equal(a.code, "");
    json_t *pkg = json_object_get(json_object_get(a.results, "pkg"), "result");
    assert_int_equal(json_integer_value(json_object_get(pkg, "ram")), 512);
    assert_string_equal(json_string_value(json_object_get(pkg, "who")), "vm-1");
    assert_string_equal(json_string_value(json_object_get(pkg, "job")), UUID);
    json_t *quota = json_object_get(json_object_get(a.results, "quota"), "result");
    assert_int_equal(json_integer_value(json_object_get(quota, "left")), 512);
    json_decref(a.results);
}

static void test_failure_is_a_422_and_stops(void **state)
{
    fixture_t *f = *state;
    answer_t a;
    run(f,
        "[{\"name\": \"pkg\", \"task\": \"core.fail\","
        "  \"args\": {\"code\": \"NoPackage\", \"message\": \"no package ${params.p}\"}},"
        " {\"name\": \"slow\", \"task\": \"core.sleep\", \"args\": {\"ms\": 5000}}]",
        "{\"p\": \"x\"}", &a);
    assert_int_equal(a.status, TERN_EREFUSED);
    assert_string_equal(a.code, "NoPackage");
    assert_string_equal(a.message, "no package x");
    assert_null(a.results);
}

static void test_refusals_before_a_task_starts(void **state)
{
    fixture_t *f = *state;
    answer_t a;
    run(f, "[{\"name\": \"pkg\", \"task\": \"core.log\", \"args\": {\"msg\": \"${params.nope}\"}}]",
        "{}", &a);
    assert_int_equal(a.status, TERN_EREFUSED);
    assert_string_equal(a.code, "TemplateError");
    assert_string_equal(a.message, "admission[0].args.msg: ${params.nope} names nothing");

    run(f, "[{\"name\": \"pkg\", \"task\": \"core.log\", \"args\": {\"msg\": \"${params.n}\"}}]",
        "{\"n\": 5}", &a);
    assert_int_equal(a.status, TERN_EREFUSED);
    assert_string_equal(a.code, "InvalidArgument");
    assert_non_null(strstr(a.message, "admission[0].args.msg"));

    /* No helper executable: an isolated check cannot run (503). */
    run(f, "[{\"name\": \"iso\", \"task\": \"core.noop\", \"isolate\": true}]", "{}", &a);
    assert_int_equal(a.status, TERN_EAGAIN);
    assert_string_equal(a.code, "AdmissionCheckFailed");
    assert_non_null(strstr(a.message, "admission check \"iso\" (core.noop)"));
}

static void test_timeout_is_a_503_after_the_bound(void **state)
{
    fixture_t *f = *state;
    answer_t a;
    uint64_t t0 = clock_mono_ms();
    run(f, "[{\"name\": \"slow\", \"task\": \"core.sleep\", \"args\": {\"ms\": 60000}}]", "{}", &a);
    uint64_t took = clock_mono_ms() - t0;
    assert_int_equal(a.status, TERN_EAGAIN);
    assert_string_equal(a.code, "AdmissionTimeout");
    assert_string_equal(a.message, "admission check \"slow\" (core.sleep) gave no answer within "
                                   "1000 ms; the job was not created");
    assert_true(took >= 1000 && took < 1000 + 2000);

    /* A timeout of its own wins over the default. */
    t0 = clock_mono_ms();
    run(f,
        "[{\"name\": \"slow\", \"task\": \"core.sleep\", \"timeout\": 0.05,"
        "  \"args\": {\"ms\": 60000}}]",
        "{}", &a);
    took = clock_mono_ms() - t0;
    assert_string_equal(a.code, "AdmissionTimeout");
    assert_true(took >= 50 && took < 1000);
}

/* A run cancelled mid-check never answers; its task's timer is stopped, so the loop
 * closes at once. */
static void test_cancel_never_answers(void **state)
{
    fixture_t *f = *state;
    workflow_t *wf = parse(f, "[{\"name\": \"a\", \"task\": \"core.noop\"},"
                              " {\"name\": \"slow\", \"task\": \"core.sleep\","
                              "  \"timeout\": 30, \"args\": {\"ms\": 60000}}]");
    answer_t a = {0};
    admission_run_t *r = admission_run_start(f->adm, wf, UUID, NULL, NULL, on_verdict, &a);
    /* Past the first check, into the sleep. */
    uv_run(&f->loop, UV_RUN_NOWAIT);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    admission_run_cancel(r);
    uint64_t t0 = clock_mono_ms();
    assert_int_equal(loop_close_bounded(&f->loop, BOUND_MS), 0);
    assert_true(clock_mono_ms() - t0 < 1000);
    assert_false(a.done);
    assert_int_equal(uv_loop_init(&f->loop), 0); /* for the teardown's close */
    workflow_free(wf);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PLUGIN_DIR\n", argv[0]);
        return 2;
    }
    plugins_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_in_order_with_results, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failure_is_a_422_and_stops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals_before_a_task_starts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_is_a_503_after_the_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_never_answers, setup, teardown),
    };
    return cmocka_run_group_tests_name("admission", tests, NULL, NULL);
}
