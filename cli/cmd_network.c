/*
 * cmd_network.c -- `tern network list|ips`: the datacenter's networks (the dc plugin's
 * views GET /networks and /networks/:uuid/ips) and the addresses taken or reserved on
 * one.
 */
#include <stdlib.h>
#include <string.h>

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

static cli_status_t network_list(cli_t *cli, int argc, char **argv)
{
    return dc_list_command(cli, argc, argv, "/networks", network_columns);
}

static cli_status_t network_ips(cli_t *cli, int argc, char **argv)
{
    const char *network;
    cli_status_t st = dc_one_argument(cli, argc, argv, "NETWORK (its uuid or name)", &network);
    if (st != CLI_OK)
        return st;
    char uuid[37];
    if ((st = dc_find_uuid(cli, "/networks", "name", "network", network, uuid)) != CLI_OK)
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
