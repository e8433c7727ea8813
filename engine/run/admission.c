/*
 * admission.c -- the admission checks of a job being created, run in order, each within
 * its bound; see admission.h.
 *
 * This file owns each run (admission_run_t): the results gathered so far, the attempt
 * of the check in flight (a task context or an isolated helper) and one timer, which
 * bounds that attempt and also carries an answer decided inside a call (a template that
 * names nothing, an unknown task), so that the caller is never answered from inside
 * admission_run_start. It does not own the workflow, the plugins or the caller.
 *
 * Life of a run:
 *
 *   CHECKING --outcome: done--> CHECKING (the next check) ... --last done--> ANSWERED
 *      |  |                                                                     |
 *      |  +--outcome: refused, failed, misuse; timer: timeout------------> ANSWERED
 *      +--admission_run_cancel--> CANCELLED                                     |
 *                                     +--------timer closed--> freed <----------+
 */
#include "run/admission.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/log.h"
#include "model/template.h"
#include "run/task_isolated.h"

struct admission {
    admission_opts_t opts; /* its strings and redis point to the copies below */
    char *helper_exe, *plugin_dir, *redis_url;
    task_redis_ops_t redis;
};

typedef enum run_phase {
    RUN_CHECKING, /* a check is in flight, or its answer waits on the timer */
    RUN_ANSWERED, /* done was called; the timer is closing */
    RUN_CANCELLED /* admission_run_cancel; the timer is closing */
} run_phase_t;

struct admission_run {
    admission_t *a;
    const workflow_t *wf; /* borrowed, see admission_run_start */
    char uuid[40];
    char *target;              /* or NULL */
    json_t *params;            /* a reference */
    json_t *job;               /* {"uuid", "target", "workflow"}: the templates' job */
    json_t *results;           /* check name -> {"result": value} */
    size_t next;               /* the check in flight */
    tern_ctx *ctx;             /* its attempt in this process, or */
    task_isolated_t *isolated; /* in a helper */
    uv_timer_t timer;          /* the check's bound, or a pending answer's delivery */
    run_phase_t phase;
    /* An answer decided inside a call, delivered by the timer. */
    bool pending;
    int pending_status;
    char *pending_code;
    char *pending_message;
    admission_done_cb done;
    void *data;
};

static char *dup_or_null(const char *s)
{
    return s != NULL ? xstrdup(s) : NULL;
}

/* See admission.h. */
admission_t *admission_new(const admission_opts_t *opts)
{
    admission_t *a = xcalloc(1, sizeof *a);
    a->opts = *opts;
    a->opts.helper_exe = a->helper_exe = dup_or_null(opts->helper_exe);
    a->opts.plugin_dir = a->plugin_dir = dup_or_null(opts->plugin_dir);
    a->opts.redis_url = a->redis_url = dup_or_null(opts->redis_url);
    if (a->opts.default_timeout_ms == 0)
        a->opts.default_timeout_ms = ADMISSION_TIMEOUT_DEFAULT_MS;
    if (opts->redis != NULL)
        a->redis = *opts->redis;
    a->opts.redis = opts->redis != NULL ? &a->redis : NULL;
    return a;
}

/* See admission.h. */
void admission_free(admission_t *a)
{
    if (a == NULL)
        return;
    free(a->helper_exe);
    free(a->plugin_dir);
    free(a->redis_url);
    free(a);
}

/* ---- ending a run ----------------------------------------------------------------- */

static void on_timer_closed(uv_handle_t *h)
{
    admission_run_t *run = h->data;
    json_decref(run->params);
    json_decref(run->job);
    json_decref(run->results);
    free(run->target);
    free(run->pending_code);
    free(run->pending_message);
    free(run);
}

/* Stops the attempt in flight, if any, without an outcome. */
static void stop_attempt(admission_run_t *run)
{
    if (run->ctx != NULL)
        task_ctx_cancel(run->ctx);
    if (run->isolated != NULL)
        task_isolated_cancel(run->isolated);
    run->ctx = NULL;
    run->isolated = NULL;
}

/* Answers the caller (from a loop callback) and lets the run go. */
static void answer(admission_run_t *run, int status, const char *code, const char *message)
{
    stop_attempt(run);
    run->phase = RUN_ANSWERED;
    uv_timer_stop(&run->timer);
    admission_verdict_t v = {
        .status = status,
        .code = status != 0 ? code : NULL,
        .message = status != 0 ? message : NULL,
        .results = status == 0 ? run->results : NULL,
    };
    run->done(run->data, &v);
    uv_close((uv_handle_t *)&run->timer, on_timer_closed);
}

static void answer_fmt(admission_run_t *run, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void answer_fmt(admission_run_t *run, int status, const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    answer(run, status, code, msg);
}

static void on_timer(uv_timer_t *t);

/* Keeps an answer decided inside a call for the timer to deliver at once. */
static void answer_later(admission_run_t *run, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void answer_later(admission_run_t *run, int status, const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    stop_attempt(run);
    run->pending = true;
    run->pending_status = status;
    run->pending_code = code != NULL ? xstrdup(code) : NULL;
    run->pending_message = xstrdup(msg);
    uv_timer_start(&run->timer, on_timer, 0, 0);
}

/* ---- one check ------------------------------------------------------------------ */

static void check_start(admission_run_t *run);

/* The status of a refusal the task asked for (tern_task_refuse: 403, 404, 409 or 422,
 * as task_ctx.c leaves it; 0 for tern_task_fail, which is a 422 too). */
static int refusal_status(int http_status)
{
    switch (http_status) {
    case 403:
        return TERN_EPERM;
    case 404:
        return TERN_ENOENT;
    case 409:
        return TERN_EEXIST;
    default:
        return TERN_EREFUSED;
    }
}

/* What the engine reports of an isolated attempt that gave no outcome of its own. */
static bool engine_failure(const char *code)
{
    return strcmp(code, "TaskCrashed") == 0 || strcmp(code, "IsolationUnavailable") == 0;
}

static void on_check_outcome(void *owner, task_outcome_t *o)
{
    admission_run_t *run = owner;
    const wf_admission_t *c = &run->wf->admission[run->next];
    bool isolated = run->isolated != NULL;
    run->ctx = NULL;      /* it frees itself after its outcome */
    run->isolated = NULL; /* freed before its outcome was delivered */
    uv_timer_stop(&run->timer);
    switch (o->kind) {
    case TASK_DONE:
        json_object_set_new(run->results, c->name, json_pack("{s:O}", "result", o->result));
        run->next++;
        if (run->next == run->wf->n_admission)
            answer(run, 0, NULL, NULL);
        else
            check_start(run);
        break;
    case TASK_FAILED:
        if (isolated && o->refuse_status == 0 && engine_failure(o->code))
            answer_fmt(run, TERN_EAGAIN, "AdmissionCheckFailed", "admission check \"%s\" (%s): %s",
                       c->name, c->task, o->message);
        else
            answer(run, refusal_status(o->refuse_status), o->code, o->message);
        break;
    case TASK_WAIT:
    case TASK_REQUEUE:
        answer_fmt(run, TERN_EAGAIN, "AdmissionCheckFailed",
                   "admission check \"%s\" (%s) called %s, which an admission check cannot: "
                   "a check answers with tern_task_done, tern_task_fail or tern_task_refuse",
                   c->name, c->task, o->kind == TASK_WAIT ? "tern_task_wait" : "tern_task_requeue");
        break;
    }
    task_outcome_dispose(o);
}

static void on_timer(uv_timer_t *t)
{
    admission_run_t *run = t->data;
    if (run->phase != RUN_CHECKING)
        return;
    if (run->pending) {
        answer(run, run->pending_status, run->pending_code, run->pending_message);
        return;
    }
    const wf_admission_t *c = &run->wf->admission[run->next];
    uint64_t ms = c->timeout_ms > 0 ? c->timeout_ms : run->a->opts.default_timeout_ms;
    log_msg(TERN_LOG_WARN, "admission", NULL,
            "job %s: admission check \"%s\" (%s) gave no answer within %llu ms; cancelled",
            run->uuid, c->name, c->task, (unsigned long long)ms);
    /* answer() cancels the attempt: the task's cancel hook, then its resources. */
    answer_fmt(run, TERN_EAGAIN, "AdmissionTimeout",
               "admission check \"%s\" (%s) gave no answer within %llu ms; the job was not "
               "created",
               c->name, c->task, (unsigned long long)ms);
}

/* Starts the check at run->next. */
static void check_start(admission_run_t *run)
{
    admission_t *a = run->a;
    const wf_admission_t *c = &run->wf->admission[run->next];
    char path[64], args_path[72], err[512];
    snprintf(path, sizeof path, "admission[%zu]", run->next);
    snprintf(args_path, sizeof args_path, "%s.args", path);
    template_scope_t sc = {.params = run->params, .job = run->job, .admission = run->results};
    json_t *args = plugin_registry_expand_args(a->opts.plugins, c->task, c->args, args_path, &sc,
                                               err, sizeof err);
    if (args == NULL) {
        answer_later(run, TERN_EREFUSED, "TemplateError", "%s", err);
        return;
    }
    const plugin_t *plugin = NULL;
    const tern_task_def *def = plugin_registry_find(a->opts.plugins, c->task, &plugin);
    if (def == NULL) {
        json_decref(args);
        answer_later(run, TERN_EAGAIN, "AdmissionCheckFailed",
                     "admission check \"%s\": task %s is not loaded in this process", c->name,
                     c->task);
        return;
    }
    if (plugin_registry_check_expanded(a->opts.plugins, c->task, args, path, err, sizeof err) !=
        0) {
        json_decref(args);
        answer_later(run, TERN_EREFUSED, "InvalidArgument", "%s", err);
        return;
    }
    char key[96], step_name[WORKFLOW_NAME_MAX + 16];
    snprintf(key, sizeof key, "%s/admission/%zu", run->uuid, run->next);
    snprintf(step_name, sizeof step_name, "admission.%s", c->name);
    task_ctx_opts_t o = {
        .loop = a->opts.loop,
        .def = def,
        .plugin_name = plugin->name,
        .plugin_state = plugin->state,
        .task_name = c->task,
        .job_uuid = run->uuid,
        .job_target = run->target,
        .params = run->params,
        .step_name = step_name,
        .attempt = 1,
        .idempotency_key = key,
        .http = a->opts.http,
        .allow = plugin->allow_networks,
        .redis = a->opts.redis,
        .sink = {.on_outcome = on_check_outcome, .owner = run},
    };
    uint64_t ms = c->timeout_ms > 0 ? c->timeout_ms : a->opts.default_timeout_ms;
    /* The loop's clock is the one of its iteration's start: without a fresh reading the
     * bound could end a little before `ms` had passed (test_admission's hang test once
     * saw its 400 ms bound answered in 399 ms under ASan). */
    uv_update_time(a->opts.loop);
    uv_timer_start(&run->timer, on_timer, ms, 0);
    if (c->isolate || (def->flags & TERN_TASK_ISOLATED)) {
        if (a->opts.helper_exe == NULL) {
            json_decref(args);
            answer_later(run, TERN_EAGAIN, "AdmissionCheckFailed",
                         "admission check \"%s\" (%s): this process cannot start isolated "
                         "helper processes",
                         c->name, c->task);
            return;
        }
        task_isolated_opts_t io = {
            .loop = a->opts.loop,
            .helper_exe = a->opts.helper_exe,
            .plugin_dir = a->opts.plugin_dir,
            .redis_url = a->opts.redis_url,
            .plugin_config = plugin->config,
            .ctx = &o,
        };
        run->isolated = task_isolated_start(&io, args, err, sizeof err);
        json_decref(args);
        if (run->isolated == NULL)
            answer_later(run, TERN_EAGAIN, "AdmissionCheckFailed",
                         "admission check \"%s\" (%s): cannot start its helper process: %s",
                         c->name, c->task, err);
        return;
    }
    /* The outcome never comes inside this call (task_ctx delivers it from the loop). */
    run->ctx = task_ctx_start(&o, args);
    json_decref(args);
}

/* ---- public ----------------------------------------------------------------------- */

/* See admission.h. */
admission_run_t *admission_run_start(admission_t *a, const workflow_t *wf, const char *uuid,
                                     const char *target, const json_t *params,
                                     admission_done_cb done, void *data)
{
    admission_run_t *run = xcalloc(1, sizeof *run);
    run->a = a;
    run->wf = wf;
    snprintf(run->uuid, sizeof run->uuid, "%s", uuid);
    run->target = target != NULL ? xstrdup(target) : NULL;
    run->params = params != NULL ? json_incref((json_t *)params) : json_object();
    run->job = json_pack("{s:s, s:s?, s:s}", "uuid", run->uuid, "target", run->target, "workflow",
                         wf->name);
    run->results = json_object();
    run->done = done;
    run->data = data;
    uv_timer_init(a->opts.loop, &run->timer);
    run->timer.data = run;
    run->phase = RUN_CHECKING;
    if (wf->n_admission == 0)
        answer_later(run, 0, NULL, "admitted");
    else
        check_start(run);
    return run;
}

/* See admission.h. */
void admission_run_cancel(admission_run_t *run)
{
    if (run == NULL || run->phase != RUN_CHECKING)
        return;
    stop_attempt(run);
    run->phase = RUN_CANCELLED;
    uv_timer_stop(&run->timer);
    uv_close((uv_handle_t *)&run->timer, on_timer_closed);
}
