/*
 * sync_rate.h -- the token bucket that holds a sender to its rate: tokens are bytes,
 * refilled at rate_bytes_s, at most `burst` of them saved up (one window: a pass that
 * waited never sends more than one window at full speed). Taking more tokens than the
 * bucket holds sleeps the calling thread until they would have been refilled; the
 * bucket may go negative by one frame, which the next take pays back.
 *
 * One bucket per pass, used by the one thread that sends.
 */
#ifndef DC_SYNC_RATE_H
#define DC_SYNC_RATE_H

#include <stdint.h>

typedef struct sync_rate {
    uint64_t rate_bytes_s; /* 0: no limit */
    double tokens, burst;
    uint64_t last_ns;
} sync_rate_t;

void sync_rate_init(sync_rate_t *r, uint64_t rate_bytes_s, uint64_t burst);

/* Takes n bytes' worth of tokens, sleeping first when the bucket is short. */
void sync_rate_take(sync_rate_t *r, uint64_t n);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t sync_now_ns(void);

#endif
