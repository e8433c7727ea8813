/*
 * http_events.c -- GET /jobs/:uuid/events: a job's history, then its live events, as
 * newline-delimited JSON (application/x-ndjson, one event per line) or, when the
 * request accepts text/event-stream, as server-sent events ("id: <stream id>" and
 * "data: <event JSON>" per event). The response ends with its final chunk once the
 * job's "finished" event has been sent and nothing but info posted about the job
 * follows it (a job retried after it finished keeps its stream going to the next
 * "finished").
 *
 * Resuming: `Last-Event-ID` (what EventSource sends when it reconnects) or
 * `?from=<stream id>` starts after that entry; the header wins, since a reconnecting
 * browser repeats the original URL. Keep-alives: every heartbeat interval (15 s by
 * default) an idle stream sends an SSE comment (": keep-alive") or, in ND-JSON, an
 * empty line, which clients skip. Over HTTP/1.1 h2o only learns that a client went
 * away when a write fails, so the heartbeat is what frees the streams of vanished
 * clients (test_stream's test_vanished_clients_are_freed).
 *
 * Each response is a heap-allocated generator (ev_stream_t) that owns its heartbeat
 * timer, its hub watch and two buffers: `pending` (events formatted but not sent yet)
 * and `inflight` (the bytes handed to h2o_send, kept untouched until h2o calls proceed).
 * h2o_send is never called again before proceed. Reading from Redis is paced by the
 * client: a new page is read only when less than PENDING_MAX bytes wait, so a slow
 * client costs at most a page of memory, never the job's whole history.
 *
 * Lifetime: the stream ends by its final chunk (the job finished, or the server shuts
 * down: the hub tells every watcher) or by h2o's stop (the client went away). Either
 * way the watch is dropped and the timer closed; the struct is freed when the timer's
 * close callback has run and no read is in flight.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/ident.h"
#include "base/log.h"
#include "base/metrics.h"
#include "events/event_hub.h"
#include "events/stream_entry.h"
#include "http/http_follow.h"
#include "http/http_request.h"
#include "model/job_history.h"
#include "ops/job_ops.h"

#define PAGE_EVENTS      200         /* entries per read of the job's stream */
#define PENDING_MAX      (64 * 1024) /* bytes waiting before reading pauses */
#define DEFAULT_HB_MS    15000
#define ROUTE            "/jobs/:uuid/events"
#define SSE_KEEPALIVE    ": keep-alive\n\n"
#define NDJSON_KEEPALIVE "\n"

typedef struct ev_stream {
    http_follow_t f; /* first: the response's life (http_follow.h) */
    api_req_t *r;    /* until the response starts (or the request is refused) */
    job_ops_t *ops;  /* for the record of a job whose stream is gone */
    uint32_t heartbeat_ms;
    char uuid[40];
    char last_id[STREAM_ID_MAX + 8];
    bool resuming; /* the first read includes last_id's own entry, to learn its type */
    bool sse;
    bool first_read_done; /* the first write waits for the first page (or its failure) */
    bool last_finished;   /* the job had ended as of the last event sent (see below) */
    bool from_record;     /* the job's stream is gone: its record tells its events */
    uint64_t events;
} ev_stream_t;

static void pump(http_follow_t *f);

/* The request's one log line, written when it ends (its start was counted in the
 * metrics when the response began). */
static void stream_log_end(http_follow_t *f, const char *why)
{
    ev_stream_t *s = (ev_stream_t *)f;
    if (!log_enabled(TERN_LOG_INFO))
        return;
    json_t *fields =
        json_pack("{s:s, s:s, s:s, s:i, s:s, s:I, s:f}", "method", "GET", "route", ROUTE, "job",
                  s->uuid, "status", 200, "format", s->sse ? "sse" : "ndjson", "events",
                  (json_int_t)s->events, "seconds", (double)(uv_hrtime() - f->started_ns) / 1e9);
    log_msg(TERN_LOG_INFO, "api", fields, "event stream of job %s ended: %s", s->uuid, why);
    json_decref(fields);
}

static void stream_free(http_follow_t *f)
{
    free(f); /* ev_stream_t owns nothing else */
}

static bool stream_ready(const http_follow_t *f)
{
    return ((const ev_stream_t *)f)->first_read_done;
}

static const http_follow_ops_t ndjson_ops = {
    .pump = pump,
    .ready = stream_ready,
    .log_end = stream_log_end,
    .free = stream_free,
    .first_chunk = NDJSON_KEEPALIVE,
    .keepalive = NDJSON_KEEPALIVE,
    .ended_why = "job finished",
};

static const http_follow_ops_t sse_ops = {
    .pump = pump,
    .ready = stream_ready,
    .log_end = stream_log_end,
    .free = stream_free,
    .first_chunk = ": connected\n\n",
    .keepalive = SSE_KEEPALIVE,
    .ended_why = "job finished",
};

/* ---- Redis side ---------------------------------------------------------------- */

/* Whether the job has ended as of event `e`, given whether it had before: "finished"
 * ends it, info posted about it later leaves it ended, anything else (a redrive, a
 * new start) means it goes on. */
static bool event_leaves_finished(const event_hub_entry_t *e, bool was_finished)
{
    json_t *ev = json_loadb(e->json, e->len, 0, NULL);
    const char *type = json_string_value(json_object_get(ev, "type"));
    bool finished = type != NULL &&
                    (strcmp(type, "finished") == 0 || (was_finished && strcmp(type, "info") == 0));
    json_decref(ev);
    return finished;
}

static void append_event(ev_stream_t *s, const event_hub_entry_t *e)
{
    if (s->sse) {
        /* Event JSON is compact (no raw newline), so one data line carries it. */
        stream_buf_adds(&s->f.out.pending, "id: ");
        stream_buf_adds(&s->f.out.pending, e->id);
        stream_buf_adds(&s->f.out.pending, "\ndata: ");
        stream_buf_add(&s->f.out.pending, e->json, e->len);
        stream_buf_adds(&s->f.out.pending, "\n\n");
    } else {
        stream_buf_add(&s->f.out.pending, e->json, e->len);
        stream_buf_adds(&s->f.out.pending, "\n");
    }
    s->last_finished = event_leaves_finished(e, s->last_finished);
    snprintf(s->last_id, sizeof s->last_id, "%s", e->id);
    s->events++;
}

static void on_read(void *data, int status, const event_hub_entry_t *entries, size_t n)
{
    ev_stream_t *s = data;
    if (!http_follow_read_done(&s->f))
        return;
    bool first = !s->first_read_done;
    s->first_read_done = true;
    if (status == 0 && n == 0 && first) {
        /* The stream was there when the job was opened and holds at least its
         * "created" event (and, when resuming, the entry resumed after): it expired
         * since (a success keeps its stream a while only); tell it from the record. */
        s->from_record = true;
        s->f.read_wanted = true;
        pump(&s->f);
        return;
    }
    if (status != 0) {
        /* Redis went away mid-read: the hub's RESYNC or the next heartbeat reads again. */
        s->f.read_wanted = false;
        pump(&s->f);
        return;
    }
    size_t i = 0;
    if (s->resuming) {
        /* The entry the client resumes after is read only for its type: a client that
         * got the "finished" event already must see the stream end, not wait. */
        s->resuming = false;
        if (n > 0 && strcmp(entries[0].id, s->last_id) == 0) {
            s->last_finished = event_leaves_finished(&entries[0], false);
            i = 1;
        }
    }
    for (; i < n; i++)
        append_event(s, &entries[i]);
    if (n == PAGE_EVENTS)
        s->f.read_wanted = true; /* more history right behind this page */
    else if (s->last_finished)
        s->f.ending = true; /* caught up, and the job's last word was "finished" */
    pump(&s->f);
}

/* A stream id as two numbers, for ordering ("5" is 5-0); false when it is not one. */
static bool stream_id_parse(const char *id, unsigned long long *ms, unsigned long long *seq)
{
    char *end;
    *ms = strtoull(id, &end, 10);
    *seq = 0;
    if (*end == '-')
        *seq = strtoull(end + 1, &end, 10);
    return *end == '\0';
}

/* The events of a job whose stream is gone, told from its record, after the id the
 * client resumes from (if any); then the stream ends (only a finished job loses its
 * stream). */
static void on_record(void *data, int status, const json_t *view, const char *message)
{
    ev_stream_t *s = data;
    if (!http_follow_read_done(&s->f))
        return;
    s->first_read_done = true;
    if (status != 0) {
        log_msg(TERN_LOG_WARN, "api", NULL, "event stream of job %s: reading its record: %s",
                s->uuid, message ? message : "?");
        s->f.ending = true;
        s->f.why = "job record unreadable";
        pump(&s->f);
        return;
    }
    /* Only a finished job's stream expires. A live one with none (a client resuming
     * after the stream's last entry reads nothing) goes on reading its stream. */
    if (json_is_null(json_object_get(view, "finished_at"))) {
        s->from_record = false;
        s->f.read_wanted = true;
        pump(&s->f);
        return;
    }
    s->f.ending = true;
    unsigned long long from_ms = 0, from_seq = 0;
    bool skip = strcmp(s->last_id, "0") != 0 && stream_id_parse(s->last_id, &from_ms, &from_seq);
    json_t *history = job_history_from_view(view);
    size_t i;
    json_t *h;
    json_array_foreach(history, i, h)
    {
        const char *id = json_string_value(json_object_get(h, "id"));
        unsigned long long ms, seq;
        if (skip && stream_id_parse(id, &ms, &seq) &&
            (ms < from_ms || (ms == from_ms && seq <= from_seq)))
            continue;
        char *text = json_dumps(json_object_get(h, "event"), JSON_COMPACT);
        event_hub_entry_t e = {.id = id, .json = text, .len = strlen(text)};
        append_event(s, &e);
        free(text);
    }
    json_decref(history);
    pump(&s->f);
}

static void read_page(ev_stream_t *s)
{
    if (s->from_record) {
        s->f.read_wanted = false;
        s->f.reading = true;
        job_ops_get(s->ops, s->uuid, on_record, s);
        return;
    }
    s->f.read_wanted = false;
    if (event_hub_read(s->f.hub, s->uuid, s->last_id, s->resuming, PAGE_EVENTS, on_read, s) == 0) {
        s->f.reading = true;
        return;
    }
    /* Not sent (Redis unreachable): start the response anyway, so the client gets its
     * headers and keep-alives; RESYNC tells when reading can resume. */
    s->first_read_done = true;
}

/* Reads when there is reason to and room for it, then sends what is pending. */
static void pump(http_follow_t *f)
{
    if (f->done)
        return;
    if (f->read_wanted && !f->reading && !f->ending && f->hub != NULL &&
        f->out.pending.len < PENDING_MAX)
        read_page((ev_stream_t *)f);
    http_follow_flush(f);
}

/* ---- the route ----------------------------------------------------------------- */

static char *header_value(h2o_req_t *req, const char *name, size_t nlen)
{
    ssize_t i = h2o_find_header_by_str(&req->headers, name, nlen, -1);
    if (i < 0)
        return NULL;
    h2o_iovec_t v = req->headers.entries[i].value;
    return xstrndup(v.base, v.len);
}

static void on_opened(void *data, int status, const json_t *res, const char *message)
{
    (void)res;
    (void)message;
    ev_stream_t *s = data;
    api_req_t *r = s->r;
    s->r = NULL;
    if (r->req == NULL) {
        api_req_release(r); /* the client left before the answer */
        free(s);            /* nothing started: it owns nothing */
        return;
    }
    if (status == TERN_ENOENT) {
        api_reply_error(r, 404, "ResourceNotFound", "job %s does not exist", s->uuid);
        free(s); /* nothing started: it owns nothing */
        return;
    }
    if (status != 0) {
        api_reply_error(r, 503, "ServiceUnavailable", "Redis is not reachable");
        free(s); /* nothing started: it owns nothing */
        return;
    }
    /* The job's stream exists now (a finished job's may still expire before the first
     * read, which then tells the job from its record: see on_read). */
    /* From here on h2o's request is driven by the generator. */
    h2o_req_t *req = r->req;
    s->f.hub = api_event_hub(r);
    uv_loop_t *loop = api_loop(r);
    metrics_http_observe(ROUTE, r->method, 200, (double)(uv_hrtime() - r->started_ns) / 1e9);
    api_req_release(r);
    /* Nothing is written until the first page of history is formatted (stream_ready),
     * so an ND-JSON body starts with an event, not a blank line. */
    http_follow_start(&s->f, req, loop, s->sse ? "text/event-stream" : "application/x-ndjson",
                      s->heartbeat_ms);
    s->f.watch = event_hub_watch(s->f.hub, s->uuid, http_follow_on_note, &s->f);
    s->f.read_wanted = true;
    pump(&s->f);
}

static void get_events(api_req_t *r)
{
    const char *uuid = r->params[0];
    if (!uuid_valid(uuid)) {
        api_reply_error(r, 404, "ResourceNotFound", "job %s does not exist", uuid);
        return;
    }
    event_hub_t *hub = api_event_hub(r);
    if (hub == NULL) {
        api_reply_error(r, 503, "ServiceUnavailable", "event streams are not available");
        return;
    }
    h2o_req_t *req = r->req;
    char *from = header_value(req, H2O_STRLIT("last-event-id"));
    if (from == NULL)
        from = api_query_get(r, "from");
    if (from != NULL && !stream_id_valid(from)) {
        api_reply_error(r, 409, "InvalidArgument",
                        "from: \"%.64s\" is not an event id (expected <ms>-<seq>, as sent in "
                        "\"id:\" lines)",
                        from);
        free(from);
        return;
    }
    ev_stream_t *s = xcalloc(1, sizeof *s);
    s->r = r;
    s->ops = api_ops(r);
    s->f.started_ns = r->started_ns;
    snprintf(s->uuid, sizeof s->uuid, "%s", uuid);
    snprintf(s->last_id, sizeof s->last_id, "%s", from != NULL ? from : "0");
    s->resuming = from != NULL && strcmp(from, "0") != 0;
    free(from);
    char *accept = header_value(req, H2O_STRLIT("accept"));
    s->sse = accept != NULL && strcasestr(accept, "text/event-stream") != NULL;
    free(accept);
    uint32_t hb = api_opts(r)->stream_heartbeat_ms;
    s->heartbeat_ms = hb > 0 ? hb : DEFAULT_HB_MS;
    s->f.ops = s->sse ? &sse_ops : &ndjson_ops;
    job_ops_events_open(s->ops, uuid, on_opened, s);
}

const api_route_t http_routes_events[] = {
    {"GET", ROUTE, get_events},
    {NULL, NULL, NULL},
};
