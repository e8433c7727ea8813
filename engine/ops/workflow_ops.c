/*
 * workflow_ops.c -- every operation on workflows: storing, reading, listing, replacing
 * and deleting them; see workflow_ops.h.
 *
 * Ownership: each operation in flight is one heap object (wf_op_t, a store_op_t; see
 * store_op.h) owning copies of its inputs, freed right after its callback ran.
 */
#include "ops/workflow_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/ident.h"
#include "model/workflow.h"
#include "ops/job_ops_internal.h"
#include "ops/list_page.h"
#include "ops/schedule_ops.h"
#include "ops/store_op.h"

typedef struct wf_op {
    store_op_t base; /* first: the reply callbacks' data is both */
    job_ops_t *ops;
    char *ref;
    json_t *definition;
    workflow_t *wf; /* the workflow of a put */
    json_t *result; /* a put's answer while its schedules are installed */
} wf_op_t;

static void wf_op_dispose(store_op_t *base)
{
    wf_op_t *op = (wf_op_t *)base;
    free(op->ref);
    json_decref(op->definition);
    workflow_free(op->wf);
    json_decref(op->result);
}

static wf_op_t *wf_op_new(job_ops_cb cb, void *data)
{
    return (wf_op_t *)store_op_new(sizeof(wf_op_t), cb, data, wf_op_dispose);
}

/* ---- put and get --------------------------------------------------------------- */

static void on_schedules_installed(void *data, int status, const json_t *result,
                                   const char *message)
{
    wf_op_t *op = data;
    if (status != 0) {
        store_op_done(&op->base, status, NULL,
                      "workflow %s version %s is stored, but its schedules are not: %s",
                      op->wf->name, op->wf->version, message != NULL ? message : "?");
        return;
    }
    json_object_set(op->result, "schedules", json_object_get(result, "schedules"));
    store_op_done(&op->base, 0, op->result, NULL);
}

static void on_workflow_put(void *data, int status, const redisReply *reply, const char *errmsg)
{
    wf_op_t *op = data;
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
    const json_t *schedules = json_object_get(op->wf->doc, "schedules");
    if (json_array_size(schedules) == 0 || op->ops == NULL) {
        store_op_done(&op->base, 0, res, NULL);
        json_decref(res);
        return;
    }
    /* The version is stored: now its schedules (again: each is keyed by its name, so an
     * unchanged one stays as it is). A failure here is answered as the put's, and
     * storing the same definition again installs them. */
    op->result = res;
    schedule_ops_install(op->ops, name, schedules, on_schedules_installed, op);
}

void workflow_ops_put(job_ops_t *ops, const json_t *definition, job_ops_cb cb, void *data)
{
    wf_op_t *op = wf_op_new(cb, data);
    op->ops = ops;
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
    store_op_send(&op->base, ops->opts.store, SCRIPT_WORKFLOW_PUT, &a, on_workflow_put);
}

static void on_workflow_get(void *data, int status, const redisReply *reply, const char *errmsg)
{
    wf_op_t *op = data;
    if (store_op_failed(&op->base, status, errmsg))
        return;
    const redisReply *doc = store_reply_at(reply, 1);
    if (doc == NULL) {
        store_op_done(&op->base, TERN_ENOENT, NULL, "workflow \"%s\" does not exist", op->ref);
        return;
    }
    json_t *v = json_loadb(doc->str, doc->len, 0, NULL);
    store_op_done(&op->base, 0, v, NULL);
    json_decref(v);
}

void workflow_ops_get(store_t *store, const char *ref, job_ops_cb cb, void *data)
{
    wf_op_t *op = wf_op_new(cb, data);
    op->ref = xstrdup(ref);
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, ref);
    store_op_send(&op->base, store, SCRIPT_WORKFLOW_GET, &a, on_workflow_get);
}

/* ---- list ---------------------------------------------------------------------- */

static void on_workflow_list(void *data, int status, const redisReply *reply, const char *errmsg)
{
    wf_op_t *op = data;
    if (store_op_failed(&op->base, status, errmsg))
        return;
    const redisReply *time = store_reply_at(reply, 0), *uuid = store_reply_at(reply, 1);
    const redisReply *docs = store_reply_at(reply, 2);
    json_t *list = json_array();
    for (size_t i = 0; docs != NULL && i < docs->elements; i++) {
        json_t *doc = json_loadb(docs->element[i]->str, docs->element[i]->len, 0, NULL);
        if (doc != NULL)
            json_array_append_new(list, doc);
    }
    json_t *res = json_pack("{s:o, s:o}", "workflows", list, "next_marker",
                            list_page_next_marker(time, uuid));
    store_op_done(&op->base, 0, res, NULL);
    json_decref(res);
}

void workflow_ops_list(store_t *store, const workflow_list_req_t *req, job_ops_cb cb, void *data)
{
    wf_op_t *op = wf_op_new(cb, data);
    char err[256], mtime[24] = "", muuid[40] = "";
    if (req->marker != NULL &&
        list_page_marker_parse(req->marker, mtime, muuid, err, sizeof err) != 0) {
        store_op_done(&op->base, TERN_EINVAL, NULL, "%s", err);
        return;
    }
    size_t limit = req->limit == 0 ? WORKFLOW_LIST_LIMIT_DEFAULT : req->limit;
    if (limit > WORKFLOW_LIST_LIMIT_MAX)
        limit = WORKFLOW_LIST_LIMIT_MAX;
    store_args_t a;
    store_args_init(&a);
    store_args_pushf(&a, "%zu", limit);
    store_args_push(&a, mtime);
    store_args_push(&a, muuid);
    store_args_pushf(&a, "%zu", limit + LIST_PAGE_BUDGET);
    store_args_push(&a, req->name != NULL ? req->name : "");
    store_args_push(&a, req->version != NULL ? req->version : "");
    store_op_send(&op->base, store, SCRIPT_WORKFLOW_LIST, &a, on_workflow_list);
}

/* ---- replace ------------------------------------------------------------------- */

static void on_replaced(void *data, int status, const json_t *result, const char *message)
{
    wf_op_t *op = data;
    if (status == 0)
        store_op_done(&op->base, 0, result, NULL);
    else
        store_op_done(&op->base, status, NULL, "%s", message != NULL ? message : "");
}

/* With the stored version read: fill in what the PUT left out, check that it
 * replaces this workflow and not another, and store it. */
static void on_replace_read(void *data, int status, const json_t *stored, const char *message)
{
    wf_op_t *op = data;
    if (status != 0) {
        store_op_done(&op->base, status, NULL, "%s", message != NULL ? message : "");
        return;
    }
    json_t *def = op->definition;
    const char *stored_uuid = json_string_value(json_object_get(stored, "uuid"));
    const char *stored_name = json_string_value(json_object_get(stored, "name"));
    json_t *name = json_object_get(def, "name"), *uuid = json_object_get(def, "uuid");
    if (stored_uuid == NULL || stored_name == NULL) {
        store_op_done(&op->base, TERN_EIO, NULL, "stored workflow \"%s\" has no uuid or name",
                      op->ref);
        return;
    }
    if (name == NULL) {
        json_object_set(def, "name", json_object_get(stored, "name"));
    } else if (json_is_string(name) && strcmp(json_string_value(name), stored_name) != 0) {
        store_op_done(&op->base, TERN_EINVAL, NULL,
                      "name: \"%s\" is not the name of workflow %s (\"%s\"); a PUT replaces a "
                      "workflow, POST /workflows stores another one",
                      json_string_value(name), stored_uuid, stored_name);
        return;
    }
    if (uuid != NULL &&
        !(json_is_string(uuid) && strcmp(json_string_value(uuid), stored_uuid) == 0)) {
        store_op_done(&op->base, TERN_EINVAL, NULL,
                      "uuid: the definition names another workflow than %s", stored_uuid);
        return;
    }
    /* A new version gets a uuid of its own; the same version keeps the stored one. */
    json_object_del(def, "uuid");
    if (json_object_get(def, "version") == NULL)
        json_object_set(def, "version", json_object_get(stored, "version"));
    workflow_ops_put(op->ops, def, on_replaced, op);
}

void workflow_ops_replace(job_ops_t *ops, const char *ref, const json_t *definition, job_ops_cb cb,
                          void *data)
{
    wf_op_t *op = wf_op_new(cb, data);
    if (!json_is_object(definition)) {
        store_op_done(&op->base, TERN_EINVAL, NULL,
                      "body: a workflow definition (an object) is required");
        return;
    }
    op->ops = ops;
    op->ref = xstrdup(ref);
    op->definition = json_deep_copy(definition);
    workflow_ops_get(ops->opts.store, ref, on_replace_read, op);
}

/* ---- delete -------------------------------------------------------------------- */

static void on_workflow_delete(void *data, int status, const redisReply *reply, const char *errmsg)
{
    wf_op_t *op = data;
    if (status == TERN_EIO) {
        store_op_done(&op->base, TERN_EUNKNOWN, NULL,
                      "%s: workflow \"%s\" may have been deleted; GET /workflows/%s tells",
                      errmsg != NULL ? errmsg : "no answer from Redis", op->ref, op->ref);
        return;
    }
    if (store_op_failed(&op->base, status, errmsg))
        return;
    if (!store_reply_is(store_reply_at(reply, 0), "DELETED")) {
        bool by_name = !uuid_valid(op->ref) && strchr(op->ref, '@') == NULL;
        store_op_done(&op->base, TERN_ENOENT, NULL, "workflow \"%s\" does not exist%s", op->ref,
                      by_name ? " (a DELETE names one version: its uuid or name@version)" : "");
        return;
    }
    const redisReply *u = store_reply_at(reply, 1), *n = store_reply_at(reply, 2),
                     *v = store_reply_at(reply, 3);
    json_t *res = json_pack("{s:s%, s:s%, s:s%}", "uuid", u->str, u->len, "name", n->str, n->len,
                            "version", v->str, v->len);
    store_op_done(&op->base, 0, res, NULL);
    json_decref(res);
}

void workflow_ops_delete(store_t *store, const char *ref, job_ops_cb cb, void *data)
{
    wf_op_t *op = wf_op_new(cb, data);
    op->ref = xstrdup(ref);
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, ref);
    store_op_send(&op->base, store, SCRIPT_WORKFLOW_DELETE, &a, on_workflow_delete);
}
