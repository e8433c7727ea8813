/*
 * converge.h -- when an automatic migration stops syncing and switches (RFD 34): after
 * each pass, with the bytes every pass sent so far, either another pass or the reason
 * to switch now:
 *
 *   "size"        the last pass sent at most max_bytes (what is left to send while the
 *                 instance is stopped is small enough);
 *   "max_passes"  n reached max_passes (a bound, whatever the guest does);
 *   "stalled"     the last stall_passes passes each failed to shrink by at least
 *                 min_reduction_pct against the pass before (the guest writes as fast
 *                 as we send: more passes would not help).
 *
 * The settings are the datacenter's migration_converge_* (max_mib * 2^20 is max_bytes).
 * A max_passes of 0 is taken as 1, so the rule always ends.
 */
#ifndef DC_SYNC_CONVERGE_H
#define DC_SYNC_CONVERGE_H

#include <stddef.h>
#include <stdint.h>

typedef struct converge_rule {
    uint64_t max_bytes;
    uint32_t max_passes, stall_passes, min_reduction_pct;
} converge_rule_t;

/* NULL -> another pass; else why switch: "size", "max_passes", "stalled" (static
 * strings). pass_bytes[0..n) are the bytes of each pass so far, oldest first; n == 0
 * answers NULL (no pass yet). */
const char *converge_decide(const converge_rule_t *r, const uint64_t *pass_bytes, size_t n);

#endif
