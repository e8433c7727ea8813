/*
 * migration_schedule.c -- dc.migration_schedule_switch, on the control: the last step
 * of migrate-schedule. Once the first pass is done and the migration is `scheduled`,
 * it asks the control's own API for the migration's migrate-switch job, to start at
 * the record's scheduled_timestamp (POST /jobs with exec_after: the engine's delayed
 * start, docs/API.md).
 *
 *   {migration_uuid} -> {job_uuid, exec_after, state (the migration's when asked)}
 *
 * migration_switch_job.lua reads the record and answers the job to ask for; its uuid is
 * made from the migration's, so a step run again asks for the same job and gets it
 * (api_jobs.h: the admission check of a switch already started refuses a second POST,
 * and the GET that follows shows the job). A failure to ask is SwitchJobUnavailable
 * (retried) or SwitchJobRefused (final), naming the status and the API's body.
 *
 * dc.migration_cancel_switch, on the control: a step of migrate-abort and
 * migrate-switch. An aborted migration's switch job, or that of a migration switched by
 * hand, must not run at its time (it would only fail), so the step cancels it through
 * the same API (POST /jobs/<uuid>/cancel, the engine's job cancel).
 *
 *   {migration_uuid, job_uuid?} -> {job_uuid (null: never scheduled, or the job asking
 *   is that job), canceled, others: [uuid]}
 *
 * The same goes for the VM's other queued migrate-sync and migrate-switch jobs (parked
 * for a migration slot, GET /jobs?execution=queued&vm_uuid=): they would start after
 * the abort only to fail; `others` lists those it canceled. While the step runs, the
 * check refuses every new job of the migration but an abort, so no newer one can be
 * among them. 200 is canceled; 404 (the schedule never got to ask for it) and 409 (it
 * already ended) leave nothing to cancel. No answer or a 5xx fails
 * SwitchJobUnavailable (retried); another answer SwitchJobRefused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_jobs.h"
#include "dc_state.h"
#include "dc_tasks.h"
#include "inventory_script.h"
#include "lua_scripts.h"

/* Retrying does not help these: the request, the migration or the configuration must
 * change first. */
static const char *const fatal_codes[] = {"InvalidArgument", "MigrationNotFound", "InvalidState",
                                          "NoApiUrl",        "SwitchJobRefused",  NULL};

static const api_job_codes_t switch_job_codes = {.unavailable = "SwitchJobUnavailable",
                                                 .refused = "SwitchJobRefused"};

/* The script's answer: the job POSTed. NULL: the outcome is reported later. */
static json_t *switch_job_asked(tern_ctx *ctx, const json_t *answer)
{
    const json_t *post = json_object_get(answer, "post");
    if (!json_is_object(post) || !json_is_string(json_object_get(post, "uuid"))) {
        tern_task_fail(ctx, "ScriptError",
                       "%s: migration_switch_job.lua answered no job to ask for: %s",
                       tern_step_name(ctx), "expected {\"post\": {\"uuid\", ...}}");
        return NULL;
    }
    json_t *result = json_pack("{s:s?, s:s?, s:O?}", "job_uuid",
                               json_string_value(json_object_get(post, "uuid")), "exec_after",
                               json_string_value(json_object_get(post, "exec_after")), "state",
                               json_object_get(answer, "state"));
    json_t *posts = json_pack("[O]", post);
    if (result == NULL || posts == NULL) /* exhausted memory (post is an object) */
        abort();
    return api_jobs_post(ctx, posts, result, 0, &switch_job_codes);
}

static void schedule_switch_start(tern_ctx *ctx, const json_t *args)
{
    dc_script_run(ctx, dc_lua_migration_switch_job, args, false, switch_job_asked);
}

static void schedule_switch_cancel(tern_ctx *ctx)
{
    const dc_state_t *s = tern_plugin_state(ctx);
    if (s != NULL && s->attempts != NULL)
        attempts_end(s->attempts, ctx);
}

/* What a cancel keeps between its requests (attempts.h): the jobs to cancel, one after
 * the other, and the result being made. */
typedef struct switch_cancel {
    json_t *named;  /* the schedule's switch job's uuid, or NULL (owned) */
    json_t *queue;  /* [uuid] to cancel: the named job first (owned) */
    size_t next;    /* the next of queue */
    json_t *result; /* {job_uuid, canceled, others} (owned) */
} switch_cancel_t;

static void switch_cancel_free(void *data)
{
    switch_cancel_t *sc = data;
    json_decref(sc->named);
    json_decref(sc->queue);
    json_decref(sc->result);
    free(sc);
}

/* Fails the attempt: "<step>: <what>: <status> <body>". */
static void cancel_fail(tern_ctx *ctx, const char *code, const char *what, long status,
                        const char *body)
{
    const dc_state_t *s = tern_plugin_state(ctx);
    tern_task_fail(ctx, code, "%s: %s: %ld %.2000s", tern_step_name(ctx), what, status,
                   body != NULL ? body : "");
    attempts_end(s->attempts, ctx);
}

static void cancel_next(tern_ctx *ctx, switch_cancel_t *sc);

/* One cancel's answer: 200 canceled it; 404 (no such job) and 409 (it ended) leave
 * nothing to cancel. */
static void on_job_canceled(tern_ctx *ctx, const tern_http_res *res, void *data)
{
    switch_cancel_t *sc = data;
    const char *uuid = json_string_value(json_array_get(sc->queue, sc->next));
    char what[128];
    snprintf(what, sizeof what, "POST /jobs/%s/cancel", uuid);
    if (res->status == 0 || res->status >= 500) {
        cancel_fail(ctx, "SwitchJobUnavailable", what, res->status,
                    res->status == 0 ? res->error : res->body);
        return;
    }
    if (res->status != 200 && res->status != 404 && res->status != 409) {
        cancel_fail(ctx, "SwitchJobRefused", what, res->status, res->body);
        return;
    }
    if (res->status == 200) {
        int rc =
            sc->named != NULL && strcmp(uuid, json_string_value(sc->named)) == 0
                ? json_object_set_new(sc->result, "canceled", json_true())
                : json_array_append_new(json_object_get(sc->result, "others"), json_string(uuid));
        if (rc != 0)
            abort(); /* exhausted memory */
    }
    sc->next++;
    cancel_next(ctx, sc);
}

/* Cancels the next job of the queue, or reports the result once none is left. */
static void cancel_next(tern_ctx *ctx, switch_cancel_t *sc)
{
    const dc_state_t *s = tern_plugin_state(ctx);
    if (sc->next >= json_array_size(sc->queue)) {
        json_t *result = sc->result;
        sc->result = NULL;
        attempts_end(s->attempts, ctx); /* frees sc */
        tern_task_done(ctx, result);
        return;
    }
    char url[1024], auth[1024];
    const char *headers[3];
    api_headers(s, auth, sizeof auth, headers);
    snprintf(url, sizeof url, "%s/jobs/%s/cancel", s->api_url,
             json_string_value(json_array_get(sc->queue, sc->next)));
    tern_http_req req = {.size = sizeof req,
                         .method = "POST",
                         .url = url,
                         .headers = headers,
                         .body = "{}",
                         .body_len = 2,
                         .timeout_ms = API_REQUEST_MS};
    if (tern_http_request(ctx, &req, on_job_canceled, sc) != 0)
        cancel_fail(ctx, "SwitchJobUnavailable", "a cancel cannot be sent", 0, "");
}

/* The VM's queued jobs: those of migrate-sync and migrate-switch (parked for a
 * migration slot, or due later) join the queue, but the job asking. */
static void on_queued_listed(tern_ctx *ctx, const tern_http_res *res, void *data)
{
    switch_cancel_t *sc = data;
    if (res->status != 200) {
        bool later = res->status == 0 || res->status >= 500; /* retried */
        cancel_fail(ctx, later ? "SwitchJobUnavailable" : "SwitchJobRefused",
                    "GET /jobs?execution=queued", res->status,
                    res->status == 0 ? res->error : res->body);
        return;
    }
    json_t *rows = json_loads(res->body, 0, NULL);
    if (!json_is_array(rows)) {
        json_decref(rows);
        cancel_fail(ctx, "SwitchJobUnavailable", "GET /jobs?execution=queued answered no list",
                    res->status, res->body);
        return;
    }
    const char *self = tern_job_uuid(ctx);
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row)
    {
        const char *name = json_string_value(json_object_get(row, "name"));
        const char *uuid = json_string_value(json_object_get(row, "uuid"));
        if (name == NULL || uuid == NULL || (self != NULL && strcmp(uuid, self) == 0))
            continue;
        if (strcmp(name, "migrate-sync") != 0 && strcmp(name, "migrate-switch") != 0)
            continue;
        if (sc->named != NULL && strcmp(uuid, json_string_value(sc->named)) == 0)
            continue; /* first in the queue already */
        if (json_array_append_new(sc->queue, json_string(uuid)) != 0)
            abort(); /* exhausted memory */
    }
    json_decref(rows);
    cancel_next(ctx, sc);
}

/* The script's answer: the VM and the schedule's switch job, if any. NULL: reported
 * later. */
static json_t *switch_jobs_to_cancel(tern_ctx *ctx, const json_t *answer)
{
    const dc_state_t *s = tern_plugin_state(ctx);
    const char *vm = json_string_value(json_object_get(answer, "vm_uuid"));
    if (s == NULL || s->api_url == NULL) {
        tern_task_fail(ctx, "NoApiUrl",
                       "%s: this runner's dc configuration has no \"api_url\", the API the "
                       "migration's queued jobs are canceled through",
                       tern_step_name(ctx));
        return NULL;
    }
    if (vm == NULL) {
        tern_task_fail(ctx, "ScriptError", "%s: migration_switch_job.lua answered no vm_uuid",
                       tern_step_name(ctx));
        return NULL;
    }
    const json_t *named = json_object_get(answer, "cancel");
    switch_cancel_t *sc = calloc(1, sizeof *sc);
    if (sc == NULL) /* exhausted memory */
        abort();
    sc->named = json_is_string(named) ? json_incref((json_t *)named) : NULL;
    sc->queue = sc->named != NULL ? json_pack("[O]", sc->named) : json_array();
    sc->result = json_pack("{s:O?, s:b, s:[]}", "job_uuid", sc->named, "canceled", false, "others");
    if (sc->queue == NULL || sc->result == NULL) /* exhausted memory */
        abort();
    attempts_add(s->attempts, ctx, sc, switch_cancel_free);
    char url[1024], auth[1024];
    const char *headers[3];
    api_headers(s, auth, sizeof auth, headers);
    snprintf(url, sizeof url, "%s/jobs?execution=queued&limit=1000&vm_uuid=%s", s->api_url, vm);
    tern_http_req req = {.size = sizeof req,
                         .method = "GET",
                         .url = url,
                         .headers = headers,
                         .timeout_ms = API_REQUEST_MS};
    if (tern_http_request(ctx, &req, on_queued_listed, sc) != 0)
        cancel_fail(ctx, "SwitchJobUnavailable", "GET /jobs cannot be sent", 0, "");
    return NULL;
}

static void cancel_switch_start(tern_ctx *ctx, const json_t *args)
{
    json_t *ask =
        json_pack("{s:O?, s:O?, s:b}", "migration_uuid", json_object_get(args, "migration_uuid"),
                  "job_uuid", json_object_get(args, "job_uuid"), "cancel", true);
    if (ask == NULL) /* exhausted memory */
        abort();
    dc_script_run(ctx, dc_lua_migration_switch_job, ask, false, switch_jobs_to_cancel);
    json_decref(ask);
}

const tern_task_def dc_migration_cancel_switch_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_cancel_switch",
    .summary = "Cancels the migration's queued jobs (the migrate-switch job its schedule "
               "asked for, syncs and switches waiting for a slot), but job_uuid.",
    .args_schema = "{\"required\": [\"migration_uuid\"], \"properties\": {\"migration_uuid\": "
                   "{\"type\": \"any\"}, \"job_uuid\": {\"type\": \"string\"}}, "
                   "\"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = cancel_switch_start,
    .cancel = schedule_switch_cancel,
};

const tern_task_def dc_migration_schedule_switch_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_schedule_switch",
    .summary = "Asks for a scheduled migration's migrate-switch job, to start at its "
               "scheduled_timestamp.",
    .args_schema = "{\"required\": [\"migration_uuid\"], \"properties\": {\"migration_uuid\": "
                   "{\"type\": \"any\"}}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = schedule_switch_start,
    .cancel = schedule_switch_cancel,
};
