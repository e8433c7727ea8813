/*
 * hold_proxy.c -- see hold_proxy.h. One thread polls the listening socket, a wake-up
 * pipe and both sockets of every connection pair; holding is leaving a pair's upstream
 * socket out of the poll set, so held bytes stay in the kernel's buffers.
 */
#include "hold_proxy.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#define PAIRS_MAX  16
#define WATCH_MAX  4
#define TAIL_BYTES 32 /* a watched text split across two reads is still seen */

typedef struct pair {
    int client, upstream; /* -1: closed */
    bool blocking;        /* the client sent the command BLMOVE */
    char tail[TAIL_BYTES];
    size_t tail_len;
} pair_t;

struct hold_proxy {
    int listener, upstream_port, port;
    int wake[2];
    pthread_t thread;
    pthread_mutex_t mu; /* guards the holds, stop and seen */
    bool hold_blocking, hold_others, stop;
    const char *watch[WATCH_MAX];
    unsigned n_watch;
    unsigned seen[WATCH_MAX];
    pair_t pairs[PAIRS_MAX];
};

static int connect_upstream(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static bool write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        buf += n;
        len -= (size_t)n;
    }
    return true;
}

static void pair_close(pair_t *pr)
{
    if (pr->client >= 0)
        close(pr->client);
    if (pr->upstream >= 0)
        close(pr->upstream);
    pr->client = pr->upstream = -1;
}

/* Counts the watched texts in what a client sent (its last bytes before this read
 * included), and notes a BLMOVE. */
static void scan_client_bytes(hold_proxy_t *p, pair_t *pr, const char *buf, size_t len)
{
    size_t n = pr->tail_len + len;
    char *all = malloc(n + 1);
    memcpy(all, pr->tail, pr->tail_len);
    memcpy(all + pr->tail_len, buf, len);
    all[n] = '\0';
    /* Only matches that end in the new bytes count: the tail's were counted before. */
    pthread_mutex_lock(&p->mu);
    for (unsigned i = 0; i < p->n_watch; i++) {
        size_t wl = strlen(p->watch[i]);
        for (const char *at = all; (at = memmem(at, n - (size_t)(at - all), p->watch[i], wl)); at++)
            if ((size_t)(at - all) + wl > pr->tail_len)
                p->seen[i]++;
    }
    pthread_mutex_unlock(&p->mu);
    /* The command itself, not a script that names it. */
    static const char blmove[] = "*6\r\n$6\r\nBLMOVE\r\n";
    if (memmem(all, n, blmove, sizeof blmove - 1) != NULL)
        pr->blocking = true;
    size_t keep = n < TAIL_BYTES ? n : TAIL_BYTES;
    memcpy(pr->tail, all + n - keep, keep);
    pr->tail_len = keep;
    free(all);
}

static void accept_one(hold_proxy_t *p)
{
    int c = accept(p->listener, NULL, NULL);
    if (c < 0)
        return;
    int u = connect_upstream(p->upstream_port);
    pair_t *slot = NULL;
    for (size_t i = 0; i < PAIRS_MAX && slot == NULL; i++)
        if (p->pairs[i].client < 0)
            slot = &p->pairs[i];
    if (u < 0 || slot == NULL) {
        close(c);
        if (u >= 0)
            close(u);
        return;
    }
    *slot = (pair_t){.client = c, .upstream = u};
}

static void *proxy_main(void *arg)
{
    hold_proxy_t *p = arg;
    char buf[65536];
    for (;;) {
        pthread_mutex_lock(&p->mu);
        bool hold_blocking = p->hold_blocking, hold_others = p->hold_others, stop = p->stop;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            return NULL;
        struct pollfd fds[2 + 2 * PAIRS_MAX];
        pair_t *owner[2 + 2 * PAIRS_MAX];
        nfds_t n = 0;
        fds[n++] = (struct pollfd){.fd = p->listener, .events = POLLIN};
        fds[n++] = (struct pollfd){.fd = p->wake[0], .events = POLLIN};
        for (size_t i = 0; i < PAIRS_MAX; i++) {
            pair_t *pr = &p->pairs[i];
            if (pr->client < 0)
                continue;
            owner[n] = pr;
            fds[n++] = (struct pollfd){.fd = pr->client, .events = POLLIN};
            if (!(pr->blocking ? hold_blocking : hold_others)) {
                owner[n] = pr;
                fds[n++] = (struct pollfd){.fd = pr->upstream, .events = POLLIN};
            }
        }
        if (poll(fds, n, 1000) < 0 && errno != EINTR)
            return NULL;
        if (fds[1].revents != 0) {
            char drain[64];
            ssize_t ignored = read(p->wake[0], drain, sizeof drain);
            (void)ignored; /* a wake-up only: its bytes mean nothing */
        }
        if (fds[0].revents & POLLIN)
            accept_one(p);
        for (nfds_t i = 2; i < n; i++) {
            pair_t *pr = owner[i];
            if (fds[i].revents == 0 || pr->client < 0)
                continue;
            bool from_client = fds[i].fd == pr->client;
            ssize_t got = read(fds[i].fd, buf, sizeof buf);
            if (got <= 0) {
                pair_close(pr);
                continue;
            }
            if (from_client)
                scan_client_bytes(p, pr, buf, (size_t)got);
            if (!write_all(from_client ? pr->upstream : pr->client, buf, (size_t)got))
                pair_close(pr);
        }
    }
}

static void wake(hold_proxy_t *p)
{
    ssize_t ignored = write(p->wake[1], "w", 1);
    (void)ignored; /* the pipe is never full: the thread drains it at every turn */
}

hold_proxy_t *hold_proxy_start(int upstream_port, const char *const *watch)
{
    hold_proxy_t *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->upstream_port = upstream_port;
    for (size_t i = 0; i < PAIRS_MAX; i++)
        p->pairs[i].client = p->pairs[i].upstream = -1;
    for (; watch != NULL && watch[p->n_watch] != NULL && p->n_watch < WATCH_MAX; p->n_watch++)
        p->watch[p->n_watch] = watch[p->n_watch];
    pthread_mutex_init(&p->mu, NULL);
    assert_int_equal(pipe(p->wake), 0);
    p->listener = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(p->listener >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    assert_int_equal(bind(p->listener, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(p->listener, 16), 0);
    assert_int_equal(getsockname(p->listener, (struct sockaddr *)&a, &al), 0);
    p->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&p->thread, NULL, proxy_main, p), 0);
    return p;
}

int hold_proxy_port(const hold_proxy_t *p)
{
    return p->port;
}

void hold_proxy_hold_blocking(hold_proxy_t *p, bool on)
{
    pthread_mutex_lock(&p->mu);
    p->hold_blocking = on;
    pthread_mutex_unlock(&p->mu);
    wake(p);
}

void hold_proxy_hold_others(hold_proxy_t *p, bool on)
{
    pthread_mutex_lock(&p->mu);
    p->hold_others = on;
    pthread_mutex_unlock(&p->mu);
    wake(p);
}

unsigned hold_proxy_seen(hold_proxy_t *p, unsigned i)
{
    pthread_mutex_lock(&p->mu);
    unsigned n = i < p->n_watch ? p->seen[i] : 0;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void hold_proxy_stop(hold_proxy_t *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_mutex_unlock(&p->mu);
    wake(p);
    pthread_join(p->thread, NULL);
    for (size_t i = 0; i < PAIRS_MAX; i++)
        pair_close(&p->pairs[i]);
    close(p->listener);
    close(p->wake[0]);
    close(p->wake[1]);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
