/*
 * runner.h -- the runner: claims jobs from the queues it serves and carries their
 * steps out on one libuv loop, thousands of jobs in flight, no thread or process per
 * job (except steps that ask for isolation).
 *
 * For each job it holds, the runner keeps the job's frozen workflow (parsed once per
 * workflow version and shared, by uuid: model/workflow_cache.h), params, state and
 * results in memory, starts one attempt at a time through task_ctx, and commits every
 * outcome to Redis in one round trip (step_commit.lua) before it starts the next step.
 * It never trusts memory over Redis: every commit carries the fence it claimed the job
 * with, and a refused commit (another runner took the job after this one was presumed
 * dead) drops the job here.
 *
 * Periodic work, one round trip each heartbeat (tick.lua): renew the lease, re-queue
 * dead runners' jobs, promote due delayed jobs. Between heartbeats a timer set to the
 * next due time (learned from tick replies and from the "wake" channel) promotes
 * delayed work on time, without polling.
 */
#ifndef TERN_RUNNER_H
#define TERN_RUNNER_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "model/workflow_cache.h"
#include "plugins/plugin_loader.h"
#include "run/http_client.h"
#include "store/store.h"

typedef struct runner runner_t;

typedef struct runner_opts {
    const char *id;            /* unique among live runners */
    const char *const *queues; /* queue names served */
    size_t n_queues;
    uint32_t concurrency;       /* jobs in flight at most (default 1000) */
    uint32_t lease_ms;          /* default 10000 */
    uint32_t heartbeat_ms;      /* default lease/5 */
    uint32_t short_retry_ms;    /* retries with a shorter backoff wait on the runner;
                                   longer ones go to the delayed set (default 1000) */
    plugin_registry_t *plugins; /* borrowed */
    http_client_t *http;        /* borrowed; for tern_http_request */
    const char *helper_exe;     /* ternd binary for isolated steps (NULL: refused) */
    const char *plugin_dir;     /* passed to the helper */
    const char *redis_url;      /* passed to the helper (may be NULL) */
    /* The process's cache of parsed workflow versions (borrowed; it must outlive the
     * runner), shared with the job creates of the same process; NULL: the runner makes
     * its own. */
    workflow_cache_t *workflows;
} runner_opts_t;

/* Creates a runner on `loop` using `store` (borrowed; must outlive the runner). It
 * starts claiming when the store is up. Never returns NULL. */
runner_t *runner_new(uv_loop_t *loop, store_t *store, const runner_opts_t *opts);

/* Tells the runner the store's connection state changed (call from the store's
 * on_state callback). */
void runner_store_state(runner_t *r, bool up);

/* Stops claiming at once; lets attempts in flight finish for up to `grace_ms` (each job
 * is handed back to its queue after its current step); then cancels what is left,
 * which other runners re-queue when this runner's lease is given up. Calls
 * on_stopped(data) when the runner holds no job any more and its handles are closed;
 * the runner is freed after that call. */
void runner_stop(runner_t *r, uint32_t grace_ms, void (*on_stopped)(void *data), void *data);

/* Direct start (job_ops_local_runner_t, docs/WORKFLOWS.md, "Direct start"): takes a slot for a new
 * job of `queue` that a create of this process may start here at once; false when the
 * runner does not serve the queue, is stopping or not connected, or is full. Each true
 * is followed by exactly one runner_direct_start (the job started: `fields`, borrowed,
 * are its stored fields) or runner_direct_release (`lost`: the create's answer was lost,
 * so the job may have started unseen: the runner adopts what its list holds). The
 * runner is not freed while reservations are open. */
bool runner_direct_reserve(runner_t *r, const char *queue);
void runner_direct_start(runner_t *r, const char *uuid, const store_args_t *fields, const char *doc,
                         size_t doc_len, long long server_now);
void runner_direct_release(runner_t *r, bool lost);

/* Counters for logs and metrics. New reference:
 * {"in_flight", "claimed", "steps", "finished", "retries", "stale"} */
json_t *runner_stats(const runner_t *r);

#endif /* TERN_RUNNER_H */
