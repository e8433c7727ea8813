/*
 * test_template.c -- unit tests of engine/model/template.c: types kept by whole-string
 * templates, interpolation, escapes, defaults, array indexes, every root, the
 * messages of missing names and syntax errors, and template_check's rules on roots
 * and known steps.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "model/template.h"

typedef struct fixture {
    json_t *params, *steps, *state, *job, *error, *admission;
    template_scope_t scope;
} fixture_t;

static json_t *load(const char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &je);
    if (v == NULL)
        fail_msg("bad test JSON %s: %s", text, je.text);
    return v;
}

static int group_setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    f->params =
        load("{\"who\": \"ops\", \"size\": 10, \"flag\": false, \"pi\": 0.5,"
             " \"disks\": [{\"size\": 5}, {\"size\": 7}], \"obj\": {\"a\": 1, \"b\": [1, 2]},"
             " \"nul\": null, \"byname\": {\"0\": \"zero\"}, \"text\": \"say \\\"hi\\\"\"}");
    f->steps =
        load("{\"check\": {\"result\": {\"size\": 20, \"list\": [1, 2]}},"
             " \"bad\": {\"result\": null, \"error\": {\"code\": \"X\", \"message\": \"boom\"}}}");
    f->state = load("{\"greeted\": \"ops\", \"count\": 3}");
    f->job = load("{\"uuid\": \"0b4cbd7e-5a0e-4c4b-9f53-7c1a6de7a0f1\", \"target\": \"vm-1\","
                  " \"workflow\": \"hello\"}");
    f->error = load("{\"code\": \"E\", \"message\": \"it broke\", \"step\": \"resize\"}");
    f->admission = load("{\"package\": {\"result\": {\"ram\": 1024, \"disks\": [10, 20]}}}");
    f->scope = (template_scope_t){f->params, f->steps, f->state, f->job, f->error, f->admission};
    *state = f;
    return 0;
}

static int group_teardown(void **state)
{
    fixture_t *f = *state;
    json_decref(f->params);
    json_decref(f->steps);
    json_decref(f->state);
    json_decref(f->job);
    json_decref(f->error);
    json_decref(f->admission);
    free(f);
    return 0;
}

/* Expands the JSON text `tmpl` and compares the result with the JSON text `want`. */
static void expands_to(fixture_t *f, const char *tmpl, const char *want)
{
    char err[256] = "";
    json_t *t = load(tmpl), *w = load(want);
    json_t *got = template_expand(t, "args", &f->scope, err, sizeof err);
    if (got == NULL)
        fail_msg("%s: %s", tmpl, err);
    if (!json_equal(got, w)) {
        char *s = json_dumps(got, JSON_ENCODE_ANY | JSON_COMPACT);
        fail_msg("%s expanded to %s, wanted %s", tmpl, s, want);
    }
    json_decref(got);
    json_decref(w);
    json_decref(t);
}

/* Expands `tmpl` and asserts the exact message. */
static void expand_fails(fixture_t *f, const char *tmpl, const char *msg)
{
    char err[256] = "";
    json_t *t = load(tmpl);
    json_t *got = template_expand(t, "args", &f->scope, err, sizeof err);
    assert_null(got);
    assert_string_equal(err, msg);
    json_decref(t);
}

/* The same with template_expand_parts. */
static void parts_of(fixture_t *f, const char *tmpl, const char *want)
{
    char err[256] = "";
    json_t *t = load(tmpl), *w = load(want);
    json_t *got = template_expand_parts(t, "args", &f->scope, err, sizeof err);
    if (got == NULL)
        fail_msg("%s: %s", tmpl, err);
    if (!json_equal(got, w)) {
        char *s = json_dumps(got, JSON_ENCODE_ANY | JSON_COMPACT);
        fail_msg("%s expanded to %s, wanted %s", tmpl, s, want);
    }
    json_decref(got);
    json_decref(w);
    json_decref(t);
}

static void test_whole_string_keeps_type(void **state)
{
    fixture_t *f = *state;
    expands_to(f, "\"${params.size}\"", "10");
    expands_to(f, "\"${params.flag}\"", "false");
    expands_to(f, "\"${params.pi}\"", "0.5");
    expands_to(f, "\"${params.nul}\"", "null");
    expands_to(f, "\"${params.who}\"", "\"ops\"");
    expands_to(f, "\"${params.obj}\"", "{\"a\": 1, \"b\": [1, 2]}");
    expands_to(f, "\"${params.disks}\"", "[{\"size\": 5}, {\"size\": 7}]");
    expands_to(f, "\"${steps.check.result}\"", "{\"size\": 20, \"list\": [1, 2]}");
    expands_to(f, "{\"size\": \"${steps.check.result.size}\"}", "{\"size\": 20}");
}

static void test_interpolation(void **state)
{
    fixture_t *f = *state;
    expands_to(f, "\"size=${params.size}GB\"", "\"size=10GB\"");
    expands_to(f, "\"hello, ${params.who}!\"", "\"hello, ops!\"");
    expands_to(f, "\"${params.who}${params.size}\"", "\"ops10\"");
    expands_to(f, "\"f=${params.flag} n=${params.nul} pi=${params.pi}\"",
               "\"f=false n=null pi=0.5\"");
    expands_to(f, "\"o=${params.obj}\"", "\"o={\\\"a\\\":1,\\\"b\\\":[1,2]}\"");
    expands_to(f, "\"l=${steps.check.result.list}\"", "\"l=[1,2]\"");
    /* A string is inserted as it is, quotes included, never re-encoded. */
    expands_to(f, "\"t: ${params.text}\"", "\"t: say \\\"hi\\\"\"");
}

/* Pieces and values apart: the text never holds a value, and each value keeps its type. */
static void test_parts(void **state)
{
    fixture_t *f = *state;
    parts_of(f, "\"echo hello ${params.text}\"",
             "{\"strings\": [\"echo hello \", \"\"], \"values\": [\"say \\\"hi\\\"\"]}");
    parts_of(f, "\"plain\"", "{\"strings\": [\"plain\"], \"values\": []}");
    parts_of(f, "\"\"", "{\"strings\": [\"\"], \"values\": []}");
    parts_of(f, "\"${params.size}\"", "{\"strings\": [\"\", \"\"], \"values\": [10]}");
    parts_of(f, "\"a$${b}${params.who}${params.obj}c\"",
             "{\"strings\": [\"a${b}\", \"\", \"c\"], \"values\": [\"ops\", {\"a\": 1, \"b\": [1, "
             "2]}]}");
    parts_of(f, "\"${params.gone:-d}\"", "{\"strings\": [\"\", \"\"], \"values\": [\"d\"]}");
    /* Arrays and objects: every string inside, at any depth; other values as they are. */
    parts_of(f, "[\"ls\", \"${params.who}\", 3, {\"k\": \"x${params.flag}\"}]",
             "[{\"strings\": [\"ls\"], \"values\": []},"
             " {\"strings\": [\"\", \"\"], \"values\": [\"ops\"]}, 3,"
             " {\"k\": {\"strings\": [\"x\", \"\"], \"values\": [false]}}]");
    char err[256] = "";
    json_t *t = load("[\"ok\", \"${params.gone}\"]");
    assert_null(template_expand_parts(t, "args.argv", &f->scope, err, sizeof err));
    assert_string_equal(err, "args.argv[1]: ${params.gone} names nothing");
    json_decref(t);
}

static void test_literals_and_escapes(void **state)
{
    fixture_t *f = *state;
    expands_to(f, "\"$${params.who}\"", "\"${params.who}\"");
    expands_to(f, "\"a $${b} ${params.who}\"", "\"a ${b} ops\"");
    expands_to(f, "\"cost $5, $$ and a$\"", "\"cost $5, $$ and a$\"");
    expands_to(f, "\"{params.who}\"", "\"{params.who}\"");
    expands_to(f, "\"\"", "\"\"");
}

static void test_nested_values(void **state)
{
    fixture_t *f = *state;
    expands_to(f,
               "{\"a\": [\"${params.size}\", {\"b\": \"x-${params.who}\"}], \"n\": 5,"
               " \"t\": true, \"z\": null, \"${params.who}\": \"keys stay\"}",
               "{\"a\": [10, {\"b\": \"x-ops\"}], \"n\": 5, \"t\": true, \"z\": null,"
               " \"${params.who}\": \"keys stay\"}");
    expands_to(f, "[[\"${state.count}\"]]", "[[3]]");
    expands_to(f, "42", "42");
}

static void test_array_index(void **state)
{
    fixture_t *f = *state;
    expands_to(f, "\"${params.disks.1.size}\"", "7");
    expands_to(f, "\"${params.disks.0}\"", "{\"size\": 5}");
    expands_to(f, "\"${steps.check.result.list.1}\"", "2");
    /* On an object a digit key is a key. */
    expands_to(f, "\"${params.byname.0}\"", "\"zero\"");
    expand_fails(f, "\"${params.disks.2.size}\"", "args: ${params.disks.2.size} names nothing");
    expand_fails(f, "\"${params.disks.x}\"", "args: ${params.disks.x} names nothing");
    expand_fails(f, "\"${params.disks.99999999999999999999999}\"",
                 "args: ${params.disks.99999999999999999999999} names nothing");
    /* Nothing lives below a scalar. */
    expand_fails(f, "\"${params.size.x}\"", "args: ${params.size.x} names nothing");
}

static void test_defaults(void **state)
{
    fixture_t *f = *state;
    expands_to(f, "\"${params.missing:-false}\"", "false");
    expands_to(f, "\"${params.missing:-10}\"", "10");
    expands_to(f, "\"${params.missing:-hello world}\"", "\"hello world\"");
    expands_to(f, "\"${params.missing:-\\\"a b\\\"}\"", "\"a b\"");
    expands_to(f, "\"${params.missing:-{}}\"", "{}");
    expands_to(f, "\"${params.missing:-{\\\"a\\\": [1, \\\"}\\\"]}}\"", "{\"a\": [1, \"}\"]}");
    expands_to(f, "\"${params.missing:-}\"", "\"\"");
    expands_to(f, "\"x=${params.missing:-7} y=${params.missing:-\\\"q\\\"}\"", "\"x=7 y=q\"");
    /* A present value wins over the default, whatever its type. */
    expands_to(f, "\"${params.flag:-true}\"", "false");
    expands_to(f, "\"${params.size:-1}\"", "10");
    /* null takes the default when one is written, and is a value otherwise. */
    expands_to(f, "\"${params.nul:-5}\"", "5");
    expands_to(f, "\"${params.nul}\"", "null");
    expands_to(f, "\"${steps.nope.result.x:-none}\"", "\"none\"");
}

static void test_roots(void **state)
{
    fixture_t *f = *state;
    expands_to(f, "\"${state.greeted}\"", "\"ops\"");
    expands_to(f, "\"${state}\"", "{\"greeted\": \"ops\", \"count\": 3}");
    expands_to(f, "\"${params}\"",
               "{\"who\": \"ops\", \"size\": 10, \"flag\": false, \"pi\": 0.5,"
               " \"disks\": [{\"size\": 5}, {\"size\": 7}], \"obj\": {\"a\": 1,"
               " \"b\": [1, 2]}, \"nul\": null, \"byname\": {\"0\": \"zero\"},"
               " \"text\": \"say \\\"hi\\\"\"}");
    expands_to(f, "\"${job.uuid}\"", "\"0b4cbd7e-5a0e-4c4b-9f53-7c1a6de7a0f1\"");
    expands_to(f, "\"${job.target}/${job.workflow}\"", "\"vm-1/hello\"");
    expands_to(f, "\"${error.code}: ${error.message} in ${error.step}\"",
               "\"E: it broke in resize\"");
    expands_to(f, "\"${steps.bad.error.code}\"", "\"X\"");
    expands_to(f, "\"${steps.bad.error}\"", "{\"code\": \"X\", \"message\": \"boom\"}");
    expands_to(f, "\"${steps.bad.result}\"", "null");
}

/* admission.<check>.result names what an admission check of the job answered. */
static void test_admission_names(void **state)
{
    fixture_t *f = *state;
    expands_to(f, "\"${admission.package.result.ram}\"", "1024");
    expands_to(f, "\"${admission.package.result.disks.1}\"", "20");
    expands_to(f, "\"ram ${admission.package.result.ram} MiB\"", "\"ram 1024 MiB\"");
    expands_to(f, "\"${admission.package.result}\"", "{\"ram\": 1024, \"disks\": [10, 20]}");
    expands_to(f, "\"${admission.quota.result:-none}\"", "\"none\"");
    expand_fails(f, "\"${admission.quota.result}\"",
                 "args: ${admission.quota.result} names nothing");
    expand_fails(f, "\"${admission.package}\"",
                 "args: ${admission.package} must name admission.<check>.result, with an "
                 "optional path below");

    static const char *const checks[] = {"package", "quota"};
    char err[300] = "";
    json_t *t = load("{\"a\": \"${admission.quota.result.x}\"}");
    template_names_t names = {
        .roots = TEMPLATE_PARAMS | TEMPLATE_ADMISSION, .admission = checks, .n_admission = 2};
    assert_int_equal(template_check_names(t, "chain[0].args", &names, err, sizeof err), 0);
    /* Only the first n_admission names count: a check names only the checks before it. */
    names.n_admission = 1;
    assert_int_equal(template_check_names(t, "admission[1].args", &names, err, sizeof err),
                     TERN_EINVAL);
    assert_string_equal(err, "admission[1].args.a: ${admission.quota.result.x} names admission "
                             "check \"quota\", which does not run before this");
    /* Where admission is not a root, it is refused as any other root. */
    names.roots = TEMPLATE_PARAMS;
    assert_int_equal(template_check_names(t, "p", &names, err, sizeof err), TERN_EINVAL);
    assert_string_equal(err, "p.a: ${admission.quota.result.x} uses admission, which is not "
                             "available here (available: params)");
    json_decref(t);
}

static void test_missing_names(void **state)
{
    fixture_t *f = *state;
    char err[256] = "";
    json_t *t = load("{\"size\": \"${steps.check.result.size}\"}");
    template_scope_t empty = {0};
    assert_null(template_expand(t, "args", &empty, err, sizeof err));
    assert_string_equal(err, "args.size: ${steps.check.result.size} names nothing");
    json_decref(t);

    expand_fails(f, "{\"list\": [\"ok\", \"a ${params.nope} b\"]}",
                 "args.list[1]: ${params.nope} names nothing");
    expand_fails(f, "\"${steps.nope.result}\"", "args: ${steps.nope.result} names nothing");
    expand_fails(f, "\"${steps.check.error}\"", "args: ${steps.check.error} names nothing");

    /* Without a path the message starts with the template. */
    t = load("\"${params.nope}\"");
    assert_null(template_expand(t, NULL, &f->scope, err, sizeof err));
    assert_string_equal(err, "${params.nope} names nothing");
    json_decref(t);

    /* A NULL scope has nothing in it. */
    t = load("\"${job.uuid}\"");
    assert_null(template_expand(t, "x", NULL, err, sizeof err));
    assert_string_equal(err, "x: ${job.uuid} names nothing");
    json_decref(t);
}

static const struct {
    const char *tmpl;
    const char *msg;
} syntax_errors[] = {
    {"\"a ${params.who\"",
     "args: ${params.who has no closing \"}\" (write \"$${\" for a literal \"${\")"},
    {"\"${\"", "args: ${ has no closing \"}\" (write \"$${\" for a literal \"${\")"},
    {"\"${}\"", "args: ${} has an empty name"},
    {"\"${:-x}\"", "args: ${:-x} has an empty name"},
    {"\"${params.a b}\"",
     "args: ${params.a b} has a bad character ' ' in its name (names use letters, digits, "
     "'_', '-' and '.'; write \"$${\" for a literal \"${\")"},
    {"\"${params.a:b}\"",
     "args: ${params.a:b} has a bad character ':' in its name (names use letters, digits, "
     "'_', '-' and '.'; write \"$${\" for a literal \"${\")"},
    {"\"${params.\\u0007}\"",
     "args: ${params.\a} has a bad byte 0x07 in its name (names use letters, digits, '_', '-' "
     "and '.'; write \"$${\" for a literal \"${\")"},
    {"\"${params..x}\"", "args: ${params..x} has an empty key in its name"},
    {"\"${params.}\"", "args: ${params.} has an empty key in its name"},
    {"\"${.params}\"", "args: ${.params} has an empty key in its name"},
    {"\"${foo.x}\"", "args: ${foo.x} names \"foo\"; a name starts with params, steps, state, job, "
                     "error or admission"},
    {"\"${steps.check}\"", "args: ${steps.check} must name steps.<step>.result or "
                           "steps.<step>.error, with an optional path below"},
    {"\"${steps.check.output}\"", "args: ${steps.check.output} must name steps.<step>.result or "
                                  "steps.<step>.error, with an optional path below"},
    {"\"${job.foo}\"", "args: ${job.foo} is not a name of the job (job.uuid, job.target or "
                       "job.workflow)"},
    {"\"${job}\"", "args: ${job} is not a name of the job (job.uuid, job.target or job.workflow)"},
    {"\"${job.uuid.x}\"", "args: ${job.uuid.x} is not a name of the job (job.uuid, job.target or "
                          "job.workflow)"},
    {"\"${error.details}\"", "args: ${error.details} is not a name of the error (error.code, "
                             "error.message or error.step)"},
    {"\"${params.x:-{}\"",
     "args: ${params.x:-{} has no closing \"}\" (write \"$${\" for a literal \"${\")"},
};

static void test_syntax_errors(void **state)
{
    fixture_t *f = *state;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(syntax_errors); i++) {
        char err[256] = "";
        json_t *t = load(syntax_errors[i].tmpl);
        /* The check and the expansion report the same fault. */
        assert_int_equal(template_check(t, "args", ~0u, NULL, 0, err, sizeof err), TERN_EINVAL);
        assert_string_equal(err, syntax_errors[i].msg);
        expand_fails(f, syntax_errors[i].tmpl, syntax_errors[i].msg);
        json_decref(t);
    }
}

static void test_check_ok(void **state)
{
    (void)state;
    static const char *const known[] = {"check", "resize"};
    char err[256] = "";
    json_t *t = load("{\"a\": \"${params.x} ${state.y} ${job.uuid} ${job.target}\","
                     " \"b\": [\"${steps.check.result.size}\", \"${steps.resize.error.code}\"],"
                     " \"c\": \"${params.missing:-1}\", \"d\": 5, \"e\": \"$${literal}\","
                     " \"${not.checked}\": 1}");
    assert_int_equal(
        template_check(t, "chain[2].args",
                       TEMPLATE_PARAMS | TEMPLATE_STATE | TEMPLATE_JOB | TEMPLATE_STEPS, known, 2,
                       err, sizeof err),
        0);
    assert_string_equal(err, "");
    json_decref(t);
    assert_int_equal(template_check(NULL, "x", 0, NULL, 0, err, sizeof err), 0);
}

static void test_check_unknown_step(void **state)
{
    (void)state;
    static const char *const known[] = {"check"};
    char err[256] = "";
    json_t *t = load("{\"size\": \"${steps.chek.result.size}\"}");
    assert_int_equal(template_check(t, "chain[1].args", TEMPLATE_PARAMS | TEMPLATE_STEPS, known, 1,
                                    err, sizeof err),
                     TERN_EINVAL);
    assert_string_equal(err, "chain[1].args.size: ${steps.chek.result.size} names step \"chek\", "
                             "which does not run before this step");
    /* Only the first n_known names count. */
    json_decref(t);
    t = load("\"${steps.check.result}\"");
    assert_int_equal(template_check(t, "p", TEMPLATE_STEPS, known, 0, err, sizeof err),
                     TERN_EINVAL);
    assert_string_equal(err, "p: ${steps.check.result} names step \"check\", which does not run "
                             "before this step");
    /* A prefix of a known name is not that name. */
    json_decref(t);
    t = load("\"${steps.chec.result}\"");
    assert_int_equal(template_check(t, "p", TEMPLATE_STEPS, known, 1, err, sizeof err),
                     TERN_EINVAL);
    json_decref(t);
}

static void test_check_roots(void **state)
{
    (void)state;
    char err[300] = "";
    json_t *t = load("[\"ok ${params.x}\", \"${state.x}\"]");
    assert_int_equal(
        template_check(t, "holds", TEMPLATE_PARAMS | TEMPLATE_JOB, NULL, 0, err, sizeof err),
        TERN_EINVAL);
    assert_string_equal(err, "holds[1]: ${state.x} uses state, which is not available here "
                             "(available: params, job)");
    json_decref(t);

    t = load("{\"msg\": \"failed: ${error.message}\"}");
    assert_int_equal(
        template_check(t, "chain[0].args",
                       TEMPLATE_PARAMS | TEMPLATE_STATE | TEMPLATE_JOB | TEMPLATE_STEPS, NULL, 0,
                       err, sizeof err),
        TERN_EINVAL);
    assert_string_equal(err, "chain[0].args.msg: ${error.message} uses error, which is not "
                             "available here (available: params, state, job, steps); error.* "
                             "exists only in the args of onerror, oncancel and fallback steps");
    assert_int_equal(template_check(t, "chain[0].args", TEMPLATE_ERROR, NULL, 0, err, sizeof err),
                     0);
    json_decref(t);

    t = load("\"${steps.a.result}\"");
    assert_int_equal(template_check(t, "holds[0]", TEMPLATE_PARAMS, NULL, 0, err, sizeof err),
                     TERN_EINVAL);
    assert_string_equal(err, "holds[0]: ${steps.a.result} uses steps, which is not available "
                             "here (available: params)");
    json_decref(t);

    /* A default does not make a forbidden root acceptable. */
    t = load("\"${state.x:-1}\"");
    assert_int_equal(template_check(t, "p", TEMPLATE_PARAMS, NULL, 0, err, sizeof err),
                     TERN_EINVAL);
    json_decref(t);
}

static void test_expand_string(void **state)
{
    fixture_t *f = *state;
    char err[256] = "";
    char *s = template_expand_string("vm:${params.who}", "holds[0]", &f->scope, err, sizeof err);
    assert_string_equal(s, "vm:ops");
    free(s);
    s = template_expand_string("${params.obj}", "holds[0]", &f->scope, err, sizeof err);
    assert_string_equal(s, "{\"a\":1,\"b\":[1,2]}");
    free(s);
    s = template_expand_string("${params.size}", "holds[0]", &f->scope, err, sizeof err);
    assert_string_equal(s, "10");
    free(s);
    s = template_expand_string("${params.who}", "holds[0]", &f->scope, err, sizeof err);
    assert_string_equal(s, "ops");
    free(s);
    s = template_expand_string("plain $${x}", "holds[0]", &f->scope, err, sizeof err);
    assert_string_equal(s, "plain ${x}");
    free(s);
    s = template_expand_string("", "holds[0]", &f->scope, err, sizeof err);
    assert_string_equal(s, "");
    free(s);
    s = template_expand_string("migrations:${params.server:-any}", "holds[0]", &f->scope, err,
                               sizeof err);
    assert_string_equal(s, "migrations:any");
    free(s);
    assert_null(
        template_expand_string("vm:${params.vm_uuid}", "holds[0]", &f->scope, err, sizeof err));
    assert_string_equal(err, "holds[0]: ${params.vm_uuid} names nothing");
    assert_null(template_expand_string("vm:${params", "holds[0]", &f->scope, err, sizeof err));
    assert_string_equal(err, "holds[0]: ${params has no closing \"}\" (write \"$${\" for a "
                             "literal \"${\")");
}

/* Found by tests/fuzz (fuzz_template): a default that is not valid UTF-8 in a C string
 * gave NULL with no message. */
static void test_expand_string_bad_utf8_default(void **state)
{
    fixture_t *f = *state;
    char err[256] = "";
    assert_null(
        template_expand_string("${params.none:-\xd1x}", "holds[0]", &f->scope, err, sizeof err));
    assert_string_equal(err, "holds[0]: ${params.none:-\xd1x}: the default is not valid UTF-8");
    char *s = template_expand_string("${params.none:-caf\xc3\xa9}", "holds[0]", &f->scope, err,
                                     sizeof err);
    assert_string_equal(s, "caf\xc3\xa9");
    free(s);
}

static void test_present(void **state)
{
    (void)state;
    assert_true(template_present("${params.x}"));
    assert_true(template_present("a ${b"));
    assert_true(template_present("$${x} and ${y}"));
    assert_false(template_present(""));
    assert_false(template_present("plain"));
    assert_false(template_present("$${params.x}"));
    assert_false(template_present("cost $5 {x}"));
    assert_false(template_present("$"));
    assert_false(template_present("$$"));
}

/* The result owns its values: changing it leaves the scope as it was. */
static void test_result_is_a_copy(void **state)
{
    fixture_t *f = *state;
    char err[256] = "";
    json_t *t = load("\"${params.obj}\"");
    json_t *got = template_expand(t, "args", &f->scope, err, sizeof err);
    assert_non_null(got);
    json_object_set_new(got, "a", json_integer(99));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(f->params, "obj"), "a")),
                     1);
    json_decref(got);
    /* The template itself is not changed either. */
    assert_string_equal(json_string_value(t), "${params.obj}");
    json_decref(t);
}

/* Errors leave no partial value behind (run under ASan to see leaks). */
static void test_error_deep_inside(void **state)
{
    fixture_t *f = *state;
    expand_fails(f, "{\"a\": {\"b\": [1, 2, {\"c\": \"${params.who} ${params.nope}\"}]}}",
                 "args.a.b[2].c: ${params.nope} names nothing");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_string_keeps_type),
        cmocka_unit_test(test_interpolation),
        cmocka_unit_test(test_parts),
        cmocka_unit_test(test_literals_and_escapes),
        cmocka_unit_test(test_nested_values),
        cmocka_unit_test(test_array_index),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_roots),
        cmocka_unit_test(test_admission_names),
        cmocka_unit_test(test_missing_names),
        cmocka_unit_test(test_syntax_errors),
        cmocka_unit_test(test_check_ok),
        cmocka_unit_test(test_check_unknown_step),
        cmocka_unit_test(test_check_roots),
        cmocka_unit_test(test_expand_string),
        cmocka_unit_test(test_expand_string_bad_utf8_default),
        cmocka_unit_test(test_present),
        cmocka_unit_test(test_result_is_a_copy),
        cmocka_unit_test(test_error_deep_inside),
    };
    int failures = cmocka_run_group_tests_name("template", tests, group_setup, group_teardown);
    return failures == 0 ? 0 : 1;
}
