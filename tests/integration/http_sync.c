/*
 * http_sync.c -- the integration tests' HTTP client; see http_sync.h.
 */
#include "http_sync.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct buf {
    char *p;
    size_t n;
} buf_t;

static size_t on_data(char *data, size_t size, size_t nmemb, void *user)
{
    buf_t *b = user;
    size_t n = size * nmemb;
    char *p = realloc(b->p, b->n + n + 1);
    if (p == NULL)
        return 0;
    memcpy(p + b->n, data, n);
    b->p = p;
    b->n += n;
    b->p[b->n] = '\0';
    return n;
}

/* Keeps the last header block only (an interim 100 Continue has its own). */
static size_t on_header(char *data, size_t size, size_t nmemb, void *user)
{
    buf_t *b = user;
    if (size * nmemb >= 5 && strncmp(data, "HTTP/", 5) == 0)
        b->n = 0;
    return on_data(data, size, nmemb, user);
}

void http_sync_open(http_sync_t *c, const char *base)
{
    memset(c, 0, sizeof *c);
    c->easy = curl_easy_init();
    snprintf(c->base, sizeof c->base, "%s", base);
}

void http_sync_close(http_sync_t *c)
{
    if (c->easy != NULL)
        curl_easy_cleanup(c->easy);
    c->easy = NULL;
}

int http_sync_do(http_sync_t *c, const char *method, const char *path, const char *body,
                 size_t body_len, const char *const *headers, http_sync_resp_t *out)
{
    memset(out, 0, sizeof *out);
    buf_t hdr = {0}, data = {0};
    char url[1024];
    snprintf(url, sizeof url, "%s%s", c->base, path);
    CURL *e = c->easy;
    /* A reset keeps the handle's connection cache, so keep-alive still applies. */
    curl_easy_reset(e);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 15000L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, out->error);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &data);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &hdr);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
                     c->http2_prior  ? CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE
                     : c->http1_only ? CURL_HTTP_VERSION_1_1
                                     : CURL_HTTP_VERSION_NONE);
    if (c->fresh) {
        curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
    }
    if (c->ca_file[0] != '\0')
        curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_file);
    struct curl_slist *list = NULL;
    bool typed = false;
    if (c->auth[0] != '\0')
        list = curl_slist_append(list, c->auth);
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i++) {
        list = curl_slist_append(list, headers[i]);
        typed = typed || strncasecmp(headers[i], "Content-Type:", 13) == 0;
    }
    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    }
    if (body != NULL) {
        if (!typed)
            list = curl_slist_append(list, "Content-Type: application/json");
        list = curl_slist_append(list, "Expect:");
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, list);
    CURLcode rc = curl_easy_perform(e);
    curl_slist_free_all(list);
    if (rc == CURLE_OK) {
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &out->status);
        curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &out->connects);
    }
    out->headers = hdr.p != NULL ? hdr.p : calloc(1, 1);
    out->body = data.p != NULL ? data.p : calloc(1, 1);
    out->body_len = data.n;
    if (out->body_len > 0)
        out->json = json_loadb(out->body, out->body_len, JSON_DECODE_ANY, NULL);
    return (int)rc;
}

const char *http_sync_header(const http_sync_resp_t *r, const char *name, char *buf, size_t len)
{
    size_t nl = strlen(name);
    const char *found = NULL;
    for (const char *line = r->headers; line != NULL && *line;) {
        const char *end = strstr(line, "\r\n");
        size_t ll = end != NULL ? (size_t)(end - line) : strlen(line);
        if (ll > nl && line[nl] == ':' && strncasecmp(line, name, nl) == 0) {
            const char *v = line + nl + 1;
            while (*v == ' ')
                v++;
            snprintf(buf, len, "%.*s", (int)(line + ll - v), v);
            found = buf;
        }
        line = end != NULL ? end + 2 : NULL;
    }
    return found;
}

void http_sync_resp_dispose(http_sync_resp_t *r)
{
    free(r->headers);
    free(r->body);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}
