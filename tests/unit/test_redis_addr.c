/*
 * test_redis_addr.c -- engine/redis/redis_addr.c: every address form an operator may pass
 * to --redis, every refusal with its exact message, and that no password ever shows
 * in a message or in the redacted form.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "redis/redis_addr.h"

/* Parses url, which must succeed, into *a. */
static void parse_ok(const char *url, redis_addr_t *a)
{
    char err[512] = "";
    int rc = redis_addr_parse(url, a, err, sizeof err);
    if (rc != 0)
        fail_msg("\"%s\" refused: %s", url, err);
}

/* Parses url, which must fail with exactly `expect`. */
static void parse_err(const char *url, const char *expect)
{
    char err[512] = "";
    redis_addr_t a;
    int rc = redis_addr_parse(url, &a, err, sizeof err);
    assert_int_equal(rc, TERN_EINVAL);
    assert_string_equal(err, expect);
    /* Failed parses leave nothing to free. */
    assert_null(a.host);
    assert_null(a.path);
    assert_null(a.user);
    assert_null(a.password);
}

static void assert_redacted(const redis_addr_t *a, const char *expect)
{
    char *r = redis_addr_redacted(a);
    assert_string_equal(r, expect);
    free(r);
}

static void test_host_only(void **state)
{
    (void)state;
    redis_addr_t a;
    parse_ok("redis://cache.dc1.example", &a);
    assert_string_equal(a.host, "cache.dc1.example");
    assert_int_equal(a.port, 6379);
    assert_int_equal(a.db, 0);
    assert_null(a.path);
    assert_null(a.user);
    assert_null(a.password);
    assert_redacted(&a, "redis://cache.dc1.example:6379");
    redis_addr_dispose(&a);

    parse_ok("REDIS://10.0.0.5", &a); /* the scheme is case-insensitive */
    assert_string_equal(a.host, "10.0.0.5");
    redis_addr_dispose(&a);
}

static void test_host_port_db(void **state)
{
    (void)state;
    redis_addr_t a;
    parse_ok("redis://127.0.0.1:6380/3", &a);
    assert_string_equal(a.host, "127.0.0.1");
    assert_int_equal(a.port, 6380);
    assert_int_equal(a.db, 3);
    assert_redacted(&a, "redis://127.0.0.1:6380/3");
    redis_addr_dispose(&a);

    parse_ok("redis://h:1/", &a); /* empty path: database 0 */
    assert_int_equal(a.port, 1);
    assert_int_equal(a.db, 0);
    redis_addr_dispose(&a);

    parse_ok("redis://h:65535/0", &a);
    assert_int_equal(a.port, 65535);
    redis_addr_dispose(&a);

    parse_ok("redis://h/7", &a); /* database without a port */
    assert_int_equal(a.port, 6379);
    assert_int_equal(a.db, 7);
    redis_addr_dispose(&a);
}

static void test_ipv6(void **state)
{
    (void)state;
    redis_addr_t a;
    parse_ok("redis://[::1]:6380", &a);
    assert_string_equal(a.host, "::1");
    assert_int_equal(a.port, 6380);
    assert_redacted(&a, "redis://[::1]:6380");
    redis_addr_dispose(&a);

    parse_ok("redis://[2001:db8::7]/2", &a);
    assert_string_equal(a.host, "2001:db8::7");
    assert_int_equal(a.port, 6379);
    assert_int_equal(a.db, 2);
    assert_redacted(&a, "redis://[2001:db8::7]:6379/2");
    redis_addr_dispose(&a);
}

static void test_credentials(void **state)
{
    (void)state;
    redis_addr_t a;
    parse_ok("redis://tern:s3cret@10.1.2.3:6379/1", &a);
    assert_string_equal(a.user, "tern");
    assert_string_equal(a.password, "s3cret");
    assert_string_equal(a.host, "10.1.2.3");
    assert_int_equal(a.db, 1);
    assert_redacted(&a, "redis://tern:***@10.1.2.3:6379/1");
    redis_addr_dispose(&a);

    /* Password alone (the default user). */
    parse_ok("redis://:pw@h", &a);
    assert_null(a.user);
    assert_string_equal(a.password, "pw");
    assert_redacted(&a, "redis://:***@h:6379");
    redis_addr_dispose(&a);

    /* Percent-decoding of both; an unencoded '@' in the password is tolerated. */
    parse_ok("redis://ops%40dc1:p%2Fa%3Ass%25w@rd@h:7000", &a);
    assert_string_equal(a.user, "ops@dc1");
    assert_string_equal(a.password, "p/a:ss%w@rd");
    assert_string_equal(a.host, "h");
    assert_int_equal(a.port, 7000);
    assert_redacted(&a, "redis://ops%40dc1:***@h:7000");
    redis_addr_dispose(&a);
}

static void test_unix(void **state)
{
    (void)state;
    redis_addr_t a;
    parse_ok("unix:///var/run/redis/redis.sock", &a);
    assert_null(a.host);
    assert_string_equal(a.path, "/var/run/redis/redis.sock");
    assert_int_equal(a.db, 0);
    assert_redacted(&a, "unix:///var/run/redis/redis.sock");
    redis_addr_dispose(&a);

    parse_ok("unix:///tmp/r.sock?db=3", &a);
    assert_string_equal(a.path, "/tmp/r.sock");
    assert_int_equal(a.db, 3);
    assert_redacted(&a, "unix:///tmp/r.sock?db=3");
    redis_addr_dispose(&a);

    parse_ok("unix://admin:hunter2@/tmp/r.sock", &a);
    assert_string_equal(a.user, "admin");
    assert_string_equal(a.password, "hunter2");
    assert_string_equal(a.path, "/tmp/r.sock");
    assert_redacted(&a, "unix://admin:***@/tmp/r.sock");
    redis_addr_dispose(&a);

    parse_ok("unix://:pw@/tmp/r.sock?db=12", &a);
    assert_null(a.user);
    assert_string_equal(a.password, "pw");
    assert_int_equal(a.db, 12);
    assert_redacted(&a, "unix://:***@/tmp/r.sock?db=12");
    redis_addr_dispose(&a);
}

/* A socket path may hold anything but NUL: written percent-encoded, it reads back as
 * itself (a data directory "my data" once made ternd refuse its own socket's URL). */
static void test_unix_any_path(void **state)
{
    (void)state;
    static const char *const paths[] = {
        "/srv/my data/redis.sock",
        "/srv/q'\"\\%20?db=1#x\n\t\xc3\xa9/redis.sock",
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(paths); i++) {
        char *url = redis_addr_unix_url(paths[i]);
        redis_addr_t a;
        parse_ok(url, &a);
        assert_string_equal(a.path, paths[i]);
        assert_int_equal(a.db, 0);
        assert_redacted(&a, url);
        redis_addr_dispose(&a);
        free(url);
    }
    char *url = redis_addr_unix_url("/srv/my data/redis.sock");
    assert_string_equal(url, "unix:///srv/my%20data/redis.sock");
    free(url);
    parse_err("unix:///srv/a%2/r.sock",
              "redis address \"unix:///srv/a%2/r.sock\": bad percent-encoding in the socket path");
    parse_err("unix:///srv/a%00/r.sock",
              "redis address \"unix:///srv/a%00/r.sock\": bad percent-encoding in the socket path");
}

static void test_errors_form(void **state)
{
    (void)state;
    parse_err("", "redis address \"\": expected redis://HOST[:PORT][/DB] or unix:///PATH");
    parse_err("localhost:6379",
              "redis address \"localhost:6379\": expected redis://HOST[:PORT][/DB] or "
              "unix:///PATH");
    parse_err("http://h:80", "redis address \"http://h:80\": unknown scheme \"http\" (redis:// "
                             "or unix://)");
    parse_err("rediss://h:6380", "redis address \"rediss://h:6380\": TLS (rediss://) is not "
                                 "supported; use a unix socket or a private network");
    parse_err("redis://", "redis address \"redis://\": host is missing");
    parse_err("redis://:6379", "redis address \"redis://:6379\": host is missing");
    parse_err("redis:///0", "redis address \"redis:///0\": host is missing");
    parse_err("redis://h ost", "redis address \"redis://h ost\": contains a space or control "
                               "character");
    parse_err("redis://h#frag", "redis address \"redis://h#frag\": unexpected '#' fragment");
    parse_err("redis://h?db=1", "redis address \"redis://h?db=1\": query parameters are not "
                                "supported (the database goes in the path: /DB)");
    parse_err("redis://bad!host", "redis address \"redis://bad!host\": bad character '!' in "
                                  "host \"bad!host\"");
    parse_err("redis://300.1.1.1", "redis address \"redis://300.1.1.1\": bad IPv4 address "
                                   "\"300.1.1.1\"");
}

static void test_errors_port_db(void **state)
{
    (void)state;
    parse_err("redis://h:99999", "redis address \"redis://h:99999\": port must be 1-65535");
    parse_err("redis://h:0", "redis address \"redis://h:0\": port must be 1-65535");
    parse_err("redis://h:-1", "redis address \"redis://h:-1\": port must be 1-65535");
    parse_err("redis://h:6379x", "redis address \"redis://h:6379x\": port must be 1-65535");
    parse_err("redis://h:", "redis address \"redis://h:\": port is empty");
    parse_err("redis://h:/1", "redis address \"redis://h:/1\": port is empty");
    parse_err("redis://h:6379/x", "redis address \"redis://h:6379/x\": database must be a "
                                  "number 0-2147483647, got \"x\"");
    parse_err("redis://h/1/2", "redis address \"redis://h/1/2\": database must be a number "
                               "0-2147483647, got \"1/2\"");
    parse_err("redis://h/99999999999", "redis address \"redis://h/99999999999\": database must "
                                       "be a number 0-2147483647, got \"99999999999\"");
}

static void test_errors_ipv6(void **state)
{
    (void)state;
    parse_err("redis://[::1:6379", "redis address \"redis://[::1:6379\": IPv6 address lacks "
                                   "its closing ']'");
    parse_err("redis://[zz::1]:6379", "redis address \"redis://[zz::1]:6379\": bad IPv6 "
                                      "address \"zz::1\"");
    parse_err("redis://[]:6379", "redis address \"redis://[]:6379\": bad IPv6 address \"\"");
    parse_err("redis://[::1]x", "redis address \"redis://[::1]x\": unexpected \"x\" after the "
                                "IPv6 address");
    parse_err("redis://::1:6379", "redis address \"redis://::1:6379\": host is missing");
}

static void test_errors_unix(void **state)
{
    (void)state;
    parse_err("unix://tmp/r.sock", "redis address \"unix://tmp/r.sock\": a unix socket URL has "
                                   "no host: write unix:///PATH (three slashes)");
    parse_err("unix://", "redis address \"unix://\": socket path must be absolute "
                         "(unix:///PATH, three slashes)");
    parse_err("unix:///tmp/r.sock?database=1", "redis address \"unix:///tmp/r.sock?database=1\": "
                                               "unknown query \"database=1\" (only db=N)");
    parse_err("unix:///tmp/r.sock?db=", "redis address \"unix:///tmp/r.sock?db=\": database "
                                        "must be a number 0-2147483647, got \"\"");
    parse_err("unix:///tmp/r.sock?db=-1", "redis address \"unix:///tmp/r.sock?db=-1\": "
                                          "database must be a number 0-2147483647, got \"-1\"");
    char url[300] = "unix:///";
    memset(url + 8, 'p', 120);
    char expect[512];
    snprintf(expect, sizeof expect, "redis address \"%s\": socket path is longer than 107 bytes",
             url);
    parse_err(url, expect);
}

static void test_errors_credentials_redacted(void **state)
{
    (void)state;
    /* A message quotes the URL with the password hidden, whatever the problem. */
    parse_err("redis://tern:topsecret@h:99999",
              "redis address \"redis://tern:***@h:99999\": port must be 1-65535");
    parse_err("unix://u:topsecret@/tmp/x?db=z",
              "redis address \"unix://u:***@/tmp/x?db=z\": database must be a number "
              "0-2147483647, got \"z\"");
    /* Without a colon the userinfo may be a password (redis-cli reads it so). */
    parse_err("redis://topsecret@h",
              "redis address \"redis://***@h\": credentials need a colon: write "
              "[USER]:PASSWORD@ (\":PASSWORD@\" for a password alone)");
    parse_err("redis://u:@h", "redis address \"redis://u:***@h\": empty password (leave out "
                              "\"USER:@\" when there is no password)");
    parse_err("redis://u%zz:topsecret@h",
              "redis address \"redis://u%zz:***@h\": bad percent-encoding in the user name");
    parse_err("redis://u:top%4secret@h",
              "redis address \"redis://u:***@h\": bad percent-encoding in the password");
    parse_err("redis://u:top%00secret@h",
              "redis address \"redis://u:***@h\": bad percent-encoding in the password");
    parse_err("redis://u:topsecret%@h",
              "redis address \"redis://u:***@h\": bad percent-encoding in the password");
    /* Even text with no scheme hides what looks like a password. */
    parse_err("u:topsecret@h:6379", "redis address \"u:***@h:6379\": expected "
                                    "redis://HOST[:PORT][/DB] or unix:///PATH");
}

static void test_null_err_buffer(void **state)
{
    (void)state;
    redis_addr_t a;
    assert_int_equal(redis_addr_parse("redis://h:0", &a, NULL, 0), TERN_EINVAL);
    assert_int_equal(redis_addr_parse(NULL, &a, NULL, 0), TERN_EINVAL);
    /* dispose is safe on a zeroed or already disposed address. */
    redis_addr_dispose(&a);
    redis_addr_dispose(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_only),
        cmocka_unit_test(test_host_port_db),
        cmocka_unit_test(test_ipv6),
        cmocka_unit_test(test_credentials),
        cmocka_unit_test(test_unix),
        cmocka_unit_test(test_unix_any_path),
        cmocka_unit_test(test_errors_form),
        cmocka_unit_test(test_errors_port_db),
        cmocka_unit_test(test_errors_ipv6),
        cmocka_unit_test(test_errors_unix),
        cmocka_unit_test(test_errors_credentials_redacted),
        cmocka_unit_test(test_null_err_buffer),
    };
    int failures = cmocka_run_group_tests_name("redis_addr", tests, NULL, NULL);
    return failures == 0 ? 0 : 1;
}
