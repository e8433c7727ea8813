/*
 * cmd_volume.c -- `tern volume create|list|get|delete|sizes|rename|attach-network|
 * detach-network`: an owner's shared volumes (RFD 26), each an NFS export served by a
 * storage instance of its own.
 *
 * list and get read the dc plugin's views (GET /volumes, /volumes/:uuid, /volumesizes);
 * the other verbs create jobs of the workflows volume-create, volume-delete,
 * volume-update, volume-attach-network and volume-detach-network with the target
 * "/<workflow>-<volume_uuid>" (volume_api.h); create draws the new volume's uuid, so
 * the job and the volume are known before anything runs. Everything the CLI can judge
 * alone is judged before a request is made: a SIZE's form (volume_size.h), a name
 * (volume_spec.h); then, from the views, a SIZE the datacenter does not offer, which
 * volume a VOL names (volume_ref.h) and which network a NETWORK names. What needs the
 * datacenter's state (a name taken, a volume in use, a network not the owner's fabric)
 * is the admission check's, printed with its code and message (exit 3).
 */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/ident.h"
#include "cli.h"
#include "dc_api.h"
#include "volume_api.h"
#include "volume_size.h"
#include "volume_spec.h"

#define VOL_WHAT "VOL (its name, uuid or uuid prefix)"

/* ---- columns ------------------------------------------------------------------- */

/* The networks by name where the listing could add them ("network_names"), else by
 * short uuid. */
static void cell_networks(const json_t *row, char *buf, size_t n)
{
    const json_t *names = json_object_get(row, "network_names");
    if (json_is_array(names)) {
        output_cell_text(names, buf, n);
        return;
    }
    size_t i, at = 0;
    const json_t *u;
    buf[0] = '\0';
    json_array_foreach(json_object_get(row, "networks"), i, u)
    {
        int w = snprintf(buf + at, n - at, "%s%.8s", i > 0 ? "," : "",
                         json_is_string(u) ? json_string_value(u) : "?");
        if (w < 0 || (size_t)w >= n - at)
            return;
        at += (size_t)w;
    }
    if (at == 0)
        snprintf(buf, n, "-");
}

/* How many instances mount the volume. */
static void cell_refs(const json_t *row, char *buf, size_t n)
{
    snprintf(buf, n, "%zu", json_array_size(json_object_get(row, "refs")));
}

/* `triton volume list`'s columns, then those -o also knows. */
static const output_column_t volume_columns[] = {
    {"NAME", "name", NULL},
    {"STATE", "state", NULL},
    {"SIZE", NULL, volume_cell_size},
    {"NETWORKS", NULL, cell_networks},
    {"REFS", NULL, cell_refs},
    {"CREATED", "create_timestamp", NULL},
    {NULL, NULL, NULL},
};

static const output_column_t volume_columns_known[] = {
    {"NAME", "name", NULL},
    {"STATE", "state", NULL},
    {"SIZE", NULL, volume_cell_size},
    {"NETWORKS", NULL, cell_networks},
    {"REFS", NULL, cell_refs},
    {"CREATED", "create_timestamp", NULL},
    {"SHORTID", NULL, dc_cell_shortid},
    {"UUID", "uuid", NULL},
    {"TYPE", "type", NULL},
    {"SHARE", "share_state", NULL},
    {"FILESYSTEM", "filesystem_path", NULL},
    {"OWNER", "owner_uuid", NULL},
    {NULL, NULL, NULL},
};

static const output_column_t size_columns[] = {
    {"SIZE", NULL, volume_cell_size},
    {"MIB", "size", NULL},
    {"TYPE", "type", NULL},
    {NULL, NULL, NULL},
};

static const output_column_t volume_snapshot_columns[] = {
    {"NAME", "name", NULL},
    {"STATE", "state", NULL},
    {"CREATED", "create_timestamp", NULL},
    {NULL, NULL, NULL},
};

/* Adds "network_names" to each row (a copy) for the NETWORKS column: the networks'
 * names, or their uuids when the listing of networks fails or lacks one. */
static json_t *with_network_names(cli_t *cli, const json_t *rows)
{
    json_t *copy = json_deep_copy(rows);
    json_t *nets;
    if (dc_list(cli, "/networks", NULL, &nets) != CLI_OK) {
        memset(&cli->err, 0, sizeof cli->err); /* the short uuids stand in */
        return copy;
    }
    size_t i, j, k;
    json_t *row;
    const json_t *u, *net;
    json_array_foreach(copy, i, row)
    {
        json_t *names = json_array();
        json_array_foreach(json_object_get(row, "networks"), j, u)
        {
            const json_t *name = u;
            json_array_foreach(nets, k, net)
            {
                if (json_equal(json_object_get(net, "uuid"), u) &&
                    json_is_string(json_object_get(net, "name"))) {
                    name = json_object_get(net, "name");
                    break;
                }
            }
            json_array_append(names, (json_t *)name);
        }
        json_object_set_new(row, "network_names", names);
    }
    json_decref(nets);
    return copy;
}

/* ---- create -------------------------------------------------------------------- */

static const struct option create_long[] = {
    {"name", required_argument, NULL, 'n'},
    {"size", required_argument, NULL, 's'},
    {"network", required_argument, NULL, 'N'},
    {"tag", required_argument, NULL, VOLUME_OPT_TAG},
    {"owner", required_argument, NULL, VOLUME_OPT_OWNER},
    {"watch", no_argument, NULL, 'w'},
    {NULL, 0, NULL, 0},
};

/* Refuses a SIZE (already of the right form) that GET /volumesizes does not list. */
static cli_status_t check_size_offered(cli_t *cli, const volume_opts_t *o)
{
    json_t *sizes;
    cli_status_t st = dc_list(cli, "/volumesizes", NULL, &sizes);
    if (st == CLI_OK && !volume_size_listed(sizes, o->size_mib))
        st = cli_fail(cli, CLI_USAGE, NULL, "size \"%s\": " VOLUME_SIZE_NOT_AVAILABLE, o->size);
    json_decref(sizes);
    return st;
}

/* The uuids of the networks `given` names (by name or uuid), into a new array. */
static cli_status_t network_uuids(cli_t *cli, const json_t *given, json_t **out)
{
    *out = json_array();
    size_t i;
    const json_t *g;
    json_array_foreach(given, i, g)
    {
        char uuid[37];
        cli_status_t st =
            dc_find_uuid(cli, "/networks", "name", "network", json_string_value(g), uuid);
        if (st != CLI_OK) {
            json_decref(*out);
            *out = NULL;
            return st;
        }
        json_array_append_new(*out, json_string(uuid));
    }
    return CLI_OK;
}

static cli_status_t volume_create(cli_t *cli, int argc, char **argv)
{
    volume_opts_t o = {0};
    json_t *params = NULL, *nets = NULL;
    cli_status_t st = volume_parse(cli, argc, argv, "n:s:N:w", create_long, NULL, 0, &o, NULL);
    const char *fault = st == CLI_OK && o.name != NULL ? volume_name_fault(o.name) : NULL;
    if (fault != NULL)
        st = cli_usage(cli,
                       "-n \"%s\": a volume name %s (2-256 of A-Za-z0-9_.-, starting with a "
                       "letter or digit)",
                       o.name, fault);
    if (st == CLI_OK && o.size != NULL)
        st = check_size_offered(cli, &o);
    if (st == CLI_OK && json_array_size(o.networks) > 0)
        st = network_uuids(cli, o.networks, &nets);
    if (st != CLI_OK)
        goto Done;
    const char *owner = volume_owner(&o);
    char uuid[37];
    uuid_v4(uuid); /* false only when a clock mix stood in for the kernel's bits: unique
                      enough, and a uuid taken is refused by the admission check */
    params = json_pack("{s:s, s:s}", "volume_uuid", uuid, "owner_uuid", owner);
    if (o.name != NULL)
        json_object_set_new(params, "name", json_string(o.name));
    if (o.size != NULL)
        json_object_set_new(params, "size", json_integer((json_int_t)o.size_mib));
    if (nets != NULL)
        json_object_set(params, "networks", nets);
    if (json_object_size(o.tags) > 0)
        json_object_set(params, "tags", o.tags);
    char *target = xasprintf("/volume-create-%s", uuid);
    char *what = o.name != NULL ? xasprintf("Creating volume %s (%s)", o.name, uuid)
                                : xasprintf("Creating volume %s", uuid);
    st = dc_submit(cli, "volume-create", target, params, o.watch, what);
    free(what);
    free(target);
Done:
    json_decref(nets);
    json_decref(params);
    volume_opts_dispose(&o);
    return st;
}

/* ---- list, get, sizes ---------------------------------------------------------- */

static const struct option list_long[] = {
    {"state", required_argument, NULL, VOLUME_OPT_STATE},
    {"name", required_argument, NULL, VOLUME_OPT_NAME_GLOB},
    {"owner", required_argument, NULL, VOLUME_OPT_OWNER},
    {NULL, 0, NULL, 0},
};

static cli_status_t volume_list(cli_t *cli, int argc, char **argv)
{
    volume_opts_t o = {0};
    char *query = NULL;
    json_t *rows = NULL;
    cli_status_t st = volume_parse(cli, argc, argv, "", list_long, NULL, 0, &o, NULL);
    if (st != CLI_OK)
        goto Done;
    dc_query_add(cli, &query, "owner_uuid", volume_owner(&o));
    if (o.state != NULL)
        dc_query_add(cli, &query, "state", o.state);
    if (o.name_glob != NULL)
        dc_query_add(cli, &query, "name", o.name_glob);
    if ((st = dc_list(cli, "/volumes", query, &rows)) != CLI_OK)
        goto Done;
    if (cli->out.json && cli->out.columns == NULL) {
        output_table(stdout, &cli->out, rows, volume_columns_known, NULL);
    } else {
        json_t *shown = with_network_names(cli, rows);
        output_table(stdout, &cli->out, shown,
                     cli->out.columns != NULL ? volume_columns_known : volume_columns, NULL);
        json_decref(shown);
    }
Done:
    json_decref(rows);
    free(query);
    volume_opts_dispose(&o);
    return st;
}

/* The order `get` shows a volume's fields in: who it is, what it is, where it is
 * served, then its bookkeeping; fields not named here follow as the record has them. */
static const char *const field_order[] = {
    "uuid",
    "name",
    "owner_uuid",
    "state",
    "size",
    "type",
    "networks",
    "refs",
    "tags",
    "filesystem_path",
    "share_state",
    "share_endpoint",
    "share_probed_at",
    "error_since",
    "vm_uuid",
    "server_uuid",
    "export_path",
    "create_timestamp",
    "created_by_job",
    "job_uuid",
    "billing_id",
    "version",
    NULL,
};

/* A copy of `vol` with its fields in field_order, without "snapshots" (shown as a
 * table) and "id" (its uuid again). */
static json_t *fields_in_order(const json_t *vol)
{
    json_t *out = json_object();
    for (const char *const *k = field_order; *k != NULL; k++) {
        json_t *v = json_object_get(vol, *k);
        if (v != NULL)
            json_object_set(out, *k, v);
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)vol, key, v)
    {
        if (json_object_get(out, key) == NULL && strcmp(key, "snapshots") != 0 &&
            strcmp(key, "id") != 0)
            json_object_set(out, key, v);
    }
    return out;
}

static cli_status_t volume_get(cli_t *cli, int argc, char **argv)
{
    static const char *const names[] = {VOL_WHAT};
    volume_opts_t o = {0};
    char *args[1];
    json_t *vol = NULL;
    cli_status_t st = volume_parse(cli, argc, argv, "", volume_owner_long, names, 1, &o, args);
    if (st == CLI_OK)
        st = volume_find(cli, volume_owner(&o), args[0], &vol);
    if (st != CLI_OK)
        goto Done;
    if (output_wants_generic(&cli->out)) {
        output_object(stdout, &cli->out, vol, volume_columns_known);
        goto Done;
    }
    /* The fields (the size in GiB and MiB, the networks by name), then the snapshots
     * as a table of their own. */
    json_t *rows = json_pack("[O]", vol);
    json_t *named = with_network_names(cli, rows);
    json_t *fields = fields_in_order(vol);
    json_object_set(fields, "networks", json_object_get(json_array_get(named, 0), "network_names"));
    char size[64];
    volume_cell_size(vol, size, sizeof size);
    const json_t *mib = json_object_get(vol, "size");
    if (json_is_integer(mib))
        json_object_set_new(
            fields, "size",
            json_sprintf("%s (%lld MiB)", size, (long long)json_integer_value(mib)));
    output_fields(stdout, fields);
    const json_t *snapshots = json_object_get(vol, "snapshots");
    if (json_array_size(snapshots) > 0) {
        output_opts_t plain = {0};
        printf("\nsnapshots:\n");
        output_table(stdout, &plain, snapshots, volume_snapshot_columns, NULL);
    }
    json_decref(fields);
    json_decref(named);
    json_decref(rows);
Done:
    json_decref(vol);
    volume_opts_dispose(&o);
    return st;
}

static cli_status_t volume_sizes(cli_t *cli, int argc, char **argv)
{
    volume_opts_t o = {0};
    json_t *rows = NULL;
    cli_status_t st = volume_parse(cli, argc, argv, "", NULL, NULL, 0, &o, NULL);
    if (st == CLI_OK)
        st = dc_list(cli, "/volumesizes", NULL, &rows);
    if (st == CLI_OK)
        output_table(stdout, &cli->out, rows, size_columns, NULL);
    json_decref(rows);
    volume_opts_dispose(&o);
    return st;
}

/* ---- delete, rename, attach-network, detach-network ---------------------------- */

static const struct option delete_long[] = {
    {"force", no_argument, NULL, 'f'},
    {"owner", required_argument, NULL, VOLUME_OPT_OWNER},
    {"watch", no_argument, NULL, 'w'},
    {NULL, 0, NULL, 0},
};

static cli_status_t volume_delete(cli_t *cli, int argc, char **argv)
{
    static const char *const names[] = {VOL_WHAT};
    volume_opts_t o = {0};
    char *args[1];
    json_t *vol = NULL, *params = NULL;
    cli_status_t st = volume_parse(cli, argc, argv, "fw", delete_long, names, 1, &o, args);
    if (st == CLI_OK)
        st = volume_find(cli, volume_owner(&o), args[0], &vol);
    if (st == CLI_OK) {
        params = o.force ? json_pack("{s:b}", "force", 1) : NULL;
        st =
            volume_submit(cli, vol, volume_owner(&o), "volume-delete", params, o.watch, "Deleting");
    }
    json_decref(params);
    json_decref(vol);
    volume_opts_dispose(&o);
    return st;
}

static cli_status_t volume_rename(cli_t *cli, int argc, char **argv)
{
    static const char *const names[] = {VOL_WHAT, "NEWNAME"};
    volume_opts_t o = {0};
    char *args[2];
    json_t *vol = NULL;
    cli_status_t st = volume_parse(cli, argc, argv, "w", volume_job_long, names, 2, &o, args);
    const char *fault = st == CLI_OK ? volume_name_fault(args[1]) : NULL;
    if (fault != NULL)
        st = cli_usage(cli,
                       "NEWNAME \"%s\": a volume name %s (2-256 of A-Za-z0-9_.-, starting with a "
                       "letter or digit)",
                       args[1], fault);
    if (st == CLI_OK)
        st = volume_find(cli, volume_owner(&o), args[0], &vol);
    if (st == CLI_OK) {
        char *doing = xasprintf("Renaming to %s", args[1]);
        st = volume_submit_param(cli, vol, volume_owner(&o), "volume-update", "name", args[1],
                                 o.watch, doing);
        free(doing);
    }
    json_decref(vol);
    volume_opts_dispose(&o);
    return st;
}

/* `tern volume attach-network|detach-network VOL NETWORK`: a job of `workflow`. */
static cli_status_t network_job(cli_t *cli, int argc, char **argv, const char *workflow,
                                const char *verb, const char *preposition)
{
    static const char *const names[] = {VOL_WHAT, "NETWORK (its name or uuid)"};
    volume_opts_t o = {0};
    char *args[2];
    json_t *vol = NULL;
    char net[37];
    cli_status_t st = volume_parse(cli, argc, argv, "w", volume_job_long, names, 2, &o, args);
    if (st == CLI_OK)
        st = volume_find(cli, volume_owner(&o), args[0], &vol);
    if (st == CLI_OK)
        st = dc_find_uuid(cli, "/networks", "name", "network", args[1], net);
    if (st == CLI_OK) {
        char *what = xasprintf("%s network %s %s", verb, args[1], preposition);
        st = volume_submit_param(cli, vol, volume_owner(&o), workflow, "network_uuid", net, o.watch,
                                 what);
        free(what);
    }
    json_decref(vol);
    volume_opts_dispose(&o);
    return st;
}

static cli_status_t volume_attach_network(cli_t *cli, int argc, char **argv)
{
    return network_job(cli, argc, argv, "volume-attach-network", "Attaching", "to");
}

static cli_status_t volume_detach_network(cli_t *cli, int argc, char **argv)
{
    return network_job(cli, argc, argv, "volume-detach-network", "Detaching", "from");
}

#define OWNER_HELP                                                                                 \
    "  --owner U        act for owner U (default: $TERN_OWNER_UUID, else " DC_DEFAULT_OWNER ")\n"
#define VOL_HELP "  VOL              the volume's name, uuid, or 8 or more characters of its uuid\n"
#define WATCH_HELP                                                                                 \
    "  -w, --watch      follow the job to its end (exit status 0 when it succeeded, 1\n"           \
    "                   when it failed)\n"

const cli_command_t cmd_volume_commands[] = {
    {"volume", "create", volume_create,
     "volume create [-n NAME] [-s SIZE] [-N NETWORK]... [--tag K=V]... [--owner U] [-w]",
     "Create a shared volume (a job of volume-create).",
     "  -n, --name NAME  2-256 of A-Za-z0-9_.-, starting with a letter or digit, unique\n"
     "                   among the owner's volumes (default: vol-<8 hex>)\n"
     "  -s, --size SIZE  NG or Ng, one of `tern volume sizes` (default: the smallest,\n"
     "                   10G)\n"
     "  -N, --network NETWORK\n"
     "                   a fabric network of the owner, by name or uuid; repeat for more\n"
     "                   (default: the owner's first fabric network)\n"
     "  --tag K=V        a tag (repeat); values are strings\n" OWNER_HELP WATCH_HELP
     "\nThe new volume's uuid is drawn here and the job's target is\n"
     "/volume-create-<uuid>. A SIZE of another form (10, 10M, 1T, 10GB, 0G, 1.5G) or not\n"
     "offered, and a bad NAME, are refused before anything is sent (exit 2); a name\n"
     "taken or a network that is not the owner's fabric network are the admission\n"
     "check's refusals, with their code (exit 3).\n"},
    {"volume", "list", volume_list, "volume list [--state S] [--name GLOB] [--owner U]",
     "List the owner's volumes.",
     "  --state S        creating, ready, failed, deleting or rolling_back\n"
     "  --name GLOB      that name, or with a * before and/or after it (data*, *db*)\n" OWNER_HELP
     "\nColumns: NAME STATE SIZE NETWORKS REFS CREATED (SIZE in GiB, REFS the number of\n"
     "instances that mount it); -o also knows SHORTID UUID TYPE SHARE FILESYSTEM OWNER\n"
     "(or any field: -o uuid,share_state), -j prints the records.\n"},
    {"volume", "get", volume_get, "volume get VOL [--owner U]",
     "Show one volume: its record and snapshots.", VOL_HELP OWNER_HELP},
    {"volume", "delete", volume_delete, "volume delete VOL [-f|--force] [--owner U] [-w]",
     "Delete a volume and its storage instance (a job of volume-delete).",
     VOL_HELP "  -f, --force      delete it even while instances mount it\n" OWNER_HELP WATCH_HELP
              "\nA volume in use (mounted, or reserved by a provision) is refused without\n"
              "--force: VolumeInUse names the instances (exit 3).\n"},
    {"volume", "sizes", volume_sizes, "volume sizes",
     "List the sizes a volume may have: SIZE (GiB) MIB TYPE.", ""},
    {"volume", "rename", volume_rename, "volume rename VOL NEWNAME [--owner U] [-w]",
     "Rename a volume (a job of volume-update).",
     VOL_HELP "  NEWNAME          a free name of the owner, by the rule of create's -n\n" OWNER_HELP
         WATCH_HELP "\nA volume in use may not be renamed (VolumeInUse, exit 3).\n"},
    {"volume", "attach-network", volume_attach_network,
     "volume attach-network VOL NETWORK [--owner U] [-w]",
     "Serve a volume on one more fabric network (a job of volume-attach-network).",
     VOL_HELP
     "  NETWORK          a fabric network of the owner, by name or uuid\n" OWNER_HELP WATCH_HELP},
    {"volume", "detach-network", volume_detach_network,
     "volume detach-network VOL NETWORK [--owner U] [-w]",
     "Stop serving a volume on a network (a job of volume-detach-network).",
     VOL_HELP
     "  NETWORK          one of the volume's networks, by name or uuid\n" OWNER_HELP WATCH_HELP},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};
