/*
 * mini_http_server.c -- a scripted HTTP/1.1 test server on a libuv loop. See
 * mini_http_server.h.
 *
 * Owns the listening socket, one `conn_t` per accepted connection (its uv_tcp_t, a
 * uv_timer_t for delayed answers and its input buffer), the scripts and the recorded
 * requests. The server struct stays allocated until the listener and every connection
 * have been closed (`refs` counts them); the last close callback frees it.
 */
#include "mini_http_server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_HEAD_BYTES (64u * 1024u)

typedef struct response {
    int status;
    char *body;
    size_t body_len;
    char **headers; /* NULL-terminated */
    uint64_t delay_ms;
    bool close_without_answer;
} response_t;

typedef struct script {
    char *path; /* NULL: the default */
    response_t *items;
    size_t n;
    size_t next; /* index of the next answer; the last one repeats */
    struct script *link;
} script_t;

typedef struct conn {
    uv_tcp_t tcp;
    uv_timer_t delay; /* a delayed answer */
    mini_http_server_t *server;
    char *buf;
    size_t len;
    size_t cap;
    int open_handles;
    bool closing;
    bool waiting;       /* a delayed answer is pending; requests after it wait */
    bool sent_continue; /* "100 Continue" already sent for the current request */
    const response_t *pending;
    bool pending_head; /* the pending answer is to a HEAD request */
    struct conn *prev, *next;
} conn_t;

struct mini_http_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    int port;
    int refs; /* listener + open connections */
    bool freeing;
    script_t *scripts;
    mini_http_request_t **reqs;
    size_t nreqs;
    size_t reqs_cap;
    conn_t *conns;
    size_t accepted;
    size_t closed;
    size_t answers;
};

typedef struct write_req {
    uv_write_t req;
    char *data;
} write_req_t;

static void *must(void *p)
{
    if (p == NULL) {
        fprintf(stderr, "mini_http_server: out of memory\n");
        abort();
    }
    return p;
}

static char *dupn(const char *s, size_t n)
{
    char *p = must(malloc(n + 1));
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static char **dup_headers(const char *const *headers)
{
    size_t n = 0;
    while (headers != NULL && headers[n] != NULL)
        n++;
    char **out = must(calloc(n + 1, sizeof *out));
    for (size_t i = 0; i < n; i++)
        out[i] = dupn(headers[i], strlen(headers[i]));
    return out;
}

static void free_strv(char **v)
{
    for (size_t i = 0; v != NULL && v[i] != NULL; i++)
        free(v[i]);
    free(v);
}

/* ---- lifetime ------------------------------------------------------------------- */

static void server_release(mini_http_server_t *s)
{
    if (--s->refs > 0)
        return;
    for (script_t *sc = s->scripts, *next; sc != NULL; sc = next) {
        next = sc->link;
        for (size_t i = 0; i < sc->n; i++) {
            free(sc->items[i].body);
            free_strv(sc->items[i].headers);
        }
        free(sc->items);
        free(sc->path);
        free(sc);
    }
    for (size_t i = 0; i < s->nreqs; i++) {
        mini_http_request_t *r = s->reqs[i];
        free(r->method);
        free(r->path);
        free_strv(r->headers);
        free(r->body);
        free(r);
    }
    free(s->reqs);
    free(s);
}

static void on_conn_handle_closed(uv_handle_t *h)
{
    conn_t *c = h->data;
    if (--c->open_handles > 0)
        return;
    mini_http_server_t *s = c->server;
    free(c->buf);
    free(c);
    server_release(s);
}

static void conn_close(conn_t *c)
{
    if (c->closing)
        return;
    c->closing = true;
    mini_http_server_t *s = c->server;
    s->closed++;
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    uv_close((uv_handle_t *)&c->tcp, on_conn_handle_closed);
    uv_close((uv_handle_t *)&c->delay, on_conn_handle_closed);
}

/* ---- answering ------------------------------------------------------------------ */

static void on_written(uv_write_t *req, int status)
{
    (void)status;
    write_req_t *w = (write_req_t *)req;
    free(w->data);
    free(w);
}

static void conn_write(conn_t *c, char *data, size_t len)
{
    write_req_t *w = must(calloc(1, sizeof *w));
    w->data = data;
    uv_buf_t buf = uv_buf_init(data, (unsigned)len);
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &buf, 1, on_written) != 0) {
        free(data);
        free(w);
        conn_close(c);
    }
}

static const char *reason_of(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 204:
        return "No Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 409:
        return "Conflict";
    case 429:
        return "Too Many Requests";
    case 500:
        return "Internal Server Error";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    default:
        return "Status";
    }
}

static void conn_answer(conn_t *c, const response_t *r, bool head)
{
    size_t hlen = 0;
    for (size_t i = 0; r->headers[i] != NULL; i++)
        hlen += strlen(r->headers[i]) + 2;
    size_t cap = 128 + hlen + r->body_len;
    char *out = must(malloc(cap));
    int n = snprintf(out, cap, "HTTP/1.1 %d %s\r\nContent-Length: %zu\r\n", r->status,
                     reason_of(r->status), r->body_len);
    size_t len = (size_t)n;
    for (size_t i = 0; r->headers[i] != NULL; i++) {
        size_t l = strlen(r->headers[i]);
        memcpy(out + len, r->headers[i], l);
        memcpy(out + len + l, "\r\n", 2);
        len += l + 2;
    }
    memcpy(out + len, "\r\n", 2);
    len += 2;
    if (!head) {
        memcpy(out + len, r->body, r->body_len);
        len += r->body_len;
    }
    c->server->answers++;
    conn_write(c, out, len);
}

static const response_t *script_pick(mini_http_server_t *s, const char *path)
{
    static char *no_headers[] = {NULL};
    static response_t fallback = {200, "ok", 2, no_headers, 0, false};
    size_t plen = strcspn(path, "?");
    script_t *dflt = NULL;
    for (script_t *sc = s->scripts; sc != NULL; sc = sc->link) {
        if (sc->path == NULL) {
            dflt = sc;
        } else if (strlen(sc->path) == plen && strncmp(sc->path, path, plen) == 0) {
            dflt = sc;
            break;
        }
    }
    if (dflt == NULL)
        return &fallback;
    const response_t *r = &dflt->items[dflt->next];
    if (dflt->next + 1 < dflt->n)
        dflt->next++;
    return r;
}

/* ---- parsing ---------------------------------------------------------------------- */

static const char *find_head_end(const char *buf, size_t len)
{
    for (size_t i = 0; i + 3 < len; i++) {
        if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n')
            return buf + i;
    }
    return NULL;
}

static void record_request(mini_http_server_t *s, mini_http_request_t *r)
{
    if (s->nreqs == s->reqs_cap) {
        s->reqs_cap = s->reqs_cap ? s->reqs_cap * 2 : 16;
        s->reqs = must(realloc(s->reqs, s->reqs_cap * sizeof *s->reqs));
    }
    s->reqs[s->nreqs++] = r;
}

/* Parses one complete request from the buffer if there is one. Returns the request
 * (consumed from the buffer), or NULL when more bytes are needed or the input is bad
 * (then *bad is set). */
static mini_http_request_t *parse_request(conn_t *c, bool *bad)
{
    *bad = false;
    const char *end = find_head_end(c->buf, c->len);
    if (end == NULL) {
        *bad = c->len > MAX_HEAD_BYTES;
        return NULL;
    }
    size_t head_len = (size_t)(end - c->buf) + 4;

    /* Request line. */
    const char *line_end = strstr(c->buf, "\r\n");
    const char *sp1 = memchr(c->buf, ' ', (size_t)(line_end - c->buf));
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(line_end - sp1 - 1)) : NULL;
    if (sp1 == NULL || sp2 == NULL) {
        *bad = true;
        return NULL;
    }

    /* Headers: count, then copy. */
    size_t nh = 0;
    for (const char *p = line_end + 2; p < end; p = strstr(p, "\r\n") + 2)
        nh++;
    char **headers = must(calloc(nh + 1, sizeof *headers));
    size_t i = 0;
    size_t content_length = 0;
    bool expect_continue = false;
    for (const char *p = line_end + 2; p < end;) {
        const char *e = strstr(p, "\r\n");
        headers[i] = dupn(p, (size_t)(e - p));
        if (strncasecmp(headers[i], "Content-Length:", 15) == 0)
            content_length = strtoul(headers[i] + 15, NULL, 10);
        if (strncasecmp(headers[i], "Expect:", 7) == 0 && strcasestr(headers[i], "100-continue"))
            expect_continue = true;
        i++;
        p = e + 2;
    }

    if (c->len < head_len + content_length) {
        if (expect_continue && !c->sent_continue) {
            c->sent_continue = true;
            conn_write(c, dupn("HTTP/1.1 100 Continue\r\n\r\n", 25), 25);
        }
        free_strv(headers);
        return NULL;
    }

    mini_http_request_t *r = must(calloc(1, sizeof *r));
    r->method = dupn(c->buf, (size_t)(sp1 - c->buf));
    r->path = dupn(sp1 + 1, (size_t)(sp2 - sp1 - 1));
    r->headers = headers;
    r->nheaders = nh;
    r->body = dupn(c->buf + head_len, content_length);
    r->body_len = content_length;

    size_t used = head_len + content_length;
    memmove(c->buf, c->buf + used, c->len - used);
    c->len -= used;
    c->buf[c->len] = '\0';
    c->sent_continue = false;
    return r;
}

static void on_delay_expired(uv_timer_t *t);

/* Answers every complete request in the buffer, stopping at a delayed answer. */
static void conn_process(conn_t *c)
{
    while (!c->closing && !c->waiting) {
        bool bad;
        mini_http_request_t *req = parse_request(c, &bad);
        if (bad) {
            conn_close(c);
            return;
        }
        if (req == NULL)
            return;
        mini_http_server_t *s = c->server;
        record_request(s, req);
        const response_t *res = script_pick(s, req->path);
        bool head = strcmp(req->method, "HEAD") == 0;
        if (res->close_without_answer) {
            conn_close(c);
            return;
        }
        if (res->delay_ms > 0) {
            c->waiting = true;
            c->pending = res;
            c->pending_head = head;
            uv_timer_start(&c->delay, on_delay_expired, res->delay_ms, 0);
            return;
        }
        conn_answer(c, res, head);
    }
}

static void on_delay_expired(uv_timer_t *t)
{
    conn_t *c = t->data;
    c->waiting = false;
    conn_answer(c, c->pending, c->pending_head);
    c->pending = NULL;
    conn_process(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    conn_t *c = h->data;
    if (c->cap - c->len < suggested + 1) {
        c->cap = c->len + suggested + 1;
        c->buf = must(realloc(c->buf, c->cap));
    }
    *buf = uv_buf_init(c->buf + c->len, (unsigned)(c->cap - c->len - 1));
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    conn_t *c = stream->data;
    if (nread < 0) {
        conn_close(c);
        return;
    }
    c->len += (size_t)nread;
    c->buf[c->len] = '\0';
    conn_process(c);
}

static void on_connection(uv_stream_t *listener, int status)
{
    mini_http_server_t *s = listener->data;
    if (status < 0 || s->freeing)
        return;
    conn_t *c = must(calloc(1, sizeof *c));
    c->server = s;
    uv_tcp_init(s->loop, &c->tcp);
    uv_timer_init(s->loop, &c->delay);
    c->tcp.data = c;
    c->delay.data = c;
    c->open_handles = 2;
    s->refs++;
    s->accepted++;
    c->next = s->conns;
    if (s->conns != NULL)
        s->conns->prev = c;
    s->conns = c;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0)
        conn_close(c);
}

/* ---- public --------------------------------------------------------------------- */

static void on_listener_closed(uv_handle_t *h)
{
    server_release(h->data);
}

/* See mini_http_server.h. */
mini_http_server_t *mini_http_server_new(uv_loop_t *loop)
{
    mini_http_server_t *s = must(calloc(1, sizeof *s));
    s->loop = loop;
    s->refs = 1;
    uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", 0, &addr);
    int rc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&s->listener, 512, on_connection);
    if (rc != 0) {
        fprintf(stderr, "mini_http_server: listen on 127.0.0.1:0: %s\n", uv_strerror(rc));
        s->freeing = true;
        uv_close((uv_handle_t *)&s->listener, on_listener_closed);
        return NULL;
    }
    struct sockaddr_storage ss;
    int len = sizeof ss;
    uv_tcp_getsockname(&s->listener, (struct sockaddr *)&ss, &len);
    s->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return s;
}

/* See mini_http_server.h. */
int mini_http_server_port(const mini_http_server_t *s)
{
    return s->port;
}

/* See mini_http_server.h. */
char *mini_http_server_url(const mini_http_server_t *s, const char *path, char *out, size_t outlen)
{
    snprintf(out, outlen, "http://127.0.0.1:%d%s", s->port, path);
    return out;
}

/* See mini_http_server.h. */
void mini_http_server_script(mini_http_server_t *s, const char *path,
                             const mini_http_response_t *res)
{
    script_t *sc = NULL;
    for (script_t *it = s->scripts; it != NULL; it = it->link) {
        if ((path == NULL && it->path == NULL) ||
            (path != NULL && it->path != NULL && strcmp(path, it->path) == 0)) {
            sc = it;
            break;
        }
    }
    if (sc == NULL) {
        sc = must(calloc(1, sizeof *sc));
        sc->path = path != NULL ? dupn(path, strlen(path)) : NULL;
        /* Specific paths first, the default last, so lookups find a path first. */
        if (path != NULL || s->scripts == NULL) {
            sc->link = s->scripts;
            s->scripts = sc;
        } else {
            script_t *last = s->scripts;
            while (last->link != NULL)
                last = last->link;
            last->link = sc;
        }
    }
    sc->items = must(realloc(sc->items, (sc->n + 1) * sizeof *sc->items));
    response_t *r = &sc->items[sc->n++];
    r->status = res->status ? res->status : 200;
    const char *body = res->body != NULL ? res->body : "";
    r->body_len = res->body_len ? res->body_len : strlen(body);
    r->body = dupn(body, r->body_len);
    r->headers = dup_headers(res->headers);
    r->delay_ms = res->delay_ms;
    r->close_without_answer = res->close_without_answer;
}

/* See mini_http_server.h. */
size_t mini_http_server_request_count(const mini_http_server_t *s)
{
    return s->nreqs;
}

/* See mini_http_server.h. */
const mini_http_request_t *mini_http_server_request(const mini_http_server_t *s, size_t i)
{
    return i < s->nreqs ? s->reqs[i] : NULL;
}

/* See mini_http_server.h. */
const char *mini_http_request_header(const mini_http_request_t *r, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < r->nheaders; i++) {
        const char *h = r->headers[i];
        if (strncasecmp(h, name, n) == 0 && h[n] == ':') {
            h += n + 1;
            while (*h == ' ' || *h == '\t')
                h++;
            return h;
        }
    }
    return NULL;
}

/* See mini_http_server.h. */
size_t mini_http_server_connections(const mini_http_server_t *s)
{
    return s->accepted;
}

/* See mini_http_server.h. */
size_t mini_http_server_closed(const mini_http_server_t *s)
{
    return s->closed;
}

/* See mini_http_server.h. */
size_t mini_http_server_answers(const mini_http_server_t *s)
{
    return s->answers;
}

/* See mini_http_server.h. */
void mini_http_server_free(mini_http_server_t *s)
{
    if (s == NULL || s->freeing)
        return;
    s->freeing = true;
    while (s->conns != NULL)
        conn_close(s->conns);
    uv_close((uv_handle_t *)&s->listener, on_listener_closed);
}
