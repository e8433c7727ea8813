/*
 * job_ops.c -- workflow and job operations shared by the API, ternd --run and tests;
 * see job_ops.h. This file holds the operations object and what every operation
 * does; creates, the lock checks and the other actions have files of their own (see
 * job_ops_internal.h).
 *
 * Ownership: each operation in flight is one heap object (op_t, a store_op_t; see
 * store_op.h) that owns copies of its inputs and is freed right after its callback
 * ran. job_ops_t owns a snapshot of the locks of unfinished jobs (lock_table.h, each
 * compiled once and kept across refreshes), replaced whenever job_create.lua or
 * job_redrive.lua says the version we checked against is stale (job_checks.c).
 */
#include "ops/job_ops_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/ident.h"
#include "model/workflow.h"
#include "ops/store_op.h"
#include "store/job_view.h"
#include "store/lock_table.h"

/* The default of max_lock_instructions: 500000 instructions of compiled locks over all
 * unfinished jobs (a ^<uuid>$ lock is 39, the largest lock 2500): 8 MB of programs in
 * each API process, and a create checked against all of them costs at most about a
 * second of sliced CPU against a 1024-character target, much less for usual locks. */
#define LOCK_INSTRUCTIONS_DEFAULT 500000

static void op_dispose(store_op_t *base)
{
    op_t *op = (op_t *)base;
    wake_waiters(op); /* an asking create that ended without its answer (not sent) */
    wf_cached_put(op->wfc);
    free(op->workflow_ref);
    json_decref(op->params);
    free(op->params_text);
    free(op->target);
    free(op->locks);
    lock_check_dispose(&op->check);
    workflow_free(op->wf);
    json_decref(op->post_back_urls);
    store_args_dispose(&op->fields);
    json_text_dispose(&op->view);
    if (op->direct)
        op->ops->local.release(op->ops->local.data, op->direct_lost);
    free(op->direct_queue);
    free(op->caller);
    free(op->from_step);
    json_decref(op->extra);
}

op_t *op_new(job_ops_t *ops, job_ops_cb cb, void *data)
{
    op_t *op = (op_t *)store_op_new(sizeof *op, cb, data, op_dispose);
    op->ops = ops;
    return op;
}

void op_send(op_t *op, store_script_t script, store_args_t *a, store_reply_cb cb)
{
    store_op_send(&op->base, op->ops->opts.store, script, a, cb);
}

/* For the top of a write's reply callback: like store_op_failed, but a call whose
 * answer was lost (TERN_EIO: it reached Redis, or may have) is answered TERN_EUNKNOWN,
 * saying that `what` ("the cancel") may have happened and how to find out. */
bool write_failed(op_t *op, int status, const char *errmsg, const char *what)
{
    if (status != TERN_EIO)
        return store_op_failed(&op->base, status, errmsg);
    store_op_done(&op->base, TERN_EUNKNOWN, NULL, "%s: %s may have been stored; GET /jobs/%s tells",
                  errmsg != NULL ? errmsg : "no answer from Redis", what, op->uuid);
    return true;
}

void job_ops_set_local_runner(job_ops_t *ops, const job_ops_local_runner_t *local)
{
    if (local != NULL)
        ops->local = *local;
    else
        memset(&ops->local, 0, sizeof ops->local);
}

job_ops_t *job_ops_new(const job_ops_opts_t *opts)
{
    job_ops_t *ops = xcalloc(1, sizeof *ops);
    ops->opts = *opts;
    if (ops->opts.max_params_bytes == 0)
        ops->opts.max_params_bytes = 256 * 1024;
    if (ops->opts.max_lock_instructions == 0)
        ops->opts.max_lock_instructions = LOCK_INSTRUCTIONS_DEFAULT;
    ops->locks = lock_table_new();
    ops->checks_tail = &ops->checks;
    return ops;
}

void job_ops_close(job_ops_t *ops)
{
    if (ops == NULL || ops->closed)
        return;
    ops->closed = true;
    checks_abandon(ops);
    if (ops->check_idle != NULL)
        uv_close((uv_handle_t *)ops->check_idle, on_check_idle_closed);
    ops->check_idle = NULL;
}

void job_ops_free(job_ops_t *ops)
{
    if (ops == NULL)
        return;
    ops->closed = true;
    checks_abandon(ops);
    lock_table_put(ops->locks);
    for (size_t i = 0; i < WF_CACHE_SLOTS; i++)
        wf_cached_put(ops->wf_cache[i]);
    free(ops);
}

/* ---- workflows ----------------------------------------------------------------- */

static void on_workflow_put(void *data, int status, const redisReply *reply, const char *errmsg)
{
    op_t *op = data;
    if (status == TERN_EIO) {
        /* Storing a version is idempotent: the same definition again is "unchanged". */
        store_op_done(&op->base, TERN_EUNKNOWN, NULL,
                      "%s: workflow %s version %s may have been stored; sending the same "
                      "definition again is safe",
                      errmsg != NULL ? errmsg : "no answer from Redis", op->wf->name,
                      op->wf->version);
        return;
    }
    if (store_op_failed(&op->base, status, errmsg))
        return;
    const redisReply *kind = store_reply_at(reply, 0), *uuid = store_reply_at(reply, 1);
    const char *name = op->wf->name, *version = op->wf->version;
    if (store_reply_is(kind, "CONFLICT")) {
        store_op_done(&op->base, TERN_EEXIST, NULL,
                      "workflow %s version %s already exists (uuid %s) with a different "
                      "definition; give the new definition a new version",
                      name, version, uuid->str);
        return;
    }
    if (store_reply_is(kind, "TAKEN")) {
        store_op_done(&op->base, TERN_EEXIST, NULL,
                      "uuid: %s already names another workflow version; leave \"uuid\" out to get "
                      "a new one",
                      uuid->str);
        return;
    }
    /* The stored document: an unchanged version has the same canonical text, so it is
     * this one under the uuid it was first stored with. */
    json_t *doc = json_deep_copy(op->wf->doc);
    json_object_set_new(doc, "uuid", json_stringn(uuid->str, uuid->len));
    json_t *res = json_pack(
        "{s:s, s:s, s:s, s:s, s:o}", "uuid", uuid->str, "name", name, "version", version, "status",
        store_reply_is(kind, "SAME") ? "unchanged" : "created", "workflow", doc);
    store_op_done(&op->base, 0, res, NULL);
    json_decref(res);
}

void job_ops_workflow_put(job_ops_t *ops, const json_t *definition, job_ops_cb cb, void *data)
{
    op_t *op = op_new(ops, cb, data);
    /* The size limit of workflow_parse_text holds for documents handed over parsed
     * (the API, the workflows directory) too: this document is frozen into every job. */
    size_t size = definition != NULL ? json_dumpb(definition, NULL, 0, JSON_COMPACT) : 0;
    if (size > WORKFLOW_MAX_BYTES) {
        store_op_done(&op->base, TERN_E2BIG, NULL,
                      "workflow: %zu bytes, over the limit of %d bytes (WORKFLOW_MAX_BYTES)", size,
                      WORKFLOW_MAX_BYTES);
        return;
    }
    char err[1024];
    int rc = workflow_parse(definition, ops->opts.plugins ? plugin_registry_check_task : NULL,
                            ops->opts.plugins, &op->wf, err, sizeof err);
    if (rc != 0) {
        /* An unknown task is a fault of the definition (bad input); TERN_ENOENT means an
         * unknown workflow or job to callers of job_ops. */
        store_op_done(&op->base, rc == TERN_ENOENT ? TERN_EINVAL : rc, NULL, "%s", err);
        return;
    }
    json_t *doc = json_deep_copy(op->wf->doc);
    const char *given = json_string_value(json_object_get(doc, "uuid"));
    char uuid[40];
    if (given != NULL)
        snprintf(uuid, sizeof uuid, "%s", given);
    else
        uuid_v4(uuid);
    json_object_del(doc, "uuid");
    char *canon = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    json_object_set_new(doc, "uuid", json_string(uuid));
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, uuid);
    store_args_push(&a, op->wf->name);
    store_args_push(&a, op->wf->version);
    store_args_push_json(&a, doc);
    store_args_push(&a, canon);
    free(canon);
    json_decref(doc);
    op_send(op, SCRIPT_WORKFLOW_PUT, &a, on_workflow_put);
}

static void on_workflow_get(void *data, int status, const redisReply *reply, const char *errmsg)
{
    op_t *op = data;
    if (store_op_failed(&op->base, status, errmsg))
        return;
    const redisReply *doc = store_reply_at(reply, 1);
    if (doc == NULL) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "workflow \"%s\" does not exist",
                      op->workflow_ref);
        return;
    }
    json_t *v = json_loadb(doc->str, doc->len, 0, NULL);
    store_op_done(&op->base, 0, v, NULL);
    json_decref(v);
}

void job_ops_workflow_get(job_ops_t *ops, const char *ref, job_ops_cb cb, void *data)
{
    op_t *op = op_new(ops, cb, data);
    op->workflow_ref = xstrdup(ref);
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, ref);
    op_send(op, SCRIPT_WORKFLOW_GET, &a, on_workflow_get);
}
