/*
 * event_hub.h -- live job events for many watchers over two Redis connections.
 *
 * Every job event is appended, in the same script, to the job's stream
 * (tern:job:<uuid>:events) and to the global stream (tern:events). The hub follows the
 * global stream with one blocking XREAD on a connection of its own and tells the
 * watchers of a job that the job has new events; a watcher then reads the job's own
 * stream after the last id it delivered (event_hub_read, on the hub's second,
 * non-blocking connection). So:
 *   - one process serves thousands of event streams with two Redis connections, not
 *     one blocking connection per stream;
 *   - ids are always the job stream's ids, which is what clients resume from
 *     (Last-Event-ID), and a read is exact: a notification only says "read again", so
 *     a notification lost or repeated never loses or repeats an event.
 *
 *
 * Streams of plugins' views (TERN_VIEW_STREAM) use the same two connections: the hub's
 * XREAD names, beside the global stream, every stream key watched with
 * event_hub_watch_stream, each from the last id it announced, and a watcher reads its
 * key with event_hub_read_stream after its own last id. A key that gains its first
 * watcher while the XREAD blocks gets the XREAD unblocked (CLIENT UNBLOCK on the read
 * connection) and sent again with it, so live entries are announced at once.
 *
 * Ownership: the hub owns its connections and every watch record; a watch lives from
 * event_hub_watch until event_hub_unwatch (or until the hub is freed). Callbacks run on
 * the loop thread.
 */
#ifndef TERN_EVENT_HUB_H
#define TERN_EVENT_HUB_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

#include "redis/redis_addr.h"

typedef struct event_hub event_hub_t;
typedef struct event_hub_watch event_hub_watch_t;

typedef enum event_hub_note {
    EVENT_HUB_NEW,      /* the job has events after the ones announced before: read */
    EVENT_HUB_RESYNC,   /* a connection came back; notifications may have been missed */
    EVENT_HUB_SHUTDOWN, /* the hub is being freed: stop; the watch is gone after this call */
} event_hub_note_t;

/* May call event_hub_unwatch on its own watch (or any other). */
typedef void (*event_hub_cb)(void *data, event_hub_note_t note);

/* One entry of a job's stream; valid only during the read callback. */
typedef struct event_hub_entry {
    const char *id;   /* "1700000000000-0" */
    const char *json; /* the event's JSON text (not NUL-terminated) */
    size_t len;
} event_hub_entry_t;

/* status 0 with the entries read (n may be 0), or TERN_EIO when the connection was
 * lost before the answer (also while the hub is being freed). */
typedef void (*event_hub_read_cb)(void *data, int status, const event_hub_entry_t *entries,
                                  size_t n);

/* Creates the hub and starts connecting (the address is copied). Never returns NULL. */
event_hub_t *event_hub_new(uv_loop_t *loop, const redis_addr_t *addr);

/* Tells every watcher EVENT_HUB_SHUTDOWN, fails reads in flight (their callbacks run
 * with TERN_EIO before this returns), frees the watches and closes the connections
 * (memory goes once the loop has run their close callbacks). NULL is fine. */
void event_hub_free(event_hub_t *h);

/* Watches job `uuid`. Never returns NULL. */
event_hub_watch_t *event_hub_watch(event_hub_t *h, const char *uuid, event_hub_cb cb, void *data);

/* Watches the Redis stream `key` (a whole key name, copied): EVENT_HUB_NEW once
 * entries were appended after `after` ("0" or a stream id) or after the last entry
 * announced since; RESYNC and SHUTDOWN as for jobs. Several watches of one key share
 * one place in the XREAD. Never returns NULL; event_hub_unwatch ends it. */
event_hub_watch_t *event_hub_watch_stream(event_hub_t *h, const char *key, const char *after,
                                          event_hub_cb cb, void *data);

/* Stops watching; the callback does not run again. Safe inside any hub callback. */
void event_hub_unwatch(event_hub_watch_t *w);

/* Watches open now. */
size_t event_hub_watchers(const event_hub_t *h);

/* Reads up to `count` entries of the job's stream after `id` ("0": from the start),
 * or from `id` itself when `inclusive`. The callback runs exactly once unless this
 * returns non-zero (TERN_ENOTCONN: not sent). */
int event_hub_read(event_hub_t *h, const char *uuid, const char *id, bool inclusive, size_t count,
                   event_hub_read_cb cb, void *data);

/* event_hub_read for any stream `key` (a whole key name): entries whose field `e`
 * holds the text. */
int event_hub_read_stream(event_hub_t *h, const char *key, const char *id, bool inclusive,
                          size_t count, event_hub_read_cb cb, void *data);

#endif /* TERN_EVENT_HUB_H */
