/*
 * dc_tasks.h -- the task and view definitions of the dc plugin, each in the file of
 * its concept, gathered into the descriptor by dc.c.
 */
#ifndef DC_TASKS_H
#define DC_TASKS_H

#include <tern/task.h>

/* inventory_tasks.c */
extern const tern_task_def dc_inventory_load_task;
extern const tern_task_def dc_provision_check_task;
extern const tern_task_def dc_vm_check_task;
extern const tern_task_def dc_place_task;
extern const tern_task_def dc_nics_provision_task;
extern const tern_task_def dc_vm_set_state_task;
extern const tern_task_def dc_release_task;

/* vm_update_tasks.c */
extern const tern_task_def dc_vm_update_check_task;
extern const tern_task_def dc_vm_update_task;
extern const tern_task_def dc_vm_update_revert_task;

/* disk_tasks.c */
extern const tern_task_def dc_disk_check_task;
extern const tern_task_def dc_disk_reserve_task;
extern const tern_task_def dc_disk_commit_task;
extern const tern_task_def dc_disk_settle_task;

/* reconcile_tasks.c */
extern const tern_task_def dc_net_reconcile_check_task;
extern const tern_task_def dc_net_reconcile_task;

/* share_tasks.c */
extern const tern_task_def dc_share_states_task;
extern const tern_task_def dc_share_watch_check_task;

/* volume_snapshot_tasks.c */
extern const tern_task_def dc_volume_op_check_task;
extern const tern_task_def dc_volume_snapshot_record_task;
extern const tern_task_def dc_volume_network_task;

/* volume_tasks.c */
extern const tern_task_def dc_volume_check_task;
extern const tern_task_def dc_volume_claim_task;
extern const tern_task_def dc_volume_ready_task;
extern const tern_task_def dc_volume_fail_task;
extern const tern_task_def dc_volume_delete_begin_task;
extern const tern_task_def dc_volume_delete_finish_task;
extern const tern_task_def dc_volume_update_task;

/* provision_volumes.c */
extern const tern_task_def dc_volumes_reserve_task;
extern const tern_task_def dc_volumes_wait_task;
extern const tern_task_def dc_volumes_reference_task;
extern const tern_task_def dc_volumes_unreserve_task;
extern const tern_task_def dc_reservations_clean_task;

/* migration_tasks.c */
extern const tern_task_def dc_migration_check_task;
extern const tern_task_def dc_migration_claim_task;
extern const tern_task_def dc_migration_schedule_switch_task;
extern const tern_task_def dc_migration_cancel_switch_task;
extern const tern_task_def dc_migration_phase_task;
extern const tern_task_def dc_migration_progress_task;
extern const tern_task_def dc_migration_switch_task;
extern const tern_task_def dc_migration_unswitch_task;
extern const tern_task_def dc_migration_step_task;
extern const tern_task_def dc_migration_request_task;

/* migration_leftover.c */
extern const tern_task_def dc_migration_target_leave_task;
extern const tern_task_def dc_migration_leftover_check_task;
extern const tern_task_def dc_migration_leftover_done_task;

/* views.c: NULL-terminated */
extern const tern_view_def *const dc_views[];

#endif
