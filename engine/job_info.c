/*
 * job_info.c -- a job's info list; see job_info.h. One script call each way
 * (job_info_add.lua, job_info_get.lua), each checking that the job exists.
 */
#include "job_info.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

typedef struct info_op {
    job_ops_cb cb;
    void *data;
    char uuid[40];
} info_op_t;

static void info_done(info_op_t *op, int status, const json_t *result, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void info_done(info_op_t *op, int status, const json_t *result, const char *fmt, ...)
{
    char msg[512] = "";
    if (fmt != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
    }
    op->cb(op->data, status, result, fmt != NULL ? msg : NULL);
    free(op);
}

static info_op_t *info_op_new(const char *uuid, job_ops_cb cb, void *data)
{
    info_op_t *op = xcalloc(1, sizeof *op);
    op->cb = cb;
    op->data = data;
    snprintf(op->uuid, sizeof op->uuid, "%s", uuid != NULL ? uuid : "");
    if (!tern_uuid_valid(uuid)) {
        info_done(op, TERN_ENOENT, NULL, "job \"%s\" does not exist (not a UUID)",
                  uuid != NULL ? uuid : "");
        return NULL;
    }
    return op;
}

static void info_send(info_op_t *op, store_t *store, store_script_t script, store_args_t *a,
                      store_reply_cb on_reply)
{
    int rc = store_eval(store, script, a, on_reply, op);
    store_args_dispose(a);
    if (rc != 0)
        info_done(op, rc, NULL, "Redis is not reachable");
}

static void on_info_add(void *data, int status, const redisReply *reply, const char *errmsg)
{
    info_op_t *op = data;
    if (status != 0) {
        info_done(op, status, NULL, "%s", errmsg);
        return;
    }
    const redisReply *kind = store_reply_at(reply, 0);
    long long n = store_reply_int(store_reply_at(reply, 1), 0);
    if (store_reply_is(kind, "NOTFOUND")) {
        info_done(op, TERN_ENOENT, NULL, "job %s does not exist", op->uuid);
    } else if (store_reply_is(kind, "FULL")) {
        info_done(op, TERN_EBUSY, NULL, "job %s already has %lld info entries, the most kept",
                  op->uuid, n);
    } else {
        json_t *res = json_pack("{s:I}", "entries", (json_int_t)n);
        info_done(op, 0, res, NULL);
        json_decref(res);
    }
}

void job_info_add(store_t *store, const char *uuid, const json_t *entry, job_ops_cb cb, void *data)
{
    info_op_t *op = info_op_new(uuid, cb, data);
    if (op == NULL)
        return;
    if (!json_is_object(entry) || json_object_size(entry) == 0) {
        info_done(op, TERN_EINVAL, NULL,
                  "body: expected a JSON object with the information, e.g. "
                  "{\"message\": {\"10%%\": \"step one done\"}}");
        return;
    }
    size_t size = json_dumpb(entry, NULL, 0, JSON_COMPACT);
    if (size > JOB_INFO_MAX_BYTES) {
        info_done(op, TERN_E2BIG, NULL, "info entry: %zu bytes, the limit is %d", size,
                  JOB_INFO_MAX_BYTES);
        return;
    }
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, uuid);
    store_args_push_json(&a, entry);
    store_args_pushf(&a, "%d", JOB_INFO_MAX_ENTRIES);
    info_send(op, store, SCRIPT_JOB_INFO_ADD, &a, on_info_add);
}

static void on_info_get(void *data, int status, const redisReply *reply, const char *errmsg)
{
    info_op_t *op = data;
    if (status != 0) {
        info_done(op, status, NULL, "%s", errmsg);
        return;
    }
    if (store_reply_is(store_reply_at(reply, 0), "NOTFOUND")) {
        info_done(op, TERN_ENOENT, NULL, "job %s does not exist", op->uuid);
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
    info_done(op, 0, out, NULL);
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
    info_send(op, store, SCRIPT_JOB_INFO_GET, &a, on_info_get);
}
