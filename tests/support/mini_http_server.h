/*
 * mini_http_server.h -- a tiny scripted HTTP/1.1 server on a libuv loop, for tests of
 * code that makes HTTP requests (http_client, the http plugin).
 *
 * It listens on 127.0.0.1, port chosen by the kernel, answers each request with the
 * response scripted for its path (or the default one), and records every request it
 * received. It speaks just enough HTTP/1.1 for curl: a request line, headers, a body
 * sized by Content-Length, keep-alive, and "100 Continue" when asked. It is not a
 * general server: no chunked request bodies, no pipelined requests while a delayed
 * answer is pending on the same connection.
 *
 * Everything is copied in; the server owns its handles and frees them in close
 * callbacks, so the caller runs the loop after mini_http_server_free (as every libuv
 * user does before uv_loop_close).
 */
#ifndef TERN_MINI_HTTP_SERVER_H
#define TERN_MINI_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

typedef struct mini_http_server mini_http_server_t;

/* How to answer. Borrowed for the call that takes it; the server copies it. */
typedef struct mini_http_response {
    int status;                 /* 0 means 200 */
    const char *body;           /* NULL means empty */
    size_t body_len;            /* 0 means strlen(body) */
    const char *const *headers; /* "Name: value", NULL-terminated, or NULL */
    uint64_t delay_ms;          /* wait this long before answering */
    bool close_without_answer;  /* read the request, then close the connection */
} mini_http_response_t;

/* A request as received. Valid until mini_http_server_free. */
typedef struct mini_http_request {
    char *method;
    char *path;     /* with the query string, as sent */
    char **headers; /* "Name: value" as sent, NULL-terminated */
    size_t nheaders;
    char *body; /* NUL-terminated; "" when none */
    size_t body_len;
} mini_http_request_t;

/* Starts listening on 127.0.0.1:0. Returns NULL (and logs to stderr) only when the
 * socket cannot be bound. */
mini_http_server_t *mini_http_server_new(uv_loop_t *loop);

/* The port the kernel chose. */
int mini_http_server_port(const mini_http_server_t *s);

/* Writes "http://127.0.0.1:<port><path>" into out. Returns out. */
char *mini_http_server_url(const mini_http_server_t *s, const char *path, char *out, size_t outlen);

/* Appends a response to the script of `path` (matched without the query string; NULL
 * scripts the default for every other path). The responses of one path are used in
 * order and the last one is repeated. Without any script the answer is 200 "ok". */
void mini_http_server_script(mini_http_server_t *s, const char *path,
                             const mini_http_response_t *res);

/* The number of requests received so far (complete request, body included). */
size_t mini_http_server_request_count(const mini_http_server_t *s);

/* The i-th request received (0-based), or NULL. */
const mini_http_request_t *mini_http_server_request(const mini_http_server_t *s, size_t i);

/* The value of header `name` (case-insensitive) of a request, or NULL. Points into the
 * request. */
const char *mini_http_request_header(const mini_http_request_t *r, const char *name);

/* Connections accepted, and connections closed (by either side), so far. */
size_t mini_http_server_connections(const mini_http_server_t *s);
size_t mini_http_server_closed(const mini_http_server_t *s);

/* Answers sent so far (not counting close_without_answer). */
size_t mini_http_server_answers(const mini_http_server_t *s);

/* Closes the listener and every connection. The memory goes once the loop has run
 * the close callbacks. */
void mini_http_server_free(mini_http_server_t *s);

#endif /* TERN_MINI_HTTP_SERVER_H */
