/*
 * postback.c -- the post-back deliverer of a ternd; see postback.h for the model.
 *
 * One claim is in flight at a time (a wake-up or a timer during a claim asks for one
 * more when it is answered), and at most `concurrency` deliveries are in flight. A
 * delivery lives from its claim until postback_done.lua has answered for it: the POST,
 * then the commit that records the attempt and schedules what follows. A commit that
 * cannot be sent (Redis unreachable) is dropped with a warning: the lease then expires
 * and another claim makes the attempt again, which is the at-least-once promise.
 *
 * Times: due times and leases are on the Redis server's clock (like every time tern
 * stores); the offset to this host's clock is learned from each claim's answer and
 * used to turn a due time heard on the wake channel into a local delay (the waker,
 * redis/redis_wake.h, which the schedule firer uses too).
 */
#include "run/postback.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/iso8601.h"
#include "base/log.h"
#include "base/metrics.h"
#include "redis/redis_wake.h"

#define DEFAULT_INITIAL_MS   1000u
#define DEFAULT_MAX_MS       300000u
#define DEFAULT_MAX_ATTEMPTS 10u
#define DEFAULT_TIMEOUT_MS   10000u
#define DEFAULT_CONCURRENCY  64u
#define LEASE_MARGIN_MS      30000u /* a lease outlives the POST's timeout by this much */
#define CLAIM_RETRY_MS       1000u  /* after a claim whose answer was lost */
#define MAX_RESPONSE_BYTES   (64u * 1024u)
#define WAKE_CHANNEL         "tern:postbacks:wake"

typedef struct delivery delivery_t;

struct delivery {
    postback_t *pb;
    delivery_t *prev, *next;
    char id[96]; /* "<job uuid>/<url index>" */
    char uuid[40];
    char fence[24];
    uint32_t attempt;
    char *url;
    http_request_t *http; /* the POST in flight, or NULL */
    bool permanent;       /* the attempt could not even start: retrying will not help */
    uint64_t started_mono;
};

struct postback {
    uv_loop_t *loop;
    store_t *store;
    http_client_t *http;
    postback_opts_t opts;
    char *id;
    redis_wake_t *wake; /* WAKE_CHANNEL and the timer of the next due time */
    bool up;
    bool claiming;
    bool claim_again;
    bool backlog; /* the last claim filled every free slot: more may be due */
    bool stopping;
    bool closing;
    delivery_t *list;
    size_t n_inflight;
    void (*on_stopped)(void *data);
    void *stopped_data;
};

static void claim(postback_t *pb);
static void maybe_stopped(postback_t *pb);

/* ---- pure parts ---------------------------------------------------------------- */

uint64_t postback_delay_ms(const postback_opts_t *o, uint32_t attempt)
{
    uint64_t d = o->initial_ms;
    for (uint32_t i = 1; i < attempt && d < o->max_ms; i++)
        d *= 2;
    return d < o->max_ms ? d : o->max_ms;
}

static json_t *json_text_or(const char *text, json_t *fallback /* stolen */)
{
    json_t *v = text != NULL && text[0] != '\0'
                    ? json_loadb(text, strlen(text), JSON_DECODE_ANY, NULL)
                    : NULL;
    if (v == NULL)
        return fallback;
    json_decref(fallback);
    return v;
}

json_t *postback_body(const char *uuid, const char *workflow, const char *execution,
                      const char *params_json, const char *error_json, uint64_t finished_at_ms)
{
    json_t *finished = json_null();
    if (finished_at_ms > 0) {
        char iso[32];
        iso8601_format(finished_at_ms, iso);
        json_decref(finished);
        finished = json_string(iso);
    }
    return json_pack("{s:s, s:s, s:s, s:o, s:o, s:o}", "uuid", uuid, "workflow", workflow,
                     "execution", execution, "params", json_text_or(params_json, json_object()),
                     "error", json_text_or(error_json, json_null()), "finished_at", finished);
}

/* ---- deliveries ---------------------------------------------------------------- */

static delivery_t *delivery_new(postback_t *pb, const char *id, const char *fence, uint32_t attempt)
{
    delivery_t *d = xcalloc(1, sizeof *d);
    d->pb = pb;
    snprintf(d->id, sizeof d->id, "%s", id);
    const char *slash = strrchr(d->id, '/');
    snprintf(d->uuid, sizeof d->uuid, "%.*s", slash ? (int)(slash - d->id) : 0, d->id);
    snprintf(d->fence, sizeof d->fence, "%s", fence);
    d->attempt = attempt;
    d->next = pb->list;
    if (pb->list != NULL)
        pb->list->prev = d;
    pb->list = d;
    pb->n_inflight++;
    return d;
}

static void delivery_free(delivery_t *d)
{
    postback_t *pb = d->pb;
    if (d->prev != NULL)
        d->prev->next = d->next;
    else
        pb->list = d->next;
    if (d->next != NULL)
        d->next->prev = d->prev;
    pb->n_inflight--;
    free(d->url);
    free(d);
    if (pb->stopping)
        maybe_stopped(pb);
    else if (pb->backlog)
        claim(pb);
}

static void on_done(void *data, int status, const redisReply *reply, const char *errmsg)
{
    delivery_t *d = data;
    if (status != 0)
        log_msg(TERN_LOG_WARN, "postback", NULL,
                "post-back %s attempt %u: outcome not recorded (%s); it will be attempted "
                "again when its lease expires",
                d->id, d->attempt, errmsg ? errmsg : "?");
    else if (store_reply_is(store_reply_at(reply, 0), "STALE"))
        log_msg(TERN_LOG_INFO, "postback", NULL,
                "post-back %s attempt %u: another claim holds it now", d->id, d->attempt);
    delivery_free(d);
}

/* Records the attempt (record may be NULL) and what follows; frees d when answered. */
static void commit(delivery_t *d, const char *outcome, const json_t *record, uint64_t delay_ms)
{
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, d->id);
    store_args_push(&a, d->fence);
    store_args_pushf(&a, "%u", d->attempt);
    store_args_push(&a, outcome);
    store_args_push_json(&a, record);
    store_args_push_u64(&a, delay_ms);
    int rc = store_eval(d->pb->store, SCRIPT_POSTBACK_DONE, &a, on_done, d);
    store_args_dispose(&a);
    if (rc != 0)
        on_done(d, rc, NULL, "Redis is not reachable");
}

static void log_attempt(const delivery_t *d, int level, const json_t *record, const char *what)
{
    if (!log_enabled(level))
        return;
    json_t *f = json_pack("{s:s, s:O}", "job", d->uuid, "post_back", record);
    log_msg(level, "postback", f, "post-back to %s %s (attempt %u)", d->url, what, d->attempt);
    json_decref(f);
}

static void on_answer(void *data, const tern_http_res *res)
{
    delivery_t *d = data;
    postback_t *pb = d->pb;
    d->http = NULL;
    char iso[32];
    iso8601_format(clock_wall_ms(), iso);
    /* A 2xx status is the receiver's word that it has the outcome, even if the rest of
     * its answer was cut short. */
    bool ok = res->status >= 200 && res->status < 300;
    json_t *rec = json_pack("{s:s, s:I, s:s, s:b, s:I}", "url", d->url, "attempt",
                            (json_int_t)d->attempt, "time", iso, "delivered", ok, "elapsed_ms",
                            (json_int_t)(clock_mono_ms() - d->started_mono));
    if (res->status > 0)
        json_object_set_new(rec, "status", json_integer(res->status));
    else
        json_object_set_new(rec, "error",
                            json_string(res->error != NULL ? res->error : "no answer"));
    const char *outcome;
    uint64_t delay = 0;
    if (ok) {
        outcome = "delivered";
        log_attempt(d, TERN_LOG_INFO, rec, "delivered");
    } else if (d->attempt >= pb->opts.max_attempts || d->permanent ||
               (res->error != NULL && strncmp(res->error, HTTP_CLIENT_NOT_ALLOWED,
                                              strlen(HTTP_CLIENT_NOT_ALLOWED)) == 0)) {
        /* A receiver outside postback_allow_networks stays outside: no retry. */
        outcome = "gave_up";
        json_object_set_new(rec, "gave_up", json_true());
        log_attempt(d, TERN_LOG_ERROR, rec, "failed for the last time; giving up");
    } else {
        outcome = "retry";
        delay = postback_delay_ms(&pb->opts, d->attempt);
        json_object_set_new(rec, "retry_in_ms", json_integer((json_int_t)delay));
        log_attempt(d, TERN_LOG_WARN, rec, "failed; retrying");
    }
    metrics_postback_observe(strcmp(outcome, "retry") == 0 ? "failed" : outcome);
    commit(d, outcome, rec, delay);
    json_decref(rec);
}

/* One claimed delivery: {id, fence, attempt, urls JSON, workflow, execution, params,
 * error, finished_at}. */
static void start_delivery(postback_t *pb, const redisReply *item)
{
    const redisReply *f[9];
    for (size_t i = 0; i < 9; i++) {
        f[i] = store_reply_at(item, i);
        if (f[i] == NULL)
            return;
    }
    char fence[24], *id = xstrndup(f[0]->str, f[0]->len);
    snprintf(fence, sizeof fence, "%lld", store_reply_int(f[1], 0));
    delivery_t *d = delivery_new(pb, id, fence, (uint32_t)store_reply_int(f[2], 1));
    free(id);
    if (pb->stopping) {
        commit(d, "release", NULL, 0);
        return;
    }
    const char *slash = strrchr(d->id, '/');
    size_t idx = slash != NULL ? (size_t)strtoul(slash + 1, NULL, 10) : 0;
    json_t *urls = json_loadb(f[3]->str, f[3]->len, 0, NULL);
    const char *url = json_string_value(json_array_get(urls, idx));
    d->url = xstrdup(url != NULL ? url : "");
    json_decref(urls);

    char *wf = xstrndup(f[4]->str, f[4]->len), *ex = xstrndup(f[5]->str, f[5]->len);
    char *params = xstrndup(f[6]->str, f[6]->len), *err = xstrndup(f[7]->str, f[7]->len);
    json_t *body = postback_body(d->uuid, wf, ex, params, err, (uint64_t)store_reply_int(f[8], 0));
    free(wf);
    free(ex);
    free(params);
    free(err);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);

    char h_job[64], h_delivery[128], h_attempt[48];
    snprintf(h_job, sizeof h_job, "X-Tern-Job: %s", d->uuid);
    /* The same on every attempt of one end of the job, another when a job retried from
     * failure ends again (its end time differs): receivers dedupe on it. */
    snprintf(h_delivery, sizeof h_delivery, "X-Tern-Delivery: %s/%lld", d->id,
             store_reply_int(f[8], 0));
    snprintf(h_attempt, sizeof h_attempt, "X-Tern-Attempt: %u", d->attempt);
    const char *headers[] = {"Content-Type: application/json", h_job, h_delivery, h_attempt, NULL};
    tern_http_req req = {
        .size = sizeof req,
        .method = "POST",
        .url = d->url,
        .headers = headers,
        .body = text,
        .body_len = text != NULL ? strlen(text) : 0,
        .timeout_ms = pb->opts.timeout_ms,
        .max_response_bytes = MAX_RESPONSE_BYTES,
    };
    char why[256] = "";
    d->started_mono = clock_mono_ms();
    d->http = url != NULL ? http_client_request_allowed(pb->http, &req, pb->opts.allow_networks,
                                                        on_answer, d, why, sizeof why)
                          : NULL;
    free(text);
    if (d->http == NULL) {
        /* Not startable (the URL was checked at creation, so this is rare): a fault of
         * the job, not of the receiver, so retrying would not help. */
        tern_http_res res = {.error = why[0] ? why : "no URL at this index"};
        d->permanent = true;
        on_answer(d, &res);
    }
}

/* ---- claims -------------------------------------------------------------------- */

static void on_claim(void *data, int status, const redisReply *reply, const char *errmsg)
{
    postback_t *pb = data;
    pb->claiming = false;
    if (status != 0) {
        if (status != TERN_ENOTCONN)
            log_msg(TERN_LOG_WARN, "postback", NULL, "claim failed: %s", errmsg ? errmsg : "?");
        if (pb->stopping)
            maybe_stopped(pb);
        else
            redis_wake_arm_at(pb->wake, redis_wake_server_now(pb->wake) + CLAIM_RETRY_MS);
        return;
    }
    long long now = store_reply_int(store_reply_at(reply, 0), 0);
    long long next = store_reply_int(store_reply_at(reply, 1), -1);
    const redisReply *items = store_reply_at(reply, 2);
    redis_wake_clock(pb->wake, now);
    size_t wanted =
        pb->opts.concurrency > pb->n_inflight ? pb->opts.concurrency - pb->n_inflight : 0;
    size_t n = items != NULL ? items->elements : 0;
    pb->backlog = wanted > 0 && n >= wanted;
    for (size_t i = 0; i < n; i++)
        start_delivery(pb, items->element[i]);
    if (pb->stopping) {
        maybe_stopped(pb);
        return;
    }
    if (next >= 0)
        redis_wake_arm_at(pb->wake, next);
    if (pb->claim_again)
        claim(pb);
}

static void claim(postback_t *pb)
{
    if (!pb->up || pb->stopping)
        return;
    if (pb->claiming) {
        pb->claim_again = true;
        return;
    }
    pb->claim_again = false;
    size_t wanted =
        pb->opts.concurrency > pb->n_inflight ? pb->opts.concurrency - pb->n_inflight : 0;
    store_args_t a;
    store_args_init(&a);
    /* With no free slot the claim still expires dead leases and reports the next due
     * time, so the timer stays armed. */
    store_args_push_u64(&a, wanted);
    store_args_push_u64(&a, (uint64_t)pb->opts.timeout_ms + LEASE_MARGIN_MS);
    pb->claiming = store_eval(pb->store, SCRIPT_POSTBACK_CLAIM, &a, on_claim, pb) == 0;
    store_args_dispose(&a);
}

/* The timer of the next due time fired, or the wake channel's subscription came up. */
static void on_wake(void *data)
{
    claim(data);
}

/* ---- lifetime ------------------------------------------------------------------ */

postback_t *postback_new(uv_loop_t *loop, store_t *store, http_client_t *http,
                         const postback_opts_t *opts)
{
    postback_t *pb = xcalloc(1, sizeof *pb);
    pb->loop = loop;
    pb->store = store;
    pb->http = http;
    pb->opts = *opts;
    pb->id = xstrdup(opts->id != NULL ? opts->id : "ternd");
    pb->opts.id = pb->id;
    if (pb->opts.initial_ms == 0)
        pb->opts.initial_ms = DEFAULT_INITIAL_MS;
    if (pb->opts.max_ms == 0)
        pb->opts.max_ms = DEFAULT_MAX_MS;
    if (pb->opts.max_ms < pb->opts.initial_ms)
        pb->opts.max_ms = pb->opts.initial_ms;
    if (pb->opts.max_attempts == 0)
        pb->opts.max_attempts = DEFAULT_MAX_ATTEMPTS;
    if (pb->opts.timeout_ms == 0)
        pb->opts.timeout_ms = DEFAULT_TIMEOUT_MS;
    if (pb->opts.concurrency == 0)
        pb->opts.concurrency = DEFAULT_CONCURRENCY;
    char name[200];
    snprintf(name, sizeof name, "%s-postbacks", pb->id);
    redis_wake_opts_t wo = {.addr = store_addr(store),
                            .name = name,
                            .channel = WAKE_CHANNEL,
                            .on_wake = on_wake,
                            .data = pb};
    pb->wake = redis_wake_new(loop, &wo);
    return pb;
}

void postback_store_state(postback_t *pb, bool up)
{
    if (pb->up == up)
        return;
    pb->up = up;
    if (up)
        claim(pb);
}

static void on_wake_freed(void *self)
{
    postback_t *pb = self;
    void (*cb)(void *) = pb->on_stopped;
    void *data = pb->stopped_data;
    free(pb->id);
    free(pb);
    if (cb != NULL)
        cb(data);
}

static void maybe_stopped(postback_t *pb)
{
    if (!pb->stopping || pb->claiming || pb->list != NULL || pb->closing)
        return;
    pb->closing = true;
    redis_wake_free(pb->wake, on_wake_freed, pb);
}

void postback_stop(postback_t *pb, void (*on_stopped)(void *data), void *data)
{
    if (pb->stopping)
        return;
    pb->stopping = true;
    pb->on_stopped = on_stopped;
    pb->stopped_data = data;
    redis_wake_stop(pb->wake);
    /* POSTs in flight are abandoned; their deliveries go back, due at once, so another
     * ternd makes the attempt without waiting for the lease to run out. Deliveries
     * whose commit is already in flight finish as they are. */
    delivery_t *d = pb->list;
    while (d != NULL) {
        delivery_t *next = d->next;
        if (d->http != NULL) {
            http_request_cancel(d->http);
            d->http = NULL;
            commit(d, "release", NULL, 0);
        }
        d = next;
    }
    maybe_stopped(pb);
}
