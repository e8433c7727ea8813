/*
 * migration_instance.c -- a migration's changes to an instance's files, on either
 * server's agent:
 *
 *   dc.migration_flip {migration_uuid, vm_uuid, do_not_inventory, autoboot?, nics?}
 *     -> {vm_uuid, do_not_inventory, autoboot, nics}
 *     rewrites vm.json's flags (and its nics when given: the target's promotion) as
 *     one file replaced by a rename. A target promoted (do_not_inventory false) gets
 *     its volume mounts made again from the vm.json the passes brought. A storage
 *     instance's export is fenced when hidden and unfenced when shown (sync_tree.h's
 *     sync_tree_fence: consumers' mounts reach only the copy that serves). A hidden
 *     instance that is another migration's target is InvalidState; a visible one
 *     (a source, or a target promoted earlier, whose migration_target is history) is
 *     anybody's. A flip run again writes the same file.
 *
 *   dc.migration_cleanup {migration_uuid, vm_uuid, remove_instance, left?, leftover?}
 *     removes <vm>/.migration/; with remove_instance, stops the instance's workload if
 *     its pid file names a live one of it (instance_power.h) and removes the instance
 *     directory. Only an instance that is this migration's target or hidden
 *     (do_not_inventory) is removed: else InvalidState, nothing touched. An absent
 *     instance is done ({"removed": false}). With leftover (migrate-target-clean), only
 *     this migration's own hidden target is removed, and a newer migration's target
 *     there is left as it is ({"removed": false, "other_migration"}). With left (an
 *     abort whose target server is lost) it changes nothing, on any runner.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dc_state.h"
#include "instance_dir.h"
#include "instance_mounts.h"
#include "instance_power.h"
#include "lib/args.h"
#include "migration_agent.h"
#include "sync_tree.h"

/* Reads the instance of args' vm_uuid for `task`: 0 with *vm (new reference) and p,
 * or -1 after failing the attempt; -ENOENT (not failed) when it has no vm.json. */
static int instance_for(tern_ctx *ctx, const char *task, const dc_state_t *s, const char *vm_uuid,
                        const char *mig, instance_paths_t *p, json_t **vm)
{
    char msg[PATH_MAX + 512];
    int rc = instance_read(s->server->data_root, vm_uuid, p, vm, msg, sizeof msg);
    if (rc == -ENOENT)
        return rc;
    if (rc != 0) {
        tern_task_fail(ctx, instance_read_code(rc), "%s: %s", task, msg);
        return -1;
    }
    const char *of = migration_hidden_target_of(*vm);
    if (of != NULL && strcmp(of, mig) != 0) {
        tern_task_fail(ctx, "InvalidState",
                       "%s: instance %s here is the target of migration %s, not of %s; nothing "
                       "was changed",
                       task, vm_uuid, of, mig);
        json_decref(*vm);
        *vm = NULL;
        return -1;
    }
    return 0;
}

/* The arguments both tasks take: migration_uuid, vm_uuid (borrowed from args) and the
 * required boolean `flag`. NULL, or what is wrong (static or in msg). */
static const char *ids_and_flag(const json_t *args, const char *flag, const char **mig,
                                const char **vm_uuid, bool *value, char *msg, size_t msglen)
{
    const char *bad = migration_arg_uuid(args, "migration_uuid", mig, msg, msglen);
    if (bad == NULL)
        bad = migration_arg_uuid(args, "vm_uuid", vm_uuid, msg, msglen);
    if (bad == NULL && json_object_get(args, flag) == NULL) {
        snprintf(msg, msglen, "%s: required", flag);
        bad = msg;
    }
    if (bad == NULL)
        bad = task_args_bool(args, flag, value, msg, msglen);
    return bad;
}

static void flip_start(tern_ctx *ctx, const json_t *args)
{
    const char *task = "dc.migration_flip";
    const dc_state_t *s = dc_agent_state(ctx, task);
    if (s == NULL)
        return;
    char msg[PATH_MAX + 512];
    const char *mig = NULL, *vm_uuid = NULL;
    bool hidden = false, autoboot = false;
    const json_t *nics = json_object_get(args, "nics");
    const char *bad =
        ids_and_flag(args, "do_not_inventory", &mig, &vm_uuid, &hidden, msg, sizeof msg);
    bool set_autoboot = json_object_get(args, "autoboot") != NULL &&
                        !json_is_null(json_object_get(args, "autoboot"));
    if (bad == NULL && set_autoboot)
        bad = task_args_bool(args, "autoboot", &autoboot, msg, sizeof msg);
    if (bad == NULL && nics != NULL && !json_is_null(nics) && !json_is_array(nics))
        bad = "nics: expected an array of the VM's NICs";
    for (size_t i = 0; bad == NULL && json_is_array(nics) && i < json_array_size(nics); i++)
        if (!json_is_string(json_object_get(json_array_get(nics, i), "mac"))) {
            snprintf(msg, sizeof msg, "nics[%zu].mac: expected a string", i);
            bad = msg;
        }
    if (bad != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "%s: %s", task, bad);
        return;
    }
    instance_paths_t p;
    json_t *vm = NULL;
    int rc = instance_for(ctx, task, s, vm_uuid, mig, &p, &vm);
    if (rc == -ENOENT) {
        tern_task_fail(ctx, "InstanceNotFound", "%s: instance %s has no %s on this server", task,
                       vm_uuid, p.vm_json);
        return;
    }
    if (rc != 0)
        return;
    /* A promoted target becoming this migration's source: the migration that brought
     * it is history, and must not claim it once hidden. */
    const char *of = migration_target_of(vm);
    if (of != NULL && strcmp(of, mig) != 0)
        json_object_del(vm, "migration_target");
    json_object_set_new(vm, "do_not_inventory", json_boolean(hidden));
    if (set_autoboot)
        json_object_set_new(vm, "autoboot", json_boolean(autoboot));
    if (json_is_array(nics))
        json_object_set_new(vm, "nics", json_deep_copy(nics));
    rc = 0;
    const json_t *volumes = json_object_get(vm, "volumes");
    if (!hidden && json_array_size(volumes) > 0)
        rc = instance_mounts_make(&p, volumes, msg, sizeof msg);
    /* A storage instance hidden has its export fenced, so no consumer's mount reaches
     * a copy that no longer serves; shown again (the target promoted, the source back
     * after an abort or a rollback), its export is served where the mounts look. */
    if (rc == 0 && sync_tree_present(p.dir))
        rc = sync_tree_fence(p.dir, hidden, msg, sizeof msg);
    if (rc == 0)
        rc = instance_json_write(p.vm_json, vm, msg, sizeof msg);
    if (rc != 0) {
        json_decref(vm);
        tern_task_fail(ctx, "InstanceWriteFailed", "%s: %s", task, msg);
        return;
    }
    json_t *nics_now = json_object_get(vm, "nics");
    tern_task_done(ctx, json_pack("{s:s, s:b, s:O, s:O}", "vm_uuid", vm_uuid, "do_not_inventory",
                                  hidden, "autoboot",
                                  json_object_get(vm, "autoboot") ? json_object_get(vm, "autoboot")
                                                                  : json_null(),
                                  "nics", nics_now != NULL ? nics_now : json_null()));
    json_decref(vm);
}

const tern_task_def dc_migration_flip_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_flip",
    .summary = "Sets a migrating instance's vm.json flags here (do_not_inventory, autoboot) and "
               "its NICs when given, in one rename.",
    .args_schema = "{\"required\": [\"migration_uuid\", \"vm_uuid\", \"do_not_inventory\"], "
                   "\"properties\": {\"migration_uuid\": {\"type\": \"string\"}, \"vm_uuid\": "
                   "{\"type\": \"string\"}, \"do_not_inventory\": {\"type\": \"boolean\"}, "
                   "\"autoboot\": {\"type\": \"any\"}, \"nics\": {\"type\": \"any\"}}, "
                   "\"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = flip_start,
};

/* ---- dc.migration_cleanup --------------------------------------------------------- */

static void cleanup_remove(tern_ctx *ctx, const instance_paths_t *p, pid_t pid, void *data)
{
    (void)data;
    const dc_state_t *s = tern_plugin_state(ctx);
    char msg[PATH_MAX + 512];
    if (instance_tree_remove(s->server->data_root, p->dir, msg, sizeof msg) != 0) {
        tern_task_fail(ctx, "InstanceRemoveFailed", "dc.migration_cleanup: %s", msg);
        return;
    }
    tern_task_done(ctx, json_pack("{s:b, s:b, s:o}", "migration_dir_removed", 1, "removed", 1,
                                  "stopped_pid", pid > 0 ? json_integer(pid) : json_null()));
}

/* A left target's removal (leftover): only the hidden instance this migration made, or
 * a directory without vm.json (a create cut short, which the step's hold on the VM keeps
 * from being a newer migration's at work). Anything else here -- the target of a newer
 * migration of the VM, a visible instance -- is no longer this migration's copy and is
 * not touched: done, with other_migration naming the newer migration when there is one.
 * 1 when the caller goes on to remove the instance, 0 when reported, -1 on failure. */
static int leftover_ours(tern_ctx *ctx, const char *task, const dc_state_t *s, const char *mig,
                         const char *vm_uuid, instance_paths_t *p)
{
    char msg[PATH_MAX + 512];
    json_t *vm = NULL;
    int rc = instance_paths(s->server->data_root, vm_uuid, p, msg, sizeof msg);
    if (rc == 0)
        rc = instance_json_read(p->vm_json, &vm, msg, sizeof msg);
    if (rc == -ENOENT)
        return 1;
    if (rc != 0) {
        tern_task_fail(ctx, rc == -EPERM ? "PathOutsideDataRoot" : "InstanceUnreadable", "%s: %s",
                       task, msg);
        return -1;
    }
    const char *of = migration_hidden_target_of(vm);
    if (of != NULL && strcmp(of, mig) == 0) {
        json_decref(vm);
        return 1;
    }
    tern_task_done(ctx, json_pack("{s:b, s:b, s:s?}", "migration_dir_removed", 0, "removed", 0,
                                  "other_migration", of));
    json_decref(vm);
    return 0;
}

static void cleanup_start(tern_ctx *ctx, const json_t *args)
{
    const char *task = "dc.migration_cleanup";
    char msg[PATH_MAX + 512];
    bool left = false, leftover = false;
    const char *bad = task_args_bool(args, "left", &left, msg, sizeof msg);
    if (bad == NULL)
        bad = task_args_bool(args, "leftover", &leftover, msg, sizeof msg);
    if (bad != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "%s: %s", task, bad);
        return;
    }
    /* The abort's remove_target of a target left on its lost server: that server's
     * clean-up job removes it, and this step runs on the control, changing nothing. */
    if (left) {
        tern_task_done(
            ctx, json_pack("{s:b, s:b, s:b}", "migration_dir_removed", 0, "removed", 0, "left", 1));
        return;
    }
    const dc_state_t *s = dc_agent_state(ctx, task);
    if (s == NULL)
        return;
    const char *mig = NULL, *vm_uuid = NULL;
    bool remove_instance = false;
    bad = ids_and_flag(args, "remove_instance", &mig, &vm_uuid, &remove_instance, msg, sizeof msg);
    if (bad != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "%s: %s", task, bad);
        return;
    }
    instance_paths_t p;
    if (leftover) {
        if (!remove_instance) {
            tern_task_fail(ctx, "InvalidArgument", "%s: leftover: only with remove_instance true",
                           task);
            return;
        }
        if (leftover_ours(ctx, task, s, mig, vm_uuid, &p) != 1)
            return;
    }
    json_t *vm = NULL;
    int rc = instance_for(ctx, task, s, vm_uuid, mig, &p, &vm);
    if (rc == -1)
        return;
    if (rc == -ENOENT && access(p.dir, F_OK) != 0) {
        tern_task_done(ctx, json_pack("{s:b, s:b}", "migration_dir_removed", 1, "removed", 0));
        return;
    }
    if (rc == -ENOENT && !remove_instance) {
        /* No instance, or one cut short: its .migration/ goes all the same. */
        if (migration_dir_remove(&p, msg, sizeof msg) != 0) {
            tern_task_fail(ctx, "InstanceRemoveFailed", "%s: %s", task, msg);
            return;
        }
        tern_task_done(ctx, json_pack("{s:b, s:b}", "migration_dir_removed", 1, "removed", 0));
        return;
    }
    if (remove_instance && vm != NULL) {
        const char *of = migration_target_of(vm);
        bool removable = (of != NULL && strcmp(of, mig) == 0) ||
                         json_is_true(json_object_get(vm, "do_not_inventory"));
        json_decref(vm);
        if (!removable) {
            tern_task_fail(ctx, "InvalidState",
                           "%s: instance %s here is visible (not hidden, not the target of "
                           "migration %s): it is not removed",
                           task, vm_uuid, mig);
            return;
        }
    } else {
        json_decref(vm);
    }
    if (migration_dir_remove(&p, msg, sizeof msg) != 0) {
        tern_task_fail(ctx, "InstanceRemoveFailed", "%s: %s", task, msg);
        return;
    }
    if (!remove_instance) {
        tern_task_done(ctx, json_pack("{s:b, s:b}", "migration_dir_removed", 1, "removed", 0));
        return;
    }
    /* A directory without vm.json (a target create cut short) is removed too: it can
     * only be the migration's, since a hidden or target instance is the only kind this
     * task is asked to remove, and nothing runs in it. */
    instance_stop_workload(ctx, task, &p, cleanup_remove, NULL);
}

static void cleanup_cancel(tern_ctx *ctx)
{
    dc_agent_cancel(ctx);
}

const tern_task_def dc_migration_cleanup_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_cleanup",
    .summary = "Removes a migration's files from an instance here; with remove_instance, stops "
               "and removes the hidden instance itself.",
    .args_schema = "{\"required\": [\"migration_uuid\", \"vm_uuid\", \"remove_instance\"], "
                   "\"properties\": {\"migration_uuid\": {\"type\": \"string\"}, \"vm_uuid\": "
                   "{\"type\": \"string\"}, \"remove_instance\": {\"type\": \"boolean\"}, "
                   "\"left\": {\"type\": \"boolean\"}, \"leftover\": {\"type\": \"boolean\"}}, "
                   "\"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = cleanup_start,
    .cancel = cleanup_cancel,
};
