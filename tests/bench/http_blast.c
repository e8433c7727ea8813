/*
 * http_blast.c -- the benchmarks' HTTP load client (see http_blast.h): each connection
 * goes free -> sending -> receiving -> free, one request at a time, driven by one
 * edge-triggered epoll set. A connection is registered once for both directions, so a
 * request costs one sendmsg and usually one read, and no epoll_ctl; the price of edge
 * triggering is that a reader must go on until EAGAIN or until the answer is complete.
 *
 * A failed request (transport error, malformed answer, timeout) closes its connection,
 * since where the next answer would start is then unknown; the next request opens a
 * new one. Each failure uses up its request, so a dead server ends the run quickly
 * instead of looping.
 */
#include "http_blast.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* Room for a request head or an answer's head: ternd's heads are under 200 bytes, and
 * bodies are not kept. */
#define BUF_SIZE          (16 * 1024)
#define REQUEST_TIMEOUT_S 30.0        /* as the curl client it replaced: one stuck request fails */
#define POLL_MS           100         /* the longest epoll_wait, so that the bounds are seen */
#define MAX_BODY          (1LL << 40) /* a longer Content-Length is taken as garbage */
/* When a turn of the loop brought fewer events than a quarter of the connections, the client pauses
 * GATHER_US before the next epoll_wait, so that answers gather: otherwise ternd, slower
 * than this client, wakes it for nearly every answer, and a sleep and a wake-up per
 * answer cost about as much as its send and read (on the 2-core VM of docs/PERFORMANCE.md,
 * GET /jobs/<uuid>: 21 to 24 us of CPU per request without the pause, 15 to 16 with it,
 * at the same requests/s). ternd keeps the other requests in flight meanwhile, so its
 * queue does not run dry; a ternd fast enough to answer that many per turn is never
 * paused for. */
#define GATHER_US 200

enum conn_state {
    CONN_FREE,      /* no request; the socket, if open, is idle */
    CONN_SENDING,   /* part of the request is still to be written */
    CONN_RECEIVING, /* the request is out; reading the answer */
};

typedef struct conn {
    int fd; /* -1 when closed */
    enum conn_state state;
    int req;      /* the request it carries (its index in 0..n-1) */
    bool reused;  /* an answer was read on this socket already */
    bool retried; /* the request was resent once on a fresh socket */
    double deadline;
    /* The request: its head in buf, the body borrowed from the run. */
    size_t req_head_len, sent;
    /* The answer: its head is gathered in buf, then the body is read over it. */
    size_t len;          /* bytes of the head read so far (then, briefly, of the body) */
    size_t scanned;      /* of them, searched for the blank line already */
    bool head_done;      /* the head is parsed; what remains is the body */
    bool close_after;    /* Connection: close, HTTP/1.0, or a body that ends at EOF */
    int status;          /* the answer's status code */
    long long body_left; /* bytes of the body still to come; -1: until the server closes */
    char buf[BUF_SIZE];
} conn_t;

typedef struct run {
    http_blast_t *b;
    int ep;
    conn_t *conns;
    int n_conns;
    int next;   /* the next request to send */
    int done;   /* requests counted in ok or bad */
    double now; /* CLOCK_MONOTONIC, refreshed once per turn of the loop */
    size_t body_len;
} run_t;

static double clock_s(clockid_t id)
{
    struct timespec ts;
    /* Fails only for an unknown clock or a bad pointer, both programmer errors. */
    int rc = clock_gettime(id, &ts);
    assert(rc == 0);
    (void)rc;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Keeps the first failure's description in b->err, prefixed with the request that
 * suffered it when there is one (c != NULL); later ones repeat the same cause often
 * enough that the first is what one wants to read. */
static void note(run_t *r, const conn_t *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note(run_t *r, const conn_t *c, const char *fmt, ...)
{
    http_blast_t *b = r->b;
    if (b->err[0] != '\0')
        return;
    size_t n = 0;
    if (c != NULL && b->post)
        n = (size_t)snprintf(b->err, sizeof b->err, "POST /jobs: ");
    else if (c != NULL)
        n = (size_t)snprintf(b->err, sizeof b->err,
                             "GET /jobs/%s: ", b->uuids[c->req % b->n_uuids]);
    if (n >= sizeof b->err)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err + n, sizeof b->err - n, fmt, ap);
    va_end(ap);
}

static void count(run_t *r, bool ok)
{
    atomic_fetch_add(ok ? &r->b->ok : &r->b->bad, 1);
    r->done++;
}

static void conn_close(run_t *r, conn_t *c)
{
    /* The descriptor is released even when close fails (Linux), so there is nothing to
     * retry; the failure is only reported. */
    if (c->fd >= 0 && close(c->fd) != 0)
        note(r, NULL, "close: %s", strerror(errno));
    c->fd = -1;
    c->reused = false;
}

/* Counts c's request as bad and closes the socket: after a failure it is not known
 * where the next answer would start. */
static void fail(run_t *r, conn_t *c, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(run_t *r, conn_t *c, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    note(r, c, "%s", msg);
    count(r, false);
    conn_close(r, c);
    c->state = CONN_FREE;
}

/* Opens c's socket; 0, or -1 with the request failed. The socket is registered for both
 * directions once, edge-triggered, for its whole life. */
static int conn_open(run_t *r, conn_t *c)
{
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        fail(r, c, "socket: %s", strerror(errno));
        return -1;
    }
    /* Requests go out as soon as they are written, not after the previous answer's
     * delayed ACK (Nagle). */
    int one = 1;
    if (setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
        fail(r, c, "setsockopt(TCP_NODELAY): %s", strerror(errno));
        return -1;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = c};
    if (epoll_ctl(r->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        fail(r, c, "epoll_ctl: %s", strerror(errno));
        return -1;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)r->b->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    /* EINPROGRESS is the usual answer: the first send then returns EAGAIN until the
     * connection is up, or the connection's error (e.g. ECONNREFUSED). */
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS) {
        fail(r, c, "connect to 127.0.0.1:%d: %s", r->b->port, strerror(errno));
        return -1;
    }
    return 0;
}

static void conn_send(run_t *r, conn_t *c);

/* A send or read failed with `err` (0: the server closed). A server may close a kept-
 * alive connection just as a request goes out on it (an idle timeout), which says
 * nothing about the request: that case is resent once on a fresh socket, as curl does.
 * Anything else fails the request. */
static void transport_error(run_t *r, conn_t *c, int err, const char *what)
{
    bool unanswered = c->len == 0 && !c->head_done;
    if (c->reused && !c->retried && unanswered && (err == 0 || err == ECONNRESET || err == EPIPE)) {
        c->retried = true;
        conn_close(r, c);
        if (conn_open(r, c) == 0) {
            c->state = CONN_SENDING;
            c->sent = 0;
            conn_send(r, c);
        }
        return;
    }
    if (err == 0 && c->head_done)
        fail(r, c, "%s: the server closed the connection %lld bytes before the end of the answer",
             what, c->body_left);
    else if (err == 0)
        fail(r, c, "%s: the server closed the connection after %zu bytes of the answer", what,
             c->len);
    else
        fail(r, c, "%s: %s", what, strerror(err));
}

/* Writes what it can of c's request; when it is all out, c waits for the answer. */
static void conn_send(run_t *r, conn_t *c)
{
    size_t body_len = r->b->post ? r->body_len : 0;
    size_t total = c->req_head_len + body_len;
    while (c->sent < total) {
        struct iovec iov[2];
        int k = 0;
        if (c->sent < c->req_head_len)
            iov[k++] = (struct iovec){c->buf + c->sent, c->req_head_len - c->sent};
        size_t body_off = c->sent > c->req_head_len ? c->sent - c->req_head_len : 0;
        if (body_len > body_off)
            iov[k++] = (struct iovec){(char *)r->b->body + body_off, body_len - body_off};
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)k};
        /* MSG_NOSIGNAL: a closed peer is an EPIPE to count, not a SIGPIPE. */
        ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return; /* EPOLLOUT will say when to go on */
            transport_error(r, c, errno, "send");
            return;
        }
        c->sent += (size_t)n;
    }
    c->state = CONN_RECEIVING;
    /* No read here: the answer cannot be there yet, and the edge-triggered registration
     * reports its arrival. */
}

/* Gives c request r->next and sends what it can. */
static void conn_start(run_t *r, conn_t *c)
{
    http_blast_t *b = r->b;
    c->req = r->next++;
    c->retried = false;
    c->deadline = r->now + REQUEST_TIMEOUT_S;
    int n;
    if (b->post)
        n = snprintf(c->buf, sizeof c->buf,
                     "POST /jobs HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                     b->port, r->body_len);
    else
        n = snprintf(c->buf, sizeof c->buf, "GET /jobs/%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
                     b->uuids[c->req % b->n_uuids], b->port);
    if (n < 0 || (size_t)n >= sizeof c->buf) {
        fail(r, c, "the request head does not fit in %d bytes", BUF_SIZE);
        return;
    }
    c->req_head_len = (size_t)n;
    c->sent = 0;
    c->len = 0;
    c->scanned = 0;
    c->head_done = false;
    c->state = CONN_SENDING;
    if (c->fd < 0 && conn_open(r, c) != 0)
        return;
    conn_send(r, c);
}

/* Hands out requests to c until one is on its way or none is left: a request that fails
 * at once is counted and the next one tried, each try using one up. */
static void conn_next(run_t *r, conn_t *c)
{
    while (c->state == CONN_FREE && r->next < r->b->n)
        conn_start(r, c);
}

/* The answer is complete: counts it, and closes the socket if the server asked to. */
static void conn_answered(run_t *r, conn_t *c)
{
    count(r, c->status >= 200 && c->status < 300);
    c->state = CONN_FREE;
    if (c->close_after)
        conn_close(r, c);
    else
        c->reused = true;
}

static bool name_is(const char *p, size_t len, const char *name)
{
    return len == strlen(name) && strncasecmp(p, name, len) == 0;
}

/* Whether the comma-separated list v (len bytes) holds `token`, case-insensitively. */
static bool has_token(const char *v, size_t len, const char *token)
{
    size_t tl = strlen(token);
    for (size_t i = 0; i < len;) {
        while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t j = i;
        while (j < len && v[j] != ',')
            j++;
        size_t e = j;
        while (e > i && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (e - i == tl && strncasecmp(v + i, token, tl) == 0)
            return true;
        i = j;
    }
    return false;
}

/* Parses the head once its blank line is in buf: the status line, then the headers that
 * decide where the answer ends. Returns 0 (c->head_done tells whether the head was
 * complete), or -1 with the request failed. */
static int parse_head(run_t *r, conn_t *c)
{
    /* The blank line may straddle two reads: search again from 3 bytes back. */
    size_t from = c->scanned > 3 ? c->scanned - 3 : 0;
    const char *blank = memmem(c->buf + from, c->len - from, "\r\n\r\n", 4);
    c->scanned = c->len;
    if (blank == NULL) {
        if (c->len == sizeof c->buf) {
            fail(r, c, "the answer's head is longer than %d bytes", BUF_SIZE);
            return -1;
        }
        return 0;
    }
    size_t head_len = (size_t)(blank - c->buf) + 4;
    const char *p = c->buf, *end = blank + 2; /* each line ends with its CRLF */

    /* "HTTP/1.x NNN reason" */
    const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
    size_t ll = (size_t)(eol - p);
    if (ll < 12 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1') || p[8] != ' ' ||
        p[9] < '1' || p[9] > '5' || p[10] < '0' || p[10] > '9' || p[11] < '0' || p[11] > '9' ||
        (ll > 12 && p[12] != ' ')) {
        fail(r, c, "malformed status line \"%.*s\"", (int)(ll < 80 ? ll : 80), p);
        return -1;
    }
    bool http10 = p[7] == '0';
    c->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
    if (c->status < 200) {
        fail(r, c, "interim answer %d, unexpected without Expect", c->status);
        return -1;
    }

    long long length = -1;
    bool says_close = false, says_keep_alive = false;
    for (p = eol + 2; p < end; p = eol + 2) {
        eol = memmem(p, (size_t)(end - p), "\r\n", 2);
        ll = (size_t)(eol - p);
        const char *colon = memchr(p, ':', ll);
        if (colon == NULL || colon == p) {
            fail(r, c, "malformed header line \"%.*s\"", (int)(ll < 80 ? ll : 80), p);
            return -1;
        }
        size_t nl = (size_t)(colon - p);
        const char *v = colon + 1;
        while (v < eol && (*v == ' ' || *v == '\t'))
            v++;
        size_t vl = (size_t)(eol - v);
        while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            vl--;
        if (name_is(p, nl, "content-length")) {
            long long x = 0;
            size_t i = 0;
            for (; i < vl && v[i] >= '0' && v[i] <= '9' && x <= MAX_BODY; i++)
                x = x * 10 + (v[i] - '0');
            /* Two different lengths would make the end of the answer ambiguous. */
            if (vl == 0 || i < vl || x > MAX_BODY || (length >= 0 && x != length)) {
                fail(r, c, "bad Content-Length \"%.*s\"", (int)(vl < 40 ? vl : 40), v);
                return -1;
            }
            length = x;
        } else if (name_is(p, nl, "transfer-encoding")) {
            fail(r, c, "Transfer-Encoding: %.*s is not supported (ternd sends Content-Length)",
                 (int)(vl < 40 ? vl : 40), v);
            return -1;
        } else if (name_is(p, nl, "connection")) {
            says_close = says_close || has_token(v, vl, "close");
            says_keep_alive = says_keep_alive || has_token(v, vl, "keep-alive");
        }
    }

    c->head_done = true;
    c->close_after = says_close || (http10 && !says_keep_alive);
    if (c->status == 204 || c->status == 304) {
        c->body_left = 0;
    } else if (length >= 0) {
        c->body_left = length;
    } else {
        c->body_left = -1;
        c->close_after = true;
    }
    if (c->status >= 300) {
        size_t bl = c->len - head_len;
        note(r, c, "HTTP %d: %.*s", c->status, (int)(bl < 160 ? bl : 160), c->buf + head_len);
    }
    /* What came after the head is the start of the body. */
    c->len = c->len - head_len;
    return 0;
}

/* Reads what has arrived of c's answer; counts it once it is complete. */
static void conn_recv(run_t *r, conn_t *c)
{
    for (;;) {
        char *at = c->head_done ? c->buf : c->buf + c->len;
        size_t room = c->head_done ? sizeof c->buf : sizeof c->buf - c->len;
        ssize_t n = read(c->fd, at, room);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            transport_error(r, c, errno, "read");
            return;
        }
        if (n == 0) {
            if (c->head_done && c->body_left < 0)
                conn_answered(r, c); /* a body without a length ends here */
            else
                transport_error(r, c, 0, "read");
            return;
        }
        size_t body; /* bytes of the body in this read */
        if (c->head_done) {
            body = (size_t)n;
        } else {
            c->len += (size_t)n;
            if (parse_head(r, c) != 0)
                return;
            if (!c->head_done)
                continue;
            body = c->len; /* parse_head left the body's bytes there */
        }
        if (c->body_left < 0)
            continue;
        if ((long long)body > c->body_left) {
            /* Nothing was asked for these bytes: the server and this client disagree on
             * where answers end. */
            fail(r, c, "%lld bytes after the end of the answer", (long long)body - c->body_left);
            return;
        }
        c->body_left -= (long long)body;
        if (c->body_left == 0) {
            conn_answered(r, c);
            return;
        }
    }
}

/* Fails the requests that have waited longer than REQUEST_TIMEOUT_S. */
static void expire(run_t *r)
{
    for (int i = 0; i < r->n_conns; i++) {
        conn_t *c = &r->conns[i];
        if (c->state != CONN_FREE && r->now >= c->deadline) {
            fail(r, c, "no answer within %.0f s", REQUEST_TIMEOUT_S);
            conn_next(r, c);
        }
    }
}

/* The loop proper; returns when every request is counted, at the bound, or when
 * epoll_wait fails. */
static void run_loop(run_t *r)
{
    http_blast_t *b = r->b;
    double limit = b->t_start + b->limit_s, next_expire = r->now + POLL_MS / 1000.0;
    struct epoll_event ev[HTTP_BLAST_CONNS_MAX];
    for (int i = 0; i < r->n_conns; i++)
        conn_next(r, &r->conns[i]);
    while (r->done < b->n) {
        if (r->now >= limit) {
            note(r, NULL, "the time bound of %.0f s was reached", b->limit_s);
            return;
        }
        double left_ms = (limit - r->now) * 1000.0 + 1.0;
        int k = epoll_wait(r->ep, ev, r->n_conns, left_ms < POLL_MS ? (int)left_ms : POLL_MS);
        if (k < 0 && errno != EINTR) {
            note(r, NULL, "epoll_wait: %s", strerror(errno));
            return;
        }
        r->now = clock_s(CLOCK_MONOTONIC);
        /* An event only prompts the operation that c's state calls for, and that
         * operation's own result tells what happened: a connection closed and reopened
         * earlier in this batch can still have an event of its old socket here. The
         * mask is the socket's readiness when epoll_wait returned, so a request that
         * goes out now can find its answer already reported (a server may answer before
         * it has read the whole request); edge triggering would not report it again. */
        for (int i = 0; i < k; i++) {
            conn_t *c = ev[i].data.ptr;
            if (c->state == CONN_SENDING)
                conn_send(r, c);
            if (c->state == CONN_RECEIVING && (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
                conn_recv(r, c);
            conn_next(r, c);
        }
        if (k > 0 && k < r->n_conns / 4 && r->done < b->n) {
            struct timespec pause = {0, GATHER_US * 1000L};
            /* An interrupted pause is only a shorter one. */
            if (nanosleep(&pause, NULL) != 0 && errno != EINTR)
                note(r, NULL, "nanosleep: %s", strerror(errno));
        }
        if (r->now >= next_expire) {
            expire(r);
            next_expire = r->now + POLL_MS / 1000.0;
        }
    }
}

void *http_blast_run(void *arg)
{
    http_blast_t *b = arg;
    run_t r = {.b = b, .ep = -1};
    double cpu0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    b->t_start = r.now = clock_s(CLOCK_MONOTONIC);
    if (b->n <= 0)
        goto Done;
    int conns = b->conns != 0 ? b->conns : HTTP_BLAST_CONNS;
    if (b->port <= 0 || b->port > 65535 || b->limit_s <= 0 || (b->post && b->body == NULL) ||
        (!b->post && (b->uuids == NULL || b->n_uuids <= 0)) || conns < 1 ||
        conns > HTTP_BLAST_CONNS_MAX) {
        note(&r, NULL, "bad arguments: port %d, limit_s %g, post %d, body %s, %d uuids, %d conns",
             b->port, b->limit_s, (int)b->post, b->body != NULL ? "set" : "NULL", b->n_uuids,
             conns);
        goto Done;
    }
    r.body_len = b->post ? strlen(b->body) : 0;
    r.n_conns = b->n < conns ? b->n : conns;
    r.conns = calloc((size_t)r.n_conns, sizeof *r.conns);
    if (r.conns == NULL) {
        note(&r, NULL, "out of memory for %d connections", r.n_conns);
        goto Done;
    }
    for (int i = 0; i < r.n_conns; i++)
        r.conns[i].fd = -1;
    r.ep = epoll_create1(EPOLL_CLOEXEC);
    if (r.ep < 0) {
        note(&r, NULL, "epoll_create1: %s", strerror(errno));
        goto Done;
    }
    run_loop(&r);

Done:
    b->t_end = clock_s(CLOCK_MONOTONIC);
    /* What is left unanswered counts as bad, so that ok + bad == n. */
    if (r.done < b->n)
        atomic_fetch_add(&b->bad, b->n - r.done);
    for (int i = 0; i < r.n_conns && r.conns != NULL; i++)
        conn_close(&r, &r.conns[i]);
    free(r.conns);
    if (r.ep >= 0 && close(r.ep) != 0)
        note(&r, NULL, "close: %s", strerror(errno));
    b->cpu_s = clock_s(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    return NULL;
}
