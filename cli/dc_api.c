/*
 * dc_api.c -- reading the datacenter's views and creating its jobs; see dc_api.h.
 */
#include "dc_api.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/ident.h"
#include "args.h"
#include "client.h"
#include "watch.h"

cli_status_t dc_list(cli_t *cli, const char *path, const char *query, json_t **rows)
{
    char *next = NULL;
    *rows = NULL; /* also on failure, so a caller may always json_decref it */
    cli_status_t st = cli_get_list(cli, path, query, 0, NULL, rows, &next);
    free(next);
    return st;
}

cli_status_t dc_get(cli_t *cli, const char *collection, const char *uuid, json_t **obj)
{
    char *esc = client_escape(cli_client(cli), uuid);
    char *path = xasprintf("%s/%s", collection, esc);
    free(esc);
    client_reply_t reply;
    cli_status_t st = client_call(cli_client(cli), "GET", path, NULL, &reply, &cli->err);
    free(path);
    *obj = NULL;
    if (st == CLI_OK && !json_is_object(reply.json))
        st = cli_fail(cli, CLI_UNREACHABLE, NULL, "GET %s/%s: expected a JSON object", collection,
                      uuid);
    if (st == CLI_OK)
        *obj = json_incref(reply.json);
    client_reply_dispose(&reply);
    return st;
}

cli_status_t dc_find(cli_t *cli, const char *collection, const char *name_field, const char *what,
                     const char *ref, json_t **obj)
{
    *obj = NULL;
    if (uuid_valid(ref)) {
        cli_status_t st = dc_get(cli, collection, ref, obj);
        if (st == CLI_API && strcmp(cli->err.code, "ResourceNotFound") == 0)
            return cli_fail(cli, CLI_API, "ResourceNotFound", "no %s %s", what, ref);
        return st;
    }
    json_t *rows;
    cli_status_t st = dc_list(cli, collection, NULL, &rows);
    if (st != CLI_OK)
        return st;
    size_t i, found = 0;
    json_t *row;
    json_array_foreach(rows, i, row)
    {
        const char *name = json_string_value(json_object_get(row, name_field));
        if (name != NULL && strcmp(name, ref) == 0) {
            if (found++ == 0)
                *obj = json_incref(row);
        }
    }
    json_decref(rows);
    if (found == 1)
        return CLI_OK;
    json_decref(*obj);
    *obj = NULL;
    if (found == 0)
        return cli_fail(cli, CLI_API, "ResourceNotFound", "no %s whose uuid or %s is \"%s\"", what,
                        name_field, ref);
    return cli_fail(cli, CLI_API, "AmbiguousName",
                    "%zu %ss have the %s \"%s\": name one by its uuid", found, what, name_field,
                    ref);
}

cli_status_t dc_find_uuid(cli_t *cli, const char *collection, const char *name_field,
                          const char *what, const char *ref, char uuid[37])
{
    json_t *obj;
    cli_status_t st = dc_find(cli, collection, name_field, what, ref, &obj);
    if (st != CLI_OK)
        return st;
    const char *u = json_string_value(json_object_get(obj, "uuid"));
    if (u == NULL || strlen(u) != 36) {
        json_decref(obj);
        return cli_fail(cli, CLI_UNREACHABLE, NULL, "the %s \"%s\" came without a uuid", what, ref);
    }
    memcpy(uuid, u, 37);
    json_decref(obj);
    return CLI_OK;
}

void dc_query_add(cli_t *cli, char **query, const char *key, const char *value)
{
    char *esc = client_escape(cli_client(cli), value);
    char *q =
        xasprintf("%s%s%s=%s", *query != NULL ? *query : "", *query != NULL ? "&" : "", key, esc);
    free(esc);
    free(*query);
    *query = q;
}

cli_status_t dc_submit(cli_t *cli, const char *workflow, const char *target, const json_t *params,
                       bool watch, const char *what)
{
    json_t *body =
        json_pack("{s:s, s:s, s:O}", "workflow", workflow, "target", target, "params", params);
    client_reply_t reply;
    cli_status_t st = client_call(cli_client(cli), "POST", "/jobs", body, &reply, &cli->err);
    json_decref(body);
    if (st == CLI_OK) {
        const char *uuid = json_string_value(json_object_get(reply.json, "uuid"));
        if (uuid == NULL) {
            st = cli_fail(cli, CLI_UNREACHABLE, NULL, "POST /jobs answered without a job uuid");
        } else if (watch) {
            if (!cli->out.json)
                printf("%s: job %s\n", what, uuid);
            char *copy = xstrdup(uuid);
            st = watch_job(cli, copy, false);
            free(copy);
        } else if (output_wants_generic(&cli->out)) {
            output_object(stdout, &cli->out, reply.json, NULL);
        } else {
            printf("%s: job %s\n", what, uuid);
        }
    }
    client_reply_dispose(&reply);
    return st;
}

void dc_cell_shortid(const json_t *row, char *buf, size_t n)
{
    const char *u = json_string_value(json_object_get(row, "uuid"));
    if (u == NULL)
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%.8s", u);
}

cli_status_t dc_no_options(cli_t *cli, void *data, int c, const char *arg)
{
    (void)data;
    (void)c;
    (void)arg;
    return cli_usage(cli, "unknown option");
}

cli_status_t dc_list_command(cli_t *cli, int argc, char **argv, const char *path,
                             const output_column_t *columns)
{
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, "", NULL, dc_no_options, NULL, &first, &st))
        return st;
    if (first < argc)
        return cli_usage(cli, "unexpected argument \"%s\"", argv[first]);
    json_t *rows;
    st = dc_list(cli, path, NULL, &rows);
    if (st == CLI_OK)
        output_table(stdout, &cli->out, rows, columns, NULL);
    json_decref(rows);
    return st;
}

cli_status_t dc_one_argument(cli_t *cli, int argc, char **argv, const char *what, const char **arg)
{
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, "", NULL, dc_no_options, NULL, &first, &st))
        return st;
    if (first >= argc)
        return cli_usage(cli, "missing %s", what);
    if (first + 1 < argc)
        return cli_usage(cli, "unexpected argument \"%s\"", argv[first + 1]);
    *arg = argv[first];
    return CLI_OK;
}
