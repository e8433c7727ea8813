/*
 * job_view.c -- renders a stored job (job_get.lua's reply) as JSON; see job_view.h.
 * Stored fields are strings; numbers and JSON documents are decoded here, and a field
 * that does not decode is shown as the string it is rather than dropped.
 *
 * Two renderers read one table of the view's members (view_members): a stored job's
 * view is a jansson tree, because its readers pick members out of it (a retry, the
 * job list, the API's GET encodes it), while a job just created is written straight
 * to text, because POST /jobs only sends it and building and encoding a tree was a
 * third of ternd's CPU per create. test_api checks that the two give the same bytes.
 */
#include "store/job_view.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/iso8601.h"
#include "base/json_text.h"
#include "model/workflow.h"
#include "store/job_fields.h"
#include "store/store.h"

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
    iso8601_format((uint64_t)ms, iso);
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

/* A time of a result entry: ms since the epoch, shown as ISO text; null when not an
 * integer. */
static json_t *time_view(const json_t *t)
{
    if (!json_is_integer(t))
        return json_null();
    char iso[32];
    iso8601_format((uint64_t)json_integer_value(t), iso);
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
        json_t *task = NULL;
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
        /* Entries store the duration ("ms"), not the end. */
        json_t *started = json_object_get(stored, "started_at"),
               *ms = json_object_get(stored, "ms");
        json_t *end = json_is_integer(started) && json_is_integer(ms)
                          ? json_integer(json_integer_value(started) + json_integer_value(ms))
                          : NULL;
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

static const char *const phases[] = {"chain", "onerror", "oncancel"};

/* The members of the view, in the order shown, and where each comes from. Both ways
 * of showing a job read this one table: the tree of a stored job (view_build) and the
 * text of a job just created (job_view_new_text), so the two cannot list different
 * members or order them differently. */
typedef enum member_kind {
    M_STR,        /* the field as a string; null when missing or empty */
    M_QUEUE,      /* the field as a string; "default" when missing (job_create.lua stores
                   * no queue for the default one) */
    M_STEP_QUEUE, /* the field as a string while the job is unfinished, else null (a
                   * finished job's field names the queue of its last step queue) */
    M_JSON,       /* the field's JSON document; null when missing or empty */
    M_TIME,       /* the field, ms since the epoch, as ISO text; null when not positive */
    M_STEPS,      /* the workflow's steps of phase `which` ([] when none) */
    M_WF_STR,     /* the workflow's string member of the same name, or null */
    M_RESULTS,    /* the result entries of phase `which` */
    M_STARTED,    /* started_at in ms, or null */
    M_ELAPSED,    /* seconds from started_at to finished_at or now, or null */
    M_TIMEOUT,    /* timeout_ms in whole seconds, or null */
    M_STATE,      /* the job's state object */
    M_HISTORY,    /* its history entries */
    M_RETRIED,    /* the field as an integer, 0 when missing */
    M_CURSOR,     /* {phase, index, step, attempt} */
    M_CANCEL,     /* the field is "1" */
    M_POSTBACKS   /* the delivery attempts of the outcome, so a failing receiver is visible */
} member_kind_t;

typedef struct view_member {
    const char *name; /* in the view */
    member_kind_t kind;
    const char *field; /* the stored field it is made from, if one */
    int which;         /* phase of M_STEPS and M_RESULTS */
} view_member_t;

static const view_member_t view_members[] = {
    {"uuid", M_STR, "uuid", 0},
    {"name", M_STR, "name", 0},
    {"version", M_STR, "version", 0},
    {"workflow_uuid", M_STR, "workflow_uuid", 0},
    {"execution", M_STR, "execution", 0},
    {"target", M_STR, "target", 0},
    {"params", M_JSON, "params", 0},
    {"queue", M_QUEUE, "queue", 0},
    {"step_queue", M_STEP_QUEUE, "step_queue", 0},
    {"chain", M_STEPS, NULL, 0},
    {"onerror", M_STEPS, NULL, 1},
    {"oncancel", M_STEPS, NULL, 2},
    {"retry_from", M_WF_STR, NULL, 0},
    {"chain_results", M_RESULTS, NULL, 0},
    {"onerror_results", M_RESULTS, NULL, 1},
    {"oncancel_results", M_RESULTS, NULL, 2},
    {"created_at", M_TIME, "created_at", 0},
    {"exec_after", M_TIME, "exec_after", 0},
    {"started", M_STARTED, "started_at", 0},
    {"finished_at", M_TIME, "finished_at", 0},
    {"elapsed", M_ELAPSED, NULL, 0},
    {"timeout", M_TIMEOUT, "timeout_ms", 0},
    {"runner_id", M_STR, "runner", 0},
    {"state", M_STATE, NULL, 0},
    {"error", M_JSON, "error", 0},
    {"history", M_HISTORY, NULL, 0},
    {"retried", M_RETRIED, "retried", 0},
    {"cursor", M_CURSOR, NULL, 0},
    {"blocked_on", M_STR, "blocked_on", 0},
    {"wait_info", M_JSON, "wait_info", 0},
    {"cancel_requested", M_CANCEL, "cancel", 0},
    {"post_back_urls", M_JSON, "post_back_urls", 0},
    {"post_backs", M_POSTBACKS, NULL, 0},
    {"admission", M_JSON, "admission", 0},
};

/* The cursor's phase (0 chain, 1 onerror, 2 oncancel; anything else shows as chain). */
static long long cursor_phase(const job_fields_t *f)
{
    long long phase = field_ll(f, "phase", 0);
    return phase >= 0 && phase < 3 ? phase : 0;
}

/* The name of the step the cursor is at in workflow document `wf` (borrowed, may be
 * NULL), or NULL past the end of its phase. */
static const json_t *cursor_step_name(const job_fields_t *f, const json_t *wf)
{
    json_t *chain = json_object_get(wf, phases[cursor_phase(f)]);
    return json_object_get(json_array_get(chain, (size_t)field_ll(f, "idx", 0)), "name");
}

/* The steps of phase `phase` of workflow document `wf` (borrowed): a new reference. */
static json_t *phase_steps(const json_t *wf, int phase)
{
    json_t *c = json_object_get(wf, phases[phase]);
    return c != NULL ? json_incref(c) : json_array();
}

/* A member of the view of a stored job as a tree (new reference). */
static json_t *member_tree(const view_member_t *m, const job_fields_t *f, const job_lists_t *l,
                           const json_t *wf)
{
    switch (m->kind) {
    case M_STR:
        return field_str(f, m->field);
    case M_QUEUE:
        return job_fields_get(f, m->field, NULL) != NULL ? field_str(f, m->field)
                                                         : json_string(TERN_DEFAULT_QUEUE);
    case M_STEP_QUEUE: {
        const char *ex = job_fields_get(f, "execution", NULL);
        bool unfinished = ex != NULL && (strcmp(ex, "queued") == 0 || strcmp(ex, "running") == 0 ||
                                         strcmp(ex, "waiting") == 0 || strcmp(ex, "retried") == 0);
        return unfinished ? field_str(f, m->field) : json_null();
    }
    case M_JSON:
        return field_json(f, m->field);
    case M_TIME:
        return field_time(f, m->field);
    case M_STEPS:
        return phase_steps(wf, m->which);
    case M_WF_STR: {
        const json_t *v = json_object_get(wf, m->name);
        return json_is_string(v) ? json_incref((json_t *)v) : json_null();
    }
    case M_RESULTS:
        return results_view(l->results[m->which], json_object_get(wf, phases[m->which]));
    case M_STARTED: {
        long long started = field_ll(f, m->field, 0);
        return started > 0 ? json_integer(started) : json_null();
    }
    case M_ELAPSED: {
        long long started = field_ll(f, "started_at", 0);
        long long finished = field_ll(f, "finished_at", 0);
        if (started <= 0)
            return json_null();
        return json_real((double)((finished > 0 ? finished : l->now) - started) / 1000.0);
    }
    case M_TIMEOUT: {
        long long timeout_ms = field_ll(f, m->field, 0);
        return timeout_ms > 0 ? json_integer(timeout_ms / 1000) : json_null();
    }
    case M_STATE: {
        json_t *state = json_object();
        const redisReply *st = l->state;
        for (size_t i = 0; st != NULL && i + 1 < st->elements; i += 2) {
            char key[256];
            snprintf(key, sizeof key, "%.*s", (int)st->element[i]->len, st->element[i]->str);
            const redisReply *v = st->element[i + 1];
            json_t *val = json_loadb(v->str, v->len, JSON_DECODE_ANY, NULL);
            json_object_set_new(state, key, val != NULL ? val : json_stringn(v->str, v->len));
        }
        return state;
    }
    case M_HISTORY:
        return json_list(l->history);
    case M_RETRIED:
        return json_integer(field_ll(f, m->field, 0));
    case M_CURSOR: {
        const json_t *step = cursor_step_name(f, wf);
        return json_pack("{s:s, s:I, s:O, s:I}", "phase", phases[cursor_phase(f)], "index",
                         (json_int_t)field_ll(f, "idx", 0), "step",
                         step != NULL ? step : json_null(), "attempt",
                         (json_int_t)field_ll(f, "attempt", 0));
    }
    case M_CANCEL:
        return json_boolean(field_ll(f, m->field, 0) == 1);
    case M_POSTBACKS:
        return json_list(l->postbacks);
    }
    return json_null();
}

/* The view of a job: its fields `f`, its lists `l`, and its workflow document `wf`
 * (borrowed; NULL: none). */
static json_t *view_build(const job_fields_t *f, const job_lists_t *l, const json_t *wf)
{
    json_t *v = json_object();
    for (size_t i = 0; i < TERN_ARRAY_SIZE(view_members); i++)
        json_object_set_new(v, view_members[i].name, member_tree(&view_members[i], f, l, wf));
    return v;
}

json_t *job_view_from_reply(const redisReply *reply)
{
    const redisReply *fr = store_reply_at(reply, 0);
    if (fr == NULL || fr->elements == 0)
        return NULL;
    job_fields_t f = {.reply = fr};
    /* The frozen workflow its version's jobs share (element 8; false when missing). */
    const redisReply *doc = store_reply_at(reply, 8);
    json_t *wf = doc != NULL && doc->type == REDIS_REPLY_STRING
                     ? json_loadb(doc->str, doc->len, 0, NULL)
                     : NULL;
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

/* ---- a job just created, as text ---------------------------------------------- */

struct job_view_wf {
    json_t *doc;    /* a reference: the names of steps, for the cursor */
    char *steps[3]; /* each phase's steps as compact JSON ("[]" when none; malloc'd) */
    size_t steps_len[3];
};

job_view_wf_t *job_view_wf_new(const json_t *wf)
{
    job_view_wf_t *w = xcalloc(1, sizeof *w);
    w->doc = json_incref((json_t *)wf);
    for (size_t i = 0; i < 3; i++) {
        json_t *steps = phase_steps(wf, (int)i);
        w->steps[i] = json_dumps(steps, JSON_COMPACT);
        json_decref(steps);
        if (w->steps[i] == NULL)
            w->steps[i] = xstrdup("[]"); /* cannot happen to a parsed workflow */
        w->steps_len[i] = strlen(w->steps[i]);
    }
    return w;
}

void job_view_wf_free(job_view_wf_t *w)
{
    if (w == NULL)
        return;
    json_decref(w->doc);
    for (size_t i = 0; i < 3; i++)
        free(w->steps[i]);
    free(w);
}

/* Writes a string member's value: what member_tree makes of field `name`, encoded. */
static void text_field_str(json_text_t *t, const job_fields_t *f, const char *name)
{
    size_t len = 0;
    const char *s = job_fields_get(f, name, &len);
    if (s != NULL && len > 0)
        json_text_str(t, s, len);
    else
        json_text_raw(t, "null", 4);
}

/* A member of the view of a job just created, as text: what member_tree makes of the
 * same fields, encoded. A new job has no results, state, history or post-back attempts,
 * and its JSON fields (params, post_back_urls) are the compact text json_dumps made of
 * them (ops/job_create.c), which decoding and encoding them again gives back unchanged, so
 * they are copied as they are. */
static void member_text(json_text_t *t, const view_member_t *m, const job_fields_t *f,
                        long long now, const job_view_wf_t *w)
{
    switch (m->kind) {
    case M_STR:
    case M_STEP_QUEUE: /* a job just created has none */
        text_field_str(t, f, m->field);
        return;
    case M_QUEUE:
        if (job_fields_get(f, m->field, NULL) != NULL)
            text_field_str(t, f, m->field);
        else
            json_text_str(t, TERN_DEFAULT_QUEUE, strlen(TERN_DEFAULT_QUEUE));
        return;
    case M_JSON: {
        size_t len = 0;
        const char *s = job_fields_get(f, m->field, &len);
        if (s != NULL && len > 0)
            json_text_raw(t, s, len);
        else
            json_text_raw(t, "null", 4);
        return;
    }
    case M_TIME: {
        long long ms = field_ll(f, m->field, 0);
        if (ms <= 0) {
            json_text_raw(t, "null", 4);
            return;
        }
        char iso[32];
        iso8601_format((uint64_t)ms, iso);
        json_text_str(t, iso, strlen(iso));
        return;
    }
    case M_STEPS:
        json_text_raw(t, w->steps[m->which], w->steps_len[m->which]);
        return;
    case M_WF_STR: {
        const json_t *v = json_object_get(w->doc, m->name);
        if (json_is_string(v))
            json_text_str(t, json_string_value(v), json_string_length(v));
        else
            json_text_raw(t, "null", 4);
        return;
    }
    case M_RESULTS:
    case M_HISTORY:
    case M_POSTBACKS:
        json_text_raw(t, "[]", 2);
        return;
    case M_STATE:
        json_text_raw(t, "{}", 2);
        return;
    case M_STARTED:
    case M_TIMEOUT: {
        long long ms = field_ll(f, m->field, 0);
        if (ms > 0)
            json_text_int(t, m->kind == M_TIMEOUT ? ms / 1000 : ms);
        else
            json_text_raw(t, "null", 4);
        return;
    }
    case M_RETRIED:
        json_text_int(t, field_ll(f, m->field, 0));
        return;
    case M_CANCEL:
        if (field_ll(f, m->field, 0) == 1)
            json_text_raw(t, "true", 4);
        else
            json_text_raw(t, "false", 5);
        return;
    case M_CURSOR: {
        static const char phase_key[] = "{\"phase\":", index_key[] = ",\"index\":",
                          step_key[] = ",\"step\":", attempt_key[] = ",\"attempt\":";
        const char *phase = phases[cursor_phase(f)];
        json_text_raw(t, phase_key, sizeof phase_key - 1);
        json_text_str(t, phase, strlen(phase));
        json_text_raw(t, index_key, sizeof index_key - 1);
        json_text_int(t, field_ll(f, "idx", 0));
        json_text_raw(t, step_key, sizeof step_key - 1);
        const json_t *step = cursor_step_name(f, w->doc);
        if (json_is_string(step))
            json_text_str(t, json_string_value(step), json_string_length(step));
        else if (json_text_value(t, step) != 0)
            json_text_raw(t, "null", 4); /* a step without a name, as the tree shows it */
        json_text_raw(t, attempt_key, sizeof attempt_key - 1);
        json_text_int(t, field_ll(f, "attempt", 0));
        json_text_raw(t, "}", 1);
        return;
    }
    case M_ELAPSED: {
        /* Not for a job that has not started (every job just created); the general
         * case through jansson's encoder of reals. */
        json_t *v = member_tree(m, f, &(job_lists_t){.now = now}, NULL);
        if (json_text_value(t, v) != 0)
            json_text_raw(t, "null", 4); /* no time (member_tree gives null or a real) */
        json_decref(v);
        return;
    }
    }
}

void job_view_new_text(const store_args_t *fields, long long now, const job_view_wf_t *w,
                       json_text_t *out)
{
    job_fields_t f = {.args = fields};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(view_members); i++) {
        const view_member_t *m = &view_members[i];
        json_text_raw(out, i == 0 ? "{\"" : ",\"", 2);
        json_text_raw(out, m->name, strlen(m->name));
        json_text_raw(out, "\":", 2);
        member_text(out, m, &f, now, w);
    }
    json_text_raw(out, "}", 1);
}
