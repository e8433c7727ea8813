/*
 * start_delay.c -- the delay of an agent's first NIC reconcile (start_delay.h).
 */
#include "start_delay.h"

#include <sys/random.h>
#include <time.h>

uint64_t start_delay_draw_ms(uint64_t min_s, uint64_t max_s, start_delay_rand_fn rand, void *arg)
{
    /* The datacenter's checks keep both within a day, so no product overflows. */
    uint64_t lo = min_s * 1000u;
    if (max_s <= min_s)
        return lo;
    uint64_t span = (max_s - min_s) * 1000u + 1u; /* the number of possible delays */
    /* The values below `limit` are an equal number of times each remainder. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % span;
    uint64_t v;
    do
        v = rand(arg);
    while (v >= limit);
    return lo + v % span;
}

uint64_t start_delay_os_random(void *arg)
{
    (void)arg;
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) == (ssize_t)sizeof v)
        return v;
    /* No entropy to be had (a kernel without getrandom): the clock's nanoseconds
     * still spread agents started together. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec;
}
