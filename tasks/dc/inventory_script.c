/*
 * inventory_script.c -- one dc script per task: the arguments in, the answer out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "inventory_script.h"

typedef struct script_call {
    bool admission;
    dc_script_ok_fn on_ok;
    dc_script_answer_fn answer; /* dc_script_call's: then admission and on_ok are unused */
    void *answer_data;
} script_call_t;

/* dc_script_call's reply: the answer handed over, the attempt left running. */
static void on_answer(tern_ctx *ctx, script_call_t *call, const json_t *reply, const char *error)
{
    dc_script_answer_fn cb = call->answer;
    void *data = call->answer_data;
    free(call);
    if (error != NULL) {
        cb(ctx, NULL, "RedisError", error, data);
        return;
    }
    json_error_t jerr;
    json_t *answer = json_is_string(reply) ? json_loads(json_string_value(reply), 0, &jerr) : NULL;
    const json_t *err = json_object_get(answer, "error");
    const json_t *ok = json_object_get(answer, "ok");
    if (err != NULL) {
        const char *code = json_string_value(json_object_get(err, "code"));
        const char *msg = json_string_value(json_object_get(err, "message"));
        cb(ctx, NULL, code != NULL ? code : "InventoryError", msg != NULL ? msg : "", data);
    } else if (ok == NULL) {
        cb(ctx, NULL, "RedisError", "the script answered no result", data);
    } else {
        cb(ctx, ok, NULL, NULL, data);
    }
    json_decref(answer);
}

static void on_reply(tern_ctx *ctx, const json_t *reply, const char *error, void *data)
{
    script_call_t *call = data;
    if (call->answer != NULL) {
        on_answer(ctx, call, reply, error);
        return;
    }
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

/* DC_SCRIPT_UUIDS fresh version 4 UUIDs as a JSON array into out (at least
 * DC_SCRIPT_UUIDS * 39 + 3 bytes): what a script names a new record with, since Lua in
 * Redis has no source of randomness. 0, or -1 when the system has none to give. */
static int fresh_uuids(char *out, size_t outlen)
{
    unsigned char raw[DC_SCRIPT_UUIDS][16];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom((unsigned char *)raw + got, sizeof raw - got, 0);
        if (n < 0)
            return -1;
        got += (size_t)n;
    }
    size_t at = 0;
    out[at++] = '[';
    for (size_t i = 0; i < DC_SCRIPT_UUIDS; i++) {
        unsigned char *b = raw[i];
        b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
        b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
        at += (size_t)snprintf(out + at, outlen - at,
                               "%s\"%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
                               "%02x%02x%02x%02x%02x%02x\"",
                               i ? "," : "", b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8],
                               b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    }
    snprintf(out + at, outlen - at, "]");
    return 0;
}

/* Evaluates `script` with args and the time and fresh uuids; takes `call`. 0, or -1
 * with *code and msg saying why (call freed). */
static int script_eval(tern_ctx *ctx, const char *script, const json_t *args, script_call_t *call,
                       const char **code, char *msg, size_t msglen)
{
    char *text = json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);
    char now[32], now_ms[40];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(now_ms, sizeof now_ms, "%.19s.%03ldZ", now, ts.tv_nsec / 1000000L);
    char uuids[DC_SCRIPT_UUIDS * 40 + 4];
    if (fresh_uuids(uuids, sizeof uuids) != 0) {
        free(text);
        free(call);
        *code = "NoRandomness";
        snprintf(msg, msglen, "%s: the system gave no random bytes for new ids",
                 tern_step_name(ctx));
        return -1;
    }
    if (text == NULL || call == NULL) {
        free(text);
        free(call);
        *code = "OutOfMemory";
        snprintf(msg, msglen, "%s: out of memory", tern_step_name(ctx));
        return -1;
    }
    const char *keys[] = {""};
    const char *argv[] = {text, now, uuids, now_ms};
    int rc = tern_redis_eval(ctx, script, 1, keys, 4, argv, on_reply, call);
    free(text);
    if (rc != 0) {
        free(call);
        *code = "RedisUnavailable";
        snprintf(msg, msglen, "%s: Redis is not reachable from this runner (%d)",
                 tern_step_name(ctx), rc);
        return -1;
    }
    return 0;
}

/* See inventory_script.h. */
void dc_script_run(tern_ctx *ctx, const char *script, const json_t *args, bool admission,
                   dc_script_ok_fn on_ok)
{
    script_call_t *call = malloc(sizeof *call);
    if (call != NULL)
        *call = (script_call_t){.admission = admission, .on_ok = on_ok};
    const char *code = NULL;
    char msg[256];
    if (script_eval(ctx, script, args, call, &code, msg, sizeof msg) != 0)
        tern_task_fail(ctx, code, "%s", msg);
}

/* See inventory_script.h. */
int dc_script_call(tern_ctx *ctx, const char *script, const json_t *args, dc_script_answer_fn cb,
                   void *data)
{
    script_call_t *call = malloc(sizeof *call);
    if (call != NULL)
        *call = (script_call_t){.answer = cb, .answer_data = data};
    const char *code = NULL;
    char msg[256];
    return script_eval(ctx, script, args, call, &code, msg, sizeof msg);
}
