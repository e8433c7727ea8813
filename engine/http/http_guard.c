/*
 * http_guard.c -- the API's admission decisions (Host, Origin, Content-Type, bearer
 * token, scopes); see http_guard.h for the rules and why each holds.
 */
#include "http/http_guard.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/error.h"

#define NAME_MAX_LEN 253 /* a DNS name */
#define SHOWN_MAX    80  /* characters of a header value quoted in a message */

/* ---- small helpers ------------------------------------------------------------ */

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static bool ieq(const char *a, size_t alen, const char *b, size_t blen)
{
    if (alen != blen)
        return false;
    for (size_t i = 0; i < alen; i++)
        if (lower(a[i]) != lower(b[i]))
            return false;
    return true;
}

/* A header value quoted for a message: control and non-ASCII bytes as '?', cut. */
static void shown(const char *s, size_t len, char *out, size_t cap)
{
    size_t n = len < SHOWN_MAX ? len : SHOWN_MAX;
    if (cap < n + 6)
        n = cap > 6 ? cap - 6 : 0;
    size_t k = 0;
    out[k++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        out[k++] = c >= 0x20 && c < 0x7f && c != '"' && c != '\\' ? (char)c : '?';
    }
    if (n < len) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k++] = '"';
    out[k] = '\0';
}

static void refuse(http_guard_verdict_t *v, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void refuse(http_guard_verdict_t *v, int status, const char *code, const char *fmt, ...)
{
    v->status = status;
    v->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->message, sizeof v->message, fmt, ap);
    va_end(ap);
}

static bool is_dns_name(const char *s, size_t n)
{
    if (n == 0 || n > NAME_MAX_LEN || s[0] == '.' || s[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = lower(s[i]);
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'))
            return false;
    }
    return true;
}

/* ---- host[:port] -------------------------------------------------------------- */

typedef enum host_kind { HOST_BAD, HOST_IP, HOST_NAME } host_kind_t;

typedef struct hostport {
    host_kind_t kind;
    const char *host; /* without brackets for IPv6 */
    size_t host_len;
    long port; /* -1 when absent */
} hostport_t;

/* Splits "name", "1.2.3.4:80", "[::1]:8080" and checks each part's form. */
static hostport_t parse_hostport(const char *s, size_t n)
{
    hostport_t hp = {.kind = HOST_BAD, .port = -1};
    size_t host_end; /* index just after the host part, brackets included */
    if (n > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (close == NULL)
            return hp;
        size_t inner = (size_t)(close - s) - 1;
        char buf[INET6_ADDRSTRLEN + 1];
        struct in6_addr a6;
        if (inner == 0 || inner >= sizeof buf)
            return hp;
        memcpy(buf, s + 1, inner);
        buf[inner] = '\0';
        if (inet_pton(AF_INET6, buf, &a6) != 1)
            return hp;
        hp.kind = HOST_IP;
        hp.host = s + 1;
        hp.host_len = inner;
        host_end = inner + 2;
    } else {
        const char *colon = memchr(s, ':', n);
        size_t hl = colon != NULL ? (size_t)(colon - s) : n;
        char buf[INET_ADDRSTRLEN + 1];
        struct in_addr a4;
        if (hl > 0 && hl < sizeof buf) {
            memcpy(buf, s, hl);
            buf[hl] = '\0';
            if (inet_pton(AF_INET, buf, &a4) == 1)
                hp.kind = HOST_IP;
        }
        if (hp.kind == HOST_BAD) {
            if (!is_dns_name(s, hl))
                return hp;
            hp.kind = HOST_NAME;
        }
        hp.host = s;
        hp.host_len = hl;
        host_end = hl;
    }
    if (host_end < n) {
        if (s[host_end] != ':')
            goto Bad;
        size_t digits = n - host_end - 1;
        if (digits > 5)
            goto Bad;
        long port = 0;
        for (size_t i = host_end + 1; i < n; i++) {
            if (s[i] < '0' || s[i] > '9')
                goto Bad;
            port = port * 10 + (s[i] - '0');
        }
        if (port > 65535)
            goto Bad;
        hp.port = digits > 0 ? port : -1;
    }
    return hp;
Bad:
    hp.kind = HOST_BAD;
    return hp;
}

static bool host_listed(const http_guard_t *g, const char *host, size_t len)
{
    for (size_t i = 0; i < g->n_hosts; i++)
        if (ieq(g->hosts[i], strlen(g->hosts[i]), host, len))
            return true;
    return false;
}

/* ---- set-up ------------------------------------------------------------------- */

void http_guard_init(http_guard_t *g)
{
    memset(g, 0, sizeof *g);
}

void http_guard_dispose(http_guard_t *g)
{
    if (g == NULL)
        return;
    for (size_t i = 0; i < g->n_tokens; i++) {
        /* A volatile pointer, so the wipe is not optimized away before free. */
        volatile char *p = g->tokens[i].value;
        for (size_t k = 0; k < g->tokens[i].len; k++)
            p[k] = 0;
        free(g->tokens[i].value);
    }
    free(g->tokens);
    for (size_t i = 0; i < g->n_hosts; i++)
        free(g->hosts[i]);
    free(g->hosts);
    for (size_t i = 0; i < g->n_origins; i++)
        free(g->origins[i]);
    free(g->origins);
    memset(g, 0, sizeof *g);
}

const char *http_scope_name(http_scope_t scope)
{
    switch (scope) {
    case HTTP_SCOPE_SUBMIT:
        return "submit";
    case HTTP_SCOPE_OPERATOR:
        return "operator";
    default:
        return "none";
    }
}

static bool token_equal(const char *given, size_t glen, const char *expected, size_t elen);

int http_guard_add_token(http_guard_t *g, const char *token, size_t len, http_scope_t scope,
                         char *err, size_t errlen)
{
    if (scope != HTTP_SCOPE_SUBMIT && scope != HTTP_SCOPE_OPERATOR)
        return err_set(err, errlen, TERN_EINVAL, "a token needs the scope submit or operator");
    if (len < HTTP_GUARD_TOKEN_MIN)
        return err_set(err, errlen, TERN_EINVAL, "a token needs at least %d characters",
                       HTTP_GUARD_TOKEN_MIN);
    if (len > HTTP_GUARD_TOKEN_MAX)
        return err_set(err, errlen, TERN_EINVAL, "a token has at most %d characters",
                       HTTP_GUARD_TOKEN_MAX);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)token[i] <= 0x20 || (unsigned char)token[i] >= 0x7f)
            return err_set(err, errlen, TERN_EINVAL,
                           "a token may hold only visible ASCII characters (no spaces)");
    for (size_t i = 0; i < g->n_tokens; i++)
        if (token_equal(token, len, g->tokens[i].value, g->tokens[i].len))
            return err_set(err, errlen, TERN_EINVAL, "the same token is given twice");
    g->tokens = xrealloc(g->tokens, (g->n_tokens + 1) * sizeof *g->tokens);
    g->tokens[g->n_tokens++] =
        (http_guard_token_t){.value = xstrndup(token, len), .len = len, .scope = scope};
    return 0;
}

/* Removes the tokens added after the first `keep`. */
static void drop_tokens_from(http_guard_t *g, size_t keep)
{
    while (g->n_tokens > keep) {
        http_guard_token_t *t = &g->tokens[--g->n_tokens];
        volatile char *p = t->value;
        for (size_t k = 0; k < t->len; k++)
            p[k] = 0;
        free(t->value);
    }
}

int http_guard_tokens_parse(http_guard_t *g, const char *text, size_t len, char *err, size_t errlen)
{
    size_t keep = g->n_tokens, added = 0;
    size_t pos = 0;
    /* Some editors start a UTF-8 file with a byte order mark; it is not part of the
     * first line's scope or token. */
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
        pos = 3;
    int rc = 0;
    for (unsigned line = 1; pos < len; line++) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl != NULL ? (size_t)(nl - text) : len;
        const char *s = text + pos;
        size_t n = end - pos;
        pos = end + 1;
        while (n > 0 && (s[0] == ' ' || s[0] == '\t')) {
            s++;
            n--;
        }
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
            n--;
        if (n == 0 || s[0] == '#')
            continue;
        /* At most two words: [SCOPE] TOKEN. */
        const char *word[3];
        size_t wlen[3], nw = 0;
        for (size_t i = 0; i < n && nw < 3;) {
            while (i < n && (s[i] == ' ' || s[i] == '\t'))
                i++;
            if (i == n)
                break;
            size_t st = i;
            while (i < n && s[i] != ' ' && s[i] != '\t')
                i++;
            word[nw] = s + st;
            wlen[nw++] = i - st;
        }
        const char *tok = word[nw - 1];
        size_t tlen = wlen[nw - 1];
        http_scope_t scope = HTTP_SCOPE_OPERATOR;
        if (nw == 3) {
            rc = err_set(err, errlen, TERN_EINVAL,
                         "line %u: expected \"submit TOKEN\", \"operator TOKEN\" or a bare "
                         "TOKEN",
                         line);
            goto Exit;
        }
        if (nw == 2) {
            if (wlen[0] == 6 && memcmp(word[0], "submit", 6) == 0) {
                scope = HTTP_SCOPE_SUBMIT;
            } else if (wlen[0] == 8 && memcmp(word[0], "operator", 8) == 0) {
                scope = HTTP_SCOPE_OPERATOR;
            } else {
                char q[SHOWN_MAX + 8];
                shown(word[0], wlen[0], q, sizeof q);
                rc = err_set(err, errlen, TERN_EINVAL,
                             "line %u: unknown scope %s (expected submit or operator)", line, q);
                goto Exit;
            }
        } else if ((tlen == 6 && memcmp(tok, "submit", 6) == 0) ||
                   (tlen == 8 && memcmp(tok, "operator", 8) == 0)) {
            rc = err_set(err, errlen, TERN_EINVAL, "line %u: scope %.*s without a token", line,
                         (int)tlen, tok);
            goto Exit;
        }
        char why[256];
        if (http_guard_add_token(g, tok, tlen, scope, why, sizeof why) != 0) {
            rc = err_set(err, errlen, TERN_EINVAL, "line %u: %s", line, why);
            goto Exit;
        }
        added++;
    }
    if (added == 0)
        rc = err_set(err, errlen, TERN_EINVAL,
                     "no token in the file (lines: \"submit TOKEN\", \"operator TOKEN\" or a "
                     "bare TOKEN)");
Exit:
    if (rc != 0)
        drop_tokens_from(g, keep);
    return rc;
}

int http_guard_allow_host(http_guard_t *g, const char *name, char *err, size_t errlen)
{
    size_t n = strlen(name);
    if (!is_dns_name(name, n)) {
        char q[SHOWN_MAX + 8];
        shown(name, n, q, sizeof q);
        return err_set(err, errlen, TERN_EINVAL,
                       "allowed host %s: expected a DNS name (letters, digits, '-', '.'; no "
                       "port)",
                       q);
    }
    char *copy = xstrdup(name);
    for (char *p = copy; *p; p++)
        *p = lower(*p);
    g->hosts = xrealloc(g->hosts, (g->n_hosts + 1) * sizeof *g->hosts);
    g->hosts[g->n_hosts++] = copy;
    return 0;
}

/* Splits "scheme://hostport" (nothing after). Returns the scheme's default port (80,
 * 443) or -1 when the text is not an origin. */
static long split_origin(const char *s, size_t n, const char **hp, size_t *hp_len)
{
    long def;
    size_t skip;
    if (n > 7 && ieq(s, 7, "http://", 7)) {
        def = 80;
        skip = 7;
    } else if (n > 8 && ieq(s, 8, "https://", 8)) {
        def = 443;
        skip = 8;
    } else {
        return -1;
    }
    *hp = s + skip;
    *hp_len = n - skip;
    return def;
}

int http_guard_allow_origin(http_guard_t *g, const char *origin, char *err, size_t errlen)
{
    size_t n = strlen(origin);
    while (n > 0 && origin[n - 1] == '/')
        n--;
    const char *hp;
    size_t hpl;
    char q[SHOWN_MAX + 8];
    shown(origin, strlen(origin), q, sizeof q);
    if (split_origin(origin, n, &hp, &hpl) < 0 || parse_hostport(hp, hpl).kind == HOST_BAD)
        return err_set(err, errlen, TERN_EINVAL,
                       "allowed origin %s: expected http://HOST[:PORT] or https://HOST[:PORT]", q);
    char *copy = xstrndup(origin, n);
    for (char *p = copy; *p; p++)
        *p = lower(*p);
    g->origins = xrealloc(g->origins, (g->n_origins + 1) * sizeof *g->origins);
    g->origins[g->n_origins++] = copy;
    return 0;
}

/* ---- the checks --------------------------------------------------------------- */

bool http_guard_host(const http_guard_t *g, const char *host, size_t len, int version,
                     http_guard_verdict_t *v)
{
    if (host == NULL) {
        if (version == 0x100)
            return true; /* HTTP/1.0 has no Host; no browser sends such a request */
        refuse(v, 400, "BadRequest", "the request has no Host header (HTTP/1.1 requires one)");
        return false;
    }
    char q[SHOWN_MAX + 8];
    hostport_t hp = parse_hostport(host, len);
    if (hp.kind == HOST_BAD) {
        shown(host, len, q, sizeof q);
        refuse(v, 400, "BadRequest", "Host %s is not HOST[:PORT]", q);
        return false;
    }
    if (hp.kind == HOST_IP || ieq(hp.host, hp.host_len, "localhost", 9) ||
        host_listed(g, hp.host, hp.host_len))
        return true;
    shown(hp.host, hp.host_len, q, sizeof q);
    refuse(v, 421, "MisdirectedRequest",
           "Host %s is not served here: ternd answers IP addresses and localhost; to allow this "
           "name, add it to --allowed-hosts (config \"allowed_hosts\")",
           q);
    return false;
}

bool http_guard_origin(const http_guard_t *g, const char *origin, size_t len, const char *host,
                       size_t host_len, bool tls, http_guard_verdict_t *v)
{
    if (origin == NULL)
        return true;
    size_t n = len;
    while (n > 0 && (origin[n - 1] == '/' || origin[n - 1] == ' '))
        n--;
    for (size_t i = 0; i < g->n_origins; i++)
        if (ieq(g->origins[i], strlen(g->origins[i]), origin, n))
            return true;
    const char *ohp;
    size_t ohpl;
    long odef = split_origin(origin, n, &ohp, &ohpl);
    if (odef >= 0 && host != NULL && odef == (tls ? 443 : 80)) {
        hostport_t o = parse_hostport(ohp, ohpl), h = parse_hostport(host, host_len);
        long oport = o.port >= 0 ? o.port : odef, hport = h.port >= 0 ? h.port : (tls ? 443 : 80);
        if (o.kind != HOST_BAD && h.kind != HOST_BAD && oport == hport &&
            ieq(o.host, o.host_len, h.host, h.host_len))
            return true; /* ternd's own origin */
    }
    char q[SHOWN_MAX + 8];
    shown(origin, len, q, sizeof q);
    refuse(v, 403, "Forbidden",
           "Origin %s may not use this API: a request from a web page is refused unless the "
           "page's origin is listed in --allowed-origins (config \"allowed_origins\")",
           q);
    return false;
}

bool http_guard_content_type(const char *ct, size_t len, http_guard_verdict_t *v)
{
    if (ct != NULL) {
        size_t i = 0;
        while (i < len && (ct[i] == ' ' || ct[i] == '\t'))
            i++;
        static const char json[] = "application/json";
        size_t jl = sizeof json - 1;
        if (len - i >= jl && ieq(ct + i, jl, json, jl)) {
            size_t k = i + jl;
            while (k < len && (ct[k] == ' ' || ct[k] == '\t'))
                k++;
            if (k == len || ct[k] == ';')
                return true;
        }
        char q[SHOWN_MAX + 8];
        shown(ct, len, q, sizeof q);
        refuse(v, 415, "UnsupportedMediaType",
               "the body's Content-Type is %s; this API takes application/json", q);
        return false;
    }
    refuse(v, 415, "UnsupportedMediaType",
           "the body has no Content-Type; this API takes application/json");
    return false;
}

/* Constant-time comparison: the time taken does not tell how much of a guess was
 * right (it depends on the lengths only). */
static bool token_equal(const char *given, size_t glen, const char *expected, size_t elen)
{
    unsigned char diff = (unsigned char)(glen != elen);
    for (size_t i = 0; i < elen; i++)
        diff |= (unsigned char)(expected[i] ^ (i < glen ? given[i] : 0));
    return diff == 0;
}

http_scope_t http_guard_bearer(const http_guard_t *g, const char *authz, size_t len)
{
    if (authz == NULL || len < 7 || !ieq(authz, 6, "bearer", 6) ||
        (authz[6] != ' ' && authz[6] != '\t'))
        return HTTP_SCOPE_NONE;
    size_t i = 7;
    while (i < len && (authz[i] == ' ' || authz[i] == '\t'))
        i++;
    size_t n = len;
    while (n > i && (authz[n - 1] == ' ' || authz[n - 1] == '\t'))
        n--;
    if (n == i)
        return HTTP_SCOPE_NONE;
    /* Every token is compared, so the time does not tell which one matched. */
    http_scope_t found = HTTP_SCOPE_NONE;
    for (size_t t = 0; t < g->n_tokens; t++)
        if (token_equal(authz + i, n - i, g->tokens[t].value, g->tokens[t].len))
            found = g->tokens[t].scope;
    return found;
}

/* The routes a submit token may use; every other route needs operator. */
static const struct {
    const char *method;
    const char *pattern;
} submit_routes[] = {
    {"GET", "/jobs"},
    {"POST", "/jobs"},
    {"GET", "/jobs/:uuid"},
    {"POST", "/jobs/:uuid/cancel"},
    {"POST", "/jobs/:uuid/resume"},
    {"POST", "/jobs/:uuid/retry"},
    {"GET", "/jobs/:uuid/info"},
    {"POST", "/jobs/:uuid/info"},
    {"GET", "/jobs/:uuid/events"},
    {"GET", "/workflows"},
    {"GET", "/workflows/:uuid"},
    {"GET", "/tasks"},
    {"GET", "/views"},
    /* Reading schedules only; making, changing and deleting them (jobs made on
     * their own, for good) is an operator's. */
    {"GET", "/schedules"},
    {"GET", "/schedules/:uuid"},
};

/* Plugins' views are reads, like GET /jobs and GET /tasks: a service that submits jobs
 * reads what their tasks recorded (an instance's state) without an operator token.
 * Streaming views (TERN_VIEW_STREAM) are reads too, as GET /jobs/:uuid/events is: a
 * watch of a migration's progress needs no more than its listing. */
http_scope_t http_guard_view_scope(void)
{
    return HTTP_SCOPE_SUBMIT;
}

http_scope_t http_guard_route_scope(const char *method, const char *pattern)
{
    if (strcmp(method, "GET") == 0 && strcmp(pattern, "/ping") == 0)
        return HTTP_SCOPE_NONE;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(submit_routes); i++)
        if (strcmp(submit_routes[i].method, method) == 0 &&
            strcmp(submit_routes[i].pattern, pattern) == 0)
            return HTTP_SCOPE_SUBMIT;
    return HTTP_SCOPE_OPERATOR;
}
