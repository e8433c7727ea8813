/*
 * job_history.h -- a job's events told from its record, for a job whose event stream
 * is gone (a job that succeeded keeps its stream only a while: success_events_s in
 * config.h). GET /jobs/:uuid/events serves these instead.
 */
#ifndef TERN_JOB_HISTORY_H
#define TERN_JOB_HISTORY_H

#include <jansson.h>

/* The events of the job `view` (job_view.c's shape, borrowed): "created", "running"
 * when it started, one "step" per result entry of each phase, and "finished" when it
 * ended, each marked "from_record": true. Returns a new array of {"id": "<ms>-<n>",
 * "event": {...}} in order, n counting from 1, ms the event's time (ids order like
 * stream ids). */
json_t *job_history_from_view(const json_t *view);

#endif /* TERN_JOB_HISTORY_H */
