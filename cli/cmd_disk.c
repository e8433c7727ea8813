/*
 * cmd_disk.c -- `tern vm disks` and `tern vm disk add|resize|delete`: the disks of a
 * flexible disk instance.
 *
 * `vm disks` reads the instance's record (GET /vms/:uuid), whose sizes and
 * snapshot_size are those the last disk job measured; --refresh first runs a job of
 * vm-disk-usage, which measures them again on the instance's server. add, resize and
 * delete create jobs of the workflows disk-add, disk-resize and disk-delete with the
 * target "/<workflow>-<vm_uuid>". Everything the CLI can judge alone is judged before a
 * request is made: a SIZE (size_arg.h), then, from the record, which disk a DISK names
 * (disk_ref.h); a disk is sent by its id (its slot in a record older than ids), so the
 * job acts on the disk the user saw.
 * What needs the datacenter's state (space, the instance's state, a shrink) is the
 * admission check's, whose refusal is printed with its code and message (exit 3).
 */
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "base/alloc.h"
#include "cli.h"
#include "dc_api.h"
#include "disk_ref.h"
#include "size_arg.h"

enum {
    OPT_REFRESH = 0x4100,
    OPT_PCI_SLOT,
    OPT_ALLOW_SHRINK,
};

typedef struct disk_opts {
    bool watch, refresh, allow_shrink;
    const char *pci_slot;
} disk_opts_t;

static cli_status_t on_disk_opt(cli_t *cli, void *data, int c, const char *arg)
{
    disk_opts_t *o = data;
    switch (c) {
    case 'w':
        o->watch = true;
        return CLI_OK;
    case OPT_REFRESH:
        o->refresh = true;
        return CLI_OK;
    case OPT_PCI_SLOT:
        if (!disk_ref_is_slot(arg))
            return cli_usage(cli, "--pci-slot \"%s\": expected a PCI slot like 0:4:2", arg);
        o->pci_slot = arg;
        return CLI_OK;
    case OPT_ALLOW_SHRINK:
        o->allow_shrink = true;
        return CLI_OK;
    default:
        return cli_usage(cli, "unknown option");
    }
}

static const struct option disks_long[] = {
    {"refresh", no_argument, NULL, OPT_REFRESH},
    {NULL, 0, NULL, 0},
};

static const struct option add_long[] = {
    {"watch", no_argument, NULL, 'w'},
    {"pci-slot", required_argument, NULL, OPT_PCI_SLOT},
    {NULL, 0, NULL, 0},
};

static const struct option resize_long[] = {
    {"watch", no_argument, NULL, 'w'},
    {"dangerous-allow-shrink", no_argument, NULL, OPT_ALLOW_SHRINK},
    {NULL, 0, NULL, 0},
};

/* Parses the options (`shortopts` and `longopts`, the command's own) and exactly
 * `nargs` arguments, named in names[] ("VM (its uuid or alias)", "DISK", "SIZE"), into
 * args[]. */
static cli_status_t parse(cli_t *cli, int argc, char **argv, const char *shortopts,
                          const struct option *longopts, const char *const *names, int nargs,
                          disk_opts_t *o, char **args)
{
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, shortopts, longopts, on_disk_opt, o, &first, &st))
        return st;
    return dc_arguments(cli, argc, argv, first, names, nargs, args);
}

/* The instance's name for messages: its alias, else its uuid (borrowed from vm). */
static const char *vm_name(const json_t *vm)
{
    const char *alias = json_string_value(json_object_get(vm, "alias"));
    return alias != NULL ? alias : json_string_value(json_object_get(vm, "uuid"));
}

/* The disk of `vm` that `ref` names (borrowed from vm), or an error naming it. */
static cli_status_t find_disk(cli_t *cli, const json_t *vm, const char *ref, const json_t **disk)
{
    char err[1024];
    disk_ref_status_t r = disk_ref_find(vm, vm_name(vm), ref, disk, err, sizeof err);
    switch (r) {
    case DISK_REF_OK:
        return CLI_OK;
    case DISK_REF_BAD:
        return cli_usage(cli, "%s", err);
    case DISK_REF_UNKNOWN:
        return cli_fail(cli, CLI_API, "ResourceNotFound", "%s", err);
    case DISK_REF_AMBIGUOUS:
        return cli_fail(cli, CLI_API, "AmbiguousName", "%s", err);
    }
    return cli_fail(cli, CLI_USAGE, NULL, "disk \"%s\": not understood", ref);
}

/* A string member of a disk, or "?" when a record lacks it (borrowed). */
static const char *disk_str(const json_t *disk, const char *key)
{
    const char *s = json_string_value(json_object_get(disk, key));
    return s != NULL ? s : "?";
}

/* The params naming `disk` (a new object): its id, or its slot for a record made before
 * disks had ids. */
static json_t *disk_params(const json_t *disk)
{
    const json_t *id = json_object_get(disk, "id");
    return json_is_string(id) ? json_pack("{s:O}", "id", id)
                              : json_pack("{s:O}", "pci_slot", json_object_get(disk, "pci_slot"));
}

/* "Resizing disk 0:4:1 (1a2b3c4d) of": what a job does to a disk, for dc_submit_vm. */
static char *doing_to_disk(const char *verb, const json_t *disk)
{
    return xasprintf("%s disk %s (%.8s) of", verb, disk_str(disk, "pci_slot"),
                     disk_str(disk, "id"));
}

/* ---- disks --------------------------------------------------------------------- */

static cli_status_t vm_disks(cli_t *cli, int argc, char **argv)
{
    static const char *const names[] = {"VM (its uuid or alias)"};
    disk_opts_t o = {0};
    char *args[1];
    cli_status_t st = parse(cli, argc, argv, "", disks_long, names, 1, &o, args);
    if (st != CLI_OK)
        return st;
    json_t *vm;
    if ((st = dc_find_vm(cli, args[0], &vm)) != CLI_OK)
        return st;
    if (o.refresh) {
        /* A job of vm-disk-usage measures the disks on the server and records them. */
        const char *uuid = json_string_value(json_object_get(vm, "uuid"));
        json_t *params = json_pack("{s:s}", "vm_uuid", uuid);
        char *target = xasprintf("/vm-disk-usage-%s", uuid);
        json_t *job;
        st = dc_create_job(cli, "vm-disk-usage", target, params, &job);
        free(target);
        json_decref(params);
        if (st == CLI_OK)
            st = dc_wait_job(cli, json_string_value(json_object_get(job, "uuid")));
        json_decref(job);
        if (st == CLI_OK) {
            json_t *fresh;
            if ((st = dc_get(cli, "/vms", uuid, &fresh)) == CLI_OK) {
                json_decref(vm);
                vm = fresh;
            }
        }
    }
    if (st == CLI_OK) {
        json_t *disks = dc_disks_by_slot(vm);
        output_table(stdout, &cli->out, disks, dc_disk_columns, NULL);
        json_decref(disks);
    }
    json_decref(vm);
    return st;
}

/* ---- disk add, resize, delete -------------------------------------------------- */

static json_t *size_json(const size_arg_t *size)
{
    return size->remaining ? json_string("remaining") : json_integer((json_int_t)size->mib);
}

static cli_status_t disk_add(cli_t *cli, int argc, char **argv)
{
    static const char *const names[] = {"VM (its uuid or alias)", "SIZE"};
    disk_opts_t o = {0};
    char *args[2], err[256];
    size_arg_t size;
    cli_status_t st = parse(cli, argc, argv, "w", add_long, names, 2, &o, args);
    if (st != CLI_OK)
        return st;
    if (!size_arg_parse(args[1], true, &size, err, sizeof err))
        return cli_usage(cli, "%s", err);
    json_t *vm;
    if ((st = dc_find_vm(cli, args[0], &vm)) != CLI_OK)
        return st;
    json_t *params = json_pack("{s:o}", "size", size_json(&size));
    if (o.pci_slot != NULL)
        json_object_set_new(params, "pci_slot", json_string(o.pci_slot));
    st = dc_submit_vm(cli, vm, "disk-add", "disk-add", params, o.watch, "Adding a disk to");
    json_decref(params);
    json_decref(vm);
    return st;
}

static cli_status_t disk_resize(cli_t *cli, int argc, char **argv)
{
    static const char *const names[] = {"VM (its uuid or alias)", "DISK", "SIZE"};
    disk_opts_t o = {0};
    char *args[3], err[256];
    size_arg_t size;
    cli_status_t st = parse(cli, argc, argv, "w", resize_long, names, 3, &o, args);
    if (st != CLI_OK)
        return st;
    if (!size_arg_parse(args[2], false, &size, err, sizeof err))
        return cli_usage(cli, "%s", err);
    json_t *vm;
    if ((st = dc_find_vm(cli, args[0], &vm)) != CLI_OK)
        return st;
    const json_t *disk;
    st = find_disk(cli, vm, args[1], &disk);
    json_int_t current = json_integer_value(json_object_get(disk, "size"));
    if (st == CLI_OK && !o.allow_shrink && (json_int_t)size.mib <= current)
        st = cli_usage(cli,
                       "SIZE must be greater than the current size: disk %s (%.8s) of instance "
                       "%s is %lld MiB, %s asks for %llu MiB; shrinking a disk discards what "
                       "lies past the new size and needs --dangerous-allow-shrink",
                       disk_str(disk, "pci_slot"), disk_str(disk, "id"), vm_name(vm),
                       (long long)current, args[2], (unsigned long long)size.mib);
    if (st == CLI_OK) {
        json_t *params = disk_params(disk);
        json_object_set_new(params, "size", size_json(&size));
        if (o.allow_shrink)
            json_object_set_new(params, "dangerous_allow_shrink", json_true());
        char *doing = doing_to_disk("Resizing", disk);
        st = dc_submit_vm(cli, vm, "disk-resize", "disk-resize", params, o.watch, doing);
        free(doing);
        json_decref(params);
    }
    json_decref(vm);
    return st;
}

static cli_status_t disk_delete(cli_t *cli, int argc, char **argv)
{
    static const char *const names[] = {"VM (its uuid or alias)", "DISK"};
    disk_opts_t o = {0};
    char *args[2];
    cli_status_t st = parse(cli, argc, argv, "w", dc_watch_long, names, 2, &o, args);
    if (st != CLI_OK)
        return st;
    json_t *vm;
    if ((st = dc_find_vm(cli, args[0], &vm)) != CLI_OK)
        return st;
    const json_t *disk;
    if ((st = find_disk(cli, vm, args[1], &disk)) == CLI_OK) {
        json_t *params = disk_params(disk);
        char *doing = doing_to_disk("Deleting", disk);
        st = dc_submit_vm(cli, vm, "disk-delete", "disk-delete", params, o.watch, doing);
        free(doing);
        json_decref(params);
    }
    json_decref(vm);
    return st;
}

static const dc_subverb_t disk_verbs[] = {
    {"add", disk_add},
    {"resize", disk_resize},
    {"delete", disk_delete},
    {NULL, NULL},
};

static cli_status_t vm_disk(cli_t *cli, int argc, char **argv)
{
    return dc_run_subverb(cli, argc, argv, disk_verbs);
}

const cli_command_t cmd_disk_commands[] = {
    {"vm", "disks", vm_disks, "vm disks VM [--refresh]",
     "List an instance's disks: ID PCI_SLOT SIZE BOOT SNAPSHOT_SIZE (MiB).",
     "  VM         the instance's uuid or alias\n"
     "  --refresh  measure the disks and their snapshots on the instance's server first\n"
     "             (a job of vm-disk-usage, waited for); otherwise the sizes are those\n"
     "             the last disk job recorded\n"
     "\nOrdered by PCI slot; -o also knows IMAGE and PATH (or any field: -o id,path),\n"
     "-j prints the disks as JSON.\n"},
    {"vm", "disk", vm_disk,
     "vm disk add VM SIZE [--pci-slot S] [-w] | resize VM DISK SIZE "
     "[--dangerous-allow-shrink] [-w] | delete VM DISK [-w]",
     "Add, resize or delete a disk of a flexible disk instance.",
     "  add VM SIZE       a new disk of SIZE, or of what is left (SIZE remaining), in the\n"
     "                    first free PCI slot or --pci-slot S (0:4:2); the instance must\n"
     "                    be stopped\n"
     "  resize VM DISK SIZE\n"
     "                    grow a disk (running or stopped) to SIZE; a SIZE not above the\n"
     "                    disk's is refused unless --dangerous-allow-shrink, since a\n"
     "                    shrink (instance stopped) discards what lies past the new size\n"
     "  delete VM DISK    delete a disk and its copies in every snapshot (not the boot\n"
     "                    disk; the instance must be stopped)\n"
     "  VM                the instance's uuid or alias\n"
     "  DISK              a PCI slot (0:4:1), a disk id, or 8 or more characters of one\n"
     "  SIZE              N or NM (MiB), NG (GiB): 512M, 20G, 10240\n"
     "  -w, --watch       follow the job to its end (exit status 0 when it succeeded, 1\n"
     "                    when it failed)\n"
     "\nA bad SIZE or DISK is refused before anything is sent (exit 2; exit 3 for a DISK\n"
     "the instance does not have). A job the datacenter refuses (not enough free_space,\n"
     "the instance's state, a shrink without the flag) is refused with its code and\n"
     "message, e.g. \"tern: InsufficientSpace: ...\" (exit 3), and nothing changes.\n"},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};
