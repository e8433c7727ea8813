/*
 * inventory_tasks.c -- the dc plugin's control-plane tasks: each hands its arguments
 * to one Lua script (tasks/dc/lua/, docs/DATACENTER.md) that reads and changes the
 * inventory in Redis at once, and reports the script's answer.
 *
 *   dc.inventory_load     {}  the description into Redis (idempotent)
 *   dc.provision_check    admission of a provision
 *   dc.vm_check           admission of vm-start, vm-stop, vm-delete
 *   dc.place              a server for a VM, its disks' ids and slots; state
 *                         server_uuid and agent_queue
 *   dc.nics_provision     the VM's NICs and addresses
 *   dc.vm_set_state       running or stopped, with the VM's NICs
 *   dc.release            gives back what the VM holds; its final state
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "dc_state.h"
#include "dc_tasks.h"
#include "inventory_script.h"
#include "lua_scripts.h"

static const char *const fatal_codes[] = {"InvalidArgument",
                                          "ResourceNotFound",
                                          "InvalidState",
                                          "InventoryInUse",
                                          "NoDescription",
                                          "VmAlreadyExists",
                                          "DuplicateAlias",
                                          "IpTaken",
                                          "SubnetFull",
                                          "MacsExhausted",
                                          "NoAllocatableServersError",
                                          "InsufficientSpace",
                                          "VmMigrating",
                                          NULL};

static char *ip_text(uint32_t host_order, char *out)
{
    struct in_addr a = {.s_addr = htonl(host_order)};
    inet_ntop(AF_INET, &a, out, INET_ADDRSTRLEN);
    return out;
}

/* The description as the load script takes it: a new reference. */
static json_t *description_json(const datacenter_t *dc)
{
    json_t *servers = json_array(), *networks = json_array(), *packages = json_array(),
           *images = json_array();
    for (size_t i = 0; i < dc->n_servers; i++) {
        const dc_server_t *s = &dc->servers[i];
        json_array_append_new(
            servers, json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:s}", "uuid", s->uuid, "hostname",
                               s->hostname, "rack", s->rack, "ram_mib", (json_int_t)s->ram_mib,
                               "disk_mib", (json_int_t)s->disk_mib, "data_root", s->data_root,
                               "platform_version", s->platform_version ? s->platform_version : ""));
    }
    for (size_t i = 0; i < dc->n_networks; i++) {
        const dc_network_t *n = &dc->networks[i];
        char mask[INET_ADDRSTRLEN];
        uint32_t bits = n->prefix_len == 0 ? 0 : 0xffffffffu << (32 - n->prefix_len);
        json_t *owners = json_array();
        for (size_t j = 0; j < n->n_owner_uuids; j++)
            json_array_append_new(owners, json_string(n->owner_uuids[j]));
        json_array_append_new(
            networks,
            json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:I, s:I, s:I, s:b, s:o}",
                      "uuid", n->uuid, "name", n->name, "subnet", n->subnet, "netmask",
                      ip_text(bits, mask), "gateway", n->gateway_text, "provision_start_ip",
                      n->start_text, "provision_end_ip", n->end_text, "vlan_id", (int)n->vlan_id,
                      "mtu", (int)n->mtu, "start_n", (json_int_t)n->start_ip, "end_n",
                      (json_int_t)n->end_ip, "gateway_n", (json_int_t)n->gateway, "fabric",
                      n->fabric, "owner_uuids", owners));
    }
    for (size_t i = 0; i < dc->n_packages; i++) {
        const dc_package_t *p = &dc->packages[i];
        json_t *o =
            json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:b, s:I}", "uuid", p->uuid, "name", p->name,
                      "brand", p->brand, "ram_mib", (json_int_t)p->ram_mib, "vcpus",
                      (json_int_t)p->vcpus, "disk_mib", (json_int_t)p->disk_mib, "flexible_disk",
                      p->flexible_disk, "quota_mib", (json_int_t)p->quota_mib);
        if (p->n_disks > 0) {
            json_t *disks = json_array();
            for (size_t j = 0; j < p->n_disks; j++) {
                const dc_package_disk_t *d = &p->disks[j];
                json_array_append_new(
                    disks, d->remaining      ? json_pack("{s:s}", "size", "remaining")
                           : d->size_mib > 0 ? json_pack("{s:I}", "size", (json_int_t)d->size_mib)
                                             : json_object());
            }
            json_object_set_new(o, "disks", disks);
        }
        json_array_append_new(packages, o);
    }
    for (size_t i = 0; i < dc->n_images; i++) {
        const dc_image_t *m = &dc->images[i];
        json_t *o =
            json_pack("{s:s, s:s, s:s, s:I, s:s}", "uuid", m->uuid, "name", m->name, "version",
                      m->version, "size_mib", (json_int_t)m->size_mib, "file", m->file);
        if (m->brand != NULL)
            json_object_set_new(o, "brand", json_string(m->brand));
        if (m->os != NULL)
            json_object_set_new(o, "os", json_string(m->os));
        json_array_append_new(images, o);
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "servers", servers, "networks", networks, "packages",
                     packages, "images", images);
}

static void inventory_load_start(tern_ctx *ctx, const json_t *args)
{
    (void)args;
    const dc_state_t *s = tern_plugin_state(ctx);
    if (s == NULL || s->dc == NULL) {
        tern_task_fail(ctx, "NoDescription",
                       "dc.inventory_load: this runner's dc configuration names no "
                       "\"datacenter\" description to load");
        return;
    }
    json_t *d = description_json(s->dc);
    dc_script_run(ctx, dc_lua_inventory_load, d, false, NULL);
    json_decref(d);
}

/* The provision's fields: those of "params" (the job's params, when the step passes
 * them whole), then the named arguments over them; the target the job's own unless
 * given. A new reference. */
static json_t *check_fields(tern_ctx *ctx, const json_t *args)
{
    json_t *fields = json_object();
    const json_t *params = json_object_get(args, "params");
    if (json_is_object(params))
        json_object_update(fields, (json_t *)params);
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)args, key, v)
    {
        if (strcmp(key, "params") != 0)
            json_object_set(fields, key, (json_t *)v);
    }
    if (json_object_get(fields, "target") == NULL) {
        const char *target = tern_job_target(ctx);
        json_object_set_new(fields, "target", target != NULL ? json_string(target) : json_null());
    }
    return fields;
}

static void provision_check_start(tern_ctx *ctx, const json_t *args)
{
    json_t *fields = check_fields(ctx, args);
    dc_script_run(ctx, dc_lua_provision_check, fields, true, NULL);
    json_decref(fields);
}

static void vm_check_start(tern_ctx *ctx, const json_t *args)
{
    json_t *fields = check_fields(ctx, args);
    dc_script_run(ctx, dc_lua_vm_check, fields, true, NULL);
    json_decref(fields);
}

/* The place step tells the steps after it where the VM went: state server_uuid, and
 * agent_queue, the queue of that server's agent. Its result is the script's:
 * {server_uuid, reused, disks} (the disks the agent is to make). */
static json_t *placed(tern_ctx *ctx, const json_t *result)
{
    const char *server = json_string_value(json_object_get(result, "server_uuid"));
    if (server == NULL) {
        tern_task_fail(ctx, "RedisError", "dc.place: the script answered no server_uuid");
        return NULL;
    }
    char queue[64];
    snprintf(queue, sizeof queue, "server:%s", server);
    if (tern_state_set(ctx, "server_uuid", json_string(server)) != 0 ||
        tern_state_set(ctx, "agent_queue", json_string(queue)) != 0) {
        tern_task_fail(ctx, "StateError", "dc.place: cannot set the job's state");
        return NULL;
    }
    return json_deep_copy(result);
}

static void place_start(tern_ctx *ctx, const json_t *args)
{
    dc_script_run(ctx, dc_lua_place, args, false, placed);
}

static void nics_provision_start(tern_ctx *ctx, const json_t *args)
{
    dc_script_run(ctx, dc_lua_nics_provision, args, false, NULL);
}

static void vm_set_state_start(tern_ctx *ctx, const json_t *args)
{
    const char *state = json_string_value(json_object_get(args, "state"));
    if (state == NULL || (strcmp(state, "running") != 0 && strcmp(state, "stopped") != 0)) {
        tern_task_fail(ctx, "InvalidArgument", "state: expected \"running\" or \"stopped\"");
        return;
    }
    dc_script_run(ctx, dc_lua_vm_set_state, args, false, NULL);
}

static void release_start(tern_ctx *ctx, const json_t *args)
{
    const char *state = json_string_value(json_object_get(args, "final_state"));
    if (state == NULL || (strcmp(state, "failed") != 0 && strcmp(state, "destroyed") != 0)) {
        tern_task_fail(ctx, "InvalidArgument", "final_state: expected \"failed\" or \"destroyed\"");
        return;
    }
    dc_script_run(ctx, dc_lua_release, args, false, NULL);
}

#define UUID_T "{\"type\": \"string\"}"

const tern_task_def dc_inventory_load_task = {
    .size = sizeof(tern_task_def),
    .name = "inventory_load",
    .summary = "Loads the datacenter description into the inventory, keeping what is live.",
    .args_schema = "{\"required\": [], \"properties\": {}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = inventory_load_start,
};

const tern_task_def dc_provision_check_task = {
    .size = sizeof(tern_task_def),
    .name = "provision_check",
    .summary = "Admission of a provision: refuses bad or unknown input, resolves the package.",
    .args_schema = "{\"required\": [], \"properties\": {\"params\": {\"type\": \"object\"}}, "
                   "\"additional\": true}",
    .fatal_codes = fatal_codes,
    .start = provision_check_start,
};

const tern_task_def dc_vm_check_task = {
    .size = sizeof(tern_task_def),
    .name = "vm_check",
    .summary = "Admission of vm-start, vm-stop, vm-delete: the VM exists in a fitting state.",
    .args_schema = "{\"required\": [\"vm_uuid\", \"action\"], \"properties\": {\"vm_uuid\": "
                   "{\"type\": \"any\"}, \"action\": {\"type\": \"string\"}, \"target\": "
                   "{\"type\": \"string\"}}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = vm_check_start,
};

const tern_task_def dc_place_task = {
    .size = sizeof(tern_task_def),
    .name = "place",
    .summary = "Chooses a server for a VM and commits its RAM and disk there.",
    .args_schema = "{\"required\": [\"vm_uuid\", \"owner_uuid\", \"ram\", \"quota\", "
                   "\"reservation\"], \"properties\": {\"vm_uuid\": " UUID_T
                   ", \"owner_uuid\": " UUID_T ", \"ram\": {\"type\": \"integer\"}, \"quota\": "
                   "{\"type\": \"integer\"}, \"reservation\": {\"type\": \"integer\"}}, "
                   "\"additional\": true}",
    .fatal_codes = fatal_codes,
    .start = place_start,
};

const tern_task_def dc_nics_provision_task = {
    .size = sizeof(tern_task_def),
    .name = "nics_provision",
    .summary = "Makes a placed VM's NICs, each with an address of its network.",
    .args_schema = "{\"required\": [\"vm_uuid\", \"owner_uuid\", \"networks\"], \"properties\": "
                   "{\"vm_uuid\": " UUID_T ", \"owner_uuid\": " UUID_T
                   ", \"networks\": {\"type\": \"array\"}}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = nics_provision_start,
};

const tern_task_def dc_vm_set_state_task = {
    .size = sizeof(tern_task_def),
    .name = "vm_set_state",
    .summary = "Sets a VM's state, and its NICs', to running or stopped.",
    .args_schema = "{\"required\": [\"vm_uuid\", \"state\"], \"properties\": {\"vm_uuid\": " UUID_T
                   ", \"state\": {\"type\": \"string\"}, \"disks\": {\"type\": \"any\"}, "
                   "\"volumes\": {\"type\": \"any\"}}, "
                   "\"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = vm_set_state_start,
};

const tern_task_def dc_release_task = {
    .size = sizeof(tern_task_def),
    .name = "release",
    .summary = "Gives back what a VM holds (capacity, NICs, addresses); sets its final state.",
    .args_schema =
        "{\"required\": [\"vm_uuid\", \"final_state\"], \"properties\": {\"vm_uuid\": " UUID_T
        ", \"final_state\": {\"type\": \"string\"}}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = release_start,
};
