/*
 * test_str_map.c -- the string-keyed map (str_map.h) that indexes a runner's jobs by
 * uuid: every key put is found with its latest value until it is deleted, and never
 * after, whatever the order of puts and deletes (deletion shifts entries back instead
 * of leaving tombstones, which is where such maps go wrong).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/str_map.h"

#define N_KEYS 3000

static void test_put_get_replace_delete(void **state)
{
    (void)state;
    str_map_t m;
    str_map_init(&m);
    int a = 1, b = 2;
    assert_null(str_map_get(&m, "x"));
    assert_null(str_map_del(&m, "x"));
    str_map_put(&m, "x", &a);
    assert_ptr_equal(str_map_get(&m, "x"), &a);
    /* An equal key in another buffer replaces the entry. */
    char other[] = "x";
    str_map_put(&m, other, &b);
    assert_int_equal(m.n, 1);
    assert_ptr_equal(str_map_get(&m, "x"), &b);
    assert_ptr_equal(str_map_del(&m, "x"), &b);
    assert_null(str_map_get(&m, "x"));
    assert_int_equal(m.n, 0);
    str_map_free(&m);
}

/* Random puts and deletes of uuid-like keys, checked against a plain array after each
 * step: a wrong backward shift loses an entry that is still in the map. */
static void test_random_ops_match_a_reference(void **state)
{
    (void)state;
    static char keys[N_KEYS][40];
    static int values[N_KEYS];
    static int present[N_KEYS];
    str_map_t m;
    str_map_init(&m);
    uint32_t x = 2463534242u; /* xorshift32: the same sequence every run */
    for (int i = 0; i < N_KEYS; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        snprintf(keys[i], sizeof keys[i], "%08x-%04x-4000-8000-%012d", x, i & 0xffff, i);
        values[i] = i;
    }
    size_t live = 0;
    for (int step = 0; step < 40000; step++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        int k = (int)(x % N_KEYS);
        /* Grow to about two thirds of the keys, then churn. */
        if (present[k] && (x >> 16) % 3 != 0) {
            assert_ptr_equal(str_map_del(&m, keys[k]), &values[k]);
            present[k] = 0;
            live--;
        } else {
            str_map_put(&m, keys[k], &values[k]);
            live += !present[k];
            present[k] = 1;
        }
        assert_int_equal(m.n, live);
        if (step % 4000 == 0 || step == 39999) {
            for (int i = 0; i < N_KEYS; i++)
                assert_ptr_equal(str_map_get(&m, keys[i]), present[i] ? &values[i] : NULL);
        }
    }
    /* Everything deleted: nothing is found, and the table is empty. */
    for (int i = 0; i < N_KEYS; i++)
        if (present[i])
            assert_ptr_equal(str_map_del(&m, keys[i]), &values[i]);
    assert_int_equal(m.n, 0);
    for (size_t i = 0; i < m.cap; i++)
        assert_null(m.slots[i].key);
    str_map_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_replace_delete),
        cmocka_unit_test(test_random_ops_match_a_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
