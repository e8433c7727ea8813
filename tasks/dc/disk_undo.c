/*
 * disk_undo.c -- dc.disk_undo, on a server's agent: what a failed disk job left on the
 * instance's files is made whole, vm.json made to agree with the files, and the disks
 * measured (the answer of disk_usage.c).
 *
 *   {"vm_uuid", "change": {...} | null} -> {"disks": [USAGE...], "snapshots": [names]}
 *
 *   add              the new file removed if present, and its disk from vm.json: an
 *                    add that failed adds nothing (a file in that slot that belongs to
 *                    another disk of vm.json is never touched)
 *   snapshot_create  snapshots/<name>/ and snapshots/<name>.part/ removed
 *   resize, delete, snapshot_delete, null
 *                    nothing undone: the data plane decides (a grown file is never
 *                    cut back, an unlinked file cannot come back); the record is made
 *                    to agree with what the files are
 *
 * Run twice it is run once.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dc_state.h"
#include "disk_file.h"
#include "disk_job.h"

static int undo_add(disk_job_t *j, vm_disks_t *v, char *err, size_t errlen)
{
    const char *id = json_string_value(json_object_get(j->change, "id"));
    int f = vm_disks_slot_function(json_string_value(json_object_get(j->change, "pci_slot")));
    const json_t *there = vm_disks_find(v, NULL, f);
    const char *had = json_string_value(json_object_get(there, "id"));
    if (there != NULL && (had == NULL || strcmp(had, id) != 0))
        return 0; /* the slot is another disk's: the add never got as far as a file */
    char path[PATH_MAX];
    vm_disks_file(v, f, path);
    if (unlink(path) != 0 && errno != ENOENT) {
        snprintf(err, errlen, "cannot remove %s: %s", path, strerror(errno));
        return -errno;
    }
    char part[PATH_MAX];
    if (snprintf(part, sizeof part, "%s.part", path) < (int)sizeof part)
        unlink(part); /* usually absent */
    /* vm_disks_sync drops the disk from vm.json now that its file is gone. */
    return dc_disk_dir_sync(path, err, errlen);
}

static int undo_snapshot_create(disk_job_t *j, vm_disks_t *v, char *err, size_t errlen)
{
    const char *name = json_string_value(json_object_get(j->change, "name"));
    char whole[PATH_MAX], part[PATH_MAX];
    vm_disks_snapshot_dir(v, name, false, whole);
    vm_disks_snapshot_dir(v, name, true, part);
    int rc = vm_disks_remove_snapshot_dir(v, part, err, errlen);
    if (rc == 0)
        rc = vm_disks_remove_snapshot_dir(v, whole, err, errlen);
    return rc;
}

static int undo_work(disk_job_t *j, vm_disks_t *v, const atomic_bool *stop, char *err,
                     size_t errlen)
{
    (void)stop; /* removals are short: they run to their end */
    const char *op = j->change != NULL ? disk_change_op(j->change) : NULL;
    if (op != NULL && strcmp(op, "add") == 0)
        return undo_add(j, v, err, errlen);
    if (op != NULL && strcmp(op, "snapshot_create") == 0)
        return undo_snapshot_create(j, v, err, errlen);
    return 0;
}

static void undo_start(tern_ctx *ctx, const json_t *args)
{
    disk_job_start(ctx, "dc.disk_undo", args, true, true, undo_work);
}

const tern_task_def dc_disk_undo_task = {
    .size = sizeof(tern_task_def),
    .name = "disk_undo",
    .summary = "Makes whole what a failed disk job left on this server's files (a new disk "
               "or snapshot removed), vm.json agreeing with the files, then measures.",
    .args_schema = "{\"required\": [\"vm_uuid\", \"change\"], \"properties\": {\"vm_uuid\": "
                   "{\"type\": \"string\"}, \"change\": {\"type\": [\"object\", \"null\"]}}, "
                   "\"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = undo_start,
    .cancel = dc_agent_cancel,
};
