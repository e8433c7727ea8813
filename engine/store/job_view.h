/*
 * job_view.h -- a job as callers see it: node-workflow's job shape (uuid, name,
 * execution, params, target, chain, onerror, chain_results, onerror_results,
 * oncancel_results, created_at, exec_after, started, elapsed, timeout) plus tern's
 * fields (version, queue, runner_id, state, error, history, retried, cursor,
 * finished_at, workflow_uuid, blocked_on, wait_info, cancel_requested, post_back_urls,
 * post_backs: the delivery attempts of the outcome to those URLs).
 */
#ifndef TERN_JOB_VIEW_H
#define TERN_JOB_VIEW_H

#include <stdbool.h>

#include <hiredis/hiredis.h>
#include <jansson.h>

#include "base/json_text.h"
#include "store/store.h"

/* The executions a job can be in, in node-workflow's order; NULL-terminated. */
extern const char *const job_executions[];

/* True when s is one of job_executions. */
bool job_execution_valid(const char *s);

/* Builds the view from a job_get.lua reply. Returns a new reference, or NULL when the
 * reply is empty (no such job). */
json_t *job_view_from_reply(const redisReply *reply);

/* What the view of a new job takes from its workflow version alone (its steps as
 * text), made once per version and shared by the creates of its jobs. */
typedef struct job_view_wf job_view_wf_t;

/* Makes it from the workflow's document `wf` (a reference is kept). Free with
 * job_view_wf_free. */
job_view_wf_t *job_view_wf_new(const json_t *wf);
void job_view_wf_free(job_view_wf_t *w);

/* Appends to `out` the view of a job just created as compact JSON text: the bytes
 * json_dumps(..., JSON_COMPACT) gives for the view job_view_from_reply makes of the
 * same job once stored, written without building it. `fields` are the field/value
 * pairs stored for the job (names at even positions; borrowed), `now` the server's
 * time of the create, `w` its workflow's part. A new job has no results, state,
 * history or post-back attempts yet, so these need no reply (job_create.lua answers
 * without the job: tests/bench/script_cost.py --callgrind showed that answer among the
 * larger parts of Redis's work for a 1-step job). */
void job_view_new_text(const store_args_t *fields, long long now, const job_view_wf_t *w,
                       json_text_t *out);

#endif /* TERN_JOB_VIEW_H */
