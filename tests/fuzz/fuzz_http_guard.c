/*
 * fuzz_http_guard.c -- libFuzzer target for the API's admission decisions
 * (http_guard.h): Host, Origin, Content-Type, bearer tokens, token files and route
 * scopes.
 *
 * The input is split at its first four newlines into Host, Origin, Content-Type and
 * Authorization values; the rest is a token file's text. The file is parsed into a
 * guard that also allows one host and one origin, and every check runs on the
 * values. Invariants: a refusal has a status of its kind, a code and a message of
 * printable ASCII; a token file either adds tokens of a known scope or none; a bearer
 * header only ever yields a scope the file gave.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "http/http_guard.h"

/* The next field: up to the next newline, or NULL (absent) when the input ran out. */
static const char *field(const char **p, const char *end, size_t *len)
{
    if (*p >= end) {
        *len = 0;
        return NULL;
    }
    const char *s = *p;
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    *len = nl != NULL ? (size_t)(nl - s) : (size_t)(end - s);
    *p = nl != NULL ? nl + 1 : end;
    return s;
}

static void check_verdict(const http_guard_verdict_t *v, int a, int b)
{
    if ((v->status != a && v->status != b) || v->code == NULL || v->code[0] == '\0')
        abort();
    size_t n = strnlen(v->message, sizeof v->message);
    if (n == 0 || n == sizeof v->message)
        abort();
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v->message[i] < 0x20 || (unsigned char)v->message[i] >= 0x7f)
            abort(); /* header bytes are never echoed raw */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *end = p + size;
    size_t hl, ol, cl, al;
    const char *host = field(&p, end, &hl);
    const char *origin = field(&p, end, &ol);
    const char *ct = field(&p, end, &cl);
    const char *authz = field(&p, end, &al);

    http_guard_t g;
    http_guard_init(&g);
    char err[512];
    if (http_guard_allow_host(&g, "tern.example", err, sizeof err) != 0 ||
        http_guard_allow_origin(&g, "http://ui.example:3000", err, sizeof err) != 0)
        abort();
    size_t file_len = (size_t)(end - p);
    int rc = http_guard_tokens_parse(&g, p, file_len, err, sizeof err);
    if (rc != 0 && g.n_tokens != 0)
        abort(); /* a refused file keeps nothing */
    if (rc == 0 && g.n_tokens == 0)
        abort();
    for (size_t i = 0; i < g.n_tokens; i++)
        if ((g.tokens[i].scope != HTTP_SCOPE_SUBMIT && g.tokens[i].scope != HTTP_SCOPE_OPERATOR) ||
            g.tokens[i].len < HTTP_GUARD_TOKEN_MIN)
            abort();

    http_guard_verdict_t v;
    static const int versions[] = {0x100, 0x101, 0x200};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(versions); i++) {
        memset(&v, 0, sizeof v);
        if (!http_guard_host(&g, host, hl, versions[i], &v))
            check_verdict(&v, 400, 421);
    }
    for (int tls = 0; tls < 2; tls++) {
        memset(&v, 0, sizeof v);
        if (!http_guard_origin(&g, origin, ol, host, hl, tls != 0, &v))
            check_verdict(&v, 403, 403);
    }
    memset(&v, 0, sizeof v);
    if (!http_guard_content_type(ct, cl, &v))
        check_verdict(&v, 415, 415);

    http_scope_t scope = http_guard_bearer(&g, authz, al);
    if (scope != HTTP_SCOPE_NONE) {
        bool found = false;
        for (size_t i = 0; i < g.n_tokens; i++)
            found = found || g.tokens[i].scope == scope;
        if (!found)
            abort();
    }
    /* Route scopes: any method and pattern taken from the Authorization field. */
    char method[16], pattern[64];
    snprintf(method, sizeof method, "%.*s", (int)(hl < 15 ? hl : 15), host != NULL ? host : "");
    snprintf(pattern, sizeof pattern, "%.*s", (int)(al < 63 ? al : 63), authz != NULL ? authz : "");
    http_scope_t need = http_guard_route_scope(method, pattern);
    if (need != HTTP_SCOPE_NONE && need != HTTP_SCOPE_SUBMIT && need != HTTP_SCOPE_OPERATOR)
        abort();
    if (strcmp(http_scope_name(need), "none") == 0 && need != HTTP_SCOPE_NONE)
        abort();

    /* The origin and host values as allow-list entries. */
    char name[300];
    snprintf(name, sizeof name, "%.*s", (int)(hl < 299 ? hl : 299), host != NULL ? host : "");
    if (http_guard_allow_host(&g, name, err, sizeof err) == 0 &&
        !http_guard_host(&g, name, strlen(name), 0x101, &v))
        abort(); /* an allowed name is accepted */
    snprintf(name, sizeof name, "%.*s", (int)(ol < 299 ? ol : 299), origin != NULL ? origin : "");
    (void)http_guard_allow_origin(&g, name, err, sizeof err); /* refusal is a valid outcome */
    http_guard_dispose(&g);
    return 0;
}
