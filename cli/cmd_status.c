/*
 * cmd_status.c -- what the system says about itself: `tern stats`, `tern runners`,
 * `tern tasks`. One GET each; the answer is reshaped into rows for the table, and -j
 * prints it as the API sent it.
 */
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "base/alloc.h"
#include "cli.h"
#include "client.h"
#include "units.h"

/* GETs `path` after parsing a command that takes no argument. */
static cli_status_t simple_get(cli_t *cli, int argc, char **argv, const char *path, json_t **answer)
{
    int first;
    cli_status_t st;
    *answer = NULL;
    if (!args_parse(cli, argc, argv, "", NULL, NULL, NULL, &first, &st))
        return st;
    if (first < argc)
        return cli_usage(cli, "unexpected argument \"%s\"", argv[first]);
    client_reply_t reply;
    st = client_call(cli_client(cli), "GET", path, NULL, &reply, &cli->err);
    if (st == CLI_OK)
        *answer = json_incref(reply.json);
    client_reply_dispose(&reply);
    return st;
}

/* ---- stats --------------------------------------------------------------------- */

/* {"current": {"queued": 2, ...}, "past_hour": {...}, ...} becomes one row per
 * execution with a column per period, in the API's order. */
static cli_status_t stats(cli_t *cli, int argc, char **argv)
{
    json_t *answer;
    cli_status_t st = simple_get(cli, argc, argv, "/stats", &answer);
    if (st != CLI_OK)
        return st;
    json_t *rows = json_array();
    size_t nperiods = json_object_size(answer);
    output_column_t *cols = xcalloc(nperiods + 2, sizeof *cols);
    cols[0] = (output_column_t){"EXECUTION", "execution", NULL};
    size_t k = 1;
    const char *period;
    json_t *counts;
    json_object_foreach(answer, period, counts)
    {
        if (!json_is_object(counts))
            continue;
        cols[k++] = (output_column_t){period, period, NULL};
        const char *execution;
        json_t *n;
        json_object_foreach(counts, execution, n)
        {
            json_t *row = NULL;
            size_t i;
            json_t *r;
            json_array_foreach(rows, i, r)
            {
                if (strcmp(json_string_value(json_object_get(r, "execution")), execution) == 0)
                    row = r;
            }
            if (row == NULL) {
                row = json_pack("{s:s}", "execution", execution);
                json_array_append_new(rows, row);
            }
            json_object_set(row, period, n);
        }
    }
    output_table(stdout, &cli->out, rows, cols, answer);
    free(cols);
    json_decref(rows);
    json_decref(answer);
    return CLI_OK;
}

/* ---- runners ------------------------------------------------------------------- */

static void cell_lease(const json_t *row, char *buf, size_t n)
{
    const json_t *left = json_object_get(row, "lease_ms_left");
    char d[32];
    if (!json_is_integer(left))
        snprintf(buf, n, "-");
    else if (json_integer_value(left) > 0)
        snprintf(buf, n, "%s", units_duration_ms((uint64_t)json_integer_value(left), d, sizeof d));
    else
        snprintf(buf, n, "expired %s ago",
                 units_duration_ms((uint64_t)-json_integer_value(left), d, sizeof d));
}

static const output_column_t runner_columns[] = {
    {"ID", "id", NULL},
    {"ALIVE", "alive", NULL},
    {"JOBS", "jobs", NULL},
    {"INFLIGHT", "info.in_flight", NULL},
    {"CONCURRENCY", "info.concurrency", NULL},
    {"QUEUES", "info.queues", NULL},
    {"LAST_SEEN", "last_seen_at", NULL},
    {"LEASE", NULL, cell_lease},
    {NULL, NULL, NULL},
};

static cli_status_t runners(cli_t *cli, int argc, char **argv)
{
    json_t *answer;
    cli_status_t st = simple_get(cli, argc, argv, "/runners", &answer);
    if (st == CLI_OK)
        output_table(stdout, &cli->out, answer, runner_columns, NULL);
    json_decref(answer);
    return st;
}

/* ---- tasks --------------------------------------------------------------------- */

static const output_column_t task_columns[] = {
    {"TASK", "task", NULL},       {"PLUGIN", "plugin", NULL}, {"VERSION", "version", NULL},
    {"SUMMARY", "summary", NULL}, {NULL, NULL, NULL},
};

/* [{"name": plugin, "version", "tasks": [{"name", "summary", ...}]}] becomes one row per
 * task: {"task", "plugin", "version", "summary", "fatal_codes", "args_schema"}. */
static cli_status_t tasks(cli_t *cli, int argc, char **argv)
{
    json_t *answer;
    cli_status_t st = simple_get(cli, argc, argv, "/tasks", &answer);
    if (st != CLI_OK)
        return st;
    json_t *rows = json_array();
    size_t i, j;
    const json_t *plugin, *task;
    json_array_foreach(answer, i, plugin)
    {
        json_array_foreach(json_object_get(plugin, "tasks"), j, task)
        {
            json_array_append_new(rows,
                                  json_pack("{s:O?, s:O?, s:O?, s:O?, s:O?, s:O?}", "task",
                                            json_object_get(task, "name"), "plugin",
                                            json_object_get(plugin, "name"), "version",
                                            json_object_get(plugin, "version"), "summary",
                                            json_object_get(task, "summary"), "fatal_codes",
                                            json_object_get(task, "fatal_codes"), "args_schema",
                                            json_object_get(task, "args_schema")));
        }
    }
    output_table(stdout, &cli->out, rows, task_columns, answer);
    json_decref(rows);
    json_decref(answer);
    return CLI_OK;
}

const cli_command_t cmd_status_commands[] = {
    {"stats", NULL, stats, "stats", "Count jobs by execution and by when they were created.",
     "Columns: EXECUTION and one per period of the API (current: the last hour,\n"
     "past_hour, past_24h, all_time: older, total).\n"},
    {"runners", NULL, runners, "runners", "List the runners, their leases and their load.",
     "Columns: ID ALIVE JOBS INFLIGHT CONCURRENCY QUEUES LAST_SEEN LEASE.\n"},
    {"tasks", NULL, tasks, "tasks", "List the tasks of the plugins the API has loaded.",
     "Columns: TASK PLUGIN VERSION SUMMARY; -o fatal_codes,args_schema shows more.\n"},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};
