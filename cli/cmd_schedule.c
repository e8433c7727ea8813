/*
 * cmd_schedule.c -- `tern schedule create|list|get|delete|pause|resume`: recurring
 * schedules of jobs (POST/GET/DELETE /schedules...).
 *
 * Each command is one request. `create` prints the new schedule's uuid; the others
 * print what the schedule is now. -j prints what the API answered and -o picks fields
 * from it, as for jobs.
 */
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "base/alloc.h"
#include "cli.h"
#include "client.h"
#include "params.h"

enum {
    OPT_EVERY = 0x100,
    OPT_CRON,
    OPT_TZ,
    OPT_OVERLAP,
    OPT_TARGET,
    OPT_PAUSED,
    OPT_LIMIT,
};

/* ---- columns ------------------------------------------------------------------- */

/* "every 5m" or "0 3 * * * Europe/Paris". */
static void cell_when(const json_t *row, char *buf, size_t n)
{
    const char *every = json_string_value(json_object_get(row, "every"));
    const char *cron = json_string_value(json_object_get(row, "cron"));
    const char *tz = json_string_value(json_object_get(row, "time_zone"));
    char raw[256];
    if (every != NULL)
        snprintf(raw, sizeof raw, "every %s", every);
    else if (cron != NULL)
        snprintf(raw, sizeof raw, "%s %s", cron, tz != NULL ? tz : "UTC");
    else
        snprintf(raw, sizeof raw, "-");
    output_clean(raw, buf, n);
}

static const output_column_t schedule_columns[] = {
    {"UUID", "uuid", NULL},    {"WORKFLOW", "workflow", NULL}, {"NAME", "name", NULL},
    {"WHEN", NULL, cell_when}, {"NEXT", "next_run", NULL},     {"LAST", "last_run", NULL},
    {"FIRED", "fired", NULL},  {"SKIPPED", "skipped", NULL},   {"PAUSED", "paused", NULL},
    {NULL, NULL, NULL},
};

static const output_column_t schedule_known_columns[] = {
    {"UUID", "uuid", NULL},
    {"WORKFLOW", "workflow", NULL},
    {"NAME", "name", NULL},
    {"WHEN", NULL, cell_when},
    {"NEXT", "next_run", NULL},
    {"LAST", "last_run", NULL},
    {"FIRED", "fired", NULL},
    {"SKIPPED", "skipped", NULL},
    {"FAILED", "failed", NULL},
    {"PAUSED", "paused", NULL},
    {"OVERLAP", "overlap", NULL},
    {"TARGET", "target", NULL},
    {"LAST_JOB", "last_job_uuid", NULL},
    {"LAST_ERROR", "last_error", NULL},
    {"CREATED", "created_at", NULL},
    {"PARAMS", "params", NULL},
    {NULL, NULL, NULL},
};

/* ---- helpers ------------------------------------------------------------------- */

/* Sends one request about a schedule ("/schedules/<uuid><suffix>"). On CLI_OK,
 * *answer is the JSON answered (new reference, may be NULL for an empty body). */
static cli_status_t schedule_request(cli_t *cli, const char *method, const char *uuid,
                                     const char *suffix, json_t **answer)
{
    char *esc = client_escape(cli_client(cli), uuid);
    char *path = xasprintf("/schedules/%s%s", esc, suffix);
    free(esc);
    client_reply_t reply;
    cli_status_t st = client_call(cli_client(cli), method, path, NULL, &reply, &cli->err);
    free(path);
    *answer = st == CLI_OK ? json_incref(reply.json) : NULL;
    client_reply_dispose(&reply);
    return st;
}

/* Exactly one positional argument, the schedule's uuid, and no option of the command's
 * own. */
static cli_status_t one_uuid(cli_t *cli, int argc, char **argv, const char **uuid)
{
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, "", NULL, NULL, NULL, &first, &st))
        return st;
    if (first >= argc)
        return cli_usage(cli, "missing UUID");
    if (first + 1 < argc)
        return cli_usage(cli, "unexpected argument \"%s\"", argv[first + 1]);
    *uuid = argv[first];
    return CLI_OK;
}

static void print_line(const char *key, const json_t *v)
{
    char buf[512];
    output_cell_text(v, buf, sizeof buf);
    printf("  %-10s %s\n", key, buf);
}

/* The human view of one schedule. */
static void print_schedule(const json_t *s)
{
    char when[300];
    cell_when(s, when, sizeof when);
    printf("schedule %s%s%s\n", json_string_value(json_object_get(s, "uuid")),
           json_object_get(s, "name") != NULL ? " " : "",
           json_object_get(s, "name") != NULL ? json_string_value(json_object_get(s, "name")) : "");
    print_line("workflow", json_object_get(s, "workflow"));
    printf("  %-10s %s\n", "when", when);
    print_line("overlap", json_object_get(s, "overlap"));
    if (json_object_get(s, "target") != NULL)
        print_line("target", json_object_get(s, "target"));
    print_line("params", json_object_get(s, "params"));
    print_line("paused", json_object_get(s, "paused"));
    print_line("next run", json_object_get(s, "next_run"));
    print_line("last run", json_object_get(s, "last_run"));
    print_line("last job", json_object_get(s, "last_job_uuid"));
    printf("  %-10s %lld fired, %lld skipped, %lld failed\n", "ticks",
           (long long)json_integer_value(json_object_get(s, "fired")),
           (long long)json_integer_value(json_object_get(s, "skipped")),
           (long long)json_integer_value(json_object_get(s, "failed")));
    if (json_is_string(json_object_get(s, "last_error")))
        print_line("last error", json_object_get(s, "last_error"));
}

static cli_status_t show(cli_t *cli, const json_t *s)
{
    if (output_wants_generic(&cli->out))
        output_object(stdout, &cli->out, s, schedule_known_columns);
    else
        print_schedule(s);
    return CLI_OK;
}

/* ---- create -------------------------------------------------------------------- */

typedef struct create_opts {
    json_t *params; /* -p values (ours) */
    json_t *file;   /* -f object (ours) or NULL */
    const char *workflow, *every, *cron, *tz, *overlap, *target;
    bool paused;
} create_opts_t;

static cli_status_t on_create_opt(cli_t *cli, void *data, int c, const char *arg)
{
    create_opts_t *o = data;
    char err[600];
    switch (c) {
    case 'p':
        if (params_set(o->params, arg, err, sizeof err) != 0)
            return cli_usage(cli, "%s", err);
        return CLI_OK;
    case 'f':
        json_decref(o->file);
        o->file = params_load_file(arg, err, sizeof err);
        return o->file != NULL ? CLI_OK : cli_usage(cli, "-f %s", err);
    case 'w':
        o->workflow = arg;
        return CLI_OK;
    case OPT_EVERY:
        o->every = arg;
        return CLI_OK;
    case OPT_CRON:
        o->cron = arg;
        return CLI_OK;
    case OPT_TZ:
        o->tz = arg;
        return CLI_OK;
    case OPT_OVERLAP:
        o->overlap = arg;
        return CLI_OK;
    case OPT_TARGET:
        o->target = arg;
        return CLI_OK;
    case OPT_PAUSED:
        o->paused = true;
        return CLI_OK;
    default:
        return CLI_OK;
    }
}

static cli_status_t schedule_create(cli_t *cli, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"workflow", required_argument, NULL, 'w'},
        {"every", required_argument, NULL, OPT_EVERY},
        {"cron", required_argument, NULL, OPT_CRON},
        {"tz", required_argument, NULL, OPT_TZ},
        {"overlap", required_argument, NULL, OPT_OVERLAP},
        {"params", required_argument, NULL, 'p'},
        {"file", required_argument, NULL, 'f'},
        {"target", required_argument, NULL, OPT_TARGET},
        {"paused", no_argument, NULL, OPT_PAUSED},
        {NULL, 0, NULL, 0},
    };
    create_opts_t o = {.params = json_object()};
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, "w:p:f:", longopts, on_create_opt, &o, &first, &st))
        goto Done;
    if (first < argc) {
        st = cli_usage(cli, "unexpected argument \"%s\" (the workflow is given with -w)",
                       argv[first]);
        goto Done;
    }
    if (o.workflow == NULL) {
        st = cli_usage(cli, "missing -w WORKFLOW (a workflow name, NAME@VERSION or uuid)");
        goto Done;
    }
    if ((o.every == NULL) == (o.cron == NULL)) {
        st = cli_usage(cli, "give one of --every INTERVAL and --cron EXPRESSION");
        goto Done;
    }
    if (o.tz != NULL && o.cron == NULL) {
        st = cli_usage(cli, "--tz goes with --cron");
        goto Done;
    }
    json_t *params = o.file != NULL ? json_deep_copy(o.file) : json_object();
    params_merge(params, o.params);
    /* The server checks everything else, and its messages name the member. */
    json_t *body = json_pack("{s:s, s:o}", "workflow", o.workflow, "params", params);
    if (o.every != NULL)
        json_object_set_new(body, "every", json_string(o.every));
    if (o.cron != NULL)
        json_object_set_new(body, "cron", json_string(o.cron));
    if (o.tz != NULL)
        json_object_set_new(body, "time_zone", json_string(o.tz));
    if (o.overlap != NULL)
        json_object_set_new(body, "overlap", json_string(o.overlap));
    if (o.target != NULL)
        json_object_set_new(body, "target", json_string(o.target));
    if (o.paused)
        json_object_set_new(body, "paused", json_true());
    client_reply_t reply;
    st = client_call(cli_client(cli), "POST", "/schedules", body, &reply, &cli->err);
    json_decref(body);
    if (st == CLI_OK) {
        const char *uuid = json_string_value(json_object_get(reply.json, "uuid"));
        if (uuid == NULL)
            st = cli_fail(cli, CLI_UNREACHABLE, NULL,
                          "POST /schedules answered without a schedule uuid");
        else if (output_wants_generic(&cli->out))
            output_object(stdout, &cli->out, reply.json, schedule_known_columns);
        else
            printf("%s\n", uuid); /* just the uuid: S=$(tern schedule create ...) */
    }
    client_reply_dispose(&reply);
Done:
    json_decref(o.params);
    json_decref(o.file);
    return st;
}

/* ---- list, get, delete, pause, resume ------------------------------------------ */

static cli_status_t on_list_opt(cli_t *cli, void *data, int c, const char *arg)
{
    if (c == 'n' || c == OPT_LIMIT)
        return args_uint(cli, "--limit", arg, 1000, data);
    return CLI_OK;
}

static cli_status_t schedule_list(cli_t *cli, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"limit", required_argument, NULL, OPT_LIMIT},
        {NULL, 0, NULL, 0},
    };
    unsigned long limit = 100;
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, "n:", longopts, on_list_opt, &limit, &first, &st))
        return st;
    if (first < argc)
        return cli_usage(cli, "unexpected argument \"%s\"", argv[first]);
    if (limit == 0)
        return cli_usage(cli, "--limit: expected 1 to 1000");
    char path[64];
    snprintf(path, sizeof path, "/schedules?limit=%lu", limit);
    client_reply_t reply;
    st = client_call(cli_client(cli), "GET", path, NULL, &reply, &cli->err);
    if (st == CLI_OK)
        output_table(stdout, &cli->out, reply.json,
                     cli->out.columns != NULL ? schedule_known_columns : schedule_columns, NULL);
    client_reply_dispose(&reply);
    return st;
}

/* One request about one schedule, then `then` with the answer. */
static cli_status_t one_schedule(cli_t *cli, int argc, char **argv, const char *method,
                                 const char *suffix, const char *done)
{
    const char *uuid = NULL;
    cli_status_t st = one_uuid(cli, argc, argv, &uuid);
    if (st != CLI_OK)
        return st;
    json_t *s = NULL;
    st = schedule_request(cli, method, uuid, suffix, &s);
    if (st == CLI_OK) {
        if (done != NULL && !output_wants_generic(&cli->out))
            printf("schedule %s %s\n", uuid, done);
        else if (s != NULL)
            show(cli, s);
    }
    json_decref(s);
    return st;
}

static cli_status_t schedule_get(cli_t *cli, int argc, char **argv)
{
    return one_schedule(cli, argc, argv, "GET", "", NULL);
}

static cli_status_t schedule_delete(cli_t *cli, int argc, char **argv)
{
    return one_schedule(cli, argc, argv, "DELETE", "", "deleted (its jobs stay)");
}

static cli_status_t schedule_pause(cli_t *cli, int argc, char **argv)
{
    return one_schedule(cli, argc, argv, "POST", "/pause", NULL);
}

static cli_status_t schedule_resume(cli_t *cli, int argc, char **argv)
{
    return one_schedule(cli, argc, argv, "POST", "/resume", NULL);
}

const cli_command_t cmd_schedule_commands[] = {
    {"schedule", "create", schedule_create,
     "schedule create -w WORKFLOW (--every INTERVAL | --cron EXPR [--tz ZONE]) "
     "[--overlap skip|queue] [-p KEY=VALUE]... [-f FILE] [--target T] [--paused]",
     "Create a recurring schedule: a job of a workflow at every tick.",
     "  -w, --workflow W        the workflow: a name (its latest version at each tick),\n"
     "                          NAME@VERSION or uuid\n"
     "  --every INTERVAL        a tick every INTERVAL: 30s, 5m, 1h30m, 2d (at least 1s)\n"
     "  --cron EXPR             a tick when EXPR matches: 5 fields, minute hour\n"
     "                          day-of-month month day-of-week (\"0 3 * * 1-5\")\n"
     "  --tz ZONE               the time zone of --cron: an IANA name (Europe/Paris);\n"
     "                          default UTC\n"
     "  --overlap skip|queue    a tick while the previous job is unfinished: no job\n"
     "                          (skip, the default) or a job that waits for it (queue)\n"
     "  -p, --params KEY=VALUE  a parameter of every job (JSON value or plain text);\n"
     "                          repeatable\n"
     "  -f, --file FILE         parameters from a JSON object in FILE (\"-\": stdin)\n"
     "  --target T              the jobs' target\n"
     "  --paused                create it paused (`tern schedule resume` starts it)\n"
     "Each job also gets the params schedule_uuid and scheduled_for (its tick).\n"
     "Prints the new schedule's uuid; -j prints the schedule.\n"},
    {"schedule", "list", schedule_list, "schedule list [--limit N]",
     "List schedules, newest first.",
     "  -n, --limit N   at most N schedules (default 100, at most 1000)\n"
     "Columns: UUID WORKFLOW NAME WHEN NEXT LAST FIRED SKIPPED PAUSED; -o also knows\n"
     "FAILED OVERLAP TARGET LAST_JOB LAST_ERROR CREATED PARAMS, or any JSON path.\n"},
    {"schedule", "get", schedule_get, "schedule get UUID",
     "Show a schedule: when it ticks, its next and last run, its counts.",
     "-j prints the schedule as the API has it; -o picks fields (-o next_run -H).\n"},
    {"schedule", "delete", schedule_delete, "schedule delete UUID",
     "Delete a schedule (the jobs it made stay).", ""},
    {"schedule", "pause", schedule_pause, "schedule pause UUID",
     "Pause a schedule: no tick fires until it is resumed.", ""},
    {"schedule", "resume", schedule_resume, "schedule resume UUID",
     "Resume a schedule at its next tick after now (ticks missed are not made up).", ""},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};
