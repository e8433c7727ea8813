/*
 * http_api.c -- the h2o server of the API: listener, TLS, routing, auth, bodies,
 * answers, request logs. See http_api.h; routes are in http_routes_*.c.
 *
 * One h2o handler is registered at "/" and routes itself from the tables of the
 * http_routes_* files, because h2o 2.2 has no pattern routing. A request that is
 * answered after a Redis round trip is tracked by an api_req_t, guarded by a small
 * object in the request's memory pool whose dispose callback tells the api_req_t that
 * the client is gone (h2o frees the pool when the connection closes).
 */
#include "http/http_api.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/log.h"
#include "base/metrics.h"
#include "events/event_hub.h"
#include "http/http_conns.h"
#include "http/http_guard.h"
#include "http/http_request.h"
#include "http/http_route.h"

#define DEFAULT_MAX_BODY (1024u * 1024u)

typedef struct api_handler {
    h2o_handler_t super;
    http_api_t *api;
} api_handler_t;

struct http_api {
    http_api_opts_t opts;
    const http_guard_t *guard; /* borrowed from opts */
    http_guard_t open_guard;   /* no token, no names: when opts.guard is NULL */
    http_conns_t *conns;
    h2o_globalconf_t config;
    h2o_context_t ctx;
    h2o_accept_ctx_t accept_ctx;
    SSL_CTX *ssl_ctx;
    uv_tcp_t listener;
    int port;
    bool listening;
    bool shutting_down;
    event_hub_t *hub;     /* live events for GET /jobs/:uuid/events (NULL without opts.addr) */
    view_runner_t *views; /* plugins' view scripts (NULL without opts.addr) */
};

struct api_guard {
    api_req_t *r; /* NULL once the api_req_t answered */
};

/* ---- accessors ---------------------------------------------------------------- */

store_t *api_store(const api_req_t *r)
{
    return r->api->opts.store;
}

size_t api_list_max_bytes(const api_req_t *r)
{
    return r->api->opts.list_max_bytes;
}

job_ops_t *api_ops(const api_req_t *r)
{
    return r->api->opts.ops;
}

plugin_registry_t *api_plugins(const api_req_t *r)
{
    return r->api->opts.plugins;
}

const redis_addr_t *api_redis_addr(const api_req_t *r)
{
    return r->api->opts.addr;
}

uv_loop_t *api_loop(const api_req_t *r)
{
    return r->api->opts.loop;
}

const http_api_opts_t *api_opts(const api_req_t *r)
{
    return &r->api->opts;
}

event_hub_t *api_event_hub(const api_req_t *r)
{
    return r->api->hub;
}

view_runner_t *api_view_runner(const api_req_t *r)
{
    return r->api->views;
}

int http_api_port(const http_api_t *api)
{
    return api->port;
}

/* ---- request records ---------------------------------------------------------- */

static void on_guard_dispose(void *p)
{
    api_guard_t *g = p;
    if (g->r != NULL)
        g->r->req = NULL; /* the client went away before the answer */
}

static api_req_t *api_req_new(http_api_t *api, h2o_req_t *req)
{
    api_req_t *r = xcalloc(1, sizeof *r);
    r->api = api;
    r->req = req;
    r->started_ns = uv_hrtime();
    r->guard = h2o_mem_alloc_shared(&req->pool, sizeof *r->guard, on_guard_dispose);
    r->guard->r = r;
    snprintf(r->method, sizeof r->method, "%.*s", (int)req->method.len, req->method.base);
    size_t plen = req->query_at != SIZE_MAX ? req->query_at : req->path.len;
    snprintf(r->path, sizeof r->path, "%.*s", (int)plen, req->path.base);
    if (req->query_at != SIZE_MAX && req->query_at + 1 < req->path.len)
        r->query = xstrndup(req->path.base + req->query_at + 1, req->path.len - req->query_at - 1);
    return r;
}

static void api_req_free(api_req_t *r)
{
    if (r->guard != NULL && r->req != NULL)
        r->guard->r = NULL;
    for (size_t i = 0; i < r->n_params; i++)
        free(r->params[i]);
    free(r->query);
    json_decref(r->body);
    free(r);
}

void api_req_release(api_req_t *r)
{
    api_req_free(r);
}

static void log_request(api_req_t *r, int status)
{
    double secs = (double)(uv_hrtime() - r->started_ns) / 1e9;
    metrics_http_observe(r->route != NULL ? r->route : "unmatched", r->method, status, secs);
    int level = status >= 500 ? TERN_LOG_ERROR : TERN_LOG_INFO;
    /* One line per request: its members written as they are and the message put
     * together here, without a jansson object or a printf format per request. */
    const log_field_t f[] = {
        {.key = "method", .type = LOG_FIELD_STR, .str = r->method},
        {.key = "url", .type = LOG_FIELD_STR, .str = r->path},
        {.key = "route", .type = LOG_FIELD_STR, .str = r->route != NULL ? r->route : ""},
        {.key = "status", .type = LOG_FIELD_INT, .num = status},
        {.key = "latency_ms", .type = LOG_FIELD_REAL, .real = secs * 1000.0},
    };
    char msg[sizeof r->method + sizeof r->path + 16];
    size_t ml = strlen(r->method), pl = strlen(r->path), n = 0;
    memcpy(msg, r->method, ml);
    n += ml;
    msg[n++] = ' ';
    memcpy(msg + n, r->path, pl);
    n += pl;
    msg[n++] = ' ';
    n += (size_t)snprintf(msg + n, sizeof msg - n, "%d", status);
    log_line(level, "api", f, TERN_ARRAY_SIZE(f), msg, n);
}

/* ---- answers ------------------------------------------------------------------ */

void api_add_header(api_req_t *r, const char *name, const char *value)
{
    if (r->req == NULL)
        return;
    h2o_req_t *req = r->req;
    size_t nl = strlen(name), vl = strlen(value);
    /* Lowercase: HTTP/2 refuses a response with an uppercase header name (curl resets
     * the stream with PROTOCOL_ERROR), and HTTP/1.1 does not mind. */
    char *lname = h2o_strdup(&req->pool, name, nl).base;
    h2o_strtolower(lname, nl);
    h2o_add_header_by_str(&req->pool, &req->res.headers, lname, nl, 0, NULL,
                          h2o_strdup(&req->pool, value, vl).base, vl);
}

static const char *reason_phrase(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 413:
        return "Request Entity Too Large";
    case 415:
        return "Unsupported Media Type";
    case 421:
        return "Misdirected Request";
    case 503:
        return "Service Unavailable";
    default:
        return status >= 500 ? "Internal Server Error" : "Error";
    }
}

static void send_body(h2o_req_t *req, int status, const char *content_type, const char *body,
                      size_t len)
{
    static h2o_generator_t generator = {NULL, NULL};
    req->res.status = status;
    req->res.reason = reason_phrase(status);
    /* A length on every answer: without it h2o 2.2 closes the connection after any
     * status but 200, and keep-alive matters to API clients (test_api's
     * test_keep_alive_across_statuses). */
    req->res.content_length = len;
    if (len > 0)
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, content_type,
                       strlen(content_type));
    h2o_start_response(req, &generator);
    /* h2o 2.2 sends whatever it is given, even to HEAD: the length tells what a GET
     * would carry, and the body stays home, or the client reads it as the next
     * response on a kept-alive connection. */
    bool head = h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD"));
    h2o_iovec_t buf = h2o_iovec_init(body, len);
    h2o_send(req, &buf, len > 0 && !head ? 1 : 0, H2O_SEND_STATE_FINAL);
}

/* Sends `len` bytes of JSON text and a newline; the text is copied into the request's
 * pool, which h2o frees with the request. */
static void send_json(h2o_req_t *req, int status, const char *text, size_t len)
{
    char *buf = h2o_mem_alloc_pool(&req->pool, len + 1);
    memcpy(buf, text, len);
    buf[len] = '\n';
    send_body(req, status, "application/json", buf, len + 1);
}

void api_reply_json(api_req_t *r, int status, const json_t *body)
{
    log_request(r, status);
    if (r->req != NULL) {
        h2o_req_t *req = r->req;
        if (body == NULL) {
            send_body(req, status, "application/json", NULL, 0);
        } else {
            /* One pass of the encoder, then a copy into the request's pool: sizing the
             * text first with json_dumpb encoded every answer twice, which was a
             * quarter of ternd's CPU while answering POST /jobs at full speed. */
            char *text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
            if (text == NULL) {
                static const char failed[] =
                    "{\"code\":\"InternalError\",\"message\":\"cannot encode the answer\"}\n";
                send_body(req, 500, "application/json", failed, sizeof failed - 1);
            } else {
                send_json(req, status, text, strlen(text));
                free(text);
            }
        }
    }
    api_req_free(r);
}

void api_reply_json_text(api_req_t *r, int status, const char *json, size_t len)
{
    log_request(r, status);
    if (r->req != NULL)
        send_json(r->req, status, json, len);
    api_req_free(r);
}

void api_reply_text(api_req_t *r, int status, const char *content_type, const char *body,
                    size_t len)
{
    log_request(r, status);
    if (r->req != NULL) {
        h2o_req_t *req = r->req;
        char *buf = h2o_mem_alloc_pool(&req->pool, len + 1);
        memcpy(buf, body, len);
        send_body(req, status, h2o_strdup(&req->pool, content_type, SIZE_MAX).base, buf, len);
    }
    api_req_free(r);
}

void api_reply_error(api_req_t *r, int status, const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *body = json_pack("{s:s, s:s}", "code", code, "message", msg);
    api_reply_json(r, status, body);
    json_decref(body);
}

/* How engine statuses are answered (http_request.h lists them); anything else is 500
 * InternalError. */
static const struct {
    int status;
    int http;
    const char *code;
} status_replies[] = {
    {TERN_EINVAL, 409, "InvalidArgument"},
    {TERN_ENOENT, 404, "ResourceNotFound"},
    {TERN_EEXIST, 409, "Conflict"},
    {TERN_EBUSY, 409, "Conflict"},
    {TERN_E2BIG, 413, "RequestEntityTooLarge"},
    {TERN_ENOTCONN, 503, "ServiceUnavailable"},
    {TERN_EIO, 503, "ServiceUnavailable"},
    {TERN_EUNKNOWN, 503, "OutcomeUnknown"},
    {TERN_EAGAIN, 503, "ServiceUnavailable"},
    {TERN_EREFUSED, 422, "UnprocessableEntity"},
    {TERN_EPERM, 403, "Forbidden"},
};

void api_reply_status_code(api_req_t *r, int status, const char *code, const char *message)
{
    int http = 500;
    const char *own = "InternalError";
    for (size_t i = 0; i < TERN_ARRAY_SIZE(status_replies); i++) {
        if (status_replies[i].status == status) {
            http = status_replies[i].http;
            own = status_replies[i].code;
            break;
        }
    }
    api_reply_error(r, http, code != NULL ? code : own, "%s", message != NULL ? message : "");
}

void api_reply_status(api_req_t *r, int status, const char *message)
{
    api_reply_status_code(r, status, NULL, message);
}

void api_reply_unknown(api_req_t *r, const char *message, const char *uuid)
{
    json_t *body = json_pack("{s:s, s:s, s:s}", "code", "OutcomeUnknown", "message",
                             message != NULL ? message : "", "uuid", uuid);
    api_reply_json(r, 503, body);
    json_decref(body);
}

void api_on_result(void *data, int status, const json_t *result, const char *message)
{
    api_req_t *r = data;
    if (status != 0)
        api_reply_status(r, status, message);
    else
        api_reply_json(r, 200, result);
}

/* ---- routing ------------------------------------------------------------------ */

static const api_route_t *const route_tables[] = {
    http_routes_workflows, http_routes_jobs,  http_routes_service,  http_routes_events,
    http_routes_metrics,   http_routes_views, http_routes_schedules};

/* See http_api.h. */
size_t http_api_route_patterns(const char **out, size_t max)
{
    size_t n = 0;
    for (size_t t = 0; t < TERN_ARRAY_SIZE(route_tables); t++)
        for (const api_route_t *rt = route_tables[t]; rt->pattern != NULL; rt++) {
            bool seen = false;
            for (size_t i = 0; i < n && i < max && !seen; i++)
                seen = strcmp(out[i], rt->pattern) == 0;
            if (seen)
                continue;
            if (n < max)
                out[n] = rt->pattern;
            n++;
        }
    return n;
}

/* The value of header `name` (lowercase; h2o lowercases the names it receives), or
 * NULL. */
static void header_value(h2o_req_t *req, const char *name, const char **v, size_t *len)
{
    ssize_t i = h2o_find_header_by_str(&req->headers, name, strlen(name), -1);
    *v = i >= 0 ? req->headers.entries[i].value.base : NULL;
    *len = i >= 0 ? req->headers.entries[i].value.len : 0;
}

/* True when header `name` (lowercase) occurs at most once. The checks read the first
 * value while a proxy in front or a client library may go by another, so a request
 * that gives two Origins or two Content-Types is refused rather than read one way. */
static bool header_single(api_req_t *r, h2o_req_t *req, const char *name, const char *shown)
{
    size_t n = 0;
    for (ssize_t i = -1; (i = h2o_find_header_by_str(&req->headers, name, strlen(name), i)) >= 0;)
        n++;
    if (n <= 1)
        return true;
    api_reply_error(r, 400, "BadRequest", "the request has %zu %s headers; one is expected", n,
                    shown);
    return false;
}

/* The number of Host lines in an HTTP/1 request's head. h2o 2.2 lists no Host among
 * the headers and takes the last one as the authority, so a request naming another
 * host first would pass the Host check while a proxy in front went by the first; RFC
 * 9112 3.2 has such a request refused. The head is still at the start of the socket's
 * input (h2o consumes it once the answer is written, see http_conns.h); 0 when it
 * is not there to read. */
static size_t http1_host_lines(h2o_req_t *req)
{
    if (req->version >= 0x200 || req->conn->callbacks->get_socket == NULL)
        return 0;
    h2o_socket_t *sock = req->conn->callbacks->get_socket(req->conn);
    if (sock == NULL || sock->input == NULL)
        return 0;
    const char *p = sock->input->bytes, *end = p + sock->input->size;
    size_t ml = req->input.method.len;
    if ((size_t)(end - p) <= ml || memcmp(p, req->input.method.base, ml) != 0 || p[ml] != ' ')
        return 0;
    size_t n = 0;
    const char *nl = memchr(p, '\n', (size_t)(end - p)); /* the request line's end */
    while (nl != NULL) {
        const char *line = nl + 1;
        nl = memchr(line, '\n', (size_t)(end - line));
        if (nl == NULL)
            break;
        size_t len = (size_t)(nl - line);
        if (len > 0 && line[len - 1] == '\r')
            len--;
        if (len == 0)
            break; /* the head's end */
        if (len >= 5 && strncasecmp(line, "host:", 5) == 0)
            n++;
    }
    return n;
}

static void reply_verdict(api_req_t *r, const http_guard_verdict_t *v)
{
    api_reply_error(r, v->status, v->code, "%s", v->message);
}

/* What every request passes before its route runs, in this order: Host and Origin
 * (so no web page drives the API), the token (before anything about routes is
 * told), the route, the token's scope, then the body's type and JSON. */
static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    http_api_t *api = ((api_handler_t *)self)->api;
    http_conns_request_begin(api->conns, req);
    api_req_t *r = api_req_new(api, req);
    http_guard_verdict_t v;

    /* h2o puts the default host's name in authority when the request named none. */
    bool no_host = req->input.authority.base == req->hostconf->authority.hostport.base;
    const char *host = no_host ? NULL : req->input.authority.base;
    size_t host_len = no_host ? 0 : req->input.authority.len;
    size_t host_lines = http1_host_lines(req);
    if (host_lines > 1) {
        api_reply_error(r, 400, "BadRequest", "the request has %zu Host headers; one is expected",
                        host_lines);
        return 0;
    }
    if (!header_single(r, req, "origin", "Origin") ||
        !header_single(r, req, "content-type", "Content-Type"))
        return 0;
    if (!http_guard_host(api->guard, host, host_len, req->version, &v)) {
        reply_verdict(r, &v);
        return 0;
    }
    const char *origin;
    size_t origin_len;
    header_value(req, "origin", &origin, &origin_len);
    if (!http_guard_origin(api->guard, origin, origin_len, host, host_len, api->ssl_ctx != NULL,
                           &v)) {
        reply_verdict(r, &v);
        return 0;
    }

    const char *method = strcmp(r->method, "HEAD") == 0 ? "GET" : r->method;
    bool path_known = false;
    const api_route_t *found = api_route_find(route_tables, TERN_ARRAY_SIZE(route_tables), method,
                                              r->path, r, &path_known);
    /* A plugin's view is a GET route of its own path, which no engine route overlaps
     * (the loader refused those). */
    const plugin_view_t *view = NULL;
    if (found == NULL && !path_known) {
        view = http_view_find(api->opts.plugins, r->path, r);
        if (view != NULL && strcmp(method, "GET") != 0) {
            for (size_t i = 0; i < r->n_params; i++) {
                free(r->params[i]);
                r->params[i] = NULL;
            }
            r->n_params = 0;
            view = NULL;
            path_known = true;
        }
    }
    http_scope_t need = found != NULL  ? http_guard_route_scope(found->method, found->pattern)
                        : view != NULL ? http_guard_view_scope()
                                       : HTTP_SCOPE_OPERATOR;
    http_scope_t have = HTTP_SCOPE_OPERATOR;
    if (api->guard->n_tokens > 0 && need != HTTP_SCOPE_NONE) {
        const char *authz;
        size_t authz_len;
        header_value(req, "authorization", &authz, &authz_len);
        have = http_guard_bearer(api->guard, authz, authz_len);
        if (have == HTTP_SCOPE_NONE) {
            api_reply_error(r, 401, "InvalidCredentials",
                            "this API needs \"Authorization: Bearer <token>\" with a valid token");
            return 0;
        }
    }
    if (found == NULL && view == NULL) {
        if (path_known) {
            /* A 405 names what the path does allow (RFC 9110, 15.5.6). */
            char allow[128];
            api_route_allow(route_tables, TERN_ARRAY_SIZE(route_tables), r->path, allow,
                            sizeof allow);
            if (allow[0] == '\0') /* a view's path: GET and HEAD only */
                snprintf(allow, sizeof allow, "GET, HEAD");
            api_add_header(r, "Allow", allow);
            api_reply_error(r, 405, "MethodNotAllowed", "%s is not allowed on %s", r->method,
                            r->path);
        } else
            api_reply_error(r, 404, "ResourceNotFound", "%s does not exist", r->path);
        return 0;
    }
    r->route = found != NULL ? found->pattern : view->def->path;
    if (have < need) {
        api_reply_error(r, 403, "NotAuthorized",
                        "%s %s needs a token of scope %s; this token has scope %s", r->method,
                        r->route, http_scope_name(need), http_scope_name(have));
        return 0;
    }
    if (req->entity.base != NULL && req->entity.len > 0) {
        const char *ct;
        size_t ct_len;
        header_value(req, "content-type", &ct, &ct_len);
        if (!http_guard_content_type(ct, ct_len, &v)) {
            reply_verdict(r, &v);
            return 0;
        }
        json_error_t jerr;
        r->body = json_loadb(req->entity.base, req->entity.len, JSON_REJECT_DUPLICATES, &jerr);
        if (r->body == NULL) {
            api_reply_error(r, 400, "InvalidContent", "body is not JSON: line %d, column %d: %s",
                            jerr.line, jerr.column, jerr.text);
            return 0;
        }
        if (!json_is_object(r->body)) {
            api_reply_error(r, 400, "InvalidContent", "body must be a JSON object");
            return 0;
        }
    }
    if (view != NULL)
        http_view_serve(r, view);
    else
        found->handler(r);
    return 0;
}

/* ---- listener ----------------------------------------------------------------- */

static void on_connection(uv_stream_t *listener, int status)
{
    http_api_t *api = listener->data;
    if (status != 0 || api->shutting_down)
        return;
    http_conns_accept(api->conns, listener);
}

static int parse_listen(const char *listen, struct sockaddr_storage *ss, char *err, size_t errlen)
{
    const char *colon = strrchr(listen, ':');
    if (colon == NULL)
        return err_set(err, errlen, TERN_EINVAL, "listen \"%s\": expected HOST:PORT", listen);
    char host[128];
    snprintf(host, sizeof host, "%.*s", (int)(colon - listen), listen);
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port < 0 || port > 65535)
        return err_set(err, errlen, TERN_EINVAL, "listen \"%s\": bad port", listen);
    if (host[0] == '[') {
        size_t n = strlen(host);
        memmove(host, host + 1, n);
        if (n >= 2 && host[n - 2] == ']')
            host[n - 2] = '\0';
        if (uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss) != 0)
            return err_set(err, errlen, TERN_EINVAL, "listen \"%s\": bad IPv6 address", listen);
        return 0;
    }
    if (uv_ip4_addr(host[0] ? host : "0.0.0.0", (int)port, (struct sockaddr_in *)ss) != 0)
        return err_set(err, errlen, TERN_EINVAL,
                       "listen \"%s\": expected an IP address (names are not resolved)", listen);
    return 0;
}

static int setup_tls(http_api_t *api, char *err, size_t errlen)
{
    api->ssl_ctx = SSL_CTX_new(TLS_server_method());
    SSL_CTX_set_min_proto_version(api->ssl_ctx, TLS1_2_VERSION);
    if (SSL_CTX_use_certificate_chain_file(api->ssl_ctx, api->opts.tls_cert) != 1 ||
        SSL_CTX_use_PrivateKey_file(api->ssl_ctx, api->opts.tls_key, SSL_FILETYPE_PEM) != 1) {
        char why[256];
        ERR_error_string_n(ERR_get_error(), why, sizeof why);
        SSL_CTX_free(api->ssl_ctx);
        api->ssl_ctx = NULL;
        return err_set(err, errlen, TERN_EINVAL, "TLS certificate %s / key %s: %s",
                       api->opts.tls_cert, api->opts.tls_key, why);
    }
    h2o_ssl_register_alpn_protocols(api->ssl_ctx, h2o_alpn_protocols);
    api->accept_ctx.ssl_ctx = api->ssl_ctx;
    return 0;
}

int http_api_start(const http_api_opts_t *opts, http_api_t **out, char *err, size_t errlen)
{
    http_api_t *api = xcalloc(1, sizeof *api);
    api->opts = *opts;
    if (api->opts.max_body_bytes == 0)
        api->opts.max_body_bytes = DEFAULT_MAX_BODY;
    http_guard_init(&api->open_guard);
    api->guard = opts->guard != NULL ? opts->guard : &api->open_guard;

    struct sockaddr_storage ss;
    int rc = parse_listen(opts->listen, &ss, err, errlen);
    if (rc != 0) {
        free(api);
        return rc;
    }

    h2o_config_init(&api->config);
    api->config.server_name = h2o_iovec_init(H2O_STRLIT("ternd"));
    api->config.max_request_entity_size = api->opts.max_body_bytes;
    api->conns = http_conns_new(opts->loop, &api->accept_ctx, &opts->conns);
    /* http_conns times headers, bodies and idle connections itself; h2o's own timers
     * only back it up, set so they never fire first (see http_conns.h). */
    const http_conns_opts_t *co = http_conns_opts(api->conns);
    api->config.http1.req_timeout =
        (uint64_t)co->idle_timeout_ms + co->header_timeout_ms + co->body_timeout_ms;
    api->config.http2.idle_timeout = (uint64_t)co->idle_timeout_ms + co->header_timeout_ms;
    api->config.handshake_timeout = co->header_timeout_ms;
    h2o_hostconf_t *host =
        h2o_config_register_host(&api->config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    h2o_pathconf_t *pc = h2o_config_register_path(host, "/", 0);
    api_handler_t *h = (api_handler_t *)h2o_create_handler(pc, sizeof *h);
    h->super.on_req = on_req;
    h->api = api;
    h2o_context_init(&api->ctx, opts->loop, &api->config);
    api->accept_ctx.ctx = &api->ctx;
    api->accept_ctx.hosts = api->config.hosts;

    if (opts->tls_cert != NULL || opts->tls_key != NULL) {
        if (opts->tls_cert == NULL || opts->tls_key == NULL) {
            rc = err_set(err, errlen, TERN_EINVAL, "TLS needs both a certificate and a key");
            goto Error;
        }
        if ((rc = setup_tls(api, err, errlen)) != 0)
            goto Error;
    }

    uv_tcp_init(opts->loop, &api->listener);
    api->listener.data = api;
    api->listening = true;
    if ((rc = uv_tcp_bind(&api->listener, (struct sockaddr *)&ss, 0)) != 0 ||
        (rc = uv_listen((uv_stream_t *)&api->listener, 511, on_connection)) != 0) {
        err_set(err, errlen, TERN_EIO, "listen %s: %s", opts->listen, uv_strerror(rc));
        rc = TERN_EIO;
        goto Error;
    }
    struct sockaddr_storage bound;
    int len = sizeof bound;
    uv_tcp_getsockname(&api->listener, (struct sockaddr *)&bound, &len);
    api->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                  : ((struct sockaddr_in *)&bound)->sin_port);
    if (opts->addr != NULL) {
        api->hub = event_hub_new(opts->loop, opts->addr);
        api->views = view_runner_new(opts->loop, opts->addr, opts->view_timeout_ms);
    }
    *out = api;
    return 0;

Error:
    /* Called before the loop runs (see http_api.h), so h2o may run it here to finish
     * closing what it opened. */
    if (api->listening)
        uv_close((uv_handle_t *)&api->listener, NULL);
    http_api_dispose(api); /* no event hub yet: it is made after the last failure */
    *out = NULL;
    return rc;
}

void http_api_shutdown(http_api_t *api)
{
    if (api == NULL || api->shutting_down)
        return;
    api->shutting_down = true;
    if (api->listening) {
        uv_close((uv_handle_t *)&api->listener, NULL);
        api->listening = false;
    }
    /* Event streams end with their final chunk first, so the connections they hold close
     * after a complete response. */
    event_hub_free(api->hub);
    api->hub = NULL;
    /* Views still waiting for Redis are answered now, while their requests exist. */
    view_runner_free(api->views);
    api->views = NULL;
    h2o_context_request_shutdown(&api->ctx);
    http_conns_close_idle(api->conns);
}

void http_api_dispose(http_api_t *api)
{
    if (api == NULL)
        return;
    event_hub_free(api->hub);
    view_runner_free(api->views);
    h2o_context_dispose(&api->ctx);
    h2o_config_dispose(&api->config);
    if (api->ssl_ctx != NULL)
        SSL_CTX_free(api->ssl_ctx);
    http_conns_free(api->conns);
    http_guard_dispose(&api->open_guard);
    free(api);
}
