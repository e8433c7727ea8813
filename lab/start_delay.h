/*
 * start_delay.h -- when an agent's first NIC reconcile runs: a delay drawn uniformly
 * in [min, max] seconds (the datacenter's net_reconcile_start_delay_s), so that agents
 * started together (a whole lab, a datacenter after a power cut) do not all read and
 * change the inventory at once (RFD 58, "Reaping": net-agent waits 2 to 10 minutes).
 * The random source is a parameter, so tests give their own.
 */
#ifndef LAB_START_DELAY_H
#define LAB_START_DELAY_H

#include <stdint.h>

/* A source of uniformly distributed 64-bit values; `arg` is the source's own. */
typedef uint64_t (*start_delay_rand_fn)(void *arg);

/* A delay in milliseconds, uniform over [min_s * 1000, max_s * 1000] (both ends
 * included; min_s when max_s <= min_s). Draws from `rand` until a value falls in the
 * largest whole multiple of the range, so no delay is likelier than another. */
uint64_t start_delay_draw_ms(uint64_t min_s, uint64_t max_s, start_delay_rand_fn rand, void *arg);

/* The system's random source (getrandom); arg unused. */
uint64_t start_delay_os_random(void *arg);

#endif
