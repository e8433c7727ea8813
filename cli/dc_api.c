/*
 * dc_api.c -- reading the datacenter's views and creating its jobs; see dc_api.h.
 */
#include "dc_api.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/ident.h"
#include "args.h"
#include "client.h"
#include "watch.h"

/* $TERN_OWNER_UUID when set and not empty, else NULL (borrowed from the environment). */
static const char *owner_from_env(void)
{
    const char *env = getenv("TERN_OWNER_UUID");
    return env != NULL && env[0] != '\0' ? env : NULL;
}

const char *dc_owner(const char *given)
{
    if (given != NULL)
        return given;
    const char *env = owner_from_env();
    return env != NULL ? env : DC_DEFAULT_OWNER;
}

cli_status_t dc_owner_check(cli_t *cli, const char *given)
{
    const char *env = owner_from_env();
    if (given == NULL && env != NULL && !uuid_valid(env))
        return cli_usage(cli, "TERN_OWNER_UUID \"%s\": expected a uuid", env);
    return CLI_OK;
}

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
    bool by_uuid = uuid_valid(ref);
    if (by_uuid) {
        cli_status_t st = dc_get(cli, collection, ref, obj);
        if (st != CLI_API || strcmp(cli->err.code, "ResourceNotFound") != 0)
            return st;
        /* Not every collection has a view of one record (/networks, /images and
         * /packages have none, and a missing route is a 404 too): the list says. */
        memset(&cli->err, 0, sizeof cli->err);
    }
    json_t *rows;
    cli_status_t st = dc_list(cli, collection, NULL, &rows);
    if (st != CLI_OK)
        return st;
    size_t i, found = 0;
    json_t *row;
    json_array_foreach(rows, i, row)
    {
        const char *name = json_string_value(json_object_get(row, by_uuid ? "uuid" : name_field));
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
    if (found == 0 && by_uuid)
        return cli_fail(cli, CLI_API, "ResourceNotFound", "no %s %s", what, ref);
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

cli_status_t dc_create_job(cli_t *cli, const char *workflow, const char *target,
                           const json_t *params, json_t **job)
{
    *job = NULL;
    json_t *body =
        json_pack("{s:s, s:s, s:O}", "workflow", workflow, "target", target, "params", params);
    client_reply_t reply;
    cli_status_t st = client_call(cli_client(cli), "POST", "/jobs", body, &reply, &cli->err);
    json_decref(body);
    if (st == CLI_OK && json_string_value(json_object_get(reply.json, "uuid")) == NULL)
        st = cli_fail(cli, CLI_UNREACHABLE, NULL, "POST /jobs answered without a job uuid");
    if (st == CLI_OK)
        *job = json_incref(reply.json);
    client_reply_dispose(&reply);
    return st;
}

cli_status_t dc_submit(cli_t *cli, const char *workflow, const char *target, const json_t *params,
                       bool watch, const char *what)
{
    json_t *job;
    cli_status_t st = dc_create_job(cli, workflow, target, params, &job);
    if (st != CLI_OK)
        return st;
    const char *uuid = json_string_value(json_object_get(job, "uuid"));
    if (watch) {
        if (!cli->out.json)
            printf("%s: job %s\n", what, uuid);
        st = watch_job(cli, uuid, false);
    } else if (output_wants_generic(&cli->out)) {
        output_object(stdout, &cli->out, job, NULL);
    } else {
        printf("%s: job %s\n", what, uuid);
    }
    json_decref(job);
    return st;
}

cli_status_t dc_find_vm(cli_t *cli, const char *ref, json_t **vm)
{
    *vm = NULL;
    if (uuid_valid(ref))
        return dc_find(cli, "/vms", "alias", "instance", ref, vm);
    char *query = NULL;
    dc_query_add(cli, &query, "alias", ref);
    json_t *rows;
    cli_status_t st = dc_list(cli, "/vms", query, &rows);
    free(query);
    if (st != CLI_OK)
        return st;
    size_t n = json_array_size(rows);
    if (n == 1)
        *vm = json_incref(json_array_get(rows, 0));
    json_decref(rows);
    if (n == 0)
        return cli_fail(cli, CLI_API, "ResourceNotFound",
                        "no instance whose uuid or alias is \"%s\"", ref);
    if (n > 1)
        return cli_fail(cli, CLI_API, "AmbiguousName",
                        "%zu instances have the alias \"%s\": name one by its uuid", n, ref);
    return CLI_OK;
}

cli_status_t dc_submit_record(cli_t *cli, const json_t *rec, const dc_record_kind_t *kind,
                              const char *workflow, const char *action, const json_t *params,
                              bool watch, const char *doing)
{
    const char *uuid = json_string_value(json_object_get(rec, "uuid"));
    const char *name = json_string_value(json_object_get(rec, kind->name_field));
    if (uuid == NULL)
        return cli_fail(cli, CLI_UNREACHABLE, NULL, "%s record came without a uuid", kind->a_kind);
    json_t *p = params != NULL ? json_deep_copy(params) : json_object();
    json_object_set_new(p, kind->uuid_param, json_string(uuid));
    char *target = xasprintf("/%s-%s", action, uuid);
    char *what = xasprintf("%s %s %s (%s)", doing, kind->kind, name != NULL ? name : uuid, uuid);
    cli_status_t st = dc_submit(cli, workflow, target, p, watch, what);
    free(what);
    free(target);
    json_decref(p);
    return st;
}

cli_status_t dc_submit_vm(cli_t *cli, const json_t *vm, const char *workflow, const char *action,
                          const json_t *params, bool watch, const char *doing)
{
    static const dc_record_kind_t instance = {"instance", "an instance", "alias", "vm_uuid"};
    return dc_submit_record(cli, vm, &instance, workflow, action, params, watch, doing);
}

/* Sleeps `ms` unless interrupted. Returns false when Ctrl-C came. */
static bool pause_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (!client_interrupted() && nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    return !client_interrupted();
}

/* How often dc_wait_job reads the job: its jobs (a measure, a short disk step) take
 * tens of milliseconds to seconds. */
#define WAIT_POLL_MS 100

cli_status_t dc_wait_job(cli_t *cli, const char *uuid)
{
    char *esc = client_escape(cli_client(cli), uuid);
    char *path = xasprintf("/jobs/%s", esc);
    free(esc);
    cli_status_t st = CLI_OK;
    for (;;) {
        client_reply_t reply;
        st = client_call(cli_client(cli), "GET", path, NULL, &reply, &cli->err);
        const char *ex =
            st == CLI_OK ? json_string_value(json_object_get(reply.json, "execution")) : NULL;
        bool done = st != CLI_OK ||
                    (ex != NULL && (strcmp(ex, "succeeded") == 0 || strcmp(ex, "failed") == 0 ||
                                    strcmp(ex, "canceled") == 0));
        if (st == CLI_OK && done && strcmp(ex, "succeeded") != 0) {
            const json_t *err = json_object_get(reply.json, "error");
            const char *code = json_string_value(json_object_get(err, "code"));
            const char *msg = json_is_string(err)
                                  ? json_string_value(err)
                                  : json_string_value(json_object_get(err, "message"));
            st = cli_fail(cli, CLI_FAILED, code, "job %s %s%s%s", uuid, ex, msg != NULL ? ": " : "",
                          msg != NULL ? msg : "");
        }
        client_reply_dispose(&reply);
        if (done)
            break;
        if (!pause_ms(WAIT_POLL_MS)) {
            st = CLI_INTERRUPTED;
            break;
        }
    }
    free(path);
    return st;
}

const struct option dc_watch_long[] = {
    {"watch", no_argument, NULL, 'w'},
    {NULL, 0, NULL, 0},
};

cli_status_t dc_watch_option(cli_t *cli, void *data, int c, const char *arg)
{
    (void)arg;
    if (c != 'w')
        return cli_usage(cli, "unknown option");
    *(bool *)data = true;
    return CLI_OK;
}

#define DISK_COLUMNS                                                                               \
    {"ID", "id", NULL}, {"PCI_SLOT", "pci_slot", NULL}, {"SIZE", "size", NULL},                    \
        {"BOOT", "boot", NULL},                                                                    \
    {                                                                                              \
        "SNAPSHOT_SIZE", "snapshot_size", NULL                                                     \
    }

const output_column_t dc_disk_columns[] = {DISK_COLUMNS, {NULL, NULL, NULL}};
const output_column_t dc_disk_columns_wide[] = {
    DISK_COLUMNS, {"IMAGE", "image", NULL}, {"PATH", "path", NULL}, {NULL, NULL, NULL}};

const output_column_t dc_snapshot_columns[] = {
    {"NAME", "name", NULL},
    {"CREATED", "created_timestamp", NULL},
    {NULL, NULL, NULL},
};

/* A PCI slot "B:D:F" as one number that orders slots, or UINT64_MAX when it is not one. */
static unsigned long long slot_order(const json_t *disk)
{
    const char *s = json_string_value(json_object_get(disk, "pci_slot"));
    unsigned b, d, f;
    if (s == NULL || sscanf(s, "%u:%u:%u", &b, &d, &f) != 3)
        return ~0ULL;
    return ((unsigned long long)b << 40) | ((unsigned long long)d << 20) | f;
}

static int by_slot(const void *a, const void *b)
{
    unsigned long long x = slot_order(*(json_t *const *)a), y = slot_order(*(json_t *const *)b);
    return x < y ? -1 : x > y;
}

json_t *dc_disks_by_slot(const json_t *vm)
{
    const json_t *disks = json_object_get(vm, "disks");
    size_t n = json_array_size(disks);
    json_t **items = xcalloc(n > 0 ? n : 1, sizeof *items);
    for (size_t i = 0; i < n; i++)
        items[i] = json_array_get(disks, i);
    qsort(items, n, sizeof *items, by_slot);
    json_t *out = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append(out, items[i]);
    free(items);
    return out;
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
    char *one;
    if ((st = dc_arguments(cli, argc, argv, first, &what, 1, &one)) != CLI_OK)
        return st;
    *arg = one;
    return CLI_OK;
}

cli_status_t dc_arguments(cli_t *cli, int argc, char **argv, int first, const char *const *names,
                          int nargs, char **args)
{
    int got = argc - first;
    if (got < nargs)
        return cli_usage(cli, "missing %s", names[got]);
    if (got > nargs)
        return cli_usage(cli, "unexpected argument \"%s\"", argv[first + nargs]);
    for (int i = 0; i < nargs; i++)
        args[i] = argv[first + i];
    return CLI_OK;
}

cli_status_t dc_run_subverb(cli_t *cli, int argc, char **argv, const dc_subverb_t *verbs)
{
    const char *verb = argc > 1 ? argv[1] : NULL;
    if (verb != NULL && (strcmp(verb, "-h") == 0 || strcmp(verb, "--help") == 0)) {
        cli_command_help(cli->command, stdout);
        return CLI_OK;
    }
    if (verb == NULL)
        return cli_usage(cli, "missing verb");
    for (const dc_subverb_t *v = verbs; v->name != NULL; v++) {
        if (strcmp(v->name, verb) == 0) {
            /* "vm disk add" in messages; static: cli->cmd outlives this call */
            static char name[96];
            snprintf(name, sizeof name, "%s %s", cli->cmd, verb);
            cli->cmd = name;
            return v->run(cli, argc - 1, argv + 1);
        }
    }
    return cli_usage(cli, "unknown verb \"%s\"", verb);
}
