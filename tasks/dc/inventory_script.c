/*
 * inventory_script.c -- one dc script per task: the arguments in, the answer out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inventory_script.h"

typedef struct script_call {
    bool admission;
    dc_script_ok_fn on_ok;
} script_call_t;

static void on_reply(tern_ctx *ctx, const json_t *reply, const char *error, void *data)
{
    script_call_t *call = data;
    bool admission = call->admission;
    dc_script_ok_fn on_ok = call->on_ok;
    free(call);
    if (error != NULL) {
        tern_task_fail(ctx, "RedisError", "%s: the inventory script failed: %s",
                       tern_step_name(ctx), error);
        return;
    }
    json_error_t jerr;
    json_t *answer = json_is_string(reply) ? json_loads(json_string_value(reply), 0, &jerr) : NULL;
    const json_t *err = json_object_get(answer, "error");
    const json_t *ok = json_object_get(answer, "ok");
    if (err != NULL) {
        const char *code = json_string_value(json_object_get(err, "code"));
        const char *msg = json_string_value(json_object_get(err, "message"));
        int status = (int)json_integer_value(json_object_get(err, "status"));
        if (admission && status != 0)
            tern_task_refuse(ctx, status, code ? code : "InvalidArgument", "%s", msg ? msg : "");
        else
            tern_task_fail(ctx, code ? code : "InventoryError", "%s", msg ? msg : "");
    } else if (ok == NULL) {
        tern_task_fail(ctx, "RedisError", "%s: the inventory script answered no result",
                       tern_step_name(ctx));
    } else {
        json_t *result = on_ok != NULL ? on_ok(ctx, ok) : json_incref((json_t *)ok);
        if (result != NULL)
            tern_task_done(ctx, result);
    }
    json_decref(answer);
}

/* See inventory_script.h. */
void dc_script_run(tern_ctx *ctx, const char *script, const json_t *args, bool admission,
                   dc_script_ok_fn on_ok)
{
    char *text = json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);
    char now[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
    script_call_t *call = malloc(sizeof *call);
    if (text == NULL || call == NULL) {
        free(text);
        free(call);
        tern_task_fail(ctx, "OutOfMemory", "%s: out of memory", tern_step_name(ctx));
        return;
    }
    *call = (script_call_t){.admission = admission, .on_ok = on_ok};
    const char *keys[] = {""};
    const char *argv[] = {text, now};
    int rc = tern_redis_eval(ctx, script, 1, keys, 2, argv, on_reply, call);
    free(text);
    if (rc != 0) {
        free(call);
        tern_task_fail(ctx, "RedisUnavailable", "%s: Redis is not reachable from this runner (%d)",
                       tern_step_name(ctx), rc);
    }
}
