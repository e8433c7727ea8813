/*
 * http_guard.h -- who may use the HTTP API: the decisions taken on every request
 * before a route runs, as pure functions of the request's headers and the settings
 * (no I/O, no h2o), so unit tests and a fuzz target drive them directly.
 *
 *   Host     A browser tricked by DNS rebinding sends the attacker's name as Host, so
 *            only names that cannot be rebound are accepted without configuration:
 *            IP literals (v4, [v6], any port) and "localhost". Other names must be
 *            listed (allowed_hosts). HTTP/1.1 without Host is refused.
 *   Origin   Browsers send Origin on cross-origin writes; tools (curl, node, wf-client)
 *            send none. An Origin is accepted only when it is ternd's own (same scheme,
 *            host and port as the request) or listed (allowed_origins); "null" never.
 *            An IP literal is not enough here: a page served from any public address
 *            would otherwise pass.
 *   Body     A request with a body needs Content-Type application/json (parameters
 *            such as charset allowed): a browser cannot send that cross-origin without
 *            a preflight, which ternd never grants. A request without a body needs no
 *            Content-Type.
 *   Token    "Authorization: Bearer <token>" names one of the configured tokens, each
 *            with a scope (below). Compared in constant time over every token.
 *   Scope    submit: jobs (create, list, read, cancel, resume, retry, info, events)
 *            and reading workflows and tasks (a submitter looks its workflow up by
 *            name, as wf-client does). operator: everything. A route not listed as a
 *            submit route is an operator route, so a new route is closed by default.
 *
 * Ownership: an http_guard_t owns copies of every token and name it is given and
 * wipes the tokens when disposed. Input strings are borrowed and need not be
 * NUL-terminated (pointer and length).
 */
#ifndef TERN_HTTP_GUARD_H
#define TERN_HTTP_GUARD_H

#include <stdbool.h>
#include <stddef.h>

typedef enum http_scope {
    HTTP_SCOPE_NONE = 0,     /* no token, or an unknown one; for routes: public (/ping) */
    HTTP_SCOPE_SUBMIT = 1,   /* jobs, and reading workflows and tasks */
    HTTP_SCOPE_OPERATOR = 2, /* everything */
} http_scope_t;

#define HTTP_GUARD_TOKEN_MIN 16   /* characters */
#define HTTP_GUARD_TOKEN_MAX 4096 /* characters */

typedef struct http_guard_token {
    char *value; /* malloc'd; wiped on dispose */
    size_t len;
    http_scope_t scope;
} http_guard_token_t;

typedef struct http_guard {
    http_guard_token_t *tokens; /* none: every route is open (no auth configured) */
    size_t n_tokens;
    char **hosts; /* lowercase names accepted as Host besides IP literals and localhost */
    size_t n_hosts;
    char **origins; /* lowercase "scheme://host[:port]" accepted as Origin */
    size_t n_origins;
} http_guard_t;

/* A refusal: the HTTP status, a restify-style code and a message for the client. */
typedef struct http_guard_verdict {
    int status;
    const char *code;
    char message[512];
} http_guard_verdict_t;

void http_guard_init(http_guard_t *g);
/* Frees everything, overwriting the tokens first. */
void http_guard_dispose(http_guard_t *g);

/* "submit", "operator" or "none". */
const char *http_scope_name(http_scope_t scope);

/* Adds one token of `scope`. Returns 0, or TERN_EINVAL with "a token needs at least 16
 * characters" / "a token may hold only visible ASCII characters (no spaces)" / "the
 * same token is given twice" in err. */
int http_guard_add_token(http_guard_t *g, const char *token, size_t len, http_scope_t scope,
                         char *err, size_t errlen);

/* Reads a token file's text: one token per line, "submit TOKEN", "operator TOKEN" or a
 * bare TOKEN (operator, as files of a single token always were); blank lines and
 * lines starting with '#' are skipped, and so are CRs at line ends and a UTF-8 byte
 * order mark at the start. Returns 0, or TERN_EINVAL with "line 3: unknown
 * scope \"admin\" (expected submit or operator)" or "no token in the file" in err;
 * on failure no token of the text is kept. */
int http_guard_tokens_parse(http_guard_t *g, const char *text, size_t len, char *err,
                            size_t errlen);

/* Adds a Host name (any case; no port, no wildcard). Returns 0, or TERN_EINVAL with
 * "allowed host \"a b\": expected a DNS name" in err. */
int http_guard_allow_host(http_guard_t *g, const char *name, char *err, size_t errlen);
/* Adds an origin "http://host[:port]" or "https://host[:port]". Returns 0 or
 * TERN_EINVAL with the reason in err. */
int http_guard_allow_origin(http_guard_t *g, const char *origin, char *err, size_t errlen);

/* Checks the Host header (HTTP/2: :authority). `host` is NULL when absent; `version`
 * is h2o's (0x100 HTTP/1.0, 0x101 HTTP/1.1, 0x200 HTTP/2). True when accepted; else
 * fills *v (400 when absent on HTTP/1.1 or malformed, 421 MisdirectedRequest for a
 * name not allowed). */
bool http_guard_host(const http_guard_t *g, const char *host, size_t len, int version,
                     http_guard_verdict_t *v);

/* Checks the Origin header against the request's Host (already accepted) and whether
 * the connection is TLS. `origin` NULL: absent, accepted. Else fills *v (403
 * Forbidden) unless accepted. */
bool http_guard_origin(const http_guard_t *g, const char *origin, size_t len, const char *host,
                       size_t host_len, bool tls, http_guard_verdict_t *v);

/* Checks the Content-Type of a request that carries a body (`ct` NULL: absent). True
 * for application/json with any parameters; else fills *v (415 UnsupportedMediaType,
 * naming the type received). */
bool http_guard_content_type(const char *ct, size_t len, http_guard_verdict_t *v);

/* The scope of the token in an Authorization header value (`authz` NULL: absent):
 * HTTP_SCOPE_NONE unless it is "Bearer <one of the tokens>". */
http_scope_t http_guard_bearer(const http_guard_t *g, const char *authz, size_t len);

/* The scope a route needs, by its method and pattern ("POST", "/jobs/:uuid/cancel"):
 * NONE for GET /ping, SUBMIT for the submit routes above, OPERATOR for any other. */
http_scope_t http_guard_route_scope(const char *method, const char *pattern);

/* The scope a plugin's read view needs (GET on its path): submit. */
http_scope_t http_guard_view_scope(void);

#endif /* TERN_HTTP_GUARD_H */
