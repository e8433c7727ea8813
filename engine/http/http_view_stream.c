/*
 * http_view_stream.c -- the response of a streaming view (TERN_VIEW_STREAM,
 * include/tern/task.h): newline-delimited JSON (application/x-ndjson, chunked), first
 * the lines the view's script answered, then, when it named a stream to follow, the
 * field `e` of each entry of that Redis stream after the id it gave, until a line whose
 * "type" is "end", the client leaving, or the server shutting down (the final chunk).
 *
 * Following costs no Redis connection of its own: the event hub (engine/events/) names
 * every followed key in its one blocking XREAD and wakes the responses of a key when it
 * grew; each response then reads the entries after the last one it sent, on the hub's
 * read connection. So a thousand watchers of one stream cost one XREAD key and a
 * thousand short XRANGEs per entry (tests/integration/test_stream.c measures it,
 * docs/PERFORMANCE.md).
 *
 * Memory per watcher is bounded as GET /jobs/:uuid/events bounds it (http_stream_out.h):
 * `pending` (lines formatted, not yet handed to h2o) and `inflight` (handed to h2o,
 * untouched until it calls proceed); the stream is read again only while less than
 * PENDING_MAX bytes wait, a page of PAGE_ENTRIES entries at a time. A slow reader
 * therefore holds at most about PENDING_MAX plus a page, and keeps its place in the
 * Redis stream, not in ternd; should it fall further behind than the stream's own cap
 * (its MAXLEN), it goes on from the oldest entry Redis still has.
 *
 * Lifetime: http_follow.h's, as GET /jobs/:uuid/events': the struct is freed once the
 * final chunk was sent or h2o stopped the response, its heartbeat timer is closed and
 * no read is in flight.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/log.h"
#include "base/metrics.h"
#include "events/event_hub.h"
#include "events/stream_entry.h"
#include "http/http_follow.h"
#include "http/http_request.h"

#define PAGE_ENTRIES   200
#define PENDING_MAX    (64 * 1024)
#define DEFAULT_HB_MS  15000
#define FOLLOW_KEY_MAX 512
#define KEEPALIVE      "\n"

typedef struct view_stream {
    http_follow_t f;           /* first: the response's life (http_follow.h) */
    const plugin_view_t *view; /* the registry's, valid while ternd runs */
    char *key;                 /* the followed stream's whole key (owned), or NULL */
    char last_id[STREAM_ID_MAX + 8];
    bool warned; /* an entry that is no JSON object was logged once */
    uint64_t lines;
} view_stream_t;

static void pump(http_follow_t *f);

static void stream_log_end(http_follow_t *f, const char *why)
{
    view_stream_t *s = (view_stream_t *)f;
    if (!log_enabled(TERN_LOG_INFO))
        return;
    json_t *fields =
        json_pack("{s:s, s:s, s:s, s:s?, s:I, s:f}", "method", "GET", "route", s->view->def->path,
                  "plugin", s->view->plugin->name, "follow", s->key, "lines", (json_int_t)s->lines,
                  "seconds", (double)(uv_hrtime() - f->started_ns) / 1e9);
    log_msg(TERN_LOG_INFO, "api", fields, "stream of view \"%s\" ended: %s", s->view->def->path,
            why);
    json_decref(fields);
}

static void stream_free(http_follow_t *f)
{
    view_stream_t *s = (view_stream_t *)f;
    free(s->key);
    free(s);
}

static const http_follow_ops_t view_stream_ops = {
    .pump = pump,
    .log_end = stream_log_end,
    .free = stream_free,
    .first_chunk = KEEPALIVE,
    .keepalive = KEEPALIVE,
    .ended_why = "end line sent",
};

/* ---- lines --------------------------------------------------------------------- */

/* Appends `line` (an object, borrowed) as one compact line; an "end" line ends the
 * stream after it: the watch is dropped at once, nothing more is read. */
static void append_line(view_stream_t *s, const json_t *line)
{
    char *text = json_dumps(line, JSON_COMPACT);
    stream_buf_adds(&s->f.out.pending, text);
    stream_buf_adds(&s->f.out.pending, "\n");
    free(text);
    s->lines++;
    const char *type = json_string_value(json_object_get(line, "type"));
    if (type != NULL && strcmp(type, "end") == 0) {
        s->f.ending = true;
        s->f.why = "end line sent";
        event_hub_unwatch(s->f.watch);
        s->f.watch = NULL;
    }
}

static void on_read(void *data, int status, const event_hub_entry_t *entries, size_t n)
{
    view_stream_t *s = data;
    if (!http_follow_read_done(&s->f))
        return;
    if (status != 0) {
        /* Redis went away mid-read: the hub's RESYNC or the next heartbeat reads again. */
        pump(&s->f);
        return;
    }
    for (size_t i = 0; i < n && !s->f.ending; i++) {
        snprintf(s->last_id, sizeof s->last_id, "%s", entries[i].id);
        json_t *line = json_loadb(entries[i].json, entries[i].len, 0, NULL);
        if (!json_is_object(line)) {
            /* A client must be able to parse every line: such an entry is not sent. */
            if (!s->warned)
                log_msg(TERN_LOG_WARN, "api", NULL,
                        "stream of view \"%s\": entry %s of %s is no JSON object: skipped "
                        "(and any more such entries of this response)",
                        s->view->def->path, entries[i].id, s->key);
            s->warned = true;
            json_decref(line);
            continue;
        }
        append_line(s, line);
        json_decref(line);
    }
    if (n == PAGE_ENTRIES)
        s->f.read_wanted = true; /* more right behind this page */
    pump(&s->f);
}

static void pump(http_follow_t *f)
{
    view_stream_t *s = (view_stream_t *)f;
    if (f->done)
        return;
    if (f->read_wanted && !f->reading && !f->ending && f->hub != NULL && s->key != NULL &&
        f->out.pending.len < PENDING_MAX) {
        f->read_wanted = false;
        if (event_hub_read_stream(f->hub, s->key, s->last_id, false, PAGE_ENTRIES, on_read, s) == 0)
            f->reading = true;
    }
    http_follow_flush(f);
}

/* ---- the script's answer ------------------------------------------------------- */

/* What is wrong with the script's answer, or NULL; *lines, *follow and *after are
 * borrowed from `doc`. */
static const char *answer_fault(json_t *doc, const json_t **lines, const char **follow,
                                const char **after)
{
    static const char *const known[] = {"lines", "follow", "after"};
    if (!json_is_object(doc))
        return "it answered no object (a streaming view answers {\"lines\": [...], "
               "\"follow\": key or null, \"after\": stream id})";
    const char *k;
    json_t *v;
    json_object_foreach(doc, k, v)
    {
        bool ok = false;
        for (size_t i = 0; i < TERN_ARRAY_SIZE(known); i++)
            ok = ok || strcmp(k, known[i]) == 0;
        if (!ok)
            return "it answered a member other than lines, follow and after";
    }
    *lines = json_object_get(doc, "lines");
    /* Lua's cjson encodes an empty table as {}: taken as no lines. */
    if (json_is_object(*lines) && json_object_size(*lines) == 0)
        *lines = NULL;
    if (*lines != NULL && !json_is_array(*lines))
        return "lines: expected an array of objects";
    size_t i;
    json_array_foreach(*lines, i, v)
    {
        if (!json_is_object(v))
            return "lines: expected an array of objects, one of them is not an object";
    }
    const json_t *f = json_object_get(doc, "follow");
    *follow = NULL;
    if (f != NULL && !json_is_null(f)) {
        if (!json_is_string(f) || json_string_length(f) == 0 ||
            json_string_length(f) > FOLLOW_KEY_MAX)
            return "follow: expected null or a key of 1 to 512 bytes";
        *follow = json_string_value(f);
    }
    const json_t *a = json_object_get(doc, "after");
    *after = "0";
    if (a != NULL && !json_is_null(a)) {
        if (!json_is_string(a) || !stream_id_valid(json_string_value(a)))
            return "after: expected a stream id (\"0\", \"<ms>\" or \"<ms>-<seq>\")";
        *after = json_string_value(a);
    }
    return NULL;
}

/* See http_request.h. */
void http_view_stream_start(api_req_t *r, const plugin_view_t *v, const char *text, size_t len)
{
    if (r->req == NULL) {
        api_req_release(r); /* the client left before the answer */
        return;
    }
    json_error_t jerr;
    json_t *doc = json_loadb(text, len, 0, &jerr);
    const json_t *lines = NULL;
    const char *follow = NULL, *after = "0";
    const char *fault = doc == NULL ? jerr.text : answer_fault(doc, &lines, &follow, &after);
    if (fault != NULL) {
        api_reply_error(r, 500, "ViewScriptError",
                        "view \"%s\" of plugin \"%s\": the streaming view's answer is wrong: %s",
                        v->def->path, v->plugin->name, fault);
        json_decref(doc);
        return;
    }
    /* HEAD gets the headers of what GET would answer, and does not wait for a stream. */
    if (strcmp(r->method, "HEAD") == 0)
        follow = NULL;
    event_hub_t *hub = api_event_hub(r);
    if (follow != NULL && hub == NULL) {
        api_reply_error(r, 503, "ServiceUnavailable", "view \"%s\" of plugin \"%s\": %s",
                        v->def->path, v->plugin->name, "streams are not available");
        json_decref(doc);
        return;
    }
    view_stream_t *s = xcalloc(1, sizeof *s);
    s->f.ops = &view_stream_ops;
    s->view = v;
    s->f.started_ns = r->started_ns;
    snprintf(s->last_id, sizeof s->last_id, "%s", after);
    uint32_t hb = api_opts(r)->stream_heartbeat_ms;
    uv_loop_t *loop = api_loop(r);
    h2o_req_t *req = r->req;
    metrics_http_observe(v->def->path, r->method, 200, (double)(uv_hrtime() - r->started_ns) / 1e9);
    api_req_release(r);
    http_follow_start(&s->f, req, loop, "application/x-ndjson", hb > 0 ? hb : DEFAULT_HB_MS);

    size_t i;
    const json_t *line;
    json_array_foreach(lines, i, line)
    {
        append_line(s, line);
        if (s->f.ending)
            break;
    }
    if (!s->f.ending && follow == NULL) {
        s->f.ending = true;
        s->f.why = "no stream to follow";
    }
    if (!s->f.ending) {
        size_t klen = strlen("tern:p:") + strlen(v->plugin->name) + 1 + strlen(follow) + 1;
        s->key = xmalloc(klen);
        snprintf(s->key, klen, "tern:p:%s:%s", v->plugin->name, follow);
        s->f.hub = hub;
        s->f.watch = event_hub_watch_stream(hub, s->key, after, http_follow_on_note, &s->f);
        s->f.read_wanted = true;
    }
    json_decref(doc);
    pump(&s->f);
}
