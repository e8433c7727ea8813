/*
 * api_jobs.h -- jobs a control task asks of the control's own API: POST <api_url>/jobs
 * for each, one after the other, with "Authorization: Bearer <api_token>" when the dc
 * configuration has a token.
 *
 * Each post is {uuid, workflow, target, params, ...} under a uuid that does not change
 * when the step runs again, so a step run again gets the job it made: 201 with the job
 * as it is, or a 4xx (a 409 for the uuid, or the job's own admission check refusing a
 * second start) taken as success when GET /jobs/<uuid> shows that job with its target.
 * No answer or a 5xx fails the step with codes->unavailable (worth a retry: 503
 * OutcomeUnknown means the job may exist, and the same uuid asked again tells); any
 * other answer with codes->refused. Both messages name the step, the workflow, the
 * job's uuid, the status and the API's body.
 */
#ifndef DC_API_JOBS_H
#define DC_API_JOBS_H

#include <stdint.h>

#include <jansson.h>
#include <tern/task.h>

#define API_REQUEST_MS 10000u /* one request to the control's API */

struct dc_state;

/* The headers of a request to the control's API: JSON, and the bearer token when the
 * dc configuration has one (written into `auth`, which must outlive the request). */
void api_headers(const struct dc_state *s, char *auth, size_t authlen, const char *headers[3]);

typedef struct api_job_codes {
    const char *unavailable; /* no answer, or a 5xx */
    const char *refused;     /* a refusal the job itself does not explain */
} api_job_codes_t;

/*
 * POSTs `posts` (stolen, an array), then reports `result` (stolen) as the step's:
 * done, or re-queued after requeue_ms when > 0. Returns `result` itself when there is
 * nothing to post nor to re-queue (the caller's dc_script_ok_fn returns it); NULL when
 * the outcome is reported later or was reported (a failure). Posting needs the dc
 * configuration's "api_url": without it the step fails NoApiUrl. The attempt is kept in
 * the plugin's attempts, so the task's cancel hook must call attempts_end.
 */
json_t *api_jobs_post(tern_ctx *ctx, json_t *posts, json_t *result, uint64_t requeue_ms,
                      const api_job_codes_t *codes);

#endif
