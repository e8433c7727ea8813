/*
 * redis_conn.c -- a Redis connection that reconnects by itself; see redis_conn.h.
 *
 * Ownership: the redis_conn_t owns its hiredis context (while one exists), two timers
 * (retry/drop and watchdog) and one small record per command in flight, kept in send
 * order so the watchdog can see how long the oldest has waited. hiredis frees the
 * context; we only forget the pointer in the connect/disconnect callbacks.
 */
#include "redis/redis_conn.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/ident.h"
#include "base/log.h"
#include "redis/redis_uv.h"

/* How often the watchdog looks: a stall or a timeout is seen at most this late. */
#define WATCHDOG_MS 250
/* A connection with a health timeout that has had nothing in flight this long sends a
 * PING, so that a silent server is noticed without waiting for real traffic. */
#define PROBE_IDLE_MS 1000

enum conn_state {
    ST_IDLE,       /* no context; a retry may be scheduled */
    ST_CONNECTING, /* context exists, handshake not answered yet */
    ST_UP,
};

typedef struct pending_cmd {
    redis_conn_t *conn;
    redis_conn_reply_cb cb; /* NULL for handshake commands */
    void *data;
    uint64_t sent_ms;
    int handshake_last; /* the reply that completes the handshake */
    struct pending_cmd *prev, *next;
} pending_cmd_t;

struct redis_conn {
    uv_loop_t *loop;
    redis_addr_t addr;
    char *name;
    redis_conn_opts_t opts;
    redisAsyncContext *ac;
    enum conn_state state;
    int closing;
    int open_handles;
    uint32_t backoff_ms;
    uv_timer_t retry_timer; /* reconnect after backoff, or a deferred drop */
    uv_timer_t watchdog;
    int drop_pending;
    pending_cmd_t *head, *tail;
    uint64_t last_reply_ms;           /* when the last answer came (the watchdog's progress) */
    bool stall_logged;                /* the current stall was logged */
    redis_conn_message_cb on_message; /* pub/sub connections only */
    void *message_data;
    char why[256];
};

static void start_connect(redis_conn_t *c);

static void on_retry_timer(uv_timer_t *t)
{
    start_connect(t->data);
}

static void maybe_release(redis_conn_t *c)
{
    if (c->closing && c->open_handles == 0 && c->ac == NULL && c->head == NULL) {
        redis_addr_dispose(&c->addr);
        free(c->name);
        free(c);
    }
}

static void on_timer_closed(uv_handle_t *h)
{
    redis_conn_t *c = h->data;
    c->open_handles--;
    maybe_release(c);
}

static void notify(redis_conn_t *c, bool up, const char *why)
{
    if (c->opts.on_event != NULL && !c->closing)
        c->opts.on_event(c, up, why, c->opts.data);
}

static void unlink_pending(redis_conn_t *c, pending_cmd_t *p)
{
    if (p->prev != NULL)
        p->prev->next = p->next;
    else
        c->head = p->next;
    if (p->next != NULL)
        p->next->prev = p->prev;
    else
        c->tail = p->prev;
}

static pending_cmd_t *pending_new(redis_conn_t *c, redis_conn_reply_cb cb, void *data)
{
    pending_cmd_t *p = xcalloc(1, sizeof *p);
    p->conn = c;
    p->cb = cb;
    p->data = data;
    p->sent_ms = clock_mono_ms();
    p->prev = c->tail;
    if (c->tail != NULL)
        c->tail->next = p;
    else
        c->head = p;
    c->tail = p;
    return p;
}

/* How long the connection has waited for an answer: since the oldest command in
 * flight was sent or, in a long pipeline, since Redis last answered (a connection is
 * stuck when answers stop coming, not when many commands were sent at once: 5,000
 * creates of 100 KB each took longer than the bound to answer in all, every answer on
 * time). 0 when nothing is in flight. */
static uint64_t waited_ms(const redis_conn_t *c, uint64_t now)
{
    if (c->head == NULL)
        return 0;
    uint64_t since = c->head->sent_ms > c->last_reply_ms ? c->head->sent_ms : c->last_reply_ms;
    return now > since ? now - since : 0;
}

static bool stalled(const redis_conn_t *c)
{
    return c->opts.health_timeout_ms > 0 &&
           waited_ms(c, clock_mono_ms()) > c->opts.health_timeout_ms;
}

static void schedule_retry(redis_conn_t *c)
{
    if (c->closing)
        return;
    uint32_t base = c->backoff_ms;
    /* Jitter over the upper half, so runners that lost Redis together do not all come
     * back in the same millisecond. */
    uint32_t delay = base / 2 + (uint32_t)(random_u64() % (base / 2 + 1));
    c->backoff_ms = base * 2 > c->opts.backoff_max_ms ? c->opts.backoff_max_ms : base * 2;
    c->drop_pending = 0;
    uv_timer_start(&c->retry_timer, on_retry_timer, delay, 0);
}

static void lost(redis_conn_t *c, const char *why)
{
    int was_up = c->state == ST_UP;
    c->state = ST_IDLE;
    c->ac = NULL;
    c->stall_logged = false;
    snprintf(c->why, sizeof c->why, "%s", why != NULL ? why : "connection lost");
    if (c->closing) {
        maybe_release(c);
        return;
    }
    if (was_up) {
        log_msg(TERN_LOG_WARN, "redis", NULL, "connection %s lost: %s", c->name, c->why);
        notify(c, false, c->why);
    }
    schedule_retry(c);
}

static void on_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)ac;
    pending_cmd_t *p = privdata;
    redis_conn_t *c = p->conn;
    unlink_pending(c, p);
    c->last_reply_ms = clock_mono_ms();
    if (c->stall_logged && r != NULL) {
        c->stall_logged = false;
        log_msg(TERN_LOG_INFO, "redis", NULL, "connection %s answers again", c->name);
    }
    redisReply *reply = r;
    if (p->cb != NULL) {
        p->cb(c, reply, p->data);
    } else if (reply != NULL && reply->type == REDIS_REPLY_ERROR && c->state != ST_UP) {
        /* A handshake command failed (wrong password, no such db): drop and retry;
         * the message goes to the log once per attempt. */
        log_msg(TERN_LOG_ERROR, "redis", NULL, "connection %s: handshake refused: %s", c->name,
                reply->str);
        redis_conn_drop(c, "handshake refused");
    } else if (reply != NULL && p->handshake_last && c->state == ST_CONNECTING) {
        c->state = ST_UP;
        c->backoff_ms = c->opts.backoff_min_ms;
        log_msg(TERN_LOG_INFO, "redis", NULL, "connection %s up", c->name);
        notify(c, true, NULL);
    }
    free(p);
    if (c->closing)
        maybe_release(c);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    redis_conn_t *c = ac->data;
    if (status != REDIS_OK) {
        /* hiredis frees the context after this returns, without a disconnect
         * callback. Test status, not err: errstr is set while err may still be 0. */
        char why[256];
        snprintf(why, sizeof why, "connect: %s", ac->errstr ? ac->errstr : "failed");
        if (c->state == ST_CONNECTING && c->backoff_ms == c->opts.backoff_min_ms)
            log_msg(TERN_LOG_WARN, "redis", NULL, "connection %s: %s", c->name, why);
        lost(c, why);
    }
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    redis_conn_t *c = ac->data;
    lost(c, status == REDIS_OK ? "closed" : (ac->errstr ? ac->errstr : "disconnected"));
}

static int send_internal(redis_conn_t *c, int handshake_last, int argc, const char **argv)
{
    pending_cmd_t *p = pending_new(c, NULL, NULL);
    p->handshake_last = handshake_last;
    if (redisAsyncCommandArgv(c->ac, on_reply, p, argc, argv, NULL) != REDIS_OK) {
        unlink_pending(c, p);
        free(p);
        return -1;
    }
    return 0;
}

static void start_connect(redis_conn_t *c)
{
    if (c->closing || c->ac != NULL)
        return;
    redisAsyncContext *ac = c->addr.path != NULL ? redisAsyncConnectUnix(c->addr.path)
                                                 : redisAsyncConnect(c->addr.host, c->addr.port);
    if (ac == NULL) {
        lost(c, "connect: out of memory");
        return;
    }
    if (ac->err) {
        char why[256];
        snprintf(why, sizeof why, "connect: %s", ac->errstr);
        redisAsyncFree(ac);
        lost(c, why);
        return;
    }
    ac->data = c;
    if (redis_uv_attach(ac, c->loop) != 0) {
        redisAsyncFree(ac);
        lost(c, "connect: cannot watch the socket");
        return;
    }
    c->ac = ac;
    c->state = ST_CONNECTING;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    /* TCP only: on a unix socket the keepalive options fail and leave an error on the
     * context, which then refuses every write. */
    if (c->addr.path == NULL)
        redisEnableKeepAlive(&ac->c);

    /* The handshake is queued at once; hiredis writes it when the socket connects. The
     * reply to the last command (CLIENT SETNAME) marks the connection up. */
    if (c->addr.password != NULL) {
        const char *auth_user[] = {"AUTH", c->addr.user, c->addr.password};
        const char *auth[] = {"AUTH", c->addr.password};
        if (c->addr.user != NULL)
            send_internal(c, 0, 3, auth_user);
        else
            send_internal(c, 0, 2, auth);
    }
    if (c->addr.db != 0) {
        char db[16];
        snprintf(db, sizeof db, "%d", c->addr.db);
        const char *sel[] = {"SELECT", db};
        send_internal(c, 0, 2, sel);
    }
    char setname[128];
    snprintf(setname, sizeof setname, "tern-%s", c->name);
    for (char *s = setname; *s; s++) /* client names cannot contain spaces */
        if (*s == ' ')
            *s = '_';
    const char *name_cmd[] = {"CLIENT", "SETNAME", setname};
    send_internal(c, 1, 3, name_cmd);
}

static void on_drop_timer(uv_timer_t *t)
{
    redis_conn_t *c = t->data;
    if (c->ac == NULL) {
        start_connect(c);
        return;
    }
    redisAsyncContext *ac = c->ac;
    redisAsyncFree(ac);
    /* hiredis calls the disconnect callback (which forgets the context) only for a
     * context whose socket had connected; otherwise forget it here. */
    if (c->ac == ac)
        lost(c, c->why);
}

/* A PING whose answer only shows that Redis answers (on_reply does the bookkeeping). */
static void send_probe(redis_conn_t *c)
{
    pending_cmd_t *p = pending_new(c, NULL, NULL);
    if (redisAsyncCommand(c->ac, on_reply, p, "PING") != REDIS_OK) {
        unlink_pending(c, p);
        free(p);
    }
}

static void on_watchdog(uv_timer_t *t)
{
    redis_conn_t *c = t->data;
    uint64_t now = clock_mono_ms();
    if (c->head == NULL) {
        if (c->opts.health_timeout_ms > 0 && c->state == ST_UP && c->ac != NULL &&
            !c->drop_pending && now - c->last_reply_ms >= PROBE_IDLE_MS)
            send_probe(c);
        return;
    }
    uint64_t waited = waited_ms(c, now);
    if (c->opts.health_timeout_ms > 0 && waited > c->opts.health_timeout_ms && !c->stall_logged &&
        c->state == ST_UP) {
        c->stall_logged = true;
        log_msg(TERN_LOG_WARN, "redis", NULL,
                "connection %s: no reply for %llu ms, reported down; dropped after %u ms", c->name,
                (unsigned long long)waited, c->opts.command_timeout_ms);
    }
    if (c->opts.command_timeout_ms > 0 && waited > c->opts.command_timeout_ms) {
        log_msg(TERN_LOG_WARN, "redis", NULL,
                "connection %s: no reply for %llu ms, dropping the connection", c->name,
                (unsigned long long)waited);
        redis_conn_drop(c, "command timed out");
    }
}

redis_conn_t *redis_conn_new(uv_loop_t *loop, const redis_conn_opts_t *opts)
{
    redis_conn_t *c = xcalloc(1, sizeof *c);
    c->loop = loop;
    c->opts = *opts;
    c->name = xstrdup(opts->name != NULL ? opts->name : "redis");
    c->opts.name = c->name;
    if (c->opts.backoff_min_ms == 0)
        c->opts.backoff_min_ms = 100;
    if (c->opts.backoff_max_ms < c->opts.backoff_min_ms)
        c->opts.backoff_max_ms = c->opts.backoff_min_ms < 2000 ? 2000 : c->opts.backoff_min_ms;
    if (opts->command_timeout_ms == 0)
        c->opts.command_timeout_ms = 15000;
    c->backoff_ms = c->opts.backoff_min_ms;
    const redis_addr_t *a = opts->addr;
    c->addr.host = a->host ? xstrdup(a->host) : NULL;
    c->addr.port = a->port;
    c->addr.path = a->path ? xstrdup(a->path) : NULL;
    c->addr.user = a->user ? xstrdup(a->user) : NULL;
    c->addr.password = a->password ? xstrdup(a->password) : NULL;
    c->addr.db = a->db;
    uv_timer_init(loop, &c->retry_timer);
    uv_timer_init(loop, &c->watchdog);
    c->retry_timer.data = c;
    c->watchdog.data = c;
    c->open_handles = 2;
    uv_timer_start(&c->watchdog, on_watchdog, WATCHDOG_MS, WATCHDOG_MS);
    /* Connect from the loop, so the caller can finish wiring before any event. */
    uv_timer_start(&c->retry_timer, on_retry_timer, 0, 0);
    return c;
}

int redis_conn_command(redis_conn_t *c, redis_conn_reply_cb cb, void *data, int argc,
                       const char **argv, const size_t *argvlen)
{
    if (!redis_conn_is_up(c) || c->ac == NULL)
        return -ENOTCONN;
    pending_cmd_t *p = pending_new(c, cb, data);
    if (redisAsyncCommandArgv(c->ac, on_reply, p, argc, argv, argvlen) != REDIS_OK) {
        unlink_pending(c, p);
        free(p);
        return -ENOTCONN;
    }
    return 0;
}

void redis_conn_flush(redis_conn_t *c)
{
    if (c->state != ST_UP || c->ac == NULL)
        return;
    /* redisBufferWrite, not redisAsyncHandleWrite: on a write error the latter frees
     * the context at once, running every pending callback here, inside the caller's
     * call (and, from a reply callback, under hiredis's own feet). A failed write is
     * left in the context (c->err) on purpose: the loop's writable event, still armed
     * for what was queued, meets it and disconnects from the loop. */
    int done = 0;
    if (redisBufferWrite(&c->ac->c, &done) != REDIS_OK)
        return; /* the loop disconnects: see above */
}

int redis_conn_commandf(redis_conn_t *c, redis_conn_reply_cb cb, void *data, const char *fmt, ...)
{
    if (!redis_conn_is_up(c) || c->ac == NULL)
        return -ENOTCONN;
    pending_cmd_t *p = pending_new(c, cb, data);
    va_list ap;
    va_start(ap, fmt);
    int rc = redisvAsyncCommand(c->ac, on_reply, p, fmt, ap);
    va_end(ap);
    if (rc != REDIS_OK) {
        unlink_pending(c, p);
        free(p);
        return -ENOTCONN;
    }
    return 0;
}

/* Subscription replies keep arriving on the same callback until unsubscribe, so they
 * are not tracked as pending commands: privdata is the connection itself. */
static void on_sub_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)ac;
    redis_conn_t *c = privdata;
    redisReply *reply = r;
    if (reply == NULL || c->closing || c->on_message == NULL)
        return;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3)
        return;
    redisReply *kind = reply->element[0], *ch = reply->element[1], *msg = reply->element[2];
    if (kind->type == REDIS_REPLY_STRING && strcmp(kind->str, "message") == 0 &&
        ch->type == REDIS_REPLY_STRING && msg->type == REDIS_REPLY_STRING)
        c->on_message(c, ch->str, msg->str, msg->len, c->message_data);
}

int redis_conn_subscribe(redis_conn_t *c, const char *const *channels, size_t n,
                         redis_conn_message_cb cb, void *data)
{
    if (c->state != ST_UP || c->ac == NULL || c->drop_pending || n == 0 || n > 30)
        return -ENOTCONN;
    const char *argv[32];
    argv[0] = "SUBSCRIBE";
    for (size_t i = 0; i < n; i++)
        argv[i + 1] = channels[i];
    c->on_message = cb;
    c->message_data = data;
    if (redisAsyncCommandArgv(c->ac, on_sub_reply, c, (int)n + 1, argv, NULL) != REDIS_OK)
        return -ENOTCONN;
    return 0;
}

bool redis_conn_is_up(const redis_conn_t *c)
{
    /* A stalled connection refuses new commands: they would only wait behind the
     * unanswered ones and end, at the command timeout, with an unknown outcome, while
     * refused now they are known not to have run. */
    return c->state == ST_UP && !c->drop_pending && !stalled(c);
}

void redis_conn_set_command_timeout(redis_conn_t *c, uint32_t ms)
{
    c->opts.command_timeout_ms = ms;
}

void redis_conn_drop(redis_conn_t *c, const char *why)
{
    if (c->closing || c->drop_pending)
        return;
    snprintf(c->why, sizeof c->why, "%s", why);
    c->drop_pending = 1;
    /* Deferred: hiredis must not be freed from inside its own callbacks. */
    uv_timer_start(&c->retry_timer, on_drop_timer, 0, 0);
}

void redis_conn_free(redis_conn_t *c)
{
    if (c == NULL || c->closing)
        return;
    c->closing = 1;
    uv_timer_stop(&c->retry_timer);
    uv_timer_stop(&c->watchdog);
    uv_close((uv_handle_t *)&c->retry_timer, on_timer_closed);
    uv_close((uv_handle_t *)&c->watchdog, on_timer_closed);
    if (c->ac != NULL) {
        redisAsyncContext *ac = c->ac;
        redisAsyncFree(ac); /* pending callbacks run with NULL replies */
        if (c->ac == ac)
            c->ac = NULL; /* it had not connected: no disconnect callback came */
    }
}

const char *redis_conn_name(const redis_conn_t *c)
{
    return c->name;
}
