/*
 * migration_tasks.c -- the control plane's tasks of an instance migration (RFD 34,
 * docs/MIGRATION.md): each hands its arguments to one Lua script (tasks/dc/lua/
 * migration_*.lua, with the rules of migration_rules.lua) that reads and changes the
 * migration's record, its VM and the servers' capacity in Redis at once. The settings
 * a script needs (datacenter.h dc->set) are passed as its "settings" argument.
 *
 *   dc.migration_check     admission of every migrate-* workflow
 *   dc.migration_claim     the record, the VM's claim and the target's capacity
 *   dc.migration_phase     the state machine: start, done, fail of a phase
 *   dc.migration_progress  the send's progress and pass ends; pause or abort asked
 *   dc.migration_switch    the swap (switch steps 3 to 5): the VM and NICs to the target
 *   dc.migration_unswitch  the swap undone (abort after it, rollback)
 *   dc.migration_step      how far the switch got
 *   dc.migration_request   a pause or an abort asked of the migration
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "dc_state.h"
#include "dc_tasks.h"
#include "inventory_script.h"
#include "lua_scripts.h"

/* Retrying does not help these: the request, the migration's state or the servers'
 * capacity must change first. */
static const char *const fatal_codes[] = {
    "InvalidArgument",     "ResourceNotFound",  "InvalidState",  "NoAllocatableServersError",
    "MigrationInProgress", "PreviousMigration", "VmMigrating",   "MigrationNotFound",
    "NotAllowed",          "SchedulerDisabled", "NoDescription", NULL};

/* The settings the scripts apply, as their "settings" argument: a new reference, or
 * NULL after failing the attempt (a runner without a description has none). */
static json_t *settings_json(tern_ctx *ctx)
{
    const dc_state_t *s = tern_plugin_state(ctx);
    if (s == NULL || s->dc == NULL) {
        tern_task_fail(ctx, "NoDescription",
                       "%s: this runner's dc configuration names no \"datacenter\" description "
                       "(the migration settings are in it)",
                       tern_step_name(ctx));
        return NULL;
    }
    const dc_settings_t *set = &s->dc->set;
    json_t *out =
        json_pack("{s:b, s:b, s:I, s:I}", "allow_user_migrations", set->allow_user_migrations,
                  "migration_scheduler", set->migration_scheduler, "max_running_migrations_per_cn",
                  (json_int_t)set->max_running_migrations_per_cn, "migration_send_mbps_limit",
                  (json_int_t)set->migration_send_mbps_limit);
    if (out == NULL)
        tern_task_fail(ctx, "OutOfMemory", "%s: out of memory", tern_step_name(ctx));
    return out;
}

/* Sets `key` of fields (a new reference, or NULL: out of memory) to value when the
 * step did not give it. Returns fields. */
static json_t *with_default(json_t *fields, const char *key, const char *value)
{
    if (fields != NULL && json_object_get(fields, key) == NULL)
        json_object_set_new(fields, key, value != NULL ? json_string(value) : json_null());
    return fields;
}

static void migration_check_start(tern_ctx *ctx, const json_t *args)
{
    json_t *fields = with_default(json_deep_copy(args), "target", tern_job_target(ctx));
    json_t *set = fields != NULL ? settings_json(ctx) : NULL;
    if (fields == NULL || set == NULL) {
        if (fields == NULL)
            tern_task_fail(ctx, "OutOfMemory", "dc.migration_check: out of memory");
        json_decref(fields);
        return;
    }
    json_object_set_new(fields, "settings", set);
    dc_script_run(ctx, dc_lua_migration_check, fields, true, NULL);
    json_decref(fields);
}

/* The migration's secret: 32 random bytes as 64 hex digits into out (65 bytes), which
 * the target's listener checks a sender against (HMAC). Redis's Lua has no source of
 * randomness, so the task draws it. 0, or -1 when the system gives none. */
static int draw_secret(char out[65])
{
    unsigned char raw[32];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    explicit_bzero(raw, sizeof raw);
    return 0;
}

/* The claim takes the check's answer as its workflow passes it (more fields than it
 * reads: additional ones are allowed and ignored). */
static void migration_claim_start(tern_ctx *ctx, const json_t *args)
{
    char secret[65];
    if (draw_secret(secret) != 0) {
        tern_task_fail(ctx, "NoRandomness",
                       "dc.migration_claim: the system gave no random bytes "
                       "for the migration's secret");
        return;
    }
    json_t *fields = with_default(json_deep_copy(args), "migration_uuid", tern_job_uuid(ctx));
    json_t *set = fields != NULL ? settings_json(ctx) : NULL;
    if (fields == NULL || set == NULL) {
        if (fields == NULL)
            tern_task_fail(ctx, "OutOfMemory", "dc.migration_claim: out of memory");
        json_decref(fields);
        return;
    }
    json_object_set_new(fields, "settings", set);
    json_object_set_new(fields, "secret", json_string(secret));
    with_default(fields, "job_uuid", tern_job_uuid(ctx));
    explicit_bzero(secret, sizeof secret);
    dc_script_run(ctx, dc_lua_migration_claim, fields, false, NULL);
    json_decref(fields);
}

/* The phase's job is the one running the step unless given. */
static void migration_phase_start(tern_ctx *ctx, const json_t *args)
{
    json_t *fields = with_default(json_deep_copy(args), "job_uuid", tern_job_uuid(ctx));
    if (fields == NULL) {
        tern_task_fail(ctx, "OutOfMemory", "dc.migration_phase: out of memory");
        return;
    }
    dc_script_run(ctx, dc_lua_migration_phase, fields, false, NULL);
    json_decref(fields);
}

static void migration_progress_start(tern_ctx *ctx, const json_t *args)
{
    dc_script_run(ctx, dc_lua_migration_progress, args, false, NULL);
}

static void migration_switch_start(tern_ctx *ctx, const json_t *args)
{
    dc_script_run(ctx, dc_lua_migration_switch, args, false, NULL);
}

static void migration_unswitch_start(tern_ctx *ctx, const json_t *args)
{
    dc_script_run(ctx, dc_lua_migration_unswitch, args, false, NULL);
}

static void migration_step_start(tern_ctx *ctx, const json_t *args)
{
    dc_script_run(ctx, dc_lua_migration_step, args, false, NULL);
}

static void migration_request_start(tern_ctx *ctx, const json_t *args)
{
    dc_script_run(ctx, dc_lua_migration_request, args, false, NULL);
}

/* Values are checked by the scripts, which name the field of a bad one. */
#define ANY_T "{\"type\": \"any\"}"
#define STR_T "{\"type\": \"string\"}"

const tern_task_def dc_migration_check_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_check",
    .summary = "Admission of a migrate-* workflow: its params, who calls, the migration's state, "
               "the target.",
    .args_schema = "{\"required\": [\"action\", \"params\"], \"properties\": {\"action\": " STR_T
                   ", \"vm_uuid\": " ANY_T ", \"target\": " STR_T ", \"params\": " ANY_T
                   "}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = migration_check_start,
};

const tern_task_def dc_migration_claim_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_claim",
    .summary = "Claims a VM for a migration: the record, the VM marked, the target's capacity.",
    .args_schema =
        "{\"required\": [\"vm_uuid\", \"action\", \"target_server_uuid\"], "
        "\"properties\": {\"vm_uuid\": " ANY_T ", \"migration_uuid\": " ANY_T
        ", \"job_uuid\": " ANY_T ", \"action\": " STR_T ", \"params\": " ANY_T
        ", \"target_server_uuid\": " ANY_T ", \"slots\": " ANY_T "}, \"additional\": true}",
    .fatal_codes = fatal_codes,
    .start = migration_claim_start,
};

const tern_task_def dc_migration_phase_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_phase",
    .summary = "A migration phase's start, done or fail: the record's state machine.",
    .args_schema = "{\"required\": [\"migration_uuid\", \"phase\", \"event\"], \"properties\": "
                   "{\"migration_uuid\": " ANY_T ", \"job_uuid\": " ANY_T ", \"phase\": " STR_T
                   ", \"event\": " STR_T ", \"error\": " ANY_T ", \"errorDetail\": " ANY_T
                   ", \"history\": " ANY_T "}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = migration_phase_start,
};

const tern_task_def dc_migration_progress_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_progress",
    .summary = "A migration's progress and pass ends; answers whether a pause or abort is asked.",
    .args_schema =
        "{\"required\": [\"migration_uuid\"], \"properties\": {\"migration_uuid\": " ANY_T
        ", \"event\": " ANY_T ", \"pass_done\": " ANY_T ", \"switch_reason\": " ANY_T
        "}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = migration_progress_start,
};

const tern_task_def dc_migration_switch_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_switch",
    .summary = "Swaps a verified migration's VM, NICs and allocation onto the target.",
    .args_schema =
        "{\"required\": [\"migration_uuid\"], \"properties\": {\"migration_uuid\": " ANY_T
        "}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = migration_switch_start,
};

const tern_task_def dc_migration_unswitch_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_unswitch",
    .summary = "Moves a swapped migration's VM, NICs and allocation back onto the source.",
    .args_schema =
        "{\"required\": [\"migration_uuid\"], \"properties\": {\"migration_uuid\": " ANY_T
        "}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = migration_unswitch_start,
};

const tern_task_def dc_migration_step_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_step",
    .summary = "Records how far a migration's switch got (refuses the point of no return "
               "under an abort).",
    .args_schema = "{\"required\": [\"migration_uuid\", \"switch_step\"], \"properties\": "
                   "{\"migration_uuid\": " ANY_T ", \"switch_step\": " ANY_T
                   ", \"vm_state_before\": " ANY_T "}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = migration_step_start,
};

const tern_task_def dc_migration_request_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_request",
    .summary = "Asks a migration to pause or abort; answers the job in flight.",
    .args_schema = "{\"required\": [\"migration_uuid\", \"what\"], \"properties\": "
                   "{\"migration_uuid\": " ANY_T ", \"what\": " STR_T "}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = migration_request_start,
};
