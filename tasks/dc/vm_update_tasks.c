/*
 * vm_update_tasks.c -- the control plane's half of vm-update (docs/DATACENTER.md
 * "Updates"): a VM's alias, tags and customer_metadata.
 *
 *   dc.vm_update_check {params, target}  admission: the params' shapes here, the VM's
 *                                        state and the alias rules in vm_update.lua.
 *                                        Result {vm_uuid, server_uuid, state}
 *   dc.vm_update {params, job_uuid}      the record changed (and vms:alias) in one
 *                                        script. Result {vm_uuid, server_uuid, before,
 *                                        after}
 *   dc.vm_update_revert {vm_uuid, job_uuid}  the record put back as the job found it
 *
 * The shapes are checked in C, where an object is told from an array; the rules that
 * need the records are the script's, the same for the check and the step.
 */
#include <stdio.h>
#include <string.h>

#include "dc_tasks.h"
#include "instance_dir.h"
#include "inventory_script.h"
#include "lua_scripts.h"

static const char *const fatal_codes[] = {"InvalidArgument", "ResourceNotFound", "InvalidState",
                                          "DuplicateAlias",  "VmMigrating",      NULL};

/* The fields of a VM that a resize or a move would change: vm-update refuses them
 * (VmMigrating during a migration, InvalidArgument otherwise). */
static const char *const resize_fields[] = {"billing_id",
                                            "package",
                                            "ram",
                                            "quota",
                                            "vcpus",
                                            "cpu_cap",
                                            "disks",
                                            "server_uuid",
                                            "max_physical_memory",
                                            "flexible_disk_size",
                                            NULL};

/* Triton's alias rule: a letter or digit, then letters, digits, '_', '.', '-'; at most
 * 189 characters. */
static bool alias_ok(const char *s)
{
    size_t n = s != NULL ? strlen(s) : 0;
    if (n == 0 || n > 189)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '_' && c != '.' && c != '-')))
            return false;
    }
    return true;
}

/* A tags or metadata object: string keys of 1 to 128 bytes, values strings, numbers
 * or booleans (as VMAPI). NULL, or what is wrong, naming its JSON path, in msg. */
static const char *flat_object_fault(const char *name, const json_t *v, char *msg, size_t msglen)
{
    if (!json_is_object(v)) {
        snprintf(msg, msglen, "params.%s: expected an object of string, number or boolean values",
                 name);
        return msg;
    }
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        if (key[0] == '\0' || strlen(key) > 128) {
            snprintf(msg, msglen, "params.%s: a key must have 1 to 128 characters, got \"%.40s\"",
                     name, key);
            return msg;
        }
        if (!json_is_string(val) && !json_is_number(val) && !json_is_boolean(val)) {
            snprintf(msg, msglen, "params.%s.%.128s: expected a string, number or boolean", name,
                     key);
            return msg;
        }
    }
    return NULL;
}

/* The script's arguments for `mode` from the job's params (borrowed): a new reference,
 * or NULL with msg saying what is wrong (422). */
static json_t *update_args(const json_t *params, const char *mode, char *msg, size_t msglen)
{
    if (!json_is_object(params)) {
        snprintf(msg, msglen, "params: expected an object");
        return NULL;
    }
    const char *vm_uuid = json_string_value(json_object_get(params, "vm_uuid"));
    if (!dc_uuid_ok(vm_uuid)) {
        snprintf(msg, msglen, "params.vm_uuid: expected a lowercase UUID");
        return NULL;
    }
    const json_t *owner = json_object_get(params, "owner_uuid");
    if (owner != NULL && !json_is_null(owner) && !dc_uuid_ok(json_string_value(owner))) {
        snprintf(msg, msglen, "params.owner_uuid: expected a lowercase UUID");
        return NULL;
    }
    json_t *update = json_object(), *resize = json_array();
    const char *key;
    const json_t *v;
    const char *fault = NULL;
    json_object_foreach((json_t *)params, key, v)
    {
        if (fault != NULL)
            break;
        if (strcmp(key, "vm_uuid") == 0 || strcmp(key, "owner_uuid") == 0)
            continue;
        bool is_resize = false;
        for (size_t i = 0; resize_fields[i] != NULL; i++)
            is_resize = is_resize || strcmp(key, resize_fields[i]) == 0;
        if (is_resize) {
            json_array_append_new(resize, json_string(key));
        } else if (strcmp(key, "alias") == 0) {
            if (!json_is_string(v) || !alias_ok(json_string_value(v))) {
                snprintf(msg, msglen,
                         "params.alias: expected a letter or digit, then letters, digits, '_', "
                         "'.' or '-', at most 189 characters");
                fault = msg;
            }
        } else if (strcmp(key, "tags") == 0 || strcmp(key, "add_tags") == 0 ||
                   strcmp(key, "customer_metadata") == 0) {
            fault = flat_object_fault(key, v, msg, msglen);
            const json_t *w = json_object_get(v, "lab:workload");
            if (fault == NULL && strcmp(key, "customer_metadata") == 0 && w != NULL &&
                !(json_is_string(w) && (strcmp(json_string_value(w), "idle") == 0 ||
                                        strcmp(json_string_value(w), "writer") == 0))) {
                snprintf(msg, msglen,
                         "params.customer_metadata.lab:workload: expected idle or writer");
                fault = msg;
            }
        } else {
            snprintf(msg, msglen,
                     "params.%.64s: unknown (vm-update takes vm_uuid, owner_uuid, alias, tags, "
                     "add_tags, customer_metadata)",
                     key);
            fault = msg;
        }
        if (fault == NULL && !is_resize)
            json_object_set(update, key, (json_t *)v);
    }
    if (fault == NULL && json_object_get(update, "tags") != NULL &&
        json_object_get(update, "add_tags") != NULL) {
        snprintf(msg, msglen,
                 "params.add_tags: give tags (replace them all) or add_tags (set "
                 "some), not both");
        fault = msg;
    }
    if (fault == NULL && json_object_size(update) == 0 && json_array_size(resize) == 0) {
        snprintf(msg, msglen,
                 "params: nothing to update (give alias, tags, add_tags or customer_metadata)");
        fault = msg;
    }
    if (fault != NULL) {
        json_decref(update);
        json_decref(resize);
        return NULL;
    }
    return json_pack("{s:s, s:s, s:O?, s:o, s:o}", "mode", mode, "vm_uuid", vm_uuid, "owner_uuid",
                     owner, "update", update, "resize", resize);
}

static void check_start(tern_ctx *ctx, const json_t *args)
{
    char msg[512];
    const json_t *params = json_object_get(args, "params");
    json_t *sargs = update_args(params, "check", msg, sizeof msg);
    if (sargs == NULL) {
        tern_task_refuse(ctx, 422, "InvalidArgument", "%s", msg);
        return;
    }
    const char *vm_uuid = json_string_value(json_object_get(sargs, "vm_uuid"));
    const char *target = json_string_value(json_object_get(args, "target"));
    char want[64];
    snprintf(want, sizeof want, "/update-%s", vm_uuid);
    if (target == NULL || strcmp(target, want) != 0) {
        tern_task_refuse(ctx, 422, "InvalidArgument",
                         "target: an update of vm %s has the target %s, not \"%.80s\"", vm_uuid,
                         want, target != NULL ? target : "");
        json_decref(sargs);
        return;
    }
    dc_script_run(ctx, dc_lua_vm_update, sargs, true, NULL);
    json_decref(sargs);
}

static void apply_start(tern_ctx *ctx, const json_t *args)
{
    char msg[512];
    json_t *sargs = update_args(json_object_get(args, "params"), "apply", msg, sizeof msg);
    const char *job = json_string_value(json_object_get(args, "job_uuid"));
    if (sargs == NULL || job == NULL) {
        tern_task_fail(ctx, "InvalidArgument", "dc.vm_update: %s",
                       sargs == NULL ? msg : "job_uuid: expected the job's uuid");
        json_decref(sargs);
        return;
    }
    json_object_set_new(sargs, "job_uuid", json_string(job));
    dc_script_run(ctx, dc_lua_vm_update, sargs, false, NULL);
    json_decref(sargs);
}

static void revert_start(tern_ctx *ctx, const json_t *args)
{
    const char *vm_uuid = json_string_value(json_object_get(args, "vm_uuid"));
    const char *job = json_string_value(json_object_get(args, "job_uuid"));
    if (!dc_uuid_ok(vm_uuid) || job == NULL) {
        tern_task_fail(ctx, "InvalidArgument",
                       "dc.vm_update_revert: vm_uuid (a UUID) and job_uuid are required");
        return;
    }
    json_t *sargs =
        json_pack("{s:s, s:s, s:s}", "mode", "revert", "vm_uuid", vm_uuid, "job_uuid", job);
    dc_script_run(ctx, dc_lua_vm_update, sargs, false, NULL);
    json_decref(sargs);
}

const tern_task_def dc_vm_update_check_task = {
    .size = sizeof(tern_task_def),
    .name = "vm_update_check",
    .summary = "Admission of vm-update: the params' shapes, the VM's state, the alias rules, "
               "what a migration allows.",
    .args_schema = "{\"required\": [\"params\"], \"properties\": {\"params\": {\"type\": "
                   "\"any\"}, \"target\": {\"type\": \"string\"}}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = check_start,
};

const tern_task_def dc_vm_update_task = {
    .size = sizeof(tern_task_def),
    .name = "vm_update",
    .summary = "Changes a VM record's alias, tags and customer_metadata (and the alias index) "
               "at once, keeping what it replaced.",
    .args_schema = "{\"required\": [\"params\", \"job_uuid\"], \"properties\": {\"params\": "
                   "{\"type\": \"object\"}, \"job_uuid\": {\"type\": \"string\"}}, "
                   "\"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = apply_start,
};

const tern_task_def dc_vm_update_revert_task = {
    .size = sizeof(tern_task_def),
    .name = "vm_update_revert",
    .summary = "Puts back what a failed vm-update job changed on the VM record.",
    .args_schema = "{\"required\": [\"vm_uuid\", \"job_uuid\"], \"properties\": {\"vm_uuid\": "
                   "{\"type\": \"string\"}, \"job_uuid\": {\"type\": \"string\"}}, "
                   "\"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = revert_start,
};
