/*
 * clock.h -- the two clocks: wall time (what is stored in Redis and shown) and
 * monotonic time (for durations).
 */
#ifndef TERN_CLOCK_H
#define TERN_CLOCK_H

#include <stdint.h>

/* Wall clock in milliseconds since the epoch (what is stored in Redis). */
uint64_t clock_wall_ms(void);
/* Monotonic clock in milliseconds, for durations. */
uint64_t clock_mono_ms(void);

#endif /* TERN_CLOCK_H */
