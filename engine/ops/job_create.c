/*
 * job_create.c -- creating jobs (job_ops_create, job_ops_create_text): the checks of a
 * request, the workflow it names (resolved once and shared by the creates in flight,
 * parsed once in the process: model/workflow_cache.h), the write through
 * job_create.lua, the direct start on a local runner, and the uniqueness key of
 * (workflow, target, params); see job_ops.h and job_ops_internal.h.
 */
#include "ops/job_ops_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/ident.h"
#include "base/iso8601.h"
#include "base/json_text.h"
#include "model/hold_events.h"
#include "model/holds.h"
#include "model/lock_pattern.h"
#include "model/template.h"
#include "model/workflow.h"
#include "model/workflow_cache.h"
#include "store/job_fields.h"
#include "store/job_view.h"
#include "store/lock_table.h"

void wf_ref_put(job_ops_t *ops, wf_ref_t *c)
{
    if (c == NULL || --c->refs > 0)
        return;
    free(c->ref);
    workflow_cache_put(ops->workflows, c->version);
    job_view_wf_free(c->view);
    free(c);
}

/* Sets what the loading entry `c` stands for: `version` (a reference, taken). */
static void wf_ref_set(wf_ref_t *c, const workflow_cache_entry_t *version)
{
    c->version = version;
    c->view = job_view_wf_new(version->wf->doc);
}

/* The entry of `ref` with a reference for the caller, or NULL. */
static wf_ref_t *wf_ref_get(job_ops_t *ops, const char *ref)
{
    for (size_t i = 0; i < WF_REF_SLOTS; i++) {
        wf_ref_t *c = ops->wf_refs[i];
        if (c != NULL && strcmp(c->ref, ref) == 0) {
            c->refs++;
            return c;
        }
    }
    return NULL;
}

/* Records `version` (a reference, taken; NULL: loading) as what `ref` names, replacing
 * an older entry for `ref` or the oldest slot; returns the entry with a reference for
 * the caller. */
static wf_ref_t *wf_ref_add(job_ops_t *ops, const char *ref, const workflow_cache_entry_t *version)
{
    wf_ref_t *c = xcalloc(1, sizeof *c);
    c->refs = 2;
    c->ref = xstrdup(ref);
    if (version != NULL)
        wf_ref_set(c, version);
    size_t slot = ops->wf_refs_next;
    for (size_t i = 0; i < WF_REF_SLOTS; i++)
        if (ops->wf_refs[i] != NULL && strcmp(ops->wf_refs[i]->ref, ref) == 0)
            slot = i;
    if (slot == ops->wf_refs_next)
        ops->wf_refs_next = (ops->wf_refs_next + 1) % WF_REF_SLOTS;
    wf_ref_put(ops, ops->wf_refs[slot]);
    ops->wf_refs[slot] = c;
    return c;
}

/* Takes `c` out of its slot (a loading entry whose question found no workflow), so
 * that the next create asks again. */
static void wf_ref_drop(job_ops_t *ops, wf_ref_t *c)
{
    for (size_t i = 0; i < WF_REF_SLOTS; i++) {
        if (ops->wf_refs[i] == c) {
            ops->wf_refs[i] = NULL;
            wf_ref_put(ops, c);
        }
    }
}

static void create_send(op_t *op);

/* ---- uniqueness ---------------------------------------------------------------- */

static uint64_t fnv1a(const unsigned char *p, size_t n, uint64_t h, int reverse)
{
    for (size_t i = 0; i < n; i++) {
        h ^= p[reverse ? n - 1 - i : i];
        h *= 0x100000001b3ull;
    }
    return h;
}

void job_ops_unique_key(const char *workflow, const char *target, const json_t *params,
                        char out[33])
{
    /* Canonical text: keys sorted, compact; two 64-bit FNV-1a passes (forward and
     * backward) make collisions between distinct jobs negligible for this purpose. */
    char *p = json_dumps(params, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    char *text =
        xasprintf("%s\n%s\n%s", workflow, target != NULL ? target : "", p != NULL ? p : "{}");
    free(p);
    size_t n = strlen(text);
    uint64_t a = fnv1a((const unsigned char *)text, n, 0xcbf29ce484222325ull, 0);
    uint64_t b = fnv1a((const unsigned char *)text, n, 0x84222325cbf29ce4ull, 1);
    free(text);
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
}

/* After a create that asked for its workflow got its answer (or ended without one):
 * returns the creates that waited on the entry, in the order they were made, and
 * clears the question; the caller sends them with send_waiters. An entry the answer
 * left without a workflow leaves the cache, and each waiter asks for itself. */
static op_t *take_waiters(op_t *op)
{
    wf_ref_t *c = op->wfr;
    if (!op->asking)
        return NULL;
    op->asking = false;
    c->asked = false;
    if (c->version == NULL)
        wf_ref_drop(op->ops, c);
    op_t *w = NULL; /* the list is newest first: reversed */
    while (c->waiters != NULL) {
        op_t *next = c->waiters->next_waiter;
        c->waiters->next_waiter = w;
        w = c->waiters;
        c->waiters = next;
    }
    return w;
}

static void send_waiters(op_t *w)
{
    while (w != NULL) {
        op_t *next = w->next_waiter;
        w->next_waiter = NULL;
        create_send(w);
        w = next;
    }
}

void wake_waiters(op_t *op)
{
    send_waiters(take_waiters(op));
}

/* Sets the value of field `name` in `fields` (it must be there). */
static void replace_field(store_args_t *fields, const char *name, const char *value)
{
    for (size_t i = 0; i + 1 < fields->n; i += 2) {
        if (strcmp(fields->v[i], name) == 0) {
            free(fields->v[i + 1]);
            fields->v[i + 1] = xstrdup(value);
            fields->len[i + 1] = strlen(value);
            return;
        }
    }
}

static void on_job_create(void *data, int status, const redisReply *reply, const char *errmsg)
{
    op_t *op = data;
    const redisReply *kind = status == 0 ? store_reply_at(reply, 0) : NULL;
    if (!store_reply_is(kind, "WF"))
        wake_waiters(op);
    /* Anything but "not sent" may have come after the script ran (a lost answer, an
     * item's error after its writes): the job may have started unseen. */
    if (status != 0 && status != TERN_ENOTCONN)
        op->direct_lost = true;
    if (status == TERN_EIO) {
        store_op_done(&op->base, TERN_EUNKNOWN, NULL,
                      "%s: the job may have been created; GET /jobs/%s tells",
                      errmsg != NULL ? errmsg : "no answer from Redis", op->uuid);
        return;
    }
    if (store_op_failed(&op->base, status, errmsg))
        return;
    if (store_reply_is(kind, "NOWF")) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "workflow \"%s\" does not exist",
                      op->workflow_ref);
        return;
    }
    if (store_reply_is(kind, "WF")) {
        /* The reference names a workflow this process has not parsed yet (or names
         * another version than before): parse it and send again. */
        const redisReply *uuid = store_reply_at(reply, 1), *doc = store_reply_at(reply, 2);
        if (uuid == NULL || doc == NULL || uuid->type != REDIS_REPLY_STRING ||
            doc->type != REDIS_REPLY_STRING) {
            wake_waiters(op);
            store_op_done(&op->base, TERN_EIO, NULL,
                          "job_create.lua answered WF without a workflow");
            return;
        }
        /* Parsed unless the process has it already (the runner may have run a job of
         * it, or another reference named it). */
        char err[1024];
        const workflow_cache_entry_t *version = workflow_cache_load(
            op->ops->workflows, uuid->str, uuid->len, doc->str, doc->len, err, sizeof err);
        if (version == NULL) {
            wake_waiters(op);
            store_op_done(&op->base, TERN_EINVAL, NULL, "stored workflow %.*s is invalid: %s",
                          (int)uuid->len, uuid->str, err);
            return;
        }
        wf_ref_t *c = op->wfr;
        if (c != NULL && c->version == NULL) {
            /* The answer the entry waited for. */
            wf_ref_set(c, version);
        } else {
            /* The reference names another version now: a new entry. */
            wf_ref_put(op->ops, c);
            op->wfr = wf_ref_add(op->ops, op->workflow_ref, version);
            op->tries++; /* only a change counts: the first answer is the expected one */
        }
        if (op->tries >= CREATE_TRIES) {
            store_op_done(&op->base, TERN_EIO, NULL, "workflow \"%s\" keeps changing; try again",
                          op->workflow_ref);
            return; /* op_dispose woke the waiters */
        }
        /* The asking create first: creates keep the order they were made in (and
         * create_send may end, and free, the operation). */
        op_t *waiters = take_waiters(op);
        create_send(op);
        send_waiters(waiters);
        return;
    }
    if (store_reply_is(kind, "LOCKS")) {
        on_locks_answer(op, reply, create_send);
        return;
    }
    if (store_reply_is(kind, "CONFLICT")) {
        const redisReply *other = store_reply_at(reply, 1);
        store_op_done(&op->base, TERN_EEXIST, NULL,
                      "another job with the same target and params is not finished yet: %.*s",
                      other ? (int)other->len : 0, other ? other->str : "");
        return;
    }
    if (store_reply_is(kind, "EXISTS")) {
        store_op_done(&op->base, TERN_EEXIST, NULL, "uuid: job %s already exists", op->uuid);
        return;
    }
    if (store_reply_is(kind, "LOCKCAP")) {
        lock_cap_refused(op, reply, op->locks_size, "the job was not created");
        return;
    }
    /* A new job is shown from what was sent; the same create repeated gets the job as
     * it is now. */
    bool run = store_reply_is(kind, "RUN");
    const redisReply *now_r = store_reply_at(reply, 1);
    const redisReply *snapshot = run ? NULL : store_reply_at(reply, 2);
    const redisReply *started_r = run ? store_reply_at(reply, 2) : NULL;
    bool shown = false;
    /* A 1-step job's view is about 800 bytes: a first size that malloc serves from its
     * per-thread cache (up to 1 KiB); the text grows for bigger jobs. */
    json_text_init(&op->view, 1024);
    if (snapshot != NULL) {
        json_t *view = job_view_from_reply(snapshot);
        int rc = view != NULL ? json_text_value(&op->view, view) : 0;
        shown = view != NULL;
        json_decref(view);
        if (rc != 0) {
            store_op_done(&op->base, TERN_EIO, NULL, "job %s: its view cannot be encoded as JSON",
                          op->uuid);
            return;
        }
    } else if (now_r != NULL && op->wfr != NULL && op->wfr->version != NULL) {
        long long now = store_reply_int(now_r, 0);
        bool started = run && op->direct;
        store_args_push(&op->fields, "created_at");
        store_args_push_u64(&op->fields, (uint64_t)now);
        if (op->exec_after_ms > (uint64_t)now) {
            store_args_push(&op->fields, "exec_after");
            store_args_push_u64(&op->fields, op->exec_after_ms);
        }
        /* The answer shows the job as created, queued, even when it started in the
         * same step: node-workflow's clients require it (wf-client asserts that a new
         * job is queued); a read shows it running. */
        job_view_new_text(&op->fields, now, op->wfr->view, &op->view);
        shown = true;
        if (started) {
            /* The runner runs it from its fields as job_create.lua started it: what the
             * start wrote comes back with the answer (start_fields in lib/queues.lua),
             * so it is stated in one place. */
            replace_field(&op->fields, "execution", "running");
            size_t n =
                started_r != NULL && started_r->type == REDIS_REPLY_ARRAY ? started_r->elements : 0;
            for (size_t i = 0; i < n; i++) {
                const redisReply *e = started_r->element[i];
                if (e->type == REDIS_REPLY_STRING)
                    store_args_pushb(&op->fields, e->str, e->len);
            }
            op->direct = false;
            op->ops->local.start(op->ops->local.data, op->uuid, &op->fields, op->wfr->version->doc,
                                 op->wfr->version->doc_len, now);
        }
    }
    if (!shown) {
        store_op_done(&op->base, TERN_EIO, NULL, "job %s: job_create.lua answered without the job",
                      op->uuid);
        return;
    }
    store_op_done(&op->base, 0, NULL, NULL); /* create_answered hands op->view over */
}

/* A field of the job a create stores: sent (`a`) and kept for the view (`op->fields`). */
static void field_push(op_t *op, store_args_t *a, const char *name, const char *value)
{
    store_args_push(a, name);
    store_args_push(a, value);
    store_args_push(&op->fields, name);
    store_args_push(&op->fields, value);
}

/* The create's params as a tree (borrowed from op), decoded from their text the first
 * time they are needed: only a target's uniqueness key and the templates of holds read
 * them, so most creates never do. Decoding jansson's own compact text gives back the
 * same values. NULL only if that text does not decode (cannot happen). */
static const json_t *create_params(op_t *op)
{
    if (op->params == NULL)
        op->params = json_loads(op->params_text, 0, NULL);
    return op->params;
}

/* The scope a new job's job-level templates (holds, hold_events) expand in: its params
 * (borrowed from op), its job fields and its admission results (both owned here). */
typedef struct create_scope {
    template_scope_t sc;
    json_t *job;
    json_t *admission;
} create_scope_t;

static void create_scope_init(op_t *op, create_scope_t *cs)
{
    cs->job = json_pack("{s:s, s:s?, s:s}", "uuid", op->uuid, "target", op->target, "workflow",
                        op->wfr->version->wf->name);
    cs->admission =
        op->admission_results != NULL ? json_loads(op->admission_results, 0, NULL) : NULL;
    cs->sc =
        (template_scope_t){.params = create_params(op), .job = cs->job, .admission = cs->admission};
}

static void create_scope_free(create_scope_t *cs)
{
    json_decref(cs->job);
    json_decref(cs->admission);
}

/* The workflow's holds for the new job, expanded against its params and job fields:
 * 0 and *out the lines job_create.lua stores (malloc'd; NULL when they are empty), or
 * TERN_EINVAL (a template names nothing) or TERN_EREFUSED (a templated capacity that
 * is no integer in range: 422) with the message in err. Only for a workflow with holds. */
static int create_holds(op_t *op, char **out, char *err, size_t errlen)
{
    const workflow_t *wf = op->wfr->version->wf;
    create_scope_t cs;
    create_scope_init(op, &cs);
    size_t n = wf->n_holds;
    wf_hold_t *all = xcalloc(n + 1, sizeof *all);
    if (n > 0)
        memcpy(all, wf->holds, n * sizeof *all);
    if (op->extra_hold != NULL)
        all[n++] = (wf_hold_t){.resource = op->extra_hold, .capacity = 1};
    char *holds = NULL;
    int rc = holds_expand(all, n, &cs.sc, &holds, err, errlen);
    free(all);
    create_scope_free(&cs);
    if (rc != 0)
        return rc;
    if (holds[0] == '\0') {
        free(holds);
        holds = NULL;
    }
    *out = holds;
    return 0;
}

/* The streams the new job tells of its waits for holds (the workflow's hold_events,
 * expanded as its holds are): 0 and *out the lines job_create.lua stores (malloc'd), or
 * TERN_EINVAL with the message in err. Only for a workflow with hold_events. */
static int create_hold_events(op_t *op, char **out, char *err, size_t errlen)
{
    create_scope_t cs;
    create_scope_init(op, &cs);
    int rc = hold_events_expand(op->wfr->version->wf->hold_events, &cs.sc, out, err, errlen);
    create_scope_free(&cs);
    return rc;
}

/* Pushes the "created" event of job `uuid` of workflow `name` (both borrowed), written
 * as its JSON text: {"type":"created","job":...,"workflow":...,"time":ms}. */
static void push_created_event(store_args_t *a, const char *uuid, const char *name)
{
    json_text_t ev;
    json_text_init(&ev, 160);
    static const char type[] = "{\"type\":\"created\",\"job\":", wf[] = ",\"workflow\":",
                      time_key[] = ",\"time\":";
    json_text_raw(&ev, type, sizeof type - 1);
    json_text_str(&ev, uuid, strlen(uuid));
    json_text_raw(&ev, wf, sizeof wf - 1);
    json_text_str(&ev, name, strlen(name));
    json_text_raw(&ev, time_key, sizeof time_key - 1);
    json_text_int(&ev, (long long)clock_wall_ms());
    json_text_raw(&ev, "}", 1);
    store_args_pushb(a, ev.p, ev.len);
    json_text_dispose(&ev);
}

/* ---- admission checks ------------------------------------------------------------ */

static void admitting_remove(op_t *op)
{
    for (op_t **p = &op->ops->admitting; *p != NULL; p = &(*p)->next_admitting) {
        if (*p == op) {
            *p = op->next_admitting;
            break;
        }
    }
    op->next_admitting = NULL;
}

/* The admission checks' answer (job_ops_admitted_cb): a create that passed goes on to
 * its lock check and its write, with the results; one refused ends here, having stored
 * nothing. */
static void on_admitted(void *data, int status, const char *code, const char *message,
                        const json_t *results)
{
    op_t *op = data;
    op->admission_run = NULL;
    admitting_remove(op);
    if (status != 0) {
        op->refusal_code = xstrdup(code != NULL ? code : "AdmissionRefused");
        store_op_done(&op->base, status, NULL, "%s", message != NULL ? message : "");
        return;
    }
    free(op->admission_results);
    op->admission_results = json_dumps(results, JSON_COMPACT);
    if (op->admission_results == NULL) {
        store_op_done(&op->base, TERN_EINVAL, NULL,
                      "the results of the admission checks cannot be encoded as JSON");
        return;
    }
    /* They are stored in the job's hash beside its params, under the same bound. */
    size_t size = strlen(op->admission_results);
    if (size > op->ops->opts.max_params_bytes) {
        store_op_done(&op->base, TERN_E2BIG, NULL,
                      "the results of the admission checks are %zu bytes, the limit is %zu "
                      "(max_params_bytes); the job was not created",
                      size, op->ops->opts.max_params_bytes);
        return;
    }
    snprintf(op->admitted_uuid, sizeof op->admitted_uuid, "%s", op->wfr->version->uuid);
    check_queue(op, NULL, false);
}

/* Runs the admission checks of the create's workflow version, which has some. */
static void admission_begin(op_t *op)
{
    job_ops_t *ops = op->ops;
    if (ops->closed) {
        store_op_done(&op->base, TERN_ENOTCONN, NULL,
                      "ternd is stopping: the create was not sent to Redis");
        return;
    }
    if (ops->admission.start == NULL) {
        op->refusal_code = xstrdup("AdmissionUnavailable");
        store_op_done(&op->base, TERN_EAGAIN, NULL,
                      "workflow \"%s\" has admission checks, which this process cannot run; "
                      "the job was not created",
                      op->wfr->version->wf->name);
        return;
    }
    op->next_admitting = ops->admitting;
    ops->admitting = op;
    op->admission_run = ops->admission.start(ops->admission.data, op->wfr->version->wf, op->uuid,
                                             op->target, create_params(op), on_admitted, op);
}

/* True when field `name` of `f` is `value` (NULL: missing or empty). */
static bool field_is(const job_fields_t *f, const char *name, const char *value)
{
    size_t len = 0;
    const char *s = job_fields_get(f, name, &len);
    if (value == NULL)
        return s == NULL || len == 0;
    return s != NULL && len == strlen(value) && memcmp(s, value, len) == 0;
}

/* The answer of job_get.lua (a snapshot, {} when no job has the uuid) for a create that
 * names its own uuid, read before its checks run. A stored job answers the create as
 * job_create.lua answers a create repeated (the same workflow version, params and target
 * get the job as it is now; anything else is refused), without running the checks or
 * writing: a write after this read could store, unchecked, a job deleted meanwhile. */
static void on_repeat_read(void *data, int status, const redisReply *reply, const char *errmsg)
{
    op_t *op = data;
    if (store_op_failed(&op->base, status, errmsg))
        return;
    op->repeat_read = true;
    const redisReply *stored = store_reply_at(reply, 0);
    if (stored == NULL || stored->type != REDIS_REPLY_ARRAY || stored->elements == 0) {
        create_send(op); /* no such job: the checks run */
        return;
    }
    job_fields_t f = {.reply = stored};
    if (!field_is(&f, "workflow_uuid", op->wfr->version->uuid) ||
        !field_is(&f, "params", op->params_text) || !field_is(&f, "target", op->target)) {
        store_op_done(&op->base, TERN_EEXIST, NULL, "uuid: job %s already exists", op->uuid);
        return;
    }
    json_t *view = job_view_from_reply(reply);
    json_text_init(&op->view, 1024);
    int rc = view != NULL ? json_text_value(&op->view, view) : TERN_EIO;
    json_decref(view);
    if (rc != 0) {
        store_op_done(&op->base, TERN_EIO, NULL, "job %s: its view cannot be encoded as JSON",
                      op->uuid);
        return;
    }
    store_op_done(&op->base, 0, NULL, NULL); /* create_answered hands op->view over */
}

/* Cancels the admission checks in flight, answering their creates TERN_ENOTCONN: for a
 * shutdown (job_ops_close). */
void admission_abandon(job_ops_t *ops)
{
    while (ops->admitting != NULL) {
        op_t *op = ops->admitting;
        ops->admitting = op->next_admitting;
        op->next_admitting = NULL;
        ops->admission.cancel(ops->admission.data, op->admission_run);
        op->admission_run = NULL;
        store_op_done(&op->base, TERN_ENOTCONN, NULL,
                      "ternd is stopping: the admission checks were cancelled and the job was "
                      "not created");
    }
}

static void create_send(op_t *op)
{
    if (op->wfr == NULL || op->wfr->version == NULL) {
        /* Not parsed yet: job_create.lua answers with the workflow (WF) before it
         * looks at anything else (and stores nothing). */
        store_args_t a;
        store_args_init(&a);
        store_args_push(&a, op->workflow_ref);
        store_args_push(&a, "");
        store_args_push(&a, op->uuid);
        op_send(op, SCRIPT_JOB_CREATE, &a, on_job_create);
        return;
    }
    /* The checks run once for the version the create is written with: job_create.lua
     * stores nothing unless the reference still names it (else WF, and here again). */
    const workflow_cache_entry_t *version = op->wfr->version;
    if (version->wf->n_admission > 0 && strcmp(op->admitted_uuid, version->uuid) != 0) {
        /* A create naming its own uuid may be one sent again after a lost answer, whose
         * job is stored: its checks are not run again (they could refuse what they
         * admitted, a quota this very job took); job_create.lua answers with the job as
         * it is, or refuses the uuid reused with other contents. One read more, for
         * such creates of workflows with checks only. */
        if (!op->uuid_made_here && !op->repeat_read) {
            store_args_t a;
            store_args_init(&a);
            store_args_push(&a, op->uuid);
            op_send(op, SCRIPT_JOB_GET, &a, on_repeat_read);
            return;
        }
        admission_begin(op);
        return;
    }
    if (version->wf->n_admission == 0 && op->admission_results != NULL) {
        free(op->admission_results); /* of another version, which had checks */
        op->admission_results = NULL;
    }
    /* node-workflow's lock rule: a target matching the locks of an unfinished job is
     * refused while that job runs. */
    check_queue(op, NULL, false);
}

/* Sends job_create.lua for a create whose target was checked against the locks of
 * version `locks_version`. */
void create_write(op_t *op, const char *locks_version)
{
    job_ops_t *ops = op->ops;
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, op->workflow_ref);
    store_args_push(&a, op->wfr->version->uuid);
    const workflow_t *wf = op->wfr->version->wf;
    char herr[512];
    char *holds = NULL;
    int hrc = 0;
    if ((wf->n_holds > 0 || op->extra_hold != NULL) &&
        (hrc = create_holds(op, &holds, herr, sizeof herr)) != 0) {
        store_args_dispose(&a);
        store_op_done(&op->base, hrc, NULL, "%s", herr);
        return;
    }
    char *hold_events = NULL;
    if (wf->hold_events != NULL &&
        (hrc = create_hold_events(op, &hold_events, herr, sizeof herr)) != 0) {
        free(holds);
        store_args_dispose(&a);
        store_op_done(&op->base, hrc, NULL, "%s", herr);
        return;
    }

    char unique[33] = "";
    if (op->target != NULL)
        job_ops_unique_key(wf->name, op->target, create_params(op), unique);
    store_args_push(&a, op->uuid);
    store_args_push(&a, wf->queue);
    store_args_push_u64(&a, op->exec_after_ms);
    store_args_push(&a, unique);
    store_args_push(&a, locks_version);
    store_args_push(&a, op->locks != NULL ? op->locks : "");
    push_created_event(&a, op->uuid, wf->name);
    /* Direct start: a slot of the local runner, taken once per create (this may be a
     * second send, after the workflow or the locks were read). */
    if (op->direct && strcmp(op->direct_queue, wf->queue) != 0) {
        /* The workflow named is another version now, of another queue. */
        ops->local.release(ops->local.data, false);
        op->direct = false;
    }
    if (!op->direct && ops->local.reserve != NULL && holds == NULL &&
        op->exec_after_ms <= clock_wall_ms() && op->wfr->version->doc != NULL) {
        op->direct = ops->local.reserve(ops->local.data, wf->queue);
        free(op->direct_queue);
        op->direct_queue = op->direct ? xstrdup(wf->queue) : NULL;
    }
    store_args_push(&a, op->direct ? ops->local.id : "");
    /* A uuid made here is new to Redis, so job_create.lua skips its lookup: a create is
     * sent again only after an answer saying it stored nothing (WF, LOCKS); one whose
     * answer was lost fails and is never sent again. */
    store_args_push(&a, op->uuid_made_here ? "1" : "");
    store_args_push_u64(&a, op->locks != NULL ? op->locks_size : 0);
    store_args_push_u64(&a, ops->opts.max_lock_instructions);
    /* What job_create.lua stores beside the fields sent (it adds unique, locks and lv too,
     * which the view does not show). */
    store_args_dispose(&op->fields);
    store_args_push(&op->fields, "uuid");
    store_args_push(&op->fields, op->uuid);
    store_args_push(&op->fields, "queue");
    store_args_push(&op->fields, wf->queue);
    store_args_push(&op->fields, "execution");
    store_args_push(&op->fields, "queued");
    field_push(op, &a, "name", wf->name);
    field_push(op, &a, "version", wf->version);
    field_push(op, &a, "workflow_uuid", op->wfr->version->uuid);
    field_push(op, &a, "params", op->params_text);
    /* Fields at their default (no target, no timeout, no holds, no oncancel) are not
     * stored: every finished job keeps its hash, and readers take a missing field for
     * the default. */
    if (op->target != NULL)
        field_push(op, &a, "target", op->target);
    if (wf->timeout_ms > 0) {
        char ms[24];
        snprintf(ms, sizeof ms, "%" PRIu64, wf->timeout_ms);
        field_push(op, &a, "timeout_ms", ms);
    }
    if (holds != NULL)
        field_push(op, &a, "holds", holds);
    if (hold_events != NULL)
        field_push(op, &a, "hold_events", hold_events);
    if (wf->n_steps[WF_ONCANCEL] > 0)
        field_push(op, &a, "has_oncancel", "1");
    if (op->admission_results != NULL)
        field_push(op, &a, "admission", op->admission_results);
    if (op->post_back_urls != NULL) {
        char *urls = json_dumps(op->post_back_urls, JSON_COMPACT);
        field_push(op, &a, "post_back_urls", urls != NULL ? urls : "");
        free(urls);
    }
    free(holds);
    free(hold_events);
    op_send(op, SCRIPT_JOB_CREATE, &a, on_job_create);
}

/* True when s is valid UTF-8 (jansson refuses to make a string of anything else). */
static bool utf8_valid(const char *s)
{
    json_t *v = json_string(s);
    json_decref(v);
    return v != NULL;
}

/* Post-back URLs are fetched by ternd later, so only http(s) URLs of a sane size and
 * without blanks or control characters (which would split a request line) are kept. */
static int check_post_back_urls(const json_t *urls, char *err, size_t errlen)
{
    if (!json_is_array(urls))
        return err_set(err, errlen, TERN_EINVAL, "post_back_urls: expected an array of URLs");
    if (json_array_size(urls) > JOB_POST_BACK_URLS_MAX)
        return err_set(err, errlen, TERN_EINVAL, "post_back_urls: %zu URLs, at most %d",
                       json_array_size(urls), JOB_POST_BACK_URLS_MAX);
    size_t i;
    json_t *u;
    json_array_foreach(urls, i, u)
    {
        const char *s = json_string_value(u);
        if (s == NULL)
            return err_set(err, errlen, TERN_EINVAL, "post_back_urls[%zu]: expected a string URL",
                           i);
        size_t n = strlen(s);
        bool ok = n <= JOB_POST_BACK_URL_MAX && ((strncmp(s, "http://", 7) == 0 && n > 7) ||
                                                 (strncmp(s, "https://", 8) == 0 && n > 8));
        for (size_t k = 0; ok && k < n; k++)
            ok = (unsigned char)s[k] > ' ' && s[k] != 0x7f;
        if (!ok)
            return err_set(err, errlen, TERN_EINVAL,
                           "post_back_urls[%zu]: expected an http:// or https:// URL of at "
                           "most %d bytes without blanks, got \"%.80s\"",
                           i, JOB_POST_BACK_URL_MAX, s);
    }
    return 0;
}

/* The answer of a create to its caller, in the form it asked for: the store_op_t's
 * callback of every create, whose data is the operation itself. On success the view
 * is op->view, made by on_job_create. */
static void create_answered(void *data, int status, const json_t *result, const char *message)
{
    (void)result; /* always NULL: the view is op->view */
    op_t *op = data;
    const char *view = status == 0 ? op->view.p : NULL;
    /* The uuid goes with an unknown outcome too: it is how the caller finds out. */
    const char *uuid = view != NULL || status == TERN_EUNKNOWN ? op->uuid : NULL;
    if (op->created_text != NULL) {
        op->created_text(op->created_data, status, view, view != NULL ? op->view.len : 0, uuid,
                         op->refusal_code, message);
        return;
    }
    if (op->refusal_code != NULL) {
        json_t *coded = json_pack("{s:s}", "code", op->refusal_code);
        op->created_tree(op->created_data, status, coded, message);
        json_decref(coded);
        return;
    }
    if (status == TERN_EUNKNOWN) {
        json_t *named = json_pack("{s:s}", "uuid", op->uuid);
        op->created_tree(op->created_data, status, named, message);
        json_decref(named);
        return;
    }
    json_t *tree = view != NULL ? json_loadb(view, op->view.len, 0, NULL) : NULL;
    if (view != NULL && tree == NULL) {
        op->created_tree(op->created_data, TERN_EIO, NULL, "the new job's view is not JSON");
        return;
    }
    op->created_tree(op->created_data, status, tree, message);
    json_decref(tree);
}

static void create_start(job_ops_t *ops, const job_create_req_t *req, op_t *op);

void job_ops_create_text(job_ops_t *ops, const job_create_req_t *req, job_ops_create_cb cb,
                         void *data)
{
    op_t *op = op_new(ops, create_answered, NULL);
    op->base.data = op;
    op->created_text = cb;
    op->created_data = data;
    create_start(ops, req, op);
}

void job_ops_create(job_ops_t *ops, const job_create_req_t *req, job_ops_cb cb, void *data)
{
    op_t *op = op_new(ops, create_answered, NULL);
    op->base.data = op;
    op->created_tree = cb;
    op->created_data = data;
    create_start(ops, req, op);
}

static void create_start(job_ops_t *ops, const job_create_req_t *req, op_t *op)
{
    if (req->workflow == NULL || req->workflow[0] == '\0') {
        store_op_done(&op->base, TERN_EINVAL, NULL, "workflow: required");
        return;
    }
    if (req->params != NULL && !json_is_object(req->params)) {
        store_op_done(&op->base, TERN_EINVAL, NULL, "params: expected an object");
        return;
    }
    /* The text is what is stored and shown; the tree is decoded again only if needed. */
    op->params_text = req->params != NULL ? json_dumps(req->params, JSON_COMPACT) : xstrdup("{}");
    if (op->params_text == NULL) {
        store_op_done(&op->base, TERN_EINVAL, NULL, "params: cannot be encoded as JSON");
        return;
    }
    size_t size = strlen(op->params_text);
    if (size > ops->opts.max_params_bytes) {
        store_op_done(&op->base, TERN_E2BIG, NULL, "params: %zu bytes, the limit is %zu", size,
                      ops->opts.max_params_bytes);
        return;
    }
    if (req->target != NULL && (strlen(req->target) == 0 || strlen(req->target) > 1024)) {
        store_op_done(&op->base, TERN_EINVAL, NULL, "target: expected 1 to 1024 characters");
        return;
    }
    if (req->target != NULL && !utf8_valid(req->target)) {
        /* A body's target is JSON and so valid already; `ternd run --target` is not.
         * Every answer and listing shows the target as a JSON string. */
        store_op_done(&op->base, TERN_EINVAL, NULL, "target: not valid UTF-8");
        return;
    }
    if (req->locks != NULL) {
        /* Compiled here to refuse what the lock table could not use; the table compiles
         * it again once, when it first reads the job's lock. */
        lock_pattern_t *re;
        char why[256];
        int rc = lock_pattern_compile(req->locks, &re, why, sizeof why);
        if (rc != 0) {
            store_op_done(&op->base, rc, NULL, "locks: not accepted: %s", why);
            return;
        }
        op->locks_size = lock_pattern_size(re);
        lock_pattern_free(re);
        op->locks = xstrdup(req->locks);
    }
    if (req->uuid != NULL) {
        if (!uuid_valid(req->uuid)) {
            store_op_done(&op->base, TERN_EINVAL, NULL, "uuid: \"%s\" is not a UUID", req->uuid);
            return;
        }
        snprintf(op->uuid, sizeof op->uuid, "%s", req->uuid);
    } else {
        /* Only kernel randomness makes it safe to skip the lookup (see create_send):
         * the fallback's clock mix could repeat across processes. */
        op->uuid_made_here = uuid_v4(op->uuid);
    }
    if (req->post_back_urls != NULL) {
        char err[256];
        if (check_post_back_urls(req->post_back_urls, err, sizeof err) != 0) {
            store_op_done(&op->base, TERN_EINVAL, NULL, "%s", err);
            return;
        }
        if (json_array_size(req->post_back_urls) > 0)
            op->post_back_urls = json_deep_copy(req->post_back_urls);
    }
    if (req->extra_hold != NULL) {
        if (req->extra_hold[0] == '\0' || strchr(req->extra_hold, '$') != NULL) {
            store_op_done(&op->base, TERN_EINVAL, NULL,
                          "hold: expected a resource name without templates");
            return;
        }
        op->extra_hold = xstrdup(req->extra_hold);
    }
    op->workflow_ref = xstrdup(req->workflow);
    op->target = req->target != NULL ? xstrdup(req->target) : NULL;
    op->exec_after_ms = req->exec_after_ms;
    wf_ref_t *c = wf_ref_get(ops, op->workflow_ref);
    if (c == NULL)
        c = wf_ref_add(ops, op->workflow_ref, NULL);
    op->wfr = c;
    if (c->version == NULL && c->asked) {
        op->next_waiter = c->waiters;
        c->waiters = op;
        return;
    }
    if (c->version == NULL)
        c->asked = op->asking = true;
    create_send(op);
}
