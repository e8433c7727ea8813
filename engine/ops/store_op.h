/*
 * store_op.h -- one caller's operation on the store while it is in flight: checks,
 * one or more script calls, and exactly one answer through a job_ops_cb. job_create.c,
 * job_actions.c, job_info.c, job_list.c, job_stats.c, runners_read.c and workflow_ops.c
 * run their operations this way; what each operation checks and answers stays in its
 * own file.
 *
 * Ownership: an operation is one heap object of its file's own type whose first
 * member is a store_op_t, so the `data` a reply callback receives is both the
 * store_op_t and the embedding object. store_op_new() allocates it; store_op_done() is
 * the one place that frees it, right after the caller's callback ran. Every path of an
 * operation therefore ends in store_op_done(), directly or through store_op_send() or
 * store_op_failed().
 */
#ifndef TERN_STORE_OP_H
#define TERN_STORE_OP_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "ops/job_ops.h"
#include "store/store.h"

typedef struct store_op store_op_t;

/* Frees what an operation owns beyond its own object (copies of its inputs). */
typedef void (*store_op_dispose_fn)(store_op_t *op);

struct store_op {
    job_ops_cb cb;               /* the caller's answer; runs once */
    void *data;                  /* the caller's data for cb */
    store_op_dispose_fn dispose; /* may be NULL */
};

/* Returns a new zeroed object of `size` bytes (at least sizeof(store_op_t)) whose
 * first member is the returned store_op_t, set to answer through cb(data). `dispose`
 * (may be NULL) runs in store_op_done() before the object is freed. Never NULL. */
store_op_t *store_op_new(size_t size, job_ops_cb cb, void *data, store_op_dispose_fn dispose);

/* Answers: calls the callback with `status`, `result` (borrowed, may be NULL) and the
 * message formatted from `fmt` (NULL when fmt is NULL), then disposes of and frees
 * the operation. */
void store_op_done(store_op_t *op, int status, const json_t *result, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Runs `script` with the arguments in `a` (disposed of here) and the operation as the
 * data of `on_reply`. When Redis is not reachable, on_reply never runs and the
 * operation answers "Redis is not reachable" through store_op_done(). */
void store_op_send(store_op_t *op, store_t *store, store_script_t script, store_args_t *a,
                   store_reply_cb on_reply);

/* For the top of a reply callback: when `status` is not 0, answers it with `errmsg`
 * through store_op_done() and returns true (the operation is gone); else returns
 * false. */
bool store_op_failed(store_op_t *op, int status, const char *errmsg);

#endif /* TERN_STORE_OP_H */
