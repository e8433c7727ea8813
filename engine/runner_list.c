/*
 * runner_list.c -- GET /runners; see runner_list.h. One round trip
 * (runner_list.lua).
 */
#include "runner_list.h"

#include <stdlib.h>

#include "common.h"

typedef struct runners_op {
    job_ops_cb cb;
    void *data;
} runners_op_t;

static json_t *iso_or_null(long long ms)
{
    if (ms <= 0)
        return json_null();
    char iso[32];
    tern_iso_time((uint64_t)ms, iso);
    return json_string(iso);
}

static void on_runner_list(void *data, int status, const redisReply *reply, const char *errmsg)
{
    runners_op_t *op = data;
    if (status != 0) {
        op->cb(op->data, status, NULL, errmsg);
        free(op);
        return;
    }
    long long now = store_reply_int(store_reply_at(reply, 0), 0);
    json_t *out = json_array();
    for (size_t i = 1; reply != NULL && i < reply->elements; i++) {
        const redisReply *r = reply->element[i];
        const redisReply *id = store_reply_at(r, 0), *info = store_reply_at(r, 2);
        if (id == NULL || id->type != REDIS_REPLY_STRING)
            continue;
        long long expiry = store_reply_int(store_reply_at(r, 1), 0);
        json_t *info_v = NULL;
        if (info != NULL && info->type == REDIS_REPLY_STRING)
            info_v = json_loadb(info->str, info->len, 0, NULL);
        json_array_append_new(
            out, json_pack("{s:s%, s:b, s:o, s:I, s:o, s:I, s:o}", "id", id->str, id->len, "alive",
                           expiry > now, "lease_expires_at", iso_or_null(expiry), "lease_ms_left",
                           (json_int_t)(expiry > 0 ? expiry - now : 0), "last_seen_at",
                           iso_or_null(store_reply_int(store_reply_at(r, 3), 0)), "jobs",
                           (json_int_t)store_reply_int(store_reply_at(r, 4), 0), "info",
                           info_v != NULL ? info_v : json_null()));
    }
    op->cb(op->data, 0, out, NULL);
    json_decref(out);
    free(op);
}

void runner_list_get(store_t *store, job_ops_cb cb, void *data)
{
    store_args_t a;
    store_args_init(&a);
    runners_op_t *op = xcalloc(1, sizeof *op);
    op->cb = cb;
    op->data = data;
    int rc = store_eval(store, SCRIPT_RUNNER_LIST, &a, on_runner_list, op);
    store_args_dispose(&a);
    if (rc != 0) {
        free(op);
        cb(data, rc, NULL, "Redis is not reachable");
    }
}
