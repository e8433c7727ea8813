/*
 * disk_job.h -- what the agent's disk tasks (dc.disk_usage, dc.disk_apply,
 * dc.disk_undo) share: their arguments checked on the loop, their work run on the
 * thread pool under the instance directory's key (so the steps on one instance, and
 * its create and destroy, never overlap), and one ending for all of them: vm.json made
 * to agree with the files (vm_disks_sync), then every disk measured
 * (vm_disks_measure) and answered.
 *
 * A `change` is the VM record's disk_change:
 *   {"op": "add"|"resize"|"delete"|"snapshot_create"|"snapshot_delete", "job_uuid"?,
 *    "vm_uuid"?, "id"?, "pci_slot"?, "old_size"?, "new_size"?, "name"?, "image"?}
 */
#ifndef DC_DISK_JOB_H
#define DC_DISK_JOB_H

#include <stdatomic.h>
#include <stddef.h>

#include <jansson.h>
#include <tern/task.h>

#include "vm_disks.h"

typedef struct disk_job disk_job_t;

/* A task's own work on the instance, on a pool thread, before the common ending:
 * 0, or a negative errno with err and, for a code other than DiskFileFailed,
 * job->code set. */
typedef int (*disk_job_fn)(disk_job_t *job, vm_disks_t *v, const atomic_bool *stop, char *err,
                           size_t errlen);

struct disk_job {
    const char *task; /* "dc.disk_apply", for messages */
    char vm_uuid[40]; /* checked: a UUID */
    json_t *change;   /* the change (owned), or NULL */
    const char *code; /* the failure's code, a literal */
    json_t *answer;   /* the measured answer (owned until handed to the engine) */
    disk_job_fn fn;   /* may be NULL: measure only */
};

/* Checks the change (borrowed) for vm_uuid: NULL, or msg naming the fault with its
 * path ("change.new_size: ..."). */
const char *disk_change_check(const json_t *change, const char *vm_uuid, char *msg, size_t msglen);

/* The op of a checked change. */
const char *disk_change_op(const json_t *change);

/* Starts the task: reads "vm_uuid" and, when `with_change`, "change" (an object, or
 * null when `null_ok`) from args, checks them (InvalidArgument), finds the instance
 * directory in the data root (PathOutsideDataRoot) and queues fn. Fails the attempt
 * itself on any fault. */
void disk_job_start(tern_ctx *ctx, const char *task, const json_t *args, bool with_change,
                    bool null_ok, disk_job_fn fn);

#endif
