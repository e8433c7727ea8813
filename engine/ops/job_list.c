/*
 * job_list.c -- GET /jobs pages; see job_list.h. The paging itself (marker, budget,
 * filters) runs in job_list.lua; this file checks the request and builds the views.
 */
#include "ops/job_list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "ops/list_page.h"
#include "ops/store_op.h"
#include "store/job_view.h"

typedef struct list_op {
    store_op_t base; /* first: the reply callback's data is both */
    bool filtered;   /* params filters apply: the index's size is not the count */
} list_op_t;

static void on_job_list(void *data, int status, const redisReply *reply, const char *errmsg)
{
    list_op_t *op = data;
    if (store_op_failed(&op->base, status, errmsg))
        return;
    const redisReply *time = store_reply_at(reply, 1), *uuid = store_reply_at(reply, 2);
    const redisReply *snaps = store_reply_at(reply, 3);
    json_t *jobs = json_array();
    for (size_t i = 0; snaps != NULL && i < snaps->elements; i++) {
        json_t *view = job_view_from_reply(snaps->element[i]);
        if (view != NULL)
            json_array_append_new(jobs, view);
    }
    json_t *next = list_page_next_marker(time, uuid);
    json_t *total =
        op->filtered ? json_null() : json_integer(store_reply_int(store_reply_at(reply, 0), 0));
    json_t *res = json_pack("{s:o, s:o, s:o}", "jobs", jobs, "next_marker", next, "total", total);
    store_op_done(&op->base, 0, res, NULL);
    json_decref(res);
}

void job_list(store_t *store, const job_list_req_t *req, job_ops_cb cb, void *data)
{
    char err[256], mtime[24] = "", muuid[40] = "";
    if (req->execution != NULL && !job_execution_valid(req->execution)) {
        snprintf(err, sizeof err,
                 "execution: expected one of queued, failed, succeeded, canceled, running, "
                 "retried or waiting, got \"%.64s\"",
                 req->execution);
        cb(data, TERN_EINVAL, NULL, err);
        return;
    }
    if (req->marker != NULL &&
        list_page_marker_parse(req->marker, mtime, muuid, err, sizeof err) != 0) {
        cb(data, TERN_EINVAL, NULL, err);
        return;
    }
    if (req->offset > LIST_PAGE_OFFSET_MAX) {
        snprintf(err, sizeof err, "offset: at most %d; page with marker instead",
                 LIST_PAGE_OFFSET_MAX);
        cb(data, TERN_EINVAL, NULL, err);
        return;
    }
    size_t limit = req->limit == 0 ? JOB_LIST_LIMIT_DEFAULT : req->limit;
    if (limit > JOB_LIST_LIMIT_MAX)
        limit = JOB_LIST_LIMIT_MAX;
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, req->execution != NULL ? req->execution : "");
    store_args_pushf(&a, "%zu", limit);
    store_args_push(&a, mtime);
    store_args_push(&a, muuid);
    store_args_pushf(&a, "%zu", req->offset);
    /* Without filters every examined job is listed or skipped by the offset, so the
     * budget must cover both; with filters it bounds the time Redis spends. */
    store_args_pushf(&a, "%zu", limit + req->offset + LIST_PAGE_BUDGET);
    store_args_pushf(&a, "%zu", req->max_bytes != 0 ? req->max_bytes : JOB_LIST_MAX_BYTES_DEFAULT);
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)req->filters, key, value)
    {
        if (!json_is_string(value)) {
            store_args_dispose(&a);
            snprintf(err, sizeof err, "%.64s: a filter value must be a string", key);
            cb(data, TERN_EINVAL, NULL, err);
            return;
        }
        store_args_push(&a, key);
        store_args_push(&a, json_string_value(value));
    }
    list_op_t *op = (list_op_t *)store_op_new(sizeof *op, cb, data, NULL);
    op->filtered = json_object_size(req->filters) > 0;
    store_op_send(&op->base, store, SCRIPT_JOB_LIST, &a, on_job_list);
}
