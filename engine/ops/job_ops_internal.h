/*
 * job_ops_internal.h -- what the files of the job operations share: the operations
 * object (struct job_ops) and one operation in flight (op_t). Callers outside
 * engine/ops include job_ops.h; this header is for
 *
 *   job_ops.c      the operations object: new, close, free, the local runner, and
 *                  what every operation does (op_new, op_send, write_failed)
 *   job_create.c   creates: checks, the workflow a create names, the direct start,
 *                  the uniqueness key
 *   job_checks.c   the queue of lock checks that creates and retries wait in, worked
 *                  in slices, first in first out
 *   job_actions.c  reads and operator actions: get, events_open, cancel, resume, redrive
 *
 * and for workflow_ops.c, whose puts validate with the operations' plugins and store
 * through their store (opts). The functions below are shared between these files only;
 * each is documented where it is defined. Ownership: see job_ops.c.
 */
#ifndef TERN_JOB_OPS_INTERNAL_H
#define TERN_JOB_OPS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "base/json_text.h"
#include "model/workflow.h"
#include "model/workflow_cache.h"
#include "ops/job_ops.h"
#include "ops/store_op.h"
#include "store/job_view.h"
#include "store/lock_table.h"

#define CREATE_TRIES 4 /* lock cache refreshes before giving up */

/* What a workflow reference of a create (a uuid, "name@version" or a name) stands for,
 * resolved once and shared by the creates in flight. The parsed version is held in the
 * process's workflow cache (model/workflow_cache.h), by uuid, which names one document
 * for good; what may go stale is only which uuid a reference stands for, and
 * job_create.lua checks that with every create. While a first create asks
 * job_create.lua for a workflow not resolved yet (its entry has no `version`), the other
 * creates naming it wait on the entry instead of all asking (a burst of creates for a
 * new workflow costs one extra round trip, not one each). */
struct op;
typedef struct wf_ref {
    int refs; /* one for the slot, one per create holding it */
    char *ref;
    /* The version it stands for (a reference held; its parsed workflow is
     * version->wf): NULL while loading. */
    const workflow_cache_entry_t *version;
    job_view_wf_t *view; /* what new jobs' views show of it, NULL while loading */
    bool asked;          /* a create has asked for it (loading only) */
    struct op *waiters;  /* creates waiting for the answer (linked by next_waiter) */
} wf_ref_t;

#define WF_REF_SLOTS 32

struct job_ops {
    job_ops_opts_t opts;
    job_ops_local_runner_t local; /* reserve is NULL when there is none */
    lock_table_t *locks;          /* the latest snapshot read (a reference held) */
    /* Creates and retries waiting for their lock check (op->check), oldest first. */
    struct op *checks;
    struct op **checks_tail;
    /* Runs a slice of the queue per turn while it is not empty; NULL until the first
     * check that waits. Its own allocation, freed when its close completes: job_ops_free
     * may come before that. */
    uv_idle_t *check_idle;
    bool checking;                 /* in checks_run: an op queued now is run by it */
    bool closed;                   /* job_ops_close ran: no check runs any more */
    job_ops_admission_t admission; /* start is NULL when there is none */
    struct op *admitting;          /* creates whose admission checks run (next_admitting) */
    wf_ref_t *wf_refs[WF_REF_SLOTS];
    size_t wf_refs_next;         /* the slot the next new entry replaces */
    workflow_cache_t *workflows; /* opts.workflows, or the operations' own */
    bool workflows_own;          /* ... made by job_ops_new, freed by job_ops_free */
};

typedef struct op {
    store_op_t base; /* first: the reply callbacks' data is both */
    job_ops_t *ops;
    /* job create */
    char uuid[40];
    bool uuid_made_here; /* by uuid_v4 from kernel randomness, not by the client */
    char *workflow_ref;
    char *params_text; /* the params' compact JSON, sized once and sent as it is */
    json_t *params;    /* ... decoded again when needed (create_params), else NULL */
    char *target;
    char *locks;
    char *extra_hold; /* a job-level hold beyond the workflow's (capacity 1), or NULL */
    uint64_t exec_after_ms;
    int tries;
    bool locks_fresh;       /* the lock table was read by this create's own round trip */
    size_t locks_size;      /* the instructions of its lock's program (op->locks) */
    lock_check_t check;     /* of its target, while in ops->checks */
    bool check_redrive;     /* the check is a retry's (redrive_write follows), not a create's */
    struct op *next_check;  /* in ops->checks */
    wf_ref_t *wfr;          /* the workflow of a create (a reference held), else NULL */
    struct op *next_waiter; /* in wfr->waiters */
    bool asking;            /* this create asked for wfr's workflow; others wait on it */
    json_t *post_back_urls; /* array, or NULL when none */
    bool direct;            /* a slot of the local runner is reserved for the job */
    char *direct_queue;     /* ... for a job of this queue */
    bool direct_lost;       /* ... and the create's answer was lost */
    store_args_t fields;    /* the new job's fields as job_create.lua stores them, but for
                             * created_at and exec_after, which its answer decides (the
                             * view of the job is made from them: job_view_new_text) */
    json_text_t view;       /* the answer of a create: the job's view as JSON text */
    /* Admission checks (docs/WORKFLOWS.md, "Admission checks"): */
    void *admission_run;       /* the run in flight (ops->admission), or NULL */
    struct op *next_admitting; /* in ops->admitting while it runs */
    char admitted_uuid[40];    /* the workflow version whose checks passed, or "" */
    bool repeat_read;          /* its uuid was looked up before the checks */
    char *admission_results;   /* ... their results as compact JSON, or NULL */
    char *refusal_code;        /* the restify code of a refusal by a check, or NULL */

    /* The caller of a create (the store_op_t answers create_answered): one of */
    job_ops_create_cb created_text; /* job_ops_create_text's, or */
    job_ops_cb created_tree;        /* job_ops_create's */
    void *created_data;
    /* redrive and others */
    char *caller;
    char *from_step;
    json_t *extra;
} op_t;

/* ---- job_ops.c ----------------------------------------------------------------- */

op_t *op_new(job_ops_t *ops, job_ops_cb cb, void *data);
void op_send(op_t *op, store_script_t script, store_args_t *a, store_reply_cb cb);
bool write_failed(op_t *op, int status, const char *errmsg, const char *what);

/* ---- job_create.c -------------------------------------------------------------- */

void wf_ref_put(job_ops_t *ops, wf_ref_t *c);
void wake_waiters(op_t *op);
void create_write(op_t *op, const char *locks_version);
void admission_abandon(job_ops_t *ops);

/* ---- job_checks.c -------------------------------------------------------------- */

void on_locks_answer(op_t *op, const redisReply *reply, void (*resend)(op_t *));
void lock_cap_refused(op_t *op, const redisReply *reply, size_t size, const char *what);
void check_queue(op_t *op, const char *self, bool redrive);
void checks_abandon(job_ops_t *ops);
void on_check_idle_closed(uv_handle_t *h);

/* ---- job_actions.c ------------------------------------------------------------- */

void redrive_write(op_t *op, const char *locks_version);

#endif /* TERN_JOB_OPS_INTERNAL_H */
