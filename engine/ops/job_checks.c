/*
 * job_checks.c -- the checks of creates' and retries' targets against the locks of
 * unfinished jobs (lock_table.h). job_ops_t holds the latest snapshot of the locks,
 * replaced whenever job_create.lua or job_redrive.lua says the version checked
 * against is stale.
 *
 * Checking a target against every lock can take a second of CPU at the cap on their
 * size (max_lock_instructions), so creates and retries that check one wait in a queue
 * (first in, first out, so they go to Redis in the order they were made) and the queue
 * is worked through in slices of LOCK_SLICE_STEPS from an idle handle: each turn of
 * the loop does one slice, and serves its I/O and timers (the runner's heartbeats)
 * between two.
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

/* The steps of the lock matcher (lock_match_run) one turn of the loop spends: about
 * 0.4 ms here for the costliest instructions (bracket classes; 1 ms holds 450k to 650k
 * steps), so that no turn is held for more than a millisecond or two. */
#define LOCK_SLICE_STEPS 250000

/* Answers every create and retry still waiting for its lock check: nothing of them was
 * sent, so nothing was stored. */
void checks_abandon(job_ops_t *ops)
{
    while (ops->checks != NULL) {
        op_t *op = ops->checks;
        ops->checks = op->next_check;
        if (ops->checks == NULL)
            ops->checks_tail = &ops->checks;
        store_op_done(&op->base, TERN_ENOTCONN, NULL,
                      "ternd is stopping: the %s was not sent to Redis",
                      op->check_redrive ? "retry" : "create");
    }
}

void on_check_idle_closed(uv_handle_t *h)
{
    free(h);
}

/* Replaces the lock table with the one of a LOCKS answer ({'LOCKS', version, job,
 * pattern, ...}); checks in progress keep the snapshot they began on. */
static void locks_refresh(job_ops_t *ops, const redisReply *reply)
{
    lock_table_t *t = lock_table_from_reply(ops->locks, reply);
    lock_table_put(ops->locks);
    ops->locks = t;
}

/* A create's or retry's call answered with the current table of locks (the one this
 * process held was stale): keep it, and send the operation again with `resend`, which
 * matches the target against it, unless the table kept changing under it. */
void on_locks_answer(op_t *op, const redisReply *reply, void (*resend)(op_t *))
{
    locks_refresh(op->ops, reply);
    op->locks_fresh = true;
    if (++op->tries >= CREATE_TRIES) {
        store_op_done(&op->base, TERN_EIO, NULL, "job locks keep changing; try again");
        return;
    }
    resend(op);
}

/* Answers a LOCKCAP answer ({'LOCKCAP', instructions held, cap, ...}): the lock of
 * `size` instructions would take the locks of unfinished jobs past the cap. */
void lock_cap_refused(op_t *op, const redisReply *reply, size_t size, const char *what)
{
    store_op_done(&op->base, TERN_EAGAIN, NULL,
                  "locks: the locks of unfinished jobs hold %lld instructions; this one's %zu "
                  "would pass the cap of %lld (max_lock_instructions in the config file); %s, "
                  "try again once locked jobs end",
                  store_reply_int(store_reply_at(reply, 1), 0), size,
                  store_reply_int(store_reply_at(reply, 2), 0), what);
}

static void checks_run(job_ops_t *ops);

static void on_check_idle(uv_idle_t *h)
{
    checks_run(h->data);
}

/* A create or retry whose check ended: refused when its target matched a lock of a
 * table read by its own round trip; else sent with the version it was checked against.
 * A table may be stale (the locking job may have ended since it was read): on a match
 * in a table not read for this operation, the table is marked stale, so that the script
 * answers with the current one instead of writing, and the operation checks again. */
static void check_done(op_t *op, int outcome)
{
    const lock_entry_t *lock = outcome == LOCK_MATCH_YES ? lock_check_match(&op->check) : NULL;
    if (lock != NULL && op->locks_fresh) {
        /* op_dispose drops the check, and the lock it names, after the answer. */
        store_op_done(&op->base, TERN_EEXIST, NULL,
                      "job target \"%s\" is locked by job %s (locks \"%s\")", op->target, lock->job,
                      lock->pattern);
        return;
    }
    if (lock != NULL)
        op->check.table->stale = true;
    char version[32];
    snprintf(version, sizeof version, "%s", lock_table_version(op->check.table));
    lock_check_dispose(&op->check);
    if (op->check_redrive)
        redrive_write(op, version);
    else
        create_write(op, version);
}

/* Works through the queue of checks for one slice of LOCK_SLICE_STEPS (all of it when
 * the operations have no loop): each finished check sends or answers its operation,
 * in the order they were queued. Runs again from the idle handle while checks wait. */
static void checks_run(job_ops_t *ops)
{
    uint64_t budget = ops->opts.loop != NULL ? LOCK_SLICE_STEPS : UINT64_MAX;
    ops->checking = true;
    while (ops->checks != NULL && !ops->closed) {
        op_t *op = ops->checks;
        int outcome = lock_check_run(&op->check, &budget);
        if (outcome == LOCK_MATCH_MORE)
            break;
        ops->checks = op->next_check;
        if (ops->checks == NULL)
            ops->checks_tail = &ops->checks;
        op->next_check = NULL;
        check_done(op, outcome); /* may end and free op, and queue others */
        if (budget == 0)
            break;
    }
    ops->checking = false;
    if (ops->closed)
        return;
    if (ops->checks != NULL && ops->check_idle == NULL) {
        ops->check_idle = xcalloc(1, sizeof *ops->check_idle);
        uv_idle_init(ops->opts.loop, ops->check_idle);
        ops->check_idle->data = ops;
    }
    if (ops->checks != NULL)
        uv_idle_start(ops->check_idle, on_check_idle);
    else if (ops->check_idle != NULL)
        uv_idle_stop(ops->check_idle);
}

/* Queues the check of op->target (NULL: nothing to check, but the operation still
 * keeps its turn) against the latest table, skipping job `self`'s own lock. The first
 * slice runs at once when nothing waits ahead of it, so a cheap check is done before
 * this returns (and may have ended op). */
void check_queue(op_t *op, const char *self, bool redrive)
{
    job_ops_t *ops = op->ops;
    if (ops->closed) {
        store_op_done(&op->base, TERN_ENOTCONN, NULL,
                      "ternd is stopping: the %s was not sent to Redis",
                      redrive ? "retry" : "create");
        return;
    }
    if (op->direct) {
        /* The slot of the local runner is taken again when the create is sent: a
         * check may take a while, and the runner may stop meanwhile. */
        ops->local.release(ops->local.data, false);
        op->direct = false;
    }
    lock_check_begin(&op->check, ops->locks, op->target, self);
    op->check_redrive = redrive;
    op->next_check = NULL;
    bool first = ops->checks == NULL;
    *ops->checks_tail = op;
    ops->checks_tail = &op->next_check;
    if (first && !ops->checking)
        checks_run(ops);
}
