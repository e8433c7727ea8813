/*
 * client.c -- libcurl easy requests to the API; see client.h.
 *
 * One CURL handle lives as long as the client and is reset between requests, so the
 * connection to ternd is reused (keep-alive). A request owns its response buffer and
 * header values until they move into the caller's client_reply_t.
 */
#include "client.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "base/alloc.h"

#define MAX_BODY         (64u * 1024u * 1024u) /* bytes; a longer answer is refused */
#define MAX_LINE         (4u * 1024u * 1024u)  /* bytes; a longer streamed line is dropped */
#define CONNECT_MS       10000L
#define REQUEST_MS       60000L
#define STREAM_SILENCE_S 120L

#ifndef TERN_VERSION
#define TERN_VERSION "0"
#endif

static volatile sig_atomic_t interrupted;

void client_interrupt(void)
{
    interrupted = 1;
}

bool client_interrupted(void)
{
    return interrupted != 0;
}

struct client {
    CURL *easy;
    char *base;
    char *token;
    char *ca_file;
    char errbuf[CURL_ERROR_SIZE];
};

/* What one request collects. */
typedef struct xfer {
    client_t *c;
    char *buf; /* body (call) or the error body / current partial line (stream) */
    size_t len, cap;
    bool too_big;
    char *next_marker;
    /* Streams only. */
    bool streaming;
    client_line_fn on_line;
    client_tick_fn on_tick;
    void *data;
    bool stopped; /* a callback ended the stream */
    bool line_too_long;
} xfer_t;

client_t *client_new(const char *base_url, const char *token, const char *ca_file)
{
    static bool curl_ready;
    if (!curl_ready) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        curl_ready = true;
    }
    client_t *c = xcalloc(1, sizeof *c);
    c->easy = curl_easy_init();
    if (c->easy == NULL) {
        fprintf(stderr, "tern: out of memory (curl_easy_init)\n");
        abort();
    }
    c->base = xstrdup(base_url);
    c->token = token != NULL && token[0] != '\0' ? xstrdup(token) : NULL;
    c->ca_file = ca_file != NULL && ca_file[0] != '\0' ? xstrdup(ca_file) : NULL;
    return c;
}

void client_free(client_t *c)
{
    if (c == NULL)
        return;
    curl_easy_cleanup(c->easy);
    free(c->base);
    free(c->ca_file);
    if (c->token != NULL) {
        memset(c->token, 0, strlen(c->token));
        free(c->token);
    }
    free(c);
}

char *client_escape(client_t *c, const char *s)
{
    char *e = curl_easy_escape(c->easy, s, 0);
    char *out = xstrdup(e != NULL ? e : "");
    curl_free(e);
    return out;
}

void client_reply_dispose(client_reply_t *r)
{
    json_decref(r->json);
    free(r->body);
    free(r->next_marker);
    memset(r, 0, sizeof *r);
}

/* ---- callbacks ------------------------------------------------------------------- */

static void buf_append(xfer_t *x, const char *p, size_t n)
{
    if (x->len + n + 1 > x->cap) {
        size_t cap = x->cap > 0 ? x->cap : 4096;
        while (cap < x->len + n + 1)
            cap *= 2;
        x->buf = xrealloc(x->buf, cap);
        x->cap = cap;
    }
    memcpy(x->buf + x->len, p, n);
    x->len += n;
    x->buf[x->len] = '\0';
}

/* Splits streamed bytes into lines for on_line. */
static bool feed_lines(xfer_t *x, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '\n') {
            if (x->len < MAX_LINE)
                buf_append(x, p + i, 1);
            else
                x->line_too_long = true;
            continue;
        }
        size_t len = x->len;
        if (len > 0 && x->buf[len - 1] == '\r')
            len--;
        bool go_on = x->line_too_long || x->on_line(x->data, x->buf != NULL ? x->buf : "", len);
        x->len = 0;
        x->line_too_long = false;
        if (!go_on) {
            x->stopped = true;
            return false;
        }
    }
    return true;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *userdata)
{
    xfer_t *x = userdata;
    size_t n = size * nmemb;
    if (x->streaming) {
        long status = 0;
        curl_easy_getinfo(x->c->easy, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 200 && status < 300) {
            if (!feed_lines(x, p, n))
                return 0; /* ends the transfer with CURLE_WRITE_ERROR */
            if (x->on_tick != NULL && !x->on_tick(x->data)) {
                x->stopped = true;
                return 0;
            }
            return n;
        }
        /* An error answer is collected whole, as for a call. */
    }
    if (x->len + n > MAX_BODY) {
        x->too_big = true;
        return 0;
    }
    buf_append(x, p, n);
    return n;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *userdata)
{
    xfer_t *x = userdata;
    size_t n = size * nmemb;
    static const char name[] = "x-tern-next-marker:";
    if (n > sizeof name - 1 && strncasecmp(p, name, sizeof name - 1) == 0) {
        const char *v = p + sizeof name - 1;
        size_t len = n - (sizeof name - 1);
        while (len > 0 && (*v == ' ' || *v == '\t')) {
            v++;
            len--;
        }
        while (len > 0 && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' '))
            len--;
        free(x->next_marker);
        x->next_marker = len > 0 ? xstrndup(v, len) : NULL;
    }
    return n;
}

static int on_xferinfo(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    xfer_t *x = userdata;
    if (interrupted)
        return 1;
    if (x->streaming && x->on_tick != NULL && !x->stopped) {
        long status = 0;
        curl_easy_getinfo(x->c->easy, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 200 && status < 300 && !x->on_tick(x->data)) {
            x->stopped = true;
            return 1;
        }
    }
    return 0;
}

/* ---- requests -------------------------------------------------------------------- */

static struct curl_slist *prepare(client_t *c, xfer_t *x, const char *method, const char *path,
                                  const char *accept, const char *body)
{
    CURL *e = c->easy;
    curl_easy_reset(e);
    char *url = xasprintf("%s%s", c->base, path);
    curl_easy_setopt(e, CURLOPT_URL, url);
    free(url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_MS);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->errbuf);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "tern/" TERN_VERSION);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_xferinfo);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 10L);
    if (c->ca_file != NULL)
        curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_file);
    c->errbuf[0] = '\0';

    struct curl_slist *h = NULL;
    char line[1024];
    snprintf(line, sizeof line, "Accept: %s", accept);
    h = curl_slist_append(h, line);
    if (c->token != NULL) {
        char *auth = xasprintf("Authorization: Bearer %s", c->token);
        h = curl_slist_append(h, auth);
        memset(auth, 0, strlen(auth));
        free(auth);
    }
    if (body != NULL) {
        h = curl_slist_append(h, "Content-Type: application/json");
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    /* No "Expect: 100-continue" round trip for bodies over 1 KiB. */
    h = curl_slist_append(h, "Expect:");
    if (strcmp(method, "GET") == 0)
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    else if (strcmp(method, "POST") != 0 || body == NULL)
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    if (strcmp(method, "POST") == 0 && body == NULL) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, 0L);
        /* No body, so no type (curl would add a form type to an empty POST). */
        h = curl_slist_append(h, "Content-Type:");
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    return h;
}

/* Fills err from an error answer: the API's {"code", "message"} when it is one. */
static void error_from_answer(long status, const char *body, const json_t *json, cli_error_t *err)
{
    const char *code = json_string_value(json_object_get(json, "code"));
    const char *msg = json_string_value(json_object_get(json, "message"));
    if (code != NULL) {
        snprintf(err->code, sizeof err->code, "%s", code);
        snprintf(err->message, sizeof err->message, "%s", msg != NULL ? msg : "");
        return;
    }
    snprintf(err->code, sizeof err->code, "HTTP %ld", status);
    /* The first line of whatever came back (a proxy's page, a plain text error). */
    size_t len = body != NULL ? strcspn(body, "\r\n") : 0;
    if (len > 200)
        len = 200;
    snprintf(err->message, sizeof err->message, "%.*s", (int)len,
             len > 0 ? body : "the API answered with an error and no explanation");
}

/* Maps a transfer's CURLcode onto a status, filling err. */
static cli_status_t transfer_status(client_t *c, CURLcode rc, const xfer_t *x, cli_error_t *err)
{
    if (rc == CURLE_OK)
        return CLI_OK;
    if (interrupted)
        return CLI_INTERRUPTED;
    if (x->streaming && x->stopped)
        return CLI_OK;
    err->code[0] = '\0';
    if (x->too_big)
        snprintf(err->message, sizeof err->message, "%s: the answer is larger than %u MiB; refused",
                 c->base, MAX_BODY >> 20);
    else
        snprintf(err->message, sizeof err->message, "cannot reach the API at %s: %s", c->base,
                 c->errbuf[0] != '\0' ? c->errbuf : curl_easy_strerror(rc));
    return CLI_UNREACHABLE;
}

cli_status_t client_call(client_t *c, const char *method, const char *path, const json_t *body,
                         client_reply_t *reply, cli_error_t *err)
{
    memset(reply, 0, sizeof *reply);
    if (interrupted)
        return CLI_INTERRUPTED;
    char *text = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
    xfer_t x = {.c = c};
    struct curl_slist *h = prepare(c, &x, method, path, "application/json", text);
    curl_easy_setopt(c->easy, CURLOPT_TIMEOUT_MS, REQUEST_MS);
    CURLcode rc = curl_easy_perform(c->easy);
    curl_slist_free_all(h);
    free(text);
    cli_status_t st = transfer_status(c, rc, &x, err);
    reply->next_marker = x.next_marker;
    reply->body = x.buf;
    reply->len = x.len;
    if (st != CLI_OK)
        return st;
    curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &reply->status);
    if (reply->len > 0)
        reply->json = json_loadb(reply->body, reply->len, JSON_DECODE_ANY, NULL);
    if (reply->status < 200 || reply->status >= 300) {
        error_from_answer(reply->status, reply->body, reply->json, err);
        return CLI_API;
    }
    if (reply->len > 0 && reply->json == NULL) {
        err->code[0] = '\0';
        snprintf(err->message, sizeof err->message,
                 "%s%s answered %ld with a body that is not JSON: is this ternd's API?", c->base,
                 path, reply->status);
        return CLI_UNREACHABLE;
    }
    return CLI_OK;
}

cli_status_t client_stream(client_t *c, const char *path, const char *accept,
                           client_line_fn on_line, client_tick_fn on_tick, void *data, long *status,
                           cli_error_t *err)
{
    *status = 0;
    if (interrupted)
        return CLI_INTERRUPTED;
    xfer_t x = {.c = c, .streaming = true, .on_line = on_line, .on_tick = on_tick, .data = data};
    struct curl_slist *h = prepare(c, &x, "GET", path, accept, NULL);
    curl_easy_setopt(c->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c->easy, CURLOPT_LOW_SPEED_TIME, STREAM_SILENCE_S);
    CURLcode rc = curl_easy_perform(c->easy);
    curl_slist_free_all(h);
    curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, status);
    cli_status_t st = transfer_status(c, rc, &x, err);
    if (st == CLI_OK && (*status < 200 || *status >= 300)) {
        json_t *json = x.len > 0 ? json_loadb(x.buf, x.len, 0, NULL) : NULL;
        error_from_answer(*status, x.buf, json, err);
        json_decref(json);
        st = CLI_API;
    } else if (st == CLI_OK && !x.stopped && x.len > 0) {
        (void)on_line(data, x.buf, x.len); /* the last line had no newline */
    }
    free(x.buf);
    free(x.next_marker);
    return st;
}
