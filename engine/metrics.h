/*
 * metrics.h -- process-local counters and histograms for GET /metrics (Prometheus
 * text format): HTTP requests by route, method and status; step durations by task
 * and outcome; retries. Gauges that live in Redis (jobs by execution, queue depth)
 * are read by the /metrics route itself and appended to what this renders.
 * Everything here runs on the loop thread only.
 */
#ifndef TERN_METRICS_H
#define TERN_METRICS_H

/* Counts one HTTP request and its latency. `route` is the route's pattern. */
void metrics_http_observe(const char *route, const char *method, int status, double seconds);

/* Observes one finished step attempt: task "core.sleep", status "succeeded", "failed",
 * "retry", "waiting", "requeued", "canceled". */
void metrics_step_observe(const char *task, const char *status, double seconds);

/* The process-local metrics as Prometheus text (malloc'd; caller frees). */
char *metrics_render(void);

/* Forgets everything (tests). */
void metrics_reset(void);

#endif /* TERN_METRICS_H */
