/*
 * job_stats.h -- GET /stats: how many jobs are in each execution, by when they were
 * created, in node-workflow's shape:
 *
 *   {"current":   {"queued": 2, "failed": 0, ...},   created in the last hour
 *    "past_hour": {...},                             created 1 to 2 hours ago
 *    "past_24h":  {...},                             created 2 to 24 hours ago
 *    "all_time":  {...},                             created earlier
 *    "total":     {...}}                             all of them (tern's addition)
 *
 * The periods do not overlap (node-workflow's rule). Counts come from the
 * per-execution indexes in one round trip (job_stats.lua).
 */
#ifndef TERN_JOB_STATS_H
#define TERN_JOB_STATS_H

#include "ops/job_ops.h"
#include "store/store.h"

/* Result: the object above, every execution present in every period. */
void job_stats_get(store_t *store, job_ops_cb cb, void *data);

#endif /* TERN_JOB_STATS_H */
