/*
 * config.c -- ternd's settings from defaults, a JSON file and command-line flags.
 *
 * This file owns the ternd_config_t it fills (every string malloc'd, `plugins` a
 * json_t reference, all released by config_dispose) and the table of settings below,
 * which is the one place a setting is declared: its key in the file, its flag, its
 * kind and its range. It does not act on the settings (it opens no socket, creates no
 * directory, loads no plugin) apart from checking their form.
 *
 * Order: defaults, then the file named by --config, then the flags in the order
 * given (so a flag wins over the file, and a later flag over an earlier one). Flags
 * are read in a first pass that only finds them (unknown flags, --help and --version
 * are handled there), so --config may come anywhere on the command line.
 *
 * Relative paths in the file or the flags are kept as written and therefore resolve
 * against ternd's working directory, not the file's.
 */
#include "ternd/config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/log.h"
#include "base/net_allow.h"
#include "http/http_guard.h"
#include "model/workflow.h"
#include "redis/redis_addr.h"

#ifndef TERN_VERSION
#define TERN_VERSION "unknown" /* meson passes the project version */
#endif

#define CONFIG_FILE_MAX (1024 * 1024) /* bytes */
#define RUNNER_ID_MAX   128
#define WHERE_MAX       (PATH_MAX + 64)
#define VALUE_SHOWN_MAX 80 /* characters of an offending value quoted in a message */

enum kind {
    K_CONFIG,    /* --config FILE: flag only */
    K_ROLE,      /* "api" | "runner" | "both" */
    K_LISTEN,    /* HOST:PORT */
    K_REDIS,     /* a URL checked by redis_addr_parse, or null in the file */
    K_PATH,      /* a non-empty string */
    K_PATH_NULL, /* a non-empty string, or null in the file */
    K_U32,       /* an integer in [min, max] */
    K_RUNNER_ID, /* [A-Za-z0-9._:@-]{1,128} */
    K_QUEUES,    /* a,b in a flag; ["a","b"] in the file */
    K_LOG_LEVEL, /* a level name or bunyan number */
    K_PLUGINS,   /* object of objects: file only */
    K_NETWORKS,  /* an array of CIDR blocks, or null: file only */
    K_HOSTS,     /* a,b in a flag; ["a","b"] in the file: names accepted as Host */
    K_ORIGINS,   /* the same: origins accepted as Origin */
};

typedef struct setting {
    const char *key;  /* in the file, or NULL when flag-only */
    const char *flag; /* "--role", or NULL when file-only */
    enum kind kind;
    size_t offset; /* of the field in ternd_config_t */
    uint32_t min, max;
} setting_t;

#define OFF(f) offsetof(ternd_config_t, f)

static const setting_t settings[] = {
    {NULL, "--config", K_CONFIG, OFF(config_file), 0, 0},
    {"role", "--role", K_ROLE, OFF(roles), 0, 0},
    {"listen", "--listen", K_LISTEN, OFF(listen), 0, 0},
    {"redis", "--redis", K_REDIS, OFF(redis_url), 0, 0},
    {"data_dir", "--data-dir", K_PATH, OFF(data_dir), 0, 0},
    {"plugin_dir", "--plugin-dir", K_PATH, OFF(plugin_dir), 0, 0},
    {"workflows", "--workflows", K_PATH_NULL, OFF(workflows_dir), 0, 0},
    {"concurrency", "--concurrency", K_U32, OFF(concurrency), 1, 1000000},
    {"runner_id", "--runner-id", K_RUNNER_ID, OFF(runner_id), 0, 0},
    {"queues", "--queues", K_QUEUES, OFF(queues), 0, 0},
    {"lease_ms", "--lease-ms", K_U32, OFF(lease_ms), 100, 3600000},
    {"heartbeat_ms", "--heartbeat-ms", K_U32, OFF(heartbeat_ms), 10, 600000},
    {"shutdown_grace_ms", "--shutdown-grace-ms", K_U32, OFF(shutdown_grace_ms), 0, 3600000},
    {"log_level", "--log-level", K_LOG_LEVEL, OFF(log_level), 0, 0},
    {"redis_server", "--redis-server", K_PATH, OFF(redis_server), 0, 0},
    {"redis_health_timeout_ms", "--redis-health-timeout-ms", K_U32, OFF(redis_health_timeout_ms),
     100, 3600000},
    {"redis_command_timeout_ms", "--redis-command-timeout-ms", K_U32, OFF(redis_command_timeout_ms),
     100, 3600000},
    {"admission_timeout_ms", "--admission-timeout-ms", K_U32, OFF(admission_timeout_ms), 10, 60000},
    {"event_stream_max", NULL, K_U32, OFF(event_stream_max), 1, 10000000},
    {"global_event_stream_max", NULL, K_U32, OFF(global_event_stream_max), 1, 100000000},
    {"max_params_bytes", NULL, K_U32, OFF(max_params_bytes), 1, 512u * 1024 * 1024},
    {"max_lock_instructions", NULL, K_U32, OFF(max_lock_instructions), 2500, 100000000},
    {"plugins", NULL, K_PLUGINS, OFF(plugins), 0, 0},
    {"api_token_file", "--api-token-file", K_PATH_NULL, OFF(api_token_file), 0, 0},
    {"tls_cert", "--tls-cert", K_PATH_NULL, OFF(tls_cert), 0, 0},
    {"tls_key", "--tls-key", K_PATH_NULL, OFF(tls_key), 0, 0},
    {"max_body_bytes", "--max-body-bytes", K_U32, OFF(max_body_bytes), 1024, 256u * 1024 * 1024},
    {"event_heartbeat_ms", NULL, K_U32, OFF(event_heartbeat_ms), 10, 3600000},
    {"list_max_bytes", NULL, K_U32, OFF(list_max_bytes), 1, 1024u * 1024 * 1024},
    {"view_timeout_ms", "--view-timeout-ms", K_U32, OFF(view_timeout_ms), 10, 600000},
    {"postback_initial_ms", NULL, K_U32, OFF(postback_initial_ms), 1, 3600000},
    {"postback_max_ms", NULL, K_U32, OFF(postback_max_ms), 1, 24u * 3600000},
    {"postback_max_attempts", NULL, K_U32, OFF(postback_max_attempts), 1, 1000},
    {"postback_timeout_ms", NULL, K_U32, OFF(postback_timeout_ms), 10, 600000},
    {"postback_allow_networks", NULL, K_NETWORKS, OFF(postback_allow_networks), 0, 0},
    {"retention_days", "--retention-days", K_U32, OFF(retention_days), 0, 36500},
    {"retention_ms", NULL, K_U32, OFF(retention_ms), 0, UINT32_MAX},
    {"success_events_s", "--success-events-s", K_U32, OFF(success_events_s), 0, 3650u * 86400},
    {"direct_start", "--direct-start", K_U32, OFF(direct_start), 0, 1},
    {"allowed_hosts", "--allowed-hosts", K_HOSTS, OFF(allowed_hosts), 0, 0},
    {"allowed_origins", "--allowed-origins", K_ORIGINS, OFF(allowed_origins), 0, 0},
    {"max_connections", "--max-connections", K_U32, OFF(max_connections), 1, 1000000},
    {"fd_reserve", NULL, K_U32, OFF(fd_reserve), 16, 1000000},
    {"header_timeout_ms", NULL, K_U32, OFF(header_timeout_ms), 10, 3600000},
    {"body_timeout_ms", NULL, K_U32, OFF(body_timeout_ms), 10, 3600000},
    {"idle_timeout_ms", NULL, K_U32, OFF(idle_timeout_ms), 10, 3600000},
    {"io_timeout_ms", NULL, K_U32, OFF(io_timeout_ms), 10, 3600000},
};

static const char usage_text[] =
    "usage: ternd [--config FILE] [--role api|runner|both] [--listen HOST:PORT]\n"
    "             [--redis redis://[user:pass@]HOST:PORT[/DB] | unix:///PATH]\n"
    "             [--data-dir DIR] [--plugin-dir DIR] [--workflows DIR]\n"
    "             [--concurrency N] [--runner-id ID] [--queues NAME,...]\n"
    "             [--lease-ms N] [--heartbeat-ms N] [--shutdown-grace-ms N]\n"
    "             [--log-level LEVEL] [--redis-server PATH] [--api-token-file FILE]\n"
    "             [--tls-cert FILE --tls-key FILE] [--max-body-bytes N]\n"
    "             [--retention-days N] [--success-events-s N] [--direct-start 0|1]\n"
    "             [--redis-health-timeout-ms N] [--redis-command-timeout-ms N]\n"
    "             [--allowed-hosts NAME,...] [--allowed-origins ORIGIN,...]\n"
    "             [--max-connections N] [--view-timeout-ms N] [--help] [--version]\n"
    "\n"
    "  --config FILE          JSON file with the settings below (flags win over it)\n"
    "  --role ROLE            api, runner or both (default both)\n"
    "  --listen HOST:PORT     HTTP API address (default 127.0.0.1:8080)\n"
    "  --redis URL            shared Redis; without it a private redis-server is\n"
    "                         started in the data directory\n"
    "  --data-dir DIR         where the embedded Redis keeps its files (./tern-data)\n"
    "  --plugin-dir DIR       where the task plugins (*.so) are\n"
    "  --workflows DIR        load every *.json workflow in DIR at start\n"
    "  --concurrency N        jobs in flight per runner (default 1000)\n"
    "  --runner-id ID         this runner's name (default HOSTNAME-PID)\n"
    "  --queues A,B           queues this runner serves (default \"default\")\n"
    "  --lease-ms N           a silent runner loses its jobs after N ms (10000)\n"
    "  --heartbeat-ms N       lease renewal period (2000)\n"
    "  --shutdown-grace-ms N  time running steps get to finish on stop (30000)\n"
    "  --log-level LEVEL      trace, debug, info, warn, error, fatal or 10-60 (info)\n"
    "  --redis-server PATH    redis-server binary for the embedded default\n"
    "  --redis-health-timeout-ms N\n"
    "                         Redis counts as down (GET /ping 503, tern_redis_up 0) and\n"
    "                         calls are refused while a call has waited N ms (2000)\n"
    "  --redis-command-timeout-ms N\n"
    "                         calls unanswered after N ms get 503 and the connection\n"
    "                         is made again (5000)\n"
    "  --admission-timeout-ms N\n"
    "                         bound of an admission check without a timeout (2000)\n"
    "  --api-token-file FILE  require \"Authorization: Bearer <token>\": FILE holds one\n"
    "                         token a line, \"submit TOKEN\" (jobs; reading workflows\n"
    "                         and tasks) or \"operator TOKEN\" (everything); a bare TOKEN\n"
    "                         is operator. Else $TERN_API_TOKEN (operator). Never logged\n"
    "  --allowed-hosts A,B    names accepted in Host besides IP addresses and localhost\n"
    "  --allowed-origins O,P  web page origins (http://host:port) allowed to call the API\n"
    "  --max-connections N    API connections open at once (16384; fewer when\n"
    "                         RLIMIT_NOFILE less fd_reserve is lower)\n"
    "  --tls-cert FILE        serve the API over TLS with this PEM certificate chain\n"
    "  --tls-key FILE         and this PEM private key\n"
    "  --max-body-bytes N     largest request body the API accepts (1048576)\n"
    "  --view-timeout-ms N    a plugin's view answered 503 after N ms without its\n"
    "                         script's answer; the script is then killed (2000)\n"
    "  --retention-days N     finished jobs (with their results and events) are deleted\n"
    "                         N days after they end (30); 0 keeps them forever\n"
    "  --success-events-s N   a job that succeeded keeps its event stream N seconds after\n"
    "                         it ends (60; its record keeps results and times); 0 keeps\n"
    "                         it as long as the job\n"
    "  --direct-start 0|1     with both roles, start a job created here at once on this\n"
    "                         runner when it has a free slot and the queue is empty (1)\n"
    "  --help                 print this text\n"
    "  --version              print the version\n"
    "\n"
    "File-only keys: event_stream_max, global_event_stream_max, max_params_bytes,\n"
    "max_lock_instructions (the compiled locks of all unfinished jobs, together),\n"
    "plugins ({\"<plugin>\": {...}}: each plugin's configuration; \"allow_networks\":\n"
    "[CIDR, ...] limits the addresses its HTTP requests reach), event_heartbeat_ms,\n"
    "postback_initial_ms, postback_max_ms, postback_max_attempts, postback_timeout_ms,\n"
    "postback_allow_networks ([CIDR, ...]: the addresses post-backs may reach; any\n"
    "without it), list_max_bytes, fd_reserve (256 + 3 per runner slot),\n"
    "header_timeout_ms (10000), body_timeout_ms (30000), idle_timeout_ms (60000),\n"
    "io_timeout_ms (30000).\n";

const char *config_usage(void)
{
    return usage_text;
}

uint64_t config_retention_ms(const ternd_config_t *c)
{
    if (c->retention_ms > 0)
        return c->retention_ms;
    return (uint64_t)c->retention_days * 24 * 3600 * 1000;
}

/* ---- small helpers -------------------------------------------------------------- */

static void *field(ternd_config_t *c, const setting_t *s)
{
    return (char *)c + s->offset;
}

static void set_str(ternd_config_t *c, const setting_t *s, const char *v)
{
    char **dst = field(c, s);
    free(*dst);
    *dst = v != NULL ? xstrdup(v) : NULL;
}

static void free_queues(ternd_config_t *c)
{
    if (c->queues != NULL)
        for (size_t i = 0; c->queues[i] != NULL; i++)
            free(c->queues[i]);
    free(c->queues);
    c->queues = NULL;
    c->n_queues = 0;
}

/* `v` quoted for a message, cut to VALUE_SHOWN_MAX characters. */
static void quote_value(const char *v, char *out, size_t cap)
{
    size_t n = strlen(v);
    if (n > VALUE_SHOWN_MAX)
        snprintf(out, cap, "\"%.*s...\"", VALUE_SHOWN_MAX, v);
    else
        snprintf(out, cap, "\"%s\"", v);
}

/* A JSON value as text for a message ("x" with quotes, 1.5, null, [...]). */
static void show_json(const json_t *v, char *out, size_t cap)
{
    if (json_is_string(v)) {
        quote_value(json_string_value(v), out, cap);
        return;
    }
    char *enc = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (enc == NULL) {
        snprintf(out, cap, "(unprintable)");
        return;
    }
    if (strlen(enc) > VALUE_SHOWN_MAX)
        snprintf(out, cap, "%.*s...", VALUE_SHOWN_MAX, enc);
    else
        snprintf(out, cap, "%s", enc);
    free(enc);
}

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a real number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "?";
}

static bool plugin_name_ok(const char *p)
{
    if (!(p[0] >= 'a' && p[0] <= 'z'))
        return false;
    for (size_t i = 1; p[i] != '\0'; i++)
        if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '_'))
            return false;
    return true;
}

/* Adds queue q[0..n) to *c after checking its name and that it is not listed twice. */
static int add_queue(ternd_config_t *c, const char *where, const char *q, size_t n, char *err,
                     size_t errlen)
{
    if (n == 0)
        return err_set(err, errlen, TERN_EINVAL, "%s: empty queue name (expected NAME[,NAME...])",
                       where);
    if (!workflow_queue_valid(q, n)) {
        char shown[VALUE_SHOWN_MAX + 8];
        char *tmp = xstrndup(q, n);
        quote_value(tmp, shown, sizeof shown);
        free(tmp);
        return err_set(err, errlen, TERN_EINVAL,
                       "%s: bad queue name %s (expected [a-z0-9_:.-], 1-%d characters)", where,
                       shown, WORKFLOW_QUEUE_MAX);
    }
    for (size_t i = 0; i < c->n_queues; i++)
        if (strlen(c->queues[i]) == n && memcmp(c->queues[i], q, n) == 0)
            return err_set(err, errlen, TERN_EINVAL, "%s: queue \"%.*s\" is listed twice", where,
                           (int)n, q);
    c->queues = xrealloc(c->queues, (c->n_queues + 2) * sizeof *c->queues);
    c->queues[c->n_queues++] = xstrndup(q, n);
    c->queues[c->n_queues] = NULL;
    return 0;
}

/* ---- one setting from a string (a flag, or a string in the file) ------------------ */

/* Frees a NULL-terminated list of strings. */
static void strlist_free(char **list)
{
    for (size_t i = 0; list != NULL && list[i] != NULL; i++)
        free(list[i]);
    free(list);
}

/* Checks one allowed host or origin (as http_guard will take it) and appends it. */
static int add_name(char ***list, enum kind kind, const char *where, const char *name, char *err,
                    size_t errlen)
{
    http_guard_t probe;
    http_guard_init(&probe);
    char why[512];
    int rc = kind == K_HOSTS ? http_guard_allow_host(&probe, name, why, sizeof why)
                             : http_guard_allow_origin(&probe, name, why, sizeof why);
    http_guard_dispose(&probe);
    if (rc != 0)
        return err_set(err, errlen, TERN_EINVAL, "%s: %s", where, why);
    size_t n = 0;
    while (*list != NULL && (*list)[n] != NULL)
        n++;
    *list = xrealloc(*list, (n + 2) * sizeof **list);
    (*list)[n] = xstrdup(name);
    (*list)[n + 1] = NULL;
    return 0;
}

/* Checks and stores string value `v` of setting `s`. `where` prefixes messages. */
static int set_from_string(ternd_config_t *c, const setting_t *s, const char *v, const char *where,
                           char *err, size_t errlen)
{
    char shown[VALUE_SHOWN_MAX + 8];
    quote_value(v, shown, sizeof shown);

    switch (s->kind) {
    case K_CONFIG:
    case K_PATH:
    case K_PATH_NULL:
        if (v[0] == '\0')
            return err_set(err, errlen, TERN_EINVAL, "%s: expected a non-empty path", where);
        set_str(c, s, v);
        return 0;

    case K_ROLE:
        if (strcmp(v, "api") == 0)
            c->roles = CONFIG_ROLE_API;
        else if (strcmp(v, "runner") == 0)
            c->roles = CONFIG_ROLE_RUNNER;
        else if (strcmp(v, "both") == 0)
            c->roles = CONFIG_ROLE_BOTH;
        else
            return err_set(err, errlen, TERN_EINVAL, "%s: expected api, runner or both, got %s",
                           where, shown);
        return 0;

    case K_LISTEN: {
        const char *colon = strrchr(v, ':');
        bool ok = colon != NULL && colon != v && colon[1] != '\0';
        if (ok && v[0] == '[')
            ok = colon > v + 2 && colon[-1] == ']';
        else if (ok)
            ok = memchr(v, ':', (size_t)(colon - v)) == NULL; /* IPv6 needs brackets */
        long port = -1;
        if (ok) {
            char *end;
            errno = 0;
            port = strtol(colon + 1, &end, 10);
            ok = *end == '\0' && isdigit((unsigned char)colon[1]) && errno == 0 && port >= 0 &&
                 port <= 65535;
        }
        if (!ok)
            return err_set(err, errlen, TERN_EINVAL,
                           "%s: expected HOST:PORT (port 0-65535, IPv6 as [::1]:PORT), "
                           "got %s",
                           where, shown);
        set_str(c, s, v);
        return 0;
    }

    case K_REDIS: {
        redis_addr_t a;
        char aerr[512];
        if (redis_addr_parse(v, &a, aerr, sizeof aerr) != 0)
            return err_set(err, errlen, TERN_EINVAL, "%s: %s", where, aerr);
        redis_addr_dispose(&a);
        set_str(c, s, v);
        return 0;
    }

    case K_U32: {
        bool digits = v[0] != '\0' && strspn(v, "0123456789") == strlen(v);
        unsigned long long n = 0;
        if (digits) {
            errno = 0;
            n = strtoull(v, NULL, 10);
            if (errno != 0)
                n = ULLONG_MAX;
        }
        if (!digits)
            return err_set(err, errlen, TERN_EINVAL, "%s: expected a %s integer, got %s", where,
                           s->min > 0 ? "positive" : "non-negative", shown);
        if (n < s->min || n > s->max)
            return err_set(err, errlen, TERN_EINVAL, "%s: must be between %u and %u, got %s", where,
                           s->min, s->max, v);
        *(uint32_t *)field(c, s) = (uint32_t)n;
        return 0;
    }

    case K_RUNNER_ID: {
        size_t n = strlen(v);
        bool ok = n > 0 && n <= RUNNER_ID_MAX;
        for (size_t i = 0; ok && i < n; i++)
            ok = isalnum((unsigned char)v[i]) || strchr("._:@-", v[i]) != NULL;
        if (!ok)
            return err_set(err, errlen, TERN_EINVAL,
                           "%s: expected [A-Za-z0-9._:@-], 1-%d characters, got %s", where,
                           RUNNER_ID_MAX, shown);
        set_str(c, s, v);
        return 0;
    }

    case K_QUEUES: {
        free_queues(c);
        const char *p = v;
        for (;;) {
            size_t n = strcspn(p, ",");
            int rc = add_queue(c, where, p, n, err, errlen);
            if (rc != 0)
                return rc;
            if (p[n] == '\0')
                break;
            p += n + 1;
        }
        return 0;
    }

    case K_LOG_LEVEL: {
        int level = log_level_parse(v);
        if (level < 0)
            return err_set(err, errlen, TERN_EINVAL,
                           "%s: expected trace, debug, info, warn, error, fatal or "
                           "10, 20, 30, 40, 50, 60, got %s",
                           where, shown);
        c->log_level = level;
        return 0;
    }

    case K_HOSTS:
    case K_ORIGINS: {
        char ***list = field(c, s);
        strlist_free(*list);
        *list = NULL;
        const char *p = v;
        for (;;) {
            size_t n = strcspn(p, ",");
            char *one = xstrndup(p, n);
            int rc = add_name(list, s->kind, where, one, err, errlen);
            free(one);
            if (rc != 0)
                return rc;
            if (p[n] == '\0')
                break;
            p += n + 1;
        }
        return 0;
    }

    case K_PLUGINS:
    case K_NETWORKS:
        break;
    }
    return err_set(err, errlen, TERN_EINVAL, "%s: expected an object", where);
}

/* ---- one setting from the file -------------------------------------------------- */

static int wrong_type(const char *where, const char *expected, const json_t *v, char *err,
                      size_t errlen)
{
    char shown[VALUE_SHOWN_MAX + 8];
    if (json_is_null(v))
        return err_set(err, errlen, TERN_EINVAL, "%s: expected %s, got null", where, expected);
    show_json(v, shown, sizeof shown);
    return err_set(err, errlen, TERN_EINVAL, "%s: expected %s, got %s %s", where, expected,
                   json_kind(v), shown);
}

static int set_from_json(ternd_config_t *c, const setting_t *s, json_t *v, const char *where,
                         char *err, size_t errlen)
{
    switch (s->kind) {
    case K_REDIS:
    case K_PATH_NULL:
        if (json_is_null(v)) {
            set_str(c, s, NULL);
            return 0;
        }
        if (!json_is_string(v))
            return wrong_type(where, "a string or null", v, err, errlen);
        return set_from_string(c, s, json_string_value(v), where, err, errlen);

    case K_U32: {
        if (!json_is_integer(v))
            return wrong_type(where, "an integer", v, err, errlen);
        json_int_t n = json_integer_value(v);
        if (n < (json_int_t)s->min || n > (json_int_t)s->max)
            return err_set(err, errlen, TERN_EINVAL,
                           "%s: must be between %u and %u, got %" JSON_INTEGER_FORMAT, where,
                           s->min, s->max, n);
        *(uint32_t *)field(c, s) = (uint32_t)n;
        return 0;
    }

    case K_QUEUES: {
        if (!json_is_array(v))
            return wrong_type(where, "an array of queue names", v, err, errlen);
        if (json_array_size(v) == 0)
            return err_set(err, errlen, TERN_EINVAL, "%s: expected at least one queue name", where);
        free_queues(c);
        size_t i;
        json_t *q;
        json_array_foreach(v, i, q)
        {
            char qwhere[WHERE_MAX + 24];
            snprintf(qwhere, sizeof qwhere, "%s[%zu]", where, i);
            if (!json_is_string(q))
                return wrong_type(qwhere, "a string", q, err, errlen);
            int rc = add_queue(c, qwhere, json_string_value(q), json_string_length(q), err, errlen);
            if (rc != 0)
                return rc;
        }
        return 0;
    }

    case K_HOSTS:
    case K_ORIGINS: {
        if (!json_is_array(v))
            return wrong_type(where, "an array of strings", v, err, errlen);
        char ***list = field(c, s);
        strlist_free(*list);
        *list = NULL;
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            char ewhere[WHERE_MAX + 24];
            snprintf(ewhere, sizeof ewhere, "%s[%zu]", where, i);
            if (!json_is_string(e))
                return wrong_type(ewhere, "a string", e, err, errlen);
            int rc = add_name(list, s->kind, ewhere, json_string_value(e), err, errlen);
            if (rc != 0)
                return rc;
        }
        return 0;
    }

    case K_LOG_LEVEL:
        if (json_is_integer(v)) {
            char num[32];
            snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
            return set_from_string(c, s, num, where, err, errlen);
        }
        if (!json_is_string(v))
            return wrong_type(where, "a level name or number", v, err, errlen);
        return set_from_string(c, s, json_string_value(v), where, err, errlen);

    case K_PLUGINS: {
        if (!json_is_object(v))
            return wrong_type(where, "an object", v, err, errlen);
        const char *name;
        json_t *pc;
        json_object_foreach(v, name, pc)
        {
            char pwhere[WHERE_MAX + 80];
            snprintf(pwhere, sizeof pwhere, "%s.%.64s", where, name);
            if (!plugin_name_ok(name))
                return err_set(err, errlen, TERN_EINVAL,
                               "%s: bad plugin name (expected [a-z][a-z0-9_]*)", pwhere);
            if (!json_is_object(pc))
                return wrong_type(pwhere, "an object", pc, err, errlen);
            /* The engine's member of every plugin's section (plugin_loader.h): a bad
             * one stops ternd here rather than leaving the plugin unloaded. */
            char awhere[WHERE_MAX + 100];
            snprintf(awhere, sizeof awhere, "%s.allow_networks", pwhere);
            net_allow_t *allow;
            int rc =
                net_allow_parse(json_object_get(pc, "allow_networks"), awhere, &allow, err, errlen);
            if (rc != 0)
                return rc;
            net_allow_free(allow);
        }
        json_decref(c->plugins);
        c->plugins = json_incref(v); /* shares the loaded document's object */
        return 0;
    }

    case K_NETWORKS: {
        /* Checked with `where` in the messages, then kept under the key's name, which
         * the refusals of requests quote. */
        net_allow_t *allow, **dst = field(c, s);
        int rc = net_allow_parse(v, where, &allow, err, errlen);
        if (rc != 0)
            return rc;
        net_allow_free(allow);
        char unused[16];
        net_allow_parse(v, s->key, &allow, unused, sizeof unused);
        net_allow_free(*dst);
        *dst = allow;
        return 0;
    }

    default:
        if (!json_is_string(v))
            return wrong_type(where, "a string", v, err, errlen);
        return set_from_string(c, s, json_string_value(v), where, err, errlen);
    }
}

/* Reads at most CONFIG_FILE_MAX bytes of `path` and applies every key. */
static int load_file(ternd_config_t *c, const char *path, char *err, size_t errlen)
{
    int rc = 0;
    char *buf = NULL;
    json_t *root = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(err, errlen, errno == ENOENT ? TERN_ENOENT : TERN_EINVAL,
                       "config %s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = err_set(err, errlen, TERN_EINVAL, "config %s: not a regular file", path);
        goto Exit;
    }
    buf = xmalloc(CONFIG_FILE_MAX + 1);
    size_t len = 0;
    while (len < CONFIG_FILE_MAX + 1) {
        ssize_t n = read(fd, buf + len, CONFIG_FILE_MAX + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc =
                err_set(err, errlen, TERN_EIO, "config %s: read failed: %s", path, strerror(errno));
            goto Exit;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (len > CONFIG_FILE_MAX) {
        rc = err_set(err, errlen, TERN_E2BIG, "config %s: larger than 1 MiB", path);
        goto Exit;
    }

    json_error_t jerr;
    root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        rc = err_set(err, errlen, TERN_EINVAL, "config %s: line %d, column %d: %s", path, jerr.line,
                     jerr.column, jerr.text);
        goto Exit;
    }
    if (!json_is_object(root)) {
        rc = err_set(err, errlen, TERN_EINVAL,
                     "config %s: expected a JSON object at the top, got %s", path, json_kind(root));
        goto Exit;
    }

    const char *key;
    json_t *value;
    json_object_foreach(root, key, value)
    {
        const setting_t *s = NULL;
        for (size_t i = 0; s == NULL && i < TERN_ARRAY_SIZE(settings); i++)
            if (settings[i].key != NULL && strcmp(settings[i].key, key) == 0)
                s = &settings[i];
        if (s == NULL) {
            rc = err_set(err, errlen, TERN_EINVAL, "config %s: unknown key \"%.64s\"", path, key);
            goto Exit;
        }
        char where[WHERE_MAX];
        snprintf(where, sizeof where, "config %s: key \"%s\"", path, key);
        rc = set_from_json(c, s, value, where, err, errlen);
        if (rc != 0)
            goto Exit;
    }

Exit:
    json_decref(root);
    free(buf);
    close(fd);
    return rc;
}

/* ---- entry points --------------------------------------------------------------- */

static void set_defaults(ternd_config_t *c, const char *default_plugin_dir)
{
    memset(c, 0, sizeof *c);
    c->roles = CONFIG_ROLE_BOTH;
    c->listen = xstrdup("127.0.0.1:8080");
    c->redis_url = NULL;
    c->data_dir = xstrdup("./tern-data");
    c->plugin_dir = xstrdup(default_plugin_dir);
    c->workflows_dir = NULL;
    c->concurrency = 1000;
    c->runner_id = NULL; /* HOSTNAME-PID unless set */
    c->queues = xcalloc(2, sizeof *c->queues);
    c->queues[0] = xstrdup(TERN_DEFAULT_QUEUE);
    c->n_queues = 1;
    c->lease_ms = 10000;
    c->heartbeat_ms = 2000;
    c->shutdown_grace_ms = 30000;
    c->log_level = TERN_LOG_INFO;
    c->redis_server = xstrdup("redis-server");
    c->redis_health_timeout_ms = 2000;
    c->redis_command_timeout_ms = 5000;
    c->admission_timeout_ms = 2000;
    c->event_stream_max = 1000;
    c->global_event_stream_max = 100000;
    c->max_params_bytes = 262144;
    c->max_lock_instructions = 500000;
    c->max_body_bytes = 1024 * 1024;
    c->event_heartbeat_ms = 15000;
    c->list_max_bytes = 4u * 1024 * 1024;
    c->view_timeout_ms = 2000;
    c->postback_initial_ms = 1000;
    c->postback_max_ms = 300000;
    c->postback_max_attempts = 10;
    c->postback_timeout_ms = 10000;
    c->retention_days = 30;
    c->retention_ms = 0;
    c->success_events_s = 60;
    c->direct_start = 1;
    c->max_connections = 16384;
    c->fd_reserve = 0;
    c->header_timeout_ms = 10000;
    c->body_timeout_ms = 30000;
    c->idle_timeout_ms = 60000;
    c->io_timeout_ms = 30000;
    c->plugins = json_object();
    c->config_file = NULL;
}

typedef struct flagval {
    const setting_t *s;
    const char *name;  /* as typed, for messages */
    const char *value; /* points into argv */
} flagval_t;

int config_load(ternd_config_t *c, int argc, char **argv, const char *default_plugin_dir, char *err,
                size_t errlen)
{
    set_defaults(c, default_plugin_dir != NULL ? default_plugin_dir : "");
    int rc = 0;
    flagval_t *flags = xcalloc((size_t)(argc > 0 ? argc : 1), sizeof *flags);
    size_t nflags = 0;
    const char *config_file = NULL;
    char *name = NULL; /* the flag name of the current "--flag=value", malloc'd */

    /* Pass 1: find every flag and its value; nothing is applied yet. */
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        free(name);
        name = NULL;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            fputs(usage_text, stdout);
            fflush(stdout);
            rc = 1;
            goto Exit;
        }
        if (strcmp(arg, "--version") == 0) {
            printf("ternd %s\n", TERN_VERSION);
            fflush(stdout);
            rc = 1;
            goto Exit;
        }
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            rc = err_set(err, errlen, TERN_EINVAL,
                         "unexpected argument \"%s\" (flags start with --; see --help)", arg);
            goto Exit;
        }
        const char *eq = strchr(arg, '=');
        name = xstrndup(arg, eq != NULL ? (size_t)(eq - arg) : strlen(arg));
        const setting_t *s = NULL;
        for (size_t k = 0; s == NULL && k < TERN_ARRAY_SIZE(settings); k++)
            if (settings[k].flag != NULL && strcmp(settings[k].flag, name) == 0)
                s = &settings[k];
        if (s == NULL) {
            if (strcmp(name, "--help") == 0 || strcmp(name, "--version") == 0)
                rc = err_set(err, errlen, TERN_EINVAL, "%s takes no value", name);
            else
                rc = err_set(err, errlen, TERN_EINVAL, "unknown flag \"%s\" (see --help)", name);
            goto Exit;
        }
        const char *value;
        if (eq != NULL) {
            value = eq + 1;
        } else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
            value = argv[++i];
        } else {
            rc = err_set(err, errlen, TERN_EINVAL, "%s: missing value", name);
            goto Exit;
        }
        flags[nflags++] = (flagval_t){.s = s, .name = s->flag, .value = value};
        if (s->kind == K_CONFIG)
            config_file = value;
    }

    /* Then the file, then the flags over it. */
    if (config_file != NULL) {
        if (config_file[0] == '\0') {
            rc = err_set(err, errlen, TERN_EINVAL, "--config: expected a non-empty path");
            goto Exit;
        }
        rc = load_file(c, config_file, err, errlen);
        if (rc != 0)
            goto Exit;
    }
    for (size_t i = 0; i < nflags; i++) {
        rc = set_from_string(c, flags[i].s, flags[i].value, flags[i].name, err, errlen);
        if (rc != 0)
            goto Exit;
    }

    if (c->heartbeat_ms >= c->lease_ms) {
        rc = err_set(err, errlen, TERN_EINVAL,
                     "heartbeat_ms (%u) must be less than lease_ms (%u), or a live runner "
                     "would lose its jobs between heartbeats",
                     c->heartbeat_ms, c->lease_ms);
        goto Exit;
    }
    if (c->redis_health_timeout_ms > c->redis_command_timeout_ms) {
        rc = err_set(err, errlen, TERN_EINVAL,
                     "redis_health_timeout_ms (%u) must not exceed redis_command_timeout_ms "
                     "(%u): calls are dropped only after Redis is reported down",
                     c->redis_health_timeout_ms, c->redis_command_timeout_ms);
        goto Exit;
    }
    if (c->plugin_dir[0] == '\0') {
        rc = err_set(err, errlen, TERN_EINVAL, "no plugin directory: pass --plugin-dir");
        goto Exit;
    }
    if (c->runner_id == NULL) {
        char host[256] = "";
        if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0')
            snprintf(host, sizeof host, "localhost");
        host[sizeof host - 1] = '\0';
        c->runner_id = xasprintf("%s-%ld", host, (long)getpid());
    }

Exit:
    free(name);
    free(flags);
    if (rc != 0)
        config_dispose(c);
    return rc;
}

void config_dispose(ternd_config_t *c)
{
    if (c == NULL)
        return;
    free(c->listen);
    free(c->redis_url);
    free(c->data_dir);
    free(c->plugin_dir);
    free(c->workflows_dir);
    free(c->runner_id);
    free_queues(c);
    free(c->redis_server);
    json_decref(c->plugins);
    free(c->config_file);
    free(c->api_token_file);
    free(c->tls_cert);
    free(c->tls_key);
    net_allow_free(c->postback_allow_networks);
    strlist_free(c->allowed_hosts);
    strlist_free(c->allowed_origins);
    memset(c, 0, sizeof *c);
}
