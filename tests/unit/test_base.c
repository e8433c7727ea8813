/*
 * test_base.c -- unit tests of engine/base's helpers on the hot path: the uuids
 * ternd gives new jobs (uuid_v4: RFC 4122 version 4 in lowercase hex, every one
 * different; uuid_valid refuses what is not a uuid) and integers as text
 * (u64_text, as printf's %llu writes them).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/decimal.h"
#include "base/ident.h"

#define N_UUIDS 2000

static int cmp_uuid(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* Every uuid made is well formed (dashes at 8, 13, 18, 23; lowercase hex), says
 * version 4 and the RFC variant, passes uuid_valid, and none repeats. Each nibble
 * that is random takes more than one value over the run (a byte stuck at 0 would show). */
static void test_uuid_v4_form_and_uniqueness(void **state)
{
    (void)state;
    char(*u)[37] = calloc(N_UUIDS, sizeof *u);
    assert_non_null(u);
    unsigned seen[36] = {0}; /* per position: a bit per hex digit value seen */
    for (int i = 0; i < N_UUIDS; i++) {
        uuid_v4(u[i]);
        assert_int_equal(strlen(u[i]), 36);
        assert_true(uuid_valid(u[i]));
        for (int k = 0; k < 36; k++) {
            char c = u[i][k];
            if (k == 8 || k == 13 || k == 18 || k == 23) {
                assert_int_equal(c, '-');
                continue;
            }
            assert_true((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
            seen[k] |= 1u << (c <= '9' ? c - '0' : c - 'a' + 10);
        }
        assert_int_equal(u[i][14], '4');
        assert_non_null(strchr("89ab", u[i][19]));
    }
    for (int k = 0; k < 36; k++) {
        if (k == 8 || k == 13 || k == 18 || k == 23 || k == 14)
            continue;
        /* Position 19 holds 2 random bits (4 values); every other one 4 bits. */
        assert_true(__builtin_popcount(seen[k]) >= (k == 19 ? 4 : 16) / 2);
    }
    qsort(u, N_UUIDS, sizeof *u, cmp_uuid);
    for (int i = 1; i < N_UUIDS; i++)
        assert_string_not_equal(u[i - 1], u[i]);
    free(u);
}

static void test_uuid_valid_refuses(void **state)
{
    (void)state;
    assert_true(uuid_valid("0b9e5c8a-4f1d-4c2e-9a3b-7d6e5f4a3b2c"));
    assert_false(uuid_valid(NULL));
    assert_false(uuid_valid(""));
    assert_false(uuid_valid("0b9e5c8a-4f1d-4c2e-9a3b-7d6e5f4a3b2"));   /* short */
    assert_false(uuid_valid("0b9e5c8a-4f1d-4c2e-9a3b-7d6e5f4a3b2cc")); /* long */
    assert_false(uuid_valid("0b9e5c8a_4f1d-4c2e-9a3b-7d6e5f4a3b2c"));  /* dash */
    assert_false(uuid_valid("0b9e5c8a-4f1d-4c2e-9a3b-7d6e5f4a3b2g"));  /* not hex */
    assert_false(uuid_valid("../../../../../etc/passwd/x/y/z/w/1"));   /* a path */
}

static void test_u64_text_as_printf(void **state)
{
    (void)state;
    static const uint64_t values[] = {
        0, 1, 9, 10, 99, 100, 1795548174557ull, UINT32_MAX, 10000000000000000000ull, UINT64_MAX};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char want[32], buf[U64_TEXT_DIGITS + 1];
        snprintf(want, sizeof want, "%llu", (unsigned long long)values[i]);
        const char *got = u64_text(values[i], buf);
        assert_string_equal(got, want);
        assert_ptr_equal(got + strlen(got), buf + U64_TEXT_DIGITS);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_u64_text_as_printf),
        cmocka_unit_test(test_uuid_v4_form_and_uniqueness),
        cmocka_unit_test(test_uuid_valid_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
