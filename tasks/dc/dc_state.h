/*
 * dc_state.h -- what the dc plugin's init builds (dc.c) and its tasks read through
 * tern_plugin_state, and the task definitions dc.c lists in its table.
 *
 * Everything but `files` and `attempts` is read-only once loaded, so tasks share it
 * without locks; `files` (file_work.h) locks for itself, `attempts` is the loop's
 * (on agents and on the control plane alike).
 */
#ifndef DC_STATE_H
#define DC_STATE_H

#include <tern/task.h>

#include "attempts.h"
#include "datacenter.h"
#include "file_work.h"
#include "migration_listener.h"

typedef struct dc_state {
    datacenter_t *dc;                /* NULL when no description was configured */
    const dc_server_t *server;       /* this agent's server (in dc), or NULL */
    char *workload_bin;              /* tern-workload, or NULL when not configured */
    file_work_t *files;              /* the thread pool's file jobs (agents only) */
    attempts_t *attempts;            /* start/stop/destroy attempts' data (agents only) */
    size_t found_at_init;            /* the instances the data root held when init scanned it */
    char *api_url;                   /* the control's API (no trailing "/"), for the volume jobs a
                                        provision asks for; or NULL */
    char *api_token;                 /* the bearer token of api_url, or NULL */
    migration_listener_t *migration; /* where migrations into this server arrive (agents with
                                        "migration_listen"), or NULL */
} dc_state_t;

/* The agent's state for a task that runs on a server's agent only, or NULL after
 * failing the attempt with NotAnAgent naming `task`. */
const dc_state_t *dc_agent_state(tern_ctx *ctx, const char *task);

/* The cancel hook of the agent's tasks: stops the attempt's file jobs and frees what
 * it kept. */
void dc_agent_cancel(tern_ctx *ctx);

/* Codes that end retries at once, shared by the dc tasks. */
extern const char *const dc_fatal_codes[];

extern const tern_task_def dc_image_ensure_task;
extern const tern_task_def dc_instance_create_task;
extern const tern_task_def dc_instance_start_task;
extern const tern_task_def dc_instance_stop_task;
extern const tern_task_def dc_instance_destroy_task;
extern const tern_task_def dc_disk_usage_task;
extern const tern_task_def dc_disk_apply_task;
extern const tern_task_def dc_disk_undo_task;
extern const tern_task_def dc_instances_scan_task;
extern const tern_task_def dc_storage_create_task;
extern const tern_task_def dc_share_probe_task;
extern const tern_task_def dc_share_restart_task;
extern const tern_task_def dc_volume_snapshot_agent_task;
extern const tern_task_def dc_instance_nics_task;
extern const tern_task_def dc_migration_target_create_task;
extern const tern_task_def dc_migration_recv_open_task;
extern const tern_task_def dc_migration_send_task;
extern const tern_task_def dc_migration_verify_task;
extern const tern_task_def dc_migration_image_send_task;
extern const tern_task_def dc_migration_flip_task;
extern const tern_task_def dc_migration_cleanup_task;
extern const tern_task_def dc_migration_estimate_task;
extern const tern_task_def dc_instance_update_task;

#endif
