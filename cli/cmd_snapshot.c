/*
 * cmd_snapshot.c -- `tern vm snapshot create|delete|list`: the snapshots of a flexible
 * disk instance, each a copy of every disk the instance had when it was taken.
 *
 * list reads the instance's record; create and delete make jobs of vm-snapshot-create
 * and vm-snapshot-delete with the target "/<workflow>-<vm_uuid>". A NAME is sent as
 * given: the admission check judges it (its form, unique per instance, at most 16
 * snapshots, the space its copies may need) and names what it refuses.
 */
#include <stdlib.h>

#include "args.h"
#include "base/alloc.h"
#include "cli.h"
#include "dc_api.h"

/* `tern vm snapshot create|delete VM NAME [-w]`: a job of `workflow`. */
static cli_status_t snapshot_job(cli_t *cli, int argc, char **argv, const char *workflow,
                                 const char *doing)
{
    bool watch = false;
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, "w", dc_watch_long, dc_watch_option, &watch, &first, &st))
        return st;
    if (argc - first < 2)
        return cli_usage(cli, "missing %s", argc - first == 0 ? "VM (its uuid or alias)" : "NAME");
    if (argc - first > 2)
        return cli_usage(cli, "unexpected argument \"%s\"", argv[first + 2]);
    json_t *vm;
    if ((st = dc_find_vm(cli, argv[first], &vm)) != CLI_OK)
        return st;
    json_t *params = json_pack("{s:s}", "name", argv[first + 1]);
    char *what = xasprintf("%s snapshot %s of", doing, argv[first + 1]);
    st = dc_submit_vm(cli, vm, workflow, workflow, params, watch, what);
    free(what);
    json_decref(params);
    json_decref(vm);
    return st;
}

static cli_status_t snapshot_create(cli_t *cli, int argc, char **argv)
{
    return snapshot_job(cli, argc, argv, "vm-snapshot-create", "Taking");
}

static cli_status_t snapshot_delete(cli_t *cli, int argc, char **argv)
{
    return snapshot_job(cli, argc, argv, "vm-snapshot-delete", "Deleting");
}

static cli_status_t snapshot_list(cli_t *cli, int argc, char **argv)
{
    const char *ref;
    cli_status_t st = dc_one_argument(cli, argc, argv, "VM (its uuid or alias)", &ref);
    if (st != CLI_OK)
        return st;
    json_t *vm;
    if ((st = dc_find_vm(cli, ref, &vm)) != CLI_OK)
        return st;
    json_t *snapshots = json_object_get(vm, "snapshots");
    if (!json_is_array(snapshots))
        snapshots = json_array();
    else
        json_incref(snapshots);
    output_table(stdout, &cli->out, snapshots, dc_snapshot_columns, NULL);
    json_decref(snapshots);
    json_decref(vm);
    return CLI_OK;
}

static const dc_subverb_t snapshot_verbs[] = {
    {"create", snapshot_create},
    {"delete", snapshot_delete},
    {"list", snapshot_list},
    {NULL, NULL},
};

static cli_status_t vm_snapshot(cli_t *cli, int argc, char **argv)
{
    return dc_run_subverb(cli, argc, argv, snapshot_verbs);
}

const cli_command_t cmd_snapshot_commands[] = {
    {"vm", "snapshot", vm_snapshot,
     "vm snapshot create VM NAME [-w] | delete VM NAME [-w] | list VM",
     "Take, delete or list the snapshots of a flexible disk instance.",
     "  create VM NAME   snapshot every disk of the instance (running or stopped);\n"
     "                   NAME is 1-64 of A-Za-z0-9_.- starting with a letter or digit,\n"
     "                   unique among the instance's snapshots (16 at most)\n"
     "  delete VM NAME   delete a snapshot, giving back the space only it held\n"
     "  list VM          the snapshots: NAME CREATED\n"
     "  VM               the instance's uuid or alias\n"
     "  -w, --watch      follow the job to its end (exit status 0 when it succeeded, 1\n"
     "                   when it failed)\n"
     "\nA snapshot's space is counted in the instance's free_space (`tern vm get`), as\n"
     "the data its copies hold that the disks no longer do. A refused job is printed\n"
     "with its code and message (exit 3), and nothing changes.\n"},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};
