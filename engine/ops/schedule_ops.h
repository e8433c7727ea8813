/*
 * schedule_ops.h -- what callers do to recurring schedules: create one, read, list,
 * delete, pause and resume, and install the schedules a workflow declares. Firing
 * them is schedule_fire.h's. Each operation answers through a job_ops_cb exactly
 * once, with the errors of job_ops.h; bad input is TERN_EINVAL naming the member and
 * the fault, and nothing is stored.
 *
 * A schedule as answered (a new object, borrowed by the callback): its definition
 * (model/schedule.h: workflow, name, params, target, every or cron and time_zone,
 * overlap) and "uuid", "created_at", "next_run" (null while paused), "last_run" (the
 * tick last fired, skipped or failed; null before the first), "last_job_uuid", "paused",
 * "fired", "skipped" (ticks that came while the last job was unfinished, with overlap
 * "skip"), "failed" (ticks whose job could not be created) and "last_error". Times are
 * ISO 8601 in UTC.
 */
#ifndef TERN_SCHEDULE_OPS_H
#define TERN_SCHEDULE_OPS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "ops/job_ops.h"
#include "store/store.h"

#define SCHEDULE_LIST_LIMIT_DEFAULT 100
#define SCHEDULE_LIST_LIMIT_MAX     1000

/* Creates a schedule from `body` (borrowed; a request body, which may also say
 * "paused": true). The workflow must exist (else TERN_EINVAL naming "workflow").
 * Result: the schedule. Its first tick is the first after now. */
void schedule_ops_create(job_ops_t *ops, const json_t *body, job_ops_cb cb, void *data);

/* Reads schedule `uuid`. Result: the schedule; TERN_ENOENT when there is none. */
void schedule_ops_get(store_t *store, const char *uuid, job_ops_cb cb, void *data);

/* Lists the newest `limit` schedules (0: the default; capped at the maximum). Result:
 * {"schedules": [...]}. */
void schedule_ops_list(store_t *store, size_t limit, job_ops_cb cb, void *data);

/* Deletes schedule `uuid`; the jobs it created stay. Result: {"uuid"}; TERN_ENOENT
 * when there is none. */
void schedule_ops_delete(store_t *store, const char *uuid, job_ops_cb cb, void *data);

/* Pauses (no tick fires) or resumes (at the first tick after now: ticks missed while
 * paused are not fired) schedule `uuid`; either twice is a no-op. Result: the
 * schedule; TERN_ENOENT when there is none. */
void schedule_ops_pause(store_t *store, const char *uuid, bool pause, job_ops_cb cb, void *data);

/* Installs the schedules of `schedules` (borrowed: the normalized "schedules" array of
 * workflow `workflow`'s definition, see workflow.h), each keyed by the workflow's name
 * and its own: installing the same again changes nothing, a changed one is changed in
 * place (same uuid, counts and pause). Result: {"schedules": [...]} as installed. */
void schedule_ops_install(job_ops_t *ops, const char *workflow, const json_t *schedules,
                          job_ops_cb cb, void *data);

#endif /* TERN_SCHEDULE_OPS_H */
