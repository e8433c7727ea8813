/*
 * http_conns.c -- the API's connection table: the cap, and the header, body, idle and
 * write timeouts h2o 2.2 does not have. See http_conns.h.
 *
 * Each accepted connection gets a conn_t that holds its uv_tcp_t (h2o's socket wraps
 * it and calls on_tcp_closed when it is done with it). A conn_t lives while its
 * socket is open or a request of it is in progress (a reference each), because h2o
 * may dispose of an HTTP/2 stream's request after the socket closed.
 *
 * The tick reads what h2o's public socket exposes: whether a write is pending, the
 * bytes written so far, and the bytes received and not yet consumed (`input`). h2o
 * keeps an HTTP/1 request's bytes in `input` until the request has been answered, so
 * while no request is in progress, a non-empty `input` is a request on its way, and
 * an empty line in it means its head is complete and the body is what is missing.
 */
#include "http/http_conns.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "base/alloc.h"
#include "base/log.h"

#define DEFAULT_MAX_CONNECTIONS 16384
#define DEFAULT_FD_RESERVE      256
#define DEFAULT_HEADER_MS       10000
#define DEFAULT_BODY_MS         30000
#define DEFAULT_IDLE_MS         60000
#define DEFAULT_IO_MS           30000
#define MIN_CAP                 16
#define TICK_MIN_MS             25
#define TICK_MAX_MS             1000
#define REFUSAL_LOG_MS          10000 /* at most one log line per this many ms of refusals */
/* What a connection over the cap is told before it is closed (plain HTTP only). */
#define REFUSAL_BODY                                                                               \
    "{\"code\":\"ServiceUnavailable\",\"message\":\"ternd has as many connections open as it "     \
    "allows; retry later\"}\n"
#define HEAD_SCAN_MAX 8192 /* h2o's longest request head (H2O_MAX_REQLEN) */

typedef struct conn conn_t;

struct http_conns {
    uv_loop_t *loop;
    h2o_accept_ctx_t *accept_ctx;
    http_conns_opts_t opts;
    size_t cap;
    size_t count;   /* connections whose socket is open */
    size_t records; /* conn_t alive (a request may outlive its socket) */
    conn_t *head;   /* every conn_t whose socket is open */
    uv_timer_t tick;
    bool closing;     /* http_conns_free was called */
    bool tick_closed; /* the tick's close callback ran */
    size_t refused;   /* connections closed over the cap since the last log line */
    uint64_t refused_logged_ms;
};

struct conn {
    uv_tcp_t tcp; /* first: h2o's close callback gets this pointer */
    http_conns_t *table;
    h2o_socket_t *sock; /* NULL once h2o disposed of it */
    conn_t *prev, *next;
    int refs;                /* 1 while the socket is open, + requests in progress */
    int active;              /* requests in progress */
    bool served;             /* a request was answered: waiting is keep-alive */
    bool shut;               /* this module shut the socket down */
    uint64_t wait_since_ms;  /* no request in progress since */
    uint64_t first_byte_ms;  /* a request's first byte was seen (0: none yet) */
    uint64_t write_since_ms; /* the pending write last made progress */
    size_t last_written;
};

/* ---- records ------------------------------------------------------------------ */

static void table_maybe_free(http_conns_t *c)
{
    if (c->closing && c->tick_closed && c->records == 0)
        free(c);
}

static void conn_unref(conn_t *k)
{
    if (--k->refs > 0)
        return;
    http_conns_t *c = k->table;
    free(k);
    c->records--;
    table_maybe_free(c);
}

/* h2o is done with the socket (its uv_tcp_t is closed). */
static void on_tcp_closed(uv_handle_t *h)
{
    conn_t *k = (conn_t *)h;
    http_conns_t *c = k->table;
    if (k->prev != NULL)
        k->prev->next = k->next;
    else if (c->head == k)
        c->head = k->next;
    if (k->next != NULL)
        k->next->prev = k->prev;
    k->prev = k->next = NULL;
    k->sock = NULL;
    c->count--;
    conn_unref(k);
}

/* A connection refused over the cap: its handle closed without h2o. */
static void on_refused_closed(uv_handle_t *h)
{
    free(h);
}

static void on_sock_disposed(void *data);

typedef struct req_mark {
    conn_t *conn;
} req_mark_t;

static void on_request_disposed(void *p)
{
    req_mark_t *m = p;
    conn_t *k = m->conn;
    if (--k->active == 0) {
        k->served = true;
        k->first_byte_ms = 0;
        k->wait_since_ms = uv_now(k->table->loop);
    }
    conn_unref(k);
}

void http_conns_request_begin(http_conns_t *c, h2o_req_t *req)
{
    (void)c;
    h2o_socket_t *sock = req->conn->callbacks->get_socket != NULL
                             ? req->conn->callbacks->get_socket(req->conn)
                             : NULL;
    if (sock == NULL || sock->on_close.cb != on_sock_disposed)
        return;
    conn_t *k = sock->on_close.data;
    req_mark_t *m = h2o_mem_alloc_shared(&req->pool, sizeof *m, on_request_disposed);
    m->conn = k;
    k->refs++;
    k->active++;
    k->first_byte_ms = 0;
}

/* h2o is disposing of the socket; the uv_tcp_t closes next (on_tcp_closed). */
static void on_sock_disposed(void *data)
{
    conn_t *k = data;
    k->sock = NULL;
}

/* ---- accepting ---------------------------------------------------------------- */

static void refuse(http_conns_t *c, uv_stream_t *listener)
{
    uv_tcp_t *tcp = xmalloc(sizeof *tcp);
    uv_tcp_init(c->loop, tcp);
    if (uv_accept(listener, (uv_stream_t *)tcp) == 0 && c->accept_ctx->ssl_ctx == NULL) {
        /* Best effort: a client that reads it knows why; the socket buffer is empty, so
         * the write completes at once or not at all. */
        char text[512];
        int n = snprintf(text, sizeof text,
                         "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                         "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
                         sizeof REFUSAL_BODY - 1, REFUSAL_BODY);
        uv_buf_t b = uv_buf_init(text, (unsigned)n);
        if (uv_try_write((uv_stream_t *)tcp, &b, 1) < 0)
            log_msg(TERN_LOG_DEBUG, "api", NULL, "a refused connection did not take its 503");
    }
    uv_close((uv_handle_t *)tcp, on_refused_closed);
    c->refused++;
    uint64_t now = uv_now(c->loop);
    if (c->refused_logged_ms == 0 || now - c->refused_logged_ms >= REFUSAL_LOG_MS) {
        log_msg(TERN_LOG_WARN, "api", NULL,
                "%zu connection(s) closed at once: %zu open, the most allowed (max_connections "
                "%u, RLIMIT_NOFILE less fd_reserve %u)",
                c->refused, c->count, c->opts.max_connections, c->opts.fd_reserve);
        c->refused = 0;
        c->refused_logged_ms = now;
    }
}

void http_conns_accept(http_conns_t *c, uv_stream_t *listener)
{
    if (c->closing)
        return;
    if (c->count >= c->cap) {
        refuse(c, listener);
        return;
    }
    conn_t *k = xcalloc(1, sizeof *k);
    k->table = c;
    uv_tcp_init(c->loop, &k->tcp);
    if (uv_accept(listener, (uv_stream_t *)&k->tcp) != 0) {
        uv_close((uv_handle_t *)&k->tcp, on_refused_closed);
        return;
    }
    k->refs = 1;
    k->wait_since_ms = uv_now(c->loop);
    c->count++;
    c->records++;
    k->next = c->head;
    if (c->head != NULL)
        c->head->prev = k;
    c->head = k;
    k->sock = h2o_uv_socket_create((uv_stream_t *)&k->tcp, on_tcp_closed);
    /* Server sockets leave on_close to their owner (h2o uses it for client pools). */
    k->sock->on_close.cb = on_sock_disposed;
    k->sock->on_close.data = k;
    h2o_accept(c->accept_ctx, k->sock);
}

/* ---- the tick ----------------------------------------------------------------- */

/* True when `buf` holds the empty line that ends an HTTP/1 request head. */
static bool head_complete(const char *buf, size_t len)
{
    if (len > HEAD_SCAN_MAX)
        len = HEAD_SCAN_MAX;
    for (size_t i = 1; i < len; i++)
        if (buf[i] == '\n' &&
            (buf[i - 1] == '\n' || (i >= 2 && buf[i - 1] == '\r' && buf[i - 2] == '\n')))
            return true;
    return false;
}

/* Shuts the connection's socket down; h2o then sees the end of the stream. Timeouts of
 * requests and idle connections are routine (debug); a stalled write is logged at
 * `level` info, since it ends an answer half sent. */
static void shut(conn_t *k, int level, const char *why)
{
    uv_os_fd_t fd;
    k->shut = true;
    log_msg(level, "api", NULL, "closing a connection: %s", why);
    if (uv_fileno((uv_handle_t *)&k->tcp, &fd) == 0 && shutdown(fd, SHUT_RDWR) != 0)
        log_msg(TERN_LOG_DEBUG, "api", NULL, "shutdown of a connection failed: %s",
                strerror(errno));
}

static void check(conn_t *k, uint64_t now)
{
    const http_conns_opts_t *o = &k->table->opts;
    h2o_socket_t *sock = k->sock;
    if (k->active > 0) {
        if (h2o_socket_is_writing(sock) && sock->bytes_written == k->last_written) {
            if (now - k->write_since_ms >= o->io_timeout_ms)
                shut(k, TERN_LOG_INFO, "a write made no progress (the client stopped reading)");
        } else {
            k->write_since_ms = now;
        }
        k->last_written = sock->bytes_written;
        return;
    }
    k->write_since_ms = now;
    k->last_written = sock->bytes_written;
    size_t in = sock->input != NULL ? sock->input->size : 0;
    if (in == 0) {
        uint64_t limit = k->served ? o->idle_timeout_ms : o->header_timeout_ms;
        if (now - k->wait_since_ms >= limit)
            shut(k, TERN_LOG_DEBUG,
                 k->served ? "idle keep-alive connection" : "no request after connecting");
        return;
    }
    if (k->first_byte_ms == 0)
        k->first_byte_ms = k->served ? now : k->wait_since_ms;
    bool body = head_complete(sock->input->bytes, in);
    uint64_t limit = (uint64_t)o->header_timeout_ms + (body ? o->body_timeout_ms : 0);
    if (now - k->first_byte_ms >= limit)
        shut(k, TERN_LOG_DEBUG,
             body ? "the request body came too slowly" : "the request head came too slowly");
}

static void on_tick(uv_timer_t *t)
{
    http_conns_t *c = t->data;
    uint64_t now = uv_now(c->loop);
    for (conn_t *k = c->head; k != NULL; k = k->next)
        if (k->sock != NULL && !k->shut)
            check(k, now);
}

static void on_tick_closed(uv_handle_t *h)
{
    http_conns_t *c = h->data;
    c->tick_closed = true;
    table_maybe_free(c);
}

/* ---- the table ---------------------------------------------------------------- */

static uint32_t or_default(uint32_t v, uint32_t def)
{
    return v != 0 ? v : def;
}

http_conns_t *http_conns_new(uv_loop_t *loop, h2o_accept_ctx_t *accept_ctx,
                             const http_conns_opts_t *opts)
{
    http_conns_t *c = xcalloc(1, sizeof *c);
    c->loop = loop;
    c->accept_ctx = accept_ctx;
    c->opts.max_connections = or_default(opts->max_connections, DEFAULT_MAX_CONNECTIONS);
    c->opts.fd_reserve = or_default(opts->fd_reserve, DEFAULT_FD_RESERVE);
    c->opts.header_timeout_ms = or_default(opts->header_timeout_ms, DEFAULT_HEADER_MS);
    c->opts.body_timeout_ms = or_default(opts->body_timeout_ms, DEFAULT_BODY_MS);
    c->opts.idle_timeout_ms = or_default(opts->idle_timeout_ms, DEFAULT_IDLE_MS);
    c->opts.io_timeout_ms = or_default(opts->io_timeout_ms, DEFAULT_IO_MS);

    /* Descriptors: whatever the limit leaves after the reserve, or half the limit when
     * the reserve would leave almost nothing (a small limit is then the real cap). */
    c->cap = c->opts.max_connections;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        size_t budget = rl.rlim_cur > c->opts.fd_reserve ? rl.rlim_cur - c->opts.fd_reserve : 0;
        if (budget < MIN_CAP) {
            budget = rl.rlim_cur / 2;
            log_msg(TERN_LOG_WARN, "api", NULL,
                    "RLIMIT_NOFILE %llu leaves too little beyond fd_reserve %u: at most %zu API "
                    "connections",
                    (unsigned long long)rl.rlim_cur, c->opts.fd_reserve, budget);
        }
        if (budget < c->cap)
            c->cap = budget;
    }

    uint32_t shortest = c->opts.header_timeout_ms;
    const uint32_t others[] = {c->opts.body_timeout_ms, c->opts.idle_timeout_ms,
                               c->opts.io_timeout_ms};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(others); i++)
        if (others[i] < shortest)
            shortest = others[i];
    uint64_t tick = shortest / 4;
    tick = tick < TICK_MIN_MS ? TICK_MIN_MS : tick > TICK_MAX_MS ? TICK_MAX_MS : tick;
    uv_timer_init(loop, &c->tick);
    c->tick.data = c;
    uv_timer_start(&c->tick, on_tick, tick, tick);
    uv_unref((uv_handle_t *)&c->tick); /* the tick alone does not keep the loop alive */
    return c;
}

const http_conns_opts_t *http_conns_opts(const http_conns_t *c)
{
    return &c->opts;
}

size_t http_conns_cap(const http_conns_t *c)
{
    return c->cap;
}

size_t http_conns_count(const http_conns_t *c)
{
    return c->count;
}

void http_conns_close_idle(http_conns_t *c)
{
    for (conn_t *k = c->head; k != NULL; k = k->next)
        if (k->sock != NULL && !k->shut && k->active == 0)
            shut(k, TERN_LOG_DEBUG, "shutting down");
}

void http_conns_free(http_conns_t *c)
{
    if (c == NULL || c->closing)
        return;
    c->closing = true;
    uv_close((uv_handle_t *)&c->tick, on_tick_closed);
}
