/*
 * watch_view.h -- how `tern job watch` draws a job, the way RFD 34 draws a migration:
 *
 *   Job 6f0c1d2e-… (migrate 1.0.0):
 *   ✓ reserve (3m18s)
 *   ✓ sync (1h52m07s)
 *   ↻ switch (4.1s, attempt 1): TaskTimeout: no answer in 4 s; will retry
 *   ☐ switch  39% [=======>           ] 1.21 GiB/3.00 GiB  45.3 MiB/s  ETA 41s
 *   ...
 *   Job succeeded in 1h58m02s.
 *
 * One line per finished step attempt with its mark and duration: ✓ succeeded, ✗ failed,
 * ↻ retry (or requeued), ⏸ waiting, ⊘ canceled; onerror and oncancel steps are prefixed
 * with their chain ("✓ onerror: report (1ms)"). On a terminal the running step has a
 * live line, redrawn in place ('\r' and the ANSI clear-line escape, or spaces on a
 * "dumb" one): its progress bar with percent, bytes, rate and ETA when its task reports
 * progress, else its name and a clock. Piped, the same lines are printed plainly, with
 * a "☐" progress line each time a step passes another tenth of its work, and no escape
 * code at all. Colours only when term.color says so.
 *
 * The view is pure: it is fed the job (GET /jobs/:uuid) and the events of the job's
 * stream (see "Events" in docs/WORKFLOWS.md) and writes to a FILE; the driver (watch.c) decides
 * which "finished" event is the last one. json_t arguments are borrowed.
 */
#ifndef TERN_CLI_WATCH_VIEW_H
#define TERN_CLI_WATCH_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "term.h"

typedef struct watch_view watch_view_t;

/* A view writing to `out` with the capabilities `term` (copied). Never NULL. */
watch_view_t *watch_view_new(FILE *out, const term_caps_t *term);
void watch_view_free(watch_view_t *v);

/* Learns the job: its uuid, workflow name and version (for the header), and its
 * chains (to name the step that runs next). Prints the header the first time. */
void watch_view_job(watch_view_t *v, const json_t *job);

/* Draws one event of the job's stream. `now_ms` is the wall clock in ms. A "finished"
 * event only ends the live line: the driver then calls watch_view_outcome (the last
 * run) or watch_view_run_end (a run that was retried later). */
void watch_view_event(watch_view_t *v, const json_t *event, uint64_t now_ms);

/* Redraws the live line with the clock at `now_ms` (terminal only; else nothing). */
void watch_view_tick(watch_view_t *v, uint64_t now_ms);

/* A run of the job ended as `execution` but the job was retried afterwards: prints
 * "✗ job failed" (or canceled) and goes on. */
void watch_view_run_end(watch_view_t *v, const char *execution);

/* Prints the last line, "Job succeeded in 1.4s." or "Job failed after 3.2s:
 * TaskTimeout: ... (step resize)." `job` (may be NULL) supplies the error and the
 * elapsed time. */
void watch_view_outcome(watch_view_t *v, const char *execution, const json_t *job);

/* Clears the live line, if one is shown (before leaving). */
void watch_view_clear(watch_view_t *v);

/* Renders a progress line into buf for step `name` from `progress` ({percent, bytes,
 * total_bytes, rate, eta_s, message}, any may be missing), in at most `width` display
 * columns: "☐ sync  39% [=======>    ] 1.21 GiB/3.00 GiB  45.3 MiB/s  ETA 41s". With
 * `with_bar` false there is no bar. When the line does not fit, the message goes first,
 * then the rate, the bytes, the bar (below 10 columns), the ETA, the percent, and last
 * the name is shortened with "…". Returns buf. */
char *watch_progress_line(char *buf, size_t n, int width, const char *name, const json_t *progress,
                          bool with_bar);

/* The percent done of `progress`: its "percent", else bytes / total_bytes; -1 when
 * neither is known. Clamped to 0..100. */
double watch_progress_percent(const json_t *progress);

#endif /* TERN_CLI_WATCH_VIEW_H */
