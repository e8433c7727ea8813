/*
 * runners_read.c -- GET /runners; see runners_read.h. One round trip
 * (runners_read.lua).
 */
#include "ops/runners_read.h"

#include "base/iso8601.h"
#include "ops/store_op.h"

static json_t *iso_or_null(long long ms)
{
    if (ms <= 0)
        return json_null();
    char iso[32];
    iso8601_format((uint64_t)ms, iso);
    return json_string(iso);
}

static void on_runners_read(void *data, int status, const redisReply *reply, const char *errmsg)
{
    store_op_t *op = data;
    if (store_op_failed(op, status, errmsg))
        return;
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
    store_op_done(op, 0, out, NULL);
    json_decref(out);
}

void runners_read(store_t *store, job_ops_cb cb, void *data)
{
    store_args_t a;
    store_args_init(&a);
    store_op_t *op = store_op_new(sizeof *op, cb, data, NULL);
    store_op_send(op, store, SCRIPT_RUNNERS_READ, &a, on_runners_read);
}
