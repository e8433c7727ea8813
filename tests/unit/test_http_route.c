/*
 * test_http_route.c -- the HTTP API's route matching, percent-decoding and query
 * strings (http_route.h), without a server.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/error.h"
#include "http/http_route.h"

static void free_params(api_req_t *r)
{
    for (size_t i = 0; i < r->n_params; i++)
        free(r->params[i]);
    r->n_params = 0;
}

static void test_percent_decode(void **state)
{
    (void)state;
    char *s = api_percent_decode("a+b%41%2f%zz%4", 14);
    assert_string_equal(s, "a bA/%zz%4");
    free(s);
}

static void test_route_match(void **state)
{
    (void)state;
    api_req_t r = {0};
    assert_true(api_route_match("/jobs/:uuid/cancel", "/jobs/a%20b/cancel", &r));
    assert_int_equal(r.n_params, 1);
    assert_string_equal(r.params[0], "a b");
    free_params(&r);
    assert_true(api_route_match("/jobs", "/jobs/", &r));
    assert_false(api_route_match("/jobs", "/jobs//", &r));
    assert_false(api_route_match("/jobs/:uuid", "/jobs/", &r));
    assert_false(api_route_match("/jobs/:uuid", "/jobs/x/y", &r));
    assert_int_equal(r.n_params, 0);
}

static void handler(api_req_t *r)
{
    (void)r;
}

static void test_route_find(void **state)
{
    (void)state;
    static const api_route_t jobs[] = {
        {"GET", "/jobs", handler}, {"POST", "/jobs/:uuid/retry", handler}, {NULL, NULL, NULL}};
    static const api_route_t *const tables[] = {jobs};
    api_req_t r = {0};
    bool known;
    const api_route_t *rt = api_route_find(tables, 1, "POST", "/jobs/j1/retry", &r, &known);
    assert_ptr_equal(rt, &jobs[1]);
    assert_true(known);
    assert_string_equal(r.params[0], "j1");
    free_params(&r);
    assert_null(api_route_find(tables, 1, "POST", "/jobs", &r, &known));
    assert_true(known);
    assert_null(api_route_find(tables, 1, "GET", "/nope", &r, &known));
    assert_false(known);
}

/* The Allow header of a 405: every method served on the path, once, HEAD with GET. */
static void test_route_allow(void **state)
{
    (void)state;
    static const api_route_t a[] = {{"GET", "/jobs/:uuid", handler},
                                    {"POST", "/jobs/:uuid/retry", handler},
                                    {NULL, NULL, NULL}};
    static const api_route_t b[] = {
        {"DELETE", "/jobs/:uuid", handler}, {"GET", "/jobs/:id", handler}, {NULL, NULL, NULL}};
    static const api_route_t *const tables[] = {a, b};
    char allow[64];
    api_route_allow(tables, 2, "/jobs/j1", allow, sizeof allow);
    assert_string_equal(allow, "GET, HEAD, DELETE");
    api_route_allow(tables, 2, "/jobs/j1/retry", allow, sizeof allow);
    assert_string_equal(allow, "POST");
    api_route_allow(tables, 2, "/nope", allow, sizeof allow);
    assert_string_equal(allow, "");
}

static void test_query(void **state)
{
    (void)state;
    api_req_t r = {0};
    r.query = xstrdup("limit=5&a+b=c%26d&flag&limit=9&&=x");
    char *v = api_query_get(&r, "limit");
    assert_string_equal(v, "5");
    free(v);
    v = api_query_get(&r, "flag");
    assert_string_equal(v, "");
    free(v);
    assert_null(api_query_get(&r, "a b")); /* names are compared before decoding */
    json_t *all = api_query_all(&r);
    assert_string_equal(json_string_value(json_object_get(all, "a b")), "c&d");
    assert_string_equal(json_string_value(json_object_get(all, "limit")), "5");
    assert_int_equal(json_object_size(all), 3);
    json_decref(all);
    char err[256];
    uint64_t n;
    assert_int_equal(api_query_uint(&r, "limit", 1, 10, &n, err, sizeof err), 0);
    assert_int_equal(n, 5);
    assert_int_equal(api_query_uint(&r, "limit", 1, 4, &n, err, sizeof err), TERN_EINVAL);
    assert_string_equal(err, "limit: expected an integer from 0 to 4, got \"5\"");
    free(r.query);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_percent_decode), cmocka_unit_test(test_route_match),
        cmocka_unit_test(test_route_find),     cmocka_unit_test(test_route_allow),
        cmocka_unit_test(test_query),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
