/*
 * volume_api.c -- the options, owner, VOL and jobs of the volume commands; see
 * volume_api.h.
 */
#include "volume_api.h"

#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "base/alloc.h"
#include "base/ident.h"
#include "client.h"
#include "dc_api.h"
#include "volume_ref.h"
#include "volume_size.h"

const struct option volume_owner_long[] = {
    {"owner", required_argument, NULL, VOLUME_OPT_OWNER},
    {NULL, 0, NULL, 0},
};

const struct option volume_job_long[] = {
    {"owner", required_argument, NULL, VOLUME_OPT_OWNER},
    {"watch", no_argument, NULL, 'w'},
    {NULL, 0, NULL, 0},
};

static cli_status_t on_volume_opt(cli_t *cli, void *data, int c, const char *arg)
{
    volume_opts_t *o = data;
    char err[256];
    switch (c) {
    case 'w':
        o->watch = true;
        return CLI_OK;
    case 'f':
        o->force = true;
        return CLI_OK;
    case 'n':
        o->name = arg;
        return CLI_OK;
    case 's':
        if (!volume_size_parse(arg, &o->size_mib, err, sizeof err))
            return cli_usage(cli, "%s", err);
        o->size = arg;
        return CLI_OK;
    case 'N': {
        json_t *net = arg[0] != '\0' ? json_string(arg) : NULL;
        if (net == NULL)
            return cli_usage(cli, "-N \"%s\": expected a network's name or uuid", arg);
        json_array_append_new(o->networks, net);
        return CLI_OK;
    }
    case VOLUME_OPT_OWNER:
        if (!uuid_valid(arg))
            return cli_usage(cli, "--owner \"%s\": expected a uuid", arg);
        o->owner = arg;
        return CLI_OK;
    case VOLUME_OPT_TAG: {
        const char *eq = strchr(arg, '=');
        json_t *value = eq != NULL ? json_string(eq + 1) : NULL;
        if (eq == NULL || eq == arg || value == NULL) {
            json_decref(value);
            return cli_usage(cli, "--tag \"%s\": expected KEY=VALUE", arg);
        }
        char *key = xstrndup(arg, (size_t)(eq - arg));
        int rc = json_object_set_new(o->tags, key, value);
        free(key);
        if (rc != 0)
            return cli_usage(cli, "--tag \"%s\": the key is not UTF-8", arg);
        return CLI_OK;
    }
    case VOLUME_OPT_STATE:
        o->state = arg;
        return CLI_OK;
    case VOLUME_OPT_NAME_GLOB:
        o->name_glob = arg;
        return CLI_OK;
    default:
        return cli_usage(cli, "unknown option");
    }
}

void volume_opts_dispose(volume_opts_t *o)
{
    json_decref(o->networks);
    json_decref(o->tags);
    o->networks = o->tags = NULL;
}

cli_status_t volume_parse(cli_t *cli, int argc, char **argv, const char *shortopts,
                          const struct option *longopts, const char *const *names, int nargs,
                          volume_opts_t *o, char **args)
{
    if (o->networks == NULL)
        o->networks = json_array();
    if (o->tags == NULL)
        o->tags = json_object();
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, shortopts, longopts, on_volume_opt, o, &first, &st))
        return st;
    if ((st = dc_owner_check(cli, o->owner)) != CLI_OK)
        return st;
    return dc_arguments(cli, argc, argv, first, names, nargs, args);
}

const char *volume_owner(const volume_opts_t *o)
{
    return dc_owner(o->owner);
}

/* GET /volumes/:uuid?owner_uuid=: one volume by its uuid. */
static cli_status_t get_by_uuid(cli_t *cli, const char *owner, const char *uuid, json_t **vol)
{
    char *esc = client_escape(cli_client(cli), uuid);
    char *own = client_escape(cli_client(cli), owner);
    char *path = xasprintf("/volumes/%s?owner_uuid=%s", esc, own);
    free(esc);
    free(own);
    client_reply_t reply;
    cli_status_t st = client_call(cli_client(cli), "GET", path, NULL, &reply, &cli->err);
    free(path);
    if (st == CLI_OK && !json_is_object(reply.json))
        st = cli_fail(cli, CLI_UNREACHABLE, NULL, "GET /volumes/%s: expected a JSON object", uuid);
    if (st == CLI_OK)
        *vol = json_incref(reply.json);
    client_reply_dispose(&reply);
    return st;
}

cli_status_t volume_find(cli_t *cli, const char *owner, const char *ref, json_t **vol)
{
    *vol = NULL;
    if (uuid_valid(ref)) {
        cli_status_t st = get_by_uuid(cli, owner, ref, vol);
        if (st == CLI_API && (strcmp(cli->err.code, "VolumeNotFound") == 0 ||
                              strcmp(cli->err.code, "ResourceNotFound") == 0))
            return cli_fail(cli, CLI_API, "VolumeNotFound", "owner %s has no volume %s", owner,
                            ref);
        return st;
    }
    char *query = NULL;
    dc_query_add(cli, &query, "owner_uuid", owner);
    json_t *rows;
    cli_status_t st = dc_list(cli, "/volumes", query, &rows);
    free(query);
    if (st != CLI_OK)
        return st;
    const json_t *found;
    char err[1536];
    switch (volume_ref_find(rows, owner, ref, &found, err, sizeof err)) {
    case VOLUME_REF_OK:
        *vol = json_incref((json_t *)found);
        break;
    case VOLUME_REF_UNKNOWN:
        st = cli_fail(cli, CLI_API, "VolumeNotFound", "%s", err);
        break;
    case VOLUME_REF_AMBIGUOUS:
        st = cli_fail(cli, CLI_API, "AmbiguousName", "%s", err);
        break;
    }
    json_decref(rows);
    return st;
}

cli_status_t volume_submit(cli_t *cli, const json_t *vol, const char *owner, const char *workflow,
                           const json_t *params, bool watch, const char *doing)
{
    static const dc_record_kind_t volume = {"volume", "a volume", "name", "volume_uuid"};
    json_t *p = params != NULL ? json_deep_copy(params) : json_object();
    json_object_set_new(p, "owner_uuid", json_string(owner));
    cli_status_t st = dc_submit_record(cli, vol, &volume, workflow, workflow, p, watch, doing);
    json_decref(p);
    return st;
}

cli_status_t volume_submit_param(cli_t *cli, const json_t *vol, const char *owner,
                                 const char *workflow, const char *key, const char *value,
                                 bool watch, const char *doing)
{
    json_t *params = json_pack("{s:s}", key, value);
    if (params == NULL)
        return cli_fail(cli, CLI_UNREACHABLE, NULL, "%s \"%s\": not UTF-8", key, value);
    cli_status_t st = volume_submit(cli, vol, owner, workflow, params, watch, doing);
    json_decref(params);
    return st;
}

void volume_cell_size(const json_t *row, char *buf, size_t n)
{
    const json_t *size = json_object_get(row, "size");
    if (json_is_integer(size) && json_integer_value(size) >= 0)
        volume_size_text((uint64_t)json_integer_value(size), buf, n);
    else
        output_cell_text(size, buf, n);
}
