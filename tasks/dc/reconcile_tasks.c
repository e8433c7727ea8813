/*
 * reconcile_tasks.c -- the control-plane tasks of the NIC reconcile (RFD 58,
 * docs/RECONCILE.md); the agent's half is dc.instances_scan (instances_scan.c).
 *
 *   dc.net_reconcile_check  admission of net-reconcile: the job's own params
 *                           ({server_uuid}, plus a schedule's schedule_uuid and
 *                           scheduled_for) and target (/net-reconcile-<server_uuid>);
 *                           the server known to the inventory
 *   dc.net_reconcile        {server_uuid, scan} -> {backfilled, reaped, state_fixed,
 *                           vanished}: one script (lua/net_reconcile.lua)
 */
#include "dc_tasks.h"
#include "inventory_script.h"
#include "lua_scripts.h"

/* Retrying does not help these: the request or the inventory must change first. */
static const char *const fatal_codes[] = {"InvalidArgument", "ResourceNotFound", NULL};

static void net_reconcile_check_start(tern_ctx *ctx, const json_t *args)
{
    (void)args; /* the check reads the job itself, so no param escapes it */
    const char *target = tern_job_target(ctx);
    json_t *fields = json_pack("{s:O, s:o}", "params", (json_t *)tern_job_params(ctx), "target",
                               target != NULL ? json_string(target) : json_null());
    if (fields == NULL) {
        tern_task_fail(ctx, "OutOfMemory", "dc.net_reconcile_check: out of memory");
        return;
    }
    dc_script_run(ctx, dc_lua_net_reconcile_check, fields, true, NULL);
    json_decref(fields);
}

static void net_reconcile_start(tern_ctx *ctx, const json_t *args)
{
    dc_script_run(ctx, dc_lua_net_reconcile, args, false, NULL);
}

const tern_task_def dc_net_reconcile_check_task = {
    .size = sizeof(tern_task_def),
    .name = "net_reconcile_check",
    .summary = "Admission of net-reconcile: params {server_uuid} of a known server, target "
               "/net-reconcile-<server_uuid>.",
    .args_schema = "{\"required\": [], \"properties\": {}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = net_reconcile_check_start,
};

const tern_task_def dc_net_reconcile_task = {
    .size = sizeof(tern_task_def),
    .name = "net_reconcile",
    .summary = "Makes a server's NICs agree with its agent's scan: backfill, reap, states, "
               "vanished VMs destroyed.",
    .args_schema = "{\"required\": [\"server_uuid\", \"scan\"], \"properties\": {\"server_uuid\": "
                   "{\"type\": \"string\"}, \"scan\": {\"type\": \"object\"}}, "
                   "\"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = net_reconcile_start,
};
