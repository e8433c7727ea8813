/*
 * redis_wake.h -- what wakes a worker that looks in Redis for work falling due: the
 * post-back deliverer (run/postback.c) and the schedule firer (ops/schedule_fire.c).
 *
 * A worker of this kind claims its due work with a script, learns from each claim's
 * answer when the next work falls due, and hears of work that became the earliest on
 * a pub/sub channel whose messages carry its due time. The waker holds the two things
 * that bring it back: the subscription (a connection of its own) and one timer, armed
 * at the earliest due time heard. Due times are on the Redis server's clock, as every
 * time tern stores; the waker turns them into local delays with the offset between the
 * clocks that the worker learns from its claims' answers (redis_wake_clock).
 *
 * on_wake runs when the timer fires, and each time the subscription comes up (or back
 * up): wake-ups published while it was down are lost, so the worker looks once. What a
 * look is, and whether one is already in flight, is the worker's. After
 * redis_wake_stop, on_wake never runs again and arming does nothing.
 *
 * Ownership: the worker owns the waker; the waker owns its connection and its timer,
 * and is freed by redis_wake_free once the timer has closed.
 */
#ifndef TERN_REDIS_WAKE_H
#define TERN_REDIS_WAKE_H

#include <uv.h>

#include "redis/redis_addr.h"

typedef struct redis_wake redis_wake_t;

typedef struct redis_wake_opts {
    const redis_addr_t *addr; /* copied */
    const char *name;         /* the subscription's connection name (copied) */
    const char *channel;      /* its messages: a due time, ms on the server's clock (copied) */
    void (*on_wake)(void *data);
    void *data;
} redis_wake_opts_t;

/* Creates the waker and starts connecting its subscription. Never returns NULL. */
redis_wake_t *redis_wake_new(uv_loop_t *loop, const redis_wake_opts_t *opts);

/* Arms the timer for `due_ms` on the server's clock (a time past or now: at the next
 * turn of the loop), unless it is armed for earlier already. */
void redis_wake_arm_at(redis_wake_t *w, long long due_ms);

/* Learns the server's clock from `server_now_ms`, a time a claim's answer carried. */
void redis_wake_clock(redis_wake_t *w, long long server_now_ms);

/* Now on the server's clock, as last learned (this host's clock before any). */
long long redis_wake_server_now(const redis_wake_t *w);

/* Stops the timer and closes the subscription: on_wake runs no more. */
void redis_wake_stop(redis_wake_t *w);

/* Stops the waker if it runs and frees it; `on_freed` (may be NULL) runs with `data`
 * once its timer has closed, from the loop. */
void redis_wake_free(redis_wake_t *w, void (*on_freed)(void *data), void *data);

#endif /* TERN_REDIS_WAKE_H */
