/*
 * http_routes_workflows.c -- /workflows: create and read workflow definitions.
 */
#include <string.h>

#include "common.h"
#include "http_request.h"

static void on_workflow_put(void *data, int status, const json_t *result, const char *message)
{
    api_req_t *r = data;
    if (status != 0) {
        api_reply_status(r, status, message);
        return;
    }
    const char *uuid = json_string_value(json_object_get(result, "uuid"));
    char location[80];
    snprintf(location, sizeof location, "/workflows/%s", uuid);
    api_add_header(r, "Location", location);
    bool created = strcmp(json_string_value(json_object_get(result, "status")), "created") == 0;
    api_reply_json(r, created ? 201 : 200, result);
}

static void post_workflows(api_req_t *r)
{
    if (r->body == NULL) {
        api_reply_error(r, 409, "InvalidArgument", "body: a workflow definition is required");
        return;
    }
    job_ops_workflow_put(api_ops(r), r->body, on_workflow_put, r);
}

static void on_workflow_get(void *data, int status, const json_t *result, const char *message)
{
    api_req_t *r = data;
    if (status != 0)
        api_reply_status(r, status, message);
    else
        api_reply_json(r, 200, result);
}

static void get_workflow(api_req_t *r)
{
    job_ops_workflow_get(api_ops(r), r->params[0], on_workflow_get, r);
}

const api_route_t http_routes_workflows[] = {
    {"POST", "/workflows", post_workflows},
    {"GET", "/workflows/:uuid", get_workflow},
    {NULL, NULL, NULL},
};
