/*
 * converge.c -- the rule that ends an automatic migration's passes (converge.h).
 */
#include "converge.h"

const char *converge_decide(const converge_rule_t *r, const uint64_t *pass_bytes, size_t n)
{
    if (n == 0)
        return NULL;
    /* The first pass sends the whole disk: it only switches at once when that whole is
     * already small. */
    if (pass_bytes[n - 1] <= r->max_bytes)
        return "size";
    uint32_t max_passes = r->max_passes ? r->max_passes : 1;
    if (n >= max_passes)
        return "max_passes";
    if (r->stall_passes && n > r->stall_passes) {
        size_t stalled = 0;
        for (size_t i = n - r->stall_passes; i < n; i++) {
            /* Shrunk by at least min_reduction_pct: bytes <= before * (100 - pct) / 100. */
            uint64_t before = pass_bytes[i - 1], now = pass_bytes[i];
            uint32_t pct = r->min_reduction_pct > 100 ? 100 : r->min_reduction_pct;
            int shrunk = (long double)now * 100 <= (long double)before * (100 - pct);
            if (!shrunk)
                stalled++;
        }
        if (stalled == r->stall_passes)
            return "stalled";
    }
    return NULL;
}
