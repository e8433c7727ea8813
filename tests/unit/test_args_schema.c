/*
 * test_args_schema.c -- the argument descriptions of tasks: what schema text is
 * refused when a plugin loads (and how the message reads), and how arguments are
 * checked before and after template expansion.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "base/error.h"
#include "model/args_schema.h"

static const char *const schema_text =
    "{\"required\": [\"url\"],"
    " \"properties\": {\"url\": {\"type\": \"string\", \"description\": \"where\"},"
    "                  \"ms\": {\"type\": \"integer\"},"
    "                  \"ratio\": {\"type\": \"number\"},"
    "                  \"on\": {\"type\": \"boolean\"},"
    "                  \"opts\": {\"type\": \"object\"},"
    "                  \"list\": {\"type\": \"array\"},"
    "                  \"size\": {\"type\": [\"integer\", \"string\"]},"
    "                  \"maybe\": {\"type\": [\"integer\", \"string\", \"null\"]},"
    "                  \"anything\": {\"type\": \"any\"},"
    "                  \"untyped\": {}},"
    " \"additional\": false}";

static args_schema_t *compile_ok(const char *text)
{
    char err[512] = "";
    args_schema_t *s = NULL;
    int rc = args_schema_compile(text, "task \"t.x\"", &s, err, sizeof err);
    if (rc != 0)
        fail_msg("compile failed: %s", err);
    assert_non_null(s);
    return s;
}

/* Compiles text expecting a refusal; returns the message in a static buffer. */
static const char *compile_err(const char *text)
{
    static char err[512];
    err[0] = '\0';
    args_schema_t *s = (args_schema_t *)1;
    assert_int_equal(args_schema_compile(text, "task \"t.x\"", &s, err, sizeof err), TERN_EINVAL);
    assert_null(s);
    return err;
}

static int check(const args_schema_t *s, const char *args_text, unsigned flags, char *err,
                 size_t errlen)
{
    json_error_t jerr;
    json_t *args = json_loads(args_text, 0, &jerr);
    if (args == NULL)
        fail_msg("bad test JSON %s: %s", args_text, jerr.text);
    int rc = args_schema_check(s, args, "chain[1].args", flags, err, errlen);
    json_decref(args);
    return rc;
}

static void assert_check_fails(const args_schema_t *s, const char *args_text, unsigned flags,
                               const char *expected)
{
    char err[512] = "";
    assert_int_equal(check(s, args_text, flags, err, sizeof err), TERN_EINVAL);
    assert_string_equal(err, expected);
}

static void assert_check_ok(const args_schema_t *s, const char *args_text, unsigned flags)
{
    char err[512] = "";
    int rc = check(s, args_text, flags, err, sizeof err);
    if (rc != 0)
        fail_msg("%s refused: %s", args_text, err);
}

static void test_valid_args_pass(void **state)
{
    (void)state;
    args_schema_t *s = compile_ok(schema_text);
    assert_check_ok(s, "{\"url\": \"http://x\"}", 0);
    assert_check_ok(s,
                    "{\"url\": \"u\", \"ms\": 5, \"ratio\": 0.5, \"on\": true, \"opts\": {},"
                    " \"list\": [1], \"size\": \"10G\", \"maybe\": null, \"anything\": [null],"
                    " \"untyped\": {\"a\": 1}}",
                    ARGS_SCHEMA_EXPANDED);
    /* An integer is a number. */
    assert_check_ok(s, "{\"url\": \"u\", \"ratio\": 2}", 0);
    args_schema_free(s);
}

/* An "interpolation": "parts" property is typed as written when stored, and after
 * expansion it holds {"strings", "values"} objects, which the task checks itself. */
static void test_parts_property(void **state)
{
    (void)state;
    args_schema_t *s = compile_ok("{\"properties\": {\"cmd\": {\"type\": \"string\","
                                  " \"interpolation\": \"parts\"},"
                                  " \"n\": {\"type\": \"string\", \"interpolation\": \"text\"}}}");
    assert_true(args_schema_prop_is_parts(s, "cmd"));
    assert_false(args_schema_prop_is_parts(s, "n"));
    assert_false(args_schema_prop_is_parts(s, "other"));
    assert_check_fails(s, "{\"cmd\": 5}", 0, "chain[1].args.cmd: expected string, got integer");
    assert_check_ok(s, "{\"cmd\": {\"strings\": [\"a\", \"\"], \"values\": [1]}}",
                    ARGS_SCHEMA_EXPANDED);
    assert_check_fails(s, "{\"n\": {}}", ARGS_SCHEMA_EXPANDED,
                       "chain[1].args.n: expected string, got object");
    args_schema_free(s);
}

static void test_type_mismatch_messages(void **state)
{
    (void)state;
    args_schema_t *s = compile_ok(schema_text);
    assert_check_fails(s, "{\"url\": \"u\", \"ms\": \"five\"}", 0,
                       "chain[1].args.ms: expected integer, got string");
    assert_check_fails(s, "{\"url\": \"u\", \"ms\": 1.5}", 0,
                       "chain[1].args.ms: expected integer, got number");
    assert_check_fails(s, "{\"url\": 7}", 0, "chain[1].args.url: expected string, got integer");
    assert_check_fails(s, "{\"url\": \"u\", \"on\": \"yes\"}", 0,
                       "chain[1].args.on: expected boolean, got string");
    assert_check_fails(s, "{\"url\": \"u\", \"opts\": []}", 0,
                       "chain[1].args.opts: expected object, got array");
    assert_check_fails(s, "{\"url\": \"u\", \"list\": {}}", 0,
                       "chain[1].args.list: expected array, got object");
    assert_check_fails(s, "{\"url\": \"u\", \"ratio\": \"1\"}", 0,
                       "chain[1].args.ratio: expected number, got string");
    assert_check_fails(s, "{\"url\": \"u\", \"size\": true}", 0,
                       "chain[1].args.size: expected integer or string, got boolean");
    assert_check_fails(s, "{\"url\": \"u\", \"maybe\": []}", 0,
                       "chain[1].args.maybe: expected integer, string or null, got array");
    assert_check_fails(s, "{\"url\": null}", 0, "chain[1].args.url: expected string, got null");
    args_schema_free(s);
}

static void test_missing_and_unknown(void **state)
{
    (void)state;
    args_schema_t *s = compile_ok(schema_text);
    assert_check_fails(s, "{\"ms\": 1}", 0, "chain[1].args: missing required \"url\"");
    assert_check_fails(s, "{}", 0, "chain[1].args: missing required \"url\"");
    assert_check_fails(s, "{\"url\": \"u\", \"urll\": \"u\"}", 0,
                       "chain[1].args: unknown argument \"urll\"");
    assert_check_fails(s, "[1, 2]", 0, "chain[1].args: expected object, got array");

    char err[256] = "";
    assert_int_equal(args_schema_check(s, NULL, "chain[0].args", 0, err, sizeof err), TERN_EINVAL);
    assert_string_equal(err, "chain[0].args: missing required \"url\"");
    args_schema_free(s);
}

static void test_additional_default_allows_unknown(void **state)
{
    (void)state;
    args_schema_t *s = compile_ok("{\"properties\": {\"a\": {\"type\": \"integer\"}}}");
    assert_check_ok(s, "{\"a\": 1, \"b\": \"anything\"}", 0);
    assert_check_fails(s, "{\"a\": \"x\", \"b\": 1}", 0,
                       "chain[1].args.a: expected integer, got string");
    char err[64];
    assert_int_equal(args_schema_check(s, NULL, "args", 0, err, sizeof err), 0);
    args_schema_free(s);

    s = compile_ok("{}");
    assert_check_ok(s, "{\"whatever\": [1]}", 0);
    args_schema_free(s);
}

static void test_templates_pass_until_expanded(void **state)
{
    (void)state;
    args_schema_t *s = compile_ok(schema_text);
    /* Unexpanded: a template may become an integer. */
    assert_check_ok(s, "{\"url\": \"u\", \"ms\": \"${params.ms}\"}", 0);
    assert_check_ok(s, "{\"url\": \"u\", \"ms\": \"${params.ms:-5}\"}", 0);
    assert_check_ok(s, "{\"url\": \"u\", \"on\": \"x${params.on}\"}", 0);
    /* An escaped "$${" is literal text, not a template. */
    assert_check_fails(s, "{\"url\": \"u\", \"ms\": \"$${params.ms}\"}", 0,
                       "chain[1].args.ms: expected integer, got string");
    /* Expanded: the same text is a string like any other. */
    assert_check_fails(s, "{\"url\": \"u\", \"ms\": \"${params.ms}\"}", ARGS_SCHEMA_EXPANDED,
                       "chain[1].args.ms: expected integer, got string");
    /* Templates do not excuse unknown names or missing required ones. */
    assert_check_fails(s, "{\"url\": \"u\", \"mss\": \"${params.ms}\"}", 0,
                       "chain[1].args: unknown argument \"mss\"");
    args_schema_free(s);

    assert_true(args_schema_is_template("${a}"));
    assert_true(args_schema_is_template("x $${a} ${b}"));
    assert_false(args_schema_is_template("$${a}"));
    assert_false(args_schema_is_template("$ {a} $"));
    assert_false(args_schema_is_template(""));
}

static void test_bad_schema_text(void **state)
{
    (void)state;
    const char *m = compile_err("{required: [url]}");
    assert_non_null(strstr(m, "task \"t.x\": args_schema is not valid JSON: "));
    assert_non_null(strstr(m, "near 'required' (line 1, column 9)"));
    assert_string_equal(compile_err("[]"), "task \"t.x\": args_schema: expected object, got array");
    assert_string_equal(compile_err("{\"requried\": []}"),
                        "task \"t.x\": args_schema: unknown key \"requried\" (expected required, "
                        "properties, additional, description)");
    assert_string_equal(compile_err("{\"required\": \"url\"}"),
                        "task \"t.x\": args_schema: required: expected array, got string");
    assert_string_equal(compile_err("{\"required\": [1]}"),
                        "task \"t.x\": args_schema: required[0]: expected string, got integer");
    assert_string_equal(compile_err("{\"properties\": []}"),
                        "task \"t.x\": args_schema: properties: expected object, got array");
    assert_string_equal(compile_err("{\"properties\": {\"a\": \"string\"}}"),
                        "task \"t.x\": args_schema: properties.a: expected object, got string");
    assert_string_equal(compile_err("{\"properties\": {\"a\": {\"type\": \"strng\"}}}"),
                        "task \"t.x\": args_schema: properties.a.type: unknown type \"strng\"");
    assert_string_equal(compile_err("{\"properties\": {\"a\": {\"type\": [\"string\", \"int\"]}}}"),
                        "task \"t.x\": args_schema: properties.a.type[1]: unknown type \"int\"");
    assert_string_equal(compile_err("{\"properties\": {\"a\": {\"type\": []}}}"),
                        "task \"t.x\": args_schema: properties.a.type: expected a type name or a "
                        "non-empty array of them, got an empty array");
    assert_string_equal(compile_err("{\"properties\": {\"a\": {\"typ\": \"string\"}}}"),
                        "task \"t.x\": args_schema: properties.a: unknown key \"typ\" (expected "
                        "type, description, interpolation, minimum, maximum, "
                        "exclusiveMinimum, exclusiveMaximum)");
    assert_string_equal(compile_err("{\"properties\": {\"a\": {\"interpolation\": \"raw\"}}}"),
                        "task \"t.x\": args_schema: properties.a.interpolation: expected "
                        "\"text\" or \"parts\"");
    assert_string_equal(compile_err("{\"additional\": \"no\"}"),
                        "task \"t.x\": args_schema: additional: expected boolean, got string");
    assert_string_equal(compile_err("{\"required\": [\"b\"], \"properties\": {\"a\": {}},"
                                    " \"additional\": false}"),
                        "task \"t.x\": args_schema: required[0]: \"b\" is not among the "
                        "properties, and additional arguments are refused");
    m = compile_err("{\"a\": 1, \"a\": 2}");
    assert_non_null(strstr(m, "duplicate object key"));
}

static const char *const range_text =
    "{\"properties\": {\"ms\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 86400000},"
    "                 \"ratio\": {\"type\": \"number\", \"exclusiveMinimum\": 0,"
    "                           \"maximum\": 1.5},"
    "                 \"n\": {\"type\": [\"integer\", \"string\"], \"minimum\": 1},"
    "                 \"cap\": {\"type\": \"integer\", \"exclusiveMaximum\": 100},"
    "                 \"big\": {\"type\": \"integer\", \"maximum\": 4611686018427387903}}}";

static void test_range_bounds_numbers(void **state)
{
    (void)state;
    args_schema_t *s = compile_ok(range_text);
    assert_check_ok(s, "{\"ms\": 0, \"ratio\": 1.5, \"n\": 1, \"cap\": 99}", 0);
    assert_check_ok(s, "{\"ms\": 86400000, \"ratio\": 0.001, \"n\": \"many\", \"cap\": -5}", 0);
    assert_check_fails(s, "{\"ms\": -1}", 0,
                       "chain[1].args.ms: expected an integer from 0 to 86400000, got -1");
    assert_check_fails(s, "{\"ms\": 4611686018427387904}", 0,
                       "chain[1].args.ms: expected an integer from 0 to 86400000, got "
                       "4611686018427387904");
    assert_check_fails(s, "{\"ratio\": 0}", 0,
                       "chain[1].args.ratio: expected a number greater than 0 and at most 1.5, "
                       "got 0");
    assert_check_fails(s, "{\"ratio\": 1.75}", 0,
                       "chain[1].args.ratio: expected a number greater than 0 and at most 1.5, "
                       "got 1.75");
    assert_check_fails(s, "{\"n\": 0}", 0,
                       "chain[1].args.n: expected an integer of at least 1, got 0");
    assert_check_fails(s, "{\"cap\": 100}", 0,
                       "chain[1].args.cap: expected an integer less than 100, got 100");
    /* Integers compare exactly, beyond a double's 53 bits. */
    assert_check_ok(s, "{\"big\": 4611686018427387903}", 0);
    assert_check_fails(s, "{\"big\": 4611686018427387904}", 0,
                       "chain[1].args.big: expected an integer of at most 4611686018427387903, "
                       "got 4611686018427387904");
    /* A template is checked once expanded, and then its value is in range or refused. */
    assert_check_ok(s, "{\"ms\": \"${params.ms}\"}", 0);
    assert_check_fails(s, "{\"ms\": -1}", ARGS_SCHEMA_EXPANDED,
                       "chain[1].args.ms: expected an integer from 0 to 86400000, got -1");
    args_schema_free(s);
}

static void test_bad_range_refused(void **state)
{
    (void)state;
    assert_string_equal(
        compile_err("{\"properties\": {\"a\": {\"type\": \"integer\", \"minimum\": \"0\"}}}"),
        "task \"t.x\": args_schema: properties.a.minimum: expected number, got string");
    assert_string_equal(
        compile_err("{\"properties\": {\"a\": {\"type\": \"integer\", \"maximum\": null}}}"),
        "task \"t.x\": args_schema: properties.a.maximum: expected number, got null");
    assert_string_equal(compile_err("{\"properties\": {\"a\": {\"type\": \"integer\","
                                    " \"minimum\": 10, \"maximum\": 5}}}"),
                        "task \"t.x\": args_schema: properties.a: minimum 10 leaves no value under "
                        "maximum 5");
    assert_string_equal(
        compile_err("{\"properties\": {\"a\": {\"type\": \"number\","
                    " \"exclusiveMinimum\": 1, \"maximum\": 1}}}"),
        "task \"t.x\": args_schema: properties.a: exclusiveMinimum 1 leaves no value "
        "under maximum 1");
    assert_string_equal(compile_err("{\"properties\": {\"a\": {\"type\": \"integer\","
                                    " \"minimum\": 1, \"exclusiveMinimum\": 0}}}"),
                        "task \"t.x\": args_schema: properties.a: minimum and exclusiveMinimum "
                        "together (give one)");
    assert_string_equal(
        compile_err("{\"properties\": {\"a\": {\"type\": \"string\", \"maximum\": 5}}}"),
        "task \"t.x\": args_schema: properties.a: a range needs a type that accepts numbers");
    assert_string_equal(
        compile_err("{\"properties\": {\"a\": {\"type\": \"integer\", \"minimun\": 5}}}"),
        "task \"t.x\": args_schema: properties.a: unknown key \"minimun\" (expected type, "
        "description, interpolation, minimum, maximum, exclusiveMinimum, exclusiveMaximum)");
    /* Equal inclusive bounds leave one value. */
    args_schema_t *s = compile_ok(
        "{\"properties\": {\"a\": {\"type\": \"integer\", \"minimum\": 3, \"maximum\": 3}}}");
    assert_check_ok(s, "{\"a\": 3}", 0);
    args_schema_free(s);
}

static void test_doc_get(void **state)
{
    (void)state;
    args_schema_t *s = compile_ok("{\"required\": [\"a\"], \"properties\": {\"a\": {}}}");
    const json_t *doc = args_schema_doc_get(s);
    assert_true(json_is_object(doc));
    assert_string_equal(json_string_value(json_array_get(json_object_get(doc, "required"), 0)),
                        "a");
    args_schema_free(s);
    args_schema_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_args_pass),
        cmocka_unit_test(test_type_mismatch_messages),
        cmocka_unit_test(test_missing_and_unknown),
        cmocka_unit_test(test_additional_default_allows_unknown),
        cmocka_unit_test(test_templates_pass_until_expanded),
        cmocka_unit_test(test_bad_schema_text),
        cmocka_unit_test(test_range_bounds_numbers),
        cmocka_unit_test(test_bad_range_refused),
        cmocka_unit_test(test_doc_get),
        cmocka_unit_test(test_parts_property),
    };
    int failures = cmocka_run_group_tests_name("args_schema", tests, NULL, NULL);
    return failures == 0 ? 0 : 1;
}
