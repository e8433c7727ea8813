/*
 * task_ctx.c -- the tern_ctx object (one attempt of one step) and the host table that
 * plugins reach through it. See task_ctx.h and include/tern/task.h.
 *
 * This file owns the context and every resource a task obtains through the host:
 * timers, HTTP requests, children, thread-pool work and Redis calls, each a `ctx_res_t`
 * on the context's list while it is pending. It owns the outcome until it is handed to
 * the sink, and the pending progress report. It does not own the task's own handles
 * (the task's cancel hook stops those), the HTTP client, the Redis ops or the sink.
 *
 * Life of a context:
 *
 *   RUNNING --report--> REPORTED --deliver timer--> FINISHED --+
 *      |                   |                                   +--handles closed--> freed
 *      +------cancel-------+--------------------> CANCELLED ---+
 *
 * A report stores the outcome, stops every resource and arms a 0 ms timer; the outcome
 * reaches the sink from that timer's callback, so the owner is never re-entered from
 * inside start() or any other call it made, and a pending progress report is flushed
 * first. A second report, or one after cancel, is logged at warn level and dropped.
 * The context is freed when its reference count -- its two own timers, each resource
 * timer until closed and each piece of thread-pool work until its after-callback ran
 * -- drops to zero, which only happens in a libuv callback, never inside a call made
 * by the task. The magic word of the header is cleared just before the memory goes.
 */
#include "run/task_ctx.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "run/child_process.h"

#define PROGRESS_INTERVAL_MS 200
#define STATE_KEY_MAX        128

typedef enum ctx_phase {
    CTX_RUNNING,   /* start() was called; no outcome yet */
    CTX_REPORTED,  /* an outcome waits for the deliver timer */
    CTX_FINISHED,  /* the outcome was handed to the sink; closing */
    CTX_CANCELLED, /* task_ctx_cancel(); no outcome will be delivered; closing */
} ctx_phase_t;

typedef enum res_kind {
    RES_TIMER,        /* tern_timer_start */
    RES_SPAWN_FAILED, /* tern_spawn whose child could not start: error delivered by timer */
    RES_HTTP,         /* tern_http_request */
    RES_SPAWN,        /* tern_spawn */
    RES_WORK,         /* tern_work */
    RES_REDIS,        /* tern_redis_eval */
} res_kind_t;

typedef struct ctx_res ctx_res_t;

/* The handle task_redis_ops hands back to on_redis_done. */
struct task_redis_call {
    ctx_res_t *res;
};

/* One pending resource of a context. */
struct ctx_res {
    ctx_res_t *prev, *next; /* the context's list; unlinked once no longer pending */
    tern_ctx *ctx;
    res_kind_t kind;
    int id; /* RES_TIMER: what tern_timer_start returned */
    void *data;
    union {
        tern_timer_cb timer;
        tern_http_cb http;
        tern_spawn_cb spawn;
        tern_after_work_cb after;
        tern_redis_cb redis;
    } cb;
    union {
        uv_timer_t timer; /* RES_TIMER, RES_SPAWN_FAILED */
        struct {
            uv_work_t req;
            tern_work_fn fn;
            bool abandoned; /* the attempt ended: `after` must not run */
        } work;
        http_request_t *http;
        child_process_t *child;
        struct {
            void *handle;
            struct task_redis_call call;
            bool in_eval;
        } redis;
    } u;
    char *error; /* RES_SPAWN_FAILED: why the child could not start */
};

struct tern_ctx {
    struct tern_ctx_head head; /* first: the inline wrappers of task.h read it */
    uv_loop_t *loop;
    const tern_task_def *def;
    char *plugin_name;
    char *task_name;
    void *plugin_state;
    char *job_uuid;
    char *job_target; /* may be NULL */
    char *step_name;
    char *idempotency_key;
    uint32_t attempt;
    json_t *params;     /* a reference of ours */
    json_t *state;      /* the job's state at start (a reference of ours), or NULL */
    json_t *changes;    /* this attempt's tern_state_set values, or NULL */
    json_t *log_fields; /* {"job", "step", "attempt", "task"} for every log line */
    http_client_t *http;
    const net_allow_t *allow; /* borrowed: the plugin's, lives as long as it */
    task_redis_ops_t redis;   /* copied; redis.eval == NULL: not available */
    task_sink_t sink;

    ctx_phase_t phase;
    bool closing;
    int refs; /* see the top of the file */
    int last_timer_id;
    ctx_res_t *resources;
    uint64_t started_ms;

    task_outcome_t outcome; /* CTX_REPORTED */
    uv_timer_t deliver;     /* delivers the outcome from the loop */

    uv_timer_t progress_timer; /* delivers `progress` when the interval allows */
    json_t *progress;          /* the pending report (a reference of ours), or NULL */
    uint64_t progress_last_ms; /* loop time of the last delivery */
    bool progress_sent;        /* at least one was delivered */
};

static const tern_host host_table;

/* ---- lifetime ----------------------------------------------------------------------- */

static void ctx_free(tern_ctx *ctx)
{
    assert(ctx->resources == NULL && ctx->refs == 0);
    void (*on_closed)(void *) = ctx->sink.on_closed;
    void *owner = ctx->sink.owner;
    task_outcome_dispose(&ctx->outcome);
    json_decref(ctx->progress);
    json_decref(ctx->params);
    json_decref(ctx->state);
    json_decref(ctx->changes);
    json_decref(ctx->log_fields);
    free(ctx->plugin_name);
    free(ctx->task_name);
    free(ctx->job_uuid);
    free(ctx->job_target);
    free(ctx->step_name);
    free(ctx->idempotency_key);
    ctx->head.magic = 0;
    free(ctx);
    if (on_closed != NULL)
        on_closed(owner);
}

static void ctx_unref(tern_ctx *ctx)
{
    assert(ctx->refs > 0);
    if (--ctx->refs == 0)
        ctx_free(ctx);
}

static void on_ctx_timer_closed(uv_handle_t *h)
{
    ctx_unref(h->data);
}

static void res_link(tern_ctx *ctx, ctx_res_t *r)
{
    r->prev = NULL;
    r->next = ctx->resources;
    if (ctx->resources != NULL)
        ctx->resources->prev = r;
    ctx->resources = r;
}

static void res_unlink(ctx_res_t *r)
{
    tern_ctx *ctx = r->ctx;
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        ctx->resources = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

static ctx_res_t *res_new(tern_ctx *ctx, res_kind_t kind, void *data)
{
    ctx_res_t *r = xcalloc(1, sizeof *r);
    r->ctx = ctx;
    r->kind = kind;
    r->data = data;
    return r;
}

static void on_res_timer_closed(uv_handle_t *h)
{
    ctx_res_t *r = h->data;
    tern_ctx *ctx = r->ctx;
    free(r->error);
    free(r);
    ctx_unref(ctx);
}

/* Stops a pending resource whose callback must never run. It has been unlinked. */
static void res_stop(ctx_res_t *r)
{
    tern_ctx *ctx = r->ctx;
    switch (r->kind) {
    case RES_TIMER:
    case RES_SPAWN_FAILED:
        uv_close((uv_handle_t *)&r->u.timer, on_res_timer_closed);
        return; /* freed by the close callback */
    case RES_HTTP:
        http_request_cancel(r->u.http);
        break;
    case RES_SPAWN:
        child_process_cancel(r->u.child);
        break;
    case RES_REDIS:
        if (ctx->redis.cancel != NULL)
            ctx->redis.cancel(ctx->redis.data, r->u.redis.handle);
        break;
    case RES_WORK:
        /* Work already running cannot be stopped; on_after_work frees it. */
        r->u.work.abandoned = true;
        uv_cancel((uv_req_t *)&r->u.work.req);
        return;
    }
    free(r);
}

static void stop_resources(tern_ctx *ctx)
{
    while (ctx->resources != NULL) {
        ctx_res_t *r = ctx->resources;
        res_unlink(r);
        res_stop(r);
    }
}

/* Stops everything and closes the context's own timers; the last close frees it. */
static void ctx_close(tern_ctx *ctx)
{
    if (ctx->closing)
        return;
    ctx->closing = true;
    stop_resources(ctx);
    json_decref(ctx->progress);
    ctx->progress = NULL;
    uv_close((uv_handle_t *)&ctx->deliver, on_ctx_timer_closed);
    uv_close((uv_handle_t *)&ctx->progress_timer, on_ctx_timer_closed);
}

/* Validates a context handed in by a plugin. A cleared magic means the context was
 * already freed (a bug of the task); the call is refused rather than followed. */
static bool ctx_ok(tern_ctx *ctx, const char *fn)
{
    if (ctx != NULL && ctx->head.magic == TERN_PLUGIN_MAGIC && ctx->head.host == &host_table)
        return true;
    log_msg(TERN_LOG_ERROR, "task", NULL, "%s called with an invalid or finished context", fn);
    return false;
}

/* ---- progress ----------------------------------------------------------------------- */

static void progress_deliver(tern_ctx *ctx)
{
    json_t *p = ctx->progress;
    ctx->progress = NULL;
    if (p == NULL)
        return;
    ctx->progress_sent = true;
    uv_update_time(ctx->loop); /* measure the interval from this delivery, not before */
    ctx->progress_last_ms = uv_now(ctx->loop);
    if (ctx->sink.on_progress != NULL)
        ctx->sink.on_progress(ctx->sink.owner, p); /* steals p */
    else
        json_decref(p);
}

static void on_progress_due(uv_timer_t *t)
{
    tern_ctx *ctx = t->data;
    if (ctx->phase == CTX_RUNNING)
        progress_deliver(ctx);
}

/* ---- outcome ------------------------------------------------------------------------ */

static void on_deliver(uv_timer_t *t)
{
    tern_ctx *ctx = t->data;
    if (ctx->phase != CTX_REPORTED)
        return;
    uv_timer_stop(&ctx->progress_timer);
    progress_deliver(ctx);
    if (ctx->phase != CTX_REPORTED)
        return; /* the owner cancelled from on_progress; the outcome is disposed */
    ctx->phase = CTX_FINISHED;
    task_outcome_t o = ctx->outcome;
    memset(&ctx->outcome, 0, sizeof ctx->outcome);
    if (ctx->sink.on_outcome != NULL)
        ctx->sink.on_outcome(ctx->sink.owner, &o); /* takes the members */
    else
        task_outcome_dispose(&o);
    ctx_close(ctx);
}

static const char *phase_word(ctx_phase_t p)
{
    return p == CTX_CANCELLED ? "after the attempt was cancelled" : "after its outcome";
}

/* True when the task may report now; otherwise logs the task's bug at warn level. */
static bool report_accepted(tern_ctx *ctx, const char *what)
{
    if (ctx->phase == CTX_RUNNING)
        return true;
    log_msg(TERN_LOG_WARN, "task", ctx->log_fields, "task %s reported %s %s; ignored",
            ctx->task_name, what, phase_word(ctx->phase));
    return false;
}

/* Records the outcome set in ctx->outcome and schedules its delivery. */
static void report(tern_ctx *ctx)
{
    ctx->phase = CTX_REPORTED;
    ctx->outcome.elapsed_ms = clock_mono_ms() - ctx->started_ms;
    ctx->outcome.state_changes = ctx->changes;
    ctx->changes = NULL;
    stop_resources(ctx);
    uv_timer_stop(&ctx->progress_timer);
    uv_timer_start(&ctx->deliver, on_deliver, 0, 0);
}

static void host_task_done(tern_ctx *ctx, json_t *result)
{
    if (!ctx_ok(ctx, "tern_task_done") || !report_accepted(ctx, "done")) {
        json_decref(result);
        return;
    }
    ctx->outcome.kind = TASK_DONE;
    ctx->outcome.result = result != NULL ? result : json_null();
    report(ctx);
}

/* tern_task_fail (refuse_status 0), and tern_task_refuse (403, 404, 409 or 422). */
static void task_failed(tern_ctx *ctx, const char *fn, int refuse_status, const char *code,
                        const char *fmt, va_list ap)
{
    if (!ctx_ok(ctx, fn))
        return;
    char what[160];
    snprintf(what, sizeof what, "failure \"%.128s\"", code != NULL ? code : "");
    if (!report_accepted(ctx, what))
        return;
    char *message = NULL;
    if (fmt == NULL || vasprintf(&message, fmt, ap) < 0)
        message = xstrdup("");
    ctx->outcome.kind = TASK_FAILED;
    ctx->outcome.code = xstrdup(code != NULL && code[0] != '\0' ? code : "TaskFailed");
    ctx->outcome.message = message;
    ctx->outcome.refuse_status = refuse_status;
    report(ctx);
}

static void host_task_fail(tern_ctx *ctx, const char *code, const char *fmt, va_list ap)
{
    task_failed(ctx, "tern_task_fail", 0, code, fmt, ap);
}

/* The engine answers a refusal with 403, 404, 409 or 422 only (include/tern/task.h):
 * any other status a task asks for is 422, so that a plugin cannot make a refusal look
 * like a success (2xx), a redirect or a fault of ternd (5xx). 403 is a caller the check
 * does not allow (an owner migrating where only an operator may). */
static void host_task_refuse(tern_ctx *ctx, int http_status, const char *code, const char *fmt,
                             va_list ap)
{
    if (http_status != 403 && http_status != 404 && http_status != 409 && http_status != 422)
        http_status = 422;
    task_failed(ctx, "tern_task_refuse", http_status, code, fmt, ap);
}

static void host_task_wait(tern_ctx *ctx, json_t *info)
{
    if (!ctx_ok(ctx, "tern_task_wait") || !report_accepted(ctx, "wait")) {
        json_decref(info);
        return;
    }
    ctx->outcome.kind = TASK_WAIT;
    ctx->outcome.info = info;
    report(ctx);
}

static void host_task_requeue(tern_ctx *ctx, uint64_t delay_ms, json_t *info)
{
    if (!ctx_ok(ctx, "tern_task_requeue") || !report_accepted(ctx, "requeue")) {
        json_decref(info);
        return;
    }
    ctx->outcome.kind = TASK_REQUEUE;
    ctx->outcome.delay_ms = delay_ms;
    ctx->outcome.info = info;
    report(ctx);
}

/* ---- what the context knows --------------------------------------------------------- */

static uv_loop_t *host_loop(tern_ctx *ctx)
{
    return ctx_ok(ctx, "tern_loop") ? ctx->loop : NULL;
}

static void *host_plugin_state(tern_ctx *ctx)
{
    return ctx_ok(ctx, "tern_plugin_state") ? ctx->plugin_state : NULL;
}

static const char *host_job_uuid(tern_ctx *ctx)
{
    return ctx_ok(ctx, "tern_job_uuid") ? ctx->job_uuid : NULL;
}

static const char *host_job_target(tern_ctx *ctx)
{
    return ctx_ok(ctx, "tern_job_target") ? ctx->job_target : NULL;
}

static const json_t *host_job_params(tern_ctx *ctx)
{
    return ctx_ok(ctx, "tern_job_params") ? ctx->params : NULL;
}

static const char *host_step_name(tern_ctx *ctx)
{
    return ctx_ok(ctx, "tern_step_name") ? ctx->step_name : NULL;
}

static uint32_t host_step_attempt(tern_ctx *ctx)
{
    return ctx_ok(ctx, "tern_step_attempt") ? ctx->attempt : 0;
}

static const char *host_idempotency_key(tern_ctx *ctx)
{
    return ctx_ok(ctx, "tern_idempotency_key") ? ctx->idempotency_key : NULL;
}

/* ---- job-scoped state --------------------------------------------------------------- */

static bool state_key_ok(const char *key)
{
    size_t n = 0;
    for (const char *p = key; *p != '\0'; p++, n++) {
        char c = *p;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
        if (n >= STATE_KEY_MAX)
            return false;
    }
    return n >= 1;
}

static const json_t *host_state_get(tern_ctx *ctx, const char *key)
{
    if (!ctx_ok(ctx, "tern_state_get") || key == NULL)
        return NULL;
    json_t *v = ctx->changes != NULL ? json_object_get(ctx->changes, key) : NULL;
    if (v == NULL && ctx->state != NULL)
        v = json_object_get(ctx->state, key);
    return v;
}

static int host_state_set(tern_ctx *ctx, const char *key, json_t *value)
{
    if (!ctx_ok(ctx, "tern_state_set")) {
        json_decref(value);
        return -1;
    }
    if (key == NULL || !state_key_ok(key)) {
        log_msg(TERN_LOG_WARN, "task", ctx->log_fields,
                "task %s: state key \"%.140s\" refused: expected [A-Za-z0-9_.-]{1,128}",
                ctx->task_name, key != NULL ? key : "(null)");
        json_decref(value);
        return -1;
    }
    if (value == NULL || ctx->phase != CTX_RUNNING) {
        if (value != NULL)
            log_msg(TERN_LOG_WARN, "task", ctx->log_fields, "task %s set state \"%s\" %s; ignored",
                    ctx->task_name, key, phase_word(ctx->phase));
        json_decref(value);
        return -1;
    }
    if (ctx->changes == NULL)
        ctx->changes = json_object();
    return json_object_set_new(ctx->changes, key, value) == 0 ? 0 : -1;
}

static void host_progress(tern_ctx *ctx, json_t *progress)
{
    if (!ctx_ok(ctx, "tern_progress") || ctx->phase != CTX_RUNNING || progress == NULL) {
        json_decref(progress);
        return;
    }
    if (!json_is_object(progress)) {
        log_msg(TERN_LOG_WARN, "task", ctx->log_fields,
                "task %s reported progress that is not an object; ignored", ctx->task_name);
        json_decref(progress);
        return;
    }
    json_decref(ctx->progress); /* coalesced: the last report wins */
    ctx->progress = progress;
    if (uv_is_active((uv_handle_t *)&ctx->progress_timer))
        return;
    uint64_t now = uv_now(ctx->loop);
    uint64_t due = ctx->progress_sent ? ctx->progress_last_ms + PROGRESS_INTERVAL_MS : now;
    uv_timer_start(&ctx->progress_timer, on_progress_due, due > now ? due - now : 0, 0);
}

static void host_log(tern_ctx *ctx, int level, const char *fmt, va_list ap)
{
    if (!ctx_ok(ctx, "tern_log"))
        return;
    log_vmsg(level, "task", ctx->log_fields, fmt != NULL ? fmt : "", ap);
}

/* ---- asynchronous services ---------------------------------------------------------- */

/* Refuses services once the attempt has ended or been cancelled. */
static int service_allowed(tern_ctx *ctx, const char *fn)
{
    if (!ctx_ok(ctx, fn))
        return -EINVAL;
    return ctx->phase == CTX_RUNNING ? 0 : -ECANCELED;
}

static void on_http_done(void *data, const tern_http_res *res)
{
    ctx_res_t *r = data;
    tern_ctx *ctx = r->ctx;
    tern_http_cb cb = r->cb.http;
    void *cb_data = r->data;
    res_unlink(r);
    free(r);
    if (ctx->phase == CTX_RUNNING)
        cb(ctx, res, cb_data);
}

static int host_http_request(tern_ctx *ctx, const tern_http_req *req, tern_http_cb cb, void *data)
{
    int rc = service_allowed(ctx, "tern_http_request");
    if (rc != 0)
        return rc;
    if (req == NULL || cb == NULL)
        return -EINVAL;
    if (req->size < offsetof(tern_http_req, url) + sizeof req->url) {
        log_msg(TERN_LOG_WARN, "task", ctx->log_fields,
                "task %s: tern_http_req.size %u is too small (expected %zu)", ctx->task_name,
                (unsigned)req->size, sizeof *req);
        return -EINVAL;
    }
    if (ctx->http == NULL)
        return -ENOTSUP;
    /* Read the request with the size the plugin compiled; what it lacks stays zero. */
    tern_http_req copy;
    memset(&copy, 0, sizeof copy);
    memcpy(&copy, req, req->size < sizeof copy ? req->size : sizeof copy);
    copy.size = sizeof copy;

    ctx_res_t *r = res_new(ctx, RES_HTTP, data);
    r->cb.http = cb;
    char err[256];
    r->u.http =
        http_client_request_allowed(ctx->http, &copy, ctx->allow, on_http_done, r, err, sizeof err);
    if (r->u.http == NULL) {
        log_msg(TERN_LOG_WARN, "task", ctx->log_fields, "task %s: %s", ctx->task_name, err);
        free(r);
        return -EINVAL;
    }
    res_link(ctx, r);
    return 0;
}

static void on_child_done(void *data, const tern_spawn_res *res)
{
    ctx_res_t *r = data;
    tern_ctx *ctx = r->ctx;
    tern_spawn_cb cb = r->cb.spawn;
    void *cb_data = r->data;
    res_unlink(r);
    free(r);
    if (ctx->phase == CTX_RUNNING)
        cb(ctx, res, cb_data);
}

/* A timer resource fired: a tern_timer_start timer, or the delivery of a spawn that
 * could not start. Either way it is no longer pending. */
static void on_res_timer(uv_timer_t *t)
{
    ctx_res_t *r = t->data;
    tern_ctx *ctx = r->ctx;
    res_unlink(r);
    uv_close((uv_handle_t *)&r->u.timer, on_res_timer_closed); /* r lives until then */
    if (ctx->phase != CTX_RUNNING)
        return;
    if (r->kind == RES_TIMER) {
        r->cb.timer(ctx, r->data);
    } else {
        tern_spawn_res res = {
            .exit_status = -1,
            .error = r->error,
            .stdout_tail = "",
            .stderr_tail = "",
        };
        r->cb.spawn(ctx, &res, r->data);
    }
}

static ctx_res_t *timer_res_start(tern_ctx *ctx, res_kind_t kind, uint64_t delay_ms, void *data)
{
    ctx_res_t *r = res_new(ctx, kind, data);
    uv_timer_init(ctx->loop, &r->u.timer);
    r->u.timer.data = r;
    /* The loop's clock was read when this iteration began; a task that asks for 150 ms
     * must not be woken earlier because the loop was busy before calling it. */
    uv_update_time(ctx->loop);
    uv_timer_start(&r->u.timer, on_res_timer, delay_ms, 0);
    ctx->refs++;
    res_link(ctx, r);
    return r;
}

static int host_spawn(tern_ctx *ctx, const tern_spawn_opts *opts, tern_spawn_cb cb, void *data)
{
    int rc = service_allowed(ctx, "tern_spawn");
    if (rc != 0)
        return rc;
    if (opts == NULL || cb == NULL)
        return -EINVAL;
    ctx_res_t *r = res_new(ctx, RES_SPAWN, data);
    r->cb.spawn = cb;
    char err[512];
    r->u.child = child_process_spawn(ctx->loop, opts, on_child_done, r, err, sizeof err);
    if (r->u.child == NULL) {
        /* The child could not start: the task hears why from its callback, on the loop,
         * like any other end of a child. */
        free(r);
        r = timer_res_start(ctx, RES_SPAWN_FAILED, 0, data);
        r->cb.spawn = cb;
        r->error = xstrdup(err);
        return 0;
    }
    res_link(ctx, r);
    return 0;
}

static void on_work(uv_work_t *req)
{
    ctx_res_t *r = req->data;
    r->u.work.fn(r->data);
}

static void on_after_work(uv_work_t *req, int status)
{
    ctx_res_t *r = req->data;
    tern_ctx *ctx = r->ctx;
    if (!r->u.work.abandoned) {
        res_unlink(r);
        if (ctx->phase == CTX_RUNNING && r->cb.after != NULL)
            r->cb.after(ctx, r->data, status);
    }
    free(r);
    ctx_unref(ctx);
}

static int host_work(tern_ctx *ctx, tern_work_fn work, tern_after_work_cb after, void *data)
{
    int rc = service_allowed(ctx, "tern_work");
    if (rc != 0)
        return rc;
    if (work == NULL)
        return -EINVAL;
    ctx_res_t *r = res_new(ctx, RES_WORK, data);
    r->cb.after = after;
    r->u.work.fn = work;
    r->u.work.req.data = r;
    rc = uv_queue_work(ctx->loop, &r->u.work.req, on_work, on_after_work);
    if (rc != 0) {
        free(r);
        return rc;
    }
    ctx->refs++;
    res_link(ctx, r);
    return 0;
}

static int host_timer_start(tern_ctx *ctx, uint64_t delay_ms, tern_timer_cb cb, void *data)
{
    int rc = service_allowed(ctx, "tern_timer_start");
    if (rc != 0)
        return rc;
    if (cb == NULL)
        return -EINVAL;
    ctx->last_timer_id = ctx->last_timer_id == INT_MAX ? 1 : ctx->last_timer_id + 1;
    ctx_res_t *r = timer_res_start(ctx, RES_TIMER, delay_ms, data);
    r->cb.timer = cb;
    r->id = ctx->last_timer_id;
    return r->id;
}

static int host_timer_stop(tern_ctx *ctx, int timer_id)
{
    if (!ctx_ok(ctx, "tern_timer_stop"))
        return -EINVAL;
    for (ctx_res_t *r = ctx->resources; r != NULL; r = r->next) {
        if (r->kind == RES_TIMER && r->id == timer_id) {
            res_unlink(r);
            res_stop(r);
            return 0;
        }
    }
    return -ENOENT;
}

static void on_redis_done(task_redis_call_t *call, const json_t *reply, const char *error)
{
    ctx_res_t *r = call->res;
    tern_ctx *ctx = r->ctx;
    /* task_redis_ops must reply from the loop, never from inside eval(). */
    assert(!r->u.redis.in_eval);
    tern_redis_cb cb = r->cb.redis;
    void *cb_data = r->data;
    res_unlink(r);
    free(r);
    if (ctx->phase == CTX_RUNNING && cb != NULL)
        cb(ctx, reply, error, cb_data);
}

static int host_redis_eval(tern_ctx *ctx, const char *script, size_t nkeys, const char *const *keys,
                           size_t nargs, const char *const *args, tern_redis_cb cb, void *data)
{
    int rc = service_allowed(ctx, "tern_redis_eval");
    if (rc != 0)
        return rc;
    if (ctx->redis.eval == NULL)
        return -ENOTCONN;
    if (script == NULL || (nkeys > 0 && keys == NULL) || (nargs > 0 && args == NULL))
        return -EINVAL;

    /* Every key goes into the plugin's namespace; the ops copy what they keep. */
    char **spaced = xcalloc(nkeys + 1, sizeof *spaced);
    for (size_t i = 0; i < nkeys; i++)
        spaced[i] = xasprintf("tern:p:%s:%s", ctx->plugin_name, keys[i] ? keys[i] : "");

    ctx_res_t *r = res_new(ctx, RES_REDIS, data);
    r->cb.redis = cb;
    r->u.redis.call.res = r;
    r->u.redis.in_eval = true;
    res_link(ctx, r);
    r->u.redis.handle = ctx->redis.eval(ctx->redis.data, script, nkeys, (const char *const *)spaced,
                                        nargs, args, on_redis_done, &r->u.redis.call);
    r->u.redis.in_eval = false;
    for (size_t i = 0; i < nkeys; i++)
        free(spaced[i]);
    free(spaced);
    if (r->u.redis.handle == NULL) {
        res_unlink(r);
        free(r);
        return -ENOTCONN;
    }
    return 0;
}

/* ---- the host table ------------------------------------------------------------------ */

static const tern_host host_table = {
    .size = sizeof(tern_host),
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
    .task_done = host_task_done,
    .task_fail = host_task_fail,
    .task_wait = host_task_wait,
    .task_requeue = host_task_requeue,
    .loop = host_loop,
    .plugin_state = host_plugin_state,
    .job_uuid = host_job_uuid,
    .job_target = host_job_target,
    .job_params = host_job_params,
    .step_name = host_step_name,
    .step_attempt = host_step_attempt,
    .idempotency_key = host_idempotency_key,
    .state_get = host_state_get,
    .state_set = host_state_set,
    .progress = host_progress,
    .log = host_log,
    .http_request = host_http_request,
    .spawn = host_spawn,
    .work = host_work,
    .timer_start = host_timer_start,
    .timer_stop = host_timer_stop,
    .redis_eval = host_redis_eval,
    .task_refuse = host_task_refuse,
};

/* See task_ctx.h. */
const tern_host *task_ctx_host(void)
{
    return &host_table;
}

/* ---- public ---------------------------------------------------------------------------- */

/* See task_ctx.h. */
void task_outcome_dispose(task_outcome_t *o)
{
    if (o == NULL)
        return;
    json_decref(o->result);
    json_decref(o->info);
    json_decref(o->state_changes);
    free(o->code);
    free(o->message);
    o->result = o->info = o->state_changes = NULL;
    o->code = o->message = NULL;
    o->refuse_status = 0;
}

static char *dup_or_null(const char *s)
{
    return s != NULL ? xstrdup(s) : NULL;
}

/* See task_ctx.h. */
tern_ctx *task_ctx_start(const task_ctx_opts_t *opts, const json_t *args)
{
    assert(opts != NULL && opts->loop != NULL && opts->def != NULL && opts->def->start != NULL);
    tern_ctx *ctx = xcalloc(1, sizeof *ctx);
    ctx->head.host = &host_table;
    ctx->head.magic = TERN_PLUGIN_MAGIC;
    ctx->loop = opts->loop;
    ctx->def = opts->def;
    ctx->plugin_name = xstrdup(opts->plugin_name != NULL ? opts->plugin_name : "");
    ctx->task_name = xstrdup(opts->task_name != NULL ? opts->task_name : opts->def->name);
    ctx->plugin_state = opts->plugin_state;
    ctx->job_uuid = xstrdup(opts->job_uuid != NULL ? opts->job_uuid : "");
    ctx->job_target = dup_or_null(opts->job_target);
    ctx->step_name = xstrdup(opts->step_name != NULL ? opts->step_name : "");
    ctx->idempotency_key = xstrdup(opts->idempotency_key != NULL ? opts->idempotency_key : "");
    ctx->attempt = opts->attempt;
    ctx->params = opts->params != NULL ? json_incref((json_t *)opts->params) : json_object();
    ctx->state = opts->state != NULL ? json_incref((json_t *)opts->state) : NULL;
    ctx->http = opts->http;
    ctx->allow = opts->allow;
    if (opts->redis != NULL)
        ctx->redis = *opts->redis;
    ctx->sink = opts->sink;
    ctx->log_fields =
        json_pack("{s:s, s:s, s:I, s:s}", "job", ctx->job_uuid, "step", ctx->step_name, "attempt",
                  (json_int_t)ctx->attempt, "task", ctx->task_name);

    uv_timer_init(ctx->loop, &ctx->deliver);
    ctx->deliver.data = ctx;
    uv_timer_init(ctx->loop, &ctx->progress_timer);
    ctx->progress_timer.data = ctx;
    ctx->refs = 2;

    ctx->phase = CTX_RUNNING;
    ctx->started_ms = clock_mono_ms();
    ctx->def->start(ctx, args);
    return ctx;
}

/* See task_ctx.h. */
void task_ctx_cancel(tern_ctx *ctx)
{
    if (ctx == NULL || ctx->head.magic != TERN_PLUGIN_MAGIC)
        return;
    switch (ctx->phase) {
    case CTX_RUNNING:
        ctx->phase = CTX_CANCELLED;
        if (ctx->def->cancel != NULL)
            ctx->def->cancel(ctx);
        break;
    case CTX_REPORTED:
        ctx->phase = CTX_CANCELLED;
        task_outcome_dispose(&ctx->outcome);
        break;
    case CTX_FINISHED:
    case CTX_CANCELLED:
        return; /* closing already */
    }
    ctx_close(ctx);
}
