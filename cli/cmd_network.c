/*
 * cmd_network.c -- `tern network list|ips`: the datacenter's networks (the dc plugin's
 * views GET /networks and /networks/:uuid/ips) and the addresses taken or reserved on
 * one.
 */
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "base/alloc.h"
#include "cli.h"
#include "client.h"
#include "dc_api.h"

static const output_column_t network_columns[] = {
    {"NAME", "name", NULL},
    {"UUID", "uuid", NULL},
    {"SUBNET", "subnet", NULL},
    {"GATEWAY", "gateway", NULL},
    {"VLAN", "vlan_id", NULL},
    {"MTU", "mtu", NULL},
    {"PROVISION_START", "provision_start_ip", NULL},
    {"PROVISION_END", "provision_end_ip", NULL},
    {NULL, NULL, NULL},
};

static const output_column_t ip_columns[] = {
    {"IP", "ip", NULL},
    {"STATE", "state", NULL},
    {"BELONGS_TO", "belongs_to_uuid", NULL},
    {"TYPE", "belongs_to_type", NULL},
    {"OWNER", "owner_uuid", NULL},
    {NULL, NULL, NULL},
};

static cli_status_t no_opts(cli_t *cli, void *data, int c, const char *arg)
{
    (void)data;
    (void)c;
    (void)arg;
    return cli_usage(cli, "unknown option");
}

static cli_status_t network_list(cli_t *cli, int argc, char **argv)
{
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, "", NULL, no_opts, NULL, &first, &st))
        return st;
    if (first < argc)
        return cli_usage(cli, "unexpected argument \"%s\"", argv[first]);
    json_t *rows;
    st = dc_list(cli, "/networks", NULL, &rows);
    if (st == CLI_OK)
        output_table(stdout, &cli->out, rows, network_columns, NULL);
    json_decref(rows);
    return st;
}

static cli_status_t network_ips(cli_t *cli, int argc, char **argv)
{
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, "", NULL, no_opts, NULL, &first, &st))
        return st;
    if (first >= argc)
        return cli_usage(cli, "missing NETWORK (its uuid or name)");
    if (first + 1 < argc)
        return cli_usage(cli, "unexpected argument \"%s\"", argv[first + 1]);
    char uuid[37];
    if ((st = dc_find_uuid(cli, "/networks", "name", "network", argv[first], uuid)) != CLI_OK)
        return st;
    char *path = xasprintf("/networks/%s/ips", uuid);
    json_t *rows;
    st = dc_list(cli, path, NULL, &rows);
    free(path);
    if (st == CLI_OK)
        output_table(stdout, &cli->out, rows, ip_columns, NULL);
    json_decref(rows);
    return st;
}

const cli_command_t cmd_network_commands[] = {
    {"network", "list", network_list, "network list",
     "List the networks: subnet, gateway, VLAN, MTU and provision range.",
     "Columns: NAME UUID SUBNET GATEWAY VLAN MTU PROVISION_START PROVISION_END.\n"},
    {"network", "ips", network_ips, "network ips NETWORK",
     "List the addresses of a network that are taken or reserved, and by what.",
     "  NETWORK   the network's uuid or name\n"
     "\nColumns: IP STATE BELONGS_TO TYPE OWNER; addresses not listed are free.\n"},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};
