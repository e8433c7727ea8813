/*
 * event_hub.c -- one XREAD BLOCK on the global stream fanned out to the watchers of
 * each job; see event_hub.h.
 *
 * Watches are kept in a hash table by job uuid (lookups per event) and in a list (for
 * the broadcasts RESYNC and SHUTDOWN). Notifying runs user callbacks, which may unwatch
 * anything; so a notification round first collects the watches to tell, then tells
 * them, and a watch unwatched meanwhile is only unlinked and marked dead, and freed
 * once the round is over.
 *
 * The cursor on the global stream is a concrete entry id, learned with XREVRANGE when
 * the connection first comes up ("$" would skip events appended between two XREADs).
 * When no one watches, replies only move the cursor; no event is decoded.
 */
#include "events/event_hub.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/log.h"
#include "events/stream_entry.h"
#include "redis/redis_conn.h"

#define NBUCKETS       1024
#define XREAD_COUNT    "1000"
#define XREAD_BLOCK_MS "5000"
#define GLOBAL_STREAM  "tern:events"

/* A stream key watched by views' streams, and where the XREAD reads it from. */
typedef struct hub_stream {
    char *key;
    char cursor[64]; /* the last entry announced, or where the first watcher started */
    size_t n_watches;
    struct hub_stream *next;
} hub_stream_t;

struct event_hub_watch {
    event_hub_t *hub;
    char uuid[40];
    hub_stream_t *stream; /* a view's stream watch, or NULL for a job's */
    event_hub_cb cb;
    void *data;
    bool dead;  /* unwatched during a notification round; freed after it */
    bool noted; /* already collected in the current round */
    event_hub_watch_t *bucket_next;
    event_hub_watch_t *prev, *next; /* every live watch */
    event_hub_watch_t *grave_next;  /* dead watches awaiting the end of the round */
};

struct event_hub {
    uv_loop_t *loop;
    redis_conn_t *blocking; /* XREAD BLOCK only */
    redis_conn_t *reads;    /* XRANGE of job streams */
    event_hub_watch_t *buckets[NBUCKETS];
    event_hub_watch_t *all;
    event_hub_watch_t *graveyard;
    size_t n_watches;
    int rounds; /* notification rounds on the stack */
    char cursor[64];
    bool have_cursor;
    bool xreading;
    bool reads_were_up; /* the read connection was up before: a new up is a reconnect */
    bool closing;
    hub_stream_t *streams; /* every stream key watched */
    size_t n_streams;
    uint64_t streams_gen;  /* bumped when a key is added: the XREAD in flight lacks it */
    uint64_t xread_gen;    /* streams_gen when the XREAD in flight was sent */
    long long blocking_id; /* CLIENT ID of the blocking connection, 0 unknown */
    bool unblocking;       /* a CLIENT UNBLOCK is in flight */
    int unblock_tries;
    /* A growable list of watches to tell in one round. */
    event_hub_watch_t **notes;
    size_t n_notes, cap_notes;
};

/* A read in flight. */
typedef struct hub_read {
    event_hub_read_cb read_cb;
    void *data;
} hub_read_t;

static void xread_next(event_hub_t *h);

/* ---- watches ------------------------------------------------------------------- */

static size_t bucket_of(const char *uuid)
{
    uint32_t x = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)uuid; *p; p++) {
        x ^= *p;
        x *= 16777619u;
    }
    return x % NBUCKETS;
}

event_hub_watch_t *event_hub_watch(event_hub_t *h, const char *uuid, event_hub_cb cb, void *data)
{
    event_hub_watch_t *w = xcalloc(1, sizeof *w);
    w->hub = h;
    snprintf(w->uuid, sizeof w->uuid, "%s", uuid);
    w->cb = cb;
    w->data = data;
    size_t b = bucket_of(w->uuid);
    w->bucket_next = h->buckets[b];
    h->buckets[b] = w;
    w->next = h->all;
    if (h->all != NULL)
        h->all->prev = w;
    h->all = w;
    h->n_watches++;
    return w;
}

/* Drops one watch of `st`; the key leaves the XREAD with its last watch (the XREAD in
 * flight may still announce it: an answer for a key nobody watches is skipped). */
static void stream_release(event_hub_t *h, hub_stream_t *st)
{
    if (--st->n_watches > 0)
        return;
    for (hub_stream_t **pp = &h->streams; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == st) {
            *pp = st->next;
            break;
        }
    }
    h->n_streams--;
    free(st->key);
    free(st);
}

static hub_stream_t *stream_find(const event_hub_t *h, const char *key, size_t len)
{
    for (hub_stream_t *st = h->streams; st != NULL; st = st->next)
        if (strlen(st->key) == len && memcmp(st->key, key, len) == 0)
            return st;
    return NULL;
}

static void unblock_xread(event_hub_t *h);

event_hub_watch_t *event_hub_watch_stream(event_hub_t *h, const char *key, const char *after,
                                          event_hub_cb cb, void *data)
{
    event_hub_watch_t *w = xcalloc(1, sizeof *w);
    w->hub = h;
    w->cb = cb;
    w->data = data;
    hub_stream_t *st = stream_find(h, key, strlen(key));
    if (st == NULL) {
        st = xcalloc(1, sizeof *st);
        st->key = xstrdup(key);
        /* XREAD takes "0-0" for the start; an id is announced from after it. */
        snprintf(st->cursor, sizeof st->cursor, "%s",
                 strcmp(after, "0") == 0 || after[0] == '\0' ? "0-0" : after);
        st->next = h->streams;
        h->streams = st;
        h->n_streams++;
        h->streams_gen++;
        unblock_xread(h);
    }
    st->n_watches++;
    w->stream = st;
    w->next = h->all;
    if (h->all != NULL)
        h->all->prev = w;
    h->all = w;
    h->n_watches++;
    return w;
}

void event_hub_unwatch(event_hub_watch_t *w)
{
    if (w == NULL || w->dead)
        return;
    event_hub_t *h = w->hub;
    if (w->stream != NULL) {
        stream_release(h, w->stream);
        w->stream = NULL;
    } else {
        event_hub_watch_t **pp = &h->buckets[bucket_of(w->uuid)];
        while (*pp != NULL && *pp != w)
            pp = &(*pp)->bucket_next;
        if (*pp == w)
            *pp = w->bucket_next;
    }
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        h->all = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    h->n_watches--;
    w->dead = true;
    if (h->rounds > 0) {
        /* A round may still hold a pointer to it. */
        w->grave_next = h->graveyard;
        h->graveyard = w;
    } else {
        free(w);
    }
}

size_t event_hub_watchers(const event_hub_t *h)
{
    return h->n_watches;
}

static void note_add(event_hub_t *h, event_hub_watch_t *w)
{
    if (w->noted || w->dead)
        return;
    if (h->n_notes == h->cap_notes) {
        h->cap_notes = h->cap_notes ? h->cap_notes * 2 : 64;
        h->notes = xrealloc(h->notes, h->cap_notes * sizeof *h->notes);
    }
    w->noted = true;
    h->notes[h->n_notes++] = w;
}

/* Tells every collected watch `note`, then frees the watches that died meanwhile. A
 * callback may start another round (a broadcast from inside a callback), so the list
 * is taken over first. */
static void notes_deliver(event_hub_t *h, event_hub_note_t note)
{
    event_hub_watch_t **list = h->notes;
    size_t n = h->n_notes;
    h->notes = NULL;
    h->n_notes = h->cap_notes = 0;
    h->rounds++;
    for (size_t i = 0; i < n; i++) {
        event_hub_watch_t *w = list[i];
        w->noted = false;
        if (!w->dead)
            w->cb(w->data, note);
    }
    h->rounds--;
    free(list);
    if (h->rounds == 0) {
        while (h->graveyard != NULL) {
            event_hub_watch_t *w = h->graveyard;
            h->graveyard = w->grave_next;
            free(w);
        }
    }
}

static void broadcast(event_hub_t *h, event_hub_note_t note)
{
    for (event_hub_watch_t *w = h->all; w != NULL; w = w->next)
        note_add(h, w);
    notes_deliver(h, note);
}

/* Notes the watches of the event's job for this round (see stream_entry_each). */
static bool note_event(void *data, const json_t *ev)
{
    event_hub_t *h = data;
    const char *job = json_string_value(json_object_get(ev, "job"));
    if (job == NULL)
        return true;
    for (event_hub_watch_t *w = h->buckets[bucket_of(job)]; w != NULL; w = w->bucket_next)
        if (strcmp(w->uuid, job) == 0)
            note_add(h, w);
    return true;
}

/* ---- the global stream ---------------------------------------------------------- */

/* The entries of the global stream: the cursor moves on, the jobs' watches are noted. */
static void note_global(event_hub_t *h, const redisReply *entries)
{
    for (size_t i = 0; i < entries->elements; i++) {
        redisReply *e = entries->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 2)
            continue;
        snprintf(h->cursor, sizeof h->cursor, "%s", e->element[0]->str);
        if (h->n_watches == 0)
            continue;
        stream_entry_each(e->element[1], note_event, h);
    }
}

/* Entries of a watched stream key: its cursor moves to the last, its watches are noted
 * (each reads what it has not sent itself). */
static void note_stream(event_hub_t *h, const redisReply *key, const redisReply *entries)
{
    hub_stream_t *st = stream_find(h, key->str, key->len);
    if (st == NULL || entries->elements == 0)
        return;
    const redisReply *last = entries->element[entries->elements - 1];
    if (last->type == REDIS_REPLY_ARRAY && last->elements > 0 &&
        last->element[0]->type == REDIS_REPLY_STRING)
        snprintf(st->cursor, sizeof st->cursor, "%s", last->element[0]->str);
    for (event_hub_watch_t *w = h->all; w != NULL; w = w->next)
        if (w->stream == st)
            note_add(h, w);
}

static void on_xread(redis_conn_t *c, redisReply *reply, void *data)
{
    (void)c;
    event_hub_t *h = data;
    h->xreading = false;
    h->unblock_tries = 0;
    if (reply == NULL || h->closing)
        return; /* dropped: the next up event reads again from the cursor */
    /* [[key, [[id, [field, value, ...]], ...]]], or nil when the block timed out. */
    if (reply->type == REDIS_REPLY_ARRAY) {
        for (size_t k = 0; k < reply->elements; k++) {
            redisReply *sk = reply->element[k];
            if (sk->type != REDIS_REPLY_ARRAY || sk->elements < 2 ||
                sk->element[0]->type != REDIS_REPLY_STRING ||
                sk->element[1]->type != REDIS_REPLY_ARRAY)
                continue;
            if (strcmp(sk->element[0]->str, GLOBAL_STREAM) == 0)
                note_global(h, sk->element[1]);
            else
                note_stream(h, sk->element[0], sk->element[1]);
        }
        notes_deliver(h, EVENT_HUB_NEW);
    }
    xread_next(h);
}

static void xread_next(event_hub_t *h)
{
    if (h->closing || h->xreading || !h->have_cursor || !redis_conn_is_up(h->blocking))
        return;
    /* XREAD COUNT c BLOCK ms STREAMS tern:events <keys...> <cursor> <cursors...> */
    size_t argc = 8 + 2 * h->n_streams, i = 0;
    const char **argv = xcalloc(argc, sizeof *argv);
    argv[i++] = "XREAD";
    argv[i++] = "COUNT";
    argv[i++] = XREAD_COUNT;
    argv[i++] = "BLOCK";
    argv[i++] = XREAD_BLOCK_MS;
    argv[i++] = "STREAMS";
    argv[i++] = GLOBAL_STREAM;
    for (hub_stream_t *st = h->streams; st != NULL; st = st->next)
        argv[i++] = st->key;
    argv[i++] = h->cursor;
    for (hub_stream_t *st = h->streams; st != NULL; st = st->next)
        argv[i++] = st->cursor;
    if (redis_conn_command(h->blocking, on_xread, h, (int)argc, argv, NULL) == 0) {
        h->xreading = true;
        h->xread_gen = h->streams_gen;
    }
    free(argv);
}

/* The XREAD in flight lacks a key that was just watched: it is unblocked (it answers
 * as if its time ran out) and sent again with the key. CLIENT UNBLOCK answers 0 when
 * the XREAD has not reached Redis yet; then it is tried again, a bounded number of
 * times, after which the XREAD's own bound (XREAD_BLOCK_MS) takes the key in. */
#define UNBLOCK_TRIES 50

static void on_unblock(redis_conn_t *c, redisReply *reply, void *data)
{
    (void)c;
    event_hub_t *h = data;
    h->unblocking = false;
    if (reply == NULL || h->closing)
        return;
    if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0)
        unblock_xread(h);
}

static void unblock_xread(event_hub_t *h)
{
    if (h->closing || !h->xreading || h->unblocking || h->blocking_id == 0 ||
        h->xread_gen == h->streams_gen || h->unblock_tries >= UNBLOCK_TRIES ||
        !redis_conn_is_up(h->reads))
        return;
    char id[24];
    snprintf(id, sizeof id, "%lld", h->blocking_id);
    const char *argv[] = {"CLIENT", "UNBLOCK", id};
    if (redis_conn_command(h->reads, on_unblock, h, 3, argv, NULL) == 0) {
        h->unblocking = true;
        h->unblock_tries++;
    }
}

static void on_client_id(redis_conn_t *c, redisReply *reply, void *data)
{
    (void)c;
    event_hub_t *h = data;
    if (reply != NULL && reply->type == REDIS_REPLY_INTEGER)
        h->blocking_id = reply->integer;
}

static void on_last_id(redis_conn_t *c, redisReply *reply, void *data)
{
    (void)c;
    event_hub_t *h = data;
    if (reply == NULL || h->closing)
        return;
    /* [[id, [field, value]]] or [] for an empty stream. */
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements > 0 &&
        reply->element[0]->type == REDIS_REPLY_ARRAY && reply->element[0]->elements > 0)
        snprintf(h->cursor, sizeof h->cursor, "%s", reply->element[0]->element[0]->str);
    else
        snprintf(h->cursor, sizeof h->cursor, "0-0");
    h->have_cursor = true;
    xread_next(h);
}

static void on_blocking_conn(redis_conn_t *c, bool up, const char *why, void *data)
{
    (void)why;
    event_hub_t *h = data;
    if (!up) {
        h->blocking_id = 0;
        return;
    }
    /* Sent before anything else on the connection, so known before an XREAD blocks. Not
     * sent (the connection dropped again): the id stays unknown and a new key joins the
     * XREAD at its own bound instead. */
    const char *id_argv[] = {"CLIENT", "ID"};
    redis_conn_command(c, on_client_id, h, 2, id_argv, NULL);
    if (!h->have_cursor) {
        const char *argv[] = {"XREVRANGE", GLOBAL_STREAM, "+", "-", "COUNT", "1"};
        redis_conn_command(c, on_last_id, h, 6, argv, NULL);
        return;
    }
    /* Reading on from the cursor catches up on everything still in the (capped)
     * global stream; RESYNC covers what the cap may have trimmed meanwhile. */
    xread_next(h);
    broadcast(h, EVENT_HUB_RESYNC);
}

static void on_reads_conn(redis_conn_t *c, bool up, const char *why, void *data)
{
    (void)c;
    (void)why;
    event_hub_t *h = data;
    if (!up)
        return;
    /* Reads that failed while the connection was down are retried by their owners. */
    if (h->reads_were_up)
        broadcast(h, EVENT_HUB_RESYNC);
    h->reads_were_up = true;
}

/* ---- reads of one job's stream ------------------------------------------------- */

static void on_read(redis_conn_t *c, redisReply *reply, void *data)
{
    (void)c;
    hub_read_t *rd = data;
    if (reply == NULL || reply->type == REDIS_REPLY_ERROR) {
        if (reply != NULL)
            log_msg(TERN_LOG_WARN, "events", NULL, "reading a job's events: %s", reply->str);
        rd->read_cb(rd->data, TERN_EIO, NULL, 0);
        free(rd);
        return;
    }
    /* [[id, [field, value, ...]], ...] */
    size_t n = reply->type == REDIS_REPLY_ARRAY ? reply->elements : 0;
    event_hub_entry_t *entries = xcalloc(n ? n : 1, sizeof *entries);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        redisReply *e = reply->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 2)
            continue;
        redisReply *fields = e->element[1];
        for (size_t f = 0; f + 1 < fields->elements; f += 2) {
            if (strcmp(fields->element[f]->str, "e") == 0) {
                entries[k].id = e->element[0]->str;
                entries[k].json = fields->element[f + 1]->str;
                entries[k].len = fields->element[f + 1]->len;
                k++;
                break;
            }
        }
    }
    rd->read_cb(rd->data, 0, entries, k);
    free(entries);
    free(rd);
}

int event_hub_read(event_hub_t *h, const char *uuid, const char *id, bool inclusive, size_t count,
                   event_hub_read_cb cb, void *data)
{
    char key[96];
    snprintf(key, sizeof key, "tern:job:%s:events", uuid);
    return event_hub_read_stream(h, key, id, inclusive, count, cb, data);
}

int event_hub_read_stream(event_hub_t *h, const char *key, const char *id, bool inclusive,
                          size_t count, event_hub_read_cb cb, void *data)
{
    if (h->closing)
        return TERN_ENOTCONN;
    char start[72], cnt[24];
    /* "(" makes the start exclusive (Redis >= 6.2): the entry after the last one seen. */
    if (strcmp(id, "0") == 0 || strcmp(id, "0-0") == 0)
        snprintf(start, sizeof start, "-");
    else
        snprintf(start, sizeof start, "%s%s", inclusive ? "" : "(", id);
    snprintf(cnt, sizeof cnt, "%zu", count);
    hub_read_t *rd = xcalloc(1, sizeof *rd);
    rd->read_cb = cb;
    rd->data = data;
    const char *argv[] = {"XRANGE", key, start, "+", "COUNT", cnt};
    int rc = redis_conn_command(h->reads, on_read, rd, 6, argv, NULL);
    if (rc != 0) {
        free(rd);
        return TERN_ENOTCONN;
    }
    return 0;
}

/* ---- lifetime ------------------------------------------------------------------- */

event_hub_t *event_hub_new(uv_loop_t *loop, const redis_addr_t *addr)
{
    event_hub_t *h = xcalloc(1, sizeof *h);
    h->loop = loop;
    redis_conn_opts_t bo = {.addr = addr,
                            .name = "events-hub",
                            .on_event = on_blocking_conn,
                            .data = h,
                            .command_timeout_ms = 5000 + 10000};
    h->blocking = redis_conn_new(loop, &bo);
    redis_conn_opts_t ro = {
        .addr = addr, .name = "events-read", .on_event = on_reads_conn, .data = h};
    h->reads = redis_conn_new(loop, &ro);
    return h;
}

void event_hub_free(event_hub_t *h)
{
    if (h == NULL)
        return;
    broadcast(h, EVENT_HUB_SHUTDOWN);
    h->closing = true;
    /* Reads in flight are answered with NULL inside these calls (see redis_conn.h). */
    redis_conn_free(h->blocking);
    redis_conn_free(h->reads);
    while (h->all != NULL)
        event_hub_unwatch(h->all);
    free(h->notes);
    free(h);
}
