/*
 * instances_scan.c -- dc.instances_scan, on a server's agent: what the NIC reconcile
 * (docs/RECONCILE.md) needs to know of the instances present on this server, read
 * from their directories under the data root (instance_dir.h):
 *
 *   {} -> {"server_uuid", "scanned_at" (ISO 8601 UTC, ms, taken before the data root
 *          is read), "instances": [{"uuid", "state", "role", "do_not_inventory",
 *          "nics": [mac]}]}
 *
 * One entry per <data_root>/<uuid>/ holding a vm.json. A directory without one is a
 * create still at work (its VM's record says provisioning, which the reconcile never
 * reaps). A data root that cannot be read, or a vm.json that is there but cannot be
 * read, fails the step (DataRootUnreadable, InstanceUnreadable): a scan that may have
 * missed a present instance must never reach the reconcile, which would take that
 * instance for gone and free its NICs.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dc_state.h"
#include "instance_dir.h"

/* The MACs of vm.json's "nics" (objects with "mac"): a new reference. */
static json_t *nic_macs(const json_t *vm)
{
    json_t *macs = json_array();
    size_t i;
    const json_t *nic;
    json_array_foreach(json_object_get(vm, "nics"), i, nic)
    {
        const json_t *mac = json_object_get(nic, "mac");
        if (json_is_string(mac))
            json_array_append(macs, (json_t *)mac);
    }
    return macs;
}

/* The instance's entry, from its vm.json (borrowed): a new reference. */
static json_t *instance_entry(const char *uuid, const json_t *vm)
{
    const json_t *state = json_object_get(vm, "state");
    const json_t *role = json_object_get(vm, "role");
    return json_pack("{s:s, s:O, s:O, s:b, s:o}", "uuid", uuid, "state",
                     json_is_string(state) ? state : json_null(), "role",
                     json_is_string(role) ? role : json_null(), "do_not_inventory",
                     json_is_true(json_object_get(vm, "do_not_inventory")), "nics", nic_macs(vm));
}

/* Every instance of `root` into *out (a new reference). -errno with err naming the
 * directory or file that could not be read, and *out NULL. */
static int scan_root(const char *root, json_t **out, const char **code, char *err, size_t errlen)
{
    *out = NULL;
    DIR *d = opendir(root);
    if (d == NULL) {
        *code = "DataRootUnreadable";
        snprintf(err, errlen, "data root %s: %s", root, strerror(errno));
        return -1;
    }
    json_t *list = json_array();
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (de == NULL) {
            if (errno != 0) {
                *code = "DataRootUnreadable";
                snprintf(err, errlen, "data root %s: %s", root, strerror(errno));
                rc = -1;
            }
            break;
        }
        instance_paths_t p;
        char why[512];
        /* Not a UUID, or a symlink or file standing where an instance would be: no
         * instance the agent would ever touch. */
        if (!dc_uuid_ok(de->d_name) || instance_paths(root, de->d_name, &p, why, sizeof why) != 0)
            continue;
        json_t *vm = NULL;
        int r = instance_json_read(p.vm_json, &vm, why, sizeof why);
        if (r == -ENOENT)
            continue;
        if (r != 0) {
            *code = "InstanceUnreadable";
            snprintf(err, errlen, "instance %s: %s", de->d_name, why);
            rc = -1;
            break;
        }
        json_array_append_new(list, instance_entry(de->d_name, vm));
        json_decref(vm);
    }
    closedir(d);
    if (rc != 0) {
        json_decref(list);
        return rc;
    }
    *out = list;
    return 0;
}

static void instances_scan_start(tern_ctx *ctx, const json_t *args)
{
    (void)args;
    const dc_state_t *s = dc_agent_state(ctx, "dc.instances_scan");
    if (s == NULL)
        return;
    /* Taken before the directory is read: an instance whose record changed after
     * this time may be missing from the scan, and the reconcile leaves it alone. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char base[24], at[40];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(at, sizeof at, "%s.%03ldZ", base, ts.tv_nsec / 1000000L);

    json_t *list = NULL;
    const char *code = NULL;
    char err[1024];
    if (scan_root(s->server->data_root, &list, &code, err, sizeof err) != 0) {
        tern_task_fail(ctx, code, "dc.instances_scan: %s (nothing is reconciled from this scan)",
                       err);
        return;
    }
    tern_task_done(ctx, json_pack("{s:s, s:s, s:o}", "server_uuid", s->server->uuid, "scanned_at",
                                  at, "instances", list));
}

const tern_task_def dc_instances_scan_task = {
    .size = sizeof(tern_task_def),
    .name = "instances_scan",
    .summary = "The instances present in this server's data root (uuid, state, role, "
               "do_not_inventory, NIC MACs), for the NIC reconcile; fails if it cannot read it.",
    .args_schema = "{\"required\": [], \"properties\": {}, \"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = instances_scan_start,
};
