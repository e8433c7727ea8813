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

#include "model/holds.h"

static void test_sorted_and_expanded(void **state)
{
    (void)state;
    wf_hold_t holds[] = {{"vm:${params.vm}", 1}, {"disk:${params.disk}", 3}, {"rack:r1", 2}};
    json_t *params = json_pack("{s:s, s:i}", "vm", "v9", "disk", 7);
    template_scope_t sc = {.params = params};
    char err[256];
    char *lines = holds_expand(holds, 3, &sc, err, sizeof err);
    assert_non_null(lines);
    assert_string_equal(lines, "3 disk:7\n2 rack:r1\n1 vm:v9\n");
    free(lines);
    /* The same resources listed in another order give the same lines. */
    wf_hold_t other[] = {{"rack:r1", 2}, {"vm:${params.vm}", 1}, {"disk:${params.disk}", 3}};
    lines = holds_expand(other, 3, &sc, err, sizeof err);
    assert_string_equal(lines, "3 disk:7\n2 rack:r1\n1 vm:v9\n");
    free(lines);
    json_decref(params);
}

static void test_none_is_empty(void **state)
{
    (void)state;
    template_scope_t sc = {0};
    char err[256];
    char *lines = holds_expand(NULL, 0, &sc, err, sizeof err);
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
    assert_null(holds_expand(holds, 2, &sc, err, sizeof err));
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
    assert_null(holds_expand(holds, 1, &sc, err, sizeof err));
    assert_string_equal(err, "holds[0]: a resource name cannot contain a newline");
    json_decref(params);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sorted_and_expanded),
        cmocka_unit_test(test_none_is_empty),
        cmocka_unit_test(test_missing_name_refused),
        cmocka_unit_test(test_newline_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL) == 0 ? 0 : 1;
}
