/*
 * redis_wake.c -- the wake channel and due-time timer of a worker; see redis_wake.h.
 */
#include "redis/redis_wake.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "redis/redis_conn.h"

struct redis_wake {
    redis_conn_t *sub;
    char *channel;
    uv_timer_t timer;
    uint64_t timer_at_mono; /* 0 when not armed */
    long long clock_offset; /* server clock minus ours, ms */
    bool stopped;
    void (*on_wake)(void *data);
    void *data;
    void (*on_freed)(void *data);
    void *freed_data;
};

static void on_timer(uv_timer_t *t)
{
    redis_wake_t *w = t->data;
    w->timer_at_mono = 0;
    w->on_wake(w->data);
}

void redis_wake_arm_at(redis_wake_t *w, long long due_ms)
{
    if (w->stopped)
        return;
    long long now = redis_wake_server_now(w);
    uint64_t delay = due_ms > now ? (uint64_t)(due_ms - now) : 0;
    uint64_t at = clock_mono_ms() + delay;
    if (w->timer_at_mono != 0 && w->timer_at_mono <= at)
        return;
    w->timer_at_mono = at;
    uv_timer_start(&w->timer, on_timer, delay, 0);
}

void redis_wake_clock(redis_wake_t *w, long long server_now_ms)
{
    w->clock_offset = server_now_ms - (long long)clock_wall_ms();
}

long long redis_wake_server_now(const redis_wake_t *w)
{
    return (long long)clock_wall_ms() + w->clock_offset;
}

static void on_message(redis_conn_t *c, const char *channel, const char *payload, size_t len,
                       void *data)
{
    (void)c;
    (void)channel;
    redis_wake_t *w = data;
    char buf[32];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf - 1 ? len : sizeof buf - 1), payload);
    redis_wake_arm_at(w, atoll(buf));
}

static void on_sub_conn(redis_conn_t *c, bool up, const char *why, void *data)
{
    (void)why;
    redis_wake_t *w = data;
    if (!up)
        return;
    const char *channels[] = {w->channel};
    redis_conn_subscribe(c, channels, 1, on_message, w);
    /* Wake-ups published while this connection was down are lost: look once. */
    w->on_wake(w->data);
}

redis_wake_t *redis_wake_new(uv_loop_t *loop, const redis_wake_opts_t *opts)
{
    redis_wake_t *w = xcalloc(1, sizeof *w);
    w->channel = xstrdup(opts->channel);
    w->on_wake = opts->on_wake;
    w->data = opts->data;
    uv_timer_init(loop, &w->timer);
    w->timer.data = w;
    redis_conn_opts_t so = {
        .addr = opts->addr, .name = opts->name, .on_event = on_sub_conn, .data = w};
    w->sub = redis_conn_new(loop, &so);
    redis_conn_set_command_timeout(w->sub, 0);
    return w;
}

void redis_wake_stop(redis_wake_t *w)
{
    if (w->stopped)
        return;
    w->stopped = true;
    uv_timer_stop(&w->timer);
    redis_conn_free(w->sub);
    w->sub = NULL;
}

static void on_timer_closed(uv_handle_t *h)
{
    redis_wake_t *w = h->data;
    void (*cb)(void *) = w->on_freed;
    void *data = w->freed_data;
    free(w->channel);
    free(w);
    if (cb != NULL)
        cb(data);
}

void redis_wake_free(redis_wake_t *w, void (*on_freed)(void *data), void *data)
{
    redis_wake_stop(w);
    w->on_freed = on_freed;
    w->freed_data = data;
    uv_close((uv_handle_t *)&w->timer, on_timer_closed);
}
