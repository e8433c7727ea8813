/*
 * loop_util.c -- bounded waits on a libuv loop for tests. See loop_util.h.
 *
 * Owns only the bounding timer of each call, which lives on the caller's stack and is
 * closed (close callback included) before the call returns.
 */
#include "loop_util.h"

#include <arpa/inet.h>
#include <errno.h>

typedef struct bound {
    uv_timer_t timer;
    bool expired;
    bool closed;
    bool stop_loop; /* uv_stop when the bound passes (for uv_run DEFAULT) */
} bound_t;

static void on_bound_expired(uv_timer_t *t)
{
    bound_t *b = t->data;
    b->expired = true;
    if (b->stop_loop)
        uv_stop(t->loop);
}

static void on_bound_closed(uv_handle_t *h)
{
    bound_t *b = h->data;
    b->closed = true;
}

static void bound_start(uv_loop_t *loop, bound_t *b, uint64_t bound_ms, bool stop_loop)
{
    b->expired = false;
    b->closed = false;
    b->stop_loop = stop_loop;
    uv_timer_init(loop, &b->timer);
    b->timer.data = b;
    uv_timer_start(&b->timer, on_bound_expired, bound_ms, 0);
}

static void bound_close(uv_loop_t *loop, bound_t *b)
{
    uv_close((uv_handle_t *)&b->timer, on_bound_closed);
    while (!b->closed)
        uv_run(loop, UV_RUN_NOWAIT);
}

/* See loop_util.h. */
int loop_run_until(uv_loop_t *loop, loop_cond_fn cond, void *data, uint64_t bound_ms)
{
    bound_t b;
    bound_start(loop, &b, bound_ms, false);
    bool ok;
    while (!(ok = cond(data)) && !b.expired)
        uv_run(loop, UV_RUN_ONCE);
    bound_close(loop, &b);
    return ok ? 0 : -ETIMEDOUT;
}

static bool flag_is_set(void *data)
{
    return *(const bool *)data;
}

/* See loop_util.h. */
int loop_run_until_flag(uv_loop_t *loop, const bool *flag, uint64_t bound_ms)
{
    return loop_run_until(loop, flag_is_set, (void *)flag, bound_ms);
}

/* See loop_util.h. */
int loop_close_bounded(uv_loop_t *loop, uint64_t bound_ms)
{
    bound_t b;
    bound_start(loop, &b, bound_ms, true);
    /* The bound must not keep the loop alive on its own. */
    uv_unref((uv_handle_t *)&b.timer);
    uv_run(loop, UV_RUN_DEFAULT);
    bound_close(loop, &b);
    return uv_loop_close(loop);
}

static void on_probe_closed(uv_handle_t *h)
{
    *(bool *)h->data = true;
}

int loop_closed_port(uv_loop_t *loop, uint64_t bound_ms)
{
    uv_tcp_t probe;
    bool closed = false;
    uv_tcp_init(loop, &probe);
    probe.data = &closed;
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", 0, &addr);
    int rc = uv_tcp_bind(&probe, (const struct sockaddr *)&addr, 0);
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (rc == 0)
        rc = uv_tcp_getsockname(&probe, (struct sockaddr *)&ss, &len);
    int port = rc == 0 ? ntohs(((struct sockaddr_in *)&ss)->sin_port) : rc;
    uv_close((uv_handle_t *)&probe, on_probe_closed);
    if (loop_run_until_flag(loop, &closed, bound_ms) != 0)
        return UV_ETIMEDOUT;
    return port;
}
