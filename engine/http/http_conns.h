/*
 * http_conns.h -- the API's connections: how many may be open at once, and how long a
 * client may take to send a request or to leave a connection idle.
 *
 * h2o 2.2 offers one HTTP/1 timer (http1.req_timeout) that runs from the moment a
 * connection waits for a request until that request's body is complete, so it cannot
 * tell a keep-alive wait from a slowly sent header, and the HTTP/2 idle timer restarts
 * at every frame. This module keeps its own record of every accepted connection and
 * checks each on a periodic tick:
 *
 *   cap      at most max_connections open, and never more than RLIMIT_NOFILE minus
 *            fd_reserve (descriptors kept for the runner's child pipes, Redis and
 *            files). A connection over the cap is accepted and closed at once, after a
 *            503 on plain HTTP, so it neither waits in the kernel's backlog nor takes
 *            the last descriptors.
 *   header   a request's head must arrive within header_timeout_ms of its first byte
 *            (of the connection's start for the first request);
 *   body     and its body within body_timeout_ms more;
 *   idle     a kept-alive connection with no request in progress is closed after
 *            idle_timeout_ms;
 *   io       while a request is being answered nothing is timed (event streams live
 *            for hours and write a heartbeat), except a write that makes no progress
 *            for io_timeout_ms (a client that stopped reading).
 *
 * A connection is closed by shutting its socket down, so h2o sees the end of the
 * stream and frees the connection through its own path. A request is "in progress"
 * from the moment the API's handler gets it until h2o disposes of it, which for
 * HTTP/1 is right after the last byte of the answer was written.
 */
#ifndef TERN_HTTP_CONNS_H
#define TERN_HTTP_CONNS_H

#include <stddef.h>
#include <stdint.h>

#include <h2o.h> /* built with -DH2O_USE_LIBUV=1 */
#include <uv.h>

typedef struct http_conns http_conns_t;

typedef struct http_conns_opts {
    uint32_t max_connections;   /* 0: 16384 */
    uint32_t fd_reserve;        /* descriptors never used for connections; 0: 256 */
    uint32_t header_timeout_ms; /* 0: 10000 */
    uint32_t body_timeout_ms;   /* 0: 30000 */
    uint32_t idle_timeout_ms;   /* 0: 60000 */
    uint32_t io_timeout_ms;     /* 0: 30000 */
} http_conns_opts_t;

/* Makes the connection table and starts its tick on `loop`. `accept_ctx` (borrowed,
 * must outlive the table) is what accepted sockets are handed to. */
http_conns_t *http_conns_new(uv_loop_t *loop, h2o_accept_ctx_t *accept_ctx,
                             const http_conns_opts_t *opts);

/* The options with every default filled in, and the cap actually applied. */
const http_conns_opts_t *http_conns_opts(const http_conns_t *c);
size_t http_conns_cap(const http_conns_t *c);

/* Accepts one connection from `listener` (call from its connection callback): hands
 * it to h2o, or closes it when the table is full. */
void http_conns_accept(http_conns_t *c, uv_stream_t *listener);

/* Marks `req` as in progress on its connection until h2o disposes of it. */
void http_conns_request_begin(http_conns_t *c, h2o_req_t *req);

/* Connections open now. */
size_t http_conns_count(const http_conns_t *c);

/* Closes every connection that has no request in progress (for a prompt shutdown:
 * h2o 2.2 leaves idle HTTP/1 connections open until their timer fires). */
void http_conns_close_idle(http_conns_t *c);

/* Stops the tick and stops accepting; connections still open close through h2o and
 * free their records themselves. The table is freed once the last one is gone. */
void http_conns_free(http_conns_t *c);

#endif /* TERN_HTTP_CONNS_H */
