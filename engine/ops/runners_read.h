/*
 * runners_read.h -- GET /runners: the runners registered in Redis (tern:runners and
 * tern:runner:<id>), each with its lease and what it last reported. A runner is alive
 * while its lease has not expired on the Redis server's clock; a dead one stays
 * listed until another runner reaps its jobs.
 */
#ifndef TERN_RUNNERS_READ_H
#define TERN_RUNNERS_READ_H

#include "ops/job_ops.h"
#include "store/store.h"

/* Result: an array, by runner id, of {"id", "alive", "lease_expires_at" (ISO 8601),
 * "lease_ms_left" (negative once expired; a runner that gave its lease up has a null
 * expiry and 0 left), "last_seen_at" (ISO 8601 or null), "jobs"
 * (jobs it holds), "info" (what its heartbeat reports: concurrency, queues, ...)}. */
void runners_read(store_t *store, job_ops_cb cb, void *data);

#endif /* TERN_RUNNERS_READ_H */
