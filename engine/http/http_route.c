/*
 * http_route.c -- route matching, percent-decoding and query strings of the HTTP API.
 * See http_route.h and http_request.h.
 */
#include "http/http_route.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

/* ---- query strings ------------------------------------------------------------ */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

char *api_percent_decode(const char *s, size_t n)
{
    char *out = xmalloc(n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '+') {
            out[k++] = ' ';
        } else if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            out[k++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            i += 2;
        } else {
            out[k++] = s[i];
        }
    }
    out[k] = '\0';
    return out;
}

char *api_query_get(const api_req_t *r, const char *name)
{
    if (r->query == NULL)
        return NULL;
    size_t nl = strlen(name);
    const char *p = r->query;
    while (*p) {
        const char *amp = strchr(p, '&');
        size_t len = amp != NULL ? (size_t)(amp - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        size_t klen = eq != NULL ? (size_t)(eq - p) : len;
        if (klen == nl && memcmp(p, name, nl) == 0)
            return eq != NULL ? api_percent_decode(eq + 1, len - klen - 1) : xstrdup("");
        p += len;
        if (*p == '&')
            p++;
    }
    return NULL;
}

json_t *api_query_all(const api_req_t *r)
{
    json_t *all = json_object();
    const char *p = r->query != NULL ? r->query : "";
    while (*p) {
        const char *amp = strchr(p, '&');
        size_t len = amp != NULL ? (size_t)(amp - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        size_t klen = eq != NULL ? (size_t)(eq - p) : len;
        if (klen > 0) {
            char *key = api_percent_decode(p, klen);
            char *val = eq != NULL ? api_percent_decode(eq + 1, len - klen - 1) : xstrdup("");
            if (json_object_get(all, key) == NULL)
                json_object_set_new(all, key, json_string(val));
            free(key);
            free(val);
        }
        p += len;
        if (*p == '&')
            p++;
    }
    return all;
}

int api_query_uint(const api_req_t *r, const char *name, uint64_t def, uint64_t max, uint64_t *out,
                   char *err, size_t errlen)
{
    char *v = api_query_get(r, name);
    if (v == NULL) {
        *out = def;
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    int rc = 0;
    if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno != 0 || n > max)
        rc = err_set(err, errlen, TERN_EINVAL,
                     "%s: expected an integer from 0 to %llu, got \"%.64s\"", name,
                     (unsigned long long)max, v);
    else
        *out = n;
    free(v);
    return rc;
}

/* ---- routing ------------------------------------------------------------------ */

bool api_route_match(const char *pattern, const char *path, api_req_t *r)
{
    size_t n = 0;
    char *vals[API_MAX_PARAMS];
    const char *p = pattern, *s = path;
    while (*p && *s) {
        if (*p != '/' || *s != '/')
            goto NoMatch;
        p++;
        s++;
        const char *pe = strchr(p, '/'), *se = strchr(s, '/');
        size_t pl = pe ? (size_t)(pe - p) : strlen(p), sl = se ? (size_t)(se - s) : strlen(s);
        if (*p == ':') {
            if (sl == 0 || n == API_MAX_PARAMS)
                goto NoMatch;
            vals[n++] = api_percent_decode(s, sl);
        } else if (pl != sl || memcmp(p, s, pl) != 0) {
            goto NoMatch;
        }
        p += pl;
        s += sl;
    }
    /* A trailing slash on the request is tolerated ("/jobs/" is "/jobs"). */
    if (*p != '\0' || !(*s == '\0' || (s[0] == '/' && s[1] == '\0')))
        goto NoMatch;
    for (size_t i = 0; i < n; i++)
        r->params[i] = vals[i];
    r->n_params = n;
    return true;
NoMatch:
    for (size_t i = 0; i < n; i++)
        free(vals[i]);
    return false;
}

static void allow_add(char *out, size_t outlen, const char *method)
{
    /* A method already listed (two patterns may match one path) is not repeated. */
    size_t n = strlen(method);
    for (const char *p = out; (p = strstr(p, method)) != NULL; p += n)
        if ((p == out || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0'))
            return;
    size_t len = strlen(out);
    snprintf(out + len, outlen - len, "%s%s", len > 0 ? ", " : "", method);
}

void api_route_allow(const api_route_t *const *tables, size_t n_tables, const char *path, char *out,
                     size_t outlen)
{
    out[0] = '\0';
    for (size_t t = 0; t < n_tables; t++) {
        for (const api_route_t *rt = tables[t]; rt->pattern != NULL; rt++) {
            api_req_t probe = {0};
            if (!api_route_match(rt->pattern, path, &probe))
                continue;
            for (size_t i = 0; i < probe.n_params; i++)
                free(probe.params[i]);
            allow_add(out, outlen, rt->method);
            if (strcmp(rt->method, "GET") == 0)
                allow_add(out, outlen, "HEAD");
        }
    }
}

const api_route_t *api_route_find(const api_route_t *const *tables, size_t n_tables,
                                  const char *method, const char *path, api_req_t *r,
                                  bool *path_known)
{
    *path_known = false;
    for (size_t t = 0; t < n_tables; t++) {
        for (const api_route_t *rt = tables[t]; rt->pattern != NULL; rt++) {
            api_req_t probe = {0};
            if (!api_route_match(rt->pattern, path, &probe))
                continue;
            *path_known = true;
            if (strcmp(rt->method, method) == 0) {
                memcpy(r->params, probe.params, sizeof r->params);
                r->n_params = probe.n_params;
                return rt;
            }
            for (size_t i = 0; i < probe.n_params; i++)
                free(probe.params[i]);
        }
    }
    return NULL;
}
