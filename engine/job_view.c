/*
 * job_view.c -- renders a stored job (job_get.lua's reply) as JSON; see job_view.h.
 * Stored fields are strings; numbers and JSON documents are decoded here, and a field
 * that does not decode is shown as the string it is rather than dropped.
 */
#include "job_view.h"

#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "job_fields.h"
#include "store.h"

const char *const job_executions[] = {"queued",  "failed",  "succeeded", "canceled",
                                      "running", "retried", "waiting",   NULL};

bool job_execution_valid(const char *s)
{
    for (size_t i = 0; s != NULL && job_executions[i] != NULL; i++)
        if (strcmp(s, job_executions[i]) == 0)
            return true;
    return false;
}

static json_t *field_json(const job_fields_t *fields, const char *name)
{
    size_t len = 0;
    const char *s = job_fields_get(fields, name, &len);
    if (s == NULL || len == 0)
        return json_null();
    json_t *v = json_loadb(s, len, JSON_DECODE_ANY, NULL);
    return v != NULL ? v : json_stringn(s, len);
}

static json_t *field_str(const job_fields_t *fields, const char *name)
{
    size_t len = 0;
    const char *s = job_fields_get(fields, name, &len);
    return s != NULL && len > 0 ? json_stringn(s, len) : json_null();
}

static long long field_ll(const job_fields_t *fields, const char *name, long long def)
{
    const char *s = job_fields_get(fields, name, NULL);
    return s != NULL ? atoll(s) : def;
}

static json_t *field_time(const job_fields_t *fields, const char *name)
{
    long long ms = field_ll(fields, name, 0);
    if (ms <= 0)
        return json_null();
    char iso[32];
    tern_iso_time((uint64_t)ms, iso);
    return json_string(iso);
}

static json_t *json_list(const redisReply *list)
{
    json_t *a = json_array();
    for (size_t i = 0; list != NULL && i < list->elements; i++) {
        const redisReply *e = list->element[i];
        json_t *v = json_loadb(e->str, e->len, JSON_DECODE_ANY, NULL);
        json_array_append_new(a, v != NULL ? v : json_stringn(e->str, e->len));
    }
    return a;
}

/* A stored time: ms since the epoch (stored that way since entries were made compact),
 * shown as ISO text; older entries hold the text already. */
static json_t *time_view(const json_t *t)
{
    if (!json_is_integer(t))
        return t != NULL ? json_incref((json_t *)t) : json_null();
    char iso[32];
    tern_iso_time((uint64_t)json_integer_value(t), iso);
    return json_string(iso);
}

/* The result entries of one phase in node-workflow's shape: {name, task, result,
 * error, attempts, started_at, finished_at, ...}. Entries are stored without what the
 * workflow (`steps`, the phase's array) or a default says: the task of the step of
 * that name, a null error, one attempt. */
static json_t *results_view(const redisReply *list, const json_t *steps)
{
    json_t *a = json_array();
    for (size_t i = 0; list != NULL && i < list->elements; i++) {
        const redisReply *e = list->element[i];
        json_t *stored = json_loadb(e->str, e->len, 0, NULL);
        if (!json_is_object(stored)) {
            json_decref(stored);
            json_array_append_new(a, json_stringn(e->str, e->len));
            continue;
        }
        json_t *name = json_object_get(stored, "name");
        json_t *task = json_object_get(stored, "task");
        size_t k;
        json_t *step;
        json_array_foreach(steps, k, step)
        {
            if (task != NULL)
                break;
            if (json_equal(json_object_get(step, "name"), name))
                task = json_object_get(step, "task");
        }
        json_t *v = json_object();
        json_object_set(v, "name", name != NULL ? name : json_null());
        json_object_set(v, "task", task != NULL ? task : json_null());
        json_t *result = json_object_get(stored, "result"),
               *error = json_object_get(stored, "error");
        json_object_set(v, "result", result != NULL ? result : json_null());
        json_object_set(v, "error", error != NULL ? error : json_null());
        json_object_set_new(v, "started_at", time_view(json_object_get(stored, "started_at")));
        /* Entries store the duration ("ms"); older ones the end itself. */
        json_t *started = json_object_get(stored, "started_at"),
               *ms = json_object_get(stored, "ms");
        json_t *end = json_is_integer(started) && json_is_integer(ms)
                          ? json_integer(json_integer_value(started) + json_integer_value(ms))
                          : json_incref(json_object_get(stored, "finished_at"));
        json_object_set_new(v, "finished_at", time_view(end));
        json_decref(end);
        json_object_del(stored, "ms");
        json_t *attempts = json_object_get(stored, "attempts");
        json_object_set_new(v, "attempts",
                            attempts != NULL ? json_incref(attempts) : json_integer(1));
        /* attempts, and step_error/fallback after a fallback ran. */
        json_object_update_missing(v, stored);
        json_array_append_new(a, v);
        json_decref(stored);
    }
    return a;
}

/* The lists of a job beside its fields (results of each phase, state, history,
 * post-back attempts: store replies, NULL when empty) and the server's time. */
typedef struct job_lists {
    const redisReply *results[3], *state, *history, *postbacks;
    long long now;
} job_lists_t;

/* The view of a job: its fields `f`, its lists `l`, and its workflow document `wf`
 * (borrowed; NULL: none). */
static json_t *view_build(const job_fields_t *f, const job_lists_t *l, const json_t *wf)
{
    json_t *state = json_object();
    const redisReply *st = l->state;
    for (size_t i = 0; st != NULL && i + 1 < st->elements; i += 2) {
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)st->element[i]->len, st->element[i]->str);
        const redisReply *v = st->element[i + 1];
        json_t *val = json_loadb(v->str, v->len, JSON_DECODE_ANY, NULL);
        json_object_set_new(state, key, val != NULL ? val : json_stringn(v->str, v->len));
    }
    long long started = field_ll(f, "started_at", 0);
    long long finished = field_ll(f, "finished_at", 0);
    long long now = l->now;
    json_t *elapsed = json_null();
    if (started > 0)
        elapsed = json_real((double)((finished > 0 ? finished : now) - started) / 1000.0);
    long long phase = field_ll(f, "phase", 0), idx = field_ll(f, "idx", 0);
    static const char *const phases[] = {"chain", "onerror", "oncancel"};
    json_t *step_name = json_null();
    json_t *chain = json_object_get(wf, phases[phase >= 0 && phase < 3 ? phase : 0]);
    json_t *step = json_array_get(chain, (size_t)idx);
    if (step != NULL)
        step_name = json_incref(json_object_get(step, "name"));
    long long timeout_ms = field_ll(f, "timeout_ms", 0);

    json_t *v = json_object();
    json_object_set_new(v, "uuid", field_str(f, "uuid"));
    json_object_set_new(v, "name", field_str(f, "name"));
    json_object_set_new(v, "version", field_str(f, "version"));
    json_object_set_new(v, "workflow_uuid", field_str(f, "workflow_uuid"));
    json_object_set_new(v, "execution", field_str(f, "execution"));
    json_object_set_new(v, "target", field_str(f, "target"));
    json_object_set_new(v, "params", field_json(f, "params"));
    json_object_set_new(v, "queue", field_str(f, "queue"));
    static const char *const chains[] = {"chain", "onerror", "oncancel"};
    for (size_t i = 0; i < 3; i++) {
        json_t *c = json_object_get(wf, chains[i]);
        json_object_set_new(v, chains[i], c != NULL ? json_incref(c) : json_array());
    }
    json_object_set_new(v, "chain_results",
                        results_view(l->results[0], json_object_get(wf, "chain")));
    json_object_set_new(v, "onerror_results",
                        results_view(l->results[1], json_object_get(wf, "onerror")));
    json_object_set_new(v, "oncancel_results",
                        results_view(l->results[2], json_object_get(wf, "oncancel")));
    json_object_set_new(v, "created_at", field_time(f, "created_at"));
    json_object_set_new(v, "exec_after", field_time(f, "exec_after"));
    json_object_set_new(v, "started", started > 0 ? json_integer(started) : json_null());
    json_object_set_new(v, "finished_at", field_time(f, "finished_at"));
    json_object_set_new(v, "elapsed", elapsed);
    json_object_set_new(v, "timeout",
                        timeout_ms > 0 ? json_integer(timeout_ms / 1000) : json_null());
    json_object_set_new(v, "runner_id", field_str(f, "runner"));
    json_object_set_new(v, "state", state);
    json_object_set_new(v, "error", field_json(f, "error"));
    json_object_set_new(v, "history", json_list(l->history));
    json_object_set_new(v, "retried", json_integer(field_ll(f, "retried", 0)));
    json_object_set_new(v, "cursor",
                        json_pack("{s:s, s:I, s:o, s:I}", "phase",
                                  phases[phase >= 0 && phase < 3 ? phase : 0], "index",
                                  (json_int_t)idx, "step", step_name, "attempt",
                                  (json_int_t)field_ll(f, "attempt", 0)));
    json_object_set_new(v, "blocked_on", field_str(f, "blocked_on"));
    json_object_set_new(v, "wait_info", field_json(f, "wait_info"));
    json_object_set_new(v, "cancel_requested", json_boolean(field_ll(f, "cancel", 0) == 1));
    json_object_set_new(v, "post_back_urls", field_json(f, "post_back_urls"));
    /* Every delivery attempt of the job's outcome, so a failing receiver is visible. */
    json_object_set_new(v, "post_backs", json_list(l->postbacks));
    return v;
}

json_t *job_view_from_reply(const redisReply *reply)
{
    const redisReply *fr = store_reply_at(reply, 0);
    if (fr == NULL || fr->elements == 0)
        return NULL;
    job_fields_t f = {.reply = fr};
    /* The frozen workflow: shared (element 8), or in the fields of older jobs. */
    json_t *wf = field_json(&f, "workflow");
    const redisReply *doc = store_reply_at(reply, 8);
    if (json_is_null(wf) && doc != NULL && doc->type == REDIS_REPLY_STRING) {
        json_decref(wf);
        wf = json_loadb(doc->str, doc->len, 0, NULL);
    }
    job_lists_t l = {
        .results = {store_reply_at(reply, 1), store_reply_at(reply, 2), store_reply_at(reply, 3)},
        .state = store_reply_at(reply, 4),
        .history = store_reply_at(reply, 5),
        .now = store_reply_int(store_reply_at(reply, 6), 0),
        .postbacks = store_reply_at(reply, 7)};
    json_t *v = view_build(&f, &l, wf);
    json_decref(wf);
    return v;
}

json_t *job_view_new(const store_args_t *fields, long long now, const json_t *wf)
{
    job_fields_t f = {.args = fields};
    job_lists_t l = {.now = now};
    return view_build(&f, &l, wf);
}
