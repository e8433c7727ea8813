/*
 * cmd_nic.c -- `tern nic list`: the datacenter's NICs (the dc plugin's view GET /nics),
 * those of one instance or of one server.
 */
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "dc_api.h"

enum { OPT_VM = 0x4100, OPT_SERVER };

static const output_column_t nic_columns[] = {
    {"MAC", "mac", NULL},        {"IP", "ip", NULL},
    {"VLAN", "vlan_id", NULL},   {"PRIMARY", "primary", NULL},
    {"STATE", "state", NULL},    {"INSTANCE", "belongs_to_uuid", NULL},
    {"SERVER", "cn_uuid", NULL}, {"NETWORK", "network_uuid", NULL},
    {NULL, NULL, NULL},
};

typedef struct nic_opts {
    const char *vm, *server;
} nic_opts_t;

static cli_status_t on_nic_opt(cli_t *cli, void *data, int c, const char *arg)
{
    nic_opts_t *o = data;
    if (c == OPT_VM)
        o->vm = arg;
    else if (c == OPT_SERVER)
        o->server = arg;
    else
        return cli_usage(cli, "unknown option");
    return CLI_OK;
}

static cli_status_t nic_list(cli_t *cli, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"vm", required_argument, NULL, OPT_VM},
        {"server", required_argument, NULL, OPT_SERVER},
        {NULL, 0, NULL, 0},
    };
    nic_opts_t o = {0};
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, "", longopts, on_nic_opt, &o, &first, &st))
        return st;
    if (first < argc)
        return cli_usage(cli, "unexpected argument \"%s\"", argv[first]);
    char *query = NULL;
    char uuid[37];
    if (o.vm != NULL) {
        st = dc_find_uuid(cli, "/vms", "alias", "instance", o.vm, uuid);
        if (st == CLI_OK)
            dc_query_add(cli, &query, "belongs_to_uuid", uuid);
    }
    if (st == CLI_OK && o.server != NULL) {
        st = dc_find_uuid(cli, "/servers", "hostname", "server", o.server, uuid);
        if (st == CLI_OK)
            dc_query_add(cli, &query, "cn_uuid", uuid);
    }
    json_t *rows = NULL;
    if (st == CLI_OK)
        st = dc_list(cli, "/nics", query, &rows);
    if (st == CLI_OK)
        output_table(stdout, &cli->out, rows, nic_columns, NULL);
    json_decref(rows);
    free(query);
    return st;
}

const cli_command_t cmd_nic_commands[] = {
    {"nic", "list", nic_list, "nic list [--vm VM] [--server SERVER]",
     "List the NICs, all of them or those of an instance or a server.",
     "  --vm VM           of that instance (uuid or alias)\n"
     "  --server SERVER   on that server (uuid or hostname)\n"
     "\nColumns: MAC IP VLAN PRIMARY STATE INSTANCE SERVER NETWORK; -o chooses fields.\n"},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};
