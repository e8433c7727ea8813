/*
 * http_sync.h -- a small synchronous HTTP client for the integration tests (libcurl's
 * easy interface): method, path, body and headers in; status, headers and the parsed
 * JSON body out.
 *
 * One http_sync_t keeps one easy handle and so one connection cache: successive
 * requests reuse a kept-alive connection, and each response says how many new
 * connections it needed (`connects`, 0 when the previous one was reused). Every
 * request is bounded (15 s).
 */
#ifndef TERN_ITEST_HTTP_SYNC_H
#define TERN_ITEST_HTTP_SYNC_H

#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>
#include <jansson.h>

typedef struct http_sync {
    CURL *easy;
    char base[160];    /* "http://127.0.0.1:8080", no trailing slash */
    char auth[600];    /* "Authorization: Bearer ..." sent on every request, or "" */
    char ca_file[400]; /* HTTPS: trust this certificate (the server's own), or "" */
    bool http1_only;   /* HTTP/1.1 even where HTTP/2 could be negotiated */
    bool http2_prior;  /* HTTP/2 over cleartext without upgrade (prior knowledge) */
    bool fresh;        /* a new connection for every request */
} http_sync_t;

typedef struct http_sync_resp {
    long status;   /* 0 when the request failed before a response */
    long connects; /* new connections opened for this request */
    char *headers; /* the response's header block (malloc'd) */
    char *body;    /* the body, NUL-terminated (malloc'd) */
    size_t body_len;
    json_t *json;                /* the body parsed as JSON, or NULL (owned) */
    char error[CURL_ERROR_SIZE]; /* libcurl's message when status is 0 */
} http_sync_resp_t;

/* Opens a client of `base`. */
void http_sync_open(http_sync_t *c, const char *base);
void http_sync_close(http_sync_t *c);

/* Sends `method` `path` with `body` (NULL: none; sent as application/json unless a
 * "Content-Type:" header is among `headers`) and the
 * NULL-terminated extra `headers` ("Name: value"). Fills *out (dispose it); returns
 * the CURLcode (CURLE_OK once a response arrived, whatever its status). */
int http_sync_do(http_sync_t *c, const char *method, const char *path, const char *body,
                 size_t body_len, const char *const *headers, http_sync_resp_t *out);

/* The value of response header `name` (case-insensitive; the last one if repeated),
 * copied into buf, or NULL when absent. */
const char *http_sync_header(const http_sync_resp_t *r, const char *name, char *buf, size_t len);

void http_sync_resp_dispose(http_sync_resp_t *r);

#endif /* TERN_ITEST_HTTP_SYNC_H */
