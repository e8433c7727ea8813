/*
 * cmd_volume_snapshot.c -- `tern volume snapshot create|list|delete` and `tern volume
 * rollback`: the snapshots of a shared volume, each a copy of its data when taken.
 *
 * list reads the volume's record (its "snapshots"); create, delete and rollback make
 * jobs of volume-snapshot-create, volume-snapshot-delete and volume-rollback with the
 * target "/<workflow>-<volume_uuid>" (volume_api.h). A NAME is sent as given: the
 * admission check judges it (its form, unique per volume, the snapshot limit, a
 * rollback's volume in use) and names what it refuses.
 */
#include <stdlib.h>

#include "base/alloc.h"
#include "cli.h"
#include "dc_api.h"
#include "volume_api.h"

static const output_column_t snapshot_columns[] = {
    {"NAME", "name", NULL},
    {"STATE", "state", NULL},
    {"CREATED", "create_timestamp", NULL},
    {NULL, NULL, NULL},
};

static const char *const vol_name_args[] = {"VOL (its name, uuid or uuid prefix)", "NAME"};

/* `tern volume snapshot create|delete VOL NAME`, `tern volume rollback VOL NAME`: a job
 * of `workflow` with the param "name". */
static cli_status_t named_job(cli_t *cli, int argc, char **argv, const char *workflow,
                              const char *verb)
{
    volume_opts_t o = {0};
    char *args[2];
    json_t *vol = NULL;
    cli_status_t st =
        volume_parse(cli, argc, argv, "w", volume_job_long, vol_name_args, 2, &o, args);
    if (st == CLI_OK)
        st = volume_find(cli, volume_owner(&o), args[0], &vol);
    if (st == CLI_OK) {
        char *what = xasprintf("%s snapshot %s of", verb, args[1]);
        st = volume_submit_param(cli, vol, volume_owner(&o), workflow, "name", args[1], o.watch,
                                 what);
        free(what);
    }
    json_decref(vol);
    volume_opts_dispose(&o);
    return st;
}

static cli_status_t snapshot_create(cli_t *cli, int argc, char **argv)
{
    return named_job(cli, argc, argv, "volume-snapshot-create", "Taking");
}

static cli_status_t snapshot_delete(cli_t *cli, int argc, char **argv)
{
    return named_job(cli, argc, argv, "volume-snapshot-delete", "Deleting");
}

static cli_status_t snapshot_list(cli_t *cli, int argc, char **argv)
{
    volume_opts_t o = {0};
    char *args[1];
    json_t *vol = NULL;
    cli_status_t st =
        volume_parse(cli, argc, argv, "", volume_owner_long, vol_name_args, 1, &o, args);
    if (st == CLI_OK)
        st = volume_find(cli, volume_owner(&o), args[0], &vol);
    if (st == CLI_OK) {
        json_t *snapshots = json_object_get(vol, "snapshots");
        json_t *rows = json_is_array(snapshots) ? json_incref(snapshots) : json_array();
        output_table(stdout, &cli->out, rows, snapshot_columns, NULL);
        json_decref(rows);
    }
    json_decref(vol);
    volume_opts_dispose(&o);
    return st;
}

static const dc_subverb_t snapshot_verbs[] = {
    {"create", snapshot_create},
    {"delete", snapshot_delete},
    {"list", snapshot_list},
    {NULL, NULL},
};

static cli_status_t volume_snapshot(cli_t *cli, int argc, char **argv)
{
    return dc_run_subverb(cli, argc, argv, snapshot_verbs);
}

static cli_status_t volume_rollback(cli_t *cli, int argc, char **argv)
{
    return named_job(cli, argc, argv, "volume-rollback", "Rolling back to");
}

const cli_command_t cmd_volume_snapshot_commands[] = {
    {"volume", "snapshot", volume_snapshot,
     "volume snapshot create VOL NAME [-w] | delete VOL NAME [-w] | list VOL [--owner U]",
     "Take, delete or list the snapshots of a volume.",
     "  create VOL NAME  snapshot the volume's data (a job of volume-snapshot-create);\n"
     "                   NAME is unique among the volume's snapshots, which are limited\n"
     "                   in number (SnapshotLimitExceeded)\n"
     "  delete VOL NAME  delete a snapshot (a job of volume-snapshot-delete)\n"
     "  list VOL         the snapshots: NAME STATE CREATED\n"
     "  VOL              the volume's name, uuid, or 8 or more characters of its uuid\n"
     "  --owner U        act for owner U (default: $TERN_OWNER_UUID, else " DC_DEFAULT_OWNER ")\n"
     "  -w, --watch      follow the job to its end (exit status 0 when it succeeded, 1\n"
     "                   when it failed)\n"
     "\nA refused job is printed with its code and message (exit 3), and nothing changes.\n"},
    {"volume", "rollback", volume_rollback, "volume rollback VOL NAME [--owner U] [-w]",
     "Roll a volume's data back to a snapshot (a job of volume-rollback).",
     "  VOL              the volume's name, uuid, or 8 or more characters of its uuid\n"
     "  NAME             the snapshot; those taken after it are deleted\n"
     "  --owner U        act for owner U (default: $TERN_OWNER_UUID, else " DC_DEFAULT_OWNER ")\n"
     "  -w, --watch      follow the job to its end (exit status 0 when it succeeded, 1\n"
     "                   when it failed)\n"
     "\nThe volume is rolling_back while its share is stopped, rolled back and started.\n"},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};
