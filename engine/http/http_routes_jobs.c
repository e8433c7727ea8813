/*
 * http_routes_jobs.c -- /jobs: list, create, read, cancel, resume, retry, and the
 * job's info list, in node-workflow's shapes (docs/workflowapi.md and lib/api.js of
 * node-workflow):
 *
 *   GET  /jobs               200 [job, ...] newest first; ?execution=, ?limit=,
 *                            ?marker= (next page in x-tern-next-marker), ?offset=, and
 *                            any other ?key=value filters on params
 *   POST /jobs               201 job + Location; 503 OutcomeUnknown with the job's
 *                            "uuid" when Redis took the create but its answer was lost
 *   GET  /jobs/:uuid         200 job
 *   POST /jobs/:uuid/cancel  200 job; 409 when it already finished
 *   POST /jobs/:uuid/resume  200 job; 409 unless waiting
 *   POST /jobs/:uuid/retry   200 job (tern's redrive); 409 unless failed or canceled,
 *                            or while an unfinished job's locks match its target
 *   GET  /jobs/:uuid/info    200 [entry, ...]
 *   POST /jobs/:uuid/info    200, no body
 *
 * A job path whose uuid is not a UUID answers 404 naming the value, as node-workflow
 * does for any job it cannot find.
 */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/ident.h"
#include "http/http_request.h"
#include "model/job_request.h"
#include "ops/job_info.h"
#include "ops/job_list.h"

/* ---- answers ------------------------------------------------------------------ */

/* Operator actions answer with the whole job, as node-workflow does: once the action
 * is stored, the job is read again (a second round trip). */
static void on_action_done(void *data, int status, const json_t *result, const char *message)
{
    (void)result;
    api_req_t *r = data;
    if (status == TERN_EUNKNOWN)
        api_reply_unknown(r, message, r->params[0]);
    else if (status != 0)
        api_reply_status(r, status, message);
    else
        job_ops_get(api_ops(r), r->params[0], api_on_result, r);
}

/* Answers 404 and returns false unless the path's job uuid is a UUID. */
static bool job_uuid_ok(api_req_t *r)
{
    if (uuid_valid(r->params[0]))
        return true;
    api_reply_error(r, 404, "ResourceNotFound", "job \"%.100s\" does not exist (not a UUID)",
                    r->params[0]);
    return false;
}

/* ---- GET /jobs ---------------------------------------------------------------- */

static void on_job_list(void *data, int status, const json_t *result, const char *message)
{
    api_req_t *r = data;
    if (status != 0) {
        api_reply_status(r, status, message);
        return;
    }
    const char *next = json_string_value(json_object_get(result, "next_marker"));
    if (next != NULL)
        api_add_header(r, "x-tern-next-marker", next);
    /* node-workflow's x-count: how many jobs match, known here only without params
     * filters (the size of the index listed). */
    json_t *total = json_object_get(result, "total");
    if (json_is_integer(total)) {
        char count[24];
        snprintf(count, sizeof count, "%lld", (long long)json_integer_value(total));
        api_add_header(r, "x-count", count);
    }
    api_reply_json(r, 200, json_object_get(result, "jobs"));
}

static void list_jobs(api_req_t *r)
{
    char err[256];
    uint64_t limit, offset;
    int rc =
        api_query_uint(r, "limit", JOB_LIST_LIMIT_DEFAULT, UINT32_MAX, &limit, err, sizeof err);
    if (rc == 0)
        rc = api_query_uint(r, "offset", 0, UINT32_MAX, &offset, err, sizeof err);
    if (rc != 0) {
        api_reply_error(r, 409, "InvalidArgument", "%s", err);
        return;
    }
    if (limit == 0) {
        api_reply_error(r, 409, "InvalidArgument", "limit: expected at least 1");
        return;
    }
    /* node-workflow's rule: every parameter that is not about paging or the execution
     * filters the jobs' params. */
    json_t *filters = api_query_all(r);
    char *execution = api_query_get(r, "execution");
    char *marker = api_query_get(r, "marker");
    static const char *const reserved[] = {"execution", "limit", "offset", "marker"};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(reserved); i++)
        json_object_del(filters, reserved[i]);
    job_list_req_t req = {
        .execution = execution != NULL && execution[0] != '\0' ? execution : NULL,
        .limit = (size_t)limit,
        .marker = marker != NULL && marker[0] != '\0' ? marker : NULL,
        .offset = (size_t)offset,
        .filters = filters,
        .max_bytes = api_list_max_bytes(r),
    };
    job_list(api_store(r), &req, on_job_list, r);
    free(execution);
    free(marker);
    json_decref(filters);
}

/* ---- POST /jobs --------------------------------------------------------------- */

/* The new job's view comes as text (job_ops_create_text) and is sent as it is. */
static void on_job_created(void *data, int status, const char *view, size_t len, const char *uuid,
                           const char *code, const char *message)
{
    api_req_t *r = data;
    if (status == TERN_EUNKNOWN && uuid != NULL) {
        api_reply_unknown(r, message, uuid);
        return;
    }
    if (status != 0) {
        api_reply_status_code(r, status, code, message);
        return;
    }
    char location[80];
    snprintf(location, sizeof location, "/jobs/%s", uuid);
    api_add_header(r, "Location", location);
    api_reply_json_text(r, 201, view, len);
}

static void create_job(api_req_t *r)
{
    char err[1024];
    job_create_req_t req;
    if (job_request_parse(r->body, &req, err, sizeof err) != 0) {
        api_reply_error(r, 409, "InvalidArgument", "%s", err);
        return;
    }
    /* A reference to the params the request holds (maybe the body's own object:
     * job_request.h), released once the create has taken what it needs. */
    json_t *params = (json_t *)req.params;
    job_ops_create_text(api_ops(r), &req, on_job_created, r);
    json_decref(params);
}

/* ---- one job ------------------------------------------------------------------ */

static void get_job(api_req_t *r)
{
    if (job_uuid_ok(r))
        job_ops_get(api_ops(r), r->params[0], api_on_result, r);
}

static void cancel_job(api_req_t *r)
{
    if (job_uuid_ok(r))
        job_ops_cancel(api_ops(r), r->params[0], "api", on_action_done, r);
}

/* Answers 409 naming the first member of the body (NULL: empty) not in the
 * NULL-terminated `allowed`, and returns false; `what` lists the members taken. A
 * misspelt member ("from" for "from_step") would otherwise be ignored and the action
 * done as if it had not been sent. */
static bool body_members_ok(api_req_t *r, const char *const *allowed, const char *what)
{
    const char *key;
    json_t *value;
    json_object_foreach(r->body, key, value)
    {
        bool known = false;
        for (size_t i = 0; allowed[i] != NULL && !known; i++)
            known = strcmp(key, allowed[i]) == 0;
        if (!known) {
            api_reply_error(r, 409, "InvalidArgument", "%s: unknown member; %s", key, what);
            return false;
        }
    }
    return true;
}

/* node-workflow's resume: `error` (any non-empty value) fails the waiting step,
 * otherwise `result` (default "OK") is its result. tern's errors are {code, message}
 * objects, so a string error becomes {"code": "ExternalTaskError", "message": it}.
 * Both at once are refused: which one the client meant cannot be told. */
static void resume_job(api_req_t *r)
{
    static const char *const members[] = {"result", "error", NULL};
    if (!job_uuid_ok(r) ||
        !body_members_ok(r, members, "a resume takes result or error (not both)"))
        return;
    json_t *result = json_object_get(r->body, "result");
    json_t *error = json_object_get(r->body, "error");
    if (result != NULL && !json_is_null(result) && error != NULL && !json_is_null(error)) {
        api_reply_error(r, 409, "InvalidArgument",
                        "result, error: given both; a resume takes result (the waiting step "
                        "succeeds) or error (it fails), not both");
        return;
    }
    json_t *err_obj = NULL;
    if (error != NULL && !json_is_null(error) &&
        !(json_is_string(error) && json_string_length(error) == 0) &&
        !(json_is_boolean(error) && !json_is_true(error))) {
        if (json_is_string(error)) {
            err_obj = json_pack("{s:s, s:O}", "code", "ExternalTaskError", "message", error);
        } else if (json_is_object(error)) {
            err_obj = json_deep_copy(error);
            if (json_object_get(err_obj, "code") == NULL)
                json_object_set_new(err_obj, "code", json_string("ExternalTaskError"));
            if (!json_is_string(json_object_get(err_obj, "code"))) {
                json_decref(err_obj);
                api_reply_error(r, 409, "InvalidArgument", "error.code: expected a string");
                return;
            }
        } else {
            api_reply_error(r, 409, "InvalidArgument",
                            "error: expected a message (a string) or an object {code, message}");
            return;
        }
    }
    json_t *ok = json_string("OK");
    job_ops_resume(api_ops(r), r->params[0], result != NULL ? result : ok, err_obj, "api",
                   on_action_done, r);
    json_decref(ok);
    json_decref(err_obj);
}

/* Reads an optional string member; answers 409 naming it when it has another type. */
static bool body_string(api_req_t *r, const char *key, const char *what, const char **out)
{
    json_t *v = json_object_get(r->body, key);
    *out = NULL;
    if (v == NULL || json_is_null(v))
        return true;
    if (!json_is_string(v)) {
        api_reply_error(r, 409, "InvalidArgument", "%s: expected %s", key, what);
        return false;
    }
    *out = json_string_value(v);
    return true;
}

static void retry_job(api_req_t *r)
{
    static const char *const members[] = {"from_step", "params", NULL};
    if (!job_uuid_ok(r) || !body_members_ok(r, members, "a retry takes from_step and params"))
        return;
    const char *from_step;
    if (!body_string(r, "from_step", "a step name (a string)", &from_step))
        return;
    job_ops_redrive(api_ops(r), r->params[0], from_step, json_object_get(r->body, "params"), "api",
                    on_action_done, r);
}

/* ---- info --------------------------------------------------------------------- */

static void on_info_added(void *data, int status, const json_t *result, const char *message)
{
    (void)result;
    api_req_t *r = data;
    if (status != 0)
        api_reply_status(r, status, message);
    else
        api_reply_json(r, 200, NULL);
}

/* node-workflow stores the whole body but the path's uuid, so {"message": {...}}
 * reads back as [{"message": {...}}]. */
static void post_info(api_req_t *r)
{
    if (!job_uuid_ok(r))
        return;
    json_t *msg = json_object_get(r->body, "message");
    if (msg != NULL && !json_is_object(msg) && !json_is_string(msg)) {
        api_reply_error(r, 409, "InvalidArgument", "message: expected an object (or a string)");
        return;
    }
    json_t *entry = r->body != NULL ? json_deep_copy(r->body) : json_object();
    json_object_del(entry, "uuid");
    job_info_add(api_store(r), r->params[0], entry, on_info_added, r);
    json_decref(entry);
}

static void get_info(api_req_t *r)
{
    if (job_uuid_ok(r))
        job_info_get(api_store(r), r->params[0], api_on_result, r);
}

const api_route_t http_routes_jobs[] = {
    {"GET", "/jobs", list_jobs},
    {"POST", "/jobs", create_job},
    {"GET", "/jobs/:uuid", get_job},
    {"POST", "/jobs/:uuid/cancel", cancel_job},
    {"POST", "/jobs/:uuid/resume", resume_job},
    {"POST", "/jobs/:uuid/retry", retry_job},
    {"GET", "/jobs/:uuid/info", get_info},
    {"POST", "/jobs/:uuid/info", post_info},
    {NULL, NULL, NULL},
};
