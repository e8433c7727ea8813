/*
 * job_actions.c -- reading a job and the operator actions on it: get, events_open,
 * cancel, resume and retry from failure (redrive); see job_ops.h.
 */
#include "ops/job_ops_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/ident.h"
#include "base/iso8601.h"
#include "base/json_text.h"
#include "model/holds.h"
#include "model/lock_pattern.h"
#include "model/template.h"
#include "model/workflow.h"
#include "store/job_view.h"
#include "store/lock_table.h"

/* The refusal of a retry of a job that neither failed nor was canceled, whether the
 * job read first or job_redrive.lua at the write says so; the arguments are the job's
 * uuid and execution. */
#define REDRIVE_REFUSED_FMT "job %s is %s; only a failed or canceled job can be retried"

/* ---- reads and operator actions ------------------------------------------------ */

static void on_job_get(void *data, int status, const redisReply *reply, const char *errmsg)
{
    op_t *op = data;
    if (store_op_failed(&op->base, status, errmsg))
        return;
    json_t *view = job_view_from_reply(reply);
    if (view == NULL) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "job %s does not exist", op->uuid);
        return;
    }
    store_op_done(&op->base, 0, view, NULL);
    json_decref(view);
}

static op_t *op_for_job(job_ops_t *ops, const char *uuid, job_ops_cb cb, void *data)
{
    op_t *op = op_new(ops, cb, data);
    if (uuid == NULL || !uuid_valid(uuid)) {
        store_op_done(&op->base, TERN_EINVAL, NULL, "\"%s\" is not a job UUID", uuid ? uuid : "");
        return NULL;
    }
    snprintf(op->uuid, sizeof op->uuid, "%s", uuid);
    return op;
}

/* Runs `script` with the job's uuid as its one argument; on_reply answers. */
static void send_for_job(job_ops_t *ops, const char *uuid, job_ops_cb cb, void *data,
                         store_script_t script, store_reply_cb on_reply)
{
    op_t *op = op_for_job(ops, uuid, cb, data);
    if (op == NULL)
        return;
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, uuid);
    op_send(op, script, &a, on_reply);
}

void job_ops_get(job_ops_t *ops, const char *uuid, job_ops_cb cb, void *data)
{
    send_for_job(ops, uuid, cb, data, SCRIPT_JOB_GET, on_job_get);
}

static void on_events_open(void *data, int status, const redisReply *reply, const char *errmsg)
{
    op_t *op = data;
    if (store_op_failed(&op->base, status, errmsg))
        return;
    if (store_reply_int(reply, 0) != 1) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "job %s does not exist", op->uuid);
        return;
    }
    store_op_done(&op->base, 0, NULL, NULL);
}

void job_ops_events_open(job_ops_t *ops, const char *uuid, job_ops_cb cb, void *data)
{
    send_for_job(ops, uuid, cb, data, SCRIPT_JOB_EVENTS_OPEN, on_events_open);
}

static json_t *history_entry(const char *action, const char *caller, const json_t *changes)
{
    char iso[32];
    iso8601_format(clock_wall_ms(), iso);
    json_t *h = json_pack("{s:s, s:s, s:s}", "action", action, "time", iso, "caller",
                          caller != NULL ? caller : "unknown");
    if (changes != NULL)
        json_object_set(h, "changes", (json_t *)changes);
    return h;
}

/* Answers an operator action that was stored: {"uuid", "execution": the job's
 * execution now}. */
static void answer_execution(op_t *op, const char *execution)
{
    json_t *res = json_pack("{s:s, s:s}", "uuid", op->uuid, "execution", execution);
    store_op_done(&op->base, 0, res, NULL);
    json_decref(res);
}

static void on_job_cancel(void *data, int status, const redisReply *reply, const char *errmsg)
{
    op_t *op = data;
    if (write_failed(op, status, errmsg, "the cancel"))
        return;
    const redisReply *kind = store_reply_at(reply, 0);
    if (store_reply_is(kind, "NOTFOUND")) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "job %s does not exist", op->uuid);
    } else if (store_reply_is(kind, "FINISHED")) {
        store_op_done(&op->base, TERN_EBUSY, NULL,
                      "job %s already finished (%s); nothing to cancel", op->uuid,
                      store_reply_at(reply, 1)->str);
    } else {
        answer_execution(op, store_reply_is(kind, "CANCELED") ? "canceled" : "canceling");
    }
}

void job_ops_cancel(job_ops_t *ops, const char *uuid, const char *caller, job_ops_cb cb, void *data)
{
    op_t *op = op_for_job(ops, uuid, cb, data);
    if (op == NULL)
        return;
    json_t *h = history_entry("cancel", caller, NULL);
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, uuid);
    store_args_push_json(&a, h);
    json_decref(h);
    op_send(op, SCRIPT_JOB_CANCEL, &a, on_job_cancel);
}

static void on_job_resume(void *data, int status, const redisReply *reply, const char *errmsg)
{
    op_t *op = data;
    if (write_failed(op, status, errmsg, "the resume"))
        return;
    const redisReply *kind = store_reply_at(reply, 0);
    if (store_reply_is(kind, "NOTFOUND")) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "job %s does not exist", op->uuid);
    } else if (store_reply_is(kind, "NOTWAITING")) {
        store_op_done(&op->base, TERN_EBUSY, NULL,
                      "job %s is %s, not waiting; only a waiting job can be resumed", op->uuid,
                      store_reply_at(reply, 1)->str);
    } else {
        answer_execution(op, "queued");
    }
}

void job_ops_resume(job_ops_t *ops, const char *uuid, const json_t *result, const json_t *error,
                    const char *caller, job_ops_cb cb, void *data)
{
    op_t *op = op_for_job(ops, uuid, cb, data);
    if (op == NULL)
        return;
    json_t *outcome;
    if (error != NULL) {
        if (!json_is_object(error) || !json_is_string(json_object_get(error, "code"))) {
            store_op_done(&op->base, TERN_EINVAL, NULL,
                          "error: expected an object with a string \"code\"");
            return;
        }
        outcome = json_pack("{s:O}", "error", error);
    } else {
        outcome = json_pack("{s:O}", "result", result != NULL ? result : json_null());
    }
    json_t *h = history_entry("resume", caller, outcome);
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, uuid);
    store_args_push_json(&a, outcome);
    store_args_push_json(&a, h);
    json_decref(h);
    json_decref(outcome);
    op_send(op, SCRIPT_JOB_RESUME, &a, on_job_resume);
}

static void redrive_send(op_t *op);

static void on_job_redrive(void *data, int status, const redisReply *reply, const char *errmsg)
{
    op_t *op = data;
    if (write_failed(op, status, errmsg, "the retry"))
        return;
    const redisReply *kind = store_reply_at(reply, 0);
    if (store_reply_is(kind, "LOCKS")) {
        on_locks_answer(op, reply, redrive_send);
        return;
    }
    if (store_reply_is(kind, "NOTFOUND")) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "job %s does not exist", op->uuid);
    } else if (store_reply_is(kind, "BADSTATE")) {
        store_op_done(&op->base, TERN_EBUSY, NULL, REDRIVE_REFUSED_FMT, op->uuid,
                      store_reply_at(reply, 1)->str);
    } else if (store_reply_is(kind, "CONFLICT")) {
        store_op_done(&op->base, TERN_EEXIST, NULL,
                      "another job with the same target and params is not finished yet: %s",
                      store_reply_at(reply, 1)->str);
    } else if (store_reply_is(kind, "LOCKCAP")) {
        lock_cap_refused(op, reply, (size_t)store_reply_int(store_reply_at(reply, 3), 0),
                         "the job was not retried");
    } else {
        answer_execution(op, "queued");
    }
}

/* With the job read: pick the step, merge params, send job_redrive.lua. */
static void on_redrive_read(void *data, int status, const redisReply *reply, const char *errmsg)
{
    op_t *op = data;
    if (store_op_failed(&op->base, status, errmsg))
        return;
    json_t *view = job_view_from_reply(reply);
    if (view == NULL) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "job %s does not exist", op->uuid);
        return;
    }
    const char *ex = json_string_value(json_object_get(view, "execution"));
    if (ex == NULL || (strcmp(ex, "failed") != 0 && strcmp(ex, "canceled") != 0)) {
        store_op_done(&op->base, TERN_EBUSY, NULL, REDRIVE_REFUSED_FMT, op->uuid, ex ? ex : "?");
        json_decref(view);
        return;
    }
    json_t *chain = json_object_get(view, "chain");
    size_t idx = json_array_size(json_object_get(view, "chain_results"));
    if (op->from_step != NULL) {
        size_t i;
        json_t *s;
        bool found = false;
        json_array_foreach(chain, i, s)
        {
            const char *sname = json_string_value(json_object_get(s, "name"));
            if (sname != NULL && strcmp(sname, op->from_step) == 0) {
                idx = i;
                found = true;
                break;
            }
        }
        if (!found) {
            store_op_done(&op->base, TERN_EINVAL, NULL, "step \"%s\" is not in the chain of job %s",
                          op->from_step, op->uuid);
            json_decref(view);
            return;
        }
        /* Steps that succeeded; the entry of the step that failed does not count, or a
         * retry could start after it and skip the failed step with its error kept as
         * its result. */
        json_t *results = json_object_get(view, "chain_results");
        size_t done = json_array_size(results);
        json_t *last = json_array_get(results, done - 1);
        if (last != NULL && !json_is_null(json_object_get(last, "error")))
            done--;
        if (idx > done) {
            store_op_done(&op->base, TERN_EINVAL, NULL,
                          "step \"%s\" comes after the step that failed; "
                          "retry from step %zu at the latest",
                          op->from_step, done);
            json_decref(view);
            return;
        }
    } else {
        /* The failed step: the last recorded chain step if it failed, else the next one. */
        json_t *results = json_object_get(view, "chain_results");
        json_t *last = json_array_get(results, json_array_size(results) - 1);
        if (last != NULL && !json_is_null(json_object_get(last, "error")))
            idx = json_array_size(results) - 1;
        if (idx >= json_array_size(chain))
            idx = json_array_size(chain) > 0 ? json_array_size(chain) - 1 : 0;
        /* A workflow whose onerror undoes what its steps from `retry_from` on took (a
         * provision gives its server's capacity and its IPs back) restarts there, so the
         * retry takes them again instead of running on without them. */
        const char *from = json_string_value(json_object_get(view, "retry_from"));
        size_t i;
        json_t *s;
        json_array_foreach(chain, i, s)
        {
            if (i >= idx)
                break;
            if (from != NULL && strcmp(from, json_string_value(json_object_get(s, "name"))) == 0) {
                idx = i;
                break;
            }
        }
    }
    json_t *params = json_deep_copy(json_object_get(view, "params"));
    if (!json_is_object(params)) {
        json_decref(params);
        params = json_object();
    }
    if (op->extra != NULL)
        json_object_update(params, op->extra);
    const char *target = json_string_value(json_object_get(view, "target"));
    op->target = target != NULL ? xstrdup(target) : NULL;
    char unique[33] = "";
    if (target != NULL)
        job_ops_unique_key(json_string_value(json_object_get(view, "name")), target, params,
                           unique);
    json_t *changes = json_pack("{s:I, s:s?, s:O?}", "from_index", (json_int_t)idx, "from_step",
                                op->from_step, "params", op->extra);
    json_t *h = history_entry("retry", op->caller, changes);
    /* Kept in op->fields: the script is sent again when the lock table was stale. */
    store_args_t *a = &op->fields;
    store_args_push(a, op->uuid);
    store_args_pushf(a, "%zu", idx);
    if (op->extra != NULL)
        store_args_push_json(a, params);
    else
        store_args_push(a, "");
    store_args_push(a, unique);
    store_args_push_json(a, h);
    json_decref(h);
    json_decref(changes);
    json_decref(params);
    json_decref(view);
    redrive_send(op);
}

/* Checks the job's target against the locks of unfinished jobs, then sends
 * job_redrive.lua (redrive_write): a retry is refused as a create of that target would
 * be, and nothing is written. Only the target is checked, as at create: the job's own
 * locks are not matched against the targets of jobs that started while it had ended
 * (docs/WORKFLOWS.md, Jobs). */
static void redrive_send(op_t *op)
{
    check_queue(op, op->uuid, true);
}

/* Sends job_redrive.lua with the arguments in op->fields, the version of the lock table
 * the target was checked against and the cap on the size of locks. */
void redrive_write(op_t *op, const char *locks_version)
{
    store_args_t a;
    store_args_init(&a);
    for (size_t i = 0; i < op->fields.n; i++)
        store_args_pushb(&a, op->fields.v[i], op->fields.len[i]);
    store_args_push(&a, locks_version);
    store_args_push_u64(&a, op->ops->opts.max_lock_instructions);
    op_send(op, SCRIPT_JOB_REDRIVE, &a, on_job_redrive);
}

void job_ops_redrive(job_ops_t *ops, const char *uuid, const char *from_step, const json_t *params,
                     const char *caller, job_ops_cb cb, void *data)
{
    op_t *op = op_for_job(ops, uuid, cb, data);
    if (op == NULL)
        return;
    if (params != NULL && !json_is_object(params)) {
        store_op_done(&op->base, TERN_EINVAL, NULL, "params: expected an object");
        return;
    }
    op->from_step = from_step != NULL ? xstrdup(from_step) : NULL;
    op->extra = params != NULL ? json_deep_copy(params) : NULL;
    op->caller = caller != NULL ? xstrdup(caller) : NULL;
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, uuid);
    op_send(op, SCRIPT_JOB_GET, &a, on_redrive_read);
}
