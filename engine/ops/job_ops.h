/*
 * job_ops.h -- what callers do to jobs: create a job, read one, cancel, resume, retry
 * from failure (what they do to workflows is in workflow_ops.h). The HTTP API, the `--run` mode of
 * ternd and the integration tests all go through these functions, so each rule
 * (validation, uniqueness, locks, history) lives in one place.
 *
 * Every operation is asynchronous and answers through a job_ops_cb exactly once:
 * status 0 with a result, or a negative TERN_E* code with a message naming the
 * problem (TERN_EINVAL bad input, TERN_ENOENT unknown workflow or job, TERN_EEXIST
 * conflict, TERN_EBUSY wrong state, TERN_E2BIG over a limit, TERN_EAGAIN over a
 * capacity shared by all jobs, TERN_EREFUSED refused by an admission check of the
 * workflow, TERN_ENOTCONN/TERN_EIO Redis). Bad input is refused before anything is
 * written.
 *
 * A write whose call reached Redis but whose answer was lost (the connection dropped,
 * or Redis did not answer within the command timeout) answers TERN_EUNKNOWN: it may or
 * may not have happened, and the message says how to find out (GET /jobs/<uuid>). A
 * write refused before it was sent stays TERN_ENOTCONN: it did not happen. Reads keep
 * TERN_EIO for a lost answer.
 */
#ifndef TERN_JOB_OPS_H
#define TERN_JOB_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "model/job_request.h"
#include "model/workflow.h"
#include "model/workflow_cache.h"
#include "plugins/plugin_loader.h"
#include "store/store.h"

typedef struct job_ops job_ops_t;

/* `result` is borrowed, valid during the callback (NULL on error, but for a create's
 * TERN_EUNKNOWN: {"uuid"} of the job that may have been created). */
typedef void (*job_ops_cb)(void *data, int status, const json_t *result, const char *message);

typedef struct job_ops_opts {
    store_t *store;             /* borrowed */
    plugin_registry_t *plugins; /* borrowed; validates workflows' tasks (may be NULL) */
    size_t max_params_bytes;    /* default 256 KiB */
    /* The loop the checks of targets against locks run on, in slices of a bounded
     * time (see job_checks.c); NULL: each check runs whole when it is made. Borrowed. */
    uv_loop_t *loop;
    /* The cap on the instructions of the compiled locks of all unfinished jobs
     * together (lock_pattern_size); default 500000. */
    uint32_t max_lock_instructions;
    /* The process's cache of parsed workflow versions (borrowed; it must outlive the
     * operations), shared with the runner of the same process so that a version is
     * parsed once for both; NULL: the operations make their own. */
    workflow_cache_t *workflows;
} job_ops_opts_t;

job_ops_t *job_ops_new(const job_ops_opts_t *opts);

/* Stops for good: the creates and retries waiting for their lock check are answered
 * TERN_ENOTCONN (nothing of them was sent) and later ones at once; closes the handle on
 * the loop. For a shutdown, while the loop runs and before the store is freed. */
void job_ops_close(job_ops_t *ops);

/* Frees the operations' state (job_ops_close first when they have a loop). */
void job_ops_free(job_ops_t *ops);

/* A runner in the same process (ternd with both roles) that new jobs may start on at
 * once: a create it has a free slot for asks job_create.lua to start the job on it in
 * the create's own step, when that takes no other job's turn (docs/WORKFLOWS.md, "Direct start").
 * Each reserve that answered true is followed by exactly one start or release. */
typedef struct job_ops_local_runner {
    const char *id; /* the runner's id (borrowed: lives as long as the runner) */
    /* Takes a slot for a new job of `queue`; false when there is none to take. */
    bool (*reserve)(void *data, const char *queue);
    /* The job was started on the runner (fence 1): `fields` (borrowed) are its stored
     * fields, `doc` its workflow document, `server_now` the server's time. */
    void (*start)(void *data, const char *uuid, const store_args_t *fields, const char *doc,
                  size_t doc_len, long long server_now);
    /* The slot was not used: the job was queued, or not created. `lost`: the answer
     * was lost, so the job may have started on the runner unseen. */
    void (*release)(void *data, bool lost);
    void *data;
} job_ops_local_runner_t;

/* Sets (copied) or clears (NULL) the local runner. */
void job_ops_set_local_runner(job_ops_t *ops, const job_ops_local_runner_t *local);

/* How the admission checks of a create ended (see job_ops_admission_t): status 0 and
 * `results` ({"<check>": {"result": value}, ...}, borrowed for the call), or a refusal:
 * TERN_ENOENT, TERN_EEXIST, TERN_EREFUSED or TERN_EAGAIN with the restify `code` and the
 * `message` the create is answered with (borrowed for the call). */
typedef void (*job_ops_admitted_cb)(void *op, int status, const char *code, const char *message,
                                    const json_t *results);

/* What runs the admission checks of a workflow (docs/WORKFLOWS.md, "Admission checks"),
 * in this process, before a create stores anything: run/admission.h, connected by
 * ternd/main.c. Without one, a create of a workflow that has checks is answered
 * TERN_EAGAIN (AdmissionUnavailable) and nothing is stored. */
typedef struct job_ops_admission {
    /* Starts the checks of `wf` (borrowed until the answer or the cancel) for the job
     * `uuid` of `target` (may be NULL) and `params` (borrowed). Calls done(op, ...)
     * exactly once, never inside this call, unless cancelled. Returns the run. */
    void *(*start)(void *data, const workflow_t *wf, const char *uuid, const char *target,
                   const json_t *params, job_ops_admitted_cb done, void *op);
    /* Stops a run that has not answered; done is not called. */
    void (*cancel)(void *data, void *run);
    void *data;
} job_ops_admission_t;

/* Sets (copied) or clears (NULL) what runs admission checks. */
void job_ops_set_admission(job_ops_t *ops, const job_ops_admission_t *admission);

/* Creates a job. Result: the new job as job_ops_get shows it, as created (execution
 * "queued", also when it started at once on the local runner in the same step). A job with the same
 * workflow, target and params that has not finished, or a target matching an active job's locks, is
 * TERN_EEXIST and names the other job; so is a `uuid` that is already a job's. A lock that
 * would take the locks of unfinished jobs past max_lock_instructions is TERN_EAGAIN.
 * A create refused by an admission check of the workflow stores nothing and answers the
 * check's status (TERN_ENOENT, TERN_EEXIST, TERN_EREFUSED, or TERN_EAGAIN when a check
 * timed out or failed) with the result {"code": <the restify code>}. */
void job_ops_create(job_ops_t *ops, const job_create_req_t *req, job_ops_cb cb, void *data);

/* The answer of job_ops_create_text. On success (status 0) `view` is the new job as
 * job_ops_create's result, as compact JSON text of `len` bytes (NUL-terminated), and
 * `uuid` is its uuid; both are borrowed, valid during the callback only. On error both
 * are NULL (len 0) and `message` names the problem, as for a job_ops_cb, but for
 * TERN_EUNKNOWN, which comes with the uuid of the job that may have been created.
 * `code` is NULL but for a refusal by an admission check, whose restify code it is
 * (borrowed, valid during the callback). */
typedef void (*job_ops_create_cb)(void *data, int status, const char *view, size_t len,
                                  const char *uuid, const char *code, const char *message);

/* job_ops_create answering with the view as text: what the API sends, written straight
 * from the job's fields (job_view_new_text), where a tree and its encoding cost a
 * third of ternd's CPU per create. */
void job_ops_create_text(job_ops_t *ops, const job_create_req_t *req, job_ops_create_cb cb,
                         void *data);

/* Reads a job in node-workflow's shape plus tern's fields (see job_view.h). */
void job_ops_get(job_ops_t *ops, const char *uuid, job_ops_cb cb, void *data);

/* Makes sure the job has its own event stream before a watcher reads it: a job whose
 * record tells its whole story has none, and gets one started from that record, under
 * the ids job_history.c gives the same events (job_events_open.lua). Result: NULL;
 * TERN_ENOENT when there is no such job. */
void job_ops_events_open(job_ops_t *ops, const char *uuid, job_ops_cb cb, void *data);

/* Operator actions. `caller` names who acted (recorded in the job's history). */
void job_ops_cancel(job_ops_t *ops, const char *uuid, const char *caller, job_ops_cb cb,
                    void *data);

/* Resumes a waiting job with its step's outcome: `result` (borrowed, may be NULL) or,
 * when `error` (borrowed object {code, message}) is given, a failure of the step. */
void job_ops_resume(job_ops_t *ops, const char *uuid, const json_t *result, const json_t *error,
                    const char *caller, job_ops_cb cb, void *data);

/* Retry from failure (redrive): a failed or canceled job goes back to its queue at
 * the chain step that failed, or at `from_step` (a chain step name) when given, with
 * `params` (borrowed object, may be NULL) merged over its params. A target matching an
 * unfinished job's locks is TERN_EEXIST naming that job and lock, as at create, and
 * changes nothing; so does TERN_EAGAIN when the job's own lock no longer fits under
 * max_lock_instructions. */
void job_ops_redrive(job_ops_t *ops, const char *uuid, const char *from_step, const json_t *params,
                     const char *caller, job_ops_cb cb, void *data);

/* The uniqueness key of (workflow name, target, params): a 128-bit hash in hex.
 * Exposed for tests. */
void job_ops_unique_key(const char *workflow, const char *target, const json_t *params,
                        char out[33]);

#endif /* TERN_JOB_OPS_H */
