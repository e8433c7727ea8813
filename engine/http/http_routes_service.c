/*
 * http_routes_service.c -- GET /ping, /tasks, /stats and /runners.
 *
 * /ping answers without a token (a load balancer's health check) with node-workflow's
 * fields ("pid", "backend": "up"|"down") beside tern's ("ping", "redis"), and 503
 * while Redis is unreachable.
 */
#include <unistd.h>

#include "http/http_request.h"
#include "ops/job_stats.h"
#include "ops/runners_read.h"

static void get_ping(api_req_t *r)
{
    bool up = store_is_up(api_store(r));
    json_t *body = json_pack("{s:s, s:b, s:I, s:s}", "ping", "pong", "redis", up, "pid",
                             (json_int_t)getpid(), "backend", up ? "up" : "down");
    api_reply_json(r, up ? 200 : 503, body);
    json_decref(body);
}

static void get_tasks(api_req_t *r)
{
    json_t *body = plugin_registry_describe(api_plugins(r));
    api_reply_json(r, 200, body);
    json_decref(body);
}

static void get_stats(api_req_t *r)
{
    job_stats_get(api_store(r), api_on_result, r);
}

static void get_runners(api_req_t *r)
{
    runners_read(api_store(r), api_on_result, r);
}

const api_route_t http_routes_service[] = {
    {"GET", "/ping", get_ping},       {"GET", "/tasks", get_tasks}, {"GET", "/stats", get_stats},
    {"GET", "/runners", get_runners}, {NULL, NULL, NULL},
};
