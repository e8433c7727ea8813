/*
 * provision_volumes.c -- the control-plane tasks of the volumes a provision mounts
 * (docs/VOLUMES.md "Volumes at provision"). Each runs one Lua script (tasks/dc/lua/)
 * that reads and changes the volumes, reservations and VM at once; two of them then
 * ask the control's own API for the volume jobs the script found needed.
 *
 *   dc.volumes_reserve     {vm_uuid, owner_uuid, job_uuid?, volumes, networks}
 *                          one reservation per volume, missing volumes made
 *                          `creating` (Docker semantics), vm.volumes written; then a
 *                          volume-create job POSTed for each volume it made
 *   dc.volumes_wait        {vm_uuid, wait_s?, volumes?} the mounts once every volume is
 *                          ready;
 *                          polls (re-queued every 500 ms) while some are creating;
 *                          VolumeNotReady at once for a failed, deleting or gone one,
 *                          or when wait_s (300) passed
 *   dc.volumes_reference   {vm_uuid, job_uuid?, volumes?} the job's reservations become
 *                          refs
 *   dc.volumes_unreserve   {vm_uuid, job_uuid?} the job's reservations deleted; a
 *                          volume-delete job POSTed for each volume the job made that
 *                          nothing uses (re-queued while such a volume is creating,
 *                          for at most wait_s)
 *   dc.reservations_clean  {} stale reservations removed or turned into refs;
 *                          older_than = now - settings.reservation_max_age_s
 *
 * Given "volumes": [] (the admission check's answer for a provision that mounts none),
 * reserve, wait and reference answer at once without a script.
 *
 * The jobs are asked of the control's API (api_jobs.h) under a uuid that does not
 * change when the step runs again: a volume-create job's is the volume's uuid, a
 * volume-delete job's the name-based uuid of "volume-delete:<volume uuid>"
 * (volume_rules.lua, volume_delete_job_uuid). A failure to ask is VolumeJobUnavailable
 * (retried) or VolumeJobRefused (final).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_jobs.h"
#include "dc_state.h"
#include "dc_tasks.h"
#include "inventory_script.h"
#include "lib/args.h"
#include "lua_scripts.h"

#define WAIT_POLL_MS      500  /* volumes_wait: how often a creating volume is looked at */
#define UNRESERVE_POLL_MS 1000 /* volumes_unreserve: a volume still creating */
#define WAIT_DEFAULT_S    300  /* the longest a volume is waited for */
#define ABANDON_S         60   /* a volume no volume-create job took after this never will */

/* Retrying does not help these: the volume, the request or the configuration must
 * change first. */
static const char *const fatal_codes[] = {
    "InvalidArgument",    "ResourceNotFound", "InvalidState",     "VolumeNotReady",
    "VolumeNotReachable", "NoApiUrl",         "VolumeJobRefused", NULL};

static const api_job_codes_t volume_job_codes = {.unavailable = "VolumeJobUnavailable",
                                                 .refused = "VolumeJobRefused"};

static json_t *job_post(const char *workflow, const char *uuid, json_t *params)
{
    char target[128];
    snprintf(target, sizeof target, "/%s-%s", workflow,
             json_string_value(json_object_get(params, "volume_uuid")));
    return json_pack("{s:s, s:s, s:s, s:o}", "uuid", uuid, "workflow", workflow, "target", target,
                     "params", params);
}

/* ---- the tasks ----------------------------------------------------------------------- */

/* The arguments with the job's uuid when the step gave none: a new reference. */
static json_t *with_job_uuid(tern_ctx *ctx, const json_t *args)
{
    json_t *fields = json_deep_copy(args);
    if (fields == NULL)
        abort();
    if (json_object_get(fields, "job_uuid") == NULL) {
        const char *job = tern_job_uuid(ctx);
        json_object_set_new(fields, "job_uuid", job != NULL ? json_string(job) : json_null());
    }
    return fields;
}

static void run_script(tern_ctx *ctx, const char *script, const json_t *args, dc_script_ok_fn on_ok)
{
    json_t *fields = with_job_uuid(ctx, args);
    dc_script_run(ctx, script, fields, false, on_ok);
    json_decref(fields);
}

/* A volume-create job for each volume the step made, {volume_uuid, owner_uuid, name,
 * size, networks} as volume-create takes them. */
static json_t *reserved(tern_ctx *ctx, const json_t *result)
{
    json_t *posts = json_array();
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(result, "created"), i, c)
    {
        const char *uuid = json_string_value(json_object_get(c, "volume_uuid"));
        json_t *params =
            json_pack("{s:s, s:O, s:O, s:O, s:O}", "volume_uuid", uuid, "owner_uuid",
                      json_object_get(c, "owner_uuid"), "name", json_object_get(c, "name"), "size",
                      json_object_get(c, "size"), "networks", json_object_get(c, "networks"));
        if (uuid == NULL || params == NULL) {
            json_decref(params);
            json_decref(posts);
            tern_task_fail(ctx, "RedisError",
                           "dc.volumes_reserve: the script answered a "
                           "volume without its fields");
            return NULL;
        }
        json_array_append_new(posts, job_post("volume-create", uuid, params));
    }
    return api_jobs_post(ctx, posts, json_deep_copy(result), 0, &volume_job_codes);
}

/* true when the step says the provision mounts no volume ("volumes": [], the admission
 * check's answer): a provision without volumes then costs no script call in the volume
 * steps (tests/bench/provision_rate.py measures a provision's Redis calls). */
static bool mounts_none(const json_t *args)
{
    const json_t *v = json_object_get(args, "volumes");
    return json_is_array(v) && json_array_size(v) == 0;
}

static void volumes_reserve_start(tern_ctx *ctx, const json_t *args)
{
    if (mounts_none(args)) {
        tern_task_done(ctx, json_pack("{s:[], s:[], s:[]}", "volumes", "reservations", "created"));
        return;
    }
    run_script(ctx, dc_lua_volumes_reserve, args, reserved);
}

/* The time `seconds` ago as the records write it: ISO 8601 UTC with milliseconds. */
static void iso_ms_ago(uint64_t seconds, char *out, size_t outlen)
{
    time_t t = time(NULL) - (time_t)seconds;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, outlen, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
}

/* Milliseconds since the epoch. */
static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The arguments with "expired": whether the step has waited past its bound, wait_s
 * (default WAIT_DEFAULT_S) from its first attempt, whose time the job's state keeps
 * under `key`. A new reference, or NULL after failing the attempt. */
static json_t *with_deadline(tern_ctx *ctx, const json_t *args, const char *key)
{
    char msg[256];
    uint64_t wait_s = WAIT_DEFAULT_S;
    const char *bad = task_args_uint(args, "wait_s", 86400, &wait_s, msg, sizeof msg);
    if (bad != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "%s: %s", tern_step_name(ctx), bad);
        return NULL;
    }
    const json_t *since = tern_state_get(ctx, key);
    uint64_t now = now_ms();
    if (!json_is_integer(since) && tern_state_set(ctx, key, json_integer((json_int_t)now)) != 0) {
        tern_task_fail(ctx, "StateError", "%s: cannot set the job's state", tern_step_name(ctx));
        return NULL;
    }
    bool expired =
        json_is_integer(since) && now - (uint64_t)json_integer_value(since) > wait_s * 1000u;
    json_t *fields = with_job_uuid(ctx, args);
    json_object_set_new(fields, "expired", json_boolean(expired));
    json_object_set_new(fields, "wait_s", json_integer((json_int_t)wait_s));
    return fields;
}

static json_t *waited(tern_ctx *ctx, const json_t *result)
{
    if (json_object_get(result, "pending") == NULL)
        return json_deep_copy(result);
    tern_task_requeue(ctx, WAIT_POLL_MS, json_deep_copy(result));
    return NULL;
}

static void volumes_wait_start(tern_ctx *ctx, const json_t *args)
{
    if (mounts_none(args)) {
        tern_task_done(ctx, json_pack("{s:[]}", "volumes"));
        return;
    }
    json_t *fields = with_deadline(ctx, args, "volumes_wait_since");
    if (fields == NULL)
        return;
    dc_script_run(ctx, dc_lua_volumes_wait, fields, false, waited);
    json_decref(fields);
}

static void volumes_reference_start(tern_ctx *ctx, const json_t *args)
{
    if (mounts_none(args)) {
        tern_task_done(ctx, json_pack("{s:[], s:[]}", "referenced", "dropped"));
        return;
    }
    json_t *fields = with_job_uuid(ctx, args);
    json_object_del(fields, "volumes");
    dc_script_run(ctx, dc_lua_volumes_reference, fields, false, NULL);
    json_decref(fields);
}

/* A volume-delete job for each volume to delete; run again while some are creating. */
static json_t *unreserved(tern_ctx *ctx, const json_t *result)
{
    json_t *posts = json_array();
    size_t i;
    const json_t *d;
    json_array_foreach(json_object_get(result, "delete"), i, d)
    {
        const char *vol = json_string_value(json_object_get(d, "volume_uuid"));
        const char *job = json_string_value(json_object_get(d, "job_uuid"));
        json_t *params = json_pack("{s:s, s:O, s:b}", "volume_uuid", vol, "owner_uuid",
                                   json_object_get(d, "owner_uuid"), "force", 0);
        if (vol == NULL || job == NULL || params == NULL) {
            json_decref(params);
            json_decref(posts);
            tern_task_fail(ctx, "RedisError",
                           "dc.volumes_unreserve: the script answered a "
                           "volume without its fields");
            return NULL;
        }
        json_array_append_new(posts, job_post("volume-delete", job, params));
    }
    uint64_t requeue_ms =
        json_array_size(json_object_get(result, "pending")) > 0 ? UNRESERVE_POLL_MS : 0;
    const json_t *left = json_object_get(result, "left");
    if (json_array_size(left) > 0) {
        char *text = json_dumps(left, JSON_COMPACT);
        tern_log(ctx, TERN_LOG_WARN,
                 "volumes this job made are still not settled after its wait and are left "
                 "for an operator to delete: %s",
                 text != NULL ? text : "?");
        free(text);
    }
    return api_jobs_post(ctx, posts, json_deep_copy(result), requeue_ms, &volume_job_codes);
}

static void volumes_unreserve_start(tern_ctx *ctx, const json_t *args)
{
    json_t *fields = with_deadline(ctx, args, "volumes_unreserve_since");
    if (fields == NULL)
        return;
    char before[40];
    iso_ms_ago(ABANDON_S, before, sizeof before);
    json_object_set_new(fields, "abandon_before", json_string(before));
    dc_script_run(ctx, dc_lua_volumes_unreserve, fields, false, unreserved);
    json_decref(fields);
}

static void reservations_clean_start(tern_ctx *ctx, const json_t *args)
{
    (void)args;
    const dc_state_t *s = tern_plugin_state(ctx);
    uint64_t max_age = s != NULL && s->dc != NULL ? s->dc->set.reservation_max_age_s : 900;
    char older_than[40];
    iso_ms_ago(max_age, older_than, sizeof older_than);
    json_t *fields = json_pack("{s:s}", "older_than", older_than);
    dc_script_run(ctx, dc_lua_reservations_clean, fields, false, NULL);
    json_decref(fields);
}

static void volumes_cancel(tern_ctx *ctx)
{
    const dc_state_t *s = tern_plugin_state(ctx);
    if (s != NULL && s->attempts != NULL)
        attempts_end(s->attempts, ctx);
}

/* Values are checked by the scripts, which name the JSON path of a bad one. */
#define ANY_T  "{\"type\": \"any\"}"
#define UUID_T "{\"type\": \"string\"}"

const tern_task_def dc_volumes_reserve_task = {
    .size = sizeof(tern_task_def),
    .name = "volumes_reserve",
    .summary = "A provision's volumes: one reservation each, missing ones made (Docker "
               "semantics) and their volume-create jobs asked for; the VM's volumes written.",
    .args_schema =
        "{\"required\": [\"vm_uuid\", \"owner_uuid\", \"volumes\"], \"properties\": {"
        "\"vm_uuid\": " UUID_T ", \"owner_uuid\": " UUID_T ", \"job_uuid\": " UUID_T
        ", \"volumes\": {\"type\": \"array\"}, \"networks\": " ANY_T "}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = volumes_reserve_start,
    .cancel = volumes_cancel,
};

const tern_task_def dc_volumes_wait_task = {
    .size = sizeof(tern_task_def),
    .name = "volumes_wait",
    .summary = "Waits until a provision's volumes are ready (their mounts), failing at once "
               "for a failed, deleting or deleted one.",
    .args_schema =
        "{\"required\": [\"vm_uuid\"], \"properties\": {\"vm_uuid\": " UUID_T
        ", \"wait_s\": {\"type\": \"integer\"}, \"volumes\": " ANY_T "}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = volumes_wait_start,
};

const tern_task_def dc_volumes_reference_task = {
    .size = sizeof(tern_task_def),
    .name = "volumes_reference",
    .summary = "A provisioned VM's volume reservations become references.",
    .args_schema = "{\"required\": [\"vm_uuid\"], \"properties\": {\"vm_uuid\": " UUID_T
                   ", \"job_uuid\": " UUID_T ", \"volumes\": " ANY_T "}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = volumes_reference_start,
};

const tern_task_def dc_volumes_unreserve_task = {
    .size = sizeof(tern_task_def),
    .name = "volumes_unreserve",
    .summary = "After a failed provision: its reservations deleted, the volumes it made "
               "that nothing uses deleted.",
    .args_schema = "{\"required\": [\"vm_uuid\"], \"properties\": {\"vm_uuid\": " UUID_T
                   ", \"job_uuid\": " UUID_T ", \"wait_s\": {\"type\": \"integer\"}}, "
                   "\"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = volumes_unreserve_start,
    .cancel = volumes_cancel,
};

const tern_task_def dc_reservations_clean_task = {
    .size = sizeof(tern_task_def),
    .name = "reservations_clean",
    .summary = "Removes stale volume reservations (VM failed or gone, or older than "
               "settings.reservation_max_age_s); those of active VMs become references.",
    .args_schema = "{\"required\": [], \"properties\": {}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = reservations_clean_start,
};
