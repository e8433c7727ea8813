/*
 * schedule_ops.c -- creating, reading, listing, deleting, pausing and resuming
 * schedules, and installing a workflow's own; see schedule_ops.h.
 *
 * Ownership: each operation in flight is one heap object (sched_op_t, a store_op_t;
 * see store_op.h) owning copies of its inputs, freed right after its callback ran.
 * Next ticks are computed here, on this process's clock, when a schedule is stored or
 * resumed; the firer computes the later ones on the Redis server's clock
 * (schedule_fire.c).
 */
#include "ops/schedule_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/ident.h"
#include "base/iso8601.h"
#include "model/schedule.h"
#include "ops/job_ops_internal.h"
#include "ops/store_op.h"
#include "ops/workflow_ops.h"

typedef struct sched_op {
    store_op_t base; /* first: the reply callbacks' data is both */
    job_ops_t *ops;
    store_t *store;
    char uuid[40];
    schedule_spec_t spec;
    bool paused;
    /* install: the workflow, its schedules (a reference held), the next to put, and
     * what was installed so far */
    char *workflow;
    json_t *schedules;
    size_t next;
    json_t *installed;
} sched_op_t;

static void sched_op_dispose(store_op_t *base)
{
    sched_op_t *op = (sched_op_t *)base;
    schedule_spec_dispose(&op->spec);
    free(op->workflow);
    json_decref(op->schedules);
    json_decref(op->installed);
}

static sched_op_t *sched_op_new(store_t *store, job_ops_cb cb, void *data)
{
    sched_op_t *op = (sched_op_t *)store_op_new(sizeof(sched_op_t), cb, data, sched_op_dispose);
    op->store = store;
    return op;
}

/* ---- the schedule as answered ------------------------------------------------------ */

static json_t *time_or_null(const json_t *fields, const char *key)
{
    const char *v = json_string_value(json_object_get(fields, key));
    if (v == NULL || v[0] == '\0')
        return json_null();
    char iso[32];
    iso8601_format(strtoull(v, NULL, 10), iso);
    return json_string(iso);
}

static json_t *count_of(const json_t *fields, const char *key)
{
    const char *v = json_string_value(json_object_get(fields, key));
    return json_integer(v != NULL ? strtoll(v, NULL, 10) : 0);
}

/* A new object: the schedule `uuid` from its stored fields (a flat array reply). */
static json_t *schedule_view(const char *uuid, size_t uuid_len, const redisReply *flat)
{
    json_t *f = store_reply_hash(flat);
    const char *doc = json_string_value(json_object_get(f, "doc"));
    json_t *v = doc != NULL ? json_loads(doc, 0, NULL) : NULL;
    if (!json_is_object(v)) {
        json_decref(v);
        v = json_object();
    }
    bool paused = json_object_get(f, "paused") != NULL;
    json_object_set_new(v, "uuid", json_stringn(uuid, uuid_len));
    json_object_set_new(v, "created_at", time_or_null(f, "created_at"));
    json_object_set_new(v, "next_run", paused ? json_null() : time_or_null(f, "next_run"));
    json_object_set_new(v, "last_run", time_or_null(f, "last_run"));
    const json_t *job = json_object_get(f, "last_job");
    json_object_set_new(v, "last_job_uuid", job != NULL ? json_copy((json_t *)job) : json_null());
    json_object_set_new(v, "paused", json_boolean(paused));
    json_object_set_new(v, "fired", count_of(f, "fired"));
    json_object_set_new(v, "skipped", count_of(f, "skipped"));
    json_object_set_new(v, "failed", count_of(f, "failed"));
    const json_t *le = json_object_get(f, "last_error");
    json_object_set_new(v, "last_error", le != NULL ? json_copy((json_t *)le) : json_null());
    json_decref(f);
    return v;
}

/* ---- create and install -------------------------------------------------------------- */

/* Sends schedule_put.lua for op->spec: a new uuid, or the one of `key` if stored. */
static void put_send(sched_op_t *op, const char *key, store_reply_cb on_reply)
{
    int64_t now = (int64_t)clock_wall_ms(), next;
    if (schedule_next(&op->spec, now, now, &next) != 0) {
        store_op_done(&op->base, TERN_EINVAL, NULL, "cron: \"%s\" never matches",
                      json_string_value(json_object_get(op->spec.doc, "cron")));
        return;
    }
    uuid_v4(op->uuid);
    char *doc = json_dumps(op->spec.doc, JSON_COMPACT | JSON_SORT_KEYS);
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, op->uuid);
    store_args_push(&a, doc != NULL ? doc : "{}");
    store_args_push_u64(&a, (uint64_t)now);
    store_args_push_u64(&a, (uint64_t)next);
    store_args_push(&a, op->paused ? "1" : "0");
    store_args_push(&a, key != NULL ? key : "");
    free(doc);
    store_op_send(&op->base, op->store, SCRIPT_SCHEDULE_PUT, &a, on_reply);
}

/* The view of a schedule_put.lua answer, or NULL when it is not one. */
static json_t *put_view(const redisReply *reply)
{
    const redisReply *uuid = store_reply_at(reply, 1), *flat = store_reply_at(reply, 2);
    if (uuid == NULL || uuid->type != REDIS_REPLY_STRING || flat == NULL)
        return NULL;
    json_t *v = schedule_view(uuid->str, uuid->len, flat);
    const redisReply *kind = store_reply_at(reply, 0);
    json_object_set_new(v, "status",
                        json_string(store_reply_is(kind, "CREATED")   ? "created"
                                    : store_reply_is(kind, "UPDATED") ? "updated"
                                                                      : "unchanged"));
    return v;
}

static void on_created(void *data, int status, const redisReply *reply, const char *errmsg)
{
    sched_op_t *op = data;
    if (status == TERN_EIO) {
        store_op_done(&op->base, TERN_EUNKNOWN, NULL,
                      "%s: schedule %s may have been created; GET /schedules/%s tells",
                      errmsg != NULL ? errmsg : "no answer from Redis", op->uuid, op->uuid);
        return;
    }
    if (store_op_failed(&op->base, status, errmsg))
        return;
    json_t *v = put_view(reply);
    if (v == NULL) {
        store_op_done(&op->base, TERN_EIO, NULL, "schedule_put.lua answered without a schedule");
        return;
    }
    json_object_del(v, "status");
    store_op_done(&op->base, 0, v, NULL);
    json_decref(v);
}

static void on_workflow_found(void *data, int status, const json_t *result, const char *message)
{
    (void)result;
    sched_op_t *op = data;
    if (status == TERN_ENOENT) {
        store_op_done(&op->base, TERN_EINVAL, NULL,
                      "workflow: no workflow \"%s\" is stored (a workflow uuid, name@version or "
                      "name)",
                      op->spec.workflow);
        return;
    }
    if (status != 0) {
        store_op_done(&op->base, status, NULL, "%s", message != NULL ? message : "?");
        return;
    }
    put_send(op, NULL, on_created);
}

void schedule_ops_create(job_ops_t *ops, const json_t *body, job_ops_cb cb, void *data)
{
    sched_op_t *op = sched_op_new(ops->opts.store, cb, data);
    op->ops = ops;
    char err[512];
    if (schedule_spec_parse(body, "", NULL, &op->paused, &op->spec, err, sizeof err) != 0) {
        store_op_done(&op->base, TERN_EINVAL, NULL, "%s", err);
        return;
    }
    /* The workflow must exist now; at each tick its latest version (or the one named)
     * is what runs, and a tick whose workflow has gone counts as failed. */
    workflow_ops_get(op->store, op->spec.workflow, on_workflow_found, op);
}

static void install_next(sched_op_t *op);

static void on_installed(void *data, int status, const redisReply *reply, const char *errmsg)
{
    sched_op_t *op = data;
    if (store_op_failed(&op->base, status, errmsg))
        return;
    json_t *v = put_view(reply);
    if (v == NULL) {
        store_op_done(&op->base, TERN_EIO, NULL, "schedule_put.lua answered without a schedule");
        return;
    }
    json_array_append_new(op->installed, v);
    install_next(op);
}

static void install_next(sched_op_t *op)
{
    schedule_spec_dispose(&op->spec);
    if (op->next >= json_array_size(op->schedules)) {
        json_t *res = json_pack("{s:O}", "schedules", op->installed);
        store_op_done(&op->base, 0, res, NULL);
        json_decref(res);
        return;
    }
    size_t i = op->next++;
    char path[48], err[512];
    snprintf(path, sizeof path, "schedules[%zu].", i);
    if (schedule_spec_parse(json_array_get(op->schedules, i), path, op->workflow, NULL, &op->spec,
                            err, sizeof err) != 0) {
        store_op_done(&op->base, TERN_EINVAL, NULL, "%s", err);
        return;
    }
    char *key = xasprintf("%s/%s", op->workflow, op->spec.name);
    put_send(op, key, on_installed);
    free(key);
}

void schedule_ops_install(job_ops_t *ops, const char *workflow, const json_t *schedules,
                          job_ops_cb cb, void *data)
{
    sched_op_t *op = sched_op_new(ops->opts.store, cb, data);
    op->ops = ops;
    op->workflow = xstrdup(workflow);
    op->schedules = json_is_array(schedules) ? json_incref((json_t *)schedules) : json_array();
    op->installed = json_array();
    install_next(op);
}

/* ---- read, list, delete, pause --------------------------------------------------------- */

static void on_read(void *data, int status, const redisReply *reply, const char *errmsg)
{
    sched_op_t *op = data;
    if (store_op_failed(&op->base, status, errmsg))
        return;
    size_t n = reply != NULL && reply->type == REDIS_REPLY_ARRAY ? reply->elements : 0;
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) {
        const redisReply *uuid = store_reply_at(reply->element[i], 0);
        const redisReply *flat = store_reply_at(reply->element[i], 1);
        if (uuid != NULL && uuid->type == REDIS_REPLY_STRING)
            json_array_append_new(list, schedule_view(uuid->str, uuid->len, flat));
    }
    if (op->uuid[0] != '\0') {
        if (json_array_size(list) == 0)
            store_op_done(&op->base, TERN_ENOENT, NULL, "schedule %s does not exist", op->uuid);
        else
            store_op_done(&op->base, 0, json_array_get(list, 0), NULL);
    } else {
        json_t *res = json_pack("{s:O}", "schedules", list);
        store_op_done(&op->base, 0, res, NULL);
        json_decref(res);
    }
    json_decref(list);
}

/* True (and answered TERN_ENOENT) when `uuid` cannot name a schedule. */
static bool bad_uuid(sched_op_t *op, const char *uuid)
{
    if (uuid_valid(uuid)) {
        snprintf(op->uuid, sizeof op->uuid, "%s", uuid);
        return false;
    }
    store_op_done(&op->base, TERN_ENOENT, NULL, "schedule %.40s does not exist", uuid);
    return true;
}

void schedule_ops_get(store_t *store, const char *uuid, job_ops_cb cb, void *data)
{
    sched_op_t *op = sched_op_new(store, cb, data);
    if (bad_uuid(op, uuid))
        return;
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, op->uuid);
    store_args_push(&a, "1");
    store_op_send(&op->base, store, SCRIPT_SCHEDULE_READ, &a, on_read);
}

void schedule_ops_list(store_t *store, size_t limit, job_ops_cb cb, void *data)
{
    sched_op_t *op = sched_op_new(store, cb, data);
    if (limit == 0)
        limit = SCHEDULE_LIST_LIMIT_DEFAULT;
    if (limit > SCHEDULE_LIST_LIMIT_MAX)
        limit = SCHEDULE_LIST_LIMIT_MAX;
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, "");
    store_args_push_u64(&a, limit);
    store_op_send(&op->base, store, SCRIPT_SCHEDULE_READ, &a, on_read);
}

static void on_deleted(void *data, int status, const redisReply *reply, const char *errmsg)
{
    sched_op_t *op = data;
    if (store_op_failed(&op->base, status, errmsg))
        return;
    if (store_reply_int(reply, 0) != 1) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "schedule %s does not exist", op->uuid);
        return;
    }
    json_t *res = json_pack("{s:s}", "uuid", op->uuid);
    store_op_done(&op->base, 0, res, NULL);
    json_decref(res);
}

void schedule_ops_delete(store_t *store, const char *uuid, job_ops_cb cb, void *data)
{
    sched_op_t *op = sched_op_new(store, cb, data);
    if (bad_uuid(op, uuid))
        return;
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, op->uuid);
    store_op_send(&op->base, store, SCRIPT_SCHEDULE_DELETE, &a, on_deleted);
}

static void on_paused(void *data, int status, const redisReply *reply, const char *errmsg)
{
    sched_op_t *op = data;
    if (store_op_failed(&op->base, status, errmsg))
        return;
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements == 0) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "schedule %s does not exist", op->uuid);
        return;
    }
    json_t *v = schedule_view(op->uuid, strlen(op->uuid), reply);
    store_op_done(&op->base, 0, v, NULL);
    json_decref(v);
}

static void on_pause_read(void *data, int status, const redisReply *reply, const char *errmsg)
{
    sched_op_t *op = data;
    if (store_op_failed(&op->base, status, errmsg))
        return;
    const redisReply *flat = store_reply_at(store_reply_at(reply, 0), 1);
    size_t len = 0;
    const char *doc = store_reply_hash_get(flat, "doc", &len);
    const char *anchor = store_reply_hash_get(flat, "anchor", NULL);
    if (doc == NULL) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "schedule %s does not exist", op->uuid);
        return;
    }
    char err[512];
    if (schedule_spec_parse_text(doc, len, &op->spec, err, sizeof err) != 0) {
        store_op_done(&op->base, TERN_EIO, NULL, "stored schedule %s: %s", op->uuid, err);
        return;
    }
    const char *last = store_reply_hash_get(flat, "last_run", NULL);
    int64_t now = (int64_t)clock_wall_ms(), next;
    int64_t a0 = anchor != NULL ? strtoll(anchor, NULL, 10) : now;
    /* After the tick fired last too, should this clock be behind the one that fired it
     * (schedule_pause.lua holds to that whatever it is given). */
    int64_t after = last != NULL && strtoll(last, NULL, 10) > now ? strtoll(last, NULL, 10) : now;
    if (schedule_next(&op->spec, a0, after, &next) != 0)
        next = INT64_MAX / 2;
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, op->uuid);
    store_args_push(&a, "resume");
    store_args_push_u64(&a, (uint64_t)next);
    store_op_send(&op->base, op->store, SCRIPT_SCHEDULE_PAUSE, &a, on_paused);
}

void schedule_ops_pause(store_t *store, const char *uuid, bool pause, job_ops_cb cb, void *data)
{
    sched_op_t *op = sched_op_new(store, cb, data);
    if (bad_uuid(op, uuid))
        return;
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, op->uuid);
    if (pause) {
        store_args_push(&a, "pause");
        store_args_push(&a, "0");
        store_op_send(&op->base, store, SCRIPT_SCHEDULE_PAUSE, &a, on_paused);
        return;
    }
    /* A resume needs the definition for its next tick: read it first. */
    store_args_push(&a, "1");
    store_op_send(&op->base, store, SCRIPT_SCHEDULE_READ, &a, on_pause_read);
}
