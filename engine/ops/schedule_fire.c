/*
 * schedule_fire.c -- the firer of recurring schedules; see schedule_fire.h.
 *
 * One claim is in flight at a time (a wake-up or the timer during a claim asks for one
 * more when it is answered). A tick lives from its claim until schedule_advance.lua
 * has answered for it, or until its create failed in a way that may be temporary
 * (Redis unreachable, an answer lost): then it is dropped and its lease brings it back.
 */
#include "ops/schedule_fire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/iso8601.h"
#include "base/log.h"
#include "model/schedule.h"
#include "redis/redis_wake.h"

#define WAKE_CHANNEL   "tern:sched:wake"
#define CLAIM_MAX      16
#define CLAIM_RETRY_MS 1000u
#define NEVER_AGAIN_MS (100ll * 365 * 86400 * 1000) /* a schedule with no next tick */

struct schedule_fire {
    uv_loop_t *loop;
    job_ops_t *ops;
    store_t *store;
    char *id;
    redis_wake_t *wake; /* WAKE_CHANNEL and the timer of the earliest due tick */
    bool up;
    bool claiming;
    bool claim_again;
    bool stopping;
    bool closing;
    size_t n_inflight;
    void (*on_stopped)(void *data);
    void *stopped_data;
};

typedef struct tick {
    schedule_fire_t *f;
    char uuid[40];
    int64_t tick_ms;
    int64_t anchor_ms;
    bool busy;
    bool spec_ok;
    schedule_spec_t spec;
    char job[37];
} tick_t;

static void claim(schedule_fire_t *f);
static void maybe_stopped(schedule_fire_t *f);

/* ---- ticks ------------------------------------------------------------------------- */

static void tick_free(tick_t *t)
{
    schedule_fire_t *f = t->f;
    if (t->spec_ok)
        schedule_spec_dispose(&t->spec);
    free(t);
    f->n_inflight--;
    if (f->stopping)
        maybe_stopped(f);
}

static void on_advanced(void *data, int status, const redisReply *reply, const char *errmsg)
{
    tick_t *t = data;
    if (status != 0)
        log_msg(TERN_LOG_WARN, "schedule", NULL,
                "schedule %s tick %lld: outcome not recorded (%s); the tick is fired again "
                "when its lease expires (its job is not made twice)",
                t->uuid, (long long)t->tick_ms, errmsg ? errmsg : "?");
    else if (!store_reply_is(reply, "OK"))
        log_msg(TERN_LOG_INFO, "schedule", NULL, "schedule %s tick %lld: %.*s", t->uuid,
                (long long)t->tick_ms, reply != NULL ? (int)reply->len : 0,
                reply != NULL && reply->str != NULL ? reply->str : "");
    tick_free(t);
}

/* Records the tick's outcome and moves the schedule on to its next tick after the
 * later of now (server clock) and the tick. */
static void advance(tick_t *t, const char *outcome, const char *job, const char *error)
{
    schedule_fire_t *f = t->f;
    int64_t now = (int64_t)redis_wake_server_now(f->wake);
    int64_t after = now > t->tick_ms ? now : t->tick_ms, next;
    if (!t->spec_ok || schedule_next(&t->spec, t->anchor_ms, after, &next) != 0)
        next = t->tick_ms + NEVER_AGAIN_MS;
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, t->uuid);
    store_args_pushf(&a, "%lld", (long long)t->tick_ms);
    store_args_push(&a, outcome);
    store_args_push(&a, job != NULL ? job : "");
    store_args_pushf(&a, "%lld", (long long)next);
    store_args_push(&a, error != NULL ? error : "");
    int rc = store_eval(f->store, SCRIPT_SCHEDULE_ADVANCE, &a, on_advanced, t);
    store_args_dispose(&a);
    if (rc != 0)
        on_advanced(t, rc, NULL, "Redis is not reachable");
}

static void on_job_created(void *data, int status, const json_t *result, const char *message)
{
    (void)result;
    tick_t *t = data;
    if (status == 0 ||
        (status == TERN_EEXIST && message != NULL && strncmp(message, "uuid:", 5) == 0)) {
        /* Made now, or by a claimant of this tick before us (its uuid is the tick's). */
        advance(t, "fired", t->job, NULL);
        return;
    }
    if (status == TERN_ENOTCONN || status == TERN_EIO || status == TERN_EUNKNOWN ||
        status == TERN_EAGAIN) {
        log_msg(TERN_LOG_WARN, "schedule", NULL,
                "schedule %s tick %lld: job %s not created yet (%s); trying again when the "
                "lease expires",
                t->uuid, (long long)t->tick_ms, t->job, message ? message : "?");
        tick_free(t);
        return;
    }
    log_msg(TERN_LOG_WARN, "schedule", NULL, "schedule %s tick %lld: no job: %s", t->uuid,
            (long long)t->tick_ms, message ? message : "?");
    advance(t, "failed", NULL, message != NULL ? message : "the job was not created");
}

static void fire(tick_t *t)
{
    if (!t->spec_ok) {
        advance(t, "failed", NULL, "the stored definition does not parse");
        return;
    }
    if (t->busy && t->spec.overlap == SCHEDULE_OVERLAP_SKIP) {
        advance(t, "skipped", NULL, NULL);
        return;
    }
    schedule_job_uuid(t->uuid, t->tick_ms, t->job);
    char iso[32], hold[64];
    iso8601_format((uint64_t)t->tick_ms, iso);
    snprintf(hold, sizeof hold, "schedule:%s", t->uuid);
    json_t *params = json_deep_copy(t->spec.params);
    json_object_set_new(params, "schedule_uuid", json_string(t->uuid));
    json_object_set_new(params, "scheduled_for", json_string(iso));
    job_create_req_t req = {
        .workflow = t->spec.workflow,
        .params = params,
        .target = t->spec.target,
        .uuid = t->job,
        .extra_hold = t->spec.overlap == SCHEDULE_OVERLAP_QUEUE ? hold : NULL,
    };
    job_ops_create(t->f->ops, &req, on_job_created, t);
    json_decref(params);
}

/* One claimed schedule: {uuid, tick, definition, anchor, busy}. */
static void start_tick(schedule_fire_t *f, const redisReply *item)
{
    const redisReply *r[5];
    for (size_t i = 0; i < 5; i++) {
        r[i] = store_reply_at(item, i);
        if (r[i] == NULL)
            return;
    }
    if (r[0]->type != REDIS_REPLY_STRING || r[2]->type != REDIS_REPLY_STRING)
        return;
    tick_t *t = xcalloc(1, sizeof *t);
    t->f = f;
    f->n_inflight++;
    snprintf(t->uuid, sizeof t->uuid, "%.*s", (int)r[0]->len, r[0]->str);
    t->tick_ms = store_reply_int(r[1], 0);
    t->anchor_ms = store_reply_int(r[3], t->tick_ms);
    t->busy = store_reply_int(r[4], 0) == 1;
    char err[512];
    t->spec_ok = schedule_spec_parse_text(r[2]->str, r[2]->len, &t->spec, err, sizeof err) == 0;
    if (!t->spec_ok)
        log_msg(TERN_LOG_ERROR, "schedule", NULL, "schedule %s: %s", t->uuid, err);
    fire(t);
}

/* ---- claims ------------------------------------------------------------------------- */

static void on_claim(void *data, int status, const redisReply *reply, const char *errmsg)
{
    schedule_fire_t *f = data;
    f->claiming = false;
    if (status != 0) {
        if (status != TERN_ENOTCONN)
            log_msg(TERN_LOG_WARN, "schedule", NULL, "claim failed: %s", errmsg ? errmsg : "?");
        if (f->stopping)
            maybe_stopped(f);
        else
            redis_wake_arm_at(f->wake, redis_wake_server_now(f->wake) + CLAIM_RETRY_MS);
        return;
    }
    long long now = store_reply_int(store_reply_at(reply, 0), 0);
    long long next = store_reply_int(store_reply_at(reply, 1), -1);
    const redisReply *items = store_reply_at(reply, 2);
    redis_wake_clock(f->wake, now);
    size_t n = items != NULL ? items->elements : 0;
    if (f->stopping) {
        /* Claimed while stopping: their leases bring them back to another firer. */
        maybe_stopped(f);
        return;
    }
    for (size_t i = 0; i < n; i++)
        start_tick(f, items->element[i]);
    if (n == CLAIM_MAX)
        f->claim_again = true;
    if (next >= 0)
        redis_wake_arm_at(f->wake, next);
    if (f->claim_again)
        claim(f);
}

static void claim(schedule_fire_t *f)
{
    if (!f->up || f->stopping)
        return;
    if (f->claiming) {
        f->claim_again = true;
        return;
    }
    f->claim_again = false;
    store_args_t a;
    store_args_init(&a);
    store_args_push_u64(&a, SCHEDULE_LEASE_MS);
    store_args_push_u64(&a, CLAIM_MAX);
    f->claiming = store_eval(f->store, SCRIPT_SCHEDULE_CLAIM, &a, on_claim, f) == 0;
    store_args_dispose(&a);
}

/* The timer of the earliest due tick fired, or the wake channel's subscription came
 * up. */
static void on_wake(void *data)
{
    claim(data);
}

/* ---- lifetime ------------------------------------------------------------------------ */

schedule_fire_t *schedule_fire_new(uv_loop_t *loop, job_ops_t *ops, store_t *store, const char *id)
{
    schedule_fire_t *f = xcalloc(1, sizeof *f);
    f->loop = loop;
    f->ops = ops;
    f->store = store;
    f->id = xstrdup(id != NULL ? id : "ternd");
    char name[200];
    snprintf(name, sizeof name, "%s-schedules", f->id);
    redis_wake_opts_t wo = {.addr = store_addr(store),
                            .name = name,
                            .channel = WAKE_CHANNEL,
                            .on_wake = on_wake,
                            .data = f};
    f->wake = redis_wake_new(loop, &wo);
    return f;
}

void schedule_fire_store_state(schedule_fire_t *f, bool up)
{
    if (f->up == up)
        return;
    f->up = up;
    if (up)
        claim(f);
}

static void on_wake_freed(void *self)
{
    schedule_fire_t *f = self;
    void (*cb)(void *) = f->on_stopped;
    void *data = f->stopped_data;
    free(f->id);
    free(f);
    if (cb != NULL)
        cb(data);
}

static void maybe_stopped(schedule_fire_t *f)
{
    if (!f->stopping || f->claiming || f->n_inflight > 0 || f->closing)
        return;
    f->closing = true;
    redis_wake_free(f->wake, on_wake_freed, f);
}

void schedule_fire_stop(schedule_fire_t *f, void (*on_stopped)(void *data), void *data)
{
    if (f->stopping)
        return;
    f->stopping = true;
    f->on_stopped = on_stopped;
    f->stopped_data = data;
    redis_wake_stop(f->wake);
    maybe_stopped(f);
}
