/*
 * store.c -- the store's connection, script loading and calls; see store.h for the
 * key schema. Domain operations (job creation, claims, commits) build their arguments
 * in job_store.c and runner.c and call store_eval here.
 *
 * Ownership: the store owns one command connection. Each call in flight owns a packed
 * copy of its arguments (so a NOSCRIPT answer can be retried as EVAL with the same
 * arguments) and is freed after its callback.
 */
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/decimal.h"
#include "base/error.h"
#include "base/log.h"
#include "store/store_lua.h"

static const char *const script_names[SCRIPT_COUNT] = {
    [SCRIPT_EVENT_ADD] = "event_add",
    [SCRIPT_JOB_CANCEL] = "job_cancel",
    [SCRIPT_JOB_CLAIM] = "job_claim",
    [SCRIPT_JOB_CREATE] = "job_create",
    [SCRIPT_JOB_EVENTS_OPEN] = "job_events_open",
    [SCRIPT_JOB_GET] = "job_get",
    [SCRIPT_JOB_REDRIVE] = "job_redrive",
    [SCRIPT_JOB_RESUME] = "job_resume",
    [SCRIPT_STEP_BEGIN] = "step_begin",
    [SCRIPT_STEP_COMMIT] = "step_commit",
    [SCRIPT_TICK] = "tick",
    [SCRIPT_WORKFLOW_GET] = "workflow_get",
    [SCRIPT_WORKFLOW_PUT] = "workflow_put",
    [SCRIPT_JOB_INFO_ADD] = "job_info_add",
    [SCRIPT_JOB_INFO_GET] = "job_info_get",
    [SCRIPT_JOB_LIST] = "job_list",
    [SCRIPT_JOB_STATS] = "job_stats",
    [SCRIPT_METRICS_READ] = "metrics_read",
    [SCRIPT_POSTBACK_CLAIM] = "postback_claim",
    [SCRIPT_SCHEDULE_ADVANCE] = "schedule_advance",
    [SCRIPT_SCHEDULE_CLAIM] = "schedule_claim",
    [SCRIPT_SCHEDULE_DELETE] = "schedule_delete",
    [SCRIPT_SCHEDULE_PAUSE] = "schedule_pause",
    [SCRIPT_SCHEDULE_PUT] = "schedule_put",
    [SCRIPT_SCHEDULE_READ] = "schedule_read",
    [SCRIPT_POSTBACK_DONE] = "postback_done",
    [SCRIPT_RUNNERS_READ] = "runners_read",
    [SCRIPT_WORKFLOW_DELETE] = "workflow_delete",
    [SCRIPT_WORKFLOW_LIST] = "workflow_list",
};

/* The scripts marked "-- batched" (see run_batch in lua/lib/batch.lua). */
static const bool script_batched[SCRIPT_COUNT] = {
    [SCRIPT_JOB_CREATE] = true,
    [SCRIPT_STEP_COMMIT] = true,
};

struct store {
    uv_loop_t *loop;
    redis_addr_t addr;
    store_opts_t opts;
    char *name;
    redis_conn_t *conn;
    const char *source[SCRIPT_COUNT];
    char sha[SCRIPT_COUNT][41];
    int scripts_pending; /* SCRIPT LOAD replies still awaited */
    bool up;
    uint64_t last_rtt_us;
    char cap_job[16], cap_global[16];
    char retention[24];      /* ms, the third argument of every script */
    char success_events[24]; /* ms, the fourth */
    /* Calls of batched scripts waiting for the next turn of the loop, per script, and
     * the idle handle that sends them (allocated on first use, freed when closed). */
    struct batch_item *pending[SCRIPT_COUNT], **pending_tail[SCRIPT_COUNT];
    size_t n_pending[SCRIPT_COUNT];
    size_t n_sent[SCRIPT_COUNT]; /* batches sent and not answered yet, per script */
    uv_idle_t *flush;
};

/* One call of a batched script, owned by the store until its callback ran. */
typedef struct batch_item {
    struct batch_item *next;
    store_args_t args;
    store_reply_cb cb;
    void *data;
} batch_item_t;

/* One batch in flight: its items, in the order of the reply's elements. */
typedef struct batch {
    size_t n;
    batch_item_t *items;
    store_t *store;
    store_script_t id;
} batch_t;

/* One call in flight. argv/len point into `buf`. */
typedef struct call {
    store_t *store;
    store_script_t script; /* SCRIPT_COUNT for a plain command */
    store_reply_cb cb;
    void *data;
    uint64_t sent_us;
    int argc;
    const char **argv;
    size_t *argvlen;
    int retried_as_eval;
} call_t;

/* ---- argument vectors --------------------------------------------------------- */

void store_args_init(store_args_t *a)
{
    memset(a, 0, sizeof *a);
}

/* Makes room for `more` arguments beyond those in `a`. */
static void args_reserve(store_args_t *a, size_t more)
{
    if (a->n + more <= a->cap)
        return;
    size_t cap = a->cap ? a->cap * 2 : 16;
    while (cap < a->n + more)
        cap *= 2;
    a->cap = cap;
    a->v = xrealloc(a->v, a->cap * sizeof *a->v);
    a->len = xrealloc(a->len, a->cap * sizeof *a->len);
}

/* Appends `s` (len bytes, NUL-terminated, malloc'd), which `a` owns from now on. */
static void args_append_owned(store_args_t *a, char *s, size_t len)
{
    args_reserve(a, 1);
    a->v[a->n] = s;
    a->len[a->n] = len;
    a->n++;
}

void store_args_pushb(store_args_t *a, const char *buf, size_t len)
{
    char *copy = xmalloc(len + 1);
    memcpy(copy, buf, len);
    copy[len] = '\0';
    args_append_owned(a, copy, len);
}

void store_args_push(store_args_t *a, const char *s)
{
    store_args_pushb(a, s != NULL ? s : "", s != NULL ? strlen(s) : 0);
}

void store_args_pushf(store_args_t *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) {
        fprintf(stderr, "tern: out of memory formatting an argument\n");
        abort();
    }
    store_args_pushb(a, s, (size_t)n);
    free(s);
}

void store_args_push_u64(store_args_t *a, uint64_t v)
{
    /* Not through store_args_pushf: a create and a step push several numbers each, and
     * vasprintf cost an allocation and a format per number. */
    char buf[U64_TEXT_DIGITS + 1];
    const char *digits = u64_text(v, buf);
    store_args_pushb(a, digits, (size_t)(buf + U64_TEXT_DIGITS - digits));
}

void store_args_push_json(store_args_t *a, const json_t *v)
{
    if (v == NULL) {
        store_args_pushb(a, "", 0);
        return;
    }
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (s == NULL) {
        fprintf(stderr, "tern: out of memory encoding JSON\n");
        abort();
    }
    store_args_push(a, s);
    free(s);
}

void store_args_dispose(store_args_t *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->v[i]);
    free(a->v);
    free(a->len);
    memset(a, 0, sizeof *a);
}

/* ---- calls -------------------------------------------------------------------- */

static uint64_t mono_us(void)
{
    return uv_hrtime() / 1000u;
}

/* Packs [prefix..., args...] into one allocation owned by the call. */
static call_t *call_new(store_t *s, store_script_t script, const char *const *prefix,
                        size_t nprefix, const store_args_t *args, store_reply_cb cb, void *data)
{
    size_t argc = nprefix + args->n, bytes = 0;
    for (size_t i = 0; i < nprefix; i++)
        bytes += strlen(prefix[i]) + 1;
    for (size_t i = 0; i < args->n; i++)
        bytes += args->len[i] + 1;
    size_t head = sizeof(call_t) + argc * (sizeof(char *) + sizeof(size_t));
    call_t *c = xmalloc(head + bytes);
    memset(c, 0, sizeof *c);
    c->store = s;
    c->script = script;
    c->cb = cb;
    c->data = data;
    c->argc = (int)argc;
    c->argv = (const char **)(c + 1);
    c->argvlen = (size_t *)(c->argv + argc);
    char *p = (char *)(c->argvlen + argc);
    size_t k = 0;
    for (size_t i = 0; i < nprefix; i++, k++) {
        size_t n = strlen(prefix[i]);
        memcpy(p, prefix[i], n + 1);
        c->argv[k] = p;
        c->argvlen[k] = n;
        p += n + 1;
    }
    for (size_t i = 0; i < args->n; i++, k++) {
        memcpy(p, args->v[i], args->len[i]);
        p[args->len[i]] = '\0';
        c->argv[k] = p;
        c->argvlen[k] = args->len[i];
        p += args->len[i] + 1;
    }
    return c;
}

static void on_call_reply(redis_conn_t *conn, redisReply *reply, void *data);

static int call_send(call_t *c)
{
    c->sent_us = mono_us();
    return redis_conn_command(c->store->conn, on_call_reply, c, c->argc, c->argv, c->argvlen);
}

static void on_call_reply(redis_conn_t *conn, redisReply *reply, void *data)
{
    (void)conn;
    call_t *c = data;
    store_t *s = c->store;
    s->last_rtt_us = mono_us() - c->sent_us;
    if (c->cb == NULL) {
        /* Fire-and-forget (progress events): nobody waits for the answer. */
        free(c);
        return;
    }
    if (reply == NULL) {
        c->cb(c->data, TERN_EIO, NULL, "connection to Redis lost before the answer");
        free(c);
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        if (c->script < SCRIPT_COUNT && !c->retried_as_eval &&
            strncmp(reply->str, "NOSCRIPT", 8) == 0) {
            /* The server lost its script cache (restart, failover, SCRIPT FLUSH): send
             * the source itself, which also caches it again. */
            c->retried_as_eval = 1;
            c->argv[0] = "EVAL";
            c->argvlen[0] = 4;
            c->argv[1] = s->source[c->script];
            c->argvlen[1] = strlen(s->source[c->script]);
            if (call_send(c) == 0)
                return;
            c->cb(c->data, TERN_ENOTCONN, NULL, "Redis is not reachable");
            free(c);
            return;
        }
        c->cb(c->data, TERN_EINVAL, NULL, reply->str);
        free(c);
        return;
    }
    c->cb(c->data, 0, reply, NULL);
    free(c);
}

/* Sends one script call now. */
static int eval_now(store_t *s, store_script_t id, const store_args_t *args, store_reply_cb cb,
                    void *data)
{
    if (!s->up)
        return TERN_ENOTCONN;
    const char *prefix[] = {"EVALSHA",    s->sha[id],       "0", s->cap_job, s->cap_global,
                            s->retention, s->success_events};
    call_t *c = call_new(s, id, prefix, TERN_ARRAY_SIZE(prefix), args, cb, data);
    if (call_send(c) != 0) {
        free(c);
        return TERN_ENOTCONN;
    }
    return 0;
}

/* ---- batched calls -------------------------------------------------------------- */

static void batch_item_answer(batch_item_t *it, int status, const redisReply *reply,
                              const char *errmsg)
{
    it->cb(it->data, status, reply, errmsg);
    store_args_dispose(&it->args);
    free(it);
}

/* Answers every item of a list with the same status and frees them. */
static void batch_items_fail(batch_item_t *it, int status, const char *errmsg)
{
    while (it != NULL) {
        batch_item_t *next = it->next;
        batch_item_answer(it, status, NULL, errmsg);
        it = next;
    }
}

static void on_batch_reply(void *data, int status, const redisReply *reply, const char *errmsg)
{
    batch_t *b = data;
    batch_item_t *it = b->items;
    b->store->n_sent[b->id]--; /* first: an item's callback may free the store */
    if (status == 0 && (reply->type != REDIS_REPLY_ARRAY || reply->elements != b->n)) {
        status = TERN_EINVAL;
        errmsg = "a batched script answered with the wrong number of items";
    }
    if (status != 0) {
        batch_items_fail(it, status, errmsg);
        free(b);
        return;
    }
    for (size_t i = 0; it != NULL; i++) {
        batch_item_t *next = it->next;
        const redisReply *r = reply->element[i];
        if (r->type == REDIS_REPLY_ERROR)
            batch_item_answer(it, TERN_EINVAL, NULL, r->str);
        else
            batch_item_answer(it, 0, r, NULL);
        it = next;
    }
    free(b);
}

/* Cuts the first STORE_BATCH_MAX items (at most) of *list into a new batch of script
 * `id`; *list keeps the rest. */
static batch_t *batch_cut(store_t *s, store_script_t id, batch_item_t **list)
{
    batch_t *b = xcalloc(1, sizeof *b);
    b->store = s;
    b->id = id;
    b->items = *list;
    batch_item_t **tail = &b->items;
    while (*tail != NULL && b->n < STORE_BATCH_MAX) {
        tail = &(*tail)->next;
        b->n++;
    }
    *list = *tail;
    *tail = NULL;
    return b;
}

/* Sends batch `b` as one script call. The items' strings move into the call's vector
 * (no copy); when the call is not sent they move back, and the items can be sent or
 * failed later. Returns 0, or non-zero when it was not sent. */
static int batch_send(store_t *s, batch_t *b)
{
    store_args_t a;
    store_args_init(&a);
    size_t total = 1; /* the vector is sized once: batches carry hundreds of arguments */
    for (batch_item_t *it = b->items; it != NULL; it = it->next)
        total += 1 + it->args.n;
    args_reserve(&a, total);
    store_args_push_u64(&a, b->n);
    for (batch_item_t *it = b->items; it != NULL; it = it->next) {
        store_args_push_u64(&a, it->args.n);
        for (size_t i = 0; i < it->args.n; i++)
            args_append_owned(&a, it->args.v[i], it->args.len[i]);
    }
    int rc = eval_now(s, b->id, &a, on_batch_reply, b);
    size_t k = 1;
    for (batch_item_t *it = b->items; it != NULL; it = it->next) {
        k++; /* the item's count */
        if (rc != 0) {
            for (size_t i = 0; i < it->args.n; i++)
                a.v[k++] = NULL; /* not sent: the strings stay the item's */
        } else {
            it->args.n = 0; /* sent: freed with the vector below */
        }
    }
    store_args_dispose(&a);
    if (rc == 0)
        s->n_sent[b->id]++;
    return rc;
}

/* Sends what waits, at most STORE_BATCH_MAX items per script call: a long batch would
 * hold Redis's one thread (every other client waits behind it). Everything waiting is
 * taken first: once a send fails, the items' callbacks run, and one of them may free
 * the store, so the rest are failed without touching it again. */
static void on_flush(uv_idle_t *h)
{
    store_t *s = h->data;
    uv_idle_stop(h);
    batch_item_t *lists[SCRIPT_COUNT];
    for (int id = 0; id < SCRIPT_COUNT; id++) {
        lists[id] = s->pending[id];
        s->pending[id] = NULL;
        s->pending_tail[id] = &s->pending[id];
        s->n_pending[id] = 0;
    }
    bool down = false;
    for (int id = 0; id < SCRIPT_COUNT; id++) {
        while (lists[id] != NULL) {
            batch_t *b = batch_cut(s, (store_script_t)id, &lists[id]);
            if (!down) {
                if (batch_send(s, b) == 0)
                    continue;
                down = true;
            }
            batch_items_fail(b->items, TERN_ENOTCONN, "Redis is not reachable");
            free(b);
        }
    }
}

static void on_flush_closed(uv_handle_t *h)
{
    free(h);
}

/* Sends the STORE_FLUSH_EARLY calls of script `id` that wait, at once, when no call of
 * that script is in flight, and writes them to Redis now rather than when this turn of
 * the loop polls. A ternd answering a burst of HTTP creates otherwise sent them all only
 * after reading and parsing every one of them, and Redis and ternd took turns instead of
 * working together: this lets an idle Redis start on the first ones while ternd reads
 * the rest (the rest still go in one call at the turn's end: small calls cost Redis
 * more per job). Nothing is answered here: when the send fails, the calls go back to
 * wait for the turn's end (on_flush), so no caller's callback runs inside store_eval. */
static void flush_early(store_t *s, store_script_t id)
{
    if (!s->up || !redis_conn_is_up(s->conn))
        return;
    batch_item_t *rest = s->pending[id];
    batch_t *b = batch_cut(s, id, &rest);
    if (batch_send(s, b) != 0) {
        /* The items stay where they were, linked again. */
        batch_item_t *last = b->items;
        while (last->next != NULL)
            last = last->next;
        last->next = rest;
        free(b);
        return;
    }
    s->pending[id] = rest;
    s->n_pending[id] -= b->n;
    if (rest == NULL)
        s->pending_tail[id] = &s->pending[id];
    redis_conn_flush(s->conn);
}

/* Queues a call of batched script `id` for the next turn of the loop. Its arguments
 * are `args` copied, or `moved` (taken, left empty) when that is not NULL. */
static int eval_batched(store_t *s, store_script_t id, const store_args_t *args,
                        store_args_t *moved, store_reply_cb cb, void *data)
{
    batch_item_t *it = xcalloc(1, sizeof *it);
    if (moved != NULL) {
        it->args = *moved;
        store_args_init(moved);
    } else {
        store_args_init(&it->args);
        for (size_t i = 0; i < args->n; i++)
            store_args_pushb(&it->args, args->v[i], args->len[i]);
    }
    it->cb = cb;
    it->data = data;
    if (s->pending_tail[id] == NULL)
        s->pending_tail[id] = &s->pending[id];
    *s->pending_tail[id] = it;
    s->pending_tail[id] = &it->next;
    if (++s->n_pending[id] >= STORE_FLUSH_EARLY && s->n_sent[id] == 0) {
        flush_early(s, id);
        if (s->n_pending[id] == 0)
            return 0;
    }
    if (s->flush == NULL) {
        s->flush = xcalloc(1, sizeof *s->flush);
        uv_idle_init(s->loop, s->flush);
        s->flush->data = s;
    }
    uv_idle_start(s->flush, on_flush);
    return 0;
}

int store_eval(store_t *s, store_script_t id, const store_args_t *args, store_reply_cb cb,
               void *data)
{
    if (!s->up)
        return TERN_ENOTCONN;
    if (script_batched[id])
        return eval_batched(s, id, args, NULL, cb, data);
    return eval_now(s, id, args, cb, data);
}

int store_eval_move(store_t *s, store_script_t id, store_args_t *args, store_reply_cb cb,
                    void *data)
{
    if (!s->up)
        return TERN_ENOTCONN;
    if (script_batched[id])
        return eval_batched(s, id, NULL, args, cb, data);
    /* A call sent now copies its arguments into the command it writes. */
    return eval_now(s, id, args, cb, data);
}

int store_command(store_t *s, const store_args_t *args, store_reply_cb cb, void *data)
{
    if (!redis_conn_is_up(s->conn))
        return TERN_ENOTCONN;
    call_t *c = call_new(s, SCRIPT_COUNT, NULL, 0, args, cb, data);
    if (call_send(c) != 0) {
        free(c);
        return TERN_ENOTCONN;
    }
    return 0;
}

int store_event_append(store_t *s, const char *uuid, const char *json_text)
{
    /* A script, not two XADDs: the job's stream may have to be started first (see
     * job_stream_open in lua/lib/events.lua). */
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, uuid);
    store_args_push(&a, json_text);
    int rc = store_eval(s, SCRIPT_EVENT_ADD, &a, NULL, NULL);
    store_args_dispose(&a);
    return rc;
}

/* ---- connection and scripts --------------------------------------------------- */

static void set_up(store_t *s, bool up)
{
    if (s->up == up)
        return;
    s->up = up;
    if (s->opts.on_state != NULL)
        s->opts.on_state(s, up, s->opts.data);
}

typedef struct script_load {
    store_t *store;
    store_script_t id;
} script_load_t;

static void on_script_loaded(redis_conn_t *conn, redisReply *reply, void *data)
{
    (void)conn;
    script_load_t *l = data;
    store_t *s = l->store;
    if (reply == NULL) {
        free(l);
        return; /* the connection dropped; loading starts again when it is back */
    }
    if (reply->type != REDIS_REPLY_STRING || reply->len != 40) {
        log_msg(TERN_LOG_ERROR, "store", NULL, "SCRIPT LOAD %s failed: %s", script_names[l->id],
                reply->type == REDIS_REPLY_ERROR ? reply->str : "bad reply");
        redis_conn_drop(s->conn, "script load failed");
        free(l);
        return;
    }
    memcpy(s->sha[l->id], reply->str, 40);
    s->sha[l->id][40] = '\0';
    free(l);
    if (--s->scripts_pending == 0)
        set_up(s, true);
}

static void on_conn_event(redis_conn_t *conn, bool up, const char *why, void *data)
{
    (void)conn;
    (void)why;
    store_t *s = data;
    if (!up) {
        set_up(s, false);
        return;
    }
    /* A restarted or failed-over Redis has an empty script cache: load every time. */
    s->scripts_pending = SCRIPT_COUNT;
    for (int i = 0; i < SCRIPT_COUNT; i++) {
        script_load_t *l = xmalloc(sizeof *l);
        l->store = s;
        l->id = (store_script_t)i;
        const char *argv[] = {"SCRIPT", "LOAD", s->source[i]};
        if (redis_conn_command(s->conn, on_script_loaded, l, 3, argv, NULL) != 0) {
            free(l);
            return;
        }
    }
}

store_t *store_new(uv_loop_t *loop, const store_opts_t *opts)
{
    store_t *s = xcalloc(1, sizeof *s);
    s->loop = loop;
    s->opts = *opts;
    s->name = xstrdup(opts->name != NULL ? opts->name : "store");
    s->opts.name = s->name;
    snprintf(s->cap_job, sizeof s->cap_job, "%u",
             opts->event_max_job ? opts->event_max_job : 1000u);
    snprintf(s->cap_global, sizeof s->cap_global, "%u",
             opts->event_max_global ? opts->event_max_global : 100000u);
    snprintf(s->retention, sizeof s->retention, "%llu", (unsigned long long)opts->retention_ms);
    snprintf(s->success_events, sizeof s->success_events, "%llu",
             (unsigned long long)opts->success_events_ms);
    for (int i = 0; i < SCRIPT_COUNT; i++) {
        for (unsigned j = 0; j < store_lua_nscripts; j++)
            if (strcmp(store_lua_scripts[j].name, script_names[i]) == 0)
                s->source[i] = store_lua_scripts[j].source;
        if (s->source[i] == NULL) {
            fprintf(stderr, "tern: script %s.lua is missing from the build\n", script_names[i]);
            abort(); /* a build error, not an input error */
        }
    }
    const redis_addr_t *a = opts->addr;
    s->addr.host = a->host ? xstrdup(a->host) : NULL;
    s->addr.port = a->port;
    s->addr.path = a->path ? xstrdup(a->path) : NULL;
    s->addr.user = a->user ? xstrdup(a->user) : NULL;
    s->addr.password = a->password ? xstrdup(a->password) : NULL;
    s->addr.db = a->db;
    redis_conn_opts_t co = {
        .addr = &s->addr,
        .name = s->name,
        .command_timeout_ms =
            opts->command_timeout_ms ? opts->command_timeout_ms : STORE_COMMAND_TIMEOUT_MS,
        .health_timeout_ms =
            opts->health_timeout_ms ? opts->health_timeout_ms : STORE_HEALTH_TIMEOUT_MS,
        .on_event = on_conn_event,
        .data = s,
    };
    s->conn = redis_conn_new(loop, &co);
    return s;
}

void store_free(store_t *s)
{
    if (s == NULL)
        return;
    s->opts.on_state = NULL;
    s->up = false; /* callbacks of the calls failed below cannot queue new ones */
    for (int id = 0; id < SCRIPT_COUNT; id++) {
        batch_item_t *it = s->pending[id];
        s->pending[id] = NULL;
        batch_items_fail(it, TERN_ENOTCONN, "the store was closed before the call was sent");
    }
    if (s->flush != NULL)
        uv_close((uv_handle_t *)s->flush, on_flush_closed);
    redis_conn_free(s->conn);
    redis_addr_dispose(&s->addr);
    free(s->name);
    free(s);
}

bool store_is_up(const store_t *s)
{
    return s->up && redis_conn_is_up(s->conn);
}

const redis_addr_t *store_addr(const store_t *s)
{
    return &s->addr;
}

uint64_t store_last_rtt_us(const store_t *s)
{
    return s->last_rtt_us;
}

/* ---- replies ------------------------------------------------------------------ */

const redisReply *store_reply_at(const redisReply *r, size_t i)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || i >= r->elements)
        return NULL;
    return r->element[i];
}

bool store_reply_is(const redisReply *r, const char *s)
{
    return r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) &&
           r->len == strlen(s) && memcmp(r->str, s, r->len) == 0;
}

long long store_reply_int(const redisReply *r, long long def)
{
    if (r == NULL)
        return def;
    if (r->type == REDIS_REPLY_INTEGER)
        return r->integer;
    if (r->type == REDIS_REPLY_STRING && r->len > 0 && r->len < 32) {
        char buf[32], *end;
        memcpy(buf, r->str, r->len);
        buf[r->len] = '\0';
        long long v = strtoll(buf, &end, 10);
        if (*end == '\0')
            return v;
    }
    return def;
}

json_t *store_reply_hash(const redisReply *r)
{
    json_t *o = json_object();
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return o;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i], *v = r->element[i + 1];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
            continue;
        char key[256];
        size_t kl = k->len < sizeof key - 1 ? k->len : sizeof key - 1;
        memcpy(key, k->str, kl);
        key[kl] = '\0';
        json_object_set_new(o, key, json_stringn(v->str, v->len));
    }
    return o;
}

const char *store_reply_hash_get(const redisReply *r, const char *name, size_t *len)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return NULL;
    size_t nl = strlen(name);
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i];
        if (k->type == REDIS_REPLY_STRING && k->len == nl && memcmp(k->str, name, nl) == 0) {
            const redisReply *v = r->element[i + 1];
            if (v->type != REDIS_REPLY_STRING)
                return NULL;
            if (len != NULL)
                *len = v->len;
            return v->str;
        }
    }
    return NULL;
}
