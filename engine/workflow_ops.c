/*
 * workflow_ops.c -- listing, replacing and deleting workflows; see workflow_ops.h.
 *
 * Ownership: each operation in flight is one heap object (wf_op_t) owning copies of
 * its inputs, freed right after its callback ran.
 */
#include "workflow_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "list_page.h"

typedef struct wf_op {
    job_ops_t *ops;
    job_ops_cb cb;
    void *data;
    char *ref;
    json_t *definition;
} wf_op_t;

static wf_op_t *wf_op_new(job_ops_cb cb, void *data)
{
    wf_op_t *op = xcalloc(1, sizeof *op);
    op->cb = cb;
    op->data = data;
    return op;
}

static void wf_op_done(wf_op_t *op, int status, const json_t *result, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void wf_op_done(wf_op_t *op, int status, const json_t *result, const char *fmt, ...)
{
    char msg[1024] = "";
    if (fmt != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
    }
    op->cb(op->data, status, result, fmt != NULL ? msg : NULL);
    free(op->ref);
    json_decref(op->definition);
    free(op);
}

static void wf_op_send(wf_op_t *op, store_t *store, store_script_t script, store_args_t *a,
                       store_reply_cb on_reply)
{
    int rc = store_eval(store, script, a, on_reply, op);
    store_args_dispose(a);
    if (rc != 0)
        wf_op_done(op, rc, NULL, "Redis is not reachable");
}

/* ---- list ---------------------------------------------------------------------- */

static void on_workflow_list(void *data, int status, const redisReply *reply, const char *errmsg)
{
    wf_op_t *op = data;
    if (status != 0) {
        wf_op_done(op, status, NULL, "%s", errmsg);
        return;
    }
    const redisReply *time = store_reply_at(reply, 0), *uuid = store_reply_at(reply, 1);
    const redisReply *docs = store_reply_at(reply, 2);
    json_t *list = json_array();
    for (size_t i = 0; docs != NULL && i < docs->elements; i++) {
        json_t *doc = json_loadb(docs->element[i]->str, docs->element[i]->len, 0, NULL);
        if (doc != NULL)
            json_array_append_new(list, doc);
    }
    json_t *next = NULL;
    if (time != NULL && time->type == REDIS_REPLY_STRING && time->len > 0 && uuid != NULL &&
        uuid->type == REDIS_REPLY_STRING) {
        char marker[LIST_PAGE_MARKER_MAX];
        list_page_marker_format(time->str, time->len, uuid->str, uuid->len, marker);
        next = json_string(marker);
    }
    json_t *res = json_pack("{s:o, s:o}", "workflows", list, "next_marker",
                            next != NULL ? next : json_null());
    wf_op_done(op, 0, res, NULL);
    json_decref(res);
}

void workflow_ops_list(store_t *store, const workflow_list_req_t *req, job_ops_cb cb, void *data)
{
    wf_op_t *op = wf_op_new(cb, data);
    char err[256], mtime[24] = "", muuid[40] = "";
    if (req->marker != NULL &&
        list_page_marker_parse(req->marker, mtime, muuid, err, sizeof err) != 0) {
        wf_op_done(op, TERN_EINVAL, NULL, "%s", err);
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
    wf_op_send(op, store, SCRIPT_WORKFLOW_LIST, &a, on_workflow_list);
}

/* ---- replace ------------------------------------------------------------------- */

static void on_replaced(void *data, int status, const json_t *result, const char *message)
{
    wf_op_t *op = data;
    if (status == 0)
        wf_op_done(op, 0, result, NULL);
    else
        wf_op_done(op, status, NULL, "%s", message != NULL ? message : "");
}

/* With the stored version read: fill in what the PUT left out, check that it
 * replaces this workflow and not another, and store it. */
static void on_replace_read(void *data, int status, const json_t *stored, const char *message)
{
    wf_op_t *op = data;
    if (status != 0) {
        wf_op_done(op, status, NULL, "%s", message != NULL ? message : "");
        return;
    }
    json_t *def = op->definition;
    const char *stored_uuid = json_string_value(json_object_get(stored, "uuid"));
    const char *stored_name = json_string_value(json_object_get(stored, "name"));
    json_t *name = json_object_get(def, "name"), *uuid = json_object_get(def, "uuid");
    if (stored_uuid == NULL || stored_name == NULL) {
        wf_op_done(op, TERN_EIO, NULL, "stored workflow \"%s\" has no uuid or name", op->ref);
        return;
    }
    if (name == NULL) {
        json_object_set(def, "name", json_object_get(stored, "name"));
    } else if (json_is_string(name) && strcmp(json_string_value(name), stored_name) != 0) {
        wf_op_done(op, TERN_EINVAL, NULL,
                   "name: \"%s\" is not the name of workflow %s (\"%s\"); a PUT replaces a "
                   "workflow, POST /workflows stores another one",
                   json_string_value(name), stored_uuid, stored_name);
        return;
    }
    if (uuid != NULL &&
        !(json_is_string(uuid) && strcmp(json_string_value(uuid), stored_uuid) == 0)) {
        wf_op_done(op, TERN_EINVAL, NULL, "uuid: the definition names another workflow than %s",
                   stored_uuid);
        return;
    }
    /* A new version gets a uuid of its own; the same version keeps the stored one. */
    json_object_del(def, "uuid");
    if (json_object_get(def, "version") == NULL)
        json_object_set(def, "version", json_object_get(stored, "version"));
    job_ops_workflow_put(op->ops, def, on_replaced, op);
}

void workflow_ops_replace(job_ops_t *ops, const char *ref, const json_t *definition, job_ops_cb cb,
                          void *data)
{
    wf_op_t *op = wf_op_new(cb, data);
    if (!json_is_object(definition)) {
        wf_op_done(op, TERN_EINVAL, NULL, "body: a workflow definition (an object) is required");
        return;
    }
    op->ops = ops;
    op->ref = xstrdup(ref);
    op->definition = json_deep_copy(definition);
    job_ops_workflow_get(ops, ref, on_replace_read, op);
}

/* ---- delete -------------------------------------------------------------------- */

static void on_workflow_delete(void *data, int status, const redisReply *reply, const char *errmsg)
{
    wf_op_t *op = data;
    if (status != 0) {
        wf_op_done(op, status, NULL, "%s", errmsg);
        return;
    }
    if (!store_reply_is(store_reply_at(reply, 0), "DELETED")) {
        bool by_name = !tern_uuid_valid(op->ref) && strchr(op->ref, '@') == NULL;
        wf_op_done(op, TERN_ENOENT, NULL, "workflow \"%s\" does not exist%s", op->ref,
                   by_name ? " (a DELETE names one version: its uuid or name@version)" : "");
        return;
    }
    const redisReply *u = store_reply_at(reply, 1), *n = store_reply_at(reply, 2),
                     *v = store_reply_at(reply, 3);
    json_t *res = json_pack("{s:s%, s:s%, s:s%}", "uuid", u->str, u->len, "name", n->str, n->len,
                            "version", v->str, v->len);
    wf_op_done(op, 0, res, NULL);
    json_decref(res);
}

void workflow_ops_delete(store_t *store, const char *ref, job_ops_cb cb, void *data)
{
    wf_op_t *op = wf_op_new(cb, data);
    op->ref = xstrdup(ref);
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, ref);
    wf_op_send(op, store, SCRIPT_WORKFLOW_DELETE, &a, on_workflow_delete);
}
