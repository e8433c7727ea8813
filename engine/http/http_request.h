/*
 * http_request.h -- what a route handler sees of a request: its path parameters,
 * query, parsed JSON body, and the functions that answer it.
 *
 * Lifetime. An api_req_t lives from routing until one of the api_reply_* functions
 * (which free it) is called. The client may go away meanwhile (a closed connection):
 * then `req` becomes NULL, and the reply functions only free the api_req_t. So a
 * handler that answers later (after a Redis round trip) keeps the api_req_t, never the
 * h2o_req_t, and simply calls api_reply_* when its answer is ready.
 */
#ifndef TERN_HTTP_REQUEST_H
#define TERN_HTTP_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <h2o.h> /* built with -DH2O_USE_LIBUV=1 */
#include <jansson.h>

#include "http/http_api.h"

#define API_MAX_PARAMS 4

typedef struct api_guard api_guard_t;

typedef struct api_req {
    http_api_t *api;
    h2o_req_t *req;               /* NULL once the client went away */
    api_guard_t *guard;           /* in req's pool; cleared when we answer first */
    const char *route;            /* the route's pattern, for logs and metrics */
    char *params[API_MAX_PARAMS]; /* ":uuid" values in pattern order (malloc'd) */
    size_t n_params;
    char *query;  /* raw query string without '?', or NULL (malloc'd) */
    json_t *body; /* parsed JSON body or NULL (owned) */
    uint64_t started_ns;
    char method[8];
    char path[256];
} api_req_t;

typedef void (*api_handler_fn)(api_req_t *r);

typedef struct api_route {
    const char *method;  /* "GET", "POST", "PUT", "DELETE" */
    const char *pattern; /* "/jobs/:uuid/cancel" */
    api_handler_fn handler;
} api_route_t;

/* The store, job operations, plugins and Redis address the server was given. */
store_t *api_store(const api_req_t *r);
/* GET /jobs: the configured bound of a page's size (0: job_list's default). */
size_t api_list_max_bytes(const api_req_t *r);
job_ops_t *api_ops(const api_req_t *r);
plugin_registry_t *api_plugins(const api_req_t *r);
const redis_addr_t *api_redis_addr(const api_req_t *r);
uv_loop_t *api_loop(const api_req_t *r);
/* The options the server was started with (borrowed). */
const http_api_opts_t *api_opts(const api_req_t *r);
/* The server's event hub (GET /jobs/:uuid/events), or NULL without a Redis address. */
struct event_hub *api_event_hub(const api_req_t *r);
/* What runs plugins' view scripts, or NULL without a Redis address (or after
 * shutdown began). */
view_runner_t *api_view_runner(const api_req_t *r);

/* The value of query parameter `name` (percent-decoded, malloc'd; caller frees), or
 * NULL when absent. */
char *api_query_get(const api_req_t *r, const char *name);

/* Every query parameter as an object of percent-decoded strings (new reference; the
 * first of repeated names wins), or an empty object. */
json_t *api_query_all(const api_req_t *r);

/* Reads query parameter `name` as a decimal integer from 0 to `max`: 0 and *out
 * (`def` when absent), or TERN_EINVAL with "limit: expected an integer from 0 to
 * 1000, got \"x\"" in err. */
int api_query_uint(const api_req_t *r, const char *name, uint64_t def, uint64_t max, uint64_t *out,
                   char *err, size_t errlen);

/* Answers with `status` and the compact JSON of `body` (borrowed; NULL sends no
 * body). Frees r. */
void api_reply_json(api_req_t *r, int status, const json_t *body);

/* Answers with `status` and `len` bytes of `json` (borrowed, copied): JSON text the
 * caller encoded itself, sent as api_reply_json sends what it encodes. Frees r. */
void api_reply_json_text(api_req_t *r, int status, const char *json, size_t len);

/* Adds a response header before api_reply_json (e.g. Location). */
void api_add_header(api_req_t *r, const char *name, const char *value);

/* Answers {"code": code, "message": ...} with `status`. Frees r. */
void api_reply_error(api_req_t *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Answers an engine status (TERN_E*) with its HTTP status and restify code:
 * EINVAL 409 InvalidArgument, ENOENT 404 ResourceNotFound, EEXIST and EBUSY 409
 * Conflict, E2BIG 413 RequestEntityTooLarge, ENOTCONN/EIO/EAGAIN 503
 * ServiceUnavailable, EUNKNOWN 503 OutcomeUnknown, EREFUSED 422 UnprocessableEntity,
 * anything else 500 InternalError. Frees r. */
void api_reply_status(api_req_t *r, int status, const char *message);

/* api_reply_status with the restify `code` given (NULL: the status's own), for an
 * answer whose code the operation chose (a refusal by an admission check). Frees r. */
void api_reply_status_code(api_req_t *r, int status, const char *code, const char *message);

/* Answers 503 {"code": "OutcomeUnknown", "message", "uuid"}: a write on job `uuid`
 * reached Redis and its answer was lost, so the client looks the job up to learn
 * whether it happened. Frees r. */
void api_reply_unknown(api_req_t *r, const char *message, const char *uuid);

/* A job_ops_cb whose `data` is the api_req_t: answers 200 with `result`, or the engine
 * status with api_reply_status. Frees r. */
void api_on_result(void *data, int status, const json_t *result, const char *message);

/* Answers with `status`, Content-Type `content_type` and `len` bytes of `body` (copied).
 * Frees r. */
void api_reply_text(api_req_t *r, int status, const char *content_type, const char *body,
                    size_t len);

/* Frees r without answering (the handler took the h2o_req_t over, e.g. a stream). */
void api_req_release(api_req_t *r);

/* The routes of each resource file. */
extern const api_route_t http_routes_workflows[];
extern const api_route_t http_routes_schedules[];
extern const api_route_t http_routes_jobs[];
extern const api_route_t http_routes_service[];
extern const api_route_t http_routes_events[];
extern const api_route_t http_routes_metrics[];
extern const api_route_t http_routes_views[];

/* The plugin view whose path matches `path` (after every engine route missed), with
 * r->params filled as api_route_match fills them, or NULL. */
const plugin_view_t *http_view_find(const plugin_registry_t *reg, const char *path, api_req_t *r);

/* Serves GET on view `v` for r (http_routes_views.c). Answers exactly once. */
void http_view_serve(api_req_t *r, const plugin_view_t *v);
/* Answers streaming view `v` (TERN_VIEW_STREAM) from its script's answer, `len` bytes
 * of `text` (borrowed): 500 ViewScriptError when it is not {"lines", "follow",
 * "after"}, else 200 and the lines as newline-delimited JSON, then the stream it
 * follows (http_view_stream.c). Frees r, or takes its h2o request over. */
void http_view_stream_start(api_req_t *r, const plugin_view_t *v, const char *text, size_t len);

#endif /* TERN_HTTP_REQUEST_H */
