/*
 * http_routes_schedules.c -- /schedules, recurring schedules of jobs:
 *
 *   GET    /schedules               200 [schedule, ...] newest first; ?limit= (at most
 *                                   1000, default 100)
 *   POST   /schedules               201 schedule + Location
 *   GET    /schedules/:uuid         200 schedule
 *   DELETE /schedules/:uuid         204 (the jobs it created stay)
 *   POST   /schedules/:uuid/pause   200 schedule
 *   POST   /schedules/:uuid/resume  200 schedule
 *
 * What a schedule is and shows is in ops/schedule_ops.h and model/schedule.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_request.h"
#include "ops/schedule_ops.h"

static void on_schedule_list(void *data, int status, const json_t *result, const char *message)
{
    api_req_t *r = data;
    if (status != 0) {
        api_reply_status(r, status, message);
        return;
    }
    api_reply_json(r, 200, json_object_get(result, "schedules"));
}

static void list_schedules(api_req_t *r)
{
    char err[256];
    uint64_t limit;
    if (api_query_uint(r, "limit", SCHEDULE_LIST_LIMIT_DEFAULT, SCHEDULE_LIST_LIMIT_MAX, &limit,
                       err, sizeof err) != 0) {
        api_reply_error(r, 409, "InvalidArgument", "%s", err);
        return;
    }
    if (limit == 0) {
        api_reply_error(r, 409, "InvalidArgument", "limit: expected at least 1");
        return;
    }
    schedule_ops_list(api_store(r), (size_t)limit, on_schedule_list, r);
}

static void on_schedule_created(void *data, int status, const json_t *result, const char *message)
{
    api_req_t *r = data;
    if (status != 0) {
        api_reply_status(r, status, message);
        return;
    }
    char location[80];
    snprintf(location, sizeof location, "/schedules/%s",
             json_string_value(json_object_get(result, "uuid")));
    api_add_header(r, "Location", location);
    api_reply_json(r, 201, result);
}

static void post_schedule(api_req_t *r)
{
    if (r->body == NULL) {
        api_reply_error(r, 409, "InvalidArgument", "body: a schedule is required");
        return;
    }
    schedule_ops_create(api_ops(r), r->body, on_schedule_created, r);
}

static void get_schedule(api_req_t *r)
{
    schedule_ops_get(api_store(r), r->params[0], api_on_result, r);
}

static void on_schedule_deleted(void *data, int status, const json_t *result, const char *message)
{
    (void)result;
    api_req_t *r = data;
    if (status != 0)
        api_reply_status(r, status, message);
    else
        api_reply_json(r, 204, NULL);
}

static void delete_schedule(api_req_t *r)
{
    schedule_ops_delete(api_store(r), r->params[0], on_schedule_deleted, r);
}

static void pause_schedule(api_req_t *r)
{
    schedule_ops_pause(api_store(r), r->params[0], true, api_on_result, r);
}

static void resume_schedule(api_req_t *r)
{
    schedule_ops_pause(api_store(r), r->params[0], false, api_on_result, r);
}

const api_route_t http_routes_schedules[] = {
    {"GET", "/schedules", list_schedules},
    {"POST", "/schedules", post_schedule},
    {"GET", "/schedules/:uuid", get_schedule},
    {"DELETE", "/schedules/:uuid", delete_schedule},
    {"POST", "/schedules/:uuid/pause", pause_schedule},
    {"POST", "/schedules/:uuid/resume", resume_schedule},
    {NULL, NULL, NULL},
};
