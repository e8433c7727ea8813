/*
 * http_routes_workflows.c -- /workflows, in node-workflow's shapes:
 *
 *   GET    /workflows        200 [workflow, ...] newest first; ?name=, ?version=,
 *                            ?limit=, ?marker= (next page in x-tern-next-marker)
 *   POST   /workflows        201 workflow + Location; 200 when that very version
 *                            is already stored; 409 for the same version with
 *                            another definition
 *   GET    /workflows/:uuid  200 workflow (also by "name@version" or name)
 *   PUT    /workflows/:uuid  200 workflow (a new version: + Location of its uuid)
 *   DELETE /workflows/:uuid  204
 *
 * The rules of PUT and DELETE under immutable versions are in workflow_ops.h.
 */
#include <stdlib.h>
#include <string.h>

#include "http/http_request.h"
#include "ops/workflow_ops.h"

/* ---- GET /workflows ----------------------------------------------------------- */

static void on_workflow_list(void *data, int status, const json_t *result, const char *message)
{
    api_req_t *r = data;
    if (status != 0) {
        api_reply_status(r, status, message);
        return;
    }
    const char *next = json_string_value(json_object_get(result, "next_marker"));
    if (next != NULL)
        api_add_header(r, "x-tern-next-marker", next);
    api_reply_json(r, 200, json_object_get(result, "workflows"));
}

static void list_workflows(api_req_t *r)
{
    char err[256];
    uint64_t limit;
    if (api_query_uint(r, "limit", WORKFLOW_LIST_LIMIT_DEFAULT, UINT32_MAX, &limit, err,
                       sizeof err) != 0) {
        api_reply_error(r, 409, "InvalidArgument", "%s", err);
        return;
    }
    if (limit == 0) {
        api_reply_error(r, 409, "InvalidArgument", "limit: expected at least 1");
        return;
    }
    /* node-workflow filters on any member of the definition; tern's definitions are
     * found by name and version, and any other filter is refused rather than ignored,
     * so a client never mistakes an unfiltered list for a filtered one. */
    json_t *all = api_query_all(r);
    const char *key;
    json_t *value;
    json_object_foreach(all, key, value)
    {
        if (strcmp(key, "name") != 0 && strcmp(key, "version") != 0 && strcmp(key, "limit") != 0 &&
            strcmp(key, "marker") != 0) {
            api_reply_error(r, 409, "InvalidArgument",
                            "%.64s: workflows are listed by name, version, limit and marker only",
                            key);
            json_decref(all);
            return;
        }
    }
    const char *name = json_string_value(json_object_get(all, "name"));
    const char *version = json_string_value(json_object_get(all, "version"));
    const char *marker = json_string_value(json_object_get(all, "marker"));
    workflow_list_req_t req = {
        .limit = (size_t)limit,
        .marker = marker != NULL && marker[0] != '\0' ? marker : NULL,
        .name = name != NULL && name[0] != '\0' ? name : NULL,
        .version = version != NULL && version[0] != '\0' ? version : NULL,
    };
    workflow_ops_list(api_store(r), &req, on_workflow_list, r);
    json_decref(all);
}

/* ---- POST /workflows, PUT /workflows/:uuid ------------------------------------ */

static void add_location(api_req_t *r, const json_t *result)
{
    char location[80];
    snprintf(location, sizeof location, "/workflows/%s",
             json_string_value(json_object_get(result, "uuid")));
    api_add_header(r, "Location", location);
}

static bool created(const json_t *result)
{
    const char *status = json_string_value(json_object_get(result, "status"));
    return status != NULL && strcmp(status, "created") == 0;
}

static void on_workflow_posted(void *data, int status, const json_t *result, const char *message)
{
    api_req_t *r = data;
    if (status != 0) {
        api_reply_status(r, status, message);
        return;
    }
    add_location(r, result);
    api_reply_json(r, created(result) ? 201 : 200, json_object_get(result, "workflow"));
}

static void post_workflow(api_req_t *r)
{
    if (r->body == NULL) {
        api_reply_error(r, 409, "InvalidArgument", "body: a workflow definition is required");
        return;
    }
    workflow_ops_put(api_ops(r), r->body, on_workflow_posted, r);
}

static void on_workflow_replaced(void *data, int status, const json_t *result, const char *message)
{
    api_req_t *r = data;
    if (status != 0) {
        api_reply_status(r, status, message);
        return;
    }
    /* A new version lives under a uuid of its own: say where. */
    if (created(result))
        add_location(r, result);
    api_reply_json(r, 200, json_object_get(result, "workflow"));
}

static void put_workflow(api_req_t *r)
{
    if (r->body == NULL) {
        api_reply_error(r, 409, "InvalidArgument", "body: a workflow definition is required");
        return;
    }
    workflow_ops_replace(api_ops(r), r->params[0], r->body, on_workflow_replaced, r);
}

/* ---- GET and DELETE /workflows/:uuid ------------------------------------------ */

static void get_workflow(api_req_t *r)
{
    workflow_ops_get(api_store(r), r->params[0], api_on_result, r);
}

static void on_workflow_deleted(void *data, int status, const json_t *result, const char *message)
{
    (void)result;
    api_req_t *r = data;
    if (status != 0)
        api_reply_status(r, status, message);
    else
        api_reply_json(r, 204, NULL);
}

static void delete_workflow(api_req_t *r)
{
    workflow_ops_delete(api_store(r), r->params[0], on_workflow_deleted, r);
}

const api_route_t http_routes_workflows[] = {
    {"GET", "/workflows", list_workflows},           {"POST", "/workflows", post_workflow},
    {"GET", "/workflows/:uuid", get_workflow},       {"PUT", "/workflows/:uuid", put_workflow},
    {"DELETE", "/workflows/:uuid", delete_workflow}, {NULL, NULL, NULL},
};
