/*
 * cmd_workflow.c -- `tern workflow load|list|get|validate`.
 *
 * Validation. The API has no dry-run endpoint, and none is needed: `validate` runs the
 * engine's own parser (workflow.c, linked into the CLI) on each file, and checks every
 * step's task and arguments against the tasks the API has loaded (GET /tasks, with
 * their argument schemas) exactly as POST /workflows would, with the same messages. Only
 * what depends on the store is left to `load`: whether that name and version already
 * holds another definition. `--offline` skips the API: the form of the file is checked
 * (JSON, names, templates, retry policies, timeouts, holds, "family.entry" task names)
 * but not whether the tasks exist.
 */
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "base/alloc.h"
#include "cli.h"
#include "client.h"
#include "model/workflow.h"
#include "task_catalog.h"

/* ---- columns ------------------------------------------------------------------- */

static void cell_steps(const json_t *row, char *buf, size_t n)
{
    snprintf(buf, n, "%zu", json_array_size(json_object_get(row, "chain")));
}

static const output_column_t workflow_columns[] = {
    {"NAME", "name", NULL},      {"VERSION", "version", NULL}, {"UUID", "uuid", NULL},
    {"STEPS", NULL, cell_steps}, {"QUEUE", "queue", NULL},     {NULL, NULL, NULL},
};

/* ---- load ---------------------------------------------------------------------- */

static const output_column_t load_columns[] = {
    {"STATUS", "status", NULL}, {"NAME", "name", NULL}, {"VERSION", "version", NULL},
    {"UUID", "uuid", NULL},     {"FILE", "file", NULL}, {NULL, NULL, NULL},
};

/* Reads and decodes one workflow file. Returns CLI_OK and *doc, or CLI_USAGE (the file
 * cannot be read or is not a JSON object) with the message in cli->err. */
static cli_status_t read_doc(cli_t *cli, const char *file, json_t **doc)
{
    char *buf = NULL, err[600];
    size_t len = 0;
    if (cli_read_file(file, &buf, &len, err, sizeof err) != 0)
        return cli_fail(cli, CLI_USAGE, NULL, "%s", err);
    json_error_t jerr;
    *doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    free(buf);
    if (*doc == NULL)
        return cli_fail(cli, CLI_USAGE, NULL, "%s: line %d, column %d: %s", file, jerr.line,
                        jerr.column, jerr.text);
    if (!json_is_object(*doc)) {
        json_decref(*doc);
        *doc = NULL;
        return cli_fail(cli, CLI_USAGE, NULL, "%s: expected a workflow definition (an object)",
                        file);
    }
    return CLI_OK;
}

static cli_status_t workflow_load(cli_t *cli, int argc, char **argv)
{
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, "", NULL, NULL, NULL, &first, &st))
        return st;
    if (first >= argc)
        return cli_usage(cli, "missing FILE");
    json_t *rows = json_array(), *docs = json_array();
    cli_status_t worst = CLI_OK;
    for (int i = first; i < argc; i++) {
        json_t *doc = NULL;
        st = read_doc(cli, argv[i], &doc);
        client_reply_t reply = {0};
        if (st == CLI_OK)
            st = client_call(cli_client(cli), "POST", "/workflows", doc, &reply, &cli->err);
        json_decref(doc);
        if (st == CLI_OK) {
            const json_t *w = reply.json;
            json_array_append_new(rows, json_pack("{s:s, s:O?, s:O?, s:O?, s:s}", "status",
                                                  reply.status == 201 ? "created" : "unchanged",
                                                  "name", json_object_get(w, "name"), "version",
                                                  json_object_get(w, "version"), "uuid",
                                                  json_object_get(w, "uuid"), "file", argv[i]));
            json_array_append(docs, reply.json);
        } else {
            if (st == CLI_API) {
                /* Name the file in the API's message. */
                char msg[sizeof cli->err.message + 512];
                snprintf(msg, sizeof msg, "%s: %s", argv[i], cli->err.message);
                memcpy(cli->err.message, msg, sizeof cli->err.message - 1);
                cli->err.message[sizeof cli->err.message - 1] = '\0';
            }
            if (st == CLI_INTERRUPTED || st == CLI_UNREACHABLE) {
                client_reply_dispose(&reply);
                worst = st;
                break;
            }
            cli_error_print(cli);
            if (worst == CLI_OK)
                worst = st;
        }
        client_reply_dispose(&reply);
    }
    if (json_array_size(rows) > 0)
        output_table(stdout, &cli->out, rows, load_columns, docs);
    json_decref(rows);
    json_decref(docs);
    return worst;
}

/* ---- list ---------------------------------------------------------------------- */

typedef struct list_opts {
    unsigned long limit;
    const char *name;
} list_opts_t;

enum { OPT_LIMIT = 0x100, OPT_NAME, OPT_OFFLINE };

static cli_status_t on_list_opt(cli_t *cli, void *data, int c, const char *arg)
{
    list_opts_t *o = data;
    if (c == OPT_LIMIT || c == 'n')
        return args_uint(cli, "--limit", arg, 1000000, &o->limit);
    if (c == OPT_NAME)
        o->name = arg;
    return CLI_OK;
}

static cli_status_t workflow_list(cli_t *cli, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"limit", required_argument, NULL, OPT_LIMIT},
        {"name", required_argument, NULL, OPT_NAME},
        {NULL, 0, NULL, 0},
    };
    list_opts_t o = {.limit = 100};
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, "n:", longopts, on_list_opt, &o, &first, &st))
        return st;
    if (first < argc)
        return cli_usage(cli, "unexpected argument \"%s\"", argv[first]);
    char *query = NULL;
    if (o.name != NULL) {
        char *esc = client_escape(cli_client(cli), o.name);
        query = xasprintf("name=%s", esc);
        free(esc);
    }
    json_t *rows = NULL;
    char *next = NULL;
    st = cli_get_list(cli, "/workflows", query, o.limit, NULL, &rows, &next);
    free(query);
    if (st != CLI_OK)
        return st;
    output_table(stdout, &cli->out, rows, workflow_columns, NULL);
    if (next != NULL)
        fprintf(stderr, "tern: more workflows than --limit %lu\n", o.limit);
    json_decref(rows);
    free(next);
    return CLI_OK;
}

/* ---- get ----------------------------------------------------------------------- */

static void cell_retry(const json_t *row, char *buf, size_t n)
{
    const json_t *r = json_object_get(row, "retry");
    if (json_is_integer(r)) {
        snprintf(buf, n, "%lld attempts", (long long)json_integer_value(r));
    } else if (json_is_object(r)) {
        const json_t *max = json_object_get(r, "max_attempts");
        const char *kind = json_string_value(json_object_get(r, "backoff"));
        snprintf(buf, n, "%lld attempts, %s", (long long)json_integer_value(max),
                 kind != NULL ? kind : "exponential");
    } else {
        snprintf(buf, n, "-");
    }
}

static void cell_timeout(const json_t *row, char *buf, size_t n)
{
    const json_t *t = json_object_get(row, "timeout");
    if (json_is_number(t))
        snprintf(buf, n, "%g s", json_number_value(t));
    else
        snprintf(buf, n, "-");
}

static const output_column_t step_columns[] = {
    {"PHASE", "phase", NULL},
    {"#", "index", NULL},
    {"STEP", "name", NULL},
    {"TASK", "task", NULL},
    {"TIMEOUT", NULL, cell_timeout},
    {"RETRY", NULL, cell_retry},
    {"FALLBACK", "fallback.task", NULL},
    {NULL, NULL, NULL},
};

static void print_workflow(const json_t *w)
{
    char cell[1024];
    static const char *const fields[] = {"name", "version", "uuid", "queue", "timeout", "holds"};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(fields); i++) {
        output_cell_text(json_object_get(w, fields[i]), cell, sizeof cell);
        printf("%-9s %s%s\n", fields[i], cell,
               strcmp(fields[i], "timeout") == 0 && strcmp(cell, "-") != 0 ? " s" : "");
    }
    json_t *steps = json_array();
    static const char *const phases[] = {"chain", "onerror", "oncancel"};
    for (size_t p = 0; p < TERN_ARRAY_SIZE(phases); p++) {
        size_t i;
        const json_t *s;
        json_array_foreach(json_object_get(w, phases[p]), i, s)
        {
            json_t *row = json_deep_copy(s);
            json_object_set_new(row, "phase", json_string(phases[p]));
            json_object_set_new(row, "index", json_integer((json_int_t)i));
            json_array_append_new(steps, row);
        }
    }
    printf("\n");
    output_opts_t plain = {0};
    output_table(stdout, &plain, steps, step_columns, NULL);
    json_decref(steps);
}

static cli_status_t workflow_get(cli_t *cli, int argc, char **argv)
{
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, "", NULL, NULL, NULL, &first, &st))
        return st;
    if (first >= argc)
        return cli_usage(cli, "missing NAME_OR_UUID");
    if (first + 1 < argc)
        return cli_usage(cli, "unexpected argument \"%s\"", argv[first + 1]);
    char *esc = client_escape(cli_client(cli), argv[first]);
    char *path = xasprintf("/workflows/%s", esc);
    free(esc);
    client_reply_t reply;
    st = client_call(cli_client(cli), "GET", path, NULL, &reply, &cli->err);
    free(path);
    if (st == CLI_OK) {
        if (output_wants_generic(&cli->out))
            output_object(stdout, &cli->out, reply.json, workflow_columns);
        else
            print_workflow(reply.json);
    }
    client_reply_dispose(&reply);
    return st;
}

/* ---- validate ------------------------------------------------------------------ */

static cli_status_t on_validate_opt(cli_t *cli, void *data, int c, const char *arg)
{
    (void)cli;
    (void)arg;
    if (c == OPT_OFFLINE)
        *(bool *)data = true;
    return CLI_OK;
}

static const output_column_t validate_columns[] = {
    {"FILE", "file", NULL},       {"VALID", "valid", NULL}, {"NAME", "name", NULL},
    {"VERSION", "version", NULL}, {"ERROR", "error", NULL}, {NULL, NULL, NULL},
};

/* Validates one file. Returns its row: {file, valid, name, version, steps, error}. */
static json_t *validate_file(cli_t *cli, const char *file, task_catalog_t *cat)
{
    char *buf = NULL, err[1024];
    size_t len = 0;
    json_t *row = json_pack("{s:s}", "file", file);
    workflow_t *wf = NULL;
    int rc = cli_read_file(file, &buf, &len, err, sizeof err);
    if (rc == 0) {
        char perr[900];
        rc = workflow_parse_text(buf, len, cat != NULL ? task_catalog_check : NULL, cat, &wf, perr,
                                 sizeof perr);
        if (rc != 0)
            snprintf(err, sizeof err, "%s", perr);
    }
    free(buf);
    (void)cli;
    json_object_set_new(row, "valid", json_boolean(rc == 0));
    if (rc == 0) {
        json_object_set_new(row, "name", json_string(wf->name));
        json_object_set_new(row, "version", json_string(wf->version));
        json_object_set_new(row, "steps", json_integer((json_int_t)wf->n_steps[WF_CHAIN]));
        json_object_set_new(row, "error", json_null());
    } else {
        json_object_set_new(row, "error", json_string(err));
    }
    workflow_free(wf);
    return row;
}

static cli_status_t workflow_validate(cli_t *cli, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"offline", no_argument, NULL, OPT_OFFLINE},
        {NULL, 0, NULL, 0},
    };
    bool offline = false;
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, "", longopts, on_validate_opt, &offline, &first, &st))
        return st;
    if (first >= argc)
        return cli_usage(cli, "missing FILE");
    task_catalog_t *cat = NULL;
    if (!offline) {
        client_reply_t reply;
        st = client_call(cli_client(cli), "GET", "/tasks", NULL, &reply, &cli->err);
        if (st == CLI_OK)
            cat = task_catalog_new(reply.json);
        client_reply_dispose(&reply);
        if (st == CLI_UNREACHABLE)
            snprintf(cli->err.message + strlen(cli->err.message),
                     sizeof cli->err.message - strlen(cli->err.message),
                     " (the API lists the tasks to check against; --offline checks the "
                     "form only)");
        if (st != CLI_OK)
            return st;
    }
    json_t *rows = json_array();
    cli_status_t result = CLI_OK;
    for (int i = first; i < argc; i++) {
        json_t *row = validate_file(cli, argv[i], cat);
        if (!json_is_true(json_object_get(row, "valid")))
            result = CLI_FAILED;
        json_array_append_new(rows, row);
    }
    if (output_wants_generic(&cli->out)) {
        output_table(stdout, &cli->out, rows, validate_columns, NULL);
    } else {
        size_t i;
        const json_t *row;
        json_array_foreach(rows, i, row)
        {
            char file[512], name[256], version[128], error[1100];
            output_cell_text(json_object_get(row, "file"), file, sizeof file);
            output_cell_text(json_object_get(row, "name"), name, sizeof name);
            output_cell_text(json_object_get(row, "version"), version, sizeof version);
            output_cell_text(json_object_get(row, "error"), error, sizeof error);
            json_int_t steps = json_integer_value(json_object_get(row, "steps"));
            if (json_is_true(json_object_get(row, "valid")))
                printf("%s: valid (%s %s, %lld step%s%s)\n", file, name, version, (long long)steps,
                       steps == 1 ? "" : "s", offline ? "; tasks not checked: --offline" : "");
            else
                printf("%s: invalid: %s\n", file, error);
        }
    }
    json_decref(rows);
    task_catalog_free(cat);
    return result;
}

/* ---- the table ----------------------------------------------------------------- */

const cli_command_t cmd_workflow_commands[] = {
    {"workflow", "load", workflow_load, "workflow load FILE...",
     "Store workflow definitions (JSON files; \"-\" reads standard input).",
     "Each file is sent to POST /workflows. A name and version already stored with the\n"
     "same definition is left as it is (\"unchanged\"); with another definition it is\n"
     "refused: versions are immutable, give the new definition a new version.\n"
     "Prints STATUS NAME VERSION UUID FILE per file; -j prints the stored documents.\n"
     "Exit status 2 when a file cannot be read or is not JSON, 3 when the API refuses\n"
     "one; the other files are loaded all the same.\n"},
    {"workflow", "list", workflow_list, "workflow list [--name NAME] [--limit N]",
     "List stored workflow versions, newest first.",
     "  --name NAME      only the versions of this workflow\n"
     "  -n, --limit N    at most N versions (default 100)\n"
     "Columns: NAME VERSION UUID STEPS QUEUE.\n"},
    {"workflow", "get", workflow_get, "workflow get NAME_OR_UUID",
     "Show a workflow: by uuid, NAME@VERSION, or NAME (its latest version).",
     "Prints its settings and a table of its steps; -j prints the definition.\n"},
    {"workflow", "validate", workflow_validate, "workflow validate [--offline] FILE...",
     "Check workflow files without storing them.",
     "Runs the engine's own validation on each file and checks every task and its\n"
     "arguments against the tasks the API has loaded (GET /tasks), so a file that is\n"
     "valid here is accepted by `tern workflow load` (unless that name and version is\n"
     "already stored with another definition).\n"
     "  --offline        do not ask the API: check the form only, not the tasks\n"
     "Exit status 0 when every file is valid, 1 when one is not.\n"},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};
