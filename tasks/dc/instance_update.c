/*
 * instance_update.c -- the agent's half of vm-update (docs/DATACENTER.md "Updates"):
 *
 *   dc.instance_update {vm_uuid, alias, tags, customer_metadata}
 *     -> {vm_uuid, updated, alias, tags, customer_metadata}
 *     writes the VM record's values (the control's step answered them) into the
 *     instance's vm.json, as one file replaced by a rename: the file is the old one or
 *     the new one, whole. The values are whole (tags replaced, not merged), so a run
 *     again writes the same file. Only a visible instance is updated: a hidden one (a
 *     migration's target, or a source kept after a switch) is InvalidState, since the
 *     record no longer describes it. No instance: InstanceNotFound.
 *
 *   with "kept_copy": true, the same values go to the copy a successful migration keeps
 *     hidden on its source until finalize (do_not_inventory, not a migration's target),
 *     which a rollback makes the VM again; no such copy here is done ({"updated":
 *     false}). "kept_copy": false is done at once: the VM has no kept copy.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "dc_state.h"
#include "instance_dir.h"

static void update_start(tern_ctx *ctx, const json_t *args)
{
    const char *task = "dc.instance_update";
    const dc_state_t *s = dc_agent_state(ctx, task);
    if (s == NULL)
        return;
    const char *vm_uuid = json_string_value(json_object_get(args, "vm_uuid"));
    const json_t *alias = json_object_get(args, "alias");
    const json_t *tags = json_object_get(args, "tags");
    const json_t *md = json_object_get(args, "customer_metadata");
    const char *bad = NULL;
    if (!dc_uuid_ok(vm_uuid))
        bad = "vm_uuid: expected a lowercase UUID";
    else if (!json_is_string(alias) && !json_is_null(alias))
        bad = "alias: expected a string or null";
    else if (!json_is_object(tags))
        bad = "tags: expected an object";
    else if (!json_is_object(md))
        bad = "customer_metadata: expected an object";
    if (bad != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "%s: %s", task, bad);
        return;
    }
    const json_t *kept = json_object_get(args, "kept_copy");
    if (kept != NULL && !json_is_boolean(kept)) {
        tern_task_fail(ctx, "InvalidArgument", "%s: kept_copy: expected a boolean", task);
        return;
    }
    if (json_is_false(kept)) {
        tern_task_done(ctx, json_pack("{s:s, s:b}", "vm_uuid", vm_uuid, "updated", 0));
        return;
    }
    char msg[PATH_MAX + 512];
    if (instance_workload_kind(md, msg, sizeof msg) == NULL) {
        tern_task_fail(ctx, "InvalidArgument", "%s: customer_metadata: %s", task, msg);
        return;
    }
    instance_paths_t p;
    json_t *vm = NULL;
    int rc = instance_read(s->server->data_root, vm_uuid, &p, &vm, msg, sizeof msg);
    if (rc == -ENOENT && json_is_true(kept)) {
        tern_task_done(ctx, json_pack("{s:s, s:b}", "vm_uuid", vm_uuid, "updated", 0));
        return;
    }
    if (rc != 0) {
        tern_task_fail(ctx, instance_read_code(rc), "%s: %s", task, msg);
        return;
    }
    bool hidden = json_is_true(json_object_get(vm, "do_not_inventory"));
    if (json_is_true(kept) && (!hidden || json_object_get(vm, "migration_target") != NULL)) {
        json_decref(vm);
        tern_task_done(ctx, json_pack("{s:s, s:b}", "vm_uuid", vm_uuid, "updated", 0));
        return;
    }
    if (hidden && !json_is_true(kept)) {
        tern_task_fail(ctx, "InvalidState",
                       "%s: instance %s here is hidden (do_not_inventory): the record describes "
                       "another copy; nothing was changed",
                       task, vm_uuid);
        json_decref(vm);
        return;
    }
    json_object_set(vm, "alias", (json_t *)alias);
    json_object_set(vm, "tags", (json_t *)tags);
    json_object_set(vm, "customer_metadata", (json_t *)md);
    rc = instance_json_write(p.vm_json, vm, msg, sizeof msg);
    json_decref(vm);
    if (rc != 0) {
        tern_task_fail(ctx, "InstanceWriteFailed", "%s: %s", task, msg);
        return;
    }
    tern_task_done(ctx, json_pack("{s:s, s:b, s:O, s:O, s:O}", "vm_uuid", vm_uuid, "updated", 1,
                                  "alias", alias, "tags", tags, "customer_metadata", md));
}

const tern_task_def dc_instance_update_task = {
    .size = sizeof(tern_task_def),
    .name = "instance_update",
    .summary = "Writes a VM's alias, tags and customer_metadata into its instance's vm.json "
               "here, in one rename.",
    .args_schema = "{\"required\": [\"vm_uuid\", \"alias\", \"tags\", \"customer_metadata\"], "
                   "\"properties\": {\"vm_uuid\": {\"type\": \"string\"}, \"alias\": {\"type\": "
                   "\"any\"}, \"tags\": {\"type\": \"any\"}, \"customer_metadata\": {\"type\": "
                   "\"any\"}, \"kept_copy\": {\"type\": \"any\"}}, \"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = update_start,
};
