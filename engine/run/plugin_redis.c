/*
 * plugin_redis.c -- plugin scripts on the store connection; see plugin_redis.h.
 *
 * Ownership: one pr_call per script in flight, freed when Redis answers. A call whose
 * attempt was cancelled meanwhile is only marked, because the answer (or the
 * connection loss) still arrives and must find its record.
 */
#include "run/plugin_redis.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

typedef struct pr_call {
    task_redis_done_fn done;
    task_redis_call_t *call;
    bool cancelled;
} pr_call_t;

json_t *plugin_redis_reply_json(const redisReply *r)
{
    if (r == NULL)
        return json_null();
    switch (r->type) {
    case REDIS_REPLY_INTEGER:
        return json_integer(r->integer);
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
        return json_stringn(r->str, r->len);
    case REDIS_REPLY_ARRAY: {
        json_t *a = json_array();
        for (size_t i = 0; i < r->elements; i++)
            json_array_append_new(a, plugin_redis_reply_json(r->element[i]));
        return a;
    }
    default:
        return json_null();
    }
}

static void on_plugin_reply(void *data, int status, const redisReply *reply, const char *errmsg)
{
    pr_call_t *pc = data;
    if (!pc->cancelled) {
        if (status != 0) {
            pc->done(pc->call, NULL, errmsg != NULL ? errmsg : "Redis error");
        } else {
            json_t *v = plugin_redis_reply_json(reply);
            pc->done(pc->call, v, NULL);
            json_decref(v);
        }
    }
    free(pc);
}

static void *pr_eval(void *data, const char *script, size_t nkeys, const char *const *keys,
                     size_t nargs, const char *const *args, task_redis_done_fn done,
                     task_redis_call_t *call)
{
    store_t *s = data;
    store_args_t a;
    store_args_init(&a);
    store_args_push(&a, "EVAL");
    store_args_push(&a, script);
    store_args_pushf(&a, "%zu", nkeys);
    for (size_t i = 0; i < nkeys; i++)
        store_args_push(&a, keys[i]);
    for (size_t i = 0; i < nargs; i++)
        store_args_push(&a, args[i]);
    pr_call_t *pc = xcalloc(1, sizeof *pc);
    pc->done = done;
    pc->call = call;
    int rc = store_command(s, &a, on_plugin_reply, pc);
    store_args_dispose(&a);
    if (rc != 0) {
        free(pc);
        return NULL;
    }
    return pc;
}

static void pr_cancel(void *data, void *handle)
{
    (void)data;
    pr_call_t *pc = handle;
    if (pc != NULL)
        pc->cancelled = true;
}

void plugin_redis_ops(store_t *store, task_redis_ops_t *ops)
{
    ops->eval = pr_eval;
    ops->cancel = pr_cancel;
    ops->data = store;
}
