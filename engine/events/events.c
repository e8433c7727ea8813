/*
 * events.c -- XREAD BLOCK loop over one stream; see events.h.
 *
 * Ownership: the follower owns its Redis connection and the last id seen; it survives
 * reconnects (it reads again from the last id, so nothing is missed or repeated) and is
 * freed by events_follow_stop or when the callback returns false.
 */
#include "events/events.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "events/stream_entry.h"
#include "redis/redis_conn.h"

#define BLOCK_MS "5000"

struct events_follow {
    redis_conn_t *conn;
    char key[96];
    char last_id[64];
    events_cb cb;
    void *data;
    bool reading;
    bool stopped;
};

static void read_next(events_follow_t *f);

/* Tells the follower's callback one event of the entry at f->last_id. */
static bool tell_event(void *data, const json_t *ev)
{
    events_follow_t *f = data;
    return f->cb(f->data, f->last_id, ev);
}

static void on_xread(redis_conn_t *c, redisReply *reply, void *data)
{
    (void)c;
    events_follow_t *f = data;
    f->reading = false;
    if (f->stopped || reply == NULL)
        return; /* stopped, or the connection dropped: the up event reads again */
    /* [[key, [[id, [field, value, ...]], ...]]] or nil after the block timeout. */
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements > 0) {
        redisReply *stream = reply->element[0];
        redisReply *entries = stream->elements > 1 ? stream->element[1] : NULL;
        for (size_t i = 0; entries != NULL && i < entries->elements; i++) {
            redisReply *e = entries->element[i];
            if (e->elements < 2)
                continue;
            snprintf(f->last_id, sizeof f->last_id, "%s", e->element[0]->str);
            if (!stream_entry_each(e->element[1], tell_event, f)) {
                events_follow_stop(f);
                return;
            }
        }
    }
    read_next(f);
}

static void read_next(events_follow_t *f)
{
    if (f->stopped || f->reading || !redis_conn_is_up(f->conn))
        return;
    const char *argv[] = {"XREAD",  "COUNT",   "1000", "BLOCK",
                          BLOCK_MS, "STREAMS", f->key, f->last_id};
    if (redis_conn_command(f->conn, on_xread, f, 8, argv, NULL) == 0)
        f->reading = true;
}

static void on_conn_event(redis_conn_t *c, bool up, const char *why, void *data)
{
    (void)c;
    (void)why;
    if (up)
        read_next(data);
}

events_follow_t *events_follow(uv_loop_t *loop, const redis_addr_t *addr, const char *uuid,
                               const char *from_id, events_cb cb, void *data)
{
    events_follow_t *f = xcalloc(1, sizeof *f);
    if (uuid != NULL)
        snprintf(f->key, sizeof f->key, "tern:job:%s:events", uuid);
    else
        snprintf(f->key, sizeof f->key, "tern:events");
    snprintf(f->last_id, sizeof f->last_id, "%s", from_id != NULL ? from_id : "$");
    f->cb = cb;
    f->data = data;
    redis_conn_opts_t o = {.addr = addr,
                           .name = "events",
                           .on_event = on_conn_event,
                           .data = f,
                           .command_timeout_ms = 5000 + 10000};
    f->conn = redis_conn_new(loop, &o);
    return f;
}

void events_follow_stop(events_follow_t *f)
{
    if (f == NULL || f->stopped)
        return;
    f->stopped = true;
    redis_conn_free(f->conn); /* a read in flight is answered with NULL, then ignored */
    free(f);
}
