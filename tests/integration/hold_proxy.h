/*
 * hold_proxy.h -- a TCP proxy on loopback between ternd and a test's redis-server that
 * can hold back the replies to ternd's blocking claims (the connections that sent
 * BLMOVE), or to its other connections, and counts the commands that carry given texts. A test uses
 * it to make a claim's reply arrive when it chooses, after what ternd does meanwhile on its other
 * connections. It reads and forwards bytes only; it parses no protocol.
 */
#ifndef TERN_HOLD_PROXY_H
#define TERN_HOLD_PROXY_H

#include <stdbool.h>

typedef struct hold_proxy hold_proxy_t;

/* Listens on 127.0.0.1 and a free port, forwarding each connection to 127.0.0.1:
 * `upstream_port`, on a thread of its own. `watch`: NULL-terminated texts (at most 4)
 * whose occurrences in what clients send are counted. Fails the test on error. */
hold_proxy_t *hold_proxy_start(int upstream_port, const char *const *watch);
int hold_proxy_port(const hold_proxy_t *p);
/* While on, nothing Redis sends to a connection that has sent BLMOVE is read: it
 * waits in the socket until turned off. */
void hold_proxy_hold_blocking(hold_proxy_t *p, bool on);
/* The same for every other connection: commands still reach Redis and run there. */
void hold_proxy_hold_others(hold_proxy_t *p, bool on);
/* How often watched text `i` (its index in `watch`) was sent by clients so far. */
unsigned hold_proxy_seen(hold_proxy_t *p, unsigned i);
/* Stops the thread, closes every socket and frees the proxy (NULL: nothing). */
void hold_proxy_stop(hold_proxy_t *p);

#endif
