/*
 * http_routes_metrics.c -- GET /metrics: Prometheus text (format 0.0.4).
 *
 * The gauges that live in Redis (jobs by execution, queue depths, delayed jobs, jobs
 * in flight on live runners, pending post-backs) are read by metrics_read.lua in one
 * round trip; the process's own counters come from metrics.c. When Redis cannot be
 * read the page is still served, with tern_redis_up 0 and without the Redis gauges,
 * because a scrape that fails hides exactly the outage it should show.
 */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/metrics.h"
#include "http/http_request.h"

#define CONTENT_TYPE "text/plain; version=0.0.4"

/* {"name": n, ...} from a flat [name, n, name, n, ...] array reply. */
static json_t *pairs_object(const redisReply *r)
{
    json_t *o = json_object();
    for (size_t i = 0; r != NULL && r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i];
        if (k->type != REDIS_REPLY_STRING)
            continue;
        char *name = xstrndup(k->str, k->len);
        json_object_set_new(o, name, json_integer(store_reply_int(r->element[i + 1], 0)));
        free(name);
    }
    return o;
}

/* The gauges of metrics_render_full from metrics_read.lua's reply. */
static json_t *gauges_from_reply(const redisReply *reply)
{
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements < 8)
        return NULL;
    return json_pack("{s:o, s:I, s:I, s:o, s:I, s:I, s:I, s:I}", "jobs",
                     pairs_object(reply->element[0]), "jobs_total",
                     (json_int_t)store_reply_int(reply->element[1], 0), "delayed",
                     (json_int_t)store_reply_int(reply->element[2], 0), "queues",
                     pairs_object(reply->element[3]), "runners",
                     (json_int_t)store_reply_int(reply->element[4], 0), "in_flight",
                     (json_int_t)store_reply_int(reply->element[5], 0), "postbacks_pending",
                     (json_int_t)store_reply_int(reply->element[6], 0), "postbacks_in_flight",
                     (json_int_t)store_reply_int(reply->element[7], 0));
}

static void answer(api_req_t *r, const json_t *gauges)
{
    store_t *s = api_store(r);
    char *text = metrics_render_full(gauges, store_is_up(s), store_last_rtt_us(s));
    api_reply_text(r, 200, CONTENT_TYPE, text, strlen(text));
    free(text);
}

static void on_gauges(void *data, int status, const redisReply *reply, const char *errmsg)
{
    (void)errmsg;
    api_req_t *r = data;
    json_t *gauges = status == 0 ? gauges_from_reply(reply) : NULL;
    answer(r, gauges);
    json_decref(gauges);
}

static void get_metrics(api_req_t *r)
{
    store_args_t a;
    store_args_init(&a);
    int rc = store_eval(api_store(r), SCRIPT_METRICS_READ, &a, on_gauges, r);
    store_args_dispose(&a);
    if (rc != 0)
        answer(r, NULL);
}

const api_route_t http_routes_metrics[] = {
    {"GET", "/metrics", get_metrics},
    {NULL, NULL, NULL},
};
