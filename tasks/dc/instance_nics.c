/*
 * instance_nics.c -- dc.instance_nics, on a server's agent: an instance's vm.json made
 * to list the NICs the control plane gave it, after a NIC was added or removed while
 * the instance exists (a shared volume's network attach or detach changes its storage
 * instance's NICs; docs/VOLUMES.md "Snapshots, rollback and networks").
 *
 *   {"vm_uuid", "nics": [{"mac", ...}]} -> {"macs": [the MACs now in vm.json]}
 *
 * The NICs are written as given (the control plane's records: mac, ip, netmask,
 * network_uuid, interface, primary...), in their order, replacing vm.json's "nics";
 * vm.json is rewritten whole (instance_json_write), so it is the old one or the new
 * one. Run twice it writes the same. The workload is not touched: the workflow stops
 * and starts it around this step, as a zone reboots to take new NICs.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dc_state.h"
#include "instance_dir.h"
#include "lib/args.h"

#define NICS_MAX 32

/* NULL, or the message naming the bad NIC. */
static const char *nics_fault(const json_t *nics, char *msg, size_t msglen)
{
    if (!json_is_array(nics) || json_array_size(nics) > NICS_MAX) {
        snprintf(msg, msglen, "nics: expected an array of at most %d NICs", NICS_MAX);
        return msg;
    }
    size_t i;
    const json_t *nic;
    json_array_foreach(nics, i, nic)
    {
        const char *mac = json_string_value(json_object_get(nic, "mac"));
        if (!json_is_object(nic) || mac == NULL || strlen(mac) != 17) {
            snprintf(msg, msglen, "nics[%zu].mac: expected a NIC with its MAC address", i);
            return msg;
        }
        for (size_t k = 0; k < i; k++)
            if (strcmp(mac, json_string_value(json_object_get(json_array_get(nics, k), "mac"))) ==
                0) {
                snprintf(msg, msglen, "nics[%zu].mac: %s is nics[%zu]'s too", i, mac, k);
                return msg;
            }
    }
    return NULL;
}

static void nics_start(tern_ctx *ctx, const json_t *args)
{
    const dc_state_t *s = dc_agent_state(ctx, "dc.instance_nics");
    if (s == NULL)
        return;
    char msg[1024];
    const char *vm_uuid = NULL;
    const char *bad = task_args_string(args, "vm_uuid", &vm_uuid, NULL, msg, sizeof msg);
    if (bad == NULL && (vm_uuid == NULL || !dc_uuid_ok(vm_uuid)))
        bad = "vm_uuid: expected a lowercase UUID";
    const json_t *nics = json_object_get(args, "nics");
    if (bad == NULL)
        bad = nics_fault(nics, msg, sizeof msg);
    if (bad != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "dc.instance_nics: %s", bad);
        return;
    }
    instance_paths_t p;
    json_t *vm = NULL;
    int rc = instance_read(s->server->data_root, vm_uuid, &p, &vm, msg, sizeof msg);
    if (rc != 0) {
        tern_task_fail(ctx, instance_read_code(rc), "dc.instance_nics: %s", msg);
        return;
    }
    if (!json_equal(json_object_get(vm, "nics"), nics)) {
        json_object_set_new(vm, "nics", json_deep_copy(nics));
        rc = instance_json_write(p.vm_json, vm, msg, sizeof msg);
    }
    json_decref(vm);
    if (rc != 0) {
        tern_task_fail(ctx, "InstanceBroken", "dc.instance_nics: %s", msg);
        return;
    }
    json_t *macs = json_array();
    size_t i;
    const json_t *nic;
    json_array_foreach(nics, i, nic) json_array_append(macs, json_object_get(nic, "mac"));
    tern_task_done(ctx, json_pack("{s:o}", "macs", macs));
}

const tern_task_def dc_instance_nics_task = {
    .size = sizeof(tern_task_def),
    .name = "instance_nics",
    .summary = "Makes an instance's vm.json list the NICs given (after a NIC was added or "
               "removed), leaving its workload as it is.",
    .args_schema = "{\"required\": [\"vm_uuid\", \"nics\"], \"properties\": {\"vm_uuid\": "
                   "{\"type\": \"string\"}, \"nics\": {\"type\": \"array\"}}, \"additional\": "
                   "false}",
    .fatal_codes = dc_fatal_codes,
    .start = nics_start,
    .cancel = dc_agent_cancel,
};
