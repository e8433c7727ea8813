/*
 * migration_leftover.c -- the control's tasks for the hidden target copy an abort
 * leaves on a lost target server (docs/MIGRATION.md "A lost target"), each one op of
 * lua/migration_leftover.lua:
 *
 *   dc.migration_target_leave {migration_uuid, job_uuid, target_lost}
 *     -> {left, queue, cleanup_job_uuid?}
 *     a step of migrate-abort, after the source was put right. Without target_lost it
 *     answers the target's queue, where the abort's remove_target then runs. With it,
 *     the record says target_cleanup "pending", the answer's queue is the control's
 *     (remove_target then changes nothing), and the migrate-target-clean job is asked
 *     of the control's API (api_jobs.h): it waits on the target server's queue, holding
 *     nothing, until that server's agent serves it again. Its uuid is made from the
 *     migration's, so a step run again asks for the same job.
 *
 *   dc.migration_leftover_check   admission of migrate-target-clean {migration_uuid}
 *   dc.migration_leftover_done    {migration_uuid, job_uuid, removed, other_migration?}:
 *     the record's target_cleanup "done" and the target's allocation given back.
 */
#include <stdlib.h>

#include "api_jobs.h"
#include "dc_state.h"
#include "dc_tasks.h"
#include "inventory_script.h"
#include "lua_scripts.h"

#define ANY_T "{\"type\": \"any\"}"

/* Retrying does not help these: the migration's state or the configuration must change
 * first. */
static const char *const fatal_codes[] = {"InvalidArgument", "MigrationNotFound", "InvalidState",
                                          "NoApiUrl",        "CleanupJobRefused", NULL};

static const api_job_codes_t cleanup_job_codes = {.unavailable = "CleanupJobUnavailable",
                                                  .refused = "CleanupJobRefused"};

/* args (borrowed) with "op" set: a new reference, or NULL after failing the attempt. */
static json_t *with_op(tern_ctx *ctx, const json_t *args, const char *op)
{
    json_t *fields = json_deep_copy(args);
    if (fields == NULL || json_object_set_new(fields, "op", json_string(op)) != 0) {
        json_decref(fields);
        tern_task_fail(ctx, "OutOfMemory", "%s: out of memory", tern_step_name(ctx));
        return NULL;
    }
    return fields;
}

/* The leave's answer: the clean-up job asked for when the target is left. NULL: the
 * outcome is reported later, or was (a failure). */
static json_t *target_left(tern_ctx *ctx, const json_t *answer)
{
    const json_t *post = json_object_get(answer, "post");
    json_t *result = json_pack("{s:O, s:O}", "left", json_object_get(answer, "left"), "queue",
                               json_object_get(answer, "queue"));
    if (result == NULL) {
        tern_task_fail(ctx, "ScriptError",
                       "%s: migration_leftover.lua answered no {left, queue}: %s",
                       tern_step_name(ctx), "expected both");
        return NULL;
    }
    if (!json_is_object(post))
        return result;
    if (!json_is_string(json_object_get(post, "uuid")) ||
        json_object_set(result, "cleanup_job_uuid", json_object_get(post, "uuid")) != 0) {
        json_decref(result);
        tern_task_fail(ctx, "ScriptError", "%s: migration_leftover.lua answered a job without uuid",
                       tern_step_name(ctx));
        return NULL;
    }
    json_t *posts = json_pack("[O]", post);
    if (posts == NULL) /* exhausted memory (post is an object) */
        abort();
    return api_jobs_post(ctx, posts, result, 0, &cleanup_job_codes);
}

static void target_leave_start(tern_ctx *ctx, const json_t *args)
{
    json_t *fields = with_op(ctx, args, "leave");
    if (fields == NULL)
        return;
    dc_script_run(ctx, dc_lua_migration_leftover, fields, false, target_left);
    json_decref(fields);
}

static void target_leave_cancel(tern_ctx *ctx)
{
    const dc_state_t *s = tern_plugin_state(ctx);
    if (s != NULL && s->attempts != NULL)
        attempts_end(s->attempts, ctx);
}

static void leftover_check_start(tern_ctx *ctx, const json_t *args)
{
    json_t *fields = with_op(ctx, args, "check");
    if (fields == NULL)
        return;
    if (json_object_get(fields, "target") == NULL) {
        const char *target = tern_job_target(ctx);
        json_object_set_new(fields, "target", target != NULL ? json_string(target) : json_null());
    }
    dc_script_run(ctx, dc_lua_migration_leftover, fields, true, NULL);
    json_decref(fields);
}

static void leftover_done_start(tern_ctx *ctx, const json_t *args)
{
    json_t *fields = with_op(ctx, args, "done");
    if (fields == NULL)
        return;
    dc_script_run(ctx, dc_lua_migration_leftover, fields, false, NULL);
    json_decref(fields);
}

const tern_task_def dc_migration_target_leave_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_target_leave",
    .summary = "An abort's target left on its lost server: recorded pending, and the job that "
               "removes it when the server is back asked for.",
    .args_schema = "{\"required\": [\"migration_uuid\", \"job_uuid\", \"target_lost\"], "
                   "\"properties\": {\"migration_uuid\": " ANY_T ", \"job_uuid\": " ANY_T
                   ", \"target_lost\": {\"type\": \"boolean\"}}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = target_leave_start,
    .cancel = target_leave_cancel,
};

const tern_task_def dc_migration_leftover_check_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_leftover_check",
    .summary = "Admission of migrate-target-clean: a migration whose target copy is left to "
               "remove.",
    .args_schema = "{\"required\": [\"params\"], \"properties\": {\"params\": " ANY_T
                   ", \"target\": " ANY_T "}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = leftover_check_start,
};

const tern_task_def dc_migration_leftover_done_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_leftover_done",
    .summary = "A left target copy is gone: the record says so and the target's allocation is "
               "given back.",
    .args_schema = "{\"required\": [\"migration_uuid\", \"removed\"], \"properties\": "
                   "{\"migration_uuid\": " ANY_T ", \"job_uuid\": " ANY_T ", \"removed\": " ANY_T
                   ", \"other_migration\": " ANY_T "}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = leftover_done_start,
};
