/*
 * net_allow.c -- CIDR blocks and lists of them; see net_allow.h. This file owns a
 * net_allow_t (its blocks and its setting name) and nothing else: it resolves no name
 * and opens no socket.
 */
#include "base/net_allow.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

#define CIDR_TEXT_MAX 64 /* "ffff:...:ffff/128" is 43 characters */

struct net_allow {
    char *setting;
    size_t n;
    net_cidr_t blocks[]; /* n of them */
};

static const unsigned char v4_mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* The address of sa as (family, bytes), an IPv4-mapped IPv6 address as IPv4. Returns
 * false for another family. */
static bool addr_bytes(const struct sockaddr *sa, int *family, const unsigned char **bytes)
{
    if (sa->sa_family == AF_INET) {
        *family = AF_INET;
        *bytes = (const unsigned char *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr;
        return true;
    }
    if (sa->sa_family == AF_INET6) {
        const unsigned char *b = ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr;
        if (memcmp(b, v4_mapped_prefix, sizeof v4_mapped_prefix) == 0) {
            *family = AF_INET;
            *bytes = b + 12;
        } else {
            *family = AF_INET6;
            *bytes = b;
        }
        return true;
    }
    return false;
}

/* True when the first `prefix` bits of a and b are equal. */
static bool prefix_equal(const unsigned char *a, const unsigned char *b, unsigned prefix)
{
    unsigned whole = prefix / 8, rest = prefix % 8;
    if (memcmp(a, b, whole) != 0)
        return false;
    if (rest == 0)
        return true;
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    return (a[whole] & mask) == (b[whole] & mask);
}

/* Reads a prefix length: 1 to 3 digits, no sign or space. */
static bool parse_prefix(const char *s, unsigned *out)
{
    size_t n = strlen(s);
    if (n == 0 || n > 3 || strspn(s, "0123456789") != n)
        return false;
    *out = (unsigned)strtoul(s, NULL, 10);
    return true;
}

int net_cidr_parse(const char *text, net_cidr_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    size_t len = strlen(text);
    if (len == 0 || len >= CIDR_TEXT_MAX)
        return err_set(err, errlen, TERN_EINVAL, "not a network");
    char addr[CIDR_TEXT_MAX];
    memcpy(addr, text, len + 1);
    char *slash = strchr(addr, '/');
    if (slash != NULL)
        *slash = '\0';
    unsigned char bytes[16];
    unsigned max;
    if (inet_pton(AF_INET, addr, bytes) == 1) {
        out->family = AF_INET;
        max = 32;
    } else if (inet_pton(AF_INET6, addr, bytes) == 1) {
        out->family = AF_INET6;
        max = 128;
    } else {
        return err_set(err, errlen, TERN_EINVAL, "not a network");
    }
    unsigned prefix = max;
    if (slash != NULL && !parse_prefix(slash + 1, &prefix))
        return err_set(err, errlen, TERN_EINVAL, "not a network (bad prefix length)");
    if (prefix > max)
        return err_set(err, errlen, TERN_EINVAL, "prefix %u is longer than %u", prefix, max);
    /* An IPv4-mapped block of at least 96 bits is the IPv4 block it carries, so that
     * addresses, which are unmapped the same way, meet it. */
    if (out->family == AF_INET6 && prefix >= 96 &&
        memcmp(bytes, v4_mapped_prefix, sizeof v4_mapped_prefix) == 0) {
        memmove(bytes, bytes + 12, 4);
        out->family = AF_INET;
        prefix -= 96;
        max = 32;
    }
    memcpy(out->addr, bytes, max / 8);
    out->prefix = prefix;
    /* Host bits set ("10.1.2.3/8") most often mean a typo in the prefix: refused, with
     * the network it would have been. */
    unsigned char net[16] = {0};
    memcpy(net, out->addr, prefix / 8);
    if (prefix % 8 != 0)
        net[prefix / 8] = out->addr[prefix / 8] & (unsigned char)(0xff << (8 - prefix % 8));
    if (memcmp(net, out->addr, max / 8) != 0) {
        char shown[INET6_ADDRSTRLEN];
        inet_ntop(out->family, net, shown, sizeof shown);
        return err_set(err, errlen, TERN_EINVAL, "host bits set: the network is %s/%u", shown,
                       prefix);
    }
    return 0;
}

bool net_cidr_contains(const net_cidr_t *c, const struct sockaddr *sa)
{
    int family;
    const unsigned char *bytes;
    if (!addr_bytes(sa, &family, &bytes) || family != c->family)
        return false;
    return prefix_equal(bytes, c->addr, c->prefix);
}

int net_allow_parse(const json_t *list, const char *setting, net_allow_t **out, char *err,
                    size_t errlen)
{
    *out = NULL;
    if (list == NULL || json_is_null(list))
        return 0;
    if (!json_is_array(list))
        return err_set(err, errlen, TERN_EINVAL,
                       "%s: expected an array of networks such as [\"10.0.0.0/8\", "
                       "\"fd00::/8\"] (or null: any address)",
                       setting);
    size_t n = json_array_size(list);
    net_allow_t *a = xcalloc(1, sizeof *a + n * sizeof a->blocks[0]);
    a->setting = xstrdup(setting);
    a->n = n;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(list, i);
        char why[128];
        int rc = !json_is_string(v)
                     ? err_set(why, sizeof why, TERN_EINVAL, "not a string")
                     : net_cidr_parse(json_string_value(v), &a->blocks[i], why, sizeof why);
        if (rc != 0) {
            char *shown = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
            err_set(err, errlen, TERN_EINVAL,
                    "%s[%zu]: %.80s: %s (expected ADDRESS/PREFIX such as 10.0.0.0/8 or "
                    "fd00::/8)",
                    setting, i, shown != NULL ? shown : "?", why);
            free(shown);
            net_allow_free(a);
            return rc;
        }
    }
    *out = a;
    return 0;
}

bool net_allow_permits(const net_allow_t *a, const struct sockaddr *sa)
{
    if (a == NULL)
        return true;
    for (size_t i = 0; i < a->n; i++)
        if (net_cidr_contains(&a->blocks[i], sa))
            return true;
    return false;
}

const char *net_allow_setting(const net_allow_t *a)
{
    return a != NULL ? a->setting : "";
}

void net_addr_text(const struct sockaddr *sa, char *out, size_t cap)
{
    int family;
    const unsigned char *bytes;
    char text[INET6_ADDRSTRLEN];
    if (!addr_bytes(sa, &family, &bytes) || inet_ntop(family, bytes, text, sizeof text) == NULL) {
        snprintf(out, cap, "?");
        return;
    }
    snprintf(out, cap, "%s", text);
}

void net_allow_free(net_allow_t *a)
{
    if (a == NULL)
        return;
    free(a->setting);
    free(a);
}
