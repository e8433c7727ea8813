/*
 * redis_conn.h -- one Redis connection that keeps itself alive.
 *
 * hiredis 0.14 has no reconnect; this wraps a redisAsyncContext with: connect,
 * AUTH (with an ACL user when given), SELECT, CLIENT SETNAME; reconnect with capped
 * exponential backoff and jitter when Redis goes away or refuses; and a watchdog that
 * drops a connection whose oldest command has waited longer than the command timeout
 * (a half-open TCP connection otherwise hangs forever, since 0.14 has no timeouts).
 *
 * A connection given a health timeout also tells whether Redis answers: it sends a
 * PING when nothing has been in flight for PROBE_IDLE_MS, so a server that stopped
 * answering (frozen, swapped out, a host gone silent without closing the socket) is
 * noticed even when idle, and it counts as stalled, neither up nor sendable, while its
 * oldest command has waited longer than the health timeout. A stalled connection is
 * kept (its commands may still be answered) until the command timeout drops it.
 *
 * Commands are sent only while the connection is up; otherwise they are refused at
 * once (-ENOTCONN), so callers decide whether to retry. A reply callback gets NULL
 * when the connection dropped before the answer: the command may or may not have run,
 * which is why every state-changing script of the store is idempotent.
 *
 * A connection is used for one kind of traffic: ordinary commands, a blocking
 * consumer (BLMOVE), or pub/sub; hiredis replies are FIFO per connection.
 */
#ifndef TERN_REDIS_CONN_H
#define TERN_REDIS_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/async.h>
#include <uv.h>

#include "redis/redis_addr.h"

typedef struct redis_conn redis_conn_t;

/* `reply` is valid only during the callback; NULL when the connection dropped. */
typedef void (*redis_conn_reply_cb)(redis_conn_t *c, redisReply *reply, void *data);
/* Up: connected and authenticated. Down: lost (why says what happened). */
typedef void (*redis_conn_event_cb)(redis_conn_t *c, bool up, const char *why, void *data);

typedef struct redis_conn_opts {
    const redis_addr_t *addr;     /* copied */
    const char *name;             /* for CLIENT SETNAME and logs: "commands" */
    uint32_t backoff_min_ms;      /* default 100 */
    uint32_t backoff_max_ms;      /* default 2000: back within 1-2 s of Redis returning */
    uint32_t command_timeout_ms;  /* default 15000; 0 disables the watchdog */
    uint32_t health_timeout_ms;   /* 0 (default): no PING probe, never stalled; for
                                   * connections of ordinary commands only (not
                                   * blocking, not pub/sub) */
    redis_conn_event_cb on_event; /* may be NULL */
    void *data;
} redis_conn_opts_t;

/* Creates the connection and starts connecting. Never returns NULL. */
redis_conn_t *redis_conn_new(uv_loop_t *loop, const redis_conn_opts_t *opts);

/* Writes the commands sent so far to the socket now, rather than when the loop next
 * polls (what cannot be written now still goes when the socket is writable). */
void redis_conn_flush(redis_conn_t *c);

/* Sends a command while up and not stalled. Returns 0 (cb will run exactly once), or
 * -ENOTCONN (not sent). The arguments are copied by hiredis before this returns. */
int redis_conn_command(redis_conn_t *c, redis_conn_reply_cb cb, void *data, int argc,
                       const char **argv, const size_t *argvlen);

/* Like redis_conn_command with a printf-style hiredis format. */
int redis_conn_commandf(redis_conn_t *c, redis_conn_reply_cb cb, void *data, const char *fmt, ...);

/* A message of a subscribed channel; valid only during the callback. */
typedef void (*redis_conn_message_cb)(redis_conn_t *c, const char *channel, const char *payload,
                                      size_t len, void *data);

/* Subscribes to `channels` (the connection must be used for nothing else). Messages
 * go to `cb` until the connection drops; subscribe again on the next up event.
 * Returns 0 or -ENOTCONN. */
int redis_conn_subscribe(redis_conn_t *c, const char *const *channels, size_t n,
                         redis_conn_message_cb cb, void *data);

/* True when connected, authenticated and not stalled (see above): what the health
 * views (GET /ping, tern_redis_up) report. */
bool redis_conn_is_up(const redis_conn_t *c);

/* Sets how long the watchdog lets the oldest command wait (e.g. a BLMOVE's timeout
 * plus a margin). */
void redis_conn_set_command_timeout(redis_conn_t *c, uint32_t ms);

/* Drops the current connection now (pending callbacks get NULL) and reconnects after
 * the backoff. Used by tests and by the watchdog. */
void redis_conn_drop(redis_conn_t *c, const char *why);

/* Closes for good: pending callbacks get NULL replies, no reconnect, no more events.
 * Memory is released once the handles are closed (run the loop afterwards). */
void redis_conn_free(redis_conn_t *c);

/* The connection's name given at creation. */
const char *redis_conn_name(const redis_conn_t *c);

#endif /* TERN_REDIS_CONN_H */
