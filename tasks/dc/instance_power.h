/*
 * instance_power.h -- an instance's workload stopped, shared by dc.instance_stop and
 * dc.instance_destroy, and started, shared by dc.instance_start and dc.share_restart
 * (instance_power.c runs both start and stop).
 */
#ifndef DC_INSTANCE_POWER_H
#define DC_INSTANCE_POWER_H

#include <tern/task.h>

#include "instance_dir.h"

/* Called once the workload is gone, with the pid it had (0: none was running) and
 * `data` as given. */
typedef void (*instance_stopped_cb)(tern_ctx *ctx, const instance_paths_t *p, pid_t pid,
                                    void *data);

/* Stops the workload of the instance at p, if its pid file names a live workload of
 * it: SIGTERM, a bounded wait on the loop's timers, SIGKILL, another bounded wait;
 * the pid file is removed once it is gone, then `then` runs. A workload that outlives
 * SIGKILL fails the attempt with WorkloadStuck (then does not run). `task` names the
 * task in messages. Keeps its data through attempts.h (the cancel hook frees it). */
void instance_stop_workload(tern_ctx *ctx, const char *task, const instance_paths_t *p,
                            instance_stopped_cb then, void *data);

/* Called once the workload runs, with its pid; or with pid 0 and the failure's code
 * and message (borrowed) when it could not start. */
typedef void (*instance_started_cb)(tern_ctx *ctx, const instance_paths_t *p, pid_t pid,
                                    const char *code, const char *msg, void *data);

/* Starts the workload `kind` (idle, writer or share) of the instance at p, detached:
 * `<workload_bin> <kind> --dir <dir> [--file <dir>/disks/disk1.img --rate
 * <writer_records_per_s> (writer)]
 * [--health-ms <share_health_ms> (share)] --daemonize --pidfile <dir>/workload.pid`,
 * then waits, bounded, until the pid file names a live workload of the instance, and
 * calls `then`. Keeps its data through attempts.h (the cancel hook frees it); one
 * start at a time per attempt. */
void instance_start_workload(tern_ctx *ctx, const char *task, const instance_paths_t *p,
                             const char *kind, instance_started_cb then, void *data);

#endif
