/*
 * runner.c -- claims jobs and runs their steps; see runner.h for the model.
 *
 * Structure of this file, top-down: the job in memory (run_job_t) and how it is built
 * from a claim reply; the step machine (start an attempt, take its outcome, decide
 * retry/fallback/onerror/finish, commit, go on); cancel and timeouts; claimers (one
 * blocking connection per queue); the pub/sub listener; the heartbeat tick and the
 * due-time timer; start and stop.
 *
 * Ownership: the runner owns every run_job_t; a run_job_t owns its timers, its JSON
 * (params, state, steps scope, error), its reference on the cached workflow and the
 * attempt in flight (a tern_ctx or an isolated helper), and is freed when its last
 * timer has closed after it left the runner (finished, parked, dropped).
 */
#include "run/runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/ident.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/str_map.h"
#include "model/holds.h"
#include "model/retry_policy.h"
#include "model/template.h"
#include "model/workflow.h"
#include "model/workflow_cache.h"
#include "redis/redis_conn.h"
#include "run/plugin_redis.h"
#include "run/task_ctx.h"
#include "run/task_isolated.h"
#include "store/job_fields.h"

#define CLAIM_BATCH_MAX    64   /* jobs taken in one claim round trip */
#define BLOCK_SECONDS      "2"  /* BLMOVE timeout: bounds how long a stop waits */
#define BLOCK_MS           2000 /* the same, in ms */
#define COMMIT_RETRY_MS    250  /* first wait before re-sending a commit that got no answer */
#define COMMIT_RETRY_MAXMS 5000
/* Beyond a BLMOVE's own timeout, how long Redis may take to end it (it ends timed-out
 * blocking commands between turns of its event loop) and our read of the list may take
 * to reach it: see "BLMOVEs whose answer nobody reads" below. */
#define UNSEEN_MARGIN_MS 500

/* ---- jobs in memory ------------------------------------------------------------ */

typedef enum job_stage {
    STAGE_IDLE,    /* between steps */
    STAGE_BEGIN,   /* step_begin.lua in flight */
    STAGE_ATTEMPT, /* a task attempt in flight */
    STAGE_BACKOFF, /* waiting on the runner before a retry */
    STAGE_COMMIT,  /* step_commit.lua in flight (or waiting to be re-sent) */
    STAGE_GONE,    /* left the runner; freed once its handles are closed */
} job_stage_t;

typedef struct run_job run_job_t;

/* A commit: the arguments are kept so a commit whose answer was lost can be sent again
 * unchanged (the script recognises a repeat by fence and cursor). */
typedef enum commit_then {
    THEN_CONTINUE, /* run the step at the new cursor */
    THEN_RETRY,    /* the same step again after the backoff timer */
    THEN_LEAVE,    /* the job left the runner (finished, waiting, delayed, released) */
} commit_then_t;

struct run_job {
    runner_t *r;
    run_job_t *prev, *next;
    char uuid[40];
    char fence[24];
    const workflow_cache_entry_t *wfe; /* its version, a reference held (NULL: damaged) */
    const workflow_t *wf;
    json_t *params;    /* owned */
    char *target;      /* or NULL */
    json_t *state;     /* owned object: key -> value */
    json_t *steps;     /* owned object: step name -> {"result", "error"} */
    json_t *error;     /* owned: the error that sent the job to onerror/oncancel, or NULL */
    json_t *resume;    /* owned: outcome handed to a waiting step, or NULL */
    json_t *job_scope; /* owned: {"uuid", "target", "workflow"} */
    json_t *admission; /* owned: check name -> {"result"} of its admission checks, or NULL */
    int phase;
    size_t idx;
    uint32_t attempt; /* failed attempts of the current step so far */
    bool in_fallback;
    json_t *step_error; /* owned: the error of the step before its fallback ran */
    bool cancel_requested;
    bool timed_out;
    char *step_queue;    /* owned: the queue the record names for the current step (field
                          * step_queue), NULL when it names none (the workflow's) */
    char *queue_timeout; /* owned: the queue the current step waited in past its timeout
                          * (field queue_timeout): the claim fails the step, or NULL */
    bool released;       /* the runner is stopping: hand the job back after this step */
    job_stage_t stage;
    tern_ctx *ctx;               /* the attempt in flight (in process) */
    task_isolated_t *isolated;   /* the attempt in flight (helper process) */
    uint64_t attempt_started_ms; /* wall clock, for result entries */
    uint64_t attempt_mono_ms;
    uv_timer_t step_timer; /* step timeout */
    uv_timer_t job_timer;  /* workflow timeout */
    uv_timer_t wait_timer; /* backoff before a retry, or before re-sending a commit */
    int open_handles;
    int calls;           /* step_begin/step_commit calls in flight: their callbacks use the job */
    store_args_t commit; /* the commit in flight */
    commit_then_t commit_then;
    uint32_t commit_tries;
};

typedef struct claimer {
    runner_t *r;
    char *queue;
    redis_conn_t *conn; /* blocking connection: BLMOVE only */
    bool blocking;      /* BLMOVE in flight */
    bool claiming;      /* job_claim in flight */
    bool more;          /* the last claim filled its batch: claim again at once */
    uint32_t requested;
} claimer_t;

struct runner {
    uv_loop_t *loop;
    store_t *store;
    runner_opts_t opts;
    char *id;
    char **queues;
    char *helper_exe, *plugin_dir, *redis_url;
    claimer_t *claimers;
    size_t n_claimers;
    redis_conn_t *sub;
    uv_timer_t tick_timer;
    uv_timer_t due_timer;
    uint64_t due_at_mono; /* when due_timer fires, 0 when not armed */
    uint64_t up_since_mono;
    bool tick_busy;
    bool tick_again; /* a due-time tick came while another tick was in flight, or the
                      * last tick left finished jobs due for deletion */
    /* Cancels heard for jobs this runner does not hold (yet): a claim answer built
     * before the cancel flag was set may still be on its way. Kept a few seconds. */
    struct {
        char uuid[40];
        uint64_t at_mono;
    } early_cancels[32];
    unsigned early_next;
    bool resync;          /* a claim's answer was lost: adopt jobs left in our list */
    bool resync_sweep;    /* the resync due is the periodic sweep (RESYNC_SWEEP_MS) */
    bool resync_unseen;   /* the resync sent is the one after unseen BLMOVEs ended */
    uint64_t swept_mono;  /* when the last sweep was due */
    bool recheck_cancels; /* pub/sub was reconnected: cancels may have been missed */
    bool resync_busy;
    /* Until then a BLMOVE whose answer this process never reads (an earlier process's
     * under our id, or ours on a connection that dropped) may still move a job into our
     * list; a resync sent after it is due (resync_due). 0: none pending. */
    uint64_t unseen_until_mono;
    run_job_t *jobs;        /* in flight */
    str_map_t jobs_by_uuid; /* the same, by uuid (keys: each job's own uuid) */
    /* Jobs of our list that another process under our runner id claimed after us (our
     * commit was refused for a newer fence of the same id): never adopted again by this
     * process, or the two would take the job from each other at every step. Keys and
     * values are the same malloc'd uuid; pruned to what the list still holds. */
    str_map_t ceded;
    size_t in_flight;
    size_t reserved;        /* slots promised to claims and direct starts in flight */
    size_t direct_pending;  /* creates in flight that may start a job here (direct start) */
    size_t allocated;       /* run_job_t not yet freed (some may be closing) */
    long long clock_offset; /* server clock minus ours, ms, from the last tick */
    /* Parsed workflow versions by uuid: opts.workflows (shared with the job creates of
     * this process), or the runner's own. Jobs of one version share one entry. */
    workflow_cache_t *workflows;
    bool workflows_own; /* made by runner_new, freed with the runner */
    bool up;
    bool stopping;
    uint64_t stop_deadline_mono;
    uv_timer_t stop_timer;
    task_redis_ops_t redis_ops; /* tern_redis_eval of plugins, on the store */
    void (*on_stopped)(void *);
    void *stopped_data;
    int open_handles;
    bool freed_conns;
    /* counters */
    uint64_t n_claimed, n_steps, n_finished, n_retries, n_stale;
    uint64_t n_direct; /* jobs started straight from a create (direct start) */
};

static void job_run_step(run_job_t *j);
static void job_commit_send(run_job_t *j);
static void claimer_pump(claimer_t *cl);
static void pump_all(runner_t *r);
static void resync(runner_t *r);
static void runner_maybe_stopped(runner_t *r);

/* ---- small helpers ------------------------------------------------------------- */

static json_t *error_new(const char *code, const char *message, const char *step)
{
    json_t *e = json_pack("{s:s, s:s}", "code", code, "message", message);
    if (step != NULL)
        json_object_set_new(e, "step", json_string(step));
    return e;
}

static const char *error_code(const json_t *e)
{
    const char *c = json_string_value(json_object_get(e, "code"));
    return c != NULL ? c : "Error";
}

static json_t *parse_json_or_string(const char *s, size_t len)
{
    json_t *v = json_loadb(s, len, JSON_DECODE_ANY, NULL);
    return v != NULL ? v : json_stringn(s, len);
}

static const wf_step_t *job_step(const run_job_t *j)
{
    const wf_step_t *s = workflow_step_get(j->wf, (wf_phase_t)j->phase, j->idx);
    if (s != NULL && j->in_fallback && s->fallback != NULL)
        return s->fallback;
    return s;
}

static const wf_step_t *job_main_step(const run_job_t *j)
{
    return workflow_step_get(j->wf, (wf_phase_t)j->phase, j->idx);
}

static json_t *log_fields(const run_job_t *j)
{
    const wf_step_t *s = job_main_step(j);
    return json_pack("{s:s, s:s?, s:s, s:i}", "job", j->uuid, "step", s ? s->name : NULL, "phase",
                     workflow_phase_name((wf_phase_t)j->phase), "attempt", (int)j->attempt + 1);
}

#define JLOG(j, level, ...)                                                                        \
    do {                                                                                           \
        if (log_enabled(level)) {                                                                  \
            json_t *f_ = log_fields(j);                                                            \
            log_msg(level, "runner", f_, __VA_ARGS__);                                             \
            json_decref(f_);                                                                       \
        }                                                                                          \
    } while (0)

/* ---- job lifetime -------------------------------------------------------------- */

/* Frees a job that left the runner, once its timers are closed and no store call of
 * its own is still to be answered (the grace period of a stop may end mid-commit). */
static void job_free_if_done(run_job_t *j)
{
    if (j->stage != STAGE_GONE || j->open_handles > 0 || j->calls > 0)
        return;
    runner_t *r = j->r;
    workflow_cache_put(r->workflows, j->wfe);
    json_decref(j->params);
    json_decref(j->state);
    json_decref(j->steps);
    json_decref(j->error);
    json_decref(j->resume);
    json_decref(j->job_scope);
    json_decref(j->admission);
    json_decref(j->step_error);
    store_args_dispose(&j->commit);
    free(j->step_queue);
    free(j->queue_timeout);
    free(j->target);
    free(j);
    r->allocated--;
    runner_maybe_stopped(r);
}

static void on_job_handle_closed(uv_handle_t *h)
{
    run_job_t *j = h->data;
    j->open_handles--;
    job_free_if_done(j);
}

static void job_cancel_attempt(run_job_t *j)
{
    if (j->ctx != NULL) {
        task_ctx_cancel(j->ctx);
        j->ctx = NULL;
    }
    if (j->isolated != NULL) {
        task_isolated_cancel(j->isolated);
        j->isolated = NULL;
    }
}

/* The job leaves this runner: its slot is free at once; memory goes when the timers
 * have closed. */
static void job_leave(run_job_t *j)
{
    runner_t *r = j->r;
    if (j->stage == STAGE_GONE)
        return;
    job_cancel_attempt(j);
    j->stage = STAGE_GONE;
    if (j->prev != NULL)
        j->prev->next = j->next;
    else
        r->jobs = j->next;
    if (j->next != NULL)
        j->next->prev = j->prev;
    str_map_del(&r->jobs_by_uuid, j->uuid);
    r->in_flight--;
    uv_close((uv_handle_t *)&j->step_timer, on_job_handle_closed);
    uv_close((uv_handle_t *)&j->job_timer, on_job_handle_closed);
    uv_close((uv_handle_t *)&j->wait_timer, on_job_handle_closed);
    pump_all(r);
}

/* Frees the ceded set's uuids and table; the set is empty again. */
static void ceded_free(runner_t *r)
{
    for (size_t i = 0; i < r->ceded.cap; i++)
        free((char *)r->ceded.slots[i].key);
    str_map_free(&r->ceded);
}

/* A job in flight by uuid. (A walk of the list cost each claimed or started job a
 * comparison per job in flight, which showed in ternd's profile of the a-api scenario
 * of tests/bench and grew with thousands in flight.) */
static run_job_t *job_find(runner_t *r, const char *uuid)
{
    return str_map_get(&r->jobs_by_uuid, uuid);
}

/* ---- commits ------------------------------------------------------------------- */

/* Starts building a commit of the current step: uuid, runner, fence, cursor, action,
 * entry, event, error, state changes. The action's own arguments are pushed after. */
static void commit_begin(run_job_t *j, const char *action, const json_t *entry, const json_t *event,
                         const json_t *error, const json_t *state_changes)
{
    store_args_dispose(&j->commit);
    store_args_init(&j->commit);
    store_args_t *a = &j->commit;
    store_args_push(a, j->uuid);
    store_args_push(a, j->r->id);
    store_args_push(a, j->fence);
    store_args_pushf(a, "%d", j->phase);
    store_args_pushf(a, "%zu", j->idx);
    store_args_push(a, action);
    store_args_push_json(a, entry);
    store_args_push_json(a, event);
    store_args_push_json(a, error);
    size_t n = state_changes != NULL ? json_object_size(state_changes) : 0;
    store_args_pushf(a, "%zu", n);
    if (n > 0) {
        const char *key;
        json_t *value;
        json_object_foreach((json_t *)state_changes, key, value)
        {
            store_args_push(a, key);
            store_args_push_json(a, value);
        }
    }
    j->commit_tries = 0;
}

static void on_commit_retry_timer(uv_timer_t *t)
{
    job_commit_send(t->data);
}

static void commit_retry_later(run_job_t *j)
{
    uint32_t delay = COMMIT_RETRY_MS << (j->commit_tries < 5 ? j->commit_tries : 5);
    if (delay > COMMIT_RETRY_MAXMS)
        delay = COMMIT_RETRY_MAXMS;
    j->commit_tries++;
    uv_timer_start(&j->wait_timer, on_commit_retry_timer, delay, 0);
}

static void job_cancel_now(run_job_t *j);
static void on_backoff_timer(uv_timer_t *t);

static void on_commit_reply(void *data, int status, const redisReply *reply, const char *errmsg)
{
    run_job_t *j = data;
    runner_t *r = j->r;
    j->calls--;
    if (j->stage == STAGE_GONE) {
        job_free_if_done(j);
        return;
    }
    if (status == TERN_ENOTCONN || status == TERN_EIO) {
        /* The commit may or may not have happened; the script recognises a repeat. */
        commit_retry_later(j);
        return;
    }
    if (status != 0) {
        JLOG(j, TERN_LOG_ERROR, "step commit refused by Redis: %s", errmsg);
        commit_retry_later(j);
        return;
    }
    const redisReply *kind = store_reply_at(reply, 0);
    if (store_reply_is(kind, "STALE")) {
        const redisReply *why = store_reply_at(reply, 1);
        JLOG(j, TERN_LOG_WARN, "job no longer held by this runner (%s); dropping it",
             why && why->str ? why->str : "?");
        r->n_stale++;
        if (store_reply_is(store_reply_at(reply, 2), "same-id")) {
            /* Only a claim by another process can give the job a newer fence under our
             * id (this process never claims a job it runs or has a claim in flight
             * for: see resync()): it was started under our id while we were stalled.
             * It keeps the job. */
            JLOG(j, TERN_LOG_ERROR,
                 "another process runs under runner id %s and took this job over; not "
                 "adopting it again",
                 r->id);
            if (str_map_get(&r->ceded, j->uuid) == NULL) {
                char *uuid = xstrdup(j->uuid);
                str_map_put(&r->ceded, uuid, uuid);
            }
        } else {
            r->resync = true; /* if the job is still ours under a newer fence, adopt it */
        }
        job_leave(j);
        return;
    }
    /* Committed: 0, or 1 when a cancel was asked meanwhile (DUP: a repeat, committed
     * before). */
    bool cancel = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
    if (cancel && j->phase != WF_ONCANCEL)
        j->cancel_requested = true;
    switch (j->commit_then) {
    case THEN_LEAVE:
        job_leave(j);
        return;
    case THEN_RETRY:
        j->stage = STAGE_BACKOFF;
        if (j->cancel_requested) {
            job_cancel_now(j);
            return;
        }
        /* The backoff timer normally still runs; if re-sending the commit used the
         * timer, the backoff has elapsed meanwhile. */
        if (!uv_is_active((uv_handle_t *)&j->wait_timer))
            uv_timer_start(&j->wait_timer, on_backoff_timer, 0, 0);
        return;
    case THEN_CONTINUE:
        j->stage = STAGE_IDLE;
        if (j->released) {
            /* Hand the job back at its new cursor. */
            commit_begin(j, "release", NULL, NULL, NULL, NULL);
            store_args_pushf(&j->commit, "%d", j->phase);
            store_args_pushf(&j->commit, "%zu", j->idx);
            j->commit_then = THEN_LEAVE;
            job_commit_send(j);
            return;
        }
        if (j->cancel_requested) {
            job_cancel_now(j);
            return;
        }
        job_run_step(j);
        return;
    }
}

static void job_commit_send(run_job_t *j)
{
    j->stage = STAGE_COMMIT;
    if (store_eval(j->r->store, SCRIPT_STEP_COMMIT, &j->commit, on_commit_reply, j) != 0)
        commit_retry_later(j);
    else
        j->calls++;
}

/* Builds the JSON of a step's event. */
static json_t *step_event(const run_job_t *j, const char *status, const json_t *error,
                          uint64_t duration_ms)
{
    const wf_step_t *s = job_step(j);
    json_t *ev =
        json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:I, s:I, s:I, s:s}", "type", "step", "job",
                  j->uuid, "status", status, "phase", workflow_phase_name((wf_phase_t)j->phase),
                  "index", (json_int_t)j->idx, "name", s ? s->name : "?", "task", s ? s->task : "?",
                  "attempt", (json_int_t)j->attempt + 1, "duration_ms", (json_int_t)duration_ms,
                  "time", (json_int_t)clock_wall_ms(), "runner", j->r->id);
    if (error != NULL)
        json_object_set(ev, "error", (json_t *)error);
    return ev;
}

/* The chain_results entry of a finished step, as stored: node-workflow's shape plus
 * attempts and the runner that ran it, less what job_view.c restores when it shows it (the task,
 * from the workflow; a null error; one attempt; times as ISO text rather than the stored ms;
 * finished_at from the stored duration "ms"), since every
 * finished job keeps one entry per step. */
static json_t *step_entry(const run_job_t *j, const json_t *result, const json_t *error)
{
    const wf_step_t *main = job_main_step(j);
    uint64_t now = clock_wall_ms(), start = j->attempt_started_ms;
    json_t *e = json_pack("{s:s, s:O, s:I, s:I, s:s}", "name", main->name, "result",
                          result ? result : json_null(), "started_at", (json_int_t)start, "ms",
                          (json_int_t)(now > start ? now - start : 0), "runner", j->r->id);
    if (j->attempt > 0) /* one attempt is the default the view restores */
        json_object_set_new(e, "attempts", json_integer((json_int_t)j->attempt + 1));
    if (error != NULL)
        json_object_set(e, "error", (json_t *)error);
    if (j->in_fallback && j->step_error != NULL) {
        /* The step failed and its fallback ran: the step's error stays on record and
         * the fallback's outcome is the step's outcome. */
        json_object_set(e, "step_error", j->step_error);
        json_object_set_new(e, "fallback", json_string(main->fallback->task));
    }
    return e;
}

/* ---- step queues --------------------------------------------------------------- */

/* A step that names a queue runs on a runner serving it. The runner that commits the
 * step before it expands that queue against what the job knows after the commit, and
 * when it does not serve it, the commit itself hops the job there (a route of
 * step_commit.lua: off this runner's list, onto tern:q:<queue>, queued); a runner of
 * that queue claims it as any job, runs the step and, by the same rule, sends it back
 * to the workflow's queue or on. A queue's change costs one script call: the other
 * runner's claim. The record names the queue of the step in step_queue (none: the
 * workflow's), which every path that queues the job again reads (job_queue in
 * lib/queues.lua). Before a step runs, job_route_here checks its queue once more: a job
 * claimed where its step does not run (a redrive, a first step naming a queue) is
 * moved without running, and one claimed by a runner that serves its step's queue but
 * recorded in another has that queue recorded before the step runs. */

static template_scope_t job_scope(const run_job_t *j, const json_t *error);

static bool runner_serves(const runner_t *r, const char *queue)
{
    for (size_t i = 0; i < r->n_claimers; i++)
        if (strcmp(r->claimers[i].queue, queue) == 0)
            return true;
    return false;
}

/* The queue main step `s` at (phase, idx) runs on: its "queue" expanded against the
 * job's params, state and results as they are now, or the workflow's. Returns a
 * malloc'd name, or NULL with a message naming the step, the template and the value in
 * err (a name that resolves to nothing, or a value that is no queue name). */
static char *step_queue_expand(const run_job_t *j, const wf_step_t *s, int phase, size_t idx,
                               char *err, size_t errlen)
{
    if (s->queue == NULL)
        return xstrdup(j->wf->queue);
    char path[96], terr[400];
    snprintf(path, sizeof path, "%s[%zu].queue", workflow_phase_name((wf_phase_t)phase), idx);
    template_scope_t sc = job_scope(j, NULL);
    char *q = template_expand_string(s->queue, path, &sc, terr, sizeof terr);
    if (q == NULL) {
        snprintf(err, errlen, "step %s: queue \"%s\": %s", s->name, s->queue, terr);
        return NULL;
    }
    if (!workflow_queue_valid(q, strlen(q))) {
        snprintf(err, errlen,
                 "step %s: queue \"%s\" gave \"%.80s%s\", which is no queue name (expected "
                 "" WORKFLOW_QUEUE_RULE ")",
                 s->name, s->queue, q, strlen(q) > 80 ? "..." : "");
        free(q);
        return NULL;
    }
    return q;
}

/* Pushes a route (step_commit.lua) onto the commit being built: queue `q` (stolen),
 * whether the job hops there now, how long it may wait there (ms, 0 unbounded), and
 * remembers what the record will name. */
static void route_push(run_job_t *j, char *q, bool hop, uint64_t wait_ms)
{
    bool own = strcmp(q, j->wf->queue) == 0;
    store_args_push(&j->commit, q);
    store_args_push(&j->commit, own ? "1" : "0");
    store_args_push(&j->commit, hop ? "1" : "0");
    store_args_push_u64(&j->commit, hop && !own ? wait_ms : 0);
    free(j->step_queue);
    j->step_queue = own ? NULL : q;
    if (own)
        free(q);
}

/* After the cursor moved (the commit being built is a `next`): adds the route of the
 * step at the new cursor when it differs from what the record says. Returns true when
 * the job hops with this commit (this runner does not serve the step's queue). A queue
 * that does not expand is left to job_route_here, which fails the step. */
static bool commit_route(run_job_t *j)
{
    const wf_step_t *s = job_main_step(j);
    if (s == NULL || (s->queue == NULL && j->step_queue == NULL &&
                      runner_serves(j->r, j->wf->queue))) /* the common case: no queue */
        return false;
    char err[512];
    char *q = step_queue_expand(j, s, j->phase, j->idx, err, sizeof err);
    if (q == NULL)
        return false;
    bool serves = runner_serves(j->r, q);
    bool own = strcmp(q, j->wf->queue) == 0;
    bool recorded =
        own ? j->step_queue == NULL : j->step_queue != NULL && strcmp(j->step_queue, q) == 0;
    if (serves && recorded) {
        free(q);
        return false;
    }
    route_push(j, q, !serves, s->timeout_ms);
    return !serves;
}

/* ---- where the job goes after a step ------------------------------------------ */

static size_t phase_len(const run_job_t *j, int phase)
{
    return j->wf->n_steps[phase];
}

/* The job's chain ended (success) or a phase ran out of steps: finish accordingly. */
static void job_finish(run_job_t *j, const char *execution, const json_t *entry,
                       const json_t *event, const json_t *error, const json_t *state_changes,
                       const char *failed_at)
{
    commit_begin(j, "finish", entry, event, error, state_changes);
    j->r->n_finished++;
    store_args_push(&j->commit, execution);
    store_args_push(&j->commit, failed_at != NULL ? failed_at : "");
    j->commit_then = THEN_LEAVE;
    job_commit_send(j);
}

/* After step (phase, idx) ended with `entry`: advance, or finish. `error` is set when
 * the step failed for good (retries and fallback exhausted). */
static void job_advance(run_job_t *j, const json_t *entry, const json_t *event,
                        json_t *error /* stolen */, const json_t *state_changes)
{
    char failed_at[48] = "";
    int next_phase = j->phase;
    size_t next_idx = j->idx + 1;
    const char *finish_as = NULL;

    if (error != NULL) {
        snprintf(failed_at, sizeof failed_at, "%d:%zu", j->phase, j->idx);
        if (j->phase == WF_CHAIN) {
            json_decref(j->error);
            j->error = json_incref(error);
            if (phase_len(j, WF_ONERROR) > 0) {
                next_phase = WF_ONERROR;
                next_idx = 0;
            } else {
                finish_as = "failed";
            }
        } else if (j->phase == WF_ONERROR) {
            /* An onerror step failed: the job fails with its original error. */
            finish_as = "failed";
            failed_at[0] = '\0';
        } else {
            finish_as = "canceled";
            failed_at[0] = '\0';
        }
    } else if (next_idx >= phase_len(j, j->phase)) {
        finish_as = j->phase == WF_CHAIN     ? "succeeded"
                    : j->phase == WF_ONERROR ? "failed"
                                             : "canceled";
    }

    const json_t *job_error = error != NULL && j->phase == WF_CHAIN ? error : NULL;
    if (finish_as != NULL) {
        job_finish(j, finish_as, entry, event, job_error, state_changes,
                   failed_at[0] ? failed_at : NULL);
        json_decref(error);
        return;
    }
    commit_begin(j, "next", entry, event, job_error, state_changes);
    store_args_pushf(&j->commit, "%d", next_phase);
    store_args_pushf(&j->commit, "%zu", next_idx);
    store_args_push(&j->commit, failed_at);
    j->phase = next_phase;
    j->idx = next_idx;
    j->attempt = 0;
    j->in_fallback = false;
    json_decref(j->step_error);
    j->step_error = NULL;
    j->commit_then = commit_route(j) ? THEN_LEAVE : THEN_CONTINUE;
    json_decref(error);
    job_commit_send(j);
}

/* Records what a finished step produced in the job's memory (templates of later
 * steps read it). */
static void remember_step(run_job_t *j, const json_t *result, const json_t *error)
{
    const wf_step_t *main = job_main_step(j);
    json_t *s = json_pack("{s:O, s:O}", "result", result ? result : json_null(), "error",
                          error ? error : json_null());
    json_object_set_new(j->steps, main->name, s);
}

static void apply_state(run_job_t *j, const json_t *changes)
{
    if (changes != NULL)
        json_object_update(j->state, (json_t *)changes);
}

/* The step failed for good (retries and fallback exhausted, or a fatal code). */
static void step_failed_for_good(run_job_t *j, json_t *error /* stolen */,
                                 const json_t *state_changes, uint64_t duration_ms)
{
    remember_step(j, NULL, error);
    apply_state(j, state_changes);
    json_t *entry = step_entry(j, NULL, error);
    json_t *event = step_event(j, "failed", error, duration_ms);
    JLOG(j, TERN_LOG_WARN, "step failed: %s: %s", error_code(error),
         json_string_value(json_object_get(error, "message")));
    job_advance(j, entry, event, error, state_changes);
    json_decref(entry);
    json_decref(event);
}

static bool code_is_fatal(const run_job_t *j, const char *code)
{
    static const char *const engine_fatal[] = {"TemplateError",   "InvalidArgument", "UnknownTask",
                                               "StepInterrupted", "WorkflowTimeout", NULL};
    for (size_t i = 0; engine_fatal[i] != NULL; i++)
        if (strcmp(code, engine_fatal[i]) == 0)
            return true;
    const wf_step_t *s = job_step(j);
    const tern_task_def *def = s ? plugin_registry_find(j->r->opts.plugins, s->task, NULL) : NULL;
    return def != NULL && plugin_task_code_is_fatal(def, code);
}

static void on_backoff_timer(uv_timer_t *t)
{
    run_job_t *j = t->data;
    if (j->stage == STAGE_COMMIT) {
        /* The retry's commit has not been answered yet; wait for it. */
        uv_timer_start(&j->wait_timer, on_backoff_timer, 50, 0);
        return;
    }
    j->stage = STAGE_IDLE;
    job_run_step(j);
}

/* An attempt failed with `code`: retry, run the fallback, or fail the step. */
static void attempt_failed(run_job_t *j, const char *code, const char *message,
                           const json_t *state_changes, uint64_t duration_ms)
{
    const wf_step_t *main = job_main_step(j);
    json_t *error = error_new(code, message, main->name);
    const retry_policy_t *policy = &job_step(j)->retry;
    bool fatal = code_is_fatal(j, code);

    if (!fatal && !j->in_fallback && j->attempt + 1 < policy->max_attempts &&
        !j->cancel_requested) {
        uint64_t delay = retry_policy_next_delay(policy, j->attempt + 1, random_u64());
        /* A stopping runner hands retries to the delayed set instead of waiting. */
        bool on_runner = delay < j->r->opts.short_retry_ms && !j->released;
        if (delay == 0 && !on_runner)
            delay = 1;
        apply_state(j, state_changes);
        json_t *event = step_event(j, "retry", error, duration_ms);
        json_object_set_new(event, "delay_ms", json_integer((json_int_t)delay));
        commit_begin(j, "retry", NULL, event, NULL, state_changes);
        j->attempt++;
        store_args_pushf(&j->commit, "%u", j->attempt);
        store_args_push_u64(&j->commit, on_runner ? 0 : delay);
        j->commit_then = on_runner ? THEN_RETRY : THEN_LEAVE;
        j->r->n_retries++;
        metrics_retry_observe(job_step(j)->task);
        JLOG(j, TERN_LOG_INFO, "attempt failed (%s: %s); retrying in %llu ms", code, message,
             (unsigned long long)delay);
        if (on_runner) {
            /* The loop's clock is read once per iteration; refresh it so the retry never
             * starts before its delay has passed on the wall clock. */
            uv_update_time(j->r->loop);
            uv_timer_start(&j->wait_timer, on_backoff_timer, delay, 0);
        }
        job_commit_send(j);
        json_decref(event);
        json_decref(error);
        return;
    }
    if (main->fallback != NULL && !j->in_fallback && !j->cancel_requested) {
        /* Retries are exhausted: the fallback runs in the same step, with the step's
         * error visible to its templates as error.*. */
        JLOG(j, TERN_LOG_INFO, "step failed (%s); running its fallback %s", code,
             main->fallback->task);
        apply_state(j, state_changes);
        j->in_fallback = true;
        j->step_error = error;
        job_run_step(j);
        return;
    }
    if (j->in_fallback && j->step_error != NULL) {
        json_object_set(error, "step_error", j->step_error);
    }
    step_failed_for_good(j, error, state_changes, duration_ms);
}

static void attempt_done(run_job_t *j, json_t *result, const json_t *state_changes,
                         uint64_t duration_ms)
{
    remember_step(j, result, NULL);
    apply_state(j, state_changes);
    json_t *entry = step_entry(j, result, NULL);
    json_t *event = step_event(j, "succeeded", NULL, duration_ms);
    j->r->n_steps++;
    job_advance(j, entry, event, NULL, state_changes);
    json_decref(entry);
    json_decref(event);
}

/* ---- attempts ------------------------------------------------------------------ */

static void on_attempt_outcome(void *owner, task_outcome_t *o)
{
    run_job_t *j = owner;
    j->ctx = NULL;
    j->isolated = NULL;
    uv_timer_stop(&j->step_timer);
    uint64_t duration = clock_mono_ms() - j->attempt_mono_ms;
    static const char *const outcome_names[] = {[TASK_DONE] = "succeeded",
                                                [TASK_FAILED] = "failed",
                                                [TASK_WAIT] = "waiting",
                                                [TASK_REQUEUE] = "requeued"};
    const wf_step_t *step = job_step(j);
    metrics_step_observe(step != NULL ? step->task : "?", outcome_names[o->kind],
                         (double)duration / 1000.0);
    switch (o->kind) {
    case TASK_DONE:
        attempt_done(j, o->result, o->state_changes, duration);
        break;
    case TASK_FAILED:
        attempt_failed(j, o->code, o->message, o->state_changes, duration);
        break;
    case TASK_WAIT: {
        apply_state(j, o->state_changes);
        json_t *event = step_event(j, "waiting", NULL, duration);
        commit_begin(j, "wait", NULL, event, NULL, o->state_changes);
        store_args_push_json(&j->commit, o->info != NULL ? o->info : json_null());
        j->commit_then = THEN_LEAVE;
        json_decref(event);
        job_commit_send(j);
        break;
    }
    case TASK_REQUEUE: {
        apply_state(j, o->state_changes);
        json_t *event = step_event(j, "requeued", NULL, duration);
        json_object_set_new(event, "delay_ms", json_integer((json_int_t)o->delay_ms));
        commit_begin(j, "requeue", NULL, event, NULL, o->state_changes);
        store_args_push_u64(&j->commit, o->delay_ms < 1 ? 1 : o->delay_ms);
        store_args_push_json(&j->commit, o->info != NULL ? o->info : json_null());
        j->commit_then = THEN_LEAVE;
        json_decref(event);
        job_commit_send(j);
        break;
    }
    }
    task_outcome_dispose(o);
}

static void on_attempt_progress(void *owner, json_t *progress)
{
    run_job_t *j = owner;
    const wf_step_t *s = job_step(j);
    json_t *ev = json_pack("{s:s, s:s, s:s, s:I, s:s, s:o, s:I}", "type", "progress", "job",
                           j->uuid, "phase", workflow_phase_name((wf_phase_t)j->phase), "index",
                           (json_int_t)j->idx, "name", s ? s->name : "?", "progress", progress,
                           "time", (json_int_t)clock_wall_ms());
    /* Progress is best effort: appended without a script, no answer awaited. */
    if (ev != NULL) {
        char *text = json_dumps(ev, JSON_COMPACT);
        store_event_append(j->r->store, j->uuid, text);
        free(text);
        json_decref(ev);
    }
}

static void on_step_timeout(uv_timer_t *t)
{
    run_job_t *j = t->data;
    if (j->stage != STAGE_ATTEMPT)
        return;
    const wf_step_t *s = job_step(j);
    job_cancel_attempt(j);
    char msg[160];
    snprintf(msg, sizeof msg, "task %s did not finish within %llu ms", s->task,
             (unsigned long long)s->timeout_ms);
    metrics_step_observe(s->task, "timeout",
                         (double)(clock_mono_ms() - j->attempt_mono_ms) / 1000.0);
    attempt_failed(j, "TaskTimeout", msg, NULL, clock_mono_ms() - j->attempt_mono_ms);
}

static template_scope_t job_scope(const run_job_t *j, const json_t *error)
{
    template_scope_t sc = {
        .params = j->params,
        .steps = j->steps,
        .state = j->state,
        .job = j->job_scope,
        .error = error,
        .admission = j->admission,
    };
    return sc;
}

static void start_attempt(run_job_t *j)
{
    runner_t *r = j->r;
    const wf_step_t *s = job_step(j);
    const wf_step_t *main = job_main_step(j);
    /* Templates report below the args' path; the plugin's check below the step's. */
    char step_path[160], path[168], err[512];
    snprintf(step_path, sizeof step_path, "%s[%zu]%s", workflow_phase_name((wf_phase_t)j->phase),
             j->idx, j->in_fallback ? ".fallback" : "");
    snprintf(path, sizeof path, "%s.args", step_path);

    j->attempt_started_ms = clock_wall_ms();
    j->attempt_mono_ms = clock_mono_ms();
    j->stage = STAGE_ATTEMPT;

    const json_t *error = j->in_fallback ? j->step_error : j->error;
    template_scope_t sc = job_scope(j, error);
    json_t *args =
        plugin_registry_expand_args(r->opts.plugins, s->task, s->args, path, &sc, err, sizeof err);
    if (args == NULL) {
        attempt_failed(j, "TemplateError", err, NULL, 0);
        return;
    }
    const plugin_t *plugin = NULL;
    const tern_task_def *def = plugin_registry_find(r->opts.plugins, s->task, &plugin);
    if (def == NULL) {
        snprintf(err, sizeof err, "task %s is not loaded on runner %s", s->task, r->id);
        json_decref(args);
        attempt_failed(j, "UnknownTask", err, NULL, 0);
        return;
    }
    if (plugin_registry_check_expanded(r->opts.plugins, s->task, args, step_path, err,
                                       sizeof err) != 0) {
        json_decref(args);
        attempt_failed(j, "InvalidArgument", err, NULL, 0);
        return;
    }
    char key[128];
    snprintf(key, sizeof key, "%s/%d/%zu%s", j->uuid, j->phase, j->idx,
             j->in_fallback ? "/fallback" : "");
    char step_name[WORKFLOW_NAME_MAX + 16];
    snprintf(step_name, sizeof step_name, "%s%s", main->name, j->in_fallback ? ".fallback" : "");
    task_ctx_opts_t o = {
        .loop = r->loop,
        .def = def,
        .plugin_name = plugin->name,
        .plugin_state = plugin->state,
        .task_name = s->task,
        .job_uuid = j->uuid,
        .job_target = j->target,
        .params = j->params,
        .state = j->state,
        .step_name = step_name,
        .attempt = j->attempt + 1,
        .idempotency_key = key,
        .http = r->opts.http,
        .allow = plugin->allow_networks,
        .redis = &r->redis_ops,
        .sink = {.on_outcome = on_attempt_outcome, .on_progress = on_attempt_progress, .owner = j},
    };
    if (s->timeout_ms > 0)
        uv_timer_start(&j->step_timer, on_step_timeout, s->timeout_ms, 0);
    bool isolate = s->isolate || (def->flags & TERN_TASK_ISOLATED);
    if (isolate) {
        if (r->helper_exe == NULL) {
            uv_timer_stop(&j->step_timer);
            json_decref(args);
            attempt_failed(j, "IsolationUnavailable",
                           "this runner cannot start isolated helper processes", NULL, 0);
            return;
        }
        task_isolated_opts_t io = {
            .loop = r->loop,
            .helper_exe = r->helper_exe,
            .plugin_dir = r->plugin_dir,
            .redis_url = r->redis_url,
            .plugin_config = plugin->config,
            .ctx = &o,
        };
        j->isolated = task_isolated_start(&io, args, err, sizeof err);
        json_decref(args);
        if (j->isolated == NULL) {
            uv_timer_stop(&j->step_timer);
            attempt_failed(j, "IsolationUnavailable", err, NULL, 0);
        }
        return;
    }
    j->ctx = task_ctx_start(&o, args);
    json_decref(args);
}

/* Holds and irreversible steps need a word with Redis before the attempt. */
static void on_begin_reply(void *data, int status, const redisReply *reply, const char *errmsg)
{
    run_job_t *j = data;
    j->calls--;
    if (j->stage == STAGE_GONE) {
        job_free_if_done(j);
        return;
    }
    if (status != 0) {
        JLOG(j, TERN_LOG_WARN, "step begin not answered (%s); trying again",
             errmsg ? errmsg : "no answer");
        j->stage = STAGE_IDLE;
        uv_timer_start(&j->wait_timer, on_backoff_timer, COMMIT_RETRY_MS, 0);
        return;
    }
    const redisReply *kind = store_reply_at(reply, 0);
    if (store_reply_is(kind, "GO")) {
        if (j->cancel_requested) {
            j->stage = STAGE_IDLE;
            job_cancel_now(j);
            return;
        }
        start_attempt(j);
    } else if (store_reply_is(kind, "CANCEL")) {
        j->stage = STAGE_IDLE;
        job_cancel_now(j);
    } else if (store_reply_is(kind, "PARKED")) {
        JLOG(j, TERN_LOG_INFO, "waiting for resource %s", store_reply_at(reply, 1)->str);
        job_leave(j);
    } else {
        j->r->n_stale++;
        JLOG(j, TERN_LOG_WARN, "job no longer held by this runner; dropping it");
        job_leave(j);
    }
}

static void begin_step(run_job_t *j, const wf_step_t *s)
{
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, j->uuid);
    store_args_push(&a, j->r->id);
    store_args_push(&a, j->fence);
    store_args_pushf(&a, "%d", j->phase);
    store_args_pushf(&a, "%zu", j->idx);
    store_args_push(&a, s->idempotent ? "0" : "1");
    /* Step holds are expanded now: they may name earlier results and state. */
    char err[512];
    template_scope_t sc = job_scope(j, j->error);
    char *lines = NULL;
    int rc = holds_expand(s->holds, s->n_holds, &sc, &lines, err, sizeof err);
    if (rc != 0) {
        store_args_dispose(&a);
        /* A templated capacity out of range is a bad value, as a bad queue name is. */
        attempt_failed(j, rc == TERN_EREFUSED ? "InvalidArgument" : "TemplateError", err, NULL, 0);
        return;
    }
    store_args_push(&a, lines);
    free(lines);
    j->stage = STAGE_BEGIN;
    if (store_eval(j->r->store, SCRIPT_STEP_BEGIN, &a, on_begin_reply, j) != 0) {
        j->stage = STAGE_IDLE;
        uv_timer_start(&j->wait_timer, on_backoff_timer, COMMIT_RETRY_MS, 0);
    } else {
        j->calls++;
    }
    store_args_dispose(&a);
}

/* Before the step at the cursor runs: true when it runs on this runner now. Otherwise
 * the job is on its way to the step's queue (a `move` commit; a fallback about to run
 * goes with its step's error, and runs there), or its queue is being recorded before it
 * runs here (a `move` that stays: should this runner die mid-step, the step goes back
 * to its own queue), or the step failed because its queue is no queue name
 * (InvalidArgument, through the step's fallback and onerror). */
static bool job_route_here(run_job_t *j, const wf_step_t *main)
{
    runner_t *r = j->r;
    if (main->queue == NULL && j->step_queue == NULL && runner_serves(r, j->wf->queue))
        return true;
    char err[512];
    char *q = step_queue_expand(j, main, j->phase, j->idx, err, sizeof err);
    if (q == NULL) {
        j->attempt_started_ms = clock_wall_ms();
        j->attempt_mono_ms = clock_mono_ms();
        attempt_failed(j, "InvalidArgument", err, NULL, 0);
        return false;
    }
    bool serves = runner_serves(r, q);
    bool recorded = strcmp(q, j->wf->queue) == 0
                        ? j->step_queue == NULL
                        : j->step_queue != NULL && strcmp(j->step_queue, q) == 0;
    if (serves && recorded) {
        free(q);
        return true;
    }
    if (!serves)
        JLOG(j, TERN_LOG_DEBUG, "moving to queue %s, which this runner does not serve", q);
    commit_begin(j, "move", NULL, NULL, NULL, NULL);
    route_push(j, q, !serves, job_step(j)->timeout_ms);
    store_args_push_json(&j->commit, j->in_fallback && !serves ? j->step_error : NULL);
    j->commit_then = serves ? THEN_CONTINUE : THEN_LEAVE;
    job_commit_send(j);
    return false;
}

/* The step at the cursor waited in its queue longer than its timeout, and a runner of
 * the workflow's queue claimed the job (tick.lua): the step fails with TaskTimeout,
 * through its retries, fallback and onerror. */
static void job_queue_wait_expired(run_job_t *j)
{
    const wf_step_t *s = job_step(j);
    char msg[320];
    snprintf(msg, sizeof msg,
             "step %s waited on queue %s for longer than its timeout (%llu ms) and no runner "
             "of that queue took it",
             s->name, j->queue_timeout, (unsigned long long)s->timeout_ms);
    free(j->queue_timeout);
    j->queue_timeout = NULL;
    JLOG(j, TERN_LOG_WARN, "%s", msg);
    j->attempt_started_ms = clock_wall_ms();
    j->attempt_mono_ms = clock_mono_ms();
    metrics_step_observe(s->task, "timeout", 0);
    attempt_failed(j, "TaskTimeout", msg, NULL, 0);
}

/* Runs the step at the cursor, or finishes the job when the cursor is past the end. */
static void job_run_step(run_job_t *j)
{
    if (j->stage == STAGE_GONE)
        return;
    if (j->released && j->stage == STAGE_IDLE) {
        commit_begin(j, "release", NULL, NULL, NULL, NULL);
        store_args_pushf(&j->commit, "%d", j->phase);
        store_args_pushf(&j->commit, "%zu", j->idx);
        j->commit_then = THEN_LEAVE;
        job_commit_send(j);
        return;
    }
    const wf_step_t *main = job_main_step(j);
    if (main == NULL) {
        const char *as = j->phase == WF_CHAIN     ? "succeeded"
                         : j->phase == WF_ONERROR ? "failed"
                                                  : "canceled";
        job_finish(j, as, NULL, NULL, NULL, NULL, NULL);
        return;
    }
    if (!job_route_here(j, main))
        return;
    if (j->resume != NULL) {
        /* A waiting step was resumed: its outcome was given by the operator. */
        json_t *resume = j->resume;
        j->resume = NULL;
        j->attempt_started_ms = clock_wall_ms();
        j->attempt_mono_ms = clock_mono_ms();
        json_t *error = json_object_get(resume, "error");
        if (json_is_object(error)) {
            const char *code = json_string_value(json_object_get(error, "code"));
            const char *msg = json_string_value(json_object_get(error, "message"));
            attempt_failed(j, code ? code : "ResumedWithError", msg ? msg : "", NULL, 0);
        } else {
            attempt_done(j, json_object_get(resume, "result"), NULL, 0);
        }
        json_decref(resume);
        return;
    }
    const wf_step_t *s = job_step(j);
    if (!j->in_fallback && (s->n_holds > 0 || !s->idempotent)) {
        begin_step(j, s);
        return;
    }
    start_attempt(j);
}

/* ---- cancel and workflow timeout ---------------------------------------------- */

/* Cancels the job's current work and routes it to oncancel (or ends it canceled). */
static void job_cancel_now(run_job_t *j)
{
    j->cancel_requested = false;
    if (j->phase == WF_ONCANCEL)
        return; /* already running its cancel chain */
    uv_timer_stop(&j->step_timer);
    uv_timer_stop(&j->wait_timer);
    bool had_attempt = j->stage == STAGE_ATTEMPT || j->stage == STAGE_BACKOFF;
    job_cancel_attempt(j);
    /* An outcome an operator gave the waiting step is moot: the job leaves that step. */
    json_decref(j->resume);
    j->resume = NULL;
    JLOG(j, TERN_LOG_INFO, "job canceled");
    json_t *error = error_new("Canceled", "the job was canceled", NULL);
    json_t *entry = NULL, *event = NULL;
    if (had_attempt && job_main_step(j) != NULL) {
        entry = step_entry(j, NULL, error);
        event = step_event(j, "canceled", error, clock_mono_ms() - j->attempt_mono_ms);
    }
    if (phase_len(j, WF_ONCANCEL) > 0) {
        commit_begin(j, "next", entry, event, error, NULL);
        store_args_pushf(&j->commit, "%d", WF_ONCANCEL);
        store_args_push(&j->commit, "0");
        store_args_push(&j->commit, "");
        json_decref(j->error);
        j->error = json_incref(error);
        j->phase = WF_ONCANCEL;
        j->idx = 0;
        j->attempt = 0;
        j->in_fallback = false;
        json_decref(j->step_error);
        j->step_error = NULL;
        j->commit_then = commit_route(j) ? THEN_LEAVE : THEN_CONTINUE;
        job_commit_send(j);
    } else {
        job_finish(j, "canceled", entry, event, error, NULL, NULL);
    }
    json_decref(error);
    json_decref(entry);
    json_decref(event);
}

static void job_request_cancel(run_job_t *j)
{
    switch (j->stage) {
    case STAGE_ATTEMPT:
    case STAGE_BACKOFF:
    case STAGE_IDLE:
        job_cancel_now(j);
        break;
    default:
        /* A commit or begin is in flight: act when it is answered. */
        j->cancel_requested = true;
        break;
    }
}

static void on_job_timer(uv_timer_t *t);

static void job_timeout_now(run_job_t *j)
{
    if (j->phase != WF_CHAIN || j->stage == STAGE_GONE)
        return; /* onerror/oncancel are bounded by their own step timeouts */
    if (j->stage == STAGE_COMMIT || j->stage == STAGE_BEGIN) {
        uv_timer_start(&j->job_timer, on_job_timer, 50, 0);
        return;
    }
    uv_timer_stop(&j->step_timer);
    uv_timer_stop(&j->wait_timer);
    bool had_attempt = j->stage == STAGE_ATTEMPT || j->stage == STAGE_BACKOFF;
    job_cancel_attempt(j);
    json_decref(j->resume); /* as in job_cancel_now: the job leaves the waiting step */
    j->resume = NULL;
    char msg[160];
    snprintf(msg, sizeof msg, "workflow %s did not finish within %llu s", j->wf->name,
             (unsigned long long)(j->wf->timeout_ms / 1000));
    const wf_step_t *main = job_main_step(j);
    json_t *error = error_new("WorkflowTimeout", msg, main ? main->name : NULL);
    JLOG(j, TERN_LOG_WARN, "%s", msg);
    if (main == NULL) {
        job_finish(j, "failed", NULL, NULL, error, NULL, NULL);
        json_decref(error);
        return;
    }
    if (!had_attempt)
        j->attempt_started_ms = clock_wall_ms(), j->attempt_mono_ms = clock_mono_ms();
    step_failed_for_good(j, error, NULL, clock_mono_ms() - j->attempt_mono_ms);
}

static void on_job_timer(uv_timer_t *t)
{
    job_timeout_now(t->data);
}

/* ---- jobs from a claim reply --------------------------------------------------- */

/* True (and forgotten) when a cancel for `uuid` arrived shortly before its claim. */
static bool early_cancel_take(runner_t *r, const char *uuid)
{
    uint64_t now = clock_mono_ms();
    for (size_t i = 0; i < TERN_ARRAY_SIZE(r->early_cancels); i++) {
        if (r->early_cancels[i].uuid[0] != '\0' && now - r->early_cancels[i].at_mono < 5000 &&
            strcmp(r->early_cancels[i].uuid, uuid) == 0) {
            r->early_cancels[i].uuid[0] = '\0';
            return true;
        }
    }
    return false;
}

static json_t *or_null(json_t *v)
{
    return v != NULL ? v : json_null();
}

static json_t *results_to_steps(json_t *steps, const redisReply *list)
{
    for (size_t i = 0; list != NULL && i < list->elements; i++) {
        const redisReply *e = list->element[i];
        json_t *entry = json_loadb(e->str, e->len, 0, NULL);
        const char *name = json_string_value(json_object_get(entry, "name"));
        if (name != NULL)
            json_object_set_new(steps, name,
                                json_pack("{s:O, s:O}", "result",
                                          or_null(json_object_get(entry, "result")), "error",
                                          or_null(json_object_get(entry, "error"))));
        json_decref(entry);
    }
    return steps;
}

/* A job started on this runner, from the job's fields `f`, its result lists of each
 * phase and its state (replies; NULL when empty), the server's time, the workflow
 * document (`doc`, NULL when the store has none) and the workflow's uuid (`wf_uuid`;
 * NULL: the one in the fields, as a direct start has it). One reserved slot is taken. */
typedef struct job_start {
    const char *uuid;
    long long fence;
    job_fields_t f;
    const redisReply *results[WF_NPHASES], *state;
    long long server_now;
    const char *doc;
    size_t doc_len;
    const char *wf_uuid;
    size_t wf_uuid_len;
} job_start_t;

/* What the record says of the job's step queue (see "step queues"): the queue its step
 * is recorded in, a wait in it that expired, a fallback to run there. */
static void job_adopt_step_queue(run_job_t *j, const job_fields_t *f)
{
    size_t len;
    const char *v;
    if ((v = job_fields_get(f, "step_queue", &len)) != NULL && len > 0)
        j->step_queue = xstrndup(v, len);
    if ((v = job_fields_get(f, "queue_timeout", &len)) != NULL && len > 0)
        j->queue_timeout = xstrndup(v, len);
    if ((v = job_fields_get(f, "fallback_error", &len)) != NULL && len > 0) {
        j->step_error = json_loadb(v, len, 0, NULL);
        j->in_fallback = j->step_error != NULL;
    }
}

static void job_adopt(runner_t *r, const job_start_t *st)
{
    const job_fields_t *f = &st->f;
    long long server_now = st->server_now;
    r->reserved = r->reserved > 0 ? r->reserved - 1 : 0;
    run_job_t *existing = job_find(r, st->uuid);
    if (existing != NULL) {
        /* A second claim of a job we run: resync() sends none (it waits for claims in
         * flight), so this is a guard only. Keep the newest fence, whatever order the
         * two answers arrive in. */
        if (st->fence > atoll(existing->fence))
            snprintf(existing->fence, sizeof existing->fence, "%lld", st->fence);
        return;
    }
    /* Ours again (a retried job claimed anew): a resync must adopt it if a later claim's
     * answer is lost, or it would sit in our list under our id with nobody running it. */
    free(str_map_del(&r->ceded, st->uuid));
    run_job_t *j = xcalloc(1, sizeof *j);
    j->r = r;
    snprintf(j->uuid, sizeof j->uuid, "%s", st->uuid);
    snprintf(j->fence, sizeof j->fence, "%lld", st->fence);
    uv_timer_init(r->loop, &j->step_timer);
    uv_timer_init(r->loop, &j->job_timer);
    uv_timer_init(r->loop, &j->wait_timer);
    j->step_timer.data = j->job_timer.data = j->wait_timer.data = j;
    j->open_handles = 3;
    /* A claim answered after a stop began: hand the job back before its first step. */
    j->released = r->stopping;
    store_args_init(&j->commit);
    j->next = r->jobs;
    if (r->jobs != NULL)
        r->jobs->prev = j;
    r->jobs = j;
    str_map_put(&r->jobs_by_uuid, j->uuid, j);
    r->in_flight++;
    r->allocated++;
    r->n_claimed++;

    /* The frozen workflow, shared by the version's jobs; parsed once per version,
     * found by its uuid. */
    const char *wf_uuid = st->wf_uuid;
    size_t uuid_len = st->wf_uuid_len;
    if (wf_uuid == NULL)
        wf_uuid = job_fields_get(f, "workflow_uuid", &uuid_len);
    if (wf_uuid != NULL && uuid_len == 0)
        wf_uuid = NULL;
    char err[512] = "missing workflow document";
    j->wfe =
        workflow_cache_load(r->workflows, wf_uuid, uuid_len, st->doc, st->doc_len, err, sizeof err);
    j->state = store_reply_hash(st->state); /* {} for NULL */
    /* State values are JSON texts. */
    const char *key;
    json_t *value;
    json_object_foreach(j->state, key, value)
    {
        json_t *v = parse_json_or_string(json_string_value(value), json_string_length(value));
        json_object_set_new(j->state, key, v);
    }
    j->steps = json_object();
    for (int p = 0; p < WF_NPHASES; p++)
        results_to_steps(j->steps, st->results[p]);
    size_t len = 0;
    const char *s = job_fields_get(f, "params", &len);
    j->params = s != NULL ? json_loadb(s, len, 0, NULL) : NULL;
    if (j->params == NULL)
        j->params = json_object();
    s = job_fields_get(f, "target", &len);
    j->target = s != NULL && len > 0 ? xstrndup(s, len) : NULL;
    const char *v;
    if ((v = job_fields_get(f, "phase", NULL)) != NULL)
        j->phase = atoi(v);
    if ((v = job_fields_get(f, "idx", NULL)) != NULL)
        j->idx = (size_t)strtoull(v, NULL, 10);
    if ((v = job_fields_get(f, "attempt", NULL)) != NULL)
        j->attempt = (uint32_t)strtoul(v, NULL, 10);
    if ((v = job_fields_get(f, "error", &len)) != NULL && len > 0)
        j->error = json_loadb(v, len, 0, NULL);
    if ((v = job_fields_get(f, "resume", &len)) != NULL && len > 0)
        j->resume = json_loadb(v, len, 0, NULL);
    if ((v = job_fields_get(f, "admission", &len)) != NULL && len > 0)
        j->admission = json_loadb(v, len, 0, NULL);
    v = job_fields_get(f, "cancel", NULL);
    bool cancel = (v != NULL && strcmp(v, "1") == 0) || early_cancel_take(r, j->uuid);
    v = job_fields_get(f, "timed_out", NULL);
    j->timed_out = v != NULL && strcmp(v, "1") == 0;
    job_adopt_step_queue(j, f);
    j->job_scope = json_pack("{s:s, s:s?, s:s?}", "uuid", j->uuid, "target", j->target, "workflow",
                             j->wfe ? j->wfe->wf->name : NULL);

    if (j->wfe == NULL) {
        /* The frozen document does not parse any more (it was validated when the job
         * was created, so this is a damaged record): fail the job, visibly. */
        log_msg(TERN_LOG_ERROR, "runner", NULL, "job %s: cannot parse its workflow: %s", j->uuid,
                err);
        static const workflow_t empty_wf;
        j->wf = &empty_wf;
        json_t *e = error_new("InvalidWorkflow", err, NULL);
        job_finish(j, "failed", NULL, NULL, e, NULL, NULL);
        json_decref(e);
        return;
    }
    j->wf = j->wfe->wf;
    JLOG(j, TERN_LOG_DEBUG, "claimed (fence %s)", j->fence);

    /* Workflow deadline, on this machine's monotonic clock. */
    if ((v = job_fields_get(f, "deadline", NULL)) != NULL && j->phase == WF_CHAIN) {
        long long deadline = atoll(v);
        long long left = deadline - server_now;
        if (left <= 0 || j->timed_out) {
            j->stage = STAGE_IDLE;
            job_timeout_now(j);
            return;
        }
        uv_timer_start(&j->job_timer, on_job_timer, (uint64_t)left, 0);
    }
    if (cancel && j->phase != WF_ONCANCEL) {
        j->stage = STAGE_IDLE;
        job_cancel_now(j);
        return;
    }
    j->stage = STAGE_IDLE;
    if (j->queue_timeout != NULL && job_main_step(j) != NULL) {
        job_queue_wait_expired(j);
        return;
    }
    job_run_step(j);
}

/* Job `i` of a claim's answer: {uuid, fence, fields, results of each phase, state,
 * server now, workflow document, workflow uuid} (job_claim.lua). The document is text,
 * false (the store has none), or the index of an earlier job of the same answer whose
 * document, and uuid, it shares: an answer carries each document once. */
static void job_from_claim(runner_t *r, const redisReply *reply, size_t i)
{
    const redisReply *item = reply->element[i];
    const redisReply *uuid = store_reply_at(item, 0);
    const redisReply *f = store_reply_at(item, 2);
    const redisReply *doc = store_reply_at(item, 8), *wf_uuid = store_reply_at(item, 9);
    if (doc != NULL && doc->type == REDIS_REPLY_INTEGER && doc->integer >= 0 &&
        (size_t)doc->integer < i) {
        wf_uuid = store_reply_at(reply->element[doc->integer], 9);
        doc = store_reply_at(reply->element[doc->integer], 8);
    }
    if (uuid == NULL || uuid->type != REDIS_REPLY_STRING || f == NULL)
        return;
    bool has_doc = doc != NULL && doc->type == REDIS_REPLY_STRING;
    bool has_uuid = wf_uuid != NULL && wf_uuid->type == REDIS_REPLY_STRING;
    job_start_t st = {
        .uuid = uuid->str,
        .fence = store_reply_int(store_reply_at(item, 1), 0),
        .f = {.reply = f},
        .results = {store_reply_at(item, 3), store_reply_at(item, 4), store_reply_at(item, 5)},
        .state = store_reply_at(item, 6),
        .server_now = store_reply_int(store_reply_at(item, 7), 0),
        .doc = has_doc ? doc->str : NULL,
        .doc_len = has_doc ? doc->len : 0,
        .wf_uuid = has_uuid ? wf_uuid->str : NULL,
        .wf_uuid_len = has_uuid ? wf_uuid->len : 0};
    job_adopt(r, &st);
}

/* ---- BLMOVEs whose answer nobody reads ------------------------------------------ */

/* A claim starts with a BLMOVE that moves a job from its queue into our list, and only
 * the BLMOVE's answer tells this process to claim that job. Redis ends a blocked BLMOVE
 * when its timeout passes or when it sees the connection close, not when the process
 * that sent it dies. So a BLMOVE whose answer this process never reads can still move
 * a job into our list, where it sits queued with no claim. The interleaving seen:
 *
 *   1. a runner under id R blocks in BLMOVE tern:q:Q tern:r:R:jobs (BLOCK_SECONDS);
 *   2. it is killed -9 and started again under R while Redis still holds that BLMOVE
 *      (Redis has not seen its connection close yet: a killed process's sockets close
 *      when its last thread has exited, and a dead host leaves a TCP connection open);
 *   3. the new process reads its list at start (resync), adopts what is there, and
 *      blocks in a BLMOVE of its own, queued in Redis behind the old one;
 *   4. a job reaches Q: Redis serves the oldest BLMOVE, the old one; the job moves into
 *      tern:r:R:jobs and the answer goes to a connection nobody reads.
 *
 * No claim answer of this process was lost, so nothing made it read its list again
 * (test_provision.py: test_fault_after_disks, then a provision on the same server;
 * tests/integration/test_restart_claim.c forces it). The same holds for a BLMOVE of
 * ours whose connection dropped mid-wait. Either ends within BLOCK_MS of being sent,
 * and was sent before `from` (unseen_from): the store coming up (Redis read an earlier
 * process's BLMOVE before it answered this process's first calls) or the drop. So a
 * resync sent after from + BLOCK_MS + UNSEEN_MARGIN_MS finds every job they moved.
 * Until then the claimers block no longer than that moment, since the resync waits for
 * their own BLMOVEs to end (resync()). */

/* Notes that a BLMOVE whose answer this process will not read may have been sent
 * before `from_mono`: a resync becomes due once it has surely ended. */
static void unseen_from(runner_t *r, uint64_t from_mono)
{
    uint64_t until = from_mono + BLOCK_MS + UNSEEN_MARGIN_MS;
    if (until > r->unseen_until_mono)
        r->unseen_until_mono = until;
}

/* True when our list is to be read: a claim's answer was lost, or every unseen BLMOVE
 * has ended. (Only a non-zero unseen_until_mono costs a clock read: the claimers ask
 * at every pump.) */
static bool resync_due(const runner_t *r)
{
    return r->resync || (r->unseen_until_mono != 0 && clock_mono_ms() >= r->unseen_until_mono);
}

/* The timeout of a claimer's BLMOVE while unseen BLMOVEs may still move jobs, as
 * BLMOVE's text (seconds, to the ms) written into buf: the time left until they cannot,
 * at most BLOCK_MS, at least 1 ms (0 would block for ever). */
static const char *unseen_block(const runner_t *r, char *buf, size_t len)
{
    uint64_t now = clock_mono_ms();
    uint64_t left = r->unseen_until_mono > now ? r->unseen_until_mono - now : 1;
    if (left > BLOCK_MS)
        left = BLOCK_MS;
    snprintf(buf, len, "%llu.%03llu", (unsigned long long)(left / 1000),
             (unsigned long long)(left % 1000));
    return buf;
}

/* ---- claimers ----------------------------------------------------------------- */

static size_t free_slots(const runner_t *r)
{
    size_t used = r->in_flight + r->reserved;
    return used >= r->opts.concurrency ? 0 : r->opts.concurrency - used;
}

static void on_claim_reply(void *data, int status, const redisReply *reply, const char *errmsg)
{
    claimer_t *cl = data;
    runner_t *r = cl->r;
    cl->claiming = false;
    size_t requested = cl->requested;
    cl->requested = 0;
    if (status != 0) {
        if (status == TERN_EIO)
            r->resync = true; /* jobs may have been moved to our list unseen */
        log_msg(TERN_LOG_WARN, "runner", NULL, "claim on queue %s failed: %s", cl->queue,
                errmsg ? errmsg : "no answer");
        r->reserved = r->reserved >= requested ? r->reserved - requested : 0;
        return; /* the next up event or tick pumps again */
    }
    size_t n = reply->type == REDIS_REPLY_ARRAY ? reply->elements : 0;
    for (size_t i = 0; i < n; i++)
        job_from_claim(r, reply, i);
    /* Slots reserved for jobs that were not there are free again. */
    size_t unused = requested > n ? requested - n : 0;
    r->reserved = r->reserved >= unused ? r->reserved - unused : 0;
    cl->more = n >= requested && requested > 0;
    claimer_pump(cl);
}

static void claim(claimer_t *cl, const char *first, size_t more)
{
    runner_t *r = cl->r;
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, r->id);
    store_args_push(&a, cl->queue);
    store_args_pushf(&a, "%zu", more);
    if (first != NULL)
        store_args_push(&a, first);
    cl->requested = more + (first != NULL ? 1 : 0);
    r->reserved += cl->requested;
    cl->claiming = true;
    if (store_eval(r->store, SCRIPT_JOB_CLAIM, &a, on_claim_reply, cl) != 0) {
        cl->claiming = false;
        r->reserved -= cl->requested;
        cl->requested = 0;
        if (first != NULL)
            r->resync = true; /* the job sits in our list; adopt it when Redis is back */
    }
    store_args_dispose(&a);
}

static void on_blmove_reply(redis_conn_t *c, redisReply *reply, void *data)
{
    (void)c;
    claimer_t *cl = data;
    runner_t *r = cl->r;
    cl->blocking = false;
    if (reply == NULL) {
        /* Dropped mid-wait: a job may have been moved into our list, and Redis may not
         * have seen the connection close yet, so the BLMOVE may still move one. */
        r->resync = true;
        unseen_from(r, clock_mono_ms());
        return;
    }
    if (reply->type == REDIS_REPLY_STRING) {
        if (r->stopping) {
            r->resync = true; /* leave it in our list; tick on stop hands it back */
            return;
        }
        size_t slots = free_slots(r);
        size_t more = slots > 1 ? slots - 1 : 0;
        if (more > CLAIM_BATCH_MAX - 1)
            more = CLAIM_BATCH_MAX - 1;
        claim(cl, reply->str, more);
        return;
    }
    claimer_pump(cl);
}

static void claimer_pump(claimer_t *cl)
{
    runner_t *r = cl->r;
    if (r->stopping || !r->up || cl->blocking || cl->claiming)
        return;
    size_t slots = free_slots(r);
    if (slots == 0)
        return;
    if (resync_due(r)) {
        /* Jobs left in our list come first: adopt them before claiming new ones. */
        resync(r);
        return;
    }
    if (cl->more) {
        cl->more = false;
        claim(cl, NULL, slots > CLAIM_BATCH_MAX ? CLAIM_BATCH_MAX : slots);
        return;
    }
    if (!redis_conn_is_up(cl->conn))
        return;
    char src[160], dst[160], block[32];
    snprintf(src, sizeof src, "tern:q:%s", cl->queue);
    snprintf(dst, sizeof dst, "tern:r:%s:jobs", r->id);
    const char *argv[] = {"BLMOVE", src, dst, "RIGHT", "LEFT", BLOCK_SECONDS};
    if (r->unseen_until_mono != 0) {
        /* Wait no longer than the unseen BLMOVEs can move jobs: the resync then due
         * waits for this one to end (resync()). */
        argv[5] = unseen_block(r, block, sizeof block);
    }
    if (redis_conn_command(cl->conn, on_blmove_reply, cl, 6, argv, NULL) == 0)
        cl->blocking = true;
}

static void pump_all(runner_t *r)
{
    for (size_t i = 0; i < r->n_claimers; i++)
        claimer_pump(&r->claimers[i]);
}

static void on_claimer_conn(redis_conn_t *c, bool up, const char *why, void *data)
{
    (void)c;
    (void)why;
    claimer_t *cl = data;
    if (up)
        claimer_pump(cl);
}

/* ---- direct start (job_ops_local_runner_t) ------------------------------------ */

bool runner_direct_reserve(runner_t *r, const char *queue)
{
    /* A claimer blocked in BLMOVE holds a slot: the job it gets will be claimed. */
    size_t blocking = 0;
    bool serves = false;
    for (size_t i = 0; i < r->n_claimers; i++) {
        blocking += r->claimers[i].blocking ? 1 : 0;
        serves = serves || strcmp(r->claimers[i].queue, queue) == 0;
    }
    if (r->stopping || !r->up || !serves || free_slots(r) <= blocking)
        return false;
    r->reserved++;
    r->direct_pending++;
    return true;
}

void runner_direct_start(runner_t *r, const char *uuid, const store_args_t *fields, const char *doc,
                         size_t doc_len, long long server_now)
{
    r->direct_pending--;
    r->n_direct++;
    job_start_t st = {.uuid = uuid,
                      .fence = 1,
                      .f = {.args = fields},
                      .server_now = server_now,
                      .doc = doc,
                      .doc_len = doc_len};
    job_adopt(r, &st);
    if (r->stopping)
        runner_maybe_stopped(r);
}

void runner_direct_release(runner_t *r, bool lost)
{
    r->direct_pending--;
    r->reserved = r->reserved > 0 ? r->reserved - 1 : 0;
    if (lost)
        r->resync = true; /* the job may sit in our list, started: adopt it */
    if (r->stopping)
        runner_maybe_stopped(r);
    else
        pump_all(r);
}

/* ---- adopting jobs left in our list ------------------------------------------- */

/* Forgets the ceded jobs that are no longer in our list (`list`: its LRANGE). */
static void ceded_prune(runner_t *r, const redisReply *list)
{
    if (r->ceded.n == 0)
        return;
    str_map_t keep;
    str_map_init(&keep);
    for (size_t i = 0; i < list->elements; i++) {
        const redisReply *u = list->element[i];
        char *uuid = u->type == REDIS_REPLY_STRING ? str_map_del(&r->ceded, u->str) : NULL;
        if (uuid != NULL)
            str_map_put(&keep, uuid, uuid);
    }
    ceded_free(r);
    r->ceded = keep;
}

static void on_resync_list(void *data, int status, const redisReply *reply, const char *errmsg)
{
    (void)errmsg;
    runner_t *r = data;
    r->resync_busy = false;
    if (status != 0 || r->stopping)
        return; /* still due; resync_unseen stays for the next read */
    bool unseen = r->resync_unseen;
    r->resync_unseen = false;
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, r->id);
    store_args_push(&a, r->n_claimers > 0 ? r->claimers[0].queue : TERN_DEFAULT_QUEUE);
    store_args_push(&a, "0");
    /* Adopt no more jobs than there are free slots: a runner restarted under the same
     * id would otherwise run what it left beside what it claimed meanwhile, beyond its
     * concurrency. The rest is adopted as slots free (claims wait for it). */
    size_t n = 0, slots = free_slots(r);
    bool left = false;
    const char *first = NULL; /* borrowed from reply */
    ceded_prune(r, reply);
    for (size_t i = 0; i < reply->elements; i++) {
        const redisReply *u = reply->element[i];
        if (u->type == REDIS_REPLY_STRING && job_find(r, u->str) == NULL &&
            str_map_get(&r->ceded, u->str) == NULL) {
            if (n == slots) {
                left = true;
                break;
            }
            store_args_push(&a, u->str);
            if (n == 0)
                first = u->str;
            n++;
        }
    }
    r->resync = left;
    if (n > 0 && r->resync_sweep)
        log_msg(TERN_LOG_WARN, "runner", NULL,
                "adopting %zu job(s) found in our list with no claim (first %s)", n, first);
    else if (n > 0 && unseen)
        log_msg(TERN_LOG_WARN, "runner", NULL,
                "adopting %zu job(s) found in our list once BLMOVEs whose answer we could not "
                "read had ended (first %s)",
                n, first);
    r->resync_sweep = false;
    if (n > 0 && r->n_claimers > 0) {
        claimer_t *cl = &r->claimers[0];
        if (!cl->claiming) {
            cl->claiming = true;
            cl->requested = n;
            r->reserved += n;
            if (store_eval(r->store, SCRIPT_JOB_CLAIM, &a, on_claim_reply, cl) != 0) {
                cl->claiming = false;
                r->reserved -= n;
                cl->requested = 0;
                r->resync = true;
            }
        } else {
            r->resync = true;
        }
    }
    store_args_dispose(&a);
    pump_all(r);
}

static void resync(runner_t *r)
{
    if (!resync_due(r) || r->resync_busy || !r->up || r->stopping)
        return;
    /* Jobs of a claim still in flight sit in our list without being in memory yet;
     * adopting them now would claim them twice, and the second claim's fence would void
     * the first: an irreversible step begun under it fails as interrupted, and a commit
     * sent with it is refused as if another process under our id had taken the job. A
     * claim is in flight from the BLMOVE that moves its first job into our list (on the
     * claimer's own connection: its answer may come after this LRANGE's) to the claim
     * script's answer; a BLMOVE ends within BLOCK_SECONDS, and claimers start none while
     * a resync is due. (A direct start needs no such wait: creates and this LRANGE
     * share the store's one connection, so a create that ran before the LRANGE is
     * answered, and its job taken in, before the list is.) */
    for (size_t i = 0; i < r->n_claimers; i++)
        if (r->claimers[i].claiming || r->claimers[i].blocking)
            return;
    if (r->unseen_until_mono != 0 && clock_mono_ms() >= r->unseen_until_mono) {
        /* This read is sent after every unseen BLMOVE ended (not one sent before, whose
         * answer would clear the flag: hence here); a read that fails is made again. */
        r->unseen_until_mono = 0;
        r->resync = true;
        r->resync_unseen = true;
        log_msg(TERN_LOG_DEBUG, "runner", NULL,
                "reading our list again: BLMOVEs whose answer we could not read have ended");
    }
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, "LRANGE");
    store_args_pushf(&a, "tern:r:%s:jobs", r->id);
    store_args_push(&a, "0");
    store_args_push(&a, "-1");
    r->resync_busy = true;
    if (store_command(r->store, &a, on_resync_list, r) != 0)
        r->resync_busy = false;
    store_args_dispose(&a);
}

/* ---- pub/sub: wake-ups and cancels ---------------------------------------------- */

static void arm_due(runner_t *r, long long due, long long server_now);

static void on_message(redis_conn_t *c, const char *channel, const char *payload, size_t len,
                       void *data)
{
    (void)c;
    runner_t *r = data;
    if (strcmp(channel, "tern:wake") == 0) {
        /* A delayed job became the earliest; its due time is on the server's clock,
         * related to ours by the offset measured at the last tick. */
        char due[32];
        snprintf(due, sizeof due, "%.*s", (int)(len < 31 ? len : 31), payload);
        arm_due(r, atoll(due), (long long)clock_wall_ms() + r->clock_offset);
    } else if (strcmp(channel, "tern:control") == 0 && len > 7 &&
               strncmp(payload, "cancel ", 7) == 0) {
        char uuid[40];
        snprintf(uuid, sizeof uuid, "%.*s", (int)(len - 7), payload + 7);
        run_job_t *j = job_find(r, uuid);
        if (j != NULL) {
            job_request_cancel(j);
        } else if (r->in_flight + r->reserved > 0) {
            unsigned slot = r->early_next++ % TERN_ARRAY_SIZE(r->early_cancels);
            snprintf(r->early_cancels[slot].uuid, sizeof r->early_cancels[slot].uuid, "%s", uuid);
            r->early_cancels[slot].at_mono = clock_mono_ms();
        }
    }
}

static void on_sub_conn(redis_conn_t *c, bool up, const char *why, void *data)
{
    (void)why;
    runner_t *r = data;
    if (up) {
        const char *channels[] = {"tern:wake", "tern:control"};
        redis_conn_subscribe(c, channels, 2, on_message, r);
        /* What was published while the connection was down is lost: once the next
         * tick has been answered (the subscription is in place by then), look for
         * cancels of jobs held here. */
        r->recheck_cancels = true;
    }
}

typedef struct cancel_check {
    runner_t *r;
    char uuid[40];
} cancel_check_t;

static void on_cancel_check(void *data, int status, const redisReply *reply, const char *errmsg)
{
    (void)errmsg;
    cancel_check_t *cc = data;
    run_job_t *j = status == 0 && store_reply_is(reply, "1") ? job_find(cc->r, cc->uuid) : NULL;
    if (j != NULL && j->phase != WF_ONCANCEL) {
        JLOG(j, TERN_LOG_INFO, "cancel requested while pub/sub was down");
        job_request_cancel(j);
    }
    free(cc);
}

/* Asks Redis for the cancel flag of every job held here. The answers come before that
 * of the lease give-up of a stop, so the runner is still there to read them. */
static void recheck_cancels(runner_t *r)
{
    r->recheck_cancels = false;
    for (run_job_t *j = r->jobs; j != NULL; j = j->next) {
        store_args_t a;
        store_args_init(&a);
        store_args_push(&a, "HGET");
        store_args_pushf(&a, "tern:job:%s", j->uuid);
        store_args_push(&a, "cancel");
        cancel_check_t *cc = xcalloc(1, sizeof *cc);
        cc->r = r;
        snprintf(cc->uuid, sizeof cc->uuid, "%s", j->uuid);
        if (store_command(r->store, &a, on_cancel_check, cc) != 0) {
            free(cc);
            r->recheck_cancels = true;
        }
        store_args_dispose(&a);
    }
}

/* ---- tick and due timer ------------------------------------------------------- */

static void tick(runner_t *r, bool heartbeat);

static void on_due_timer(uv_timer_t *t)
{
    runner_t *r = t->data;
    r->due_at_mono = 0;
    tick(r, false);
}

/* Arms the due timer for server time `due` (0: as soon as possible). */
static void arm_due(runner_t *r, long long due, long long server_now)
{
    if (r->stopping)
        return;
    uint64_t delay = due > server_now ? (uint64_t)(due - server_now) : 0;
    uint64_t at = clock_mono_ms() + delay;
    if (r->due_at_mono != 0 && r->due_at_mono <= at)
        return;
    r->due_at_mono = at;
    uv_timer_start(&r->due_timer, on_due_timer, delay, 0);
}

static void on_tick_reply(void *data, int status, const redisReply *reply, const char *errmsg)
{
    runner_t *r = data;
    r->tick_busy = false;
    if (status != 0) {
        if (status != TERN_ENOTCONN)
            log_msg(TERN_LOG_WARN, "runner", NULL, "tick failed: %s", errmsg ? errmsg : "?");
        return;
    }
    long long now = store_reply_int(store_reply_at(reply, 0), 0);
    long long due = store_reply_int(store_reply_at(reply, 1), -1);
    long long deadline = store_reply_int(store_reply_at(reply, 2), -1);
    long long reaped = store_reply_int(store_reply_at(reply, 3), 0);
    /* More finished jobs are due for deletion than one tick deletes: go on at once. */
    if (store_reply_int(store_reply_at(reply, 4), 0) == 1)
        r->tick_again = true;
    r->clock_offset = now - (long long)clock_wall_ms();
    if (reaped > 0)
        log_msg(TERN_LOG_INFO, "runner", NULL, "re-queued %lld jobs of dead runners", reaped);
    long long next = due;
    if (deadline >= 0 && (next < 0 || deadline < next))
        next = deadline;
    if (next >= 0)
        arm_due(r, next, now);
    if (r->stopping)
        runner_maybe_stopped(r);
    if (r->recheck_cancels && !r->freed_conns)
        recheck_cancels(r);
    resync(r);
    pump_all(r);
    if (r->tick_again && !r->stopping)
        tick(r, false);
}

/* How often a runner looks in its own list for jobs it holds no claim to, counted from
 * its start (which reads the list anyway). A safety net: every way known for a job to
 * sit there unclaimed makes a resync due by itself (a lost claim answer; a BLMOVE whose
 * answer nobody reads, see above), so a job the sweep adopts, and names in the log,
 * points at one not known yet. */
#define RESYNC_SWEEP_MS 10000

static void tick(runner_t *r, bool heartbeat)
{
    if (!r->up)
        return;
    if (heartbeat && !r->resync && clock_mono_ms() - r->swept_mono >= RESYNC_SWEEP_MS) {
        r->swept_mono = clock_mono_ms();
        r->resync = true;
        r->resync_sweep = true;
    }
    if (r->tick_busy) {
        /* Any tick promotes due work; run one more when this one is answered. */
        r->tick_again = true;
        return;
    }
    r->tick_again = false;
    store_args_t a;
    store_args_init(&a);
    /* Reaping waits one lease after (re)connecting: runners that lost Redis with us
     * must get the chance to renew their leases first. */
    bool reap = heartbeat && !r->stopping && clock_mono_ms() - r->up_since_mono >= r->opts.lease_ms;
    store_args_push(&a, heartbeat ? r->id : "");
    store_args_push_u64(&a, r->opts.lease_ms);
    json_t *info = json_pack("{s:s, s:I, s:I, s:I, s:o}", "id", r->id, "concurrency",
                             (json_int_t)r->opts.concurrency, "in_flight", (json_int_t)r->in_flight,
                             "started_direct", (json_int_t)r->n_direct, "queues", json_array());
    for (size_t i = 0; i < r->n_claimers; i++)
        json_array_append_new(json_object_get(info, "queues"), json_string(r->claimers[i].queue));
    store_args_push_json(&a, info);
    json_decref(info);
    store_args_push(&a, reap ? "1" : "0");
    r->tick_busy = true;
    if (store_eval(r->store, SCRIPT_TICK, &a, on_tick_reply, r) != 0)
        r->tick_busy = false;
    store_args_dispose(&a);
}

static void on_tick_timer(uv_timer_t *t)
{
    runner_t *r = t->data;
    tick(r, true);
}

void runner_store_state(runner_t *r, bool up)
{
    if (r->up == up)
        return;
    r->up = up;
    if (up) {
        r->up_since_mono = clock_mono_ms();
        /* A BLMOVE of an earlier process under our id may still be blocked in Redis
         * (see "BLMOVEs whose answer nobody reads"). */
        unseen_from(r, r->up_since_mono);
        tick(r, true);
        resync(r);
        pump_all(r);
    }
}

/* ---- lifetime ------------------------------------------------------------------ */

runner_t *runner_new(uv_loop_t *loop, store_t *store, const runner_opts_t *opts)
{
    runner_t *r = xcalloc(1, sizeof *r);
    r->loop = loop;
    r->store = store;
    str_map_init(&r->jobs_by_uuid);
    str_map_init(&r->ceded);
    r->opts = *opts;
    r->workflows = opts->workflows;
    if (r->workflows == NULL) {
        r->workflows = workflow_cache_new(0);
        r->workflows_own = true;
    }
    r->id = xstrdup(opts->id);
    r->opts.id = r->id;
    if (r->opts.concurrency == 0)
        r->opts.concurrency = 1000;
    if (r->opts.lease_ms == 0)
        r->opts.lease_ms = 10000;
    if (r->opts.heartbeat_ms == 0)
        r->opts.heartbeat_ms = r->opts.lease_ms / 5 ? r->opts.lease_ms / 5 : 1;
    if (r->opts.short_retry_ms == 0)
        r->opts.short_retry_ms = 1000;
    r->helper_exe = opts->helper_exe ? xstrdup(opts->helper_exe) : NULL;
    r->plugin_dir = opts->plugin_dir ? xstrdup(opts->plugin_dir) : NULL;
    r->redis_url = opts->redis_url ? xstrdup(opts->redis_url) : NULL;
    r->resync = true; /* a restarted runner with a fixed id adopts what it left */
    /* The start reads the list: the first sweep is one period later. */
    r->swept_mono = clock_mono_ms();
    plugin_redis_ops(store, &r->redis_ops);

    static const char *const default_queue[] = {TERN_DEFAULT_QUEUE};
    const char *const *queues = opts->n_queues > 0 ? opts->queues : default_queue;
    r->n_claimers = opts->n_queues > 0 ? opts->n_queues : 1;
    r->claimers = xcalloc(r->n_claimers, sizeof *r->claimers);
    const redis_addr_t *addr = store_addr(store);
    for (size_t i = 0; i < r->n_claimers; i++) {
        claimer_t *cl = &r->claimers[i];
        cl->r = r;
        cl->queue = xstrdup(queues[i]);
        char name[200];
        snprintf(name, sizeof name, "%s-claim-%s", r->id, cl->queue);
        redis_conn_opts_t co = {.addr = addr,
                                .name = name,
                                .on_event = on_claimer_conn,
                                .data = cl,
                                .command_timeout_ms = 2000 + 10000};
        cl->conn = redis_conn_new(loop, &co);
    }
    char name[200];
    snprintf(name, sizeof name, "%s-sub", r->id);
    redis_conn_opts_t so = {.addr = addr, .name = name, .on_event = on_sub_conn, .data = r};
    r->sub = redis_conn_new(loop, &so);
    redis_conn_set_command_timeout(r->sub, 0);

    uv_timer_init(loop, &r->tick_timer);
    uv_timer_init(loop, &r->due_timer);
    uv_timer_init(loop, &r->stop_timer);
    r->tick_timer.data = r->due_timer.data = r->stop_timer.data = r;
    r->open_handles = 3;
    uv_timer_start(&r->tick_timer, on_tick_timer, r->opts.heartbeat_ms, r->opts.heartbeat_ms);
    if (store_is_up(store))
        runner_store_state(r, true);
    return r;
}

json_t *runner_stats(const runner_t *r)
{
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "in_flight", (json_int_t)r->in_flight,
                     "claimed", (json_int_t)r->n_claimed, "steps", (json_int_t)r->n_steps,
                     "finished", (json_int_t)r->n_finished, "retries", (json_int_t)r->n_retries,
                     "stale", (json_int_t)r->n_stale);
}

static void on_runner_handle_closed(uv_handle_t *h)
{
    runner_t *r = h->data;
    if (--r->open_handles > 0)
        return;
    void (*cb)(void *) = r->on_stopped;
    void *data = r->stopped_data;
    if (r->workflows_own)
        workflow_cache_free(r->workflows);
    str_map_free(&r->jobs_by_uuid);
    ceded_free(r);
    for (size_t i = 0; i < r->n_claimers; i++)
        free(r->claimers[i].queue);
    free(r->claimers);
    free(r->helper_exe);
    free(r->plugin_dir);
    free(r->redis_url);
    free(r->id);
    free(r);
    if (cb != NULL)
        cb(data);
}

static void on_lease_given_up(void *data, int status, const redisReply *reply, const char *errmsg)
{
    (void)status;
    (void)reply;
    (void)errmsg;
    runner_t *r = data;
    r->tick_busy = false;
    uv_close((uv_handle_t *)&r->tick_timer, on_runner_handle_closed);
    uv_close((uv_handle_t *)&r->due_timer, on_runner_handle_closed);
    uv_close((uv_handle_t *)&r->stop_timer, on_runner_handle_closed);
}

/* Called whenever a job leaves while stopping: once none is left, give the lease up
 * (so any job still listed under this runner is re-queued by the next tick of another
 * runner, at once) and close. */
static void runner_maybe_stopped(runner_t *r)
{
    if (!r->stopping || r->in_flight > 0 || r->allocated > 0 || r->freed_conns ||
        r->direct_pending > 0)
        return;
    for (size_t i = 0; i < r->n_claimers; i++)
        if (r->claimers[i].claiming)
            return;
    r->freed_conns = true;
    for (size_t i = 0; i < r->n_claimers; i++)
        redis_conn_free(r->claimers[i].conn);
    redis_conn_free(r->sub);
    uv_timer_stop(&r->tick_timer);
    uv_timer_stop(&r->due_timer);
    uv_timer_stop(&r->stop_timer);
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, "ZADD");
    store_args_push(&a, "tern:runners");
    store_args_push(&a, "0");
    store_args_push(&a, r->id);
    if (store_command(r->store, &a, on_lease_given_up, r) != 0)
        on_lease_given_up(r, TERN_ENOTCONN, NULL, NULL);
    store_args_dispose(&a);
}

static void on_stop_grace_over(uv_timer_t *t)
{
    runner_t *r = t->data;
    /* Attempts still running are abandoned here: the jobs stay listed under this
     * runner and are re-queued (`retried`) once its lease is given up. */
    run_job_t *j = r->jobs;
    size_t n = 0;
    while (j != NULL) {
        run_job_t *next = j->next;
        job_leave(j);
        n++;
        j = next;
    }
    if (n > 0)
        log_msg(TERN_LOG_WARN, "runner", NULL,
                "grace period over: %zu jobs left to be re-queued by other runners", n);
    runner_maybe_stopped(r);
}

void runner_stop(runner_t *r, uint32_t grace_ms, void (*on_stopped)(void *data), void *data)
{
    if (r->stopping)
        return;
    r->stopping = true;
    r->on_stopped = on_stopped;
    r->stopped_data = data;
    log_msg(TERN_LOG_INFO, "runner", NULL,
            "stopping: no more claims; %zu jobs in flight, grace %u ms", r->in_flight, grace_ms);
    for (run_job_t *j = r->jobs; j != NULL; j = j->next) {
        j->released = true;
        if (j->stage == STAGE_BACKOFF) {
            uv_timer_stop(&j->wait_timer);
            j->stage = STAGE_IDLE;
            job_run_step(j);
        }
    }
    uv_timer_start(&r->stop_timer, on_stop_grace_over, grace_ms, 0);
    runner_maybe_stopped(r);
}
