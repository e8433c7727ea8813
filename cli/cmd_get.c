/*
 * cmd_get.c -- `tern get PATH`: any GET of the API whose answer's shape the CLI does not
 * know, above all the read views of plugins (GET /views lists them). An array is a
 * table (columns from -o, else the keys of its first object), following the pages of
 * x-tern-next-marker up to --limit; an object is KEY VALUE lines; -j prints the JSON.
 */
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "base/alloc.h"
#include "cli.h"
#include "client.h"

enum { OPT_LIMIT = 0x3000, OPT_MARKER };

typedef struct get_opts {
    unsigned long limit; /* 0: every page */
    const char *marker;
} get_opts_t;

static cli_status_t on_get_opt(cli_t *cli, void *data, int c, const char *arg)
{
    get_opts_t *o = data;
    switch (c) {
    case 'n':
    case OPT_LIMIT:
        return args_uint(cli, "--limit", arg, 10000000, &o->limit);
    case OPT_MARKER:
        o->marker = arg;
        return CLI_OK;
    default:
        return cli_usage(cli, "unknown option");
    }
}

/* An array: a table of its objects, or one line per value when it holds none. */
static void print_array(cli_t *cli, const json_t *rows)
{
    size_t i;
    const json_t *row;
    bool objects = false;
    json_array_foreach(rows, i, row) objects = objects || json_is_object(row);
    if (!objects && !cli->out.json) {
        json_array_foreach(rows, i, row)
        {
            char text[4096];
            output_cell_text(row, text, sizeof text);
            printf("%s\n", text);
        }
        return;
    }
    output_column_t *cols = output_auto_columns(rows);
    output_table(stdout, &cli->out, rows, cols, NULL);
    free(cols);
}

static cli_status_t get(cli_t *cli, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"limit", required_argument, NULL, OPT_LIMIT},
        {"marker", required_argument, NULL, OPT_MARKER},
        {NULL, 0, NULL, 0},
    };
    get_opts_t o = {0};
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, "n:", longopts, on_get_opt, &o, &first, &st))
        return st;
    if (first >= argc)
        return cli_usage(cli, "missing PATH (GET /views lists the views: tern get /views)");
    if (first + 1 < argc)
        return cli_usage(cli, "unexpected argument \"%s\"", argv[first + 1]);
    const char *path = argv[first];
    if (path[0] != '/')
        return cli_usage(cli, "PATH \"%s\": expected a path of the API, such as /views", path);
    if (o.marker != NULL && o.limit == 0)
        o.limit = CLI_PAGE_MAX;

    /* PATH may carry its own query ("/vms?state=running"); paging is added to it. */
    const char *q = strchr(path, '?');
    char *bare = q != NULL ? xstrndup(path, (size_t)(q - path)) : xstrdup(path);
    const char *query = q != NULL && q[1] != '\0' ? q + 1 : NULL;
    client_t *c = cli_client(cli);
    char *url;
    if (o.limit > 0 || o.marker != NULL) {
        char *m = o.marker != NULL ? client_escape(c, o.marker) : NULL;
        url =
            xasprintf("%s?limit=%lu%s%s%s%s", bare, o.limit < CLI_PAGE_MAX ? o.limit : CLI_PAGE_MAX,
                      query != NULL ? "&" : "", query != NULL ? query : "",
                      m != NULL ? "&marker=" : "", m != NULL ? m : "");
        free(m);
    } else {
        url = xstrdup(path);
    }
    client_reply_t reply;
    st = client_call(c, "GET", url, NULL, &reply, &cli->err);
    free(url);
    json_t *answer = st == CLI_OK ? json_incref(reply.json) : NULL;
    char *next = reply.next_marker;
    reply.next_marker = NULL;
    client_reply_dispose(&reply);
    if (st == CLI_OK && answer == NULL)
        st = cli_fail(cli, CLI_UNREACHABLE, NULL, "GET %s: the answer is not JSON", bare);

    /* The rest of a list, page by page, as `job list` reads its pages. */
    if (st == CLI_OK && json_is_array(answer) && next != NULL &&
        (o.limit == 0 || json_array_size(answer) < o.limit)) {
        json_t *more = NULL;
        char *after = NULL;
        unsigned long left = o.limit == 0 ? 0 : o.limit - json_array_size(answer);
        st = cli_get_list(cli, bare, query, left, next, &more, &after);
        if (st == CLI_OK) {
            json_array_extend(answer, more);
            json_decref(more);
            free(next);
            next = after;
        }
    }
    if (st == CLI_OK) {
        if (json_is_array(answer))
            print_array(cli, answer);
        else if (json_is_object(answer) && !output_wants_generic(&cli->out))
            output_fields(stdout, answer);
        else if (json_is_object(answer))
            output_object(stdout, &cli->out, answer, NULL);
        else
            output_json(stdout, answer);
        if (json_is_array(answer) && next != NULL && !cli->out.json)
            fprintf(stderr, "tern: more: tern get '%s' --marker %s\n", path, next);
    }
    json_decref(answer);
    free(next);
    free(bare);
    return st;
}

const cli_command_t cmd_get_commands[] = {
    {"get", NULL, get, "get PATH [--limit N] [--marker M]",
     "GET any path of the API, such as a plugin's view (tern get /views lists them).",
     "  PATH            the path, with its own query if any: /vms/UUID, '/vms?state=running'\n"
     "  -n, --limit N   at most N items of a list (default: every page); the marker of\n"
     "                  the rest is printed on stderr\n"
     "  --marker M      start after the item of a previous page's marker\n"
     "\n"
     "A list is printed as a table whose columns are the keys of its first object (-o\n"
     "chooses them), an object as KEY VALUE lines, -j prints the JSON. An error of the\n"
     "API is printed as \"tern: <code>: <message>\" (exit status 3).\n"},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};
