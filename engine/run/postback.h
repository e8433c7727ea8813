/*
 * postback.h -- tells the URLs a job was created with ("post_back_urls") how the job
 * ended: a POST of {uuid, workflow, execution, params, error, finished_at} to each URL,
 * retried with exponential backoff until a 2xx answer or the attempt limit, every
 * attempt recorded on the job (tern:job:<uuid>:postbacks, shown as "post_backs") so a
 * failing receiver is visible instead of silently dropped.
 *
 * Every ternd runs a deliverer, whatever its role; Redis decides who delivers. When a
 * job ends, finish() (engine/store/lua/lib/finish.lua) schedules one delivery per URL in
 * tern:postbacks and publishes on tern:postbacks:wake. Deliverers claim due deliveries
 * with postback_claim.lua, which moves each into tern:postbacks:lease with a lease and
 * a new fence, so exactly one process makes each attempt; a process that dies
 * mid-delivery loses its lease and another one makes the attempt again (at-least-once:
 * receivers may see a repeat, marked by the same X-Tern-Delivery header). The
 * deliverer's timer is armed to the next due time or lease expiry it learned from its
 * last claim or from the wake channel; there is no fixed polling.
 *
 * Ownership: the deliverer owns its subscription connection, its timer and every
 * delivery in flight (request body, URL, the HTTP request); it borrows the store and
 * the HTTP client, which must outlive it (postback_stop finishes before they go).
 */
#ifndef TERN_POSTBACK_H
#define TERN_POSTBACK_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "base/net_allow.h"
#include "run/http_client.h"
#include "store/store.h"

typedef struct postback postback_t;

typedef struct postback_opts {
    const char *id;        /* this process, for logs (the runner id) */
    uint32_t initial_ms;   /* delay after the first failed attempt (default 1000) */
    uint32_t max_ms;       /* cap of one delay (default 300000) */
    uint32_t max_attempts; /* attempts per URL, then give up (default 10) */
    uint32_t timeout_ms;   /* one POST, connect to last byte (default 10000) */
    uint32_t concurrency;  /* deliveries in flight per process (default 64) */
    /* The networks receivers may be in (borrowed: must outlive the deliverer), or NULL:
     * any. A delivery to a URL whose every address is outside them fails at once and
     * is not retried (the attempt is recorded, gave_up). */
    const net_allow_t *allow_networks;
} postback_opts_t;

/* Creates the deliverer; it starts claiming when told the store is up. Never returns
 * NULL. */
postback_t *postback_new(uv_loop_t *loop, store_t *store, http_client_t *http,
                         const postback_opts_t *opts);

/* Tells the deliverer the store's connection state changed. */
void postback_store_state(postback_t *pb, bool up);

/* Stops claiming, cancels the POSTs in flight and gives their deliveries back (due at
 * once, for another process), then calls on_stopped(data) once the store has answered
 * (or is unreachable) and its handles are closed; the deliverer is freed after that
 * call. */
void postback_stop(postback_t *pb, void (*on_stopped)(void *data), void *data);

/* The delay in ms after failed attempt number `attempt` (1-based): initial_ms doubled
 * each time, at most max_ms. */
uint64_t postback_delay_ms(const postback_opts_t *o, uint32_t attempt);

/* The body POSTed for a job (new reference): {"uuid", "workflow", "execution",
 * "params", "error", "finished_at"}. `params_json` and `error_json` are the stored JSON
 * texts (empty: {} and null); `finished_at_ms` 0 gives null. */
json_t *postback_body(const char *uuid, const char *workflow, const char *execution,
                      const char *params_json, const char *error_json, uint64_t finished_at_ms);

#endif /* TERN_POSTBACK_H */
