/*
 * test_task_lib.c -- tasks/lib, what plugin families share: the argument getters
 * (defaults, null, wrong types and their messages), JSON kind names, string vectors
 * with borrowed and owned elements, and UTF-8 validation and repair.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/args.h"
#include "lib/json_kind.h"
#include "lib/strvec.h"
#include "lib/utf8.h"

static json_t *load(const char *text)
{
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    assert_non_null(v);
    return v;
}

static void test_json_kind_names(void **state)
{
    (void)state;
    static const struct {
        const char *text, *kind;
    } cases[] = {
        {"{}", "object"},  {"[]", "array"},     {"\"s\"", "string"},  {"1", "integer"},
        {"1.5", "number"}, {"true", "boolean"}, {"false", "boolean"}, {"null", "null"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *v = load(cases[i].text);
        assert_string_equal(task_json_kind(v), cases[i].kind);
        json_decref(v);
    }
}

static void test_args_uint(void **state)
{
    (void)state;
    json_t *args = load("{\"n\": 7, \"big\": 9, \"neg\": -1, \"s\": \"7\", \"z\": null}");
    char msg[128];
    uint64_t out = 42;
    assert_null(task_args_uint(args, "missing", 10, &out, msg, sizeof msg));
    assert_int_equal(out, 42); /* absent: the default stays */
    assert_null(task_args_uint(args, "z", 10, &out, msg, sizeof msg));
    assert_int_equal(out, 42); /* null reads as absent */
    assert_null(task_args_uint(args, "n", 10, &out, msg, sizeof msg));
    assert_int_equal(out, 7);
    assert_ptr_equal(task_args_uint(args, "big", 8, &out, msg, sizeof msg), msg);
    assert_string_equal(msg, "big: 9 is out of range 0..8");
    assert_ptr_equal(task_args_uint(args, "neg", 8, &out, msg, sizeof msg), msg);
    assert_string_equal(msg, "neg: -1 is out of range 0..8");
    assert_ptr_equal(task_args_uint(args, "s", 8, &out, msg, sizeof msg), msg);
    assert_string_equal(msg, "s: expected integer, got string");
    assert_int_equal(out, 7); /* a refused value leaves *out alone */
    json_decref(args);
}

static void test_args_string(void **state)
{
    (void)state;
    json_t *args = json_pack("{s:s#, s:n, s:i}", "s", "a\0b", (size_t)3, "z", "i", 1);
    assert_non_null(args);
    char msg[128];
    const char *out = "default";
    size_t len = 99;
    assert_null(task_args_string(args, "missing", &out, &len, msg, sizeof msg));
    assert_null(task_args_string(args, "z", &out, &len, msg, sizeof msg));
    assert_string_equal(out, "default");
    assert_int_equal(len, 99);
    assert_null(task_args_string(args, "s", &out, &len, msg, sizeof msg));
    assert_int_equal(len, 3); /* counts the NUL inside */
    assert_memory_equal(out, "a\0b", 3);
    assert_null(task_args_string(args, "s", &out, NULL, msg, sizeof msg));
    assert_ptr_equal(task_args_string(args, "i", &out, NULL, msg, sizeof msg), msg);
    assert_string_equal(msg, "i: expected string, got integer");
    json_decref(args);
}

static void test_args_bool(void **state)
{
    (void)state;
    json_t *args = load("{\"t\": true, \"f\": false, \"z\": null, \"s\": \"true\"}");
    char msg[128];
    bool out = true;
    assert_null(task_args_bool(args, "missing", &out, msg, sizeof msg));
    assert_true(out);
    assert_null(task_args_bool(args, "f", &out, msg, sizeof msg));
    assert_false(out);
    assert_null(task_args_bool(args, "t", &out, msg, sizeof msg));
    assert_true(out);
    assert_ptr_equal(task_args_bool(args, "z", &out, msg, sizeof msg), msg);
    assert_string_equal(msg, "z: expected boolean, got null");
    assert_ptr_equal(task_args_bool(args, "s", &out, msg, sizeof msg), msg);
    assert_string_equal(msg, "s: expected boolean, got string");
    json_decref(args);
}

static void test_args_object(void **state)
{
    (void)state;
    json_t *args = load("{\"o\": {\"k\": 1}, \"z\": null, \"a\": []}");
    char msg[128];
    const json_t *out = NULL;
    assert_null(task_args_object(args, "missing", &out, msg, sizeof msg));
    assert_null(task_args_object(args, "z", &out, msg, sizeof msg));
    assert_null(out);
    assert_null(task_args_object(args, "o", &out, msg, sizeof msg));
    assert_ptr_equal(out, json_object_get(args, "o")); /* borrowed, not copied */
    assert_ptr_equal(task_args_object(args, "a", &out, msg, sizeof msg), msg);
    assert_string_equal(msg, "a: expected object, got array");
    json_decref(args);
}

static void test_args_message_truncated(void **state)
{
    (void)state;
    json_t *args = load("{\"a_long_argument_name\": 1}");
    char msg[8];
    const char *out = NULL;
    assert_ptr_equal(task_args_string(args, "a_long_argument_name", &out, NULL, msg, sizeof msg),
                     msg);
    assert_string_equal(msg, "a_long_");
    json_decref(args);
}

static void test_strv_borrowed_and_owned(void **state)
{
    (void)state;
    task_strv_t s = {0};
    char buf[16];
    for (int i = 0; i < 20; i++) { /* past the first growth */
        if (i % 2 == 0) {
            assert_int_equal(task_strv_push(&s, "lit", NULL), 0);
        } else {
            snprintf(buf, sizeof buf, "own%d", i);
            char *owned = strdup(buf);
            assert_non_null(owned);
            assert_int_equal(task_strv_push(&s, NULL, owned), 0);
        }
        assert_null(s.v[s.n]); /* always NULL-terminated */
    }
    assert_int_equal(s.n, 20);
    assert_string_equal(s.v[0], "lit");
    assert_null(s.owned[0]);
    assert_string_equal(s.v[19], "own19");
    assert_ptr_equal(s.v[19], s.owned[19]);
    task_strv_free(&s); /* frees the owned ones; ASan checks there is no leak */
}

static void test_strv_empty(void **state)
{
    (void)state;
    task_strv_t s = {0};
    assert_null(s.v);
    task_strv_free(&s);
}

static void test_utf8_len(void **state)
{
    (void)state;
    static const struct {
        const char *bytes;
        size_t n, len;
    } cases[] = {
        {"a", 1, 1},
        {"\xc3\xa9", 2, 2},         /* é */
        {"\xe2\x82\xac", 3, 3},     /* € */
        {"\xf0\x9f\x98\x80", 4, 4}, /* an emoji */
        {"\xc3", 1, 0},             /* truncated */
        {"\x80", 1, 0},             /* a continuation byte alone */
        {"\xc0\xaf", 2, 0},         /* overlong "/" */
        {"\xed\xa0\x80", 3, 0},     /* a surrogate, U+D800 */
        {"\xf4\x90\x80\x80", 4, 0}, /* above U+10FFFF */
        {"\xff", 1, 0},
        {"\xe2\x28\xa1", 3, 0}, /* a bad second byte */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(task_utf8_len((const unsigned char *)cases[i].bytes, cases[i].n),
                         cases[i].len);
}

static void test_utf8_to_json(void **state)
{
    (void)state;
    json_t *v = task_utf8_to_json("ok \xc3\xa9\xff\0x\tz\n", 11, false);
    assert_non_null(v);
    assert_string_equal(json_string_value(v), "ok \xc3\xa9\xef\xbf\xbd x\tz\n");
    json_decref(v);
    v = task_utf8_to_json("a\tb\nc", 5, true);
    assert_string_equal(json_string_value(v), "a b c");
    json_decref(v);
    v = task_utf8_to_json("", 0, true);
    assert_string_equal(json_string_value(v), "");
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_kind_names),
        cmocka_unit_test(test_args_uint),
        cmocka_unit_test(test_args_string),
        cmocka_unit_test(test_args_bool),
        cmocka_unit_test(test_args_object),
        cmocka_unit_test(test_args_message_truncated),
        cmocka_unit_test(test_strv_borrowed_and_owned),
        cmocka_unit_test(test_strv_empty),
        cmocka_unit_test(test_utf8_len),
        cmocka_unit_test(test_utf8_to_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
