/*
 * http_client.h -- outbound HTTP on the libuv loop through libcurl's multi-socket
 * interface. One client per loop; any number of requests in flight, none blocking.
 *
 * The client owns every curl handle and uv handle it creates. A request's callback
 * runs exactly once, unless the request is cancelled first, in which case it never
 * runs. Requests are independent: one slow or failing peer never delays another.
 */
#ifndef TERN_HTTP_CLIENT_H
#define TERN_HTTP_CLIENT_H

#include <stddef.h>

#include <tern/task.h>
#include <uv.h>

#include "base/net_allow.h"

/* The start of tern_http_res.error when every address the request could connect to
 * is outside its allow-list: "network not allowed: 127.0.0.1 is not in
 * postback_allow_networks". Retrying cannot help. */
#define HTTP_CLIENT_NOT_ALLOWED "network not allowed: "

typedef struct http_client http_client_t;
typedef struct http_request http_request_t;

/* `res` and everything it points to is valid only during the callback. */
typedef void (*http_client_cb)(void *data, const tern_http_res *res);

/* Creates a client on `loop`. Never returns NULL (aborts on out-of-memory only). */
http_client_t *http_client_new(uv_loop_t *loop);

/* Cancels every request still in flight (their callbacks do not run) and closes the
 * client's handles; the memory is released by close callbacks, so the caller runs the
 * loop afterwards (as every libuv user does before uv_loop_close). */
void http_client_free(http_client_t *c);

/* Starts a request. Everything in `req` is copied. Returns the request, or NULL with
 * a message in err (bad URL scheme, missing url). */
http_request_t *http_client_request(http_client_t *c, const tern_http_req *req, http_client_cb cb,
                                    void *data, char *err, size_t errlen);

/* The same, connecting only to addresses `allow` permits (borrowed: it must outlive
 * the request; NULL permits any). The check is made on each address curl is about to
 * connect to, after DNS, and again on a kept-alive connection before it is reused;
 * proxies from the environment are not used, since a connection to a proxy would
 * be checked instead of the server's. Redirects are never followed. */
http_request_t *http_client_request_allowed(http_client_t *c, const tern_http_req *req,
                                            const net_allow_t *allow, http_client_cb cb, void *data,
                                            char *err, size_t errlen);

/* Cancels a request that has not completed; its callback will not run. */
void http_request_cancel(http_request_t *r);

#endif /* TERN_HTTP_CLIENT_H */
