/*
 * disk_apply.c -- dc.disk_apply, on a server's agent: does the one disk change the
 * control plane reserved (the VM record's disk_change) on the instance's files, then
 * makes vm.json agree and measures.
 *
 *   {"vm_uuid", "change": {"op", "id"?, "pci_slot"?, "new_size"?, "name"?, ...}}
 *   -> {"disks": [USAGE...], "snapshots": [names]}   (disk_usage.c)
 *
 *   add              a sparse file of new_size MiB at disk<N>.img (N: the slot's
 *                    function) through .part and rename, then the disk in vm.json
 *   resize           ftruncate to new_size (grow: a hole at the end; shrink: the first
 *                    new_size MiB kept), fsync, then vm.json
 *   delete           the file unlinked and the disk's copy in every snapshot, then
 *                    vm.json
 *   snapshot_create  every disk copied (snapshot_space.h) into snapshots/<name>.part/,
 *                    synced, renamed to snapshots/<name>, then vm.json
 *   snapshot_delete  snapshots/<name>/ removed, then vm.json
 *
 * Run twice it does the change once: each op first looks whether the files already
 * show it done. A step killed midway leaves either the old files or the new ones (a
 * .part is removed and redone); vm.json is made to agree with the files at the end of
 * every run. A cancelled snapshot copy stops and removes its .part directory. The
 * agent does not check the instance's state or space: the control plane did.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dc_fail.h"
#include "dc_state.h"
#include "disk_file.h"
#include "disk_job.h"
#include "snapshot_space.h"
#include "sparse.h"

static int refuse(disk_job_t *j, char *err, size_t errlen, const char *why)
{
    j->code = "InvalidArgument";
    snprintf(err, errlen, "%s", why);
    return -EINVAL;
}

/* The disk of vm.json the change names (by id, by slot, or both: they must agree),
 * or NULL. *function is the PCI function the change names or the found disk has. */
static json_t *named_disk(disk_job_t *j, vm_disks_t *v, int *function)
{
    const char *id = json_string_value(json_object_get(j->change, "id"));
    *function = vm_disks_slot_function(json_string_value(json_object_get(j->change, "pci_slot")));
    json_t *d = vm_disks_find(v, id, *function);
    if (d != NULL && *function < 0)
        *function = vm_disks_slot_function(json_string_value(json_object_get(d, "pci_slot")));
    return d;
}

static int apply_add(disk_job_t *j, vm_disks_t *v, char *err, size_t errlen)
{
    const char *id = json_string_value(json_object_get(j->change, "id"));
    const char *slot = json_string_value(json_object_get(j->change, "pci_slot"));
    int f = vm_disks_slot_function(slot);
    uint64_t mib = (uint64_t)json_integer_value(json_object_get(j->change, "new_size"));
    char path[PATH_MAX];
    vm_disks_file(v, f, path);
    const json_t *there = vm_disks_find(v, NULL, f);
    if (there != NULL) {
        const char *had = json_string_value(json_object_get(there, "id"));
        if (had != NULL && strcmp(had, id) == 0 && access(path, F_OK) == 0)
            return 0; /* done by an earlier run */
        if (had == NULL || strcmp(had, id) != 0) {
            char why[256];
            snprintf(why, sizeof why, "change.pci_slot: %s of vm %s holds disk %s, not %s", slot,
                     j->vm_uuid, had != NULL ? had : "?", id);
            return refuse(j, err, errlen, why);
        }
    }
    if (vm_disks_find(v, id, -1) != NULL && there == NULL) {
        char why[256];
        snprintf(why, sizeof why, "change.id: disk %s of vm %s is in another slot than %s", id,
                 j->vm_uuid, slot);
        return refuse(j, err, errlen, why);
    }
    /* A file no disk of vm.json owns is what a run killed after the rename left: kept
     * when it is the size asked for (nothing was ever written to it), else made again. */
    uint64_t have = 0;
    int rc = dc_disk_file_size(path, &have, err, errlen);
    if (rc == 0 && have == mib) {
        rc = 0;
    } else if (rc == 0 || rc == -EINVAL || rc == -ENOENT) {
        if (rc != -ENOENT && unlink(path) != 0) {
            snprintf(err, errlen, "cannot remove %s: %s", path, strerror(errno));
            return -errno;
        }
        rc = dc_disk_file_make(path, mib, err, errlen);
    }
    if (rc != 0)
        return rc;
    if (there == NULL)
        json_array_append_new(json_object_get(v->vm, "disks"),
                              json_pack("{s:s, s:b, s:I, s:s, s:s}", "id", id, "boot", 0, "size",
                                        (json_int_t)mib, "pci_slot", slot, "path", path));
    /* vm_disks_sync orders the disks by function and writes vm.json. */
    return 0;
}

static int apply_resize(disk_job_t *j, vm_disks_t *v, char *err, size_t errlen)
{
    int f;
    json_t *d = named_disk(j, v, &f);
    if (d == NULL) {
        char why[256];
        snprintf(why, sizeof why, "change: no disk %s%s%s of vm %s on this server",
                 json_string_value(json_object_get(j->change, "id")) ?: "",
                 json_object_get(j->change, "id") != NULL ? " " : "",
                 json_string_value(json_object_get(j->change, "pci_slot")) ?: "", j->vm_uuid);
        return refuse(j, err, errlen, why);
    }
    char path[PATH_MAX];
    vm_disks_file(v, f, path);
    uint64_t mib = (uint64_t)json_integer_value(json_object_get(j->change, "new_size"));
    int rc = dc_disk_file_resize(path, mib, err, errlen);
    if (rc == -ENOENT)
        j->code = "DiskFileMissing";
    return rc;
}

static int apply_delete(disk_job_t *j, vm_disks_t *v, char *err, size_t errlen)
{
    int f;
    json_t *d = named_disk(j, v, &f);
    if (d == NULL && f < 0)
        return 0; /* named by id only, and gone from vm.json: an earlier run did it */
    if (d == NULL) {
        char path[PATH_MAX];
        vm_disks_file(v, f, path);
        if (access(path, F_OK) == 0 && vm_disks_find(v, NULL, f) != NULL) {
            char why[256];
            snprintf(why, sizeof why, "change: disk %s is not in slot %s of vm %s",
                     json_string_value(json_object_get(j->change, "id")) ?: "?",
                     json_string_value(json_object_get(j->change, "pci_slot")), j->vm_uuid);
            return refuse(j, err, errlen, why);
        }
    } else if (json_is_true(json_object_get(d, "boot"))) {
        return refuse(j, err, errlen, "change: the boot disk is never deleted");
    }
    char path[PATH_MAX];
    vm_disks_file(v, f, path);
    if (unlink(path) != 0 && errno != ENOENT) {
        snprintf(err, errlen, "cannot remove %s: %s", path, strerror(errno));
        return -errno;
    }
    /* The disk's copies in every snapshot go with it: they would hold space for a disk
     * that no longer exists. */
    size_t i;
    const json_t *s;
    json_array_foreach(json_object_get(v->vm, "snapshots"), i, s)
    {
        const char *name = json_string_value(json_object_get(s, "name"));
        if (!vm_disks_snapshot_name_ok(name))
            continue;
        char dir[PATH_MAX], copy[PATH_MAX];
        vm_disks_snapshot_dir(v, name, false, dir);
        vm_disks_copy_file(dir, f, copy);
        if (unlink(copy) != 0 && errno != ENOENT) {
            snprintf(err, errlen, "cannot remove %s: %s", copy, strerror(errno));
            return -errno;
        }
    }
    return dc_disk_dir_sync(path, err, errlen);
}

static int snapshot_create(disk_job_t *j, vm_disks_t *v, const atomic_bool *stop, char *err,
                           size_t errlen)
{
    const char *name = json_string_value(json_object_get(j->change, "name"));
    char whole[PATH_MAX], part[PATH_MAX];
    vm_disks_snapshot_dir(v, name, false, whole);
    vm_disks_snapshot_dir(v, name, true, part);
    struct stat st;
    if (lstat(whole, &st) == 0)
        return 0; /* made by an earlier run: vm_disks_sync lists it */
    char when[64];
    vm_disks_now(when, sizeof when);
    int rc = vm_disks_remove_snapshot_dir(v, part, err, errlen); /* a killed copy's */
    if (rc != 0)
        return rc;
    if ((mkdir(v->snapshots, 0755) != 0 && errno != EEXIST) || mkdir(part, 0700) != 0) {
        snprintf(err, errlen, "cannot make %s: %s", part, strerror(errno));
        return -errno;
    }
    /* The copies write every disk's data (a reflink may write none, but that is only
     * known by trying): refused at once when the server's file system cannot hold it. */
    uint64_t need = 0;
    size_t i;
    const json_t *d;
    json_array_foreach(json_object_get(v->vm, "disks"), i, d)
    {
        char src[PATH_MAX];
        uint64_t data = 0;
        vm_disks_file(v, vm_disks_slot_function(json_string_value(json_object_get(d, "pci_slot"))),
                      src);
        rc = dc_sparse_data_bytes(src, &data);
        if (rc != 0) {
            dc_fail(err, errlen, rc, "%s: cannot measure its data: %s", src, strerror(-rc));
            break;
        }
        need += data;
    }
    if (rc == 0)
        rc = dc_disk_space_check(part, need, err, errlen);
    if (rc == -ENOSPC)
        j->code = "ServerDiskFull";
    if (rc != 0) {
        char ignored[256];
        if (vm_disks_remove_snapshot_dir(v, part, ignored, sizeof ignored) != 0)
            strncat(err, "; and the partial copy could not be removed", errlen - strlen(err) - 1);
        return rc;
    }
    json_array_foreach(json_object_get(v->vm, "disks"), i, d)
    {
        int f = vm_disks_slot_function(json_string_value(json_object_get(d, "pci_slot")));
        char src[PATH_MAX], dst[PATH_MAX];
        vm_disks_file(v, f, src);
        vm_disks_copy_file(part, f, dst);
        rc = dc_snapshot_copy(src, dst, stop, NULL, err, errlen);
        if (rc != 0)
            break;
    }
    if (rc == 0 && rename(part, whole) != 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot rename %s to %s: %s", part, whole, strerror(errno));
    }
    if (rc == 0)
        rc = dc_disk_dir_sync(whole, err, errlen);
    if (rc != 0) {
        char ignored[256];
        /* Nothing half-made stays: a snapshot is whole or absent. */
        if (vm_disks_remove_snapshot_dir(v, part, ignored, sizeof ignored) != 0)
            strncat(err, "; and the partial copy could not be removed", errlen - strlen(err) - 1);
        return rc;
    }
    json_t *list = json_object_get(v->vm, "snapshots");
    if (!json_is_array(list)) {
        list = json_array();
        json_object_set_new(v->vm, "snapshots", list);
    }
    json_array_append_new(list, json_pack("{s:s, s:s}", "name", name, "created_timestamp", when));
    return 0;
}

static int snapshot_delete(disk_job_t *j, vm_disks_t *v, char *err, size_t errlen)
{
    const char *name = json_string_value(json_object_get(j->change, "name"));
    char whole[PATH_MAX], part[PATH_MAX];
    vm_disks_snapshot_dir(v, name, false, whole);
    vm_disks_snapshot_dir(v, name, true, part);
    int rc = vm_disks_remove_snapshot_dir(v, whole, err, errlen);
    if (rc == 0)
        rc = vm_disks_remove_snapshot_dir(v, part, err, errlen);
    return rc;
}

static int apply_work(disk_job_t *j, vm_disks_t *v, const atomic_bool *stop, char *err,
                      size_t errlen)
{
    const char *op = disk_change_op(j->change);
    if (strcmp(op, "add") == 0)
        return apply_add(j, v, err, errlen);
    if (strcmp(op, "resize") == 0)
        return apply_resize(j, v, err, errlen);
    if (strcmp(op, "delete") == 0)
        return apply_delete(j, v, err, errlen);
    if (strcmp(op, "snapshot_create") == 0)
        return snapshot_create(j, v, stop, err, errlen);
    return snapshot_delete(j, v, err, errlen);
}

static void apply_start(tern_ctx *ctx, const json_t *args)
{
    disk_job_start(ctx, "dc.disk_apply", args, true, false, apply_work);
}

const tern_task_def dc_disk_apply_task = {
    .size = sizeof(tern_task_def),
    .name = "disk_apply",
    .summary = "Does one disk change on this server's files (add, resize, delete, snapshot "
               "create or delete), idempotently, then measures the instance's disks.",
    .args_schema = "{\"required\": [\"vm_uuid\", \"change\"], \"properties\": {\"vm_uuid\": "
                   "{\"type\": \"string\"}, \"change\": {\"type\": \"object\"}}, "
                   "\"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = apply_start,
    .cancel = dc_agent_cancel,
};
