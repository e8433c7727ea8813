/*
 * job_stats.c -- GET /stats counts; see job_stats.h.
 */
#include "job_stats.h"

#include <stdlib.h>

#include "common.h"
#include "job_view.h"

typedef struct stats_op {
    job_ops_cb cb;
    void *data;
} stats_op_t;

/* The periods in the order job_stats.lua answers them. */
static const char *const periods[] = {"current", "past_hour", "past_24h", "all_time", "total"};

static void on_job_stats(void *data, int status, const redisReply *reply, const char *errmsg)
{
    stats_op_t *op = data;
    if (status != 0) {
        op->cb(op->data, status, NULL, errmsg);
        free(op);
        return;
    }
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
    op->cb(op->data, 0, res, NULL);
    json_decref(res);
    free(op);
}

void job_stats_get(store_t *store, job_ops_cb cb, void *data)
{
    store_args_t a;
    store_args_init(&a);
    for (size_t e = 0; job_executions[e] != NULL; e++)
        store_args_push(&a, job_executions[e]);
    stats_op_t *op = xcalloc(1, sizeof *op);
    op->cb = cb;
    op->data = data;
    int rc = store_eval(store, SCRIPT_JOB_STATS, &a, on_job_stats, op);
    store_args_dispose(&a);
    if (rc != 0) {
        free(op);
        cb(data, rc, NULL, "Redis is not reachable");
    }
}
