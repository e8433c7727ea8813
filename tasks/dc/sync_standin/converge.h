/* TEMPORARY stand-in of the convergence rule's API (tasks/dc/sync/converge.h). Remove
 * this directory when tasks/dc/sync/ is in the tree. */
#ifndef DC_SYNC_CONVERGE_H
#define DC_SYNC_CONVERGE_H

#include <stddef.h>
#include <stdint.h>

typedef struct converge_rule {
    uint64_t max_bytes;
    uint32_t max_passes, stall_passes, min_reduction_pct;
} converge_rule_t;
const char *converge_decide(const converge_rule_t *r, const uint64_t *pass_bytes, size_t n);

#endif
