/*
 * cmd_server.c -- `tern server list|get`: the datacenter's servers (the dc plugin's
 * views GET /servers and /servers/:uuid) with what is committed on each.
 *
 * Sizes are MiB, as the records keep them; the percentages say how full a server is
 * at a glance, the way an operator reads `triton`'s tables.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dc_api.h"

/* "used/total (pct%)" of two MiB fields. */
static void cell_share(const json_t *row, const char *used_key, const char *total_key, char *buf,
                       size_t n)
{
    const json_t *used = json_object_get(row, used_key), *total = json_object_get(row, total_key);
    if (!json_is_integer(used) || !json_is_integer(total) || json_integer_value(total) <= 0) {
        snprintf(buf, n, "-");
        return;
    }
    json_int_t u = json_integer_value(used), t = json_integer_value(total);
    snprintf(buf, n, "%lld/%lld (%lld%%)", (long long)u, (long long)t, (long long)(u * 100 / t));
}

static void cell_ram(const json_t *row, char *buf, size_t n)
{
    cell_share(row, "ram_committed_mib", "ram_mib", buf, n);
}

static void cell_disk(const json_t *row, char *buf, size_t n)
{
    cell_share(row, "disk_committed_mib", "disk_mib", buf, n);
}

static const output_column_t server_columns[] = {
    {"HOSTNAME", "hostname", NULL},
    {"UUID", "uuid", NULL},
    {"RACK", "rack", NULL},
    {"INSTANCES", "instances", NULL},
    {"RAM_MIB", NULL, cell_ram},
    {"DISK_MIB", NULL, cell_disk},
    {NULL, NULL, NULL},
};

static cli_status_t server_list(cli_t *cli, int argc, char **argv)
{
    return dc_list_command(cli, argc, argv, "/servers", server_columns);
}

static cli_status_t server_get(cli_t *cli, int argc, char **argv)
{
    const char *name;
    cli_status_t st = dc_one_argument(cli, argc, argv, "SERVER (its uuid or hostname)", &name);
    if (st != CLI_OK)
        return st;
    json_t *server;
    st = dc_find(cli, "/servers", "hostname", "server", name, &server);
    if (st != CLI_OK)
        return st;
    if (output_wants_generic(&cli->out))
        output_object(stdout, &cli->out, server, server_columns);
    else
        output_fields(stdout, server);
    json_decref(server);
    return CLI_OK;
}

const cli_command_t cmd_server_commands[] = {
    {"server", "list", server_list, "server list",
     "List the datacenter's servers and the RAM and disk committed on each.",
     "Columns: HOSTNAME UUID RACK INSTANCES RAM_MIB DISK_MIB (committed/total in MiB, and\n"
     "how full); -o chooses others by name or by field (-o hostname,ram_committed_mib).\n"},
    {"server", "get", server_get, "server get SERVER",
     "Show one server (by uuid or hostname): its description and what is committed on it.",
     "  SERVER   the server's uuid or hostname\n"},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};
