/*
 * cmd_job.c -- `tern job create|get|list|watch|cancel|resume|retry|info`.
 *
 * Each command is one request (two with --watch, which then follows the job with
 * watch.c). Human output is the job's story at a glance; -j prints what the API
 * answered, and -o picks fields from it, so `tern job get UUID -o execution -H` prints
 * just "succeeded".
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "base/iso8601.h"
#include "cli.h"
#include "client.h"
#include "params.h"
#include "units.h"
#include "watch.h"

enum {
    OPT_TARGET = 0x100,
    OPT_EXEC_AFTER,
    OPT_LOCKS,
    OPT_WATCH,
    OPT_POLL,
    OPT_EXECUTION,
    OPT_LIMIT,
    OPT_MARKER,
    OPT_ALL,
    OPT_RESULT,
    OPT_ERROR,
    OPT_FROM,
    OPT_ADD,
};

/* ---- columns ------------------------------------------------------------------- */

static void cell_elapsed(const json_t *row, char *buf, size_t n)
{
    const json_t *e = json_object_get(row, "elapsed");
    if (json_is_number(e) && json_number_value(e) >= 0)
        units_duration_ms((uint64_t)llround(json_number_value(e) * 1000.0), buf, n);
    else
        snprintf(buf, n, "-");
}

static bool unfinished(const json_t *job)
{
    const char *ex = json_string_value(json_object_get(job, "execution"));
    return ex != NULL && strcmp(ex, "succeeded") != 0 && strcmp(ex, "failed") != 0 &&
           strcmp(ex, "canceled") != 0;
}

/* The step an unfinished job is at: "chain[2] pause". */
static void cell_step(const json_t *row, char *buf, size_t n)
{
    const json_t *c = json_object_get(row, "cursor");
    const char *step = json_string_value(json_object_get(c, "step"));
    if (!unfinished(row) || step == NULL) {
        snprintf(buf, n, "-");
        return;
    }
    const char *phase = json_string_value(json_object_get(c, "phase"));
    snprintf(buf, n, "%s%s%s", phase != NULL && strcmp(phase, "chain") != 0 ? phase : "",
             phase != NULL && strcmp(phase, "chain") != 0 ? ":" : "", step);
}

static void cell_error(const json_t *row, char *buf, size_t n)
{
    output_cell_text(json_object_get(json_object_get(row, "error"), "code"), buf, n);
}

static const output_column_t job_columns[] = {
    {"UUID", "uuid", NULL},           {"WORKFLOW", "name", NULL},
    {"EXECUTION", "execution", NULL}, {"TARGET", "target", NULL},
    {"CREATED", "created_at", NULL},  {"ELAPSED", NULL, cell_elapsed},
    {"STEP", NULL, cell_step},        {NULL, NULL, NULL},
};

/* Known for -o beyond the defaults. */
static const output_column_t job_known_columns[] = {
    {"UUID", "uuid", NULL},
    {"WORKFLOW", "name", NULL},
    {"EXECUTION", "execution", NULL},
    {"TARGET", "target", NULL},
    {"CREATED", "created_at", NULL},
    {"ELAPSED", NULL, cell_elapsed},
    {"STEP", NULL, cell_step},
    {"VERSION", "version", NULL},
    {"QUEUE", "queue", NULL},
    {"RUNNER", "runner_id", NULL},
    {"FINISHED", "finished_at", NULL},
    {"ERROR", NULL, cell_error},
    {"PARAMS", "params", NULL},
    {NULL, NULL, NULL},
};

/* ---- helpers ------------------------------------------------------------------- */

/* "/jobs/<escaped uuid><suffix>" (malloc'd). */
static char *job_path(cli_t *cli, const char *uuid, const char *suffix)
{
    char *esc = client_escape(cli_client(cli), uuid);
    char *path = xasprintf("/jobs/%s%s", esc, suffix);
    free(esc);
    return path;
}

/* Sends one request about a job. On CLI_OK, *answer is the JSON answered (new
 * reference, may be NULL for an empty body). */
static cli_status_t job_request(cli_t *cli, const char *method, const char *uuid,
                                const char *suffix, const json_t *body, json_t **answer)
{
    char *path = job_path(cli, uuid, suffix);
    client_reply_t reply;
    cli_status_t st = client_call(cli_client(cli), method, path, body, &reply, &cli->err);
    free(path);
    *answer = st == CLI_OK ? json_incref(reply.json) : NULL;
    client_reply_dispose(&reply);
    return st;
}

/* Exactly one positional argument, the job's uuid. */
static cli_status_t one_uuid(cli_t *cli, int argc, char **argv, int first, const char **uuid)
{
    if (first >= argc)
        return cli_usage(cli, "missing UUID");
    if (first + 1 < argc)
        return cli_usage(cli, "unexpected argument \"%s\"", argv[first + 1]);
    *uuid = argv[first];
    return CLI_OK;
}

/* Options shared by the commands that take params (create, retry). */
typedef struct job_opts {
    json_t *params; /* -p values (ours) */
    json_t *file;   /* -f object (ours) or NULL */
    const char *target, *locks, *from, *result, *error, *add, *execution, *marker;
    uint64_t exec_after_ms;
    unsigned long limit;
    bool watch, poll, all;
} job_opts_t;

static void job_opts_dispose(job_opts_t *o)
{
    json_decref(o->params);
    json_decref(o->file);
}

static cli_status_t on_job_opt(cli_t *cli, void *data, int c, const char *arg)
{
    job_opts_t *o = data;
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
    case OPT_TARGET:
        o->target = arg;
        return CLI_OK;
    case OPT_LOCKS:
        o->locks = arg;
        return CLI_OK;
    case OPT_EXEC_AFTER: {
        uint64_t rel;
        if (units_parse_relative(arg, &rel))
            o->exec_after_ms = clock_wall_ms() + rel;
        else if (!units_parse_iso(arg, &o->exec_after_ms))
            return cli_usage(cli,
                             "--exec-after \"%s\": expected an ISO 8601 time "
                             "(2026-11-21T04:47:28Z) or +N with s, m, h or d (+10m)",
                             arg);
        return CLI_OK;
    }
    case OPT_WATCH:
        o->watch = true;
        return CLI_OK;
    case OPT_POLL:
        o->poll = true;
        return CLI_OK;
    case OPT_EXECUTION:
        o->execution = arg;
        return CLI_OK;
    case 'n':
    case OPT_LIMIT:
        return args_uint(cli, "--limit", arg, 10000000, &o->limit);
    case OPT_MARKER:
        o->marker = arg;
        return CLI_OK;
    case OPT_ALL:
        o->all = true;
        return CLI_OK;
    case OPT_RESULT:
        o->result = arg;
        return CLI_OK;
    case OPT_ERROR:
        o->error = arg;
        return CLI_OK;
    case OPT_FROM:
        o->from = arg;
        return CLI_OK;
    case OPT_ADD:
        o->add = arg;
        return CLI_OK;
    default:
        return CLI_OK;
    }
}

/* The params of -f with the -p values set over them (new reference). */
static json_t *merged_params(const job_opts_t *o)
{
    json_t *p = o->file != NULL ? json_deep_copy(o->file) : json_object();
    params_merge(p, o->params);
    return p;
}

/* After an operator action: the job's answer, or its watch with --watch. */
static cli_status_t after_action(cli_t *cli, const job_opts_t *o, const char *uuid,
                                 const json_t *job, const char *what)
{
    if (o->watch)
        return watch_job(cli, uuid, o->poll);
    if (output_wants_generic(&cli->out)) {
        output_object(stdout, &cli->out, job, job_known_columns);
        return CLI_OK;
    }
    char step[256];
    cell_step(job, step, sizeof step);
    const char *ex = json_string_value(json_object_get(job, "execution"));
    printf("job %s: %s (execution %s%s%s)\n", uuid, what, ex != NULL ? ex : "?",
           strcmp(step, "-") != 0 ? ", step " : "", strcmp(step, "-") != 0 ? step : "");
    return CLI_OK;
}

/* ---- create -------------------------------------------------------------------- */

static const struct option create_long[] = {
    {"params", required_argument, NULL, 'p'},
    {"file", required_argument, NULL, 'f'},
    {"target", required_argument, NULL, OPT_TARGET},
    {"exec-after", required_argument, NULL, OPT_EXEC_AFTER},
    {"locks", required_argument, NULL, OPT_LOCKS},
    {"watch", no_argument, NULL, OPT_WATCH},
    {"poll", no_argument, NULL, OPT_POLL},
    {NULL, 0, NULL, 0},
};

static cli_status_t job_create(cli_t *cli, int argc, char **argv)
{
    job_opts_t o = {.params = json_object()};
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, "p:f:", create_long, on_job_opt, &o, &first, &st))
        goto Done;
    if (first >= argc) {
        st = cli_usage(cli, "missing WORKFLOW (a workflow name, NAME@VERSION or uuid)");
        goto Done;
    }
    if (first + 1 < argc) {
        st = cli_usage(cli, "unexpected argument \"%s\" (params are given with -p KEY=VALUE)",
                       argv[first + 1]);
        goto Done;
    }
    json_t *body = json_pack("{s:s, s:o}", "workflow", argv[first], "params", merged_params(&o));
    if (o.target != NULL)
        json_object_set_new(body, "target", json_string(o.target));
    if (o.locks != NULL)
        json_object_set_new(body, "locks", json_string(o.locks));
    if (o.exec_after_ms > 0) {
        char iso[32];
        iso8601_format(o.exec_after_ms, iso);
        json_object_set_new(body, "exec_after", json_string(iso));
    }
    client_reply_t reply;
    st = client_call(cli_client(cli), "POST", "/jobs", body, &reply, &cli->err);
    json_decref(body);
    if (st == CLI_OK) {
        const char *uuid = json_string_value(json_object_get(reply.json, "uuid"));
        if (uuid == NULL) {
            st = cli_fail(cli, CLI_UNREACHABLE, NULL, "POST /jobs answered without a job uuid");
        } else if (o.watch) {
            char *copy = xstrdup(uuid);
            st = watch_job(cli, copy, o.poll);
            free(copy);
        } else if (output_wants_generic(&cli->out)) {
            output_object(stdout, &cli->out, reply.json, job_known_columns);
        } else {
            printf("%s\n", uuid); /* just the uuid: J=$(tern job create ...) */
        }
    }
    client_reply_dispose(&reply);
Done:
    job_opts_dispose(&o);
    return st;
}

/* ---- get ----------------------------------------------------------------------- */

static uint64_t iso_ms(const json_t *v)
{
    uint64_t ms = 0;
    const char *s = json_string_value(v);
    return s != NULL && units_parse_iso(s, &ms) ? ms : 0;
}

static void cell_result_duration(const json_t *row, char *buf, size_t n)
{
    uint64_t a = iso_ms(json_object_get(row, "started_at"));
    uint64_t b = iso_ms(json_object_get(row, "finished_at"));
    if (a > 0 && b >= a)
        units_duration_ms(b - a, buf, n);
    else
        snprintf(buf, n, "-");
}

static void cell_result_outcome(const json_t *row, char *buf, size_t n)
{
    const json_t *e = json_object_get(row, "error");
    snprintf(buf, n, "%s", e != NULL && !json_is_null(e) ? "failed" : "ok");
}

/* The error ("Code: message") or the result, shortened. */
static void cell_result_detail(const json_t *row, char *buf, size_t n)
{
    const json_t *e = json_object_get(row, "error");
    char text[1024];
    if (e != NULL && !json_is_null(e)) {
        char code[128], msg[800];
        output_cell_text(json_object_get(e, "code"), code, sizeof code);
        output_cell_text(json_object_get(e, "message"), msg, sizeof msg);
        snprintf(text, sizeof text, "%s: %s", code, msg);
    } else {
        output_cell_text(json_object_get(row, "result"), text, sizeof text);
    }
    snprintf(buf, n, "%.*s%s", 80, text, strlen(text) > 80 ? "\u2026" : "");
}

static const output_column_t result_columns[] = {
    {"PHASE", "phase", NULL},
    {"STEP", "name", NULL},
    {"TASK", "task", NULL},
    {"OUTCOME", NULL, cell_result_outcome},
    {"ATTEMPTS", "attempts", NULL},
    {"DURATION", NULL, cell_result_duration},
    {"DETAIL", NULL, cell_result_detail},
    {NULL, NULL, NULL},
};

static void print_field(const char *name, const char *value)
{
    printf("%-10s %s\n", name, value);
}

static void print_job(const json_t *job)
{
    char cell[2048], a[64], b[64];
    output_cell_text(json_object_get(job, "uuid"), cell, sizeof cell);
    print_field("uuid", cell);
    output_cell_text(json_object_get(job, "name"), a, sizeof a);
    output_cell_text(json_object_get(job, "version"), b, sizeof b);
    snprintf(cell, sizeof cell, "%s %s", a, b);
    print_field("workflow", cell);
    output_cell_text(json_object_get(job, "execution"), cell, sizeof cell);
    if (json_is_true(json_object_get(job, "cancel_requested")) && unfinished(job))
        snprintf(cell + strlen(cell), sizeof cell - strlen(cell), " (cancel requested)");
    print_field("execution", cell);
    if (unfinished(job)) {
        cell_step(job, cell, sizeof cell);
        const json_t *attempt = json_object_get(json_object_get(job, "cursor"), "attempt");
        if (json_integer_value(attempt) > 0)
            snprintf(cell + strlen(cell), sizeof cell - strlen(cell), " (attempt %lld)",
                     (long long)json_integer_value(attempt) + 1);
        print_field("step", cell);
    }
    static const char *const plain[][2] = {
        {"target", "target"},      {"params", "params"},         {"queue", "queue"},
        {"created", "created_at"}, {"exec_after", "exec_after"}, {"finished", "finished_at"},
        {"runner", "runner_id"},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(plain); i++) {
        const json_t *v = json_object_get(job, plain[i][1]);
        if (v == NULL || (json_is_null(v) && strcmp(plain[i][0], "target") != 0))
            continue;
        output_cell_text(v, cell, sizeof cell);
        print_field(plain[i][0], cell);
    }
    cell_elapsed(job, a, sizeof a);
    if (strcmp(a, "-") != 0)
        print_field("elapsed", a);
    const json_t *err = json_object_get(job, "error");
    if (json_is_object(err)) {
        const json_t *step = json_object_get(err, "step");
        output_cell_text(json_object_get(err, "code"), a, sizeof a);
        output_cell_text(json_object_get(err, "message"), cell, sizeof cell - 200);
        if (json_is_string(step)) {
            output_cell_text(step, b, sizeof b);
            snprintf(cell + strlen(cell), sizeof cell - strlen(cell), " (step %s)", b);
        }
        printf("%-10s %s: %s\n", "error", a, cell);
    }
    const json_t *wait = json_object_get(job, "wait_info");
    if (wait != NULL && !json_is_null(wait)) {
        output_cell_text(wait, cell, sizeof cell);
        print_field("waiting", cell);
    }
    size_t i;
    const json_t *h;
    json_array_foreach(json_object_get(job, "history"), i, h)
    {
        output_cell_text(json_object_get(h, "time"), a, sizeof a);
        output_cell_text(json_object_get(h, "action"), b, sizeof b);
        char caller[128];
        output_cell_text(json_object_get(h, "caller"), caller, sizeof caller);
        snprintf(cell, sizeof cell, "%s %s by %s", a, b, caller);
        print_field(i == 0 ? "history" : "", cell);
    }

    json_t *rows = json_array();
    static const char *const lists[][2] = {{"chain_results", "chain"},
                                           {"onerror_results", "onerror"},
                                           {"oncancel_results", "oncancel"}};
    for (size_t l = 0; l < TERN_ARRAY_SIZE(lists); l++) {
        size_t k;
        const json_t *r;
        json_array_foreach(json_object_get(job, lists[l][0]), k, r)
        {
            json_t *row = json_deep_copy(r);
            if (!json_is_object(row)) {
                json_decref(row);
                continue;
            }
            json_object_set_new(row, "phase", json_string(lists[l][1]));
            json_array_append_new(rows, row);
        }
    }
    if (json_array_size(rows) > 0) {
        printf("\n");
        output_opts_t o = {0};
        output_table(stdout, &o, rows, result_columns, NULL);
    }
    json_decref(rows);
}

static cli_status_t job_get(cli_t *cli, int argc, char **argv)
{
    int first;
    cli_status_t st;
    const char *uuid = NULL;
    if (!args_parse(cli, argc, argv, "", NULL, NULL, NULL, &first, &st))
        return st;
    if ((st = one_uuid(cli, argc, argv, first, &uuid)) != CLI_OK)
        return st;
    json_t *job;
    st = job_request(cli, "GET", uuid, "", NULL, &job);
    if (st == CLI_OK) {
        if (output_wants_generic(&cli->out))
            output_object(stdout, &cli->out, job, job_known_columns);
        else
            print_job(job);
    }
    json_decref(job);
    return st;
}

/* ---- list ---------------------------------------------------------------------- */

static cli_status_t job_list(cli_t *cli, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"execution", required_argument, NULL, OPT_EXECUTION},
        {"limit", required_argument, NULL, OPT_LIMIT},
        {"marker", required_argument, NULL, OPT_MARKER},
        {"all", no_argument, NULL, OPT_ALL},
        {NULL, 0, NULL, 0},
    };
    job_opts_t o = {.params = json_object(), .limit = 50};
    int first;
    cli_status_t st;
    json_t *rows = NULL;
    char *next = NULL, *query = NULL;
    if (!args_parse(cli, argc, argv, "n:", longopts, on_job_opt, &o, &first, &st))
        goto Done;
    if (first < argc) {
        st = cli_usage(cli, "unexpected argument \"%s\"", argv[first]);
        goto Done;
    }
    if (o.limit == 0 && !o.all) {
        st = cli_usage(cli, "--limit: expected at least 1 (--all lists every job)");
        goto Done;
    }
    if (o.execution != NULL) {
        char *esc = client_escape(cli_client(cli), o.execution);
        query = xasprintf("execution=%s", esc);
        free(esc);
    }
    st = cli_get_list(cli, "/jobs", query, o.all ? 0 : o.limit, o.marker, &rows, &next);
    if (st != CLI_OK)
        goto Done;
    /* With -o, every known column can be chosen; else the default ones are shown. */
    output_table(stdout, &cli->out, rows,
                 cli->out.columns != NULL ? job_known_columns : job_columns, NULL);
    if (next != NULL && !cli->out.json)
        fprintf(stderr, "tern: more jobs: tern job list --marker %s%s%s\n", next,
                o.execution != NULL ? " --execution " : "", o.execution != NULL ? o.execution : "");
Done:
    json_decref(rows);
    free(next);
    free(query);
    job_opts_dispose(&o);
    return st;
}

/* ---- watch --------------------------------------------------------------------- */

static cli_status_t job_watch(cli_t *cli, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"poll", no_argument, NULL, OPT_POLL},
        {NULL, 0, NULL, 0},
    };
    job_opts_t o = {.params = json_object()};
    int first;
    cli_status_t st;
    const char *uuid = NULL;
    if (args_parse(cli, argc, argv, "", longopts, on_job_opt, &o, &first, &st) &&
        (st = one_uuid(cli, argc, argv, first, &uuid)) == CLI_OK)
        st = watch_job(cli, uuid, o.poll);
    job_opts_dispose(&o);
    return st;
}

/* ---- cancel, resume, retry ----------------------------------------------------- */

static const struct option action_long[] = {
    {"watch", no_argument, NULL, OPT_WATCH},         {"poll", no_argument, NULL, OPT_POLL},
    {"result", required_argument, NULL, OPT_RESULT}, {"error", required_argument, NULL, OPT_ERROR},
    {"from", required_argument, NULL, OPT_FROM},     {"params", required_argument, NULL, 'p'},
    {"file", required_argument, NULL, 'f'},          {NULL, 0, NULL, 0},
};

/* Parses an action's options, refusing those that belong to other actions. */
static bool action_parse(cli_t *cli, int argc, char **argv, job_opts_t *o, const char *verb,
                         const char **uuid, cli_status_t *st)
{
    int first;
    if (!args_parse(cli, argc, argv, "p:f:", action_long, on_job_opt, o, &first, st))
        return false;
    bool resume = strcmp(verb, "resume") == 0, retry = strcmp(verb, "retry") == 0;
    const char *bad = NULL;
    if (!resume && o->result != NULL)
        bad = "--result";
    else if (!resume && o->error != NULL)
        bad = "--error";
    else if (!retry && o->from != NULL)
        bad = "--from";
    else if (!retry && (json_object_size(o->params) > 0 || o->file != NULL))
        bad = "-p/-f";
    if (bad != NULL) {
        *st = cli_usage(cli, "%s does not apply to job %s", bad, verb);
        return false;
    }
    *st = one_uuid(cli, argc, argv, first, uuid);
    return *st == CLI_OK;
}

static cli_status_t job_cancel(cli_t *cli, int argc, char **argv)
{
    job_opts_t o = {.params = json_object()};
    const char *uuid = NULL;
    cli_status_t st;
    if (action_parse(cli, argc, argv, &o, "cancel", &uuid, &st)) {
        json_t *job;
        st = job_request(cli, "POST", uuid, "/cancel", NULL, &job);
        if (st == CLI_OK) {
            const char *ex = json_string_value(json_object_get(job, "execution"));
            st = after_action(cli, &o, uuid, job,
                              ex != NULL && strcmp(ex, "canceled") == 0 ? "canceled"
                                                                        : "cancel requested");
        }
        json_decref(job);
    }
    job_opts_dispose(&o);
    return st;
}

static cli_status_t job_resume(cli_t *cli, int argc, char **argv)
{
    job_opts_t o = {.params = json_object()};
    const char *uuid = NULL;
    cli_status_t st;
    json_t *body = NULL;
    if (!action_parse(cli, argc, argv, &o, "resume", &uuid, &st))
        goto Done;
    if (o.result != NULL && o.error != NULL) {
        st = cli_usage(cli, "--result and --error exclude each other");
        goto Done;
    }
    body = json_object();
    if (o.result != NULL) {
        json_error_t jerr;
        json_t *r = json_loads(o.result, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
        if (r == NULL) {
            st = cli_usage(cli, "--result: not JSON: %s (strings are quoted: '\"text\"')",
                           jerr.text);
            goto Done;
        }
        json_object_set_new(body, "result", r);
    } else if (o.error != NULL) {
        const char *colon = strchr(o.error, ':');
        size_t clen = colon != NULL ? (size_t)(colon - o.error) : strlen(o.error);
        if (clen == 0) {
            st = cli_usage(cli, "--error \"%s\": expected CODE:MESSAGE", o.error);
            goto Done;
        }
        json_t *e = json_pack("{s:s%, s:s}", "code", o.error, clen, "message",
                              colon != NULL ? colon + 1 : "");
        json_object_set_new(body, "error", e);
    }
    json_t *job;
    st = job_request(cli, "POST", uuid, "/resume", body, &job);
    if (st == CLI_OK)
        st = after_action(cli, &o, uuid, job, "resumed");
    json_decref(job);
Done:
    json_decref(body);
    job_opts_dispose(&o);
    return st;
}

static cli_status_t job_retry(cli_t *cli, int argc, char **argv)
{
    job_opts_t o = {.params = json_object()};
    const char *uuid = NULL;
    cli_status_t st;
    if (action_parse(cli, argc, argv, &o, "retry", &uuid, &st)) {
        json_t *body = json_object();
        if (o.from != NULL)
            json_object_set_new(body, "from_step", json_string(o.from));
        if (json_object_size(o.params) > 0 || o.file != NULL)
            json_object_set_new(body, "params", merged_params(&o));
        json_t *job;
        st = job_request(cli, "POST", uuid, "/retry", body, &job);
        if (st == CLI_OK)
            st = after_action(cli, &o, uuid, job, "retried");
        json_decref(job);
        json_decref(body);
    }
    job_opts_dispose(&o);
    return st;
}

/* ---- info ---------------------------------------------------------------------- */

static cli_status_t job_info(cli_t *cli, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"add", required_argument, NULL, OPT_ADD},
        {NULL, 0, NULL, 0},
    };
    job_opts_t o = {.params = json_object()};
    int first;
    cli_status_t st;
    const char *uuid = NULL;
    json_t *entry = NULL, *answer = NULL;
    if (!args_parse(cli, argc, argv, "", longopts, on_job_opt, &o, &first, &st) ||
        (st = one_uuid(cli, argc, argv, first, &uuid)) != CLI_OK)
        goto Done;
    if (o.add != NULL) {
        json_error_t jerr;
        entry = json_loads(o.add, JSON_REJECT_DUPLICATES, &jerr);
        if (!json_is_object(entry)) {
            st = cli_usage(cli, "--add: expected a JSON object%s%s", entry == NULL ? ": " : "",
                           entry == NULL ? jerr.text : "");
            goto Done;
        }
        st = job_request(cli, "POST", uuid, "/info", entry, &answer);
        if (st == CLI_OK && cli->out.json && answer != NULL)
            output_json(stdout, answer);
        goto Done;
    }
    st = job_request(cli, "GET", uuid, "/info", NULL, &answer);
    if (st != CLI_OK)
        goto Done;
    if (output_wants_generic(&cli->out)) {
        output_column_t *cols = output_auto_columns(answer);
        output_table(stdout, &cli->out, answer, cols, NULL);
        free(cols);
    } else {
        /* Entries are free-form objects: one compact JSON line each. */
        size_t i;
        const json_t *e;
        json_array_foreach(answer, i, e)
        {
            char *s = json_dumps(e, JSON_COMPACT | JSON_ENCODE_ANY);
            printf("%s\n", s != NULL ? s : "");
            free(s);
        }
    }
Done:
    json_decref(entry);
    json_decref(answer);
    job_opts_dispose(&o);
    return st;
}

/* ---- the table ----------------------------------------------------------------- */

#define PARAMS_HELP                                                                                \
    "  -p, --params KEY=VALUE  a parameter; VALUE is JSON when it parses as JSON (42,\n"           \
    "                          true, '{\"a\":1}', '\"007\"'), else a string; a dotted KEY\n"       \
    "                          builds objects (-p disk.size=10); repeatable\n"                     \
    "  -f, --file FILE         parameters from a JSON object in FILE (\"-\": stdin);\n"            \
    "                          -p values are set over them\n"

const cli_command_t cmd_job_commands[] = {
    {"job", "create", job_create,
     "job create WORKFLOW [-p KEY=VALUE]... [-f FILE] [--target T] [--exec-after TIME] "
     "[--locks RE] [--watch]",
     "Create a job of a workflow (a name, NAME@VERSION or uuid).",
     PARAMS_HELP
     "  --target T              what the job acts on (one unfinished job per target\n"
     "                          and params)\n"
     "  --exec-after TIME       not before TIME: ISO 8601 (2026-11-21T04:47:28Z) or\n"
     "                          +N[s|m|h|d] from now (+10m)\n"
     "  --locks RE              refuse other jobs whose target matches RE meanwhile\n"
     "  --watch                 follow the job as `tern job watch` does; the exit status\n"
     "                          is then the job's (0 succeeded, 1 failed or canceled)\n"
     "  --poll                  with --watch: poll instead of the event stream\n"
     "Prints the new job's uuid; -j prints the job.\n"},
    {"job", "get", job_get, "job get UUID", "Show a job: where it is, its params, its steps.",
     "-j prints the job as the API has it; -o picks fields (-o execution -H).\n"},
    {"job", "list", job_list, "job list [--execution E] [--limit N] [--marker M] [--all]",
     "List jobs, newest first.",
     "  --execution E   only jobs in E: queued, running, waiting, succeeded, failed,\n"
     "                  canceled, retried\n"
     "  -n, --limit N   at most N jobs (default 50); the marker of the rest is printed\n"
     "                  on stderr\n"
     "  --marker M      start where a previous list stopped\n"
     "  --all           every job\n"
     "Columns: UUID WORKFLOW EXECUTION TARGET CREATED ELAPSED STEP; -o also knows\n"
     "VERSION QUEUE RUNNER FINISHED ERROR PARAMS, or takes any JSON path of a job.\n"},
    {"job", "watch", job_watch, "job watch UUID [--poll]",
     "Follow a job until it finishes: a line per step, live progress, the outcome.",
     "One line per finished step with its mark and duration (\u2713 succeeded, \u2717 failed,\n"
     "\u21bb retry, \u23f8 waiting, \u2298 canceled); on a terminal, the running step's progress\n"
     "bar (percent, bytes, rate, ETA) redrawn in place. Piped: plain lines only.\n"
     "With -j, each event as a JSON line. Ctrl-C stops watching, not the job (exit 130).\n"
     "  --poll          poll the job every 500 ms instead of reading its event stream\n"
     "Exit status 0 when the job succeeded, 1 when it failed or was canceled.\n"},
    {"job", "cancel", job_cancel, "job cancel UUID [--watch]", "Cancel a job.",
     "A queued job ends canceled at once; a running one has its step stopped, then its\n"
     "oncancel chain runs.\n"
     "  --watch         follow it until it ends (exit 1: canceled)\n"},
    {"job", "resume", job_resume,
     "job resume UUID [--result JSON | --error CODE:MESSAGE] [--watch]",
     "Resume a waiting job with its waiting step's outcome.",
     "  --result JSON        the step's result (any JSON; without it, the API's default)\n"
     "  --error CODE:MESSAGE the step fails with this error instead (MESSAGE optional)\n"
     "  --watch              follow the job until it ends\n"},
    {"job", "retry", job_retry,
     "job retry UUID [--from STEP] [-p KEY=VALUE]... [-f FILE] [--watch]",
     "Retry a failed or canceled job from the step that failed.",
     "Earlier results are kept.\n"
     "  --from STEP             start at this chain step instead\n" PARAMS_HELP
     "                          (merged over the job's params)\n"
     "  --watch                 follow the job until it ends\n"},
    {"job", "info", job_info, "job info UUID [--add JSON]",
     "Show a job's info entries, or add one.",
     "Info entries are JSON objects that programs working for the job post.\n"
     "  --add JSON      append this object\n"},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};
