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
#include <stdint.h>

#include <jansson.h>

/* A job to create, as ops/job_ops.h takes it. */
typedef struct job_create_req {
    const char *workflow;   /* uuid, "name@version" or name (latest version) */
    const json_t *params;   /* object or NULL ({}); borrowed */
    const char *target;     /* or NULL */
    uint64_t exec_after_ms; /* 0: now; else ms since the epoch */
    const char *locks;      /* regular expression (lock_pattern.h) or NULL */
    const char *uuid;       /* or NULL: a new one is made */
    /* Array of http(s) URLs told when the job ends, or NULL; borrowed. */
    const json_t *post_back_urls;
    /* One more job-level hold of capacity 1 beyond the workflow's, or NULL (not taken
     * from a body: a schedule's jobs wait on "schedule:<uuid>" to run one at a time). */
    const char *extra_hold;
} job_create_req_t;

#define JOB_POST_BACK_URLS_MAX 16   /* URLs per job */
#define JOB_POST_BACK_URL_MAX  2048 /* bytes per URL */

/* Reads `body` (a JSON object, borrowed; NULL when the request had no body) into
 * *out. Returns 0 with out->params a new reference the caller must json_decref and
 * must not change (it may be body's own params object; strings and post_back_urls
 * are borrowed from body), or TERN_EINVAL with the
 * message the API answers ("workflow: required (a workflow uuid or name)") in err;
 * then out->params is NULL. */
int job_request_parse(const json_t *body, job_create_req_t *out, char *err, size_t errlen);

#endif /* TERN_JOB_REQUEST_H */
