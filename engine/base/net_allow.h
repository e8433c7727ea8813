/*
 * net_allow.h -- the networks outbound HTTP may connect to: a list of CIDR blocks
 * from the configuration (postback_allow_networks for post-backs, a plugin's
 * allow_networks for its tern_http_request calls), checked by http_client.c against
 * the address a connection is about to be made to, that is after DNS, so a name that
 * resolves to a forbidden address is refused like the address itself.
 *
 * An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is the IPv4 address it carries, for the
 * blocks and for the addresses checked alike: "127.0.0.0/8" covers ::ffff:127.0.0.1,
 * and "::ffff:10.0.0.0/104" is 10.0.0.0/8. Without a list (NULL) every address is
 * allowed; an empty list allows none.
 */
#ifndef TERN_NET_ALLOW_H
#define TERN_NET_ALLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include <jansson.h>

/* One block: the network's bytes (host bits zero) and its prefix length. */
typedef struct net_cidr {
    int family;             /* AF_INET or AF_INET6 (never an IPv4-mapped block) */
    unsigned char addr[16]; /* network byte order; 4 bytes used for AF_INET */
    unsigned prefix;        /* 0-32 for AF_INET, 0-128 for AF_INET6 */
} net_cidr_t;

/* Parses "10.0.0.0/8", "fd00::/8", or an address alone (one host: /32 or /128).
 * Returns 0, or TERN_EINVAL with the reason in err ("prefix 33 is longer than 32",
 * "host bits set: the network is 10.0.0.0/8"). */
int net_cidr_parse(const char *text, net_cidr_t *out, char *err, size_t errlen);

/* True when the address of `sa` (AF_INET or AF_INET6; port ignored) is in the block. */
bool net_cidr_contains(const net_cidr_t *c, const struct sockaddr *sa);

typedef struct net_allow net_allow_t;

/* Parses `list`, a JSON array of block texts, into *out (caller frees with
 * net_allow_free). `setting` names the list in messages and in net_allow_setting
 * (copied). A NULL or null list gives *out = NULL: every address allowed. Returns 0,
 * or TERN_EINVAL with e.g. "postback_allow_networks[1]: \"10.0.0/8\" is not a network
 * (expected ADDRESS/PREFIX such as 10.0.0.0/8 or fd00::/8)" in err. */
int net_allow_parse(const json_t *list, const char *setting, net_allow_t **out, char *err,
                    size_t errlen);

/* True when `a` is NULL or one of its blocks holds the address of `sa`. */
bool net_allow_permits(const net_allow_t *a, const struct sockaddr *sa);

/* The setting the list came from (borrowed, valid while `a` lives). */
const char *net_allow_setting(const net_allow_t *a);

/* The address of `sa` as text ("10.1.2.3", "fd00::1"; an IPv4-mapped address as its
 * IPv4 address), or "?" for another family. */
void net_addr_text(const struct sockaddr *sa, char *out, size_t cap);

void net_allow_free(net_allow_t *a);

#endif /* TERN_NET_ALLOW_H */
