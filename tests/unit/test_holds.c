/*
 * test_holds.c -- resource ticket lines: templates expanded, sorted by resource so
 * that every job takes tickets in one global order, and bad names refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/error.h"
#include "model/holds.h"

static void test_sorted_and_expanded(void **state)
{
    (void)state;
    wf_hold_t holds[] = {{"vm:${params.vm}", 1}, {"disk:${params.disk}", 3}, {"rack:r1", 2}};
    json_t *params = json_pack("{s:s, s:i}", "vm", "v9", "disk", 7);
    template_scope_t sc = {.params = params};
    char err[256];
    char *lines = NULL;
    assert_int_equal(holds_expand(holds, 3, &sc, &lines, err, sizeof err), 0);
    assert_string_equal(lines, "3 disk:7\n2 rack:r1\n1 vm:v9\n");
    free(lines);
    /* The same resources listed in another order give the same lines. */
    wf_hold_t other[] = {{"rack:r1", 2}, {"vm:${params.vm}", 1}, {"disk:${params.disk}", 3}};
    assert_int_equal(holds_expand(other, 3, &sc, &lines, err, sizeof err), 0);
    assert_string_equal(lines, "3 disk:7\n2 rack:r1\n1 vm:v9\n");
    free(lines);
    json_decref(params);
}

static void test_none_is_empty(void **state)
{
    (void)state;
    template_scope_t sc = {0};
    char err[256];
    char *lines = NULL;
    assert_int_equal(holds_expand(NULL, 0, &sc, &lines, err, sizeof err), 0);
    assert_string_equal(lines, "");
    free(lines);
}

static void test_missing_name_refused(void **state)
{
    (void)state;
    wf_hold_t holds[] = {{"rack:r1", 1}, {"vm:${params.vm}", 1}};
    json_t *params = json_object();
    template_scope_t sc = {.params = params};
    char err[256] = "";
    char *lines = NULL;
    assert_int_equal(holds_expand(holds, 2, &sc, &lines, err, sizeof err), TERN_EINVAL);
    assert_null(lines);
    assert_non_null(strstr(err, "holds[1]"));
    assert_non_null(strstr(err, "${params.vm}"));
    json_decref(params);
}

static void test_newline_refused(void **state)
{
    (void)state;
    wf_hold_t holds[] = {{"vm:${params.vm}", 1}};
    json_t *params = json_pack("{s:s}", "vm", "a\nb");
    template_scope_t sc = {.params = params};
    char err[256] = "";
    char *lines = NULL;
    assert_int_equal(holds_expand(holds, 1, &sc, &lines, err, sizeof err), TERN_EINVAL);
    assert_null(lines);
    assert_string_equal(err, "holds[0]: a resource name cannot contain a newline");
    json_decref(params);
}

/* A capacity from the job's inputs (an admission check's result): a number, or a
 * string of digits, gives the line's capacity. */
static void test_templated_capacity(void **state)
{
    (void)state;
    wf_hold_t holds[] = {
        {.resource = "slot:${admission.check.result.server}",
         .capacity_template = "${admission.check.result.slots}"},
        {.resource = "rack:r1", .capacity_template = "${params.n}"},
    };
    json_t *admission =
        json_pack("{s:{s:{s:s, s:i}}}", "check", "result", "server", "cn1", "slots", 2);
    json_t *params = json_pack("{s:s}", "n", "7");
    template_scope_t sc = {.params = params, .admission = admission};
    char err[256] = "";
    char *lines = NULL;
    assert_int_equal(holds_expand(holds, 2, &sc, &lines, err, sizeof err), 0);
    assert_string_equal(lines, "7 rack:r1\n2 slot:cn1\n");
    free(lines);
    json_decref(admission);
    json_decref(params);
}

/* Anything but an integer from 1 to the maximum is refused (TERN_EREFUSED: the job is
 * refused 422), naming the hold, its template and the value. */
static void test_templated_capacity_refused(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        const char *shown;
    } bad[] = {{"0", "0"},       {"-1", "-1"},           {"2.5", "2.5"},
               {"\"x\"", "x"},   {"1000001", "1000001"}, {"true", "true"},
               {"null", "null"}, {"\"\"", ""},           {"[2]", "[2]"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        wf_hold_t holds[] = {{.resource = "a", .capacity = 1},
                             {.resource = "b", .capacity_template = "${params.n}"}};
        json_error_t jerr;
        json_t *n = json_loads(bad[i].json, JSON_DECODE_ANY, &jerr);
        assert_non_null(n);
        json_t *params = json_pack("{s:o}", "n", n);
        template_scope_t sc = {.params = params};
        char err[256] = "", want[256];
        char *lines = NULL;
        assert_int_equal(holds_expand(holds, 2, &sc, &lines, err, sizeof err), TERN_EREFUSED);
        assert_null(lines);
        snprintf(want, sizeof want,
                 "holds[1].capacity: \"${params.n}\" gave \"%s\", expected an integer from 1 "
                 "to 1000000",
                 bad[i].shown);
        assert_string_equal(err, want);
        json_decref(params);
    }
    /* A template naming nothing is a template error, as a resource's is. */
    wf_hold_t holds[] = {{.resource = "b", .capacity_template = "${params.missing}"}};
    json_t *params = json_object();
    template_scope_t sc = {.params = params};
    char err[256] = "";
    char *lines = NULL;
    assert_int_equal(holds_expand(holds, 1, &sc, &lines, err, sizeof err), TERN_EINVAL);
    assert_non_null(strstr(err, "holds[0].capacity"));
    json_decref(params);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sorted_and_expanded),
        cmocka_unit_test(test_none_is_empty),
        cmocka_unit_test(test_missing_name_refused),
        cmocka_unit_test(test_newline_refused),
        cmocka_unit_test(test_templated_capacity),
        cmocka_unit_test(test_templated_capacity_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL) == 0 ? 0 : 1;
}
