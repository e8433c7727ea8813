/*
 * job_ops.c -- workflow and job operations shared by the API, ternd --run and tests;
 * see job_ops.h.
 *
 * Ownership: each operation in flight is one heap object (op_t, a store_op_t; see
 * store_op.h) that owns copies of its inputs and is freed right after its callback
 * ran. job_ops_t owns a snapshot of the locks of unfinished jobs (lock_table.h, each
 * compiled once and kept across refreshes), replaced whenever job_create.lua or
 * job_redrive.lua says the version we checked against is stale.
 *
 * Checking a target against every lock can take a second of CPU at the cap on their
 * size (max_lock_instructions), so creates and retries that check one wait in a queue
 * (first in, first out, so they go to Redis in the order they were made) and the queue
 * is worked through in slices of LOCK_SLICE_STEPS from an idle handle: each turn of
 * the loop does one slice, and serves its I/O and timers (the runner's heartbeats)
 * between two.
 */
#include "ops/job_ops.h"

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
#include "base/log.h"
#include "base/str_map.h"
#include "model/holds.h"
#include "model/lock_pattern.h"
#include "model/template.h"
#include "model/workflow.h"
#include "ops/store_op.h"
#include "store/job_view.h"
#include "store/lock_table.h"

#define CREATE_TRIES 4 /* lock cache refreshes before giving up */

/* The steps of the lock matcher (lock_match_run) one turn of the loop spends: about
 * 0.4 ms here for the costliest instructions (bracket classes; 1 ms holds 450k to 650k
 * steps), so that no turn is held for more than a millisecond or two. */
#define LOCK_SLICE_STEPS 250000

/* The default of max_lock_instructions: 500000 instructions of compiled locks over all
 * unfinished jobs (a ^<uuid>$ lock is 39, the largest lock 2500): 8 MB of programs in
 * each API process, and a create checked against all of them costs at most about a
 * second of sliced CPU against a 1024-character target, much less for usual locks. */
#define LOCK_INSTRUCTIONS_DEFAULT 500000

/* The refusal of a retry of a job that neither failed nor was canceled, whether the
 * job read first or job_redrive.lua at the write says so; the arguments are the job's
 * uuid and execution. */
#define REDRIVE_REFUSED_FMT "job %s is %s; only a failed or canceled job can be retried"

/* A workflow as a create named it, parsed once and shared by the creates in flight.
 * A uuid names one document for good (versions are immutable), so what may go stale is
 * only which uuid a name stands for; job_create.lua checks that with every create.
 * While a first create asks job_create.lua for a workflow not parsed yet (its entry
 * has no `wf`), the other creates naming it wait on the entry instead of all asking
 * (a burst of creates for a new workflow costs one extra round trip, not one each). */
struct op;
typedef struct wf_cached {
    int refs; /* one for the cache slot, one per create holding it */
    char *ref;
    char *uuid;     /* "" while loading */
    workflow_t *wf; /* NULL while loading */
    char *doc;      /* its stored document (for a local runner), NULL while loading */
    size_t doc_len;
    job_view_wf_t *view; /* what new jobs' views show of it, NULL while loading */
    bool asked;          /* a create has asked for it (loading only) */
    struct op *waiters;  /* creates waiting for the answer (linked by next_waiter) */
} wf_cached_t;

#define WF_CACHE_SLOTS 32

struct job_ops {
    job_ops_opts_t opts;
    job_ops_local_runner_t local; /* reserve is NULL when there is none */
    lock_table_t *locks;          /* the latest snapshot read (a reference held) */
    /* Creates and retries waiting for their lock check (op->check), oldest first. */
    struct op *checks;
    struct op **checks_tail;
    /* Runs a slice of the queue per turn while it is not empty; NULL until the first
     * check that waits. Its own allocation, freed when its close completes: job_ops_free
     * may come before that. */
    uv_idle_t *check_idle;
    bool checking; /* in checks_run: an op queued now is run by it */
    bool closed;   /* job_ops_close ran: no check runs any more */
    wf_cached_t *wf_cache[WF_CACHE_SLOTS];
    size_t wf_cache_next; /* the slot the next new entry replaces */
};

typedef struct op {
    store_op_t base; /* first: the reply callbacks' data is both */
    job_ops_t *ops;
    /* job create */
    char uuid[40];
    bool uuid_made_here; /* by uuid_v4 from kernel randomness, not by the client */
    char *workflow_ref;
    char *params_text; /* the params' compact JSON, sized once and sent as it is */
    json_t *params;    /* ... decoded again when needed (create_params), else NULL */
    char *target;
    char *locks;
    uint64_t exec_after_ms;
    int tries;
    bool locks_fresh;       /* the lock table was read by this create's own round trip */
    size_t locks_size;      /* the instructions of its lock's program (op->locks) */
    lock_check_t check;     /* of its target, while in ops->checks */
    bool check_redrive;     /* the check is a retry's (redrive_write follows), not a create's */
    struct op *next_check;  /* in ops->checks */
    wf_cached_t *wfc;       /* the workflow of a create (a reference held), else NULL */
    struct op *next_waiter; /* in wfc->waiters */
    bool asking;            /* this create asked for wfc's workflow; others wait on it */
    workflow_t *wf;         /* the workflow of a workflow put */
    json_t *post_back_urls; /* array, or NULL when none */
    bool direct;            /* a slot of the local runner is reserved for the job */
    char *direct_queue;     /* ... for a job of this queue */
    bool direct_lost;       /* ... and the create's answer was lost */
    store_args_t fields;    /* the new job's fields as job_create.lua stores them, but for
                             * created_at and exec_after, which its answer decides (the
                             * view of the job is made from them: job_view_new_text) */
    json_text_t view;       /* the answer of a create: the job's view as JSON text */

    /* The caller of a create (the store_op_t answers create_answered): one of */
    job_ops_create_cb created_text; /* job_ops_create_text's, or */
    job_ops_cb created_tree;        /* job_ops_create's */
    void *created_data;
    /* redrive and others */
    char *caller;
    char *from_step;
    json_t *extra;
} op_t;

static void wf_cached_put(wf_cached_t *c)
{
    if (c == NULL || --c->refs > 0)
        return;
    free(c->ref);
    free(c->uuid);
    workflow_free(c->wf);
    free(c->doc);
    job_view_wf_free(c->view);
    free(c);
}

/* The cached workflow named `ref` with a reference for the caller, or NULL. */
static wf_cached_t *wf_cache_get(job_ops_t *ops, const char *ref)
{
    for (size_t i = 0; i < WF_CACHE_SLOTS; i++) {
        wf_cached_t *c = ops->wf_cache[i];
        if (c != NULL && strcmp(c->ref, ref) == 0) {
            c->refs++;
            return c;
        }
    }
    return NULL;
}

/* Caches `wf` (taken) as what `ref` names, replacing an older entry for `ref` or the
 * oldest slot; returns the entry with a reference for the caller. */
static wf_cached_t *wf_cache_add(job_ops_t *ops, const char *ref, const char *uuid, size_t uuid_len,
                                 workflow_t *wf, const redisReply *doc)
{
    wf_cached_t *c = xcalloc(1, sizeof *c);
    c->refs = 2;
    c->ref = xstrdup(ref);
    c->uuid = xstrndup(uuid, uuid_len);
    c->wf = wf;
    c->view = wf != NULL ? job_view_wf_new(wf->doc) : NULL;
    if (doc != NULL) {
        c->doc = xstrndup(doc->str, doc->len);
        c->doc_len = doc->len;
    }
    size_t slot = ops->wf_cache_next;
    for (size_t i = 0; i < WF_CACHE_SLOTS; i++)
        if (ops->wf_cache[i] != NULL && strcmp(ops->wf_cache[i]->ref, ref) == 0)
            slot = i;
    if (slot == ops->wf_cache_next)
        ops->wf_cache_next = (ops->wf_cache_next + 1) % WF_CACHE_SLOTS;
    wf_cached_put(ops->wf_cache[slot]);
    ops->wf_cache[slot] = c;
    return c;
}

/* Takes `c` out of the cache (a loading entry whose question found no workflow), so
 * that the next create asks again. */
static void wf_cache_drop(job_ops_t *ops, wf_cached_t *c)
{
    for (size_t i = 0; i < WF_CACHE_SLOTS; i++) {
        if (ops->wf_cache[i] == c) {
            ops->wf_cache[i] = NULL;
            wf_cached_put(c);
        }
    }
}

static void wake_waiters(op_t *op);
static void create_send(op_t *op);

static void op_dispose(store_op_t *base)
{
    op_t *op = (op_t *)base;
    wake_waiters(op); /* an asking create that ended without its answer (not sent) */
    wf_cached_put(op->wfc);
    free(op->workflow_ref);
    json_decref(op->params);
    free(op->params_text);
    free(op->target);
    free(op->locks);
    lock_check_dispose(&op->check);
    workflow_free(op->wf);
    json_decref(op->post_back_urls);
    store_args_dispose(&op->fields);
    json_text_dispose(&op->view);
    if (op->direct)
        op->ops->local.release(op->ops->local.data, op->direct_lost);
    free(op->direct_queue);
    free(op->caller);
    free(op->from_step);
    json_decref(op->extra);
}

static op_t *op_new(job_ops_t *ops, job_ops_cb cb, void *data)
{
    op_t *op = (op_t *)store_op_new(sizeof *op, cb, data, op_dispose);
    op->ops = ops;
    return op;
}

static void op_send(op_t *op, store_script_t script, store_args_t *a, store_reply_cb cb)
{
    store_op_send(&op->base, op->ops->opts.store, script, a, cb);
}

/* For the top of a write's reply callback: like store_op_failed, but a call whose
 * answer was lost (TERN_EIO: it reached Redis, or may have) is answered TERN_EUNKNOWN,
 * saying that `what` ("the cancel") may have happened and how to find out. */
static bool write_failed(op_t *op, int status, const char *errmsg, const char *what)
{
    if (status != TERN_EIO)
        return store_op_failed(&op->base, status, errmsg);
    store_op_done(&op->base, TERN_EUNKNOWN, NULL, "%s: %s may have been stored; GET /jobs/%s tells",
                  errmsg != NULL ? errmsg : "no answer from Redis", what, op->uuid);
    return true;
}

void job_ops_set_local_runner(job_ops_t *ops, const job_ops_local_runner_t *local)
{
    if (local != NULL)
        ops->local = *local;
    else
        memset(&ops->local, 0, sizeof ops->local);
}

job_ops_t *job_ops_new(const job_ops_opts_t *opts)
{
    job_ops_t *ops = xcalloc(1, sizeof *ops);
    ops->opts = *opts;
    if (ops->opts.max_params_bytes == 0)
        ops->opts.max_params_bytes = 256 * 1024;
    if (ops->opts.max_lock_instructions == 0)
        ops->opts.max_lock_instructions = LOCK_INSTRUCTIONS_DEFAULT;
    ops->locks = lock_table_new();
    ops->checks_tail = &ops->checks;
    return ops;
}

/* Answers every create and retry still waiting for its lock check: nothing of them was
 * sent, so nothing was stored. */
static void checks_abandon(job_ops_t *ops)
{
    while (ops->checks != NULL) {
        op_t *op = ops->checks;
        ops->checks = op->next_check;
        if (ops->checks == NULL)
            ops->checks_tail = &ops->checks;
        store_op_done(&op->base, TERN_ENOTCONN, NULL,
                      "ternd is stopping: the %s was not sent to Redis",
                      op->check_redrive ? "retry" : "create");
    }
}

static void on_check_idle_closed(uv_handle_t *h)
{
    free(h);
}

void job_ops_close(job_ops_t *ops)
{
    if (ops == NULL || ops->closed)
        return;
    ops->closed = true;
    checks_abandon(ops);
    if (ops->check_idle != NULL)
        uv_close((uv_handle_t *)ops->check_idle, on_check_idle_closed);
    ops->check_idle = NULL;
}

void job_ops_free(job_ops_t *ops)
{
    if (ops == NULL)
        return;
    ops->closed = true;
    checks_abandon(ops);
    lock_table_put(ops->locks);
    for (size_t i = 0; i < WF_CACHE_SLOTS; i++)
        wf_cached_put(ops->wf_cache[i]);
    free(ops);
}

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

/* ---- workflows ----------------------------------------------------------------- */

static void on_workflow_put(void *data, int status, const redisReply *reply, const char *errmsg)
{
    op_t *op = data;
    if (status == TERN_EIO) {
        /* Storing a version is idempotent: the same definition again is "unchanged". */
        store_op_done(&op->base, TERN_EUNKNOWN, NULL,
                      "%s: workflow %s version %s may have been stored; sending the same "
                      "definition again is safe",
                      errmsg != NULL ? errmsg : "no answer from Redis", op->wf->name,
                      op->wf->version);
        return;
    }
    if (store_op_failed(&op->base, status, errmsg))
        return;
    const redisReply *kind = store_reply_at(reply, 0), *uuid = store_reply_at(reply, 1);
    const char *name = op->wf->name, *version = op->wf->version;
    if (store_reply_is(kind, "CONFLICT")) {
        store_op_done(&op->base, TERN_EEXIST, NULL,
                      "workflow %s version %s already exists (uuid %s) with a different "
                      "definition; give the new definition a new version",
                      name, version, uuid->str);
        return;
    }
    if (store_reply_is(kind, "TAKEN")) {
        store_op_done(&op->base, TERN_EEXIST, NULL,
                      "uuid: %s already names another workflow version; leave \"uuid\" out to get "
                      "a new one",
                      uuid->str);
        return;
    }
    /* The stored document: an unchanged version has the same canonical text, so it is
     * this one under the uuid it was first stored with. */
    json_t *doc = json_deep_copy(op->wf->doc);
    json_object_set_new(doc, "uuid", json_stringn(uuid->str, uuid->len));
    json_t *res = json_pack(
        "{s:s, s:s, s:s, s:s, s:o}", "uuid", uuid->str, "name", name, "version", version, "status",
        store_reply_is(kind, "SAME") ? "unchanged" : "created", "workflow", doc);
    store_op_done(&op->base, 0, res, NULL);
    json_decref(res);
}

void job_ops_workflow_put(job_ops_t *ops, const json_t *definition, job_ops_cb cb, void *data)
{
    op_t *op = op_new(ops, cb, data);
    /* The size limit of workflow_parse_text holds for documents handed over parsed
     * (the API, the workflows directory) too: this document is frozen into every job. */
    size_t size = definition != NULL ? json_dumpb(definition, NULL, 0, JSON_COMPACT) : 0;
    if (size > WORKFLOW_MAX_BYTES) {
        store_op_done(&op->base, TERN_E2BIG, NULL,
                      "workflow: %zu bytes, over the limit of %d bytes (WORKFLOW_MAX_BYTES)", size,
                      WORKFLOW_MAX_BYTES);
        return;
    }
    char err[1024];
    int rc = workflow_parse(definition, ops->opts.plugins ? plugin_registry_check_task : NULL,
                            ops->opts.plugins, &op->wf, err, sizeof err);
    if (rc != 0) {
        /* An unknown task is a fault of the definition (bad input); TERN_ENOENT means an
         * unknown workflow or job to callers of job_ops. */
        store_op_done(&op->base, rc == TERN_ENOENT ? TERN_EINVAL : rc, NULL, "%s", err);
        return;
    }
    json_t *doc = json_deep_copy(op->wf->doc);
    const char *given = json_string_value(json_object_get(doc, "uuid"));
    char uuid[40];
    if (given != NULL)
        snprintf(uuid, sizeof uuid, "%s", given);
    else
        uuid_v4(uuid);
    json_object_del(doc, "uuid");
    char *canon = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    json_object_set_new(doc, "uuid", json_string(uuid));
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, uuid);
    store_args_push(&a, op->wf->name);
    store_args_push(&a, op->wf->version);
    store_args_push_json(&a, doc);
    store_args_push(&a, canon);
    free(canon);
    json_decref(doc);
    op_send(op, SCRIPT_WORKFLOW_PUT, &a, on_workflow_put);
}

static void on_workflow_get(void *data, int status, const redisReply *reply, const char *errmsg)
{
    op_t *op = data;
    if (store_op_failed(&op->base, status, errmsg))
        return;
    const redisReply *doc = store_reply_at(reply, 1);
    if (doc == NULL) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "workflow \"%s\" does not exist",
                      op->workflow_ref);
        return;
    }
    json_t *v = json_loadb(doc->str, doc->len, 0, NULL);
    store_op_done(&op->base, 0, v, NULL);
    json_decref(v);
}

void job_ops_workflow_get(job_ops_t *ops, const char *ref, job_ops_cb cb, void *data)
{
    op_t *op = op_new(ops, cb, data);
    op->workflow_ref = xstrdup(ref);
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, ref);
    op_send(op, SCRIPT_WORKFLOW_GET, &a, on_workflow_get);
}

/* ---- job create ---------------------------------------------------------------- */

/* Replaces the lock table with the one of a LOCKS answer ({'LOCKS', version, job,
 * pattern, ...}); checks in progress keep the snapshot they began on. */
static void locks_refresh(job_ops_t *ops, const redisReply *reply)
{
    lock_table_t *t = lock_table_from_reply(ops->locks, reply);
    lock_table_put(ops->locks);
    ops->locks = t;
}

/* A create's or retry's call answered with the current table of locks (the one this
 * process held was stale): keep it, and send the operation again with `resend`, which
 * matches the target against it, unless the table kept changing under it. */
static void on_locks_answer(op_t *op, const redisReply *reply, void (*resend)(op_t *))
{
    locks_refresh(op->ops, reply);
    op->locks_fresh = true;
    if (++op->tries >= CREATE_TRIES) {
        store_op_done(&op->base, TERN_EIO, NULL, "job locks keep changing; try again");
        return;
    }
    resend(op);
}

/* After a create that asked for its workflow got its answer (or ended without one):
 * returns the creates that waited on the entry, in the order they were made, and
 * clears the question; the caller sends them with send_waiters. An entry the answer
 * left without a workflow leaves the cache, and each waiter asks for itself. */
static op_t *take_waiters(op_t *op)
{
    wf_cached_t *c = op->wfc;
    if (!op->asking)
        return NULL;
    op->asking = false;
    c->asked = false;
    if (c->wf == NULL)
        wf_cache_drop(op->ops, c);
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

static void wake_waiters(op_t *op)
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

/* Answers a LOCKCAP answer ({'LOCKCAP', instructions held, cap, ...}): the lock of
 * `size` instructions would take the locks of unfinished jobs past the cap. */
static void lock_cap_refused(op_t *op, const redisReply *reply, size_t size, const char *what)
{
    store_op_done(&op->base, TERN_EAGAIN, NULL,
                  "locks: the locks of unfinished jobs hold %lld instructions; this one's %zu "
                  "would pass the cap of %lld (max_lock_instructions in the config file); %s, "
                  "try again once locked jobs end",
                  store_reply_int(store_reply_at(reply, 1), 0), size,
                  store_reply_int(store_reply_at(reply, 2), 0), what);
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
        char err[1024];
        workflow_t *wf = NULL;
        if (workflow_parse_text(doc->str, doc->len, NULL, NULL, &wf, err, sizeof err) != 0) {
            wake_waiters(op);
            store_op_done(&op->base, TERN_EINVAL, NULL, "stored workflow %.*s is invalid: %s",
                          (int)uuid->len, uuid->str, err);
            return;
        }
        wf_cached_t *c = op->wfc;
        if (c != NULL && c->wf == NULL) {
            /* The answer the entry waited for. */
            free(c->uuid);
            c->uuid = xstrndup(uuid->str, uuid->len);
            c->wf = wf;
            c->view = job_view_wf_new(wf->doc);
            c->doc = xstrndup(doc->str, doc->len);
            c->doc_len = doc->len;
        } else {
            /* The reference names another version now: a new entry. */
            wf_cached_put(c);
            op->wfc = wf_cache_add(op->ops, op->workflow_ref, uuid->str, uuid->len, wf, doc);
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
    const redisReply *now_r = store_reply_at(reply, 1), *snapshot = store_reply_at(reply, 2);
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
    } else if (now_r != NULL && op->wfc != NULL && op->wfc->wf != NULL) {
        long long now = store_reply_int(now_r, 0);
        bool started = store_reply_is(kind, "RUN") && op->direct;
        store_args_push(&op->fields, "created_at");
        store_args_push_u64(&op->fields, (uint64_t)now);
        if (op->exec_after_ms > (uint64_t)now) {
            store_args_push(&op->fields, "exec_after");
            store_args_push_u64(&op->fields, op->exec_after_ms);
        }
        /* The answer shows the job as created, queued, even when it started in the
         * same step: node-workflow's clients require it (wf-client asserts that a new
         * job is queued); a read shows it running. */
        job_view_new_text(&op->fields, now, op->wfc->view, &op->view);
        shown = true;
        if (started) {
            /* The runner runs it from its fields as job_create.lua started it. */
            replace_field(&op->fields, "execution", "running");
            const char *id = op->ops->local.id;
            const char *more[] = {"fence", "1", "runner", id, "started_by", id};
            for (size_t i = 0; i < TERN_ARRAY_SIZE(more); i++)
                store_args_push(&op->fields, more[i]);
            store_args_push(&op->fields, "started_at");
            store_args_push_u64(&op->fields, (uint64_t)now);
            if (op->wfc->wf->timeout_ms > 0) {
                store_args_push(&op->fields, "deadline");
                store_args_push_u64(&op->fields, (uint64_t)now + op->wfc->wf->timeout_ms);
            }
            op->direct = false;
            op->ops->local.start(op->ops->local.data, op->uuid, &op->fields, op->wfc->doc,
                                 op->wfc->doc_len, now);
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

/* The workflow's holds for the new job, expanded against its params and job fields:
 * 0 and *out the lines job_create.lua stores (malloc'd; NULL when they are empty), or
 * TERN_EINVAL with the message in err. Only for a workflow with holds. */
static int create_holds(op_t *op, char **out, char *err, size_t errlen)
{
    const workflow_t *wf = op->wfc->wf;
    json_t *scope_job =
        json_pack("{s:s, s:s?, s:s}", "uuid", op->uuid, "target", op->target, "workflow", wf->name);
    template_scope_t sc = {.params = create_params(op), .job = scope_job};
    char *holds = holds_expand(wf->holds, wf->n_holds, &sc, err, errlen);
    json_decref(scope_job);
    if (holds == NULL)
        return TERN_EINVAL;
    if (holds[0] == '\0') {
        free(holds);
        holds = NULL;
    }
    *out = holds;
    return 0;
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

static void create_write(op_t *op, const char *locks_version);
static void redrive_write(op_t *op, const char *locks_version);
static void checks_run(job_ops_t *ops);

static void on_check_idle(uv_idle_t *h)
{
    checks_run(h->data);
}

/* A create or retry whose check ended: refused when its target matched a lock of a
 * table read by its own round trip; else sent with the version it was checked against.
 * A table may be stale (the locking job may have ended since it was read): on a match
 * in a table not read for this operation, the table is marked stale, so that the script
 * answers with the current one instead of writing, and the operation checks again. */
static void check_done(op_t *op, int outcome)
{
    const lock_entry_t *lock = outcome == LOCK_MATCH_YES ? lock_check_match(&op->check) : NULL;
    if (lock != NULL && op->locks_fresh) {
        /* op_dispose drops the check, and the lock it names, after the answer. */
        store_op_done(&op->base, TERN_EEXIST, NULL,
                      "job target \"%s\" is locked by job %s (locks \"%s\")", op->target, lock->job,
                      lock->pattern);
        return;
    }
    if (lock != NULL)
        op->check.table->stale = true;
    char version[32];
    snprintf(version, sizeof version, "%s", lock_table_version(op->check.table));
    lock_check_dispose(&op->check);
    if (op->check_redrive)
        redrive_write(op, version);
    else
        create_write(op, version);
}

/* Works through the queue of checks for one slice of LOCK_SLICE_STEPS (all of it when
 * the operations have no loop): each finished check sends or answers its operation,
 * in the order they were queued. Runs again from the idle handle while checks wait. */
static void checks_run(job_ops_t *ops)
{
    uint64_t budget = ops->opts.loop != NULL ? LOCK_SLICE_STEPS : UINT64_MAX;
    ops->checking = true;
    while (ops->checks != NULL && !ops->closed) {
        op_t *op = ops->checks;
        int outcome = lock_check_run(&op->check, &budget);
        if (outcome == LOCK_MATCH_MORE)
            break;
        ops->checks = op->next_check;
        if (ops->checks == NULL)
            ops->checks_tail = &ops->checks;
        op->next_check = NULL;
        check_done(op, outcome); /* may end and free op, and queue others */
        if (budget == 0)
            break;
    }
    ops->checking = false;
    if (ops->closed)
        return;
    if (ops->checks != NULL && ops->check_idle == NULL) {
        ops->check_idle = xcalloc(1, sizeof *ops->check_idle);
        uv_idle_init(ops->opts.loop, ops->check_idle);
        ops->check_idle->data = ops;
    }
    if (ops->checks != NULL)
        uv_idle_start(ops->check_idle, on_check_idle);
    else if (ops->check_idle != NULL)
        uv_idle_stop(ops->check_idle);
}

/* Queues the check of op->target (NULL: nothing to check, but the operation still
 * keeps its turn) against the latest table, skipping job `self`'s own lock. The first
 * slice runs at once when nothing waits ahead of it, so a cheap check is done before
 * this returns (and may have ended op). */
static void check_queue(op_t *op, const char *self, bool redrive)
{
    job_ops_t *ops = op->ops;
    if (ops->closed) {
        store_op_done(&op->base, TERN_ENOTCONN, NULL,
                      "ternd is stopping: the %s was not sent to Redis",
                      redrive ? "retry" : "create");
        return;
    }
    if (op->direct) {
        /* The slot of the local runner is taken again when the create is sent: a
         * check may take a while, and the runner may stop meanwhile. */
        ops->local.release(ops->local.data, false);
        op->direct = false;
    }
    lock_check_begin(&op->check, ops->locks, op->target, self);
    op->check_redrive = redrive;
    op->next_check = NULL;
    bool first = ops->checks == NULL;
    *ops->checks_tail = op;
    ops->checks_tail = &op->next_check;
    if (first && !ops->checking)
        checks_run(ops);
}

static void create_send(op_t *op)
{
    if (op->wfc == NULL || op->wfc->wf == NULL) {
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
    /* node-workflow's lock rule: a target matching the locks of an unfinished job is
     * refused while that job runs. */
    check_queue(op, NULL, false);
}

/* Sends job_create.lua for a create whose target was checked against the locks of
 * version `locks_version`. */
static void create_write(op_t *op, const char *locks_version)
{
    job_ops_t *ops = op->ops;
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, op->workflow_ref);
    store_args_push(&a, op->wfc->uuid);
    const workflow_t *wf = op->wfc->wf;
    char herr[512];
    char *holds = NULL;
    if (wf->n_holds > 0 && create_holds(op, &holds, herr, sizeof herr) != 0) {
        store_args_dispose(&a);
        store_op_done(&op->base, TERN_EINVAL, NULL, "%s", herr);
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
        op->exec_after_ms <= clock_wall_ms() && op->wfc->doc != NULL) {
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
    field_push(op, &a, "workflow_uuid", op->wfc->uuid);
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
    if (wf->n_steps[WF_ONCANCEL] > 0)
        field_push(op, &a, "has_oncancel", "1");
    if (op->post_back_urls != NULL) {
        char *urls = json_dumps(op->post_back_urls, JSON_COMPACT);
        field_push(op, &a, "post_back_urls", urls != NULL ? urls : "");
        free(urls);
    }
    free(holds);
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
                         message);
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
    op->workflow_ref = xstrdup(req->workflow);
    op->target = req->target != NULL ? xstrdup(req->target) : NULL;
    op->exec_after_ms = req->exec_after_ms;
    wf_cached_t *c = wf_cache_get(ops, op->workflow_ref);
    if (c == NULL)
        c = wf_cache_add(ops, op->workflow_ref, "", 0, NULL, NULL);
    op->wfc = c;
    if (c->wf == NULL && c->asked) {
        op->next_waiter = c->waiters;
        c->waiters = op;
        return;
    }
    if (c->wf == NULL)
        c->asked = op->asking = true;
    create_send(op);
}

/* ---- reads and operator actions ------------------------------------------------ */

static void on_job_get(void *data, int status, const redisReply *reply, const char *errmsg)
{
    op_t *op = data;
    if (store_op_failed(&op->base, status, errmsg))
        return;
    json_t *view = job_view_from_reply(reply);
    if (view == NULL) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "job %s does not exist", op->uuid);
        return;
    }
    store_op_done(&op->base, 0, view, NULL);
    json_decref(view);
}

static op_t *op_for_job(job_ops_t *ops, const char *uuid, job_ops_cb cb, void *data)
{
    op_t *op = op_new(ops, cb, data);
    if (uuid == NULL || !uuid_valid(uuid)) {
        store_op_done(&op->base, TERN_EINVAL, NULL, "\"%s\" is not a job UUID", uuid ? uuid : "");
        return NULL;
    }
    snprintf(op->uuid, sizeof op->uuid, "%s", uuid);
    return op;
}

/* Runs `script` with the job's uuid as its one argument; on_reply answers. */
static void send_for_job(job_ops_t *ops, const char *uuid, job_ops_cb cb, void *data,
                         store_script_t script, store_reply_cb on_reply)
{
    op_t *op = op_for_job(ops, uuid, cb, data);
    if (op == NULL)
        return;
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, uuid);
    op_send(op, script, &a, on_reply);
}

void job_ops_get(job_ops_t *ops, const char *uuid, job_ops_cb cb, void *data)
{
    send_for_job(ops, uuid, cb, data, SCRIPT_JOB_GET, on_job_get);
}

static void on_events_open(void *data, int status, const redisReply *reply, const char *errmsg)
{
    op_t *op = data;
    if (store_op_failed(&op->base, status, errmsg))
        return;
    if (store_reply_int(reply, 0) != 1) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "job %s does not exist", op->uuid);
        return;
    }
    store_op_done(&op->base, 0, NULL, NULL);
}

void job_ops_events_open(job_ops_t *ops, const char *uuid, job_ops_cb cb, void *data)
{
    send_for_job(ops, uuid, cb, data, SCRIPT_JOB_EVENTS_OPEN, on_events_open);
}

static json_t *history_entry(const char *action, const char *caller, const json_t *changes)
{
    char iso[32];
    iso8601_format(clock_wall_ms(), iso);
    json_t *h = json_pack("{s:s, s:s, s:s}", "action", action, "time", iso, "caller",
                          caller != NULL ? caller : "unknown");
    if (changes != NULL)
        json_object_set(h, "changes", (json_t *)changes);
    return h;
}

/* Answers an operator action that was stored: {"uuid", "execution": the job's
 * execution now}. */
static void answer_execution(op_t *op, const char *execution)
{
    json_t *res = json_pack("{s:s, s:s}", "uuid", op->uuid, "execution", execution);
    store_op_done(&op->base, 0, res, NULL);
    json_decref(res);
}

static void on_job_cancel(void *data, int status, const redisReply *reply, const char *errmsg)
{
    op_t *op = data;
    if (write_failed(op, status, errmsg, "the cancel"))
        return;
    const redisReply *kind = store_reply_at(reply, 0);
    if (store_reply_is(kind, "NOTFOUND")) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "job %s does not exist", op->uuid);
    } else if (store_reply_is(kind, "FINISHED")) {
        store_op_done(&op->base, TERN_EBUSY, NULL,
                      "job %s already finished (%s); nothing to cancel", op->uuid,
                      store_reply_at(reply, 1)->str);
    } else {
        answer_execution(op, store_reply_is(kind, "CANCELED") ? "canceled" : "canceling");
    }
}

void job_ops_cancel(job_ops_t *ops, const char *uuid, const char *caller, job_ops_cb cb, void *data)
{
    op_t *op = op_for_job(ops, uuid, cb, data);
    if (op == NULL)
        return;
    json_t *h = history_entry("cancel", caller, NULL);
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, uuid);
    store_args_push_json(&a, h);
    json_decref(h);
    op_send(op, SCRIPT_JOB_CANCEL, &a, on_job_cancel);
}

static void on_job_resume(void *data, int status, const redisReply *reply, const char *errmsg)
{
    op_t *op = data;
    if (write_failed(op, status, errmsg, "the resume"))
        return;
    const redisReply *kind = store_reply_at(reply, 0);
    if (store_reply_is(kind, "NOTFOUND")) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "job %s does not exist", op->uuid);
    } else if (store_reply_is(kind, "NOTWAITING")) {
        store_op_done(&op->base, TERN_EBUSY, NULL,
                      "job %s is %s, not waiting; only a waiting job can be resumed", op->uuid,
                      store_reply_at(reply, 1)->str);
    } else {
        answer_execution(op, "queued");
    }
}

void job_ops_resume(job_ops_t *ops, const char *uuid, const json_t *result, const json_t *error,
                    const char *caller, job_ops_cb cb, void *data)
{
    op_t *op = op_for_job(ops, uuid, cb, data);
    if (op == NULL)
        return;
    json_t *outcome;
    if (error != NULL) {
        if (!json_is_object(error) || !json_is_string(json_object_get(error, "code"))) {
            store_op_done(&op->base, TERN_EINVAL, NULL,
                          "error: expected an object with a string \"code\"");
            return;
        }
        outcome = json_pack("{s:O}", "error", error);
    } else {
        outcome = json_pack("{s:O}", "result", result != NULL ? result : json_null());
    }
    json_t *h = history_entry("resume", caller, outcome);
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, uuid);
    store_args_push_json(&a, outcome);
    store_args_push_json(&a, h);
    json_decref(h);
    json_decref(outcome);
    op_send(op, SCRIPT_JOB_RESUME, &a, on_job_resume);
}

static void redrive_send(op_t *op);

static void on_job_redrive(void *data, int status, const redisReply *reply, const char *errmsg)
{
    op_t *op = data;
    if (write_failed(op, status, errmsg, "the retry"))
        return;
    const redisReply *kind = store_reply_at(reply, 0);
    if (store_reply_is(kind, "LOCKS")) {
        on_locks_answer(op, reply, redrive_send);
        return;
    }
    if (store_reply_is(kind, "NOTFOUND")) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "job %s does not exist", op->uuid);
    } else if (store_reply_is(kind, "BADSTATE")) {
        store_op_done(&op->base, TERN_EBUSY, NULL, REDRIVE_REFUSED_FMT, op->uuid,
                      store_reply_at(reply, 1)->str);
    } else if (store_reply_is(kind, "CONFLICT")) {
        store_op_done(&op->base, TERN_EEXIST, NULL,
                      "another job with the same target and params is not finished yet: %s",
                      store_reply_at(reply, 1)->str);
    } else if (store_reply_is(kind, "LOCKCAP")) {
        lock_cap_refused(op, reply, (size_t)store_reply_int(store_reply_at(reply, 3), 0),
                         "the job was not retried");
    } else {
        answer_execution(op, "queued");
    }
}

/* With the job read: pick the step, merge params, send job_redrive.lua. */
static void on_redrive_read(void *data, int status, const redisReply *reply, const char *errmsg)
{
    op_t *op = data;
    if (store_op_failed(&op->base, status, errmsg))
        return;
    json_t *view = job_view_from_reply(reply);
    if (view == NULL) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "job %s does not exist", op->uuid);
        return;
    }
    const char *ex = json_string_value(json_object_get(view, "execution"));
    if (ex == NULL || (strcmp(ex, "failed") != 0 && strcmp(ex, "canceled") != 0)) {
        store_op_done(&op->base, TERN_EBUSY, NULL, REDRIVE_REFUSED_FMT, op->uuid, ex ? ex : "?");
        json_decref(view);
        return;
    }
    json_t *chain = json_object_get(view, "chain");
    size_t idx = json_array_size(json_object_get(view, "chain_results"));
    if (op->from_step != NULL) {
        size_t i;
        json_t *s;
        bool found = false;
        json_array_foreach(chain, i, s)
        {
            const char *sname = json_string_value(json_object_get(s, "name"));
            if (sname != NULL && strcmp(sname, op->from_step) == 0) {
                idx = i;
                found = true;
                break;
            }
        }
        if (!found) {
            store_op_done(&op->base, TERN_EINVAL, NULL, "step \"%s\" is not in the chain of job %s",
                          op->from_step, op->uuid);
            json_decref(view);
            return;
        }
        /* Steps that succeeded; the entry of the step that failed does not count, or a
         * retry could start after it and skip the failed step with its error kept as
         * its result. */
        json_t *results = json_object_get(view, "chain_results");
        size_t done = json_array_size(results);
        json_t *last = json_array_get(results, done - 1);
        if (last != NULL && !json_is_null(json_object_get(last, "error")))
            done--;
        if (idx > done) {
            store_op_done(&op->base, TERN_EINVAL, NULL,
                          "step \"%s\" comes after the step that failed; "
                          "retry from step %zu at the latest",
                          op->from_step, done);
            json_decref(view);
            return;
        }
    } else {
        /* The failed step: the last recorded chain step if it failed, else the next one. */
        json_t *results = json_object_get(view, "chain_results");
        json_t *last = json_array_get(results, json_array_size(results) - 1);
        if (last != NULL && !json_is_null(json_object_get(last, "error")))
            idx = json_array_size(results) - 1;
        if (idx >= json_array_size(chain))
            idx = json_array_size(chain) > 0 ? json_array_size(chain) - 1 : 0;
    }
    json_t *params = json_deep_copy(json_object_get(view, "params"));
    if (!json_is_object(params)) {
        json_decref(params);
        params = json_object();
    }
    if (op->extra != NULL)
        json_object_update(params, op->extra);
    const char *target = json_string_value(json_object_get(view, "target"));
    op->target = target != NULL ? xstrdup(target) : NULL;
    char unique[33] = "";
    if (target != NULL)
        job_ops_unique_key(json_string_value(json_object_get(view, "name")), target, params,
                           unique);
    json_t *changes = json_pack("{s:I, s:s?, s:O?}", "from_index", (json_int_t)idx, "from_step",
                                op->from_step, "params", op->extra);
    json_t *h = history_entry("retry", op->caller, changes);
    /* Kept in op->fields: the script is sent again when the lock table was stale. */
    store_args_t *a = &op->fields;
    store_args_push(a, op->uuid);
    store_args_pushf(a, "%zu", idx);
    if (op->extra != NULL)
        store_args_push_json(a, params);
    else
        store_args_push(a, "");
    store_args_push(a, unique);
    store_args_push_json(a, h);
    json_decref(h);
    json_decref(changes);
    json_decref(params);
    json_decref(view);
    redrive_send(op);
}

/* Checks the job's target against the locks of unfinished jobs, then sends
 * job_redrive.lua (redrive_write): a retry is refused as a create of that target would
 * be, and nothing is written. Only the target is checked, as at create: the job's own
 * locks are not matched against the targets of jobs that started while it had ended
 * (README, Jobs). */
static void redrive_send(op_t *op)
{
    check_queue(op, op->uuid, true);
}

/* Sends job_redrive.lua with the arguments in op->fields, the version of the lock table
 * the target was checked against and the cap on the size of locks. */
static void redrive_write(op_t *op, const char *locks_version)
{
    store_args_t a;
    store_args_init(&a);
    for (size_t i = 0; i < op->fields.n; i++)
        store_args_pushb(&a, op->fields.v[i], op->fields.len[i]);
    store_args_push(&a, locks_version);
    store_args_push_u64(&a, op->ops->opts.max_lock_instructions);
    op_send(op, SCRIPT_JOB_REDRIVE, &a, on_job_redrive);
}

void job_ops_redrive(job_ops_t *ops, const char *uuid, const char *from_step, const json_t *params,
                     const char *caller, job_ops_cb cb, void *data)
{
    op_t *op = op_for_job(ops, uuid, cb, data);
    if (op == NULL)
        return;
    if (params != NULL && !json_is_object(params)) {
        store_op_done(&op->base, TERN_EINVAL, NULL, "params: expected an object");
        return;
    }
    op->from_step = from_step != NULL ? xstrdup(from_step) : NULL;
    op->extra = params != NULL ? json_deep_copy(params) : NULL;
    op->caller = caller != NULL ? xstrdup(caller) : NULL;
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, uuid);
    op_send(op, SCRIPT_JOB_GET, &a, on_redrive_read);
}
