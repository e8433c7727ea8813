/*
 * job_stats.c -- GET /stats counts; see job_stats.h.
 */
#include "ops/job_stats.h"

#include "base/alloc.h"
#include "ops/store_op.h"
#include "store/job_view.h"

/* The periods in the order job_stats.lua answers them. */
static const char *const periods[] = {"current", "past_hour", "past_24h", "all_time", "total"};

static void on_job_stats(void *data, int status, const redisReply *reply, const char *errmsg)
{
    store_op_t *op = data;
    if (store_op_failed(op, status, errmsg))
        return;
    const redisReply *counts = store_reply_at(reply, 1);
    json_t *res = json_object();
    for (size_t p = 0; p < TERN_ARRAY_SIZE(periods); p++) {
        json_t *period = json_object();
        for (size_t e = 0; job_executions[e] != NULL; e++) {
            const redisReply *row = store_reply_at(counts, e);
            json_object_set_new(period, job_executions[e],
                                json_integer(store_reply_int(store_reply_at(row, p), 0)));
        }
        json_object_set_new(res, periods[p], period);
    }
    store_op_done(op, 0, res, NULL);
    json_decref(res);
}

void job_stats_get(store_t *store, job_ops_cb cb, void *data)
{
    store_args_t a;
    store_args_init(&a);
    for (size_t e = 0; job_executions[e] != NULL; e++)
        store_args_push(&a, job_executions[e]);
    store_op_t *op = store_op_new(sizeof *op, cb, data, NULL);
    store_op_send(op, store, SCRIPT_JOB_STATS, &a, on_job_stats);
}
