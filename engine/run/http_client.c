/*
 * http_client.c -- outbound HTTP for plugins: libcurl's multi-socket interface driven
 * by the libuv loop. See http_client.h.
 *
 * This file owns one CURLM per client, one CURL easy handle per request, one uv_poll_t
 * per socket curl asks us to watch (found again through curl's `socketp`, never by fd
 * number, because a closed fd number comes back at once for the next connection) and
 * one uv_timer_t that stands for curl's single timeout. It does not own the callers'
 * data pointers, and it knows nothing of tasks or contexts (task_ctx.c tracks those).
 *
 * How the two libraries meet:
 *   curl -> us   on_socket() (start/stop/close a poll) and on_curl_timer() (arm or stop
 *                the uv timer). Neither calls back into the multi handle except
 *                curl_multi_assign, which the socket callback is documented to use.
 *   us -> curl   on_poll() and on_timeout() call curl_multi_socket_action, then
 *                drain_completions() reads curl_multi_info_read and finishes each
 *                request. Completion callbacks therefore run outside every curl
 *                callback, so they may start or cancel requests freely.
 * A 0 ms curl timeout becomes a 0 ms uv timer, which runs on a later pass of the loop:
 * exactly the deferral curl's documentation asks for.
 *
 * Teardown can be asked for from inside a completion callback, while the client is
 * still walking curl's message queue. `busy` counts the frames of this file on the
 * stack; http_client_free only marks the client and the outermost frame tears down.
 *
 * Error texts in tern_http_res.error are stable enough for plugins to classify:
 * a size-limit failure starts with "response larger than", a timeout with
 * "timed out after", a refusal by the request's allow-list with
 * HTTP_CLIENT_NOT_ALLOWED (http_client.h); anything else is curl's own explanation
 * (CURLOPT_ERRORBUFFER).
 * When a transfer fails after the status line arrived (the size limit, a timeout in
 * the middle of the body), `status` keeps that status and `error` says why the answer
 * is incomplete; callers test `error` first.
 */
#include "run/http_client.h"

#include <arpa/inet.h>
#include <assert.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/log.h"

#define DEFAULT_TIMEOUT_MS  30000u
#define DEFAULT_MAX_BYTES   (8u * 1024u * 1024u)
#define INITIAL_BODY_BYTES  1024u
#define MAX_CONNECT_TIMEOUT 10000u /* ms; a connect never waits longer than this */

struct http_request {
    http_client_t *client;
    CURL *easy;
    http_client_cb cb;
    void *data;
    struct curl_slist *headers; /* owned; curl only borrows it */
    char *body_out;             /* owned copy of the request body; curl borrows it */
    char *body;                 /* response bytes, NUL-terminated; owned */
    size_t body_len;
    size_t body_cap;
    size_t max_bytes;
    uint64_t timeout_ms;
    bool too_big;             /* the write callback refused more bytes */
    const net_allow_t *allow; /* borrowed; NULL: any address */
    char refused[160];        /* why the last address was refused, or "" */
    bool opened;              /* a socket was opened to a permitted address */
    uint64_t started_ms;
    char errbuf[CURL_ERROR_SIZE];
    http_request_t *prev, *next; /* the client's list of requests in flight */
};

/* One watched socket. Freed by its close callback; never touches the client there,
 * because close callbacks of one loop pass run in no promised order. */
typedef struct sock_watch {
    uv_poll_t poll;
    http_client_t *client;
    curl_socket_t fd;
    struct sock_watch *prev, *next; /* the client's list of open watches */
} sock_watch_t;

struct http_client {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;         /* curl's timeout; timer.data is the client */
    http_request_t *requests; /* in flight */
    sock_watch_t *watches;    /* polls not yet closed */
    int busy;                 /* frames of this file inside curl or a callback */
    bool free_requested;      /* http_client_free was called */
    bool freed;               /* teardown done; only the close callback remains */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
    /* Thread-safe in 7.88 only when called before other threads use curl; the engine
     * calls it from the main thread before any request. */
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- the request list ------------------------------------------------------------ */

static void request_link(http_client_t *c, http_request_t *r)
{
    r->prev = NULL;
    r->next = c->requests;
    if (c->requests != NULL)
        c->requests->prev = r;
    c->requests = r;
}

static void request_unlink(http_client_t *c, http_request_t *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        c->requests = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

/* Detaches the easy handle from the multi and frees everything the request owns. Never
 * called from inside a curl callback. */
static void request_destroy(http_request_t *r)
{
    http_client_t *c = r->client;
    request_unlink(c, r);
    curl_multi_remove_handle(c->multi, r->easy);
    curl_easy_cleanup(r->easy);
    curl_slist_free_all(r->headers);
    free(r->body_out);
    free(r->body);
    free(r);
}

/* ---- curl -> us: sockets and the timer -------------------------------------------- */

static void on_watch_closed(uv_handle_t *h)
{
    free(h->data);
}

static void watch_close(sock_watch_t *w)
{
    http_client_t *c = w->client;
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        c->watches = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    uv_poll_stop(&w->poll);
    uv_close((uv_handle_t *)&w->poll, on_watch_closed);
}

static void on_poll(uv_poll_t *poll, int status, int events);

/* CURLMOPT_SOCKETFUNCTION: curl tells which events it wants on socket `s`. */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    (void)easy;
    http_client_t *c = userp;
    sock_watch_t *w = socketp;

    if (what == CURL_POLL_REMOVE) {
        /* curl forgets the socket (and its socketp) after this call, then closes it. */
        if (w != NULL)
            watch_close(w);
        return 0;
    }

    if (w == NULL) {
        w = xcalloc(1, sizeof *w);
        w->client = c;
        w->fd = s;
        if (uv_poll_init_socket(c->loop, &w->poll, s) != 0) {
            free(w);
            return -1; /* curl fails the transfers on this socket */
        }
        w->poll.data = w;
        w->next = c->watches;
        if (c->watches != NULL)
            c->watches->prev = w;
        c->watches = w;
        if (curl_multi_assign(c->multi, s, w) != CURLM_OK) {
            watch_close(w);
            return -1;
        }
    }

    int events = 0;
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
        events |= UV_READABLE;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
        events |= UV_WRITABLE;
    if (events == 0)
        uv_poll_stop(&w->poll);
    else if (uv_poll_start(&w->poll, events, on_poll) != 0)
        return -1;
    return 0;
}

static void on_timeout(uv_timer_t *t);

/* CURLMOPT_TIMERFUNCTION: curl wants socket_action(CURL_SOCKET_TIMEOUT) after
 * timeout_ms, or no timeout at all (-1). Only the uv timer is touched here. */
static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    http_client_t *c = userp;
    if (timeout_ms < 0)
        uv_timer_stop(&c->timer);
    else
        uv_timer_start(&c->timer, on_timeout, (uint64_t)timeout_ms, 0);
    return 0;
}

/* CURLOPT_WRITEFUNCTION: appends response bytes, refusing past max_bytes (a short
 * count makes curl end the transfer with CURLE_WRITE_ERROR). */
static size_t on_body_bytes(char *ptr, size_t size, size_t nmemb, void *userp)
{
    http_request_t *r = userp;
    size_t n = size * nmemb;
    if (n > r->max_bytes - r->body_len) {
        r->too_big = true;
        return 0;
    }
    if (r->body_len + n + 1 > r->body_cap) {
        size_t cap = r->body_cap ? r->body_cap : INITIAL_BODY_BYTES;
        while (cap < r->body_len + n + 1)
            cap *= 2;
        if (cap > r->max_bytes + 1)
            cap = r->max_bytes + 1;
        r->body = xrealloc(r->body, cap);
        r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, ptr, n);
    r->body_len += n;
    r->body[r->body_len] = '\0';
    return n;
}

/* Records that the request may not connect to `sa`. */
static void note_refused(http_request_t *r, const struct sockaddr *sa)
{
    char text[INET6_ADDRSTRLEN];
    net_addr_text(sa, text, sizeof text);
    snprintf(r->refused, sizeof r->refused, HTTP_CLIENT_NOT_ALLOWED "%s is not in %s", text,
             net_allow_setting(r->allow));
}

/* CURLOPT_OPENSOCKETFUNCTION (set only with an allow-list): curl is about to connect
 * to `address`, resolved already. A refused address gets no socket, so nothing is
 * sent to it; curl then tries the name's other addresses, if any. */
static curl_socket_t on_open_socket(void *clientp, curlsocktype purpose,
                                    struct curl_sockaddr *address)
{
    http_request_t *r = clientp;
    (void)purpose;
    if (!net_allow_permits(r->allow, &address->addr)) {
        note_refused(r, &address->addr);
        return CURL_SOCKET_BAD;
    }
    r->opened = true;
    /* Close-on-exec, unlike curl's own: children spawned by tasks inherit nothing. */
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

/* CURLOPT_PREREQFUNCTION (set only with an allow-list): the connection about to carry
 * the request, new or kept alive. A kept-alive one may have been opened by a request
 * with another allow-list (a post-back, another plugin), so it is checked again. */
static int on_prereq(void *clientp, char *conn_primary_ip, char *conn_local_ip,
                     int conn_primary_port, int conn_local_port)
{
    http_request_t *r = clientp;
    (void)conn_local_ip;
    (void)conn_primary_port;
    (void)conn_local_port;
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
    struct sockaddr_in in = {.sin_family = AF_INET};
    const struct sockaddr *sa = NULL;
    if (inet_pton(AF_INET, conn_primary_ip, &in.sin_addr) == 1)
        sa = (const struct sockaddr *)&in;
    else if (inet_pton(AF_INET6, conn_primary_ip, &in6.sin6_addr) == 1)
        sa = (const struct sockaddr *)&in6;
    if (sa != NULL && net_allow_permits(r->allow, sa))
        return CURL_PREREQFUNC_OK;
    if (sa != NULL)
        note_refused(r, sa);
    else
        snprintf(r->refused, sizeof r->refused,
                 HTTP_CLIENT_NOT_ALLOWED "the server's address \"%.60s\" is unknown",
                 conn_primary_ip);
    return CURL_PREREQFUNC_ABORT;
}

/* ---- us -> curl: socket_action and completions ------------------------------------ */

static void client_teardown(http_client_t *c);

/* Builds the result of a finished transfer, frees the request, then runs its
 * callback. The easy handle is gone before the callback runs, so the callback may
 * start new requests or free the client. */
static void request_finish(http_request_t *r, CURLcode rc)
{
    long status = 0;
    char *content_type = NULL;
    const char *ct = NULL;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
    if (curl_easy_getinfo(r->easy, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct != NULL)
        content_type = xstrdup(ct);

    char *error = NULL;
    if (r->refused[0] != '\0' &&
        ((rc == CURLE_COULDNT_CONNECT && !r->opened) || rc == CURLE_ABORTED_BY_CALLBACK)) {
        /* Every address was refused, or the connection to be reused was. (When a
         * permitted address was tried too, its failure is the one to report.) */
        error = xstrdup(r->refused);
    } else if (r->too_big) {
        error = xasprintf("response larger than %zu bytes (max_response_bytes)", r->max_bytes);
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
        error = xasprintf("timed out after %" PRIu64 " ms: %s", r->timeout_ms,
                          r->errbuf[0] ? r->errbuf : curl_easy_strerror(rc));
    } else if (rc != CURLE_OK) {
        error = xstrdup(r->errbuf[0] ? r->errbuf : curl_easy_strerror(rc));
    }

    /* Take the body and the callback out of the request before it is freed. */
    char *body = r->body;
    size_t body_len = r->body_len;
    r->body = NULL;
    http_client_cb cb = r->cb;
    void *data = r->data;
    uint64_t started_ms = r->started_ms;
    request_destroy(r);

    tern_http_res res = {
        .status = status,
        .error = error,
        .body = body != NULL ? body : "",
        .body_len = body_len,
        .content_type = content_type,
        .elapsed_ms = clock_mono_ms() - started_ms,
    };
    cb(data, &res);

    free(error);
    free(content_type);
    free(body);
}

/* Finishes every transfer curl has completed. Runs after socket_action returned. */
static void drain_completions(http_client_t *c)
{
    CURLMsg *msg;
    int pending;
    while (!c->free_requested && (msg = curl_multi_info_read(c->multi, &pending)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        /* The message dies with the easy handle: read it first. */
        CURL *easy = msg->easy_handle;
        CURLcode rc = msg->data.result;
        char *priv = NULL;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv);
        if (priv != NULL)
            request_finish((http_request_t *)(void *)priv, rc);
    }
}

/* Drives curl for one event, then finishes what completed. */
static void client_drive(http_client_t *c, curl_socket_t s, int flags)
{
    int running = 0;
    c->busy++;
    curl_multi_socket_action(c->multi, s, flags, &running);
    drain_completions(c);
    c->busy--;
    if (c->free_requested && c->busy == 0)
        client_teardown(c);
}

/* A watched socket became ready, or failed (status < 0: curl must see the error). */
static void on_poll(uv_poll_t *poll, int status, int events)
{
    sock_watch_t *w = poll->data;
    int flags = 0;
    if (status < 0) {
        flags = CURL_CSELECT_ERR;
    } else {
        if (events & UV_READABLE)
            flags |= CURL_CSELECT_IN;
        if (events & UV_WRITABLE)
            flags |= CURL_CSELECT_OUT;
    }
    client_drive(w->client, w->fd, flags);
}

/* curl's timeout expired. */
static void on_timeout(uv_timer_t *t)
{
    client_drive(t->data, CURL_SOCKET_TIMEOUT, 0);
}

/* ---- public ----------------------------------------------------------------------- */

/* Creates a client; see http_client.h. */
http_client_t *http_client_new(uv_loop_t *loop)
{
    pthread_once(&curl_once, curl_init_once);
    http_client_t *c = xcalloc(1, sizeof *c);
    c->loop = loop;
    c->multi = curl_multi_init();
    if (c->multi == NULL) {
        log_msg(TERN_LOG_FATAL, "http_client", NULL, "out of memory creating a curl multi handle");
        abort();
    }
    uv_timer_init(loop, &c->timer);
    c->timer.data = c;
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    return c;
}

static void on_client_timer_closed(uv_handle_t *h)
{
    free(h->data);
}

/* Cancels what is in flight, lets curl close its cached connections (it reports each
 * socket with CURL_POLL_REMOVE), closes any watch it did not report, then the timer,
 * whose close callback frees the client. */
static void client_teardown(http_client_t *c)
{
    if (c->freed)
        return;
    c->freed = true;
    while (c->requests != NULL)
        request_destroy(c->requests);
    curl_multi_cleanup(c->multi);
    c->multi = NULL;
    while (c->watches != NULL)
        watch_close(c->watches);
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, on_client_timer_closed);
}

/* See http_client.h. Safe from inside a completion callback. */
void http_client_free(http_client_t *c)
{
    if (c == NULL || c->free_requested)
        return;
    c->free_requested = true;
    if (c->busy == 0)
        client_teardown(c);
}

static bool url_scheme_ok(const char *url)
{
    return strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0;
}

static bool method_token_ok(const char *m)
{
    if (*m == '\0' || strlen(m) > 32)
        return false;
    for (; *m; m++) {
        if (!((*m >= 'A' && *m <= 'Z') || (*m >= 'a' && *m <= 'z') || *m == '-' || *m == '_'))
            return false;
    }
    return true;
}

static bool header_ok(const char *h)
{
    const char *colon = strchr(h, ':');
    if (colon == NULL || colon == h)
        return false;
    return strpbrk(h, "\r\n") == NULL;
}

static bool has_header(const char *const *headers, const char *name)
{
    size_t n = strlen(name);
    for (; headers != NULL && *headers != NULL; headers++) {
        if (strncasecmp(*headers, name, n) == 0 && (*headers)[n] == ':')
            return true;
    }
    return false;
}

/* Starts a request; see http_client.h. */
http_request_t *http_client_request(http_client_t *c, const tern_http_req *req, http_client_cb cb,
                                    void *data, char *err, size_t errlen)
{
    return http_client_request_allowed(c, req, NULL, cb, data, err, errlen);
}

/* Starts a request limited to the networks of `allow`; see http_client.h. */
http_request_t *http_client_request_allowed(http_client_t *c, const tern_http_req *req,
                                            const net_allow_t *allow, http_client_cb cb, void *data,
                                            char *err, size_t errlen)
{
    if (c == NULL || c->free_requested) {
        err_set(err, errlen, TERN_EBUSY, "http client is shutting down");
        return NULL;
    }
    if (req == NULL || req->url == NULL || req->url[0] == '\0') {
        err_set(err, errlen, TERN_EINVAL, "http request: missing url");
        return NULL;
    }
    if (!url_scheme_ok(req->url)) {
        err_set(err, errlen, TERN_EINVAL,
                "http request \"%s\": url must start with http:// or https://", req->url);
        return NULL;
    }
    const char *method = req->method != NULL ? req->method : "GET";
    if (!method_token_ok(method)) {
        err_set(err, errlen, TERN_EINVAL, "http request \"%s\": bad method \"%s\"", req->url,
                method);
        return NULL;
    }
    for (const char *const *h = req->headers; h != NULL && *h != NULL; h++) {
        if (!header_ok(*h)) {
            err_set(err, errlen, TERN_EINVAL,
                    "http request \"%s\": bad header \"%s\" (expected \"Name: value\")", req->url,
                    *h);
            return NULL;
        }
    }

    CURL *easy = curl_easy_init();
    if (easy == NULL) {
        err_set(err, errlen, TERN_ENOMEM, "http request \"%s\": curl_easy_init failed", req->url);
        return NULL;
    }

    http_request_t *r = xcalloc(1, sizeof *r);
    r->client = c;
    r->easy = easy;
    r->cb = cb;
    r->data = data;
    r->timeout_ms = req->timeout_ms ? req->timeout_ms : DEFAULT_TIMEOUT_MS;
    r->max_bytes = req->max_response_bytes ? req->max_response_bytes : DEFAULT_MAX_BYTES;

    for (const char *const *h = req->headers; h != NULL && *h != NULL; h++)
        r->headers = curl_slist_append(r->headers, *h);
    /* No "Expect: 100-continue" round trip before a body unless the caller asks. */
    if (!has_header(req->headers, "Expect"))
        r->headers = curl_slist_append(r->headers, "Expect:");

    curl_easy_setopt(easy, CURLOPT_URL, req->url);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_PRIVATE, r);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, r->errbuf);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long)r->timeout_ms);
    curl_easy_setopt(
        easy, CURLOPT_CONNECTTIMEOUT_MS,
        (long)(r->timeout_ms < MAX_CONNECT_TIMEOUT ? r->timeout_ms : MAX_CONNECT_TIMEOUT));
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body_bytes);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, r->headers);
    curl_easy_setopt(easy, CURLOPT_USERAGENT, "tern");
    /* CURLOPT_FOLLOWLOCATION stays off: a redirect is an answer like any other, so it
     * cannot lead a request to an address nobody checked. */
    if (allow != NULL) {
        r->allow = allow;
        curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
        curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, r);
        curl_easy_setopt(easy, CURLOPT_PREREQFUNCTION, on_prereq);
        curl_easy_setopt(easy, CURLOPT_PREREQDATA, r);
        /* "" ignores http_proxy and friends: through a proxy the check would see the
         * proxy's address, and the proxy would reach any server. */
        curl_easy_setopt(easy, CURLOPT_PROXY, "");
    }

    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
    } else if (req->body != NULL) {
        r->body_out = xmalloc(req->body_len + 1);
        memcpy(r->body_out, req->body, req->body_len);
        r->body_out[req->body_len] = '\0';
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, r->body_out);
        curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        if (strcmp(method, "POST") != 0)
            curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method);
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method);
    }

    r->started_ms = clock_mono_ms();
    CURLMcode mc = curl_multi_add_handle(c->multi, easy);
    if (mc != CURLM_OK) {
        err_set(err, errlen, TERN_EIO, "http request \"%s\": %s", req->url,
                curl_multi_strerror(mc));
        curl_easy_cleanup(easy);
        curl_slist_free_all(r->headers);
        free(r->body_out);
        free(r);
        return NULL;
    }
    /* Adding the handle armed a 0 ms curl timeout; the transfer starts from the loop. */
    request_link(c, r);
    return r;
}

/* See http_client.h. */
void http_request_cancel(http_request_t *r)
{
    if (r == NULL)
        return;
    request_destroy(r);
}
