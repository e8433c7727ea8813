/*
 * volume_snapshot_tasks.c -- the control-plane tasks of the operations on an existing
 * shared volume (docs/VOLUMES.md "Snapshots, rollback and networks"): each hands its
 * arguments to one Lua script (tasks/dc/lua/volume_*.lua, with the rules of
 * volume_op_rules.lua) that reads and changes the volume's record in Redis at once.
 * The agent's dc.volume_snapshot (volume_snapshot.c) does the work on the storage
 * instance's files between them.
 *
 *   dc.volume_op_check  admission of volume-snapshot-create, volume-snapshot-delete,
 *                       volume-rollback, volume-attach-network, volume-detach-network
 *   dc.volume_snapshot_record  begin / starting / commit / fail of a snapshot or a rollback
 *   dc.volume_network   begin / commit / fail of a network attach or detach
 *
 * The wrappers add what the scripts cannot know: the job's target (admission) or uuid,
 * and the description's max_snapshots_per_volume (16 when no description is loaded).
 */
#include "dc_state.h"
#include "dc_tasks.h"
#include "inventory_script.h"
#include "lua_scripts.h"

/* Retrying does not help these: the request or the volume must change first. */
static const char *const fatal_codes[] = {"InvalidArgument",
                                          "ResourceNotFound",
                                          "InvalidState",
                                          "VolumeNotFound",
                                          "VolumeNotReady",
                                          "VolumeSnapshotNotFound",
                                          "VolumeSnapshotAlreadyExists",
                                          "SnapshotLimitExceeded",
                                          NULL};

#define MAX_SNAPSHOTS_DEFAULT 16

static json_int_t max_snapshots(tern_ctx *ctx)
{
    const dc_state_t *s = tern_plugin_state(ctx);
    if (s == NULL || s->dc == NULL)
        return MAX_SNAPSHOTS_DEFAULT;
    return (json_int_t)s->dc->set.max_snapshots_per_volume;
}

/* Runs script with a copy of args completed by `key` (the job's target or uuid, when
 * the step did not give it) and, when `with_limit`, max_snapshots. */
static void run_script(tern_ctx *ctx, const char *script, const json_t *args, const char *key,
                       const char *value, bool with_limit, bool admission)
{
    json_t *fields = json_deep_copy(args);
    if (fields != NULL && json_object_get(fields, key) == NULL &&
        json_object_set_new(fields, key, value != NULL ? json_string(value) : json_null()) != 0) {
        json_decref(fields);
        fields = NULL;
    }
    if (fields != NULL && with_limit &&
        json_object_set_new(fields, "max_snapshots", json_integer(max_snapshots(ctx))) != 0) {
        json_decref(fields);
        fields = NULL;
    }
    if (fields == NULL) {
        tern_task_fail(ctx, "OutOfMemory", "%s: out of memory", tern_step_name(ctx));
        return;
    }
    dc_script_run(ctx, script, fields, admission, NULL);
    json_decref(fields);
}

static void op_check_start(tern_ctx *ctx, const json_t *args)
{
    run_script(ctx, dc_lua_volume_op_check, args, "target", tern_job_target(ctx), true, true);
}

static void snapshot_start(tern_ctx *ctx, const json_t *args)
{
    run_script(ctx, dc_lua_volume_snapshot_record, args, "job_uuid", tern_job_uuid(ctx), true,
               false);
}

static void network_start(tern_ctx *ctx, const json_t *args)
{
    run_script(ctx, dc_lua_volume_network, args, "job_uuid", tern_job_uuid(ctx), false, false);
}

/* Values are checked by the scripts, which name the JSON path of a bad one. */
#define ANY_T "{\"type\": \"any\"}"
#define STR_T "{\"type\": \"string\"}"

const tern_task_def dc_volume_op_check_task = {
    .size = sizeof(tern_task_def),
    .name = "volume_op_check",
    .summary = "Admission of a volume snapshot, rollback or network change: its params, the "
               "volume (the owner's, ready), the snapshot, the limit, the network.",
    .args_schema = "{\"required\": [\"action\", \"params\"], \"properties\": {\"action\": " STR_T
                   ", \"target\": " STR_T ", \"params\": " ANY_T "}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = op_check_start,
};

const tern_task_def dc_volume_snapshot_record_task = {
    .size = sizeof(tern_task_def),
    .name = "volume_snapshot_record",
    .summary = "Records a volume snapshot's or rollback's step on the volume (begin, starting, "
               "commit, fail), checking every rule again at begin.",
    .args_schema =
        "{\"required\": [\"op\", \"action\", \"params\"], \"properties\": {\"op\": " STR_T
        ", \"action\": " STR_T ", \"params\": " ANY_T ", \"job_uuid\": " STR_T
        "}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = snapshot_start,
};

const tern_task_def dc_volume_network_task = {
    .size = sizeof(tern_task_def),
    .name = "volume_network",
    .summary = "Records a volume's network attach or detach (begin, commit, fail): its networks "
               "and its storage instance's NICs and addresses.",
    .args_schema =
        "{\"required\": [\"op\", \"action\", \"params\"], \"properties\": {\"op\": " STR_T
        ", \"action\": " STR_T ", \"params\": " ANY_T ", \"job_uuid\": " STR_T
        "}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = network_start,
};
