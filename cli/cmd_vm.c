/*
 * cmd_vm.c -- `tern vm list|get|create|start|stop|delete|update`: the datacenter's instances.
 *
 * list and get read the dc plugin's views (GET /vms, /vms/:uuid); create, start, stop
 * and delete create jobs of the workflows provision, vm-start, vm-stop and vm-delete
 * with VMAPI's target ("/provision-<vm_uuid>", "/start-<vm_uuid>", ...), which their
 * admission checks require, so one action cannot be queued twice for one instance.
 * Names are resolved here, before anything is sent: a server by hostname, an image by
 * name (its newest version, or NAME@VERSION), a network by name, an instance by alias;
 * a package is sent as given (the provision workflow takes a name or a uuid).
 */
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "base/alloc.h"
#include "base/ident.h"
#include "cli.h"
#include "dc_api.h"
#include "volume_spec.h"

enum {
    OPT_STATE = 0x4000,
    OPT_SERVER,
    OPT_OWNER,
    OPT_ALIAS,
    OPT_PACKAGE,
    OPT_IMAGE,
    OPT_NETWORK,
    OPT_METADATA,
    OPT_UUID,
    OPT_NO_AUTOBOOT,
    OPT_WATCH,
    OPT_DISKS,
    OPT_VOLUME,
};

/* ---- columns ------------------------------------------------------------------- */

/* The address of the primary NIC, as `triton instance list` shows PRIMARYIP. */
static void cell_primary_ip(const json_t *row, char *buf, size_t n)
{
    size_t i;
    const json_t *nic;
    json_array_foreach(json_object_get(row, "nics"), i, nic)
    {
        if (json_is_true(json_object_get(nic, "primary"))) {
            output_cell_text(json_object_get(nic, "ip"), buf, n);
            return;
        }
    }
    snprintf(buf, n, "-");
}

/* The server's hostname when the list could add it, else the short uuid. */
static void cell_server(const json_t *row, char *buf, size_t n)
{
    const char *host = json_string_value(json_object_get(row, "server_hostname"));
    const char *u = json_string_value(json_object_get(row, "server_uuid"));
    if (host != NULL)
        snprintf(buf, n, "%s", host);
    else if (u != NULL)
        snprintf(buf, n, "%.8s", u);
    else
        snprintf(buf, n, "-");
}

/* Flags as `triton instance list` shows them: M while a migration holds the instance
 * (its record's "migrating"), "-" when none applies. */
static void cell_flags(const json_t *row, char *buf, size_t n)
{
    snprintf(buf, n, "%s", json_is_true(json_object_get(row, "migrating")) ? "M" : "-");
}

static const output_column_t vm_columns[] = {
    {"SHORTID", NULL, dc_cell_shortid},
    {"ALIAS", "alias", NULL},
    {"STATE", "state", NULL},
    {"FLAGS", NULL, cell_flags},
    {"SERVER", NULL, cell_server},
    {"RAM", "ram", NULL},
    {"PRIMARYIP", NULL, cell_primary_ip},
    {"CREATED", "create_timestamp", NULL},
    {NULL, NULL, NULL},
};

static const output_column_t nic_columns[] = {
    {"MAC", "mac", NULL},         {"IP", "ip", NULL},
    {"NETMASK", "netmask", NULL}, {"GATEWAY", "gateway", NULL},
    {"VLAN", "vlan_id", NULL},    {"PRIMARY", "primary", NULL},
    {"STATE", "state", NULL},     {"NETWORK", "network_uuid", NULL},
    {NULL, NULL, NULL},
};

/* The volumes an instance mounts (its record's "volumes"). */
static const output_column_t volume_columns[] = {
    {"NAME", "name", NULL}, {"MOUNTPOINT", "mountpoint", NULL}, {"MODE", "mode", NULL},
    {"TYPE", "type", NULL}, {"VOLUME", "volume_uuid", NULL},    {NULL, NULL, NULL},
};

/* The entries of internal_metadata["sdc:volumes"], what the instance's agent mounts. */
static const output_column_t sdc_volume_columns[] = {
    {"MOUNTPOINT", "mountpoint", NULL},
    {"NAME", "name", NULL},
    {"NFSVOLUME", "nfsvolume", NULL},
    {"MODE", "mode", NULL},
    {"TYPE", "type", NULL},
    {NULL, NULL, NULL},
};

/* ---- options ------------------------------------------------------------------- */

typedef struct vm_opts {
    const char *state, *server, *owner, *alias, *package, *image, *uuid;
    json_t *networks; /* the --network values, in order (ours) */
    json_t *metadata; /* --metadata k=v (ours) */
    json_t *disks;    /* --disks, an array (ours) or NULL */
    json_t *volumes;  /* the --volume values, in order (ours) */
    bool no_autoboot, watch;
} vm_opts_t;

/* --disks JSON or --disks @FILE: the provision's "disks", a JSON array (its items and
 * sizes are the provision's to check, which names the faults with their JSON paths). */
static cli_status_t disks_option(cli_t *cli, const char *arg, json_t **disks)
{
    char *text = NULL, err[512];
    size_t len;
    if (arg[0] == '@') {
        if (cli_read_file(arg + 1, &text, &len, err, sizeof err) != 0)
            return cli_usage(cli, "--disks: %s", err);
    } else {
        text = xstrdup(arg);
    }
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (v == NULL)
        return cli_usage(cli, "--disks: line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
    if (!json_is_array(v)) {
        json_decref(v);
        return cli_usage(cli, "--disks: expected a JSON array of disks, like "
                              "'[{}, {\"size\": 20480}]'");
    }
    json_decref(*disks);
    *disks = v;
    return CLI_OK;
}

static cli_status_t on_vm_opt(cli_t *cli, void *data, int c, const char *arg)
{
    vm_opts_t *o = data;
    switch (c) {
    case OPT_STATE:
        o->state = arg;
        return CLI_OK;
    case OPT_SERVER:
        o->server = arg;
        return CLI_OK;
    case OPT_OWNER:
        if (!uuid_valid(arg))
            return cli_usage(cli, "--owner \"%s\": expected a uuid", arg);
        o->owner = arg;
        return CLI_OK;
    case OPT_ALIAS:
        o->alias = arg;
        return CLI_OK;
    case OPT_PACKAGE:
        o->package = arg;
        return CLI_OK;
    case OPT_IMAGE:
        o->image = arg;
        return CLI_OK;
    case OPT_UUID:
        if (!uuid_valid(arg))
            return cli_usage(cli, "--uuid \"%s\": expected a uuid", arg);
        o->uuid = arg;
        return CLI_OK;
    case OPT_NETWORK:
        if (arg[0] == '\0' || arg[0] == '=')
            return cli_usage(cli, "--network \"%s\": expected NETWORK or NETWORK=IP", arg);
        json_array_append_new(o->networks, json_string(arg));
        return CLI_OK;
    case 'm':
    case OPT_METADATA: {
        const char *eq = strchr(arg, '=');
        if (eq == NULL || eq == arg)
            return cli_usage(cli, "--metadata \"%s\": expected KEY=VALUE", arg);
        char *key = xstrndup(arg, (size_t)(eq - arg));
        json_object_set_new(o->metadata, key, json_string(eq + 1));
        free(key);
        return CLI_OK;
    }
    case OPT_DISKS:
        return disks_option(cli, arg, &o->disks);
    case 'v':
    case OPT_VOLUME: {
        json_t *spec = json_string(arg);
        if (spec == NULL)
            return cli_usage(cli, "--volume \"%s\": not UTF-8", arg);
        json_array_append_new(o->volumes, spec);
        return CLI_OK;
    }
    case OPT_NO_AUTOBOOT:
        o->no_autoboot = true;
        return CLI_OK;
    case 'w':
    case OPT_WATCH:
        o->watch = true;
        return CLI_OK;
    default:
        return cli_usage(cli, "unknown option");
    }
}

static void vm_opts_dispose(vm_opts_t *o)
{
    json_decref(o->networks);
    json_decref(o->metadata);
    json_decref(o->disks);
    json_decref(o->volumes);
}

/* ---- list ---------------------------------------------------------------------- */

/* Adds "server_hostname" to each row (a copy) for the SERVER column. */
static json_t *with_hostnames(cli_t *cli, const json_t *rows)
{
    json_t *copy = json_deep_copy(rows);
    json_t *servers;
    if (dc_list(cli, "/servers", NULL, &servers) != CLI_OK) {
        memset(&cli->err, 0, sizeof cli->err); /* the short uuids stand in */
        return copy;
    }
    size_t i, j;
    json_t *row;
    const json_t *s;
    json_array_foreach(copy, i, row)
    {
        const char *u = json_string_value(json_object_get(row, "server_uuid"));
        json_array_foreach(servers, j, s)
        {
            const char *su = json_string_value(json_object_get(s, "uuid"));
            if (u != NULL && su != NULL && strcmp(u, su) == 0) {
                json_object_set(row, "server_hostname", json_object_get(s, "hostname"));
                break;
            }
        }
    }
    json_decref(servers);
    return copy;
}

static const struct option list_long[] = {
    {"state", required_argument, NULL, OPT_STATE},
    {"server", required_argument, NULL, OPT_SERVER},
    {"owner", required_argument, NULL, OPT_OWNER},
    {"alias", required_argument, NULL, OPT_ALIAS},
    {NULL, 0, NULL, 0},
};

static cli_status_t vm_list(cli_t *cli, int argc, char **argv)
{
    vm_opts_t o = {.networks = json_array(), .metadata = json_object(), .volumes = json_array()};
    int first;
    cli_status_t st;
    char *query = NULL;
    json_t *rows = NULL;
    if (!args_parse(cli, argc, argv, "", list_long, on_vm_opt, &o, &first, &st))
        goto Done;
    if (first < argc) {
        st = cli_usage(cli, "unexpected argument \"%s\"", argv[first]);
        goto Done;
    }
    if (o.server != NULL) {
        char uuid[37];
        if ((st = dc_find_uuid(cli, "/servers", "hostname", "server", o.server, uuid)) != CLI_OK)
            goto Done;
        dc_query_add(cli, &query, "server_uuid", uuid);
    }
    if (o.state != NULL)
        dc_query_add(cli, &query, "state", o.state);
    if (o.owner != NULL)
        dc_query_add(cli, &query, "owner_uuid", o.owner);
    if (o.alias != NULL)
        dc_query_add(cli, &query, "alias", o.alias);
    if ((st = dc_list(cli, "/vms", query, &rows)) != CLI_OK)
        goto Done;
    if (cli->out.json) {
        output_table(stdout, &cli->out, rows, vm_columns, NULL);
    } else {
        json_t *shown = with_hostnames(cli, rows);
        output_table(stdout, &cli->out, shown, vm_columns, NULL);
        json_decref(shown);
    }
Done:
    json_decref(rows);
    free(query);
    vm_opts_dispose(&o);
    return st;
}

/* ---- get ----------------------------------------------------------------------- */

/* Takes internal_metadata["sdc:volumes"] (the JSON text of an array) out of `fields`
 * (dropping internal_metadata when nothing else is left of it) and returns it parsed,
 * a new array. NULL when it is absent, or is not an array's text: then it stays in
 * `fields`, shown as it is. */
static json_t *sdc_volumes_of(json_t *fields)
{
    json_t *meta = json_object_get(fields, "internal_metadata");
    const json_t *text = json_object_get(meta, "sdc:volumes");
    if (text == NULL)
        return NULL;
    json_t *parsed = json_is_string(text) ? json_loads(json_string_value(text), 0, NULL) : NULL;
    if (!json_is_array(parsed)) {
        json_decref(parsed);
        return NULL;
    }
    json_object_del(meta, "sdc:volumes");
    if (json_object_size(meta) == 0)
        json_object_del(fields, "internal_metadata");
    return parsed;
}

static cli_status_t vm_get(cli_t *cli, int argc, char **argv)
{
    vm_opts_t o = {.networks = json_array(), .metadata = json_object(), .volumes = json_array()};
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, "", NULL, on_vm_opt, &o, &first, &st))
        goto Done;
    if (first >= argc || first + 1 < argc) {
        st = first >= argc ? cli_usage(cli, "missing VM (its uuid or alias)")
                           : cli_usage(cli, "unexpected argument \"%s\"", argv[first + 1]);
        goto Done;
    }
    json_t *vm;
    if ((st = dc_find_vm(cli, argv[first], &vm)) != CLI_OK)
        goto Done;
    if (output_wants_generic(&cli->out)) {
        output_object(stdout, &cli->out, vm, vm_columns);
    } else {
        /* The fields, then the disks and NICs as tables of their own. */
        json_t *fields = json_deep_copy(vm);
        json_object_del(fields, "disks");
        json_object_del(fields, "nics");
        json_object_del(fields, "snapshots");
        json_object_del(fields, "volumes");
        json_t *sdc_volumes = sdc_volumes_of(fields);
        if (json_object_get(fields, "flexible") == NULL)
            json_object_set_new(fields, "flexible", json_false()); /* records made before it */
        output_fields(stdout, fields);
        json_decref(fields);
        output_opts_t plain = {0};
        const json_t *nics = json_object_get(vm, "nics");
        const json_t *snapshots = json_object_get(vm, "snapshots");
        json_t *disks = dc_disks_by_slot(vm);
        if (json_array_size(disks) > 0) {
            printf("\ndisks:\n");
            output_table(stdout, &plain, disks, dc_disk_columns_wide, NULL);
        }
        json_decref(disks);
        if (json_array_size(snapshots) > 0) {
            printf("\nsnapshots:\n");
            output_table(stdout, &plain, snapshots, dc_snapshot_columns, NULL);
        }
        if (json_array_size(nics) > 0) {
            printf("\nnics:\n");
            output_table(stdout, &plain, nics, nic_columns, NULL);
        }
        const json_t *volumes = json_object_get(vm, "volumes");
        if (json_array_size(volumes) > 0) {
            printf("\nvolumes:\n");
            output_table(stdout, &plain, volumes, volume_columns, NULL);
        }
        if (json_is_array(sdc_volumes)) {
            printf("\nsdc:volumes:\n");
            output_table(stdout, &plain, sdc_volumes, sdc_volume_columns, NULL);
        }
        json_decref(sdc_volumes);
    }
    json_decref(vm);
Done:
    vm_opts_dispose(&o);
    return st;
}

/* ---- create -------------------------------------------------------------------- */

/* The uuid of the image `ref` names: a uuid, NAME@VERSION, or NAME (its newest version,
 * versions compared as `sort -V` does). */
static cli_status_t find_image(cli_t *cli, const char *ref, char uuid[37])
{
    if (uuid_valid(ref))
        return dc_find_uuid(cli, "/images", "name", "image", ref, uuid);
    const char *at = strchr(ref, '@');
    char *name = at != NULL ? xstrndup(ref, (size_t)(at - ref)) : xstrdup(ref);
    json_t *rows;
    cli_status_t st = dc_list(cli, "/images", NULL, &rows);
    const json_t *best = NULL;
    size_t i;
    const json_t *img;
    if (st == CLI_OK) {
        json_array_foreach(rows, i, img)
        {
            const char *n = json_string_value(json_object_get(img, "name"));
            const char *v = json_string_value(json_object_get(img, "version"));
            if (n == NULL || v == NULL || strcmp(n, name) != 0)
                continue;
            if (at != NULL
                    ? strcmp(v, at + 1) == 0
                    : best == NULL ||
                          strverscmp(v, json_string_value(json_object_get(best, "version"))) > 0)
                best = img;
        }
        const char *u = json_string_value(json_object_get(best, "uuid"));
        if (u == NULL || strlen(u) != 36)
            st = cli_fail(cli, CLI_API, "ResourceNotFound", "no image \"%s\"", ref);
        else
            memcpy(uuid, u, 37);
    }
    json_decref(rows);
    free(name);
    return st;
}

/* The provision's "networks": each --network NETWORK[=IP] as {"uuid", "primary", "ip"},
 * the first one primary. */
static cli_status_t networks_param(cli_t *cli, const json_t *given, json_t **out)
{
    json_t *nets = json_array();
    size_t i;
    const json_t *g;
    json_array_foreach(given, i, g)
    {
        const char *s = json_string_value(g);
        const char *eq = strchr(s, '=');
        char *ref = eq != NULL ? xstrndup(s, (size_t)(eq - s)) : xstrdup(s);
        char uuid[37];
        cli_status_t st = dc_find_uuid(cli, "/networks", "name", "network", ref, uuid);
        free(ref);
        if (st != CLI_OK) {
            json_decref(nets);
            return st;
        }
        json_t *n = json_pack("{s:s, s:b}", "uuid", uuid, "primary", i == 0);
        if (eq != NULL)
            json_object_set_new(n, "ip", json_string(eq + 1));
        json_array_append_new(nets, n);
    }
    *out = nets;
    return CLI_OK;
}

static const struct option create_long[] = {
    {"package", required_argument, NULL, OPT_PACKAGE},
    {"image", required_argument, NULL, OPT_IMAGE},
    {"network", required_argument, NULL, OPT_NETWORK},
    {"server", required_argument, NULL, OPT_SERVER},
    {"alias", required_argument, NULL, OPT_ALIAS},
    {"metadata", required_argument, NULL, OPT_METADATA},
    {"uuid", required_argument, NULL, OPT_UUID},
    {"owner", required_argument, NULL, OPT_OWNER},
    {"no-autoboot", no_argument, NULL, OPT_NO_AUTOBOOT},
    {"disks", required_argument, NULL, OPT_DISKS},
    {"volume", required_argument, NULL, OPT_VOLUME},
    {"watch", no_argument, NULL, OPT_WATCH},
    {NULL, 0, NULL, 0},
};

static cli_status_t vm_create(cli_t *cli, int argc, char **argv)
{
    vm_opts_t o = {.networks = json_array(), .metadata = json_object(), .volumes = json_array()};
    int first;
    cli_status_t st;
    json_t *params = NULL, *volumes = NULL;
    char err[1536];
    if (!args_parse(cli, argc, argv, "m:v:w", create_long, on_vm_opt, &o, &first, &st))
        goto Done;
    if (first < argc) {
        st = cli_usage(cli, "unexpected argument \"%s\"", argv[first]);
        goto Done;
    }
    if (o.package == NULL || o.image == NULL || json_array_size(o.networks) == 0) {
        st = cli_usage(cli, "missing %s",
                       o.package == NULL ? "--package"
                       : o.image == NULL ? "--image"
                                         : "--network");
        goto Done;
    }
    if (json_array_size(o.volumes) > 0 &&
        !volume_spec_parse(o.volumes, &volumes, err, sizeof err)) {
        st = cli_usage(cli, "%s", err);
        goto Done;
    }
    char vm_uuid[37], image[37];
    if (o.uuid != NULL)
        snprintf(vm_uuid, sizeof vm_uuid, "%s", o.uuid);
    else
        uuid_v4(vm_uuid);
    const char *owner = dc_owner(o.owner);
    if ((st = find_image(cli, o.image, image)) != CLI_OK)
        goto Done;
    json_t *nets;
    if ((st = networks_param(cli, o.networks, &nets)) != CLI_OK)
        goto Done;
    params = json_pack("{s:s, s:s, s:s, s:s, s:o, s:O}", "vm_uuid", vm_uuid, "owner_uuid", owner,
                       "package", o.package, "image_uuid", image, "networks", nets,
                       "customer_metadata", o.metadata);
    if (o.alias != NULL)
        json_object_set_new(params, "alias", json_string(o.alias));
    if (o.no_autoboot)
        json_object_set_new(params, "autoboot", json_false());
    if (o.disks != NULL)
        json_object_set(params, "disks", o.disks);
    if (volumes != NULL)
        json_object_set(params, "volumes", volumes);
    if (o.server != NULL) {
        char server[37];
        if ((st = dc_find_uuid(cli, "/servers", "hostname", "server", o.server, server)) != CLI_OK)
            goto Done;
        json_object_set_new(params, "server_uuid", json_string(server));
    }
    char *target = xasprintf("/provision-%s", vm_uuid);
    char *what =
        xasprintf("Creating instance %s (%s)", o.alias != NULL ? o.alias : vm_uuid, vm_uuid);
    st = dc_submit(cli, "provision", target, params, o.watch, what);
    free(what);
    free(target);
Done:
    json_decref(volumes);
    json_decref(params);
    vm_opts_dispose(&o);
    return st;
}

/* ---- start, stop, delete ------------------------------------------------------- */

/* `tern vm <verb> VM`: a job of `workflow` with target "/<action>-<vm_uuid>". */
static cli_status_t vm_action(cli_t *cli, int argc, char **argv, const char *workflow,
                              const char *action, const char *doing)
{
    bool watch = false;
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, "w", dc_watch_long, dc_watch_option, &watch, &first, &st))
        return st;
    if (first >= argc)
        return cli_usage(cli, "missing VM (its uuid or alias)");
    if (first + 1 < argc)
        return cli_usage(cli, "unexpected argument \"%s\"", argv[first + 1]);
    json_t *vm;
    if ((st = dc_find_vm(cli, argv[first], &vm)) != CLI_OK)
        return st;
    st = dc_submit_vm(cli, vm, workflow, action, NULL, watch, doing);
    json_decref(vm);
    return st;
}

static cli_status_t vm_start(cli_t *cli, int argc, char **argv)
{
    return vm_action(cli, argc, argv, "vm-start", "start", "Starting");
}

static cli_status_t vm_stop(cli_t *cli, int argc, char **argv)
{
    return vm_action(cli, argc, argv, "vm-stop", "stop", "Stopping");
}

static cli_status_t vm_delete(cli_t *cli, int argc, char **argv)
{
    return vm_action(cli, argc, argv, "vm-delete", "delete", "Deleting");
}

/* ---- update -------------------------------------------------------------------- */

/* A tag's value as `tern vm update` reads it: a number, true or false keeps its JSON
 * type (tags are strings, numbers or booleans), anything else is the string as given.
 * A new reference. */
static json_t *tag_value(const char *text)
{
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    if (v != NULL && (json_is_number(v) || json_is_boolean(v)))
        return v;
    json_decref(v);
    return json_string(text);
}

/* The params of one `tern vm update` assignment, set into `params` (modified). */
static cli_status_t update_assignment(cli_t *cli, json_t *params, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (eq == NULL || eq == arg)
        return cli_usage(cli, "\"%s\": expected alias=A, tag.K=V, tags=JSON or metadata=JSON", arg);
    size_t klen = (size_t)(eq - arg);
    const char *value = eq + 1;
    if (klen == 5 && strncmp(arg, "alias", 5) == 0) {
        json_object_set_new(params, "alias", json_string(value));
        return CLI_OK;
    }
    if (klen > 4 && strncmp(arg, "tag.", 4) == 0) {
        char key[256];
        if (klen - 4 >= sizeof key)
            return cli_usage(cli, "\"%s\": a tag name of at most %zu characters", arg,
                             sizeof key - 1);
        memcpy(key, arg + 4, klen - 4);
        key[klen - 4] = '\0';
        json_t *add = json_object_get(params, "add_tags");
        if (add == NULL) {
            add = json_object();
            json_object_set_new(params, "add_tags", add);
        }
        json_object_set_new(add, key, tag_value(value));
        return CLI_OK;
    }
    if ((klen == 4 && strncmp(arg, "tags", 4) == 0) ||
        (klen == 8 && strncmp(arg, "metadata", 8) == 0)) {
        json_error_t jerr;
        json_t *obj = json_loads(value, 0, &jerr);
        if (!json_is_object(obj)) {
            json_decref(obj);
            return cli_usage(cli, "\"%.*s\": expected a JSON object", (int)klen, arg);
        }
        json_object_set_new(params, klen == 4 ? "tags" : "customer_metadata", obj);
        return CLI_OK;
    }
    return cli_usage(cli, "\"%.*s\": expected alias, tag.K, tags or metadata", (int)klen, arg);
}

static cli_status_t vm_update(cli_t *cli, int argc, char **argv)
{
    bool watch = false;
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, "w", dc_watch_long, dc_watch_option, &watch, &first, &st))
        return st;
    if (first >= argc)
        return cli_usage(cli, "missing VM (its uuid or alias)");
    if (first + 1 >= argc)
        return cli_usage(cli, "nothing to update: give alias=A, tag.K=V, tags=JSON or "
                              "metadata=JSON");
    json_t *params = json_object();
    for (int i = first + 1; i < argc; i++) {
        if ((st = update_assignment(cli, params, argv[i])) != CLI_OK) {
            json_decref(params);
            return st;
        }
    }
    if (json_object_get(params, "tags") != NULL && json_object_get(params, "add_tags") != NULL) {
        json_decref(params);
        return cli_usage(cli, "tags=JSON replaces every tag: give it or tag.K=V, not both");
    }
    json_t *vm;
    if ((st = dc_find_vm(cli, argv[first], &vm)) != CLI_OK) {
        json_decref(params);
        return st;
    }
    st = dc_submit_vm(cli, vm, "vm-update", "update", params, watch, "Updating");
    json_decref(vm);
    json_decref(params);
    return st;
}

#define ACTION_HELP                                                                                \
    "  VM           the instance's uuid or alias\n"                                                \
    "  -w, --watch  follow the job to its end (exit status 0 when it succeeded, 1 when\n"          \
    "               it failed)\n"                                                                  \
    "\nWithout --watch, prints the job's uuid; `tern job watch JOB` follows it later.\n"

const cli_command_t cmd_vm_commands[] = {
    {"vm", "list", vm_list, "vm list [--state S] [--server SERVER] [--owner UUID] [--alias A]",
     "List the instances (destroyed ones only with --state destroyed).",
     "  --state S          provisioning, running, stopped, failed or destroyed\n"
     "  --server SERVER    on that server (uuid or hostname)\n"
     "  --owner UUID       of that owner\n"
     "  --alias A          with that alias\n"
     "\nColumns: SHORTID ALIAS STATE FLAGS SERVER RAM PRIMARYIP CREATED (FLAGS: M while\n"
     "the instance is migrating); -o chooses fields (-o uuid,state,server_uuid), -j prints\n"
     "the records.\n"},
    {"vm", "get", vm_get, "vm get VM",
     "Show one instance (by uuid or alias): its record, disks, snapshots, NICs, volumes.",
     "  VM   the instance's uuid or alias\n"
     "\nA flexible disk instance shows flexible true, flexible_disk_size (the MiB its\n"
     "disks share), free_space (what is left of it after the disks and their snapshots)\n"
     "and, while a disk job runs, disk_change. Disks: ID PCI_SLOT SIZE BOOT SNAPSHOT_SIZE\n"
     "IMAGE PATH, sizes in MiB. An instance that mounts shared volumes shows them\n"
     "(volumes: NAME MOUNTPOINT MODE TYPE VOLUME) and what its agent mounts, the\n"
     "internal_metadata sdc:volumes (MOUNTPOINT NAME NFSVOLUME MODE TYPE).\n"},
    {"vm", "create", vm_create,
     "vm create --package P --image I --network N[=IP]... [--server S] [--alias A] "
     "[--metadata K=V]... [--uuid U] [--owner U] [--no-autoboot] [--disks JSON|@FILE] "
     "[-v NAME:/MOUNT[:ro|:rw]]... [--watch]",
     "Provision an instance (a job of the workflow provision).",
     "  --package P        the package, by name or uuid (lab-small)\n"
     "  --image I          the image: uuid, NAME (its newest version) or NAME@VERSION\n"
     "  --network N[=IP]   a network by name or uuid, with the address to take or the\n"
     "                     lowest free one; repeat for more NICs, the first is primary\n"
     "  --server S         pin the instance to a server (uuid or hostname); otherwise the\n"
     "                     placement rule chooses\n"
     "  --alias A          the instance's alias\n"
     "  -m, --metadata K=V customer metadata (repeat); lab:workload=writer runs the\n"
     "                     writer workload instead of idle\n"
     "  --uuid U           the instance's uuid (default: a new random one)\n"
     "  --owner U          its owner (default: $TERN_OWNER_UUID, else " DC_DEFAULT_OWNER ")\n"
     "  --no-autoboot      create it stopped\n"
     "  --disks JSON|@FILE the disks of a flexible disk package's instance, the boot\n"
     "                     disk first: a JSON array of 1-8 of {}, {\"size\": MiB} or\n"
     "                     {\"size\": \"remaining\"} (default: the package's layout)\n"
     "  -v, --volume NAME:/MOUNT[:ro|:rw]\n"
     "                     mount the owner's shared volume NAME at /MOUNT, read-write\n"
     "                     unless :ro (repeat; a mountpoint once); a volume that does\n"
     "                     not exist is created (10G, on the instance's fabric networks)\n"
     "  -w, --watch        follow the job to its end\n"
     "\nThe job's target is /provision-<uuid>; a bad request (unknown package, image,\n"
     "network or server, a full network, an alias Triton refuses) is refused before\n"
     "anything is stored, with a code naming the fault (exit status 3).\n"},
    {"vm", "start", vm_start, "vm start VM [--watch]",
     "Start a stopped instance (a job of vm-start).", ACTION_HELP},
    {"vm", "stop", vm_stop, "vm stop VM [--watch]", "Stop a running instance (a job of vm-stop).",
     ACTION_HELP},
    {"vm", "delete", vm_delete, "vm delete VM [--watch]",
     "Delete an instance, its files and its NICs and IPs (a job of vm-delete).", ACTION_HELP},
    {"vm", "update", vm_update,
     "vm update VM [alias=A] [tag.K=V]... [tags=JSON] [metadata=JSON] [--watch]",
     "Change an instance's alias, tags or customer metadata (a job of vm-update).",
     "  VM              the instance's uuid or alias\n"
     "  alias=A         the new alias (unique among the owner's live instances)\n"
     "  tag.K=V         set tag K (other tags stay); V a number, true or false keeps\n"
     "                  that type, anything else is a string\n"
     "  tags=JSON       replace every tag with this object\n"
     "  metadata=JSON   replace the customer metadata with this object\n"
     "  -w, --watch     follow the job to its end\n"
     "\nThe record and the instance's vm.json change together: a failure on the server\n"
     "puts the record back. During a migration the update is allowed until the switch\n"
     "begins, and reaches the target (refused VmMigrating after). A bad value is refused\n"
     "before anything is stored (exit status 3).\n"},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};
