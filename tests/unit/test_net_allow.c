/*
 * test_net_allow.c -- CIDR blocks and allow-lists: parsing (with the refusal of every
 * malformed entry, named), and matching IPv4, IPv6 and IPv4-mapped IPv6 addresses.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "base/error.h"
#include "base/net_allow.h"

/* An address as a sockaddr (v4 or v6, by its text). */
typedef union addr {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
} addr_t;

static const struct sockaddr *addr(addr_t *a, const char *text)
{
    memset(a, 0, sizeof *a);
    if (inet_pton(AF_INET, text, &a->in.sin_addr) == 1) {
        a->in.sin_family = AF_INET;
        a->in.sin_port = htons(80);
    } else if (inet_pton(AF_INET6, text, &a->in6.sin6_addr) == 1) {
        a->in6.sin6_family = AF_INET6;
        a->in6.sin6_port = htons(80);
    } else {
        fail_msg("test address %s does not parse", text);
    }
    return &a->sa;
}

static bool contains(const char *cidr, const char *address)
{
    net_cidr_t c;
    char err[256] = "";
    if (net_cidr_parse(cidr, &c, err, sizeof err) != 0)
        fail_msg("%s: %s", cidr, err);
    addr_t a;
    return net_cidr_contains(&c, addr(&a, address));
}

static void cidr_refused(const char *cidr, const char *want)
{
    net_cidr_t c;
    char err[256] = "";
    assert_int_equal(net_cidr_parse(cidr, &c, err, sizeof err), TERN_EINVAL);
    assert_string_equal(err, want);
}

static void test_v4(void **state)
{
    (void)state;
    assert_true(contains("10.0.0.0/8", "10.255.1.2"));
    assert_false(contains("10.0.0.0/8", "11.0.0.1"));
    assert_true(contains("192.168.1.0/25", "192.168.1.127"));
    assert_false(contains("192.168.1.0/25", "192.168.1.128"));
    assert_true(contains("0.0.0.0/0", "203.0.113.9"));
    assert_true(contains("127.0.0.1", "127.0.0.1")); /* an address alone: one host */
    assert_false(contains("127.0.0.1", "127.0.0.2"));
    assert_true(contains("127.0.0.1/32", "127.0.0.1"));
    /* A v4 block holds no v6 address, and the reverse. */
    assert_false(contains("0.0.0.0/0", "2001:db8::1"));
    assert_false(contains("::/0", "10.0.0.1"));
}

static void test_v6(void **state)
{
    (void)state;
    assert_true(contains("fd00::/8", "fd12:3456::1"));
    assert_false(contains("fd00::/8", "fe80::1"));
    assert_true(contains("::1/128", "::1"));
    assert_false(contains("::1/128", "::2"));
    assert_true(contains("2001:db8::/33", "2001:db8:7fff::1"));
    assert_false(contains("2001:db8::/33", "2001:db8:8000::1"));
    assert_true(contains("::/0", "2001:db8::1"));
}

/* ::ffff:a.b.c.d is a.b.c.d, whichever way it is written: a v6 socket connecting to an
 * IPv4 host, or an allow-list written in v6 notation. */
static void test_v4_mapped(void **state)
{
    (void)state;
    assert_true(contains("127.0.0.0/8", "::ffff:127.0.0.1"));
    assert_false(contains("10.0.0.0/8", "::ffff:127.0.0.1"));
    assert_true(contains("::ffff:10.0.0.0/104", "10.1.2.3"));
    assert_true(contains("::ffff:10.0.0.0/104", "::ffff:10.1.2.3"));
    assert_false(contains("::ffff:10.0.0.0/104", "11.0.0.1"));
    assert_true(contains("::ffff:0:0/96", "169.254.169.254"));
    /* A v6 block that is not v4-mapped holds no v4 address. */
    assert_false(contains("::/0", "::ffff:127.0.0.1"));
    addr_t a;
    char text[64];
    net_addr_text(addr(&a, "::ffff:169.254.169.254"), text, sizeof text);
    assert_string_equal(text, "169.254.169.254");
    net_addr_text(addr(&a, "fd00::1"), text, sizeof text);
    assert_string_equal(text, "fd00::1");
}

static void test_malformed(void **state)
{
    (void)state;
    cidr_refused("", "not a network");
    cidr_refused("10.0.0/8", "not a network");
    cidr_refused("10.0.0.0/33", "prefix 33 is longer than 32");
    cidr_refused("fd00::/129", "prefix 129 is longer than 128");
    cidr_refused("10.0.0.0/", "not a network (bad prefix length)");
    cidr_refused("10.0.0.0/+8", "not a network (bad prefix length)");
    cidr_refused("10.0.0.0/ 8", "not a network (bad prefix length)");
    cidr_refused("10.0.0.0/8/8", "not a network (bad prefix length)");
    cidr_refused("10.0.0.0/0008", "not a network (bad prefix length)");
    cidr_refused("localhost/8", "not a network");
    cidr_refused("fe80::1%eth0/64", "not a network");
    cidr_refused("10.1.2.3/8", "host bits set: the network is 10.0.0.0/8");
    cidr_refused("fd00::1/8", "host bits set: the network is fd00::/8");
    cidr_refused("::ffff:10.1.0.0/104", "host bits set: the network is 10.0.0.0/8");
}

static void test_list(void **state)
{
    (void)state;
    json_t *list = json_loads("[\"10.0.0.0/8\", \"127.0.0.1/32\", \"::1/128\"]", 0, NULL);
    net_allow_t *a = NULL;
    char err[512] = "";
    assert_int_equal(net_allow_parse(list, "postback_allow_networks", &a, err, sizeof err), 0);
    json_decref(list);
    assert_non_null(a);
    assert_string_equal(net_allow_setting(a), "postback_allow_networks");
    addr_t x;
    assert_true(net_allow_permits(a, addr(&x, "10.9.8.7")));
    assert_true(net_allow_permits(a, addr(&x, "127.0.0.1")));
    assert_true(net_allow_permits(a, addr(&x, "::ffff:127.0.0.1")));
    assert_true(net_allow_permits(a, addr(&x, "::1")));
    assert_false(net_allow_permits(a, addr(&x, "127.0.0.2")));
    assert_false(net_allow_permits(a, addr(&x, "169.254.169.254")));
    assert_false(net_allow_permits(a, addr(&x, "fd00::1")));
    net_allow_free(a);

    /* No list: everything; an empty list: nothing. */
    assert_int_equal(net_allow_parse(NULL, "x", &a, err, sizeof err), 0);
    assert_null(a);
    assert_true(net_allow_permits(NULL, addr(&x, "169.254.169.254")));
    list = json_null();
    assert_int_equal(net_allow_parse(list, "x", &a, err, sizeof err), 0);
    assert_null(a);
    list = json_array();
    assert_int_equal(net_allow_parse(list, "x", &a, err, sizeof err), 0);
    json_decref(list);
    assert_false(net_allow_permits(a, addr(&x, "127.0.0.1")));
    net_allow_free(a);
}

static void list_refused(const char *text, const char *want)
{
    json_t *list = json_loads(text, JSON_DECODE_ANY, NULL);
    assert_non_null(list);
    net_allow_t *a = (net_allow_t *)&a; /* must be reset */
    char err[512] = "";
    assert_int_equal(net_allow_parse(list, "plugins.http.allow_networks", &a, err, sizeof err),
                     TERN_EINVAL);
    assert_null(a);
    assert_string_equal(err, want);
    json_decref(list);
}

static void test_list_refusals(void **state)
{
    (void)state;
    list_refused("[\"10.0.0.0/8\", \"10.0.0/8\"]",
                 "plugins.http.allow_networks[1]: \"10.0.0/8\": not a network (expected "
                 "ADDRESS/PREFIX such as 10.0.0.0/8 or fd00::/8)");
    list_refused("[\"::1/128\", 7]", "plugins.http.allow_networks[1]: 7: not a string (expected "
                                     "ADDRESS/PREFIX such as 10.0.0.0/8 or fd00::/8)");
    list_refused("[\"192.168.0.1/16\"]",
                 "plugins.http.allow_networks[0]: \"192.168.0.1/16\": host bits set: the network "
                 "is 192.168.0.0/16 (expected ADDRESS/PREFIX such as 10.0.0.0/8 or fd00::/8)");
    list_refused("\"10.0.0.0/8\"", "plugins.http.allow_networks: expected an array of networks "
                                   "such as [\"10.0.0.0/8\", \"fd00::/8\"] (or null: any "
                                   "address)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v4),        cmocka_unit_test(test_v6),
        cmocka_unit_test(test_v4_mapped), cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_list),      cmocka_unit_test(test_list_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
