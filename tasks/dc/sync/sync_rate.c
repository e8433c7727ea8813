/*
 * sync_rate.c -- a token bucket in bytes per second (sync_rate.h).
 */
#include "sync_rate.h"

#include <errno.h>
#include <time.h>

uint64_t sync_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void sync_rate_init(sync_rate_t *r, uint64_t rate_bytes_s, uint64_t burst)
{
    r->rate_bytes_s = rate_bytes_s;
    r->burst = (double)burst;
    /* Starts empty: the first window is paced like every other, so that a short pass
     * still keeps to its rate. */
    r->tokens = 0;
    r->last_ns = sync_now_ns();
}

static void refill(sync_rate_t *r)
{
    uint64_t now = sync_now_ns();
    r->tokens += (double)(now - r->last_ns) * (double)r->rate_bytes_s / 1e9;
    if (r->tokens > r->burst)
        r->tokens = r->burst;
    r->last_ns = now;
}

void sync_rate_take(sync_rate_t *r, uint64_t n)
{
    if (!r->rate_bytes_s)
        return;
    refill(r);
    if (r->tokens < (double)n) {
        double wait_s = ((double)n - r->tokens) / (double)r->rate_bytes_s;
        struct timespec ts = {.tv_sec = (time_t)wait_s,
                              .tv_nsec = (long)((wait_s - (double)(time_t)wait_s) * 1e9)};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
        refill(r);
    }
    r->tokens -= (double)n;
}
