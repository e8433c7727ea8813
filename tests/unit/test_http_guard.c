/*
 * test_http_guard.c -- the API's admission decisions (http_guard.h) without a server:
 * Host, Origin, Content-Type, bearer tokens, token files and route scopes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/error.h"
#include "http/http_guard.h"
#include "http/http_request.h"

#define S(lit) lit, strlen(lit)

static http_guard_t G;

static bool host_ok(const char *h)
{
    http_guard_verdict_t v;
    return http_guard_host(&G, S(h), 0x101, &v);
}

static void test_host(void **state)
{
    (void)state;
    assert_true(host_ok("127.0.0.1"));
    assert_true(host_ok("127.0.0.1:8080"));
    assert_true(host_ok("10.1.2.3:1"));
    assert_true(host_ok("[::1]"));
    assert_true(host_ok("[::1]:8080"));
    assert_true(host_ok("[fe80::1:2]:80"));
    assert_true(host_ok("localhost"));
    assert_true(host_ok("LocalHost:9"));
    assert_true(host_ok("tern.example")); /* allowed in setup */
    assert_true(host_ok("TERN.example:443"));
    assert_false(host_ok("evil.example"));
    assert_false(host_ok("tern.example.evil"));
    assert_false(host_ok("localhost.evil.example"));
    assert_false(host_ok("127.0.0.1.nip.io"));
    assert_false(host_ok("127.1"));      /* not a dotted quad: a name */
    assert_false(host_ok("0177.0.0.1")); /* leading zeros are no IP literal */
    assert_false(host_ok("::1"));        /* IPv6 needs brackets */
    assert_false(host_ok("[::1"));
    assert_false(host_ok("[::1]x"));
    assert_false(host_ok("127.0.0.1:99999"));
    assert_false(host_ok("127.0.0.1:80:80"));
    assert_false(host_ok("a b"));
    assert_false(host_ok(""));

    http_guard_verdict_t v;
    assert_false(http_guard_host(&G, S("evil.example:80"), 0x200, &v));
    assert_int_equal(v.status, 421);
    assert_string_equal(v.code, "MisdirectedRequest");
    assert_non_null(strstr(v.message, "\"evil.example\""));
    assert_non_null(strstr(v.message, "--allowed-hosts"));
    assert_false(http_guard_host(&G, NULL, 0, 0x101, &v));
    assert_int_equal(v.status, 400);
    assert_true(http_guard_host(&G, NULL, 0, 0x100, &v)); /* HTTP/1.0 has no Host */
    assert_false(http_guard_host(&G,
                                 S("a\x01"
                                   "b"),
                                 0x101, &v));
    assert_int_equal(v.status, 400);
    assert_non_null(strstr(v.message, "a?b")); /* control bytes are not echoed */
}

static bool origin_ok(const char *o, const char *host, bool tls)
{
    http_guard_verdict_t v;
    return http_guard_origin(&G, o, o != NULL ? strlen(o) : 0, S(host), tls, &v);
}

static void test_origin(void **state)
{
    (void)state;
    assert_true(origin_ok(NULL, "127.0.0.1:8080", false));
    /* ternd's own origin: same scheme, host and port (defaults by scheme). */
    assert_true(origin_ok("http://127.0.0.1:8080", "127.0.0.1:8080", false));
    assert_true(origin_ok("http://LOCALHOST:8080", "localhost:8080", false));
    assert_true(origin_ok("http://tern.example", "tern.example:80", false));
    assert_true(origin_ok("https://tern.example", "tern.example", true));
    assert_false(origin_ok("https://127.0.0.1:8080", "127.0.0.1:8080", false));
    assert_false(origin_ok("http://127.0.0.1:8081", "127.0.0.1:8080", false));
    assert_false(origin_ok("http://localhost:8080", "127.0.0.1:8080", false));
    /* Listed origins. */
    assert_true(origin_ok("http://ui.example:3000", "127.0.0.1:8080", false));
    assert_true(origin_ok("HTTP://UI.example:3000", "127.0.0.1:8080", false));
    assert_false(origin_ok("http://ui.example:3001", "127.0.0.1:8080", false));
    assert_false(origin_ok("http://ui.example", "127.0.0.1:8080", false));
    /* Foreign ones, an IP literal included, and null. */
    assert_false(origin_ok("http://evil.example", "127.0.0.1:8080", false));
    assert_false(origin_ok("http://203.0.113.7", "127.0.0.1:8080", false));
    assert_false(origin_ok("null", "127.0.0.1:8080", false));
    assert_false(origin_ok("", "127.0.0.1:8080", false));
    assert_false(origin_ok("file://", "127.0.0.1:8080", false));

    http_guard_verdict_t v;
    assert_false(http_guard_origin(&G, S("null"), S("127.0.0.1"), false, &v));
    assert_int_equal(v.status, 403);
    assert_string_equal(v.code, "Forbidden");
    assert_non_null(strstr(v.message, "\"null\""));
    assert_non_null(strstr(v.message, "--allowed-origins"));
}

static bool ct_ok(const char *ct)
{
    http_guard_verdict_t v;
    return http_guard_content_type(ct, ct != NULL ? strlen(ct) : 0, &v);
}

static void test_content_type(void **state)
{
    (void)state;
    assert_true(ct_ok("application/json"));
    assert_true(ct_ok("Application/JSON"));
    assert_true(ct_ok("application/json; charset=utf-8"));
    assert_true(ct_ok("application/json;charset=UTF-8"));
    assert_true(ct_ok(" application/json "));
    assert_false(ct_ok(NULL));
    assert_false(ct_ok("text/plain"));
    assert_false(ct_ok("application/x-www-form-urlencoded"));
    assert_false(ct_ok("multipart/form-data; boundary=x"));
    assert_false(ct_ok("application/jsonx"));
    assert_false(ct_ok("application/json-seq"));
    assert_false(ct_ok("text/plain; application/json"));

    http_guard_verdict_t v;
    assert_false(http_guard_content_type(S("text/plain;charset=UTF-8"), &v));
    assert_int_equal(v.status, 415);
    assert_string_equal(v.code, "UnsupportedMediaType");
    assert_non_null(strstr(v.message, "\"text/plain;charset=UTF-8\""));
    assert_false(http_guard_content_type(NULL, 0, &v));
    assert_non_null(strstr(v.message, "no Content-Type"));
}

#define SUB "submit-token-0123456789"
#define OPR "operator-token-0123456789"

static void test_bearer(void **state)
{
    (void)state;
    http_guard_t g;
    http_guard_init(&g);
    char err[256];
    assert_int_equal(
        http_guard_tokens_parse(&g, S("submit " SUB "\noperator " OPR "\n"), err, sizeof err), 0);
    assert_int_equal(http_guard_bearer(&g, S("Bearer " SUB)), HTTP_SCOPE_SUBMIT);
    assert_int_equal(http_guard_bearer(&g, S("bearer   " OPR "  ")), HTTP_SCOPE_OPERATOR);
    assert_int_equal(http_guard_bearer(&g, S("Bearer " SUB "x")), HTTP_SCOPE_NONE);
    assert_int_equal(http_guard_bearer(&g, S("Bearer "
                                             "submit-token-012345678")),
                     HTTP_SCOPE_NONE);
    assert_int_equal(http_guard_bearer(&g, S("Basic " SUB)), HTTP_SCOPE_NONE);
    assert_int_equal(http_guard_bearer(&g, S("Bearer")), HTTP_SCOPE_NONE);
    assert_int_equal(http_guard_bearer(&g, S("Bearer ")), HTTP_SCOPE_NONE);
    assert_int_equal(http_guard_bearer(&g, S("Bearer" SUB)), HTTP_SCOPE_NONE);
    assert_int_equal(http_guard_bearer(&g, NULL, 0), HTTP_SCOPE_NONE);
    http_guard_dispose(&g);
}

static void parse_fails(const char *text, const char *needle)
{
    http_guard_t g;
    http_guard_init(&g);
    char err[256] = "";
    assert_int_equal(http_guard_tokens_parse(&g, S(text), err, sizeof err), TERN_EINVAL);
    if (strstr(err, needle) == NULL)
        fail_msg("\"%s\" does not name \"%s\"", err, needle);
    assert_int_equal(g.n_tokens, 0); /* nothing kept */
    http_guard_dispose(&g);
}

static void test_token_file(void **state)
{
    (void)state;
    http_guard_t g;
    http_guard_init(&g);
    char err[256];
    /* A bare token (the old one-token file) is operator; comments, blanks, CRLF. */
    assert_int_equal(http_guard_tokens_parse(&g, S(OPR "\r\n"), err, sizeof err), 0);
    assert_int_equal(g.n_tokens, 1);
    assert_int_equal(g.tokens[0].scope, HTTP_SCOPE_OPERATOR);
    http_guard_dispose(&g);
    http_guard_init(&g);
    assert_int_equal(http_guard_tokens_parse(&g,
                                             S("# callers\n\n  submit\t" SUB "  \n"
                                               "   # indented comment\n"
                                               "operator " OPR),
                                             err, sizeof err),
                     0);
    assert_int_equal(g.n_tokens, 2);
    assert_int_equal(g.tokens[0].scope, HTTP_SCOPE_SUBMIT);
    assert_int_equal(g.tokens[1].scope, HTTP_SCOPE_OPERATOR);
    http_guard_dispose(&g);

    /* A file an editor saved with a UTF-8 byte order mark and CRLF line ends. */
    http_guard_init(&g);
    assert_int_equal(
        http_guard_tokens_parse(&g, S("\xEF\xBB\xBFsubmit " SUB "\r\n"), err, sizeof err), 0);
    assert_int_equal(g.n_tokens, 1);
    assert_int_equal(g.tokens[0].scope, HTTP_SCOPE_SUBMIT);
    assert_int_equal(http_guard_bearer(&g, S("Bearer " SUB)), HTTP_SCOPE_SUBMIT);
    http_guard_dispose(&g);
    http_guard_init(&g);
    assert_int_equal(http_guard_tokens_parse(&g, S("\xEF\xBB\xBF" OPR "\n"), err, sizeof err), 0);
    assert_int_equal(http_guard_bearer(&g, S("Bearer " OPR)), HTTP_SCOPE_OPERATOR);
    http_guard_dispose(&g);

    parse_fails("", "no token in the file");
    parse_fails("# nothing\n", "no token in the file");
    parse_fails("submit " SUB "\nadmin " OPR "\n", "line 2: unknown scope \"admin\"");
    parse_fails("submit\n", "line 1: scope submit without a token");
    parse_fails("operator short\n", "line 1: a token needs at least 16 characters");
    parse_fails("submit " SUB "\n\noperator " SUB "\n", "line 3: the same token is given twice");
    parse_fails("operator " OPR " extra\n", "line 1: expected");
    parse_fails("operator tok\x01"
                "en-0123456789abc\n",
                "visible ASCII");
    parse_fails("submit " SUB "\nx y z\n", "line 2");
}

static void test_route_scope(void **state)
{
    (void)state;
    assert_int_equal(http_guard_route_scope("GET", "/ping"), HTTP_SCOPE_NONE);
    static const char *const submit[][2] = {
        {"GET", "/jobs"},
        {"POST", "/jobs"},
        {"GET", "/jobs/:uuid"},
        {"POST", "/jobs/:uuid/cancel"},
        {"POST", "/jobs/:uuid/resume"},
        {"POST", "/jobs/:uuid/retry"},
        {"GET", "/jobs/:uuid/info"},
        {"POST", "/jobs/:uuid/info"},
        {"GET", "/jobs/:uuid/events"},
        {"GET", "/workflows"},
        {"GET", "/workflows/:uuid"},
        {"GET", "/tasks"},
        {"GET", "/views"},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(submit); i++)
        assert_int_equal(http_guard_route_scope(submit[i][0], submit[i][1]), HTTP_SCOPE_SUBMIT);
    static const char *const op[][2] = {
        {"POST", "/workflows"}, {"PUT", "/workflows/:uuid"}, {"DELETE", "/workflows/:uuid"},
        {"GET", "/stats"},      {"GET", "/runners"},         {"GET", "/metrics"},
        {"POST", "/ping"},      {"GET", "/some/new/route"},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(op); i++)
        assert_int_equal(http_guard_route_scope(op[i][0], op[i][1]), HTTP_SCOPE_OPERATOR);
    /* Plugins' views are reads, as GET /jobs is. */
    assert_int_equal(http_guard_view_scope(), HTTP_SCOPE_SUBMIT);
    assert_string_equal(http_scope_name(HTTP_SCOPE_SUBMIT), "submit");
    assert_string_equal(http_scope_name(HTTP_SCOPE_OPERATOR), "operator");
}

/* Every route the API serves (the tables http_api.c routes with) has the scope the
 * docs/API.md gives it, and every route given a scope here is served: renaming a pattern
 * in a route table without the scope table, or adding a route, fails here instead of
 * leaving a submit caller with 403 or a route's scope undecided. */
static void test_served_routes_scopes(void **state)
{
    (void)state;
    static const struct {
        const char *method, *pattern;
        http_scope_t scope;
    } want[] = {
        {"GET", "/ping", HTTP_SCOPE_NONE},
        {"GET", "/jobs", HTTP_SCOPE_SUBMIT},
        {"POST", "/jobs", HTTP_SCOPE_SUBMIT},
        {"GET", "/jobs/:uuid", HTTP_SCOPE_SUBMIT},
        {"POST", "/jobs/:uuid/cancel", HTTP_SCOPE_SUBMIT},
        {"POST", "/jobs/:uuid/resume", HTTP_SCOPE_SUBMIT},
        {"POST", "/jobs/:uuid/retry", HTTP_SCOPE_SUBMIT},
        {"GET", "/jobs/:uuid/info", HTTP_SCOPE_SUBMIT},
        {"POST", "/jobs/:uuid/info", HTTP_SCOPE_SUBMIT},
        {"GET", "/jobs/:uuid/events", HTTP_SCOPE_SUBMIT},
        {"GET", "/workflows", HTTP_SCOPE_SUBMIT},
        {"GET", "/workflows/:uuid", HTTP_SCOPE_SUBMIT},
        {"GET", "/tasks", HTTP_SCOPE_SUBMIT},
        {"GET", "/views", HTTP_SCOPE_SUBMIT},
        {"POST", "/workflows", HTTP_SCOPE_OPERATOR},
        {"PUT", "/workflows/:uuid", HTTP_SCOPE_OPERATOR},
        {"DELETE", "/workflows/:uuid", HTTP_SCOPE_OPERATOR},
        {"GET", "/stats", HTTP_SCOPE_OPERATOR},
        {"GET", "/runners", HTTP_SCOPE_OPERATOR},
        {"GET", "/metrics", HTTP_SCOPE_OPERATOR},
        {"GET", "/schedules", HTTP_SCOPE_SUBMIT},
        {"GET", "/schedules/:uuid", HTTP_SCOPE_SUBMIT},
        {"POST", "/schedules", HTTP_SCOPE_OPERATOR},
        {"DELETE", "/schedules/:uuid", HTTP_SCOPE_OPERATOR},
        {"POST", "/schedules/:uuid/pause", HTTP_SCOPE_OPERATOR},
        {"POST", "/schedules/:uuid/resume", HTTP_SCOPE_OPERATOR},
    };
    const api_route_t *const tables[] = {
        http_routes_workflows, http_routes_jobs,  http_routes_service,  http_routes_events,
        http_routes_metrics,   http_routes_views, http_routes_schedules};
    size_t served = 0;
    for (size_t t = 0; t < TERN_ARRAY_SIZE(tables); t++) {
        for (const api_route_t *r = tables[t]; r->method != NULL; r++) {
            served++;
            size_t i = 0;
            while (i < TERN_ARRAY_SIZE(want) && (strcmp(want[i].method, r->method) != 0 ||
                                                 strcmp(want[i].pattern, r->pattern) != 0))
                i++;
            if (i == TERN_ARRAY_SIZE(want))
                fail_msg("%s %s is served but has no scope decided in this test", r->method,
                         r->pattern);
            if (http_guard_route_scope(r->method, r->pattern) != want[i].scope)
                fail_msg("%s %s needs scope %s, expected %s", r->method, r->pattern,
                         http_scope_name(http_guard_route_scope(r->method, r->pattern)),
                         http_scope_name(want[i].scope));
        }
    }
    if (served != TERN_ARRAY_SIZE(want))
        fail_msg("%zu routes served, %zu given a scope here: a route was renamed or removed",
                 served, TERN_ARRAY_SIZE(want));
}

static void test_allow_lists(void **state)
{
    (void)state;
    http_guard_t g;
    http_guard_init(&g);
    char err[256];
    assert_int_equal(http_guard_allow_host(&g, "a b", err, sizeof err), TERN_EINVAL);
    assert_non_null(strstr(err, "\"a b\""));
    assert_int_equal(http_guard_allow_host(&g, "tern.example:80", err, sizeof err), TERN_EINVAL);
    assert_int_equal(http_guard_allow_origin(&g, "ui.example", err, sizeof err), TERN_EINVAL);
    assert_non_null(strstr(err, "http://HOST[:PORT]"));
    assert_int_equal(http_guard_allow_origin(&g, "http://ui.example/path", err, sizeof err),
                     TERN_EINVAL);
    assert_int_equal(http_guard_allow_origin(&g, "https://ui.example:8443/", err, sizeof err), 0);
    http_guard_verdict_t v;
    assert_true(http_guard_origin(&g, S("https://ui.example:8443"), S("127.0.0.1"), false, &v));
    http_guard_dispose(&g);
}

static int group_setup(void **state)
{
    (void)state;
    http_guard_init(&G);
    char err[256];
    assert_int_equal(http_guard_allow_host(&G, "Tern.Example", err, sizeof err), 0);
    assert_int_equal(http_guard_allow_origin(&G, "http://ui.example:3000", err, sizeof err), 0);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    http_guard_dispose(&G);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host),
        cmocka_unit_test(test_origin),
        cmocka_unit_test(test_content_type),
        cmocka_unit_test(test_bearer),
        cmocka_unit_test(test_token_file),
        cmocka_unit_test(test_route_scope),
        cmocka_unit_test(test_served_routes_scopes),
        cmocka_unit_test(test_allow_lists),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
