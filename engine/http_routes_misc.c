/*
 * http_routes_misc.c -- GET /ping and GET /tasks.
 */
#include "common.h"
#include "http_request.h"

static void get_ping(api_req_t *r)
{
    bool up = store_is_up(api_store(r));
    json_t *body = json_pack("{s:s, s:b}", "ping", "pong", "redis", up);
    api_reply_json(r, up ? 200 : 503, body);
    json_decref(body);
}

static void get_tasks(api_req_t *r)
{
    json_t *body = plugin_registry_describe(api_plugins(r));
    api_reply_json(r, 200, body);
    json_decref(body);
}

const api_route_t http_routes_misc[] = {
    {"GET", "/ping", get_ping},
    {"GET", "/tasks", get_tasks},
    {NULL, NULL, NULL},
};
