/*
 * storage_create.c -- dc.storage_create, on a server's agent: a shared volume's storage
 * instance (docs/VOLUMES.md "Share states"), the lab's stand-in for an NFS storage zone
 * with its delegated dataset:
 *
 *   <data_root>/<vm_uuid>/export/    the volume's data, what consumers mount
 *   <data_root>/<vm_uuid>/vm.json    the instance, written last: {uuid, alias,
 *                                    owner_uuid, brand "joyent-minimal", role
 *                                    "nfsvolumestorage", volume_uuid, workload "share",
 *                                    state "stopped", nics, disks [],
 *                                    internal_metadata {"sdc:system_role"}, ...}
 *
 *   {"vm_uuid", "volume_uuid", "alias", "owner_uuid", "nics"}
 *   -> {"vm_uuid", "volume_uuid", "export_path", "created": bool}
 *
 * As dc.instance_create: vm.json is renamed into place last, so a storage instance is
 * whole or absent. Run again, a complete one is answered as it is (its export/ and
 * whatever it holds untouched); one that is another instance (not a storage instance,
 * or another volume's) is InstanceConflict, never taken for the one asked. A directory
 * without vm.json is what an attempt killed midway left: removed and made again; one
 * whose vm.json is there but unreadable is InstanceBroken, never removed (its export/
 * holds the volume's data).
 * The share process itself is started by dc.instance_start (workload "share").
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dc_state.h"
#include "file_work.h"
#include "instance_dir.h"
#include "lib/args.h"
#include "vm_disks.h"

#define STORAGE_ROLE  "nfsvolumestorage"
#define STORAGE_BRAND "joyent-minimal"
#define ALIAS_MAX     512 /* "volume-<name of 256 at most>-<uuid>" fits */
#define NICS_MAX      32

typedef struct storage_arg {
    char root[PATH_MAX];
    instance_paths_t p;
    char export[PATH_MAX];
    json_t *vm;       /* the vm.json to write (owned) */
    json_t *existing; /* the vm.json found complete (owned), or NULL */
    const char *code; /* the failure's code, a literal */
} storage_arg_t;

static void storage_arg_free(void *data)
{
    storage_arg_t *a = data;
    json_decref(a->vm);
    json_decref(a->existing);
    free(a);
}

static int storage_work(void *data, const atomic_bool *stop, char *err, size_t errlen)
{
    storage_arg_t *a = data;
    a->code = "InstanceCreateFailed";
    int rc = instance_json_read(a->p.vm_json, &a->existing, err, errlen);
    if (rc != 0 && rc != -ENOENT) {
        /* A vm.json that cannot be read is never taken for a partial instance: its
         * removal would take the volume's data with it. */
        a->code = "InstanceBroken";
        return rc;
    }
    if (rc == 0) {
        /* Complete: made by an earlier attempt; the same volume's, or refused. */
        const char *role = json_string_value(json_object_get(a->existing, "role"));
        const char *vol = json_string_value(json_object_get(a->existing, "volume_uuid"));
        const char *want = json_string_value(json_object_get(a->vm, "volume_uuid"));
        if (role != NULL && strcmp(role, STORAGE_ROLE) == 0 && vol != NULL &&
            strcmp(vol, want) == 0)
            return 0;
        a->code = "InstanceConflict";
        bool storage = role != NULL && strcmp(role, STORAGE_ROLE) == 0;
        snprintf(err, errlen, "%s holds %s, not the storage instance of volume %s asked for",
                 a->p.dir,
                 storage ? "the storage instance of another volume"
                         : "an instance that is not a storage instance",
                 want);
        return -EEXIST;
    }
    /* Partial (no vm.json): what an attempt killed midway left, made again. */
    rc = instance_tree_remove(a->root, a->p.dir, err, errlen);
    if (rc != 0)
        return rc;
    if (atomic_load(stop)) {
        snprintf(err, errlen, "%s: stopped", a->p.dir);
        return -ECANCELED;
    }
    if (mkdir(a->p.dir, 0755) != 0 || mkdir(a->export, 0755) != 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot make %s: %s", a->export, strerror(errno));
    }
    if (rc == 0)
        rc = instance_json_write(a->p.vm_json, a->vm, err, errlen);
    if (rc != 0) {
        char ignored[256];
        /* A failed create leaves the data root as it found it. */
        if (instance_tree_remove(a->root, a->p.dir, ignored, sizeof ignored) != 0)
            strncat(err, "; and what was made could not be removed", errlen - strlen(err) - 1);
    }
    return rc;
}

static void storage_done(tern_ctx *ctx, void *data, int rc, const char *err)
{
    storage_arg_t *a = data;
    if (rc != 0) {
        tern_task_fail(ctx, a->code, "dc.storage_create: %s", err);
        return;
    }
    tern_task_done(ctx, json_pack("{s:O, s:O, s:s, s:b}", "vm_uuid", json_object_get(a->vm, "uuid"),
                                  "volume_uuid", json_object_get(a->vm, "volume_uuid"),
                                  "export_path", a->export, "created", a->existing == NULL));
}

/* The fault of a uuid argument, or NULL. */
static const char *uuid_fault(const json_t *args, const char *key, char *msg, size_t msglen)
{
    const json_t *v = json_object_get(args, key);
    if (v == NULL)
        snprintf(msg, msglen, "%s: required", key);
    else if (!json_is_string(v) || !dc_uuid_ok(json_string_value(v)))
        snprintf(msg, msglen, "%s: expected a UUID (lowercase 8-4-4-4-12 hex)", key);
    else
        return NULL;
    return msg;
}

/* The fault of the arguments, or NULL. */
static const char *args_fault(const json_t *args, char *msg, size_t msglen)
{
    const char *bad = uuid_fault(args, "vm_uuid", msg, msglen);
    if (bad == NULL)
        bad = uuid_fault(args, "volume_uuid", msg, msglen);
    if (bad == NULL)
        bad = uuid_fault(args, "owner_uuid", msg, msglen);
    if (bad != NULL)
        return bad;
    const json_t *alias = json_object_get(args, "alias");
    const json_t *nics = json_object_get(args, "nics");
    if (!json_is_string(alias) || json_string_length(alias) == 0 ||
        json_string_length(alias) > ALIAS_MAX || strchr(json_string_value(alias), '/') != NULL)
        snprintf(msg, msglen, "alias: expected a string of 1 to %d characters without \"/\"",
                 ALIAS_MAX);
    else if (!json_is_array(nics) || json_array_size(nics) > NICS_MAX)
        snprintf(msg, msglen, "nics: expected an array of at most %d NICs", NICS_MAX);
    else {
        size_t i;
        const json_t *n;
        json_array_foreach(nics, i, n)
        {
            if (!json_is_object(n)) {
                snprintf(msg, msglen, "nics[%zu]: expected an object", i);
                return msg;
            }
        }
        return NULL;
    }
    return msg;
}

static void storage_start(tern_ctx *ctx, const json_t *args)
{
    const char *task = "dc.storage_create";
    const dc_state_t *s = dc_agent_state(ctx, task);
    if (s == NULL)
        return;
    char msg[1024];
    if (args_fault(args, msg, sizeof msg) != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "%s: %s", task, msg);
        return;
    }
    storage_arg_t *a = calloc(1, sizeof *a);
    if (a == NULL)
        abort();
    snprintf(a->root, sizeof a->root, "%s", s->server->data_root);
    const char *vm_uuid = json_string_value(json_object_get(args, "vm_uuid"));
    int rc = instance_paths(a->root, vm_uuid, &a->p, msg, sizeof msg);
    if (rc == 0 &&
        snprintf(a->export, sizeof a->export, "%s/export", a->p.dir) >= (int)sizeof a->export) {
        rc = -ENAMETOOLONG;
        snprintf(msg, sizeof msg, "%s/export: path too long", a->p.dir);
    }
    if (rc != 0) {
        storage_arg_free(a);
        tern_task_fail(ctx, rc == -EPERM ? "PathOutsideDataRoot" : "InvalidArgument", "%s: %s",
                       task, msg);
        return;
    }
    char now[48];
    vm_disks_now(now, sizeof now);
    a->vm =
        json_pack("{s:s, s:O, s:O, s:s, s:s, s:O, s:s, s:s, s:O, s:[], s:{s:s}, s:s, s:b}", "uuid",
                  vm_uuid, "alias", json_object_get(args, "alias"), "owner_uuid",
                  json_object_get(args, "owner_uuid"), "brand", STORAGE_BRAND, "role", STORAGE_ROLE,
                  "volume_uuid", json_object_get(args, "volume_uuid"), "workload", "share", "state",
                  "stopped", "nics", json_object_get(args, "nics"), "disks", "internal_metadata",
                  "sdc:system_role", STORAGE_ROLE, "create_timestamp", now, "autoboot", 1);
    char key[PATH_MAX];
    snprintf(key, sizeof key, "%s", a->p.dir);
    /* file_job_start takes a whatever happens. */
    rc = file_job_start(ctx, s->files, key, storage_work, a, storage_arg_free, storage_done);
    if (rc != 0)
        tern_task_fail(ctx, "InstanceCreateFailed", "%s: cannot queue the work on %s: %s", task,
                       key, strerror(-rc));
}

const tern_task_def dc_storage_create_task = {
    .size = sizeof(tern_task_def),
    .name = "storage_create",
    .summary = "A shared volume's storage instance on this server: its export/ directory and "
               "vm.json (workload share); a complete one is kept, a partial one redone.",
    .args_schema = "{\"required\": [\"vm_uuid\", \"volume_uuid\", \"alias\", \"owner_uuid\", "
                   "\"nics\"], \"properties\": {\"vm_uuid\": {\"type\": \"any\"}, "
                   "\"volume_uuid\": {\"type\": \"any\"}, \"alias\": {\"type\": \"any\"}, "
                   "\"owner_uuid\": {\"type\": \"any\"}, \"nics\": {\"type\": \"any\"}}, "
                   "\"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = storage_start,
    .cancel = dc_agent_cancel,
};
