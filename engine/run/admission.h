/*
 * admission.h -- running the admission checks of a workflow for a job being created
 * (docs/WORKFLOWS.md, "Admission checks"), in the process that serves the create.
 *
 * A run takes the checks of one workflow in order, each as one attempt of its task in a
 * task context of its own (task_ctx_start), or in a helper process for a check with
 * "isolate": true (task_isolated_start), each within its timeout (the check's own, or
 * the default this module was made with). It answers once: the job may be created,
 * with every check's result; or it may not, with the status, code and message to answer
 * the create with. Nothing here writes to Redis: what a run decides is only an answer,
 * and job_create.c stores the job (and the results) only after it said yes.
 *
 * What a check's outcome becomes:
 *   tern_task_done                   the next check; after the last, admitted
 *   tern_task_refuse(404|409|422)    TERN_ENOENT | TERN_EEXIST | TERN_EREFUSED, the
 *                                    task's code and message
 *   tern_task_fail                   TERN_EREFUSED (422), the task's code and message
 *   no outcome within the timeout    TERN_EAGAIN, AdmissionTimeout: the task's cancel
 *                                    hook runs and every resource it holds is stopped
 *   an isolated helper that crashed  TERN_EAGAIN, AdmissionCheckFailed
 *   tern_task_wait/tern_task_requeue TERN_EAGAIN, AdmissionCheckFailed naming the misuse
 *   a template naming nothing        TERN_EREFUSED, TemplateError
 *   arguments the schema refuses     TERN_EREFUSED, InvalidArgument
 *   a task no longer loaded          TERN_EAGAIN, AdmissionCheckFailed
 * A check that is not isolated runs in this process: if its plugin crashes, the
 * process goes down with it, as it would for a step.
 */
#ifndef TERN_ADMISSION_H
#define TERN_ADMISSION_H

#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "model/workflow.h"
#include "plugins/plugin_loader.h"
#include "run/http_client.h"
#include "run/task_ctx.h"

/* The default timeout of a check that names none (ternd's admission_timeout_ms). */
#define ADMISSION_TIMEOUT_DEFAULT_MS 2000

typedef struct admission admission_t;
typedef struct admission_run admission_run_t;

typedef struct admission_opts {
    uv_loop_t *loop;
    plugin_registry_t *plugins;    /* borrowed: finds the tasks */
    http_client_t *http;           /* may be NULL: tern_http_request then fails */
    const task_redis_ops_t *redis; /* copied; may be NULL: tern_redis_eval fails */
    const char *helper_exe;        /* ternd, for isolated checks (NULL: they fail, 503) */
    const char *plugin_dir;        /* passed to the helper */
    const char *redis_url;         /* passed to the helper (may be NULL) */
    uint64_t default_timeout_ms;   /* 0: ADMISSION_TIMEOUT_DEFAULT_MS */
} admission_opts_t;

/* Makes the runner of checks. The strings are copied; plugins, http and the loop must
 * outlive it. */
admission_t *admission_new(const admission_opts_t *opts);

/* Frees it, once no run of it is in flight (each answered or cancelled, and the loop
 * ran once more so that their handles closed). */
void admission_free(admission_t *a);

/* What a run decided, valid during the callback only. */
typedef struct admission_verdict {
    int status;            /* 0 admitted; else TERN_ENOENT, TERN_EEXIST, TERN_EREFUSED or
                              TERN_EAGAIN (see the table above) */
    const char *code;      /* the restify code when refused ("QuotaExceeded",
                              "AdmissionTimeout"); NULL when admitted */
    const char *message;   /* names the check, when refused; NULL when admitted */
    const json_t *results; /* admitted: {"<check>": {"result": value}, ...}; borrowed */
} admission_verdict_t;

typedef void (*admission_done_cb)(void *data, const admission_verdict_t *verdict);

/* Runs the checks of `wf` (which must have some) for the job `uuid` (copied) of
 * `target` (copied, may be NULL) and `params` (borrowed; increfed for the run). `wf` is
 * borrowed and must live until the answer or the cancel. `done` is called exactly
 * once, from a callback of the loop (never inside this call), unless the run is
 * cancelled first. Returns the run. */
admission_run_t *admission_run_start(admission_t *a, const workflow_t *wf, const char *uuid,
                                     const char *target, const json_t *params,
                                     admission_done_cb done, void *data);

/* Stops a run that has not answered: the check in flight is cancelled (its cancel hook,
 * then its resources; an isolated helper is killed) and `done` is never called. */
void admission_run_cancel(admission_run_t *run);

#endif /* TERN_ADMISSION_H */
