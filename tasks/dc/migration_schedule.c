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
