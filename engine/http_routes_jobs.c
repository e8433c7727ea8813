/*
 * http_routes_jobs.c -- /jobs: create, read, cancel, resume, retry.
 */
#include <string.h>

#include "common.h"
#include "http_request.h"

static void on_job_answer(void *data, int status, const json_t *result, const char *message)
{
    api_req_t *r = data;
    if (status != 0)
        api_reply_status(r, status, message);
    else
        api_reply_json(r, 200, result);
}

static void get_job(api_req_t *r)
{
    job_ops_get(api_ops(r), r->params[0], on_job_answer, r);
}

static void on_job_created(void *data, int status, const json_t *result, const char *message)
{
    api_req_t *r = data;
    if (status != 0) {
        api_reply_status(r, status, message);
        return;
    }
    char location[80];
    snprintf(location, sizeof location, "/jobs/%s",
             json_string_value(json_object_get(result, "uuid")));
    api_add_header(r, "Location", location);
    api_reply_json(r, 201, result);
}

static void post_jobs(api_req_t *r)
{
    const json_t *b = r->body;
    const char *workflow = json_string_value(json_object_get(b, "workflow"));
    if (workflow == NULL) {
        api_reply_error(r, 409, "InvalidArgument", "workflow: required (a workflow uuid or name)");
        return;
    }
    json_t *target = json_object_get(b, "target");
    if (target != NULL && !json_is_string(target) && !json_is_null(target)) {
        api_reply_error(r, 409, "InvalidArgument", "target: expected a string");
        return;
    }
    job_create_req_t req = {
        .workflow = workflow,
        .params = json_object_get(b, "params"),
        .target = json_string_value(target),
        .locks = json_string_value(json_object_get(b, "locks")),
    };
    job_ops_create(api_ops(r), &req, on_job_created, r);
}

static void post_cancel(api_req_t *r)
{
    job_ops_cancel(api_ops(r), r->params[0], "api", on_job_answer, r);
}

static void post_resume(api_req_t *r)
{
    const json_t *b = r->body;
    job_ops_resume(api_ops(r), r->params[0], json_object_get(b, "result"),
                   json_object_get(b, "error"), "api", on_job_answer, r);
}

static void post_retry(api_req_t *r)
{
    const json_t *b = r->body;
    job_ops_redrive(api_ops(r), r->params[0], json_string_value(json_object_get(b, "from_step")),
                    json_object_get(b, "params"), "api", on_job_answer, r);
}

const api_route_t http_routes_jobs[] = {
    {"POST", "/jobs", post_jobs},
    {"GET", "/jobs/:uuid", get_job},
    {"POST", "/jobs/:uuid/cancel", post_cancel},
    {"POST", "/jobs/:uuid/resume", post_resume},
    {"POST", "/jobs/:uuid/retry", post_retry},
    {NULL, NULL, NULL},
};
