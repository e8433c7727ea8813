/*
 * metrics.h -- process-local counters and histograms for GET /metrics (Prometheus
 * text format 0.0.4): HTTP requests by route, method and status; step attempts by task
 * and outcome; step retries; post-back attempts; event streams open. Gauges that live
 * in Redis (jobs by execution, queue depth, delayed jobs, jobs in flight on runners,
 * pending post-backs) are read by the /metrics route in one round trip and handed to
 * metrics_render_full, which renders both.
 *
 * Everything here runs on the loop thread only (the tables are process globals, like
 * the process they describe).
 */
#ifndef TERN_METRICS_H
#define TERN_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

/* Counts one HTTP request and its latency. `route` is the route's pattern. */
void metrics_http_observe(const char *route, const char *method, int status, double seconds);

/* Observes one finished step attempt: task "core.sleep", status "succeeded", "failed",
 * "timeout", "waiting", "requeued". */
void metrics_step_observe(const char *task, const char *status, double seconds);

/* Counts one retry of a step of `task` (a failed attempt that will run again). */
void metrics_retry_observe(const char *task);

/* Counts one post-back attempt: "delivered", "failed" (will be retried) or "gave_up". */
void metrics_postback_observe(const char *outcome);

/* Event streams open in this process: +1 when one is accepted, -1 when it is freed. */
void metrics_streams_add(int delta);

/* Event streams open now (for logs and tests). */
long metrics_streams_open(void);

/* The process-local metrics as Prometheus text (malloc'd; caller frees). */
char *metrics_render(void);

/* The whole /metrics page: the gauges read from Redis, then the process-local metrics.
 * `store` (borrowed, NULL when Redis could not be read) has the shape
 *   {"jobs": {"<execution>": n, ...}, "jobs_total": n, "delayed": n,
 *    "queues": {"<queue>": depth, ...}, "runners": n, "in_flight": n,
 *    "postbacks_pending": n, "postbacks_in_flight": n}
 * (missing members are left out of the page). `redis_up` and `rtt_us` describe this
 * process's store connection. Returns malloc'd text; caller frees. */
char *metrics_render_full(const json_t *store, bool redis_up, uint64_t rtt_us);

/* Forgets everything (tests). */
void metrics_reset(void);

#endif /* TERN_METRICS_H */
