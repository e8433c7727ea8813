/*
 * job_view.h -- a job as callers see it: node-workflow's job shape (uuid, name,
 * execution, params, target, chain, onerror, chain_results, onerror_results,
 * oncancel_results, created_at, exec_after, started, elapsed, timeout) plus tern's
 * fields (version, queue, runner_id, state, error, history, retried, cursor,
 * finished_at, workflow_uuid).
 */
#ifndef TERN_JOB_VIEW_H
#define TERN_JOB_VIEW_H

#include <hiredis/hiredis.h>
#include <jansson.h>

/* Builds the view from a job_get.lua reply. Returns a new reference, or NULL when the
 * reply is empty (no such job). */
json_t *job_view_from_reply(const redisReply *reply);

#endif /* TERN_JOB_VIEW_H */
