/*
 * disk_tasks.c -- the control-plane tasks of the disk operations of flexible disk
 * instances (docs/DISKS.md): each hands its arguments to one Lua script (tasks/dc/lua/
 * disk_*.lua, with the rules of disk_rules.lua) that reads and changes the VM's record
 * in Redis at once. The agent's tasks (dc.disk_usage, dc.disk_apply, dc.disk_undo) do
 * the work on the files between them.
 *
 *   dc.disk_check    admission of disk-add, disk-resize, disk-delete,
 *                    vm-snapshot-create, vm-snapshot-delete, vm-disk-usage
 *   dc.disk_reserve  the rules again, with the agent's fresh measure; the change written
 *   dc.disk_commit   the change made part of the record, with the agent's measure
 *   dc.disk_settle   after a failure: the record made to agree with the files
 */
#include <string.h>

#include "dc_tasks.h"
#include "inventory_script.h"
#include "lua_scripts.h"

/* Retrying does not help these: the request, the VM's state or its space must change
 * first. */
static const char *const fatal_codes[] = {"InvalidArgument",   "ResourceNotFound", "InvalidState",
                                          "InsufficientSpace", "VmMigrating",      NULL};

/* The arguments with the job's target, or its uuid, when the step did not give them:
 * a new reference. */
static json_t *with_job(const json_t *args, const char *key, const char *value)
{
    json_t *fields = json_deep_copy(args);
    if (fields != NULL && json_object_get(fields, key) == NULL)
        json_object_set_new(fields, key, value != NULL ? json_string(value) : json_null());
    return fields;
}

static void run_with_job(tern_ctx *ctx, const char *script, const json_t *args, const char *key,
                         const char *value, bool admission)
{
    json_t *fields = with_job(args, key, value);
    if (fields == NULL) {
        tern_task_fail(ctx, "OutOfMemory", "%s: out of memory", tern_step_name(ctx));
        return;
    }
    dc_script_run(ctx, script, fields, admission, NULL);
    json_decref(fields);
}

static void disk_check_start(tern_ctx *ctx, const json_t *args)
{
    run_with_job(ctx, dc_lua_disk_check, args, "target", tern_job_target(ctx), true);
}

static void disk_reserve_start(tern_ctx *ctx, const json_t *args)
{
    run_with_job(ctx, dc_lua_disk_reserve, args, "job_uuid", tern_job_uuid(ctx), false);
}

static void disk_commit_start(tern_ctx *ctx, const json_t *args)
{
    run_with_job(ctx, dc_lua_disk_commit, args, "job_uuid", tern_job_uuid(ctx), false);
}

static void disk_settle_start(tern_ctx *ctx, const json_t *args)
{
    run_with_job(ctx, dc_lua_disk_settle, args, "job_uuid", tern_job_uuid(ctx), false);
}

/* Values are checked by the scripts, which name the JSON path of a bad one. */
#define ANY_T "{\"type\": \"any\"}"

const tern_task_def dc_disk_check_task = {
    .size = sizeof(tern_task_def),
    .name = "disk_check",
    .summary = "Admission of a disk operation: its params, the VM, the disk, state and space.",
    .args_schema =
        "{\"required\": [\"action\", \"vm_uuid\", \"params\"], \"properties\": "
        "{\"action\": {\"type\": \"string\"}, \"vm_uuid\": " ANY_T
        ", \"target\": {\"type\": \"string\"}, \"params\": " ANY_T "}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = disk_check_start,
};

const tern_task_def dc_disk_reserve_task = {
    .size = sizeof(tern_task_def),
    .name = "disk_reserve",
    .summary = "Checks a disk operation again with fresh usage and reserves it on the VM.",
    .args_schema = "{\"required\": [\"action\", \"vm_uuid\", \"params\"], \"properties\": "
                   "{\"action\": {\"type\": \"string\"}, \"vm_uuid\": " ANY_T
                   ", \"job_uuid\": {\"type\": \"string\"}, \"params\": " ANY_T
                   ", \"usage\": " ANY_T "}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = disk_reserve_start,
};

const tern_task_def dc_disk_commit_task = {
    .size = sizeof(tern_task_def),
    .name = "disk_commit",
    .summary = "Records a disk operation the agent made, with its measure of the disks.",
    .args_schema = "{\"required\": [\"vm_uuid\", \"usage\"], \"properties\": {\"vm_uuid\": " ANY_T
                   ", \"job_uuid\": {\"type\": \"string\"}, \"usage\": " ANY_T
                   ", \"snapshots\": " ANY_T ", \"action\": {\"type\": \"string\"}}, "
                   "\"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = disk_commit_start,
};

const tern_task_def dc_disk_settle_task = {
    .size = sizeof(tern_task_def),
    .name = "disk_settle",
    .summary = "After a failed disk operation, makes the VM's record agree with its files.",
    .args_schema = "{\"required\": [\"vm_uuid\"], \"properties\": {\"vm_uuid\": " ANY_T
                   ", \"job_uuid\": {\"type\": \"string\"}, \"usage\": " ANY_T
                   ", \"snapshots\": " ANY_T "}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = disk_settle_start,
};
