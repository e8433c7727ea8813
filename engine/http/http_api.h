/*
 * http_api.h -- the HTTP API of ternd (api role): node-workflow's REST API plus
 * tern's additions, served with libh2o on the process's libuv loop.
 *
 * The server owns its h2o configuration and context, its listener and every request
 * in flight. Routes live in http_routes_*.c, one file per resource; this module does
 * what every route needs: routing, the checks of http_guard.h (Host, Origin, bearer
 * token and its scope, Content-Type), the connection limits of http_conns.h, the body
 * limit, JSON parsing, JSON answers and errors in restify's shape
 * ({"code": "ResourceNotFound", "message": "..."}), and one bunyan log line per
 * request.
 */
#ifndef TERN_HTTP_API_H
#define TERN_HTTP_API_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "http/http_conns.h"
#include "http/http_guard.h"
#include "ops/job_ops.h"
#include "plugins/plugin_loader.h"
#include "redis/redis_addr.h"
#include "run/view_runner.h"
#include "store/store.h"

typedef struct http_api http_api_t;

typedef struct http_api_opts {
    uv_loop_t *loop;
    const char *listen;         /* "HOST:PORT"; port 0 picks a free one */
    store_t *store;             /* borrowed */
    job_ops_t *ops;             /* borrowed */
    plugin_registry_t *plugins; /* borrowed; GET /tasks */
    const redis_addr_t *addr;   /* for connections of its own (event streams) */
    const http_guard_t *guard;  /* tokens and accepted names (borrowed; NULL: no token, IP
                                   literals and localhost only) */
    const char *tls_cert;       /* PEM chain file; with tls_key, serve HTTPS */
    const char *tls_key;
    size_t max_body_bytes;        /* default 1 MiB */
    uint32_t stream_heartbeat_ms; /* keep-alive of idle event streams; default 15000 */
    size_t list_max_bytes;        /* GET /jobs: a page's size bound; 0: job_list's default */
    uint32_t view_timeout_ms;     /* plugins' views: a script's bound; 0: view_runner's
                                     default (view_runner.h) */
    http_conns_opts_t conns;      /* connection cap and timeouts (zeros: defaults) */
} http_api_opts_t;

/* The patterns of every route the API serves ("/jobs/:uuid"), each once: the first
 * `max` into out (static strings), and their number returned. ternd reserves them in
 * the plugin registry before plugins load, so that no plugin's view overlaps one. */
size_t http_api_route_patterns(const char **out, size_t max);

/* Starts listening; call before the loop runs (h2o cleans up a failed start by
 * running the loop itself). Returns 0 and *out, or a negative code with "listen
 * 127.0.0.1:8080: address already in use" in err. */
int http_api_start(const http_api_opts_t *opts, http_api_t **out, char *err, size_t errlen);

/* The port actually bound (useful with port 0). */
int http_api_port(const http_api_t *api);

/* Stops accepting, ends event streams and asks open connections to close. h2o needs
 * the loop to run about a second more before http_api_dispose: h2o 2.2's shutdown
 * arms a one-second timeout that disposing earlier trips over (main.c waits for it). */
void http_api_shutdown(http_api_t *api);

/* Frees everything; call after uv_run returned (h2o re-enters the loop here). */
void http_api_dispose(http_api_t *api);

#endif /* TERN_HTTP_API_H */
