/*
 * disk_usage.c -- dc.disk_usage, on a server's agent: measures an instance's disks
 * and their snapshots, changing nothing (vm.json is only rewritten when it no longer
 * agrees with the files, which a killed step can leave).
 *
 *   {"vm_uuid"} -> {"disks": [{"id", "pci_slot", "path", "size" (MiB), "data_bytes",
 *                   "snapshot_bytes", "snapshot_size" (MiB, rounded up)}],
 *                   "snapshots": [names, oldest first]}
 *
 * snapshot_bytes is snapshot_space.h's rule; measuring reads only the data extents of
 * the snapshot copies.
 */
#include "dc_state.h"
#include "disk_job.h"

static void usage_start(tern_ctx *ctx, const json_t *args)
{
    disk_job_start(ctx, "dc.disk_usage", args, false, false, NULL);
}

const tern_task_def dc_disk_usage_task = {
    .size = sizeof(tern_task_def),
    .name = "disk_usage",
    .summary = "An instance's disks measured on this server: size, data and the space its "
               "snapshots use (snapshot_bytes).",
    .args_schema = "{\"required\": [\"vm_uuid\"], \"properties\": {\"vm_uuid\": {\"type\": "
                   "\"string\"}}, \"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = usage_start,
    .cancel = dc_agent_cancel,
};
