/*
 * store_op.c -- an operation on the store in flight and its one answer; see
 * store_op.h. This file owns the life of the operation object (allocation, the single
 * answer, freeing); it knows nothing of what an operation checks or returns.
 */
#include "ops/store_op.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/alloc.h"

store_op_t *store_op_new(size_t size, job_ops_cb cb, void *data, store_op_dispose_fn dispose)
{
    assert(size >= sizeof(store_op_t));
    store_op_t *op = xcalloc(1, size);
    op->cb = cb;
    op->data = data;
    op->dispose = dispose;
    return op;
}

void store_op_done(store_op_t *op, int status, const json_t *result, const char *fmt, ...)
{
    char msg[1024] = "";
    if (fmt != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
    }
    op->cb(op->data, status, result, fmt != NULL ? msg : NULL);
    if (op->dispose != NULL)
        op->dispose(op);
    free(op);
}

void store_op_send(store_op_t *op, store_t *store, store_script_t script, store_args_t *a,
                   store_reply_cb on_reply)
{
    int rc = store_eval_move(store, script, a, on_reply, op);
    store_args_dispose(a);
    if (rc != 0)
        store_op_done(op, rc, NULL, "Redis is not reachable");
}

bool store_op_failed(store_op_t *op, int status, const char *errmsg)
{
    if (status == 0)
        return false;
    store_op_done(op, status, NULL, "%s", errmsg);
    return true;
}
