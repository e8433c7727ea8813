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
    wf_ref_put(op->ops, op->wfr);
    free(op->workflow_ref);
    json_decref(op->params);
    free(op->params_text);
    free(op->target);
    free(op->locks);
    free(op->extra_hold);
    lock_check_dispose(&op->check);
    json_decref(op->post_back_urls);
    store_args_dispose(&op->fields);
    json_text_dispose(&op->view);
    if (op->direct)
        op->ops->local.release(op->ops->local.data, op->direct_lost);
    free(op->direct_queue);
    free(op->admission_results);
    free(op->refusal_code);
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

void job_ops_set_admission(job_ops_t *ops, const job_ops_admission_t *admission)
{
    if (admission != NULL)
        ops->admission = *admission;
    else
        memset(&ops->admission, 0, sizeof ops->admission);
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
    ops->workflows = opts->workflows;
    if (ops->workflows == NULL) {
        ops->workflows = workflow_cache_new(0);
        ops->workflows_own = true;
    }
    ops->checks_tail = &ops->checks;
    return ops;
}

void job_ops_close(job_ops_t *ops)
{
    if (ops == NULL || ops->closed)
        return;
    ops->closed = true;
    checks_abandon(ops);
    admission_abandon(ops);
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
    for (size_t i = 0; i < WF_REF_SLOTS; i++)
        wf_ref_put(ops, ops->wf_refs[i]);
    if (ops->workflows_own)
        workflow_cache_free(ops->workflows);
    free(ops);
}
