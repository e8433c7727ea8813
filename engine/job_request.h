/*
 * job_request.h -- the body of POST /jobs read into a job creation request.
 *
 * This is the pure part of the route (no server, no Redis), kept apart so that unit
 * tests and the fuzz targets can drive it directly. The mapping is node-workflow's:
 * the job's own members (workflow, target, exec_after, locks, params, uuid,
 * post_back_urls, num_attempts) are taken as they are, and every other top-level
 * member becomes a param.
 */
#ifndef TERN_JOB_REQUEST_H
#define TERN_JOB_REQUEST_H

#include <stddef.h>

#include <jansson.h>

#include "job_ops.h"

/* Reads `body` (a JSON object, borrowed; NULL when the request had no body) into
 * *out. Returns 0 with out->params a new reference the caller must json_decref and
 * must not change (it may be body's own params object; strings and post_back_urls
 * are borrowed from body), or TERN_EINVAL with the
 * message the API answers ("workflow: required (a workflow uuid or name)") in err;
 * then out->params is NULL. */
int job_request_parse(const json_t *body, job_create_req_t *out, char *err, size_t errlen);

#endif /* TERN_JOB_REQUEST_H */
