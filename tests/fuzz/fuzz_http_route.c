/*
 * fuzz_http_route.c -- libFuzzer target for the HTTP API's request path: route
 * matching over the API's patterns, percent-decoding, and the query functions.
 *
 * The input is "METHOD PATH[?QUERY]" (the first space ends the method). The path is
 * cut to 255 bytes as the server cuts it (api_req_t.path). The route tables mirror the
 * patterns of http_routes_*.c and http_events.c; the handlers are never called.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "http/http_route.h"

static void never(api_req_t *r)
{
    (void)r;
    abort();
}

static const api_route_t workflows[] = {
    {"GET", "/workflows", never},          {"POST", "/workflows", never},
    {"GET", "/workflows/:uuid", never},    {"PUT", "/workflows/:uuid", never},
    {"DELETE", "/workflows/:uuid", never}, {NULL, NULL, NULL},
};
static const api_route_t jobs[] = {
    {"GET", "/jobs", never},
    {"POST", "/jobs", never},
    {"GET", "/jobs/:uuid", never},
    {"POST", "/jobs/:uuid/cancel", never},
    {"POST", "/jobs/:uuid/resume", never},
    {"POST", "/jobs/:uuid/retry", never},
    {"GET", "/jobs/:uuid/info", never},
    {"POST", "/jobs/:uuid/info", never},
    {NULL, NULL, NULL},
};
static const api_route_t misc[] = {
    {"GET", "/ping", never},    {"GET", "/tasks", never}, {"GET", "/stats", never},
    {"GET", "/runners", never}, {"GET", "/views", never}, {NULL, NULL, NULL},
};
/* Not an API route: four parameters, the most a pattern may have (API_MAX_PARAMS). */
static const api_route_t widest[] = {{"GET", "/a/:b/:c/:d/:e", never}, {NULL, NULL, NULL}};
static const api_route_t events[] = {{"GET", "/jobs/:uuid/events", never}, {NULL, NULL, NULL}};
static const api_route_t metrics[] = {{"GET", "/metrics", never}, {NULL, NULL, NULL}};
static const api_route_t *const tables[] = {workflows, jobs, misc, events, metrics, widest};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    const char *sp = memchr(in, ' ', size);
    size_t mlen = sp != NULL ? (size_t)(sp - in) : 0;
    const char *target = sp != NULL ? sp + 1 : in;
    size_t tlen = size - (size_t)(target - in);

    api_req_t r = {0};
    snprintf(r.method, sizeof r.method, "%.*s", (int)mlen, in);
    const char *q = memchr(target, '?', tlen);
    size_t plen = q != NULL ? (size_t)(q - target) : tlen;
    snprintf(r.path, sizeof r.path, "%.*s", (int)plen, target);
    if (q != NULL && (size_t)(q - target) + 1 < tlen)
        r.query = xstrndup(q + 1, tlen - plen - 1);

    const char *method = strcmp(r.method, "HEAD") == 0 ? "GET" : r.method;
    bool known = false;
    const api_route_t *rt =
        api_route_find(tables, TERN_ARRAY_SIZE(tables), method, r.path, &r, &known);
    if (rt != NULL && (!known || strcmp(rt->method, method) != 0 || r.n_params > API_MAX_PARAMS))
        abort();
    for (size_t i = 0; i < r.n_params; i++)
        if (r.params[i] == NULL || strlen(r.params[i]) > strlen(r.path))
            abort(); /* A decoded value is never longer than the path. */

    static const char *const names[] = {"limit", "offset", "marker", "execution", "", "a b"};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(names); i++)
        free(api_query_get(&r, names[i]));
    json_decref(api_query_all(&r));
    char err[256];
    uint64_t v;
    (void)api_query_uint(&r, "limit", 10, 1000, &v, err, sizeof err);
    (void)api_query_uint(&r, "offset", 0, UINT64_MAX, &v, err, sizeof err);

    char *dec = api_percent_decode(target, tlen);
    if (strlen(dec) > tlen)
        abort();
    free(dec);

    for (size_t i = 0; i < r.n_params; i++)
        free(r.params[i]);
    free(r.query);
    return 0;
}
