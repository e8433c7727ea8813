/*
 * disk_job.c -- the disk tasks' common path (disk_job.h). The job owns its change and
 * its answer; the file work registry owns the job from disk_job_start on.
 */
#include "disk_job.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dc_state.h"
#include "disk_file.h"
#include "file_work.h"
#include "instance_dir.h"
#include "lib/args.h"

static const char *const ops[] = {"add", "resize", "delete", "snapshot_create", "snapshot_delete",
                                  NULL};

const char *disk_change_op(const json_t *change)
{
    return json_string_value(json_object_get(change, "op"));
}

const char *disk_change_check(const json_t *change, const char *vm_uuid, char *msg, size_t msglen)
{
    const char *op = disk_change_op(change);
    bool known = false;
    for (size_t i = 0; op != NULL && ops[i] != NULL; i++)
        known = known || strcmp(op, ops[i]) == 0;
    if (!known) {
        snprintf(msg, msglen,
                 "change.op: expected add, resize, delete, snapshot_create or snapshot_delete");
        return msg;
    }
    const json_t *vm = json_object_get(change, "vm_uuid");
    if (vm != NULL && !json_is_null(vm) &&
        (!json_is_string(vm) || strcmp(json_string_value(vm), vm_uuid) != 0)) {
        snprintf(msg, msglen, "change.vm_uuid: the change is of vm %s, not of vm %s",
                 json_is_string(vm) ? json_string_value(vm) : "?", vm_uuid);
        return msg;
    }
    bool disk_op = strcmp(op, "add") == 0 || strcmp(op, "resize") == 0 || strcmp(op, "delete") == 0;
    const json_t *id = json_object_get(change, "id");
    const json_t *slot = json_object_get(change, "pci_slot");
    const json_t *size = json_object_get(change, "new_size");
    const json_t *name = json_object_get(change, "name");
    if (id != NULL && !json_is_null(id) &&
        (!json_is_string(id) || !dc_uuid_ok(json_string_value(id))))
        snprintf(msg, msglen, "change.id: expected a disk's UUID");
    else if (slot != NULL && !json_is_null(slot) &&
             vm_disks_slot_function(json_string_value(slot)) < 0)
        snprintf(msg, msglen, "change.pci_slot: expected 0:4:0 to 0:4:7");
    else if (disk_op && (slot == NULL || json_is_null(slot)) && (id == NULL || json_is_null(id)))
        snprintf(msg, msglen, "change: a %s names its disk by id or pci_slot", op);
    else if (strcmp(op, "add") == 0 && (slot == NULL || json_is_null(slot)))
        snprintf(msg, msglen, "change.pci_slot: required for an add");
    else if (strcmp(op, "add") == 0 && (id == NULL || json_is_null(id)))
        snprintf(msg, msglen, "change.id: required for an add");
    else if ((strcmp(op, "add") == 0 || strcmp(op, "resize") == 0) &&
             (!json_is_integer(size) || json_integer_value(size) < 1 ||
              (uint64_t)json_integer_value(size) > DC_DISK_MAX_MIB))
        snprintf(msg, msglen, "change.new_size: expected an integer of MiB, 1 to %llu",
                 (unsigned long long)DC_DISK_MAX_MIB);
    else if (!disk_op && !vm_disks_snapshot_name_ok(json_string_value(name)))
        snprintf(msg, msglen,
                 "change.name: expected a snapshot name (^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$)");
    else
        return NULL;
    return msg;
}

typedef struct job_arg {
    disk_job_t job;
    char root[PATH_MAX];
} job_arg_t;

static void job_free(void *data)
{
    job_arg_t *a = data;
    json_decref(a->job.change);
    json_decref(a->job.answer);
    free(a);
}

static int job_work(void *data, const atomic_bool *stop, char *err, size_t errlen)
{
    job_arg_t *a = data;
    disk_job_t *j = &a->job;
    vm_disks_t v;
    j->code = "DiskFileFailed";
    int rc = vm_disks_open(a->root, j->vm_uuid, &v, err, errlen);
    if (rc != 0) {
        j->code = rc == -ENOENT  ? "InstanceNotFound"
                  : rc == -EPERM ? "PathOutsideDataRoot"
                                 : "DiskFileFailed";
        if (rc == -ENOENT)
            snprintf(err, errlen, "vm %s has no instance on this server (%s)", j->vm_uuid,
                     v.p.vm_json);
        vm_disks_close(&v);
        return rc;
    }
    /* The files decide what vm.json says: before the work, so it works on what a
     * killed attempt left as it is, and after, so vm.json says what the work did. */
    rc = vm_disks_sync(&v, err, errlen);
    if (rc == 0 && j->fn != NULL)
        rc = j->fn(j, &v, stop, err, errlen);
    if (rc == 0)
        rc = vm_disks_sync(&v, err, errlen);
    if (rc == -EINVAL && strcmp(j->code, "DiskFileFailed") == 0)
        j->code = "DiskFileInvalid";
    if (rc == 0)
        rc = vm_disks_measure(&v, stop, &j->answer, err, errlen);
    vm_disks_close(&v);
    return rc;
}

static void job_done(tern_ctx *ctx, void *data, int rc, const char *err)
{
    job_arg_t *a = data;
    disk_job_t *j = &a->job;
    if (rc != 0) {
        tern_task_fail(ctx, j->code, "%s: %s", j->task, err);
        return;
    }
    json_t *answer = j->answer;
    j->answer = NULL;
    tern_task_done(ctx, answer);
}

void disk_job_start(tern_ctx *ctx, const char *task, const json_t *args, bool with_change,
                    bool null_ok, disk_job_fn fn)
{
    const dc_state_t *s = dc_agent_state(ctx, task);
    if (s == NULL)
        return;
    char msg[1024];
    const char *vm_uuid = NULL;
    const char *bad = task_args_string(args, "vm_uuid", &vm_uuid, NULL, msg, sizeof msg);
    if (bad == NULL && vm_uuid == NULL)
        bad = "vm_uuid: required";
    if (bad == NULL && !dc_uuid_ok(vm_uuid))
        bad = "vm_uuid: expected a lowercase UUID";
    const json_t *change = with_change ? json_object_get(args, "change") : NULL;
    if (bad == NULL && with_change) {
        if (change == NULL || (json_is_null(change) && !null_ok) ||
            (!json_is_null(change) && !json_is_object(change)))
            bad = null_ok ? "change: expected an object or null" : "change: expected an object";
        else if (json_is_object(change))
            bad = disk_change_check(change, vm_uuid, msg, sizeof msg);
    }
    if (bad != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "%s: %s", task, bad);
        return;
    }
    job_arg_t *a = calloc(1, sizeof *a);
    if (a == NULL)
        abort();
    a->job.task = task;
    a->job.fn = fn;
    a->job.code = "DiskFileFailed";
    snprintf(a->job.vm_uuid, sizeof a->job.vm_uuid, "%s", vm_uuid);
    a->job.change = json_is_object(change) ? json_deep_copy(change) : NULL;
    snprintf(a->root, sizeof a->root, "%s", s->server->data_root);
    instance_paths_t p;
    int rc = instance_paths(a->root, vm_uuid, &p, msg, sizeof msg);
    if (rc != 0) {
        job_free(a);
        tern_task_fail(ctx, rc == -EPERM ? "PathOutsideDataRoot" : "InvalidArgument", "%s: %s",
                       task, msg);
        return;
    }
    /* The instance directory's key: one step at a time per instance, and none beside
     * its create or destroy. */
    rc = file_job_start(ctx, s->files, p.dir, job_work, a, job_free, job_done);
    if (rc != 0)
        tern_task_fail(ctx, "DiskFileFailed", "%s: cannot queue the work on %s: %s", task, p.dir,
                       strerror(-rc));
}
