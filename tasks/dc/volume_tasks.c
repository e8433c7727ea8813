/*
 * volume_tasks.c -- the control-plane tasks of shared volumes (RFD 26, docs/VOLUMES.md):
 * each hands its arguments to one Lua script (tasks/dc/lua/volume_*.lua, with the
 * records and rules of volume_rules.lua) that reads and changes the volume, its name
 * claim and its storage instance in Redis at once. The agent's tasks (dc.storage_create,
 * dc.instance_start, dc.instance_destroy) do the work on the files between them.
 *
 *   dc.volume_check          admission of volume-create, volume-delete, volume-update;
 *                            action "unplaced": the storage instance never reached a
 *                            server (volume-delete's destroy fallback)
 *   dc.volume_claim          the name claimed and the record written "creating"
 *   dc.volume_ready          the volume "ready" once its share process runs
 *   dc.volume_fail           onerror: the volume "failed" (a failed create frees its name)
 *   dc.volume_delete_begin   the in-use check again and "deleting", at once; state
 *                            agent_queue: the storage instance's server
 *   dc.volume_delete_finish  the storage instance released, the record removed
 *   dc.volume_update         rename and tags
 */
#include <stdio.h>
#include <string.h>

#include "dc_tasks.h"
#include "inventory_script.h"
#include "lua_scripts.h"

/* Retrying does not help these: the request or the volume's state must change first. */
static const char *const fatal_codes[] = {"InvalidArgument",     "ResourceNotFound",
                                          "InvalidState",        "VolumeNotFound",
                                          "VolumeAlreadyExists", "VolumeSizeNotAvailable",
                                          "VolumeInUse",         "VolumeNotReady",
                                          "StorageNotDestroyed", NULL};

/* The arguments with the job's uuid as "job_uuid" (a new reference), or NULL after
 * failing the task. */
static json_t *with_job_uuid(tern_ctx *ctx, const json_t *args)
{
    json_t *fields = json_deep_copy(args);
    if (fields == NULL) {
        tern_task_fail(ctx, "OutOfMemory", "%s: out of memory", tern_step_name(ctx));
        return NULL;
    }
    const char *job = tern_job_uuid(ctx);
    json_object_set_new(fields, "job_uuid", job != NULL ? json_string(job) : json_null());
    return fields;
}

static void run_with_job(tern_ctx *ctx, const char *script, const json_t *args,
                         dc_script_ok_fn on_ok)
{
    json_t *fields = with_job_uuid(ctx, args);
    if (fields == NULL)
        return;
    dc_script_run(ctx, script, fields, false, on_ok);
    json_decref(fields);
}

static void volume_check_start(tern_ctx *ctx, const json_t *args)
{
    json_t *fields = json_deep_copy(args);
    if (fields == NULL) {
        tern_task_fail(ctx, "OutOfMemory", "dc.volume_check: out of memory");
        return;
    }
    if (json_object_get(fields, "target") == NULL) {
        const char *target = tern_job_target(ctx);
        json_object_set_new(fields, "target", target != NULL ? json_string(target) : json_null());
    }
    /* "unplaced" runs as a step of a job, not at POST /jobs: its refusal is a failure. */
    const char *action = json_string_value(json_object_get(args, "action"));
    bool admission = action == NULL || strcmp(action, "unplaced") != 0;
    dc_script_run(ctx, dc_lua_volume_check, fields, admission, NULL);
    json_decref(fields);
}

static void volume_claim_start(tern_ctx *ctx, const json_t *args)
{
    run_with_job(ctx, dc_lua_volume_claim, args, NULL);
}

static void volume_ready_start(tern_ctx *ctx, const json_t *args)
{
    run_with_job(ctx, dc_lua_volume_ready, args, NULL);
}

static void volume_fail_start(tern_ctx *ctx, const json_t *args)
{
    run_with_job(ctx, dc_lua_volume_fail, args, NULL);
}

/* The destroy step after begin runs on the agent of the storage instance's server:
 * state agent_queue "server:<uuid>". A storage instance that never reached a server
 * sets none, and the step's "${state.agent_queue:-default}" finds no agent (its
 * fallback checks that nothing was placed). The result is the script's. */
static json_t *delete_begun(tern_ctx *ctx, const json_t *result)
{
    const char *server = json_string_value(json_object_get(result, "server_uuid"));
    if (server != NULL) {
        char queue[64];
        snprintf(queue, sizeof queue, "server:%s", server);
        if (tern_state_set(ctx, "agent_queue", json_string(queue)) != 0) {
            tern_task_fail(ctx, "StateError", "dc.volume_delete_begin: cannot set the job's state");
            return NULL;
        }
    }
    return json_deep_copy(result);
}

static void volume_delete_begin_start(tern_ctx *ctx, const json_t *args)
{
    run_with_job(ctx, dc_lua_volume_delete_begin, args, delete_begun);
}

static void volume_delete_finish_start(tern_ctx *ctx, const json_t *args)
{
    run_with_job(ctx, dc_lua_volume_delete_finish, args, NULL);
}

static void volume_update_start(tern_ctx *ctx, const json_t *args)
{
    run_with_job(ctx, dc_lua_volume_update, args, NULL);
}

/* Values are checked by the scripts, which name the JSON path of a bad one. */
#define ANY_T "{\"type\": \"any\"}"
#define VOLUME_ARGS(extra)                                                                         \
    "{\"required\": [\"volume_uuid\"], \"properties\": {\"volume_uuid\": " ANY_T                   \
    ", \"owner_uuid\": " ANY_T extra "}, \"additional\": false}"

const tern_task_def dc_volume_check_task = {
    .size = sizeof(tern_task_def),
    .name = "volume_check",
    .summary = "Admission of volume-create, volume-delete, volume-update: every parameter, the "
               "volume, its name, state and users.",
    .args_schema = "{\"required\": [\"action\", \"params\"], \"properties\": {\"action\": "
                   "{\"type\": \"string\"}, \"target\": {\"type\": \"string\"}, \"params\": " ANY_T
                   "}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = volume_check_start,
};

const tern_task_def dc_volume_claim_task = {
    .size = sizeof(tern_task_def),
    .name = "volume_claim",
    .summary = "Claims a volume's name and writes it \"creating\", at once.",
    .args_schema =
        VOLUME_ARGS(", \"name\": " ANY_T ", \"size\": " ANY_T ", \"type\": " ANY_T
                    ", \"networks\": " ANY_T ", \"tags\": " ANY_T ", \"storage_vm_uuid\": " ANY_T),
    .fatal_codes = fatal_codes,
    .start = volume_claim_start,
};

const tern_task_def dc_volume_ready_task = {
    .size = sizeof(tern_task_def),
    .name = "volume_ready",
    .summary = "Marks a volume ready, with its address, once its storage instance runs.",
    .args_schema = VOLUME_ARGS(", \"vm_uuid\": " ANY_T ", \"state\": " ANY_T),
    .fatal_codes = fatal_codes,
    .start = volume_ready_start,
};

const tern_task_def dc_volume_fail_task = {
    .size = sizeof(tern_task_def),
    .name = "volume_fail",
    .summary = "Marks a volume this job was creating or deleting failed.",
    .args_schema = VOLUME_ARGS(""),
    .fatal_codes = fatal_codes,
    .start = volume_fail_start,
};

const tern_task_def dc_volume_delete_begin_task = {
    .size = sizeof(tern_task_def),
    .name = "volume_delete_begin",
    .summary = "Checks a volume is not in use and marks it deleting, at once.",
    .args_schema = VOLUME_ARGS(", \"force\": " ANY_T),
    .fatal_codes = fatal_codes,
    .start = volume_delete_begin_start,
};

const tern_task_def dc_volume_delete_finish_task = {
    .size = sizeof(tern_task_def),
    .name = "volume_delete_finish",
    .summary = "Gives back what a volume's storage instance held and removes the volume.",
    .args_schema = VOLUME_ARGS(""),
    .fatal_codes = fatal_codes,
    .start = volume_delete_finish_start,
};

const tern_task_def dc_volume_update_task = {
    .size = sizeof(tern_task_def),
    .name = "volume_update",
    .summary = "Renames a volume or replaces its tags.",
    .args_schema = VOLUME_ARGS(", \"name\": " ANY_T ", \"tags\": " ANY_T),
    .fatal_codes = fatal_codes,
    .start = volume_update_start,
};
