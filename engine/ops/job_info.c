/*
 * job_info.c -- a job's info list; see job_info.h. One script call each way
 * (job_info_add.lua, job_info_get.lua), each checking that the job exists.
 */
#include "ops/job_info.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/ident.h"
#include "ops/store_op.h"

typedef struct info_op {
    store_op_t base; /* first: the reply callbacks' data is both */
    char uuid[40];
} info_op_t;

static info_op_t *info_op_new(const char *uuid, job_ops_cb cb, void *data)
{
    info_op_t *op = (info_op_t *)store_op_new(sizeof *op, cb, data, NULL);
    snprintf(op->uuid, sizeof op->uuid, "%s", uuid != NULL ? uuid : "");
    if (!uuid_valid(uuid)) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "job \"%s\" does not exist (not a UUID)",
                      uuid != NULL ? uuid : "");
        return NULL;
    }
    return op;
}

static void on_info_add(void *data, int status, const redisReply *reply, const char *errmsg)
{
    info_op_t *op = data;
    if (store_op_failed(&op->base, status, errmsg))
        return;
    const redisReply *kind = store_reply_at(reply, 0);
    long long n = store_reply_int(store_reply_at(reply, 1), 0);
    if (store_reply_is(kind, "NOTFOUND")) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "job %s does not exist", op->uuid);
    } else if (store_reply_is(kind, "FULL")) {
        store_op_done(&op->base, TERN_EBUSY, NULL,
                      "job %s already has %lld info entries, the most kept", op->uuid, n);
    } else {
        json_t *res = json_pack("{s:I}", "entries", (json_int_t)n);
        store_op_done(&op->base, 0, res, NULL);
        json_decref(res);
    }
}

void job_info_add(store_t *store, const char *uuid, const json_t *entry, job_ops_cb cb, void *data)
{
    info_op_t *op = info_op_new(uuid, cb, data);
    if (op == NULL)
        return;
    if (!json_is_object(entry) || json_object_size(entry) == 0) {
        store_op_done(&op->base, TERN_EINVAL, NULL,
                      "body: expected a JSON object with the information, e.g. "
                      "{\"message\": {\"10%%\": \"step one done\"}}");
        return;
    }
    size_t size = json_dumpb(entry, NULL, 0, JSON_COMPACT);
    if (size > JOB_INFO_MAX_BYTES) {
        store_op_done(&op->base, TERN_E2BIG, NULL, "info entry: %zu bytes, the limit is %d", size,
                      JOB_INFO_MAX_BYTES);
        return;
    }
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, uuid);
    store_args_push_json(&a, entry);
    store_args_pushf(&a, "%d", JOB_INFO_MAX_ENTRIES);
    store_op_send(&op->base, store, SCRIPT_JOB_INFO_ADD, &a, on_info_add);
}

static void on_info_get(void *data, int status, const redisReply *reply, const char *errmsg)
{
    info_op_t *op = data;
    if (store_op_failed(&op->base, status, errmsg))
        return;
    if (store_reply_is(store_reply_at(reply, 0), "NOTFOUND")) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "job %s does not exist", op->uuid);
        return;
    }
    const redisReply *list = store_reply_at(reply, 1);
    json_t *out = json_array();
    for (size_t i = 0; list != NULL && i < list->elements; i++) {
        const redisReply *e = list->element[i];
        json_t *v = json_loadb(e->str, e->len, 0, NULL);
        /* Entries were stored as JSON text by job_info_add; one that does not parse
         * (written by something else) is shown as the text it is. */
        json_array_append_new(out, v != NULL ? v : json_stringn(e->str, e->len));
    }
    store_op_done(&op->base, 0, out, NULL);
    json_decref(out);
}

void job_info_get(store_t *store, const char *uuid, job_ops_cb cb, void *data)
{
    info_op_t *op = info_op_new(uuid, cb, data);
    if (op == NULL)
        return;
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, uuid);
    store_op_send(&op->base, store, SCRIPT_JOB_INFO_GET, &a, on_info_get);
}
