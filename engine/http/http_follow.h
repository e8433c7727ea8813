/*
 * http_follow.h -- the life of a streaming response that follows a Redis stream
 * through the event hub (GET /jobs/:uuid/events, http_events.c; the streaming views,
 * http_view_stream.c): its h2o generator, heartbeat timer, hub watch and output
 * buffers, and the flags that say when it may read, send, end and be freed.
 *
 * The owner embeds http_follow_t first in its own struct and gives a table of what
 * differs: how it reads (pump), when its first chunk may go (ready), its log line at
 * the end and how it is freed. The rest is here, once:
 *
 *   - h2o's proceed and stop: the chunk in flight is done with / the client is gone;
 *   - the heartbeat: a keep-alive on an idle stream (a write is what tells h2o an
 *     HTTP/1.1 client is gone; test_stream's test_vanished_clients_are_freed) and a
 *     read, as a safety net under the hub's notifications;
 *   - the hub's notes: more entries (read), or SHUTDOWN (end after what is pending);
 *   - flush: the pending bytes handed to h2o, then the final chunk once `ending`;
 *   - the end: the watch dropped, the log line, the timer closed; the struct freed once
 *     the timer's close callback has run and no read is in flight.
 */
#ifndef TERN_HTTP_FOLLOW_H
#define TERN_HTTP_FOLLOW_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "events/event_hub.h"
#include "http/http_stream_out.h"

typedef struct http_follow http_follow_t;

typedef struct http_follow_ops {
    /* Reads when there is reason to, then calls http_follow_flush. */
    void (*pump)(http_follow_t *f);
    /* Whether the first chunk may go (NULL: at once). */
    bool (*ready)(const http_follow_t *f);
    /* The response's one log line, as it ends for `why`. */
    void (*log_end)(http_follow_t *f, const char *why);
    /* Frees the owner's struct and what it owns beyond `out` (freed here). */
    void (*free)(http_follow_t *f);
    const char *first_chunk; /* sent when the first chunk would be empty (h2o flushes
                                HTTP/1.1 headers only with a non-empty chunk) */
    const char *keepalive;   /* what an idle heartbeat sends */
    const char *ended_why;   /* the log's reason when `ending` was set with none */
} http_follow_ops_t;

struct http_follow {
    h2o_generator_t gen; /* first: h2o hands it back to proceed and stop */
    const http_follow_ops_t *ops;
    h2o_req_t *req;   /* NULL before the start, once stopped or after the final chunk */
    event_hub_t *hub; /* NULL when not following, or after the hub's SHUTDOWN */
    event_hub_watch_t *watch;
    uv_timer_t heartbeat;
    http_stream_out_t out; /* pending and in-flight bytes (http_stream_out.h) */
    const char *why;       /* why it ends, for the log (a literal) */
    uint64_t started_ns;
    bool reading;     /* a read is in flight: the owner sets it, and clears it with
                         http_follow_read_done */
    bool read_wanted; /* entries may be waiting */
    bool ending;      /* send the final chunk once `pending` is out */
    bool done;        /* final chunk sent or stopped: h2o is not touched again */
    bool timer_open;
};

/* Starts the response on `req`: status 200, the headers of `content_type` (a literal),
 * the generator, and the heartbeat every heartbeat_ms. Nothing is written yet; the
 * caller then watches the hub (f->watch, with http_follow_on_note) and pumps. */
void http_follow_start(http_follow_t *f, h2o_req_t *req, uv_loop_t *loop, const char *content_type,
                       uint32_t heartbeat_ms);

/* An event_hub note callback for f's watch (data = f). */
void http_follow_on_note(void *data, event_hub_note_t note);

/* Hands what is pending to h2o, or the final chunk once `ending` and nothing is
 * pending. */
void http_follow_flush(http_follow_t *f);

/* A read came back: false when the response has ended meanwhile (f may have been
 * freed: touch nothing), true when the owner goes on with what it read. */
bool http_follow_read_done(http_follow_t *f);

#endif
