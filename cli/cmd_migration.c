/*
 * cmd_migration.c -- `tern migration begin|automatic|schedule|sync|switch|pause|abort|
 * rollback|finalize|estimate VM` and `tern migration list|get|watch`: moving an
 * instance to another server (RFD 34).
 *
 * Each action creates a job of the workflow migrate-<action> with the target
 * "/migrate-<action>-<vm_uuid>", which its admission check (dc.migration_check)
 * requires, so one action is never queued twice for an instance; a refusal is printed
 * with the API's code and message (exit 3). What the CLI can judge alone (--at,
 * --limit-mbps, --affinity, --owner, an option the action does not take) is refused
 * before any request (exit 2).
 *
 * -w/--wait and `watch` follow GET /migrations/:uuid/watch (newline-delimited JSON:
 * the history, live progress, one end event) and draw it with migration_view.h. A
 * dropped stream is opened again (the view does not draw an entry twice) until the end
 * event, or until it has delivered nothing for WATCH_GIVE_UP_MS. Ctrl-C stops the
 * watching, never the migration.
 *
 * A migration is named by its uuid, or by its VM (uuid or alias): the VM's newest
 * migration, from GET /migrations?vm_uuid=.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "base/ident.h"
#include "cli.h"
#include "client.h"
#include "dc_api.h"
#include "migration_args.h"
#include "migration_view.h"
#include "term.h"
#include "units.h"

#define WATCH_GIVE_UP_MS     30000 /* a watch stream that delivers nothing this long: give up */
#define WATCH_BACKOFF_MAX_MS 5000
#define PHASE_POLL_MS        250  /* how often -w asks whether its job's phase started */
#define PHASE_NOTICE_MS      2000 /* then says once that it waits (for a slot, a hold) */

enum {
    OPT_TARGET = 0x4000,
    OPT_AFFINITY,
    OPT_AT,
    OPT_LIMIT,
    OPT_OWNER,
    OPT_STATE,
    OPT_TARGET_LOST,
};

typedef struct mig_opts {
    const migration_action_t *action; /* NULL for list, get, watch */
    const char *target, *owner, *state;
    json_t *affinity; /* ours, or NULL */
    char at[32];      /* --at as the API takes it, "" when not given */
    double limit_mbps;
    bool has_limit, wait, target_lost;
} mig_opts_t;

static const char *const states[] = {"scheduled", "running",    "paused", "aborted",
                                     "failed",    "successful", "active", NULL};

static cli_status_t on_mig_opt(cli_t *cli, void *data, int c, const char *arg)
{
    mig_opts_t *o = data;
    char err[512];
    unsigned takes = o->action != NULL ? o->action->takes : 0;
    const char *name = o->action != NULL ? o->action->name : "this command";
    switch (c) {
    case OPT_TARGET:
        if (!(takes & MIGRATION_TAKES_PLACEMENT))
            return cli_usage(cli, "--target is not an option of %s", name);
        if (arg[0] == '\0')
            return cli_usage(cli, "--target: expected a server's uuid or hostname");
        o->target = arg;
        return CLI_OK;
    case OPT_AFFINITY:
        if (!(takes & MIGRATION_TAKES_PLACEMENT))
            return cli_usage(cli, "--affinity is not an option of %s", name);
        if (o->affinity == NULL)
            o->affinity = json_object();
        if (!migration_parse_affinity(arg, o->affinity, err, sizeof err))
            return cli_usage(cli, "%s", err);
        return CLI_OK;
    case OPT_AT:
        if (!(takes & MIGRATION_TAKES_AT))
            return cli_usage(cli, "--at is an option of schedule only");
        if (!migration_parse_at(arg, clock_wall_ms(), o->at, sizeof o->at, err, sizeof err))
            return cli_usage(cli, "%s", err);
        return CLI_OK;
    case OPT_LIMIT:
        if (!(takes & MIGRATION_TAKES_LIMIT))
            return cli_usage(cli, "--limit-mbps is not an option of %s", name);
        if (!migration_parse_limit(arg, &o->limit_mbps, err, sizeof err))
            return cli_usage(cli, "%s", err);
        o->has_limit = true;
        return CLI_OK;
    case OPT_TARGET_LOST:
        if (!(takes & MIGRATION_TAKES_TARGET_LOST))
            return cli_usage(cli, "--target-lost is an option of abort only");
        o->target_lost = true;
        return CLI_OK;
    case OPT_OWNER:
        if (!uuid_valid(arg))
            return cli_usage(cli, "--owner \"%s\": expected a uuid", arg);
        o->owner = arg;
        return CLI_OK;
    case OPT_STATE:
        for (const char *const *s = states; *s != NULL; s++)
            if (strcmp(*s, arg) == 0) {
                o->state = arg;
                return CLI_OK;
            }
        return cli_usage(cli,
                         "--state \"%s\": expected scheduled, running, paused, aborted, failed, "
                         "successful or active",
                         arg);
    case 'w':
        if (o->action != NULL && strcmp(o->action->name, "estimate") == 0)
            return cli_usage(cli, "estimate always waits: -w is not an option of it");
        o->wait = true;
        return CLI_OK;
    default:
        return cli_usage(cli, "unknown option");
    }
}

/* The owner a call is made for: --owner, else $TERN_OWNER_UUID, else NULL (the
 * operator). Borrowed. */
static const char *call_owner(const mig_opts_t *o)
{
    if (o->owner != NULL)
        return o->owner;
    const char *env = getenv("TERN_OWNER_UUID");
    return env != NULL && env[0] != '\0' ? env : NULL;
}

/* A VM argument the API could know: a uuid, or an alias as Triton allows them. */
static cli_status_t check_vm_arg(cli_t *cli, const char *vm)
{
    if (uuid_valid(vm))
        return CLI_OK;
    size_t n = strlen(vm);
    bool ok = n > 0 && n <= 189 && isalnum((unsigned char)vm[0]);
    for (size_t i = 0; ok && i < n; i++)
        ok = isalnum((unsigned char)vm[i]) || vm[i] == '_' || vm[i] == '.' || vm[i] == '-';
    if (!ok)
        return cli_usage(cli, "\"%s\": expected a uuid or an instance's alias", vm);
    return CLI_OK;
}

/* ---- finding a migration ------------------------------------------------------- */

/* "?owner_uuid=O" for a user's call, "" for the operator's (malloc'd). */
static char *owner_query(cli_t *cli, const char *owner, char sep)
{
    if (owner == NULL)
        return xstrdup("");
    char *esc = client_escape(cli_client(cli), owner);
    char *q = xasprintf("%cowner_uuid=%s", sep, esc);
    free(esc);
    return q;
}

/* GET /migrations/<uuid>, as `owner`, into *rec (NULL unless CLI_OK). */
static cli_status_t get_migration(cli_t *cli, const char *uuid, const char *owner, json_t **rec)
{
    char *esc = client_escape(cli_client(cli), uuid);
    char *q = owner_query(cli, owner, '?');
    char *path = xasprintf("/migrations/%s%s", esc, q);
    free(q);
    free(esc);
    client_reply_t reply;
    cli_status_t st = client_call(cli_client(cli), "GET", path, NULL, &reply, &cli->err);
    free(path);
    *rec = NULL;
    if (st == CLI_OK && !json_is_object(reply.json))
        st = cli_fail(cli, CLI_UNREACHABLE, NULL, "GET /migrations/%s: expected a JSON object",
                      uuid);
    if (st == CLI_OK)
        *rec = json_incref(reply.json);
    client_reply_dispose(&reply);
    return st;
}

/* The newest migration of VM `vm_uuid` into *rec. */
static cli_status_t newest_of_vm(cli_t *cli, const char *vm_uuid, const char *owner, json_t **rec)
{
    char *query = NULL;
    dc_query_add(cli, &query, "vm_uuid", vm_uuid);
    if (owner != NULL)
        dc_query_add(cli, &query, "owner_uuid", owner);
    json_t *rows = NULL;
    char *next = NULL;
    cli_status_t st = cli_get_list(cli, "/migrations", query, 1, NULL, &rows, &next);
    free(next);
    free(query);
    *rec = NULL;
    if (st == CLI_OK && json_array_size(rows) == 0)
        st = cli_fail(cli, CLI_API, "MigrationNotFound", "instance %s has no migration", vm_uuid);
    if (st == CLI_OK)
        *rec = json_incref(json_array_get(rows, 0));
    json_decref(rows);
    return st;
}

/* The migration `ref` names: a migration's uuid (or a VM's, which the view of one
 * migration takes too), else a VM's alias. */
static cli_status_t find_migration(cli_t *cli, const char *ref, const char *owner, json_t **rec)
{
    cli_status_t st;
    if (uuid_valid(ref)) {
        st = get_migration(cli, ref, owner, rec);
        if (st != CLI_API || (strcmp(cli->err.code, "MigrationNotFound") != 0 &&
                              strcmp(cli->err.code, "ResourceNotFound") != 0))
            return st;
        memset(&cli->err, 0, sizeof cli->err);
        st = newest_of_vm(cli, ref, owner, rec);
        if (st == CLI_API && strcmp(cli->err.code, "MigrationNotFound") == 0)
            cli_fail(cli, CLI_API, "MigrationNotFound",
                     "no migration and no instance's migration "
                     "%s",
                     ref);
        return st;
    }
    json_t *vm;
    if ((st = dc_find_vm(cli, ref, &vm)) != CLI_OK)
        return st;
    st = newest_of_vm(cli, json_string_value(json_object_get(vm, "uuid")), owner, rec);
    json_decref(vm);
    return st;
}

/* ---- watching ------------------------------------------------------------------ */

/* Lines remembered to tell a replayed history from news; past this many the memory is
 * cleared (everything looks new once: the give-up of a stream that only replays is a
 * safety net, not an exact count). */
#define SEEN_MAX 10000

typedef struct follower {
    cli_t *cli;
    migration_view_t *view; /* NULL with -j */
    unsigned long fresh;    /* lines not seen before, all connections */
    json_t *seen;           /* hashes of the lines read (ours), an object used as a set */
    bool ended;
    char end_state[32];
} follower_t;

/* True the first time the text `line` is read. */
static bool first_sight(follower_t *f, const char *line, size_t len)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)line[i]) * 1099511628211ull;
    char key[17];
    snprintf(key, sizeof key, "%016llx", (unsigned long long)h);
    if (json_object_get(f->seen, key) != NULL)
        return false;
    if (json_object_size(f->seen) >= SEEN_MAX)
        json_object_clear(f->seen);
    json_object_set_new(f->seen, key, json_true());
    return true;
}

static bool on_watch_line(void *data, const char *line, size_t len)
{
    follower_t *f = data;
    if (len == 0 || line[0] != '{')
        return true; /* a keep-alive */
    json_t *ev = json_loadb(line, len, 0, NULL);
    if (!json_is_object(ev)) {
        json_decref(ev);
        return true;
    }
    bool fresh = first_sight(f, line, len);
    f->fresh += fresh;
    const char *type = json_string_value(json_object_get(ev, "type"));
    bool end = type != NULL && strcmp(type, "end") == 0;
    if (f->view != NULL) {
        migration_view_event(f->view, ev, clock_mono_ms());
    } else if (fresh) {
        fwrite(line, 1, len, stdout);
        fputc('\n', stdout);
        fflush(stdout);
    }
    if (end) {
        const char *s = json_string_value(json_object_get(ev, "state"));
        snprintf(f->end_state, sizeof f->end_state, "%s", s != NULL ? s : "");
        f->ended = true;
    }
    json_decref(ev);
    return !f->ended;
}

static bool on_watch_tick(void *data)
{
    follower_t *f = data;
    return !f->ended;
}

/* Sleeps `ms` unless interrupted. Returns false when Ctrl-C came. */
static bool pause_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (!client_interrupted() && nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    return !client_interrupted();
}

/* The exit status of a migration that stopped in `state`: `action` (NULL for watch)
 * ended as asked. */
static cli_status_t end_status(const char *state, const char *action)
{
    if (strcmp(state, "failed") == 0)
        return CLI_FAILED;
    if (strcmp(state, "aborted") == 0)
        return action != NULL && (strcmp(action, "abort") == 0 || strcmp(action, "rollback") == 0)
                   ? CLI_OK
                   : CLI_FAILED;
    return CLI_OK;
}

/* Follows migration `uuid` to its end event. */
static cli_status_t watch_migration(cli_t *cli, const char *uuid, const char *owner,
                                    const char *action)
{
    follower_t f = {.cli = cli, .seen = json_object()};
    term_caps_t caps = term_probe(STDOUT_FILENO);
    if (!cli->out.json)
        f.view = migration_view_new(stdout, &caps, uuid);
    char *esc = client_escape(cli_client(cli), uuid);
    char *q = owner_query(cli, owner, '?');
    char *path = xasprintf("/migrations/%s/watch%s", esc, q);
    free(q);
    free(esc);
    cli_status_t st = CLI_OK;
    unsigned backoff_ms = 250;
    uint64_t quiet_since = clock_mono_ms();
    while (!f.ended) {
        unsigned long before = f.fresh;
        long status = 0;
        cli_error_t err = {0};
        st = client_stream(cli_client(cli), path, "application/x-ndjson", on_watch_line,
                           on_watch_tick, &f, &status, &err);
        if (f.ended || st == CLI_INTERRUPTED)
            break;
        if (st == CLI_API && (status == 404 || status == 405) && f.fresh == 0 &&
            strcmp(err.code, "MigrationNotFound") != 0) {
            st = cli_fail(cli, CLI_API, err.code,
                          "the API at %s has no migration watch (GET /migrations/:uuid/watch): %s",
                          cli->url, err.message);
            break;
        }
        if (st == CLI_API && status < 500) {
            cli->err = err;
            break;
        }
        /* Cut before the end event (the server restarted, a proxy timed out): read it
         * again from the start; the view skips what it drew. Only news resets the
         * clock: a stream that keeps replaying the same history is given up. */
        if (f.fresh > before) {
            backoff_ms = 250;
            quiet_since = clock_mono_ms();
        } else if (clock_mono_ms() - quiet_since > WATCH_GIVE_UP_MS) {
            if (f.view != NULL)
                migration_view_clear(f.view);
            st = cli_fail(cli, st == CLI_API ? CLI_API : CLI_UNREACHABLE, err.code,
                          "the watch of migration %s keeps ending before the migration does%s%s; "
                          "it goes on (tern migration watch %s)",
                          uuid, err.message[0] ? ": " : "", err.message, uuid);
            break;
        }
        if (!pause_ms(backoff_ms)) {
            st = CLI_INTERRUPTED;
            break;
        }
        backoff_ms = backoff_ms * 2 > WATCH_BACKOFF_MAX_MS ? WATCH_BACKOFF_MAX_MS : backoff_ms * 2;
    }
    free(path);
    if (f.ended) {
        st = end_status(f.end_state, action);
        if (st != CLI_OK)
            cli_fail(cli, st, NULL, "migration %s ended %s", uuid, f.end_state);
        if (st != CLI_OK && f.view != NULL)
            cli->err.message[0] = '\0'; /* the view's final line said it */
    } else if (st == CLI_INTERRUPTED) {
        if (f.view != NULL)
            migration_view_clear(f.view);
        cli_fail(cli, CLI_INTERRUPTED, NULL,
                 "stopped watching; migration %s goes on (tern migration watch %s)", uuid, uuid);
    }
    migration_view_free(f.view);
    json_decref(f.seen);
    return st;
}

/* Reads job `uuid` into *job. */
static cli_status_t get_job(cli_t *cli, const char *uuid, json_t **job)
{
    char *esc = client_escape(cli_client(cli), uuid);
    char *path = xasprintf("/jobs/%s", esc);
    free(esc);
    client_reply_t reply;
    cli_status_t st = client_call(cli_client(cli), "GET", path, NULL, &reply, &cli->err);
    free(path);
    *job = st == CLI_OK ? json_incref(reply.json) : NULL;
    client_reply_dispose(&reply);
    return st;
}

static bool job_final(const json_t *job)
{
    const char *ex = json_string_value(json_object_get(job, "execution"));
    return ex != NULL && (strcmp(ex, "succeeded") == 0 || strcmp(ex, "failed") == 0 ||
                          strcmp(ex, "canceled") == 0);
}

/* The text of a migration's wait for a slot (`waiting_for_slot` of a view), the
 * server's uuid cut to `server_chars` (0: whole); NULL when it does not wait. */
static const char *wait_text(const json_t *rec, size_t server_chars, char *buf, size_t n)
{
    const json_t *w = json_object_get(rec, "waiting_for_slot");
    if (!json_is_object(w))
        return NULL;
    const json_t *ahead = json_object_get(w, "ahead");
    return migration_view_wait_text(
        json_string_value(json_object_get(w, "server_uuid")),
        json_is_integer(ahead) ? (long long)json_integer_value(ahead) : 0, server_chars, buf, n);
}

/* Waits until job `job_uuid` runs its phase of migration `mig` (the record names the
 * job), or has ended: before that the watch would show the migration's previous stop.
 * A job that ended without the migration existing (refused at its claim) fails with
 * the job's error. */
static cli_status_t wait_phase(cli_t *cli, const char *mig, const char *job_uuid, const char *owner)
{
    uint64_t start = clock_mono_ms();
    bool told = false;
    for (;;) {
        json_t *rec = NULL, *job = NULL;
        cli_status_t st = get_migration(cli, mig, owner, &rec);
        bool exists = st == CLI_OK;
        if (st == CLI_API && strcmp(cli->err.code, "MigrationNotFound") == 0)
            st = CLI_OK; /* not claimed yet */
        if (st != CLI_OK)
            return st;
        memset(&cli->err, 0, sizeof cli->err);
        const char *running = json_string_value(json_object_get(rec, "job_uuid"));
        bool started = running != NULL && strcmp(running, job_uuid) == 0;
        /* A begin waiting for its slot is answered without a record: not begun yet. */
        exists = exists && json_object_get(rec, "created_timestamp") != NULL;
        const json_t *w = json_object_get(rec, "waiting_for_slot");
        const char *waiting = json_string_value(json_object_get(w, "job_uuid"));
        if (!told && !cli->out.json && waiting != NULL && strcmp(waiting, job_uuid) == 0) {
            char text[256];
            printf("Job %s is %s...\n", job_uuid, wait_text(rec, 0, text, sizeof text));
            fflush(stdout);
            told = true;
        }
        json_decref(rec);
        if (started)
            return CLI_OK;
        if ((st = get_job(cli, job_uuid, &job)) != CLI_OK)
            return st;
        bool final = job_final(job);
        if (final && !exists) {
            const json_t *e = json_object_get(job, "error");
            const char *code = json_string_value(json_object_get(e, "code"));
            const char *msg = json_is_string(e) ? json_string_value(e)
                                                : json_string_value(json_object_get(e, "message"));
            st = cli_fail(cli, CLI_FAILED, code, "job %s ended %s before migration %s began%s%s",
                          job_uuid, json_string_value(json_object_get(job, "execution")), mig,
                          msg != NULL ? ": " : "", msg != NULL ? msg : "");
        }
        json_decref(job);
        if (final)
            return st;
        if (!told && !cli->out.json && clock_mono_ms() - start > PHASE_NOTICE_MS) {
            printf("Waiting for job %s to start (it may wait for a migration slot)...\n", job_uuid);
            fflush(stdout);
            told = true;
        }
        if (!pause_ms(PHASE_POLL_MS)) {
            return cli_fail(cli, CLI_INTERRUPTED, NULL,
                            "stopped waiting; job %s goes on (tern migration watch %s)", job_uuid,
                            mig);
        }
    }
}

/* ---- actions ------------------------------------------------------------------- */

/* VM `ref` (a uuid, or an alias looked up) into uuid. */
static cli_status_t vm_uuid_of(cli_t *cli, const char *ref, char uuid[37])
{
    if (uuid_valid(ref)) {
        snprintf(uuid, 37, "%s", ref);
        return CLI_OK;
    }
    json_t *vm;
    cli_status_t st = dc_find_vm(cli, ref, &vm);
    if (st != CLI_OK)
        return st;
    const char *u = json_string_value(json_object_get(vm, "uuid"));
    if (u == NULL || strlen(u) != 36)
        st = cli_fail(cli, CLI_UNREACHABLE, NULL, "the instance \"%s\" came without a uuid", ref);
    else
        memcpy(uuid, u, 37);
    json_decref(vm);
    return st;
}

/* The affinity's VMs given by alias, replaced by their uuids (in place). */
static cli_status_t resolve_affinity(cli_t *cli, json_t *affinity)
{
    static const char *const keys[] = {"near", "far"};
    for (size_t k = 0; k < 2; k++) {
        json_t *list = json_object_get(affinity, keys[k]);
        size_t i;
        json_t *item;
        json_array_foreach(list, i, item)
        {
            const char *ref = json_string_value(item);
            if (uuid_valid(ref))
                continue;
            char uuid[37];
            cli_status_t st = check_vm_arg(cli, ref);
            if (st == CLI_OK)
                st = vm_uuid_of(cli, ref, uuid);
            if (st != CLI_OK)
                return st;
            json_array_set_new(list, i, json_string(uuid));
        }
    }
    return CLI_OK;
}

/* The job's params: docs/MIGRATION.md, dc.migration_check. */
static cli_status_t build_params(cli_t *cli, mig_opts_t *o, const char *vm_uuid, json_t **out)
{
    json_t *p = json_pack("{s:s}", "vm_uuid", vm_uuid);
    const char *owner = call_owner(o);
    cli_status_t st = CLI_OK;
    if (owner != NULL)
        json_object_set_new(p, "owner_uuid", json_string(owner));
    if (o->target != NULL) {
        char server[37];
        if (uuid_valid(o->target))
            snprintf(server, sizeof server, "%s", o->target);
        else
            st = dc_find_uuid(cli, "/servers", "hostname", "server", o->target, server);
        if (st == CLI_OK)
            json_object_set_new(p, "target_server_uuid", json_string(server));
    }
    if (st == CLI_OK && o->affinity != NULL && (st = resolve_affinity(cli, o->affinity)) == CLI_OK)
        json_object_set(p, "affinity", o->affinity);
    if (o->has_limit)
        json_object_set_new(p, "send_mbps_limit",
                            o->limit_mbps == (double)(json_int_t)o->limit_mbps
                                ? json_integer((json_int_t)o->limit_mbps)
                                : json_real(o->limit_mbps));
    if (o->at[0] != '\0')
        json_object_set_new(p, "scheduled_timestamp", json_string(o->at));
    if (o->target_lost)
        json_object_set_new(p, "target_lost", json_true());
    if (st != CLI_OK) {
        json_decref(p);
        p = NULL;
    }
    *out = p;
    return st;
}

/* The result of job `job` (borrowed) with `key` ("size_bytes"): the last step result
 * that has it, or NULL. Borrowed from job. */
static const json_t *job_result_with(const json_t *job, const char *key)
{
    const json_t *found = NULL;
    size_t i;
    const json_t *r;
    json_array_foreach(json_object_get(job, "chain_results"), i, r)
    {
        const json_t *res = json_object_get(r, "result");
        if (json_object_get(res, key) != NULL)
            found = res;
    }
    return found;
}

static cli_status_t print_estimate(cli_t *cli, const char *job_uuid, const char *vm_uuid)
{
    cli_status_t st = dc_wait_job(cli, job_uuid);
    json_t *job = NULL;
    if (st == CLI_OK)
        st = get_job(cli, job_uuid, &job);
    const json_t *res = st == CLI_OK ? job_result_with(job, "size_bytes") : NULL;
    if (st == CLI_OK && res == NULL)
        st = cli_fail(cli, CLI_UNREACHABLE, NULL, "job %s succeeded without an estimate", job_uuid);
    if (st == CLI_OK && cli->out.json) {
        output_json(stdout, res);
    } else if (st == CLI_OK) {
        char size[32], total[32], down[32];
        json_t *sz = json_object_get(res, "size_bytes");
        json_t *ts = json_object_get(res, "total_seconds");
        json_t *ds = json_object_get(res, "downtime_seconds");
        units_bytes(json_is_number(sz) ? json_number_value(sz) : -1, size, sizeof size);
        units_eta_s(json_is_number(ts) ? json_number_value(ts) : -1, total, sizeof total);
        units_eta_s(json_is_number(ds) ? json_number_value(ds) : -1, down, sizeof down);
        printf("Migrating instance %s would send %s and take about %s, with about %s of "
               "downtime.\n",
               vm_uuid, size, total, down);
    }
    json_decref(job);
    return st;
}

static const struct option action_long[] = {
    {"target", required_argument, NULL, OPT_TARGET},
    {"affinity", required_argument, NULL, OPT_AFFINITY},
    {"at", required_argument, NULL, OPT_AT},
    {"limit-mbps", required_argument, NULL, OPT_LIMIT},
    {"owner", required_argument, NULL, OPT_OWNER},
    {"target-lost", no_argument, NULL, OPT_TARGET_LOST},
    {"wait", no_argument, NULL, 'w'},
    {"watch", no_argument, NULL, 'w'},
    {NULL, 0, NULL, 0},
};

static cli_status_t migration_action(cli_t *cli, int argc, char **argv)
{
    mig_opts_t o = {.action = migration_action_find(argv[0])};
    int first;
    cli_status_t st;
    json_t *params = NULL, *job = NULL, *rec = NULL;
    char *target = NULL;
    if (o.action == NULL) {
        st = cli_usage(cli, "unknown action \"%s\"", argv[0]);
        goto Done;
    }
    if (!args_parse(cli, argc, argv, "w", action_long, on_mig_opt, &o, &first, &st))
        goto Done;
    if (first >= argc || first + 1 < argc) {
        st = first >= argc ? cli_usage(cli, "missing VM (its uuid or alias)")
                           : cli_usage(cli, "unexpected argument \"%s\"", argv[first + 1]);
        goto Done;
    }
    if ((o.action->takes & MIGRATION_TAKES_AT) && o.at[0] == '\0') {
        st = cli_usage(cli, "missing --at TIME (when the switch starts)");
        goto Done;
    }
    if ((st = dc_owner_check(cli, o.owner)) != CLI_OK ||
        (st = check_vm_arg(cli, argv[first])) != CLI_OK)
        goto Done;
    /* Everything above needed no request. */
    char vm_uuid[37];
    if ((st = vm_uuid_of(cli, argv[first], vm_uuid)) != CLI_OK ||
        (st = build_params(cli, &o, vm_uuid, &params)) != CLI_OK)
        goto Done;
    const char *owner = call_owner(&o);
    char workflow[64];
    snprintf(workflow, sizeof workflow, "migrate-%s", o.action->name);
    target = xasprintf("/migrate-%s-%s", o.action->name, vm_uuid);
    if ((st = dc_create_job(cli, workflow, target, params, &job)) != CLI_OK)
        goto Done;
    const char *job_uuid = json_string_value(json_object_get(job, "uuid"));
    if (strcmp(o.action->name, "estimate") == 0) {
        st = print_estimate(cli, job_uuid, vm_uuid);
        goto Done;
    }
    /* The migration: the job's own for a new one, else the VM's newest. */
    const char *mig = NULL;
    if (o.action->new_migration) {
        mig = job_uuid;
    } else if (newest_of_vm(cli, vm_uuid, owner, &rec) == CLI_OK) {
        mig = json_string_value(json_object_get(rec, "uuid"));
    } else {
        memset(&cli->err, 0, sizeof cli->err); /* the job is made: say so all the same */
    }
    if (output_wants_generic(&cli->out) && !o.wait) {
        output_object(stdout, &cli->out, job, NULL);
        goto Done;
    }
    if (!cli->out.json) {
        if (strcmp(argv[first], vm_uuid) != 0)
            printf("%s instance %s (%s): job %s", o.action->doing, argv[first], vm_uuid, job_uuid);
        else
            printf("%s instance %s: job %s", o.action->doing, vm_uuid, job_uuid);
        if (mig != NULL)
            printf(", migration %s", mig);
        printf("\n");
        if (!o.wait && mig != NULL && (o.action->takes & MIGRATION_HAS_PHASE))
            printf("Watch it with: tern migration watch %s\n", vm_uuid);
        fflush(stdout);
    }
    if (!o.wait)
        goto Done;
    if (!(o.action->takes & MIGRATION_HAS_PHASE) || mig == NULL) {
        /* finalize: no phase to draw, its job is all there is. */
        st = dc_wait_job(cli, job_uuid);
        if (st == CLI_OK && !cli->out.json)
            printf("Migration was finalized.\n");
        goto Done;
    }
    /* pause runs beside the sync it pauses: that sync's stream says when it stops. */
    if (strcmp(o.action->name, "pause") != 0 &&
        (st = wait_phase(cli, mig, job_uuid, owner)) != CLI_OK)
        goto Done;
    st = watch_migration(cli, mig, owner, o.action->name);
Done:
    json_decref(rec);
    json_decref(job);
    json_decref(params);
    json_decref(o.affinity);
    free(target);
    return st;
}

/* ---- list, get, watch ---------------------------------------------------------- */

static void cell_vm(const json_t *row, char *buf, size_t n)
{
    const char *u = json_string_value(json_object_get(row, "vm_uuid"));
    snprintf(buf, n, "%.8s", u != NULL ? u : "-");
}

static void cell_short_server(const json_t *row, const char *key, char *buf, size_t n)
{
    const char *u = json_string_value(json_object_get(row, key));
    snprintf(buf, n, "%.8s", u != NULL ? u : "-");
}

static void cell_source(const json_t *row, char *buf, size_t n)
{
    cell_short_server(row, "source_server_uuid", buf, n);
}

static void cell_target(const json_t *row, char *buf, size_t n)
{
    cell_short_server(row, "target_server_uuid", buf, n);
}

/* How long ago the migration was created: "45s", "3h12m", "2d03h". */
static void cell_age(const json_t *row, char *buf, size_t n)
{
    uint64_t at, now = clock_wall_ms();
    const char *s = json_string_value(json_object_get(row, "created_timestamp"));
    if (s == NULL || !units_parse_iso(s, &at))
        snprintf(buf, n, "-");
    else
        units_eta_s(now > at ? (double)(now - at) / 1000.0 : 0, buf, n);
}

/* The latest progress of a running migration: "39%", "waiting for a migration slot on
 * <server>" while a job of it waits for one, else "-". */
static void cell_progress(const json_t *row, char *buf, size_t n)
{
    if (wait_text(row, 8, buf, n) != NULL)
        return;
    const json_t *p = json_object_get(row, "progress");
    const char *state = json_string_value(json_object_get(row, "state"));
    json_t *cur = json_object_get(p, "current_progress"),
           *tot = json_object_get(p, "total_progress");
    if (state == NULL || strcmp(state, "running") != 0 || !json_is_number(cur) ||
        !json_is_number(tot) || json_number_value(tot) <= 0) {
        snprintf(buf, n, "-");
        return;
    }
    double pct = json_number_value(cur) * 100.0 / json_number_value(tot);
    snprintf(buf, n, "%.0f%%", pct > 100 ? 100 : pct < 0 ? 0 : pct);
}

static const output_column_t migration_columns[] = {
    {"SHORTID", NULL, dc_cell_shortid},
    {"VM", NULL, cell_vm},
    {"PHASE", "phase", NULL},
    {"STATE", "state", NULL},
    {"AGE", NULL, cell_age},
    {"PROGRESS", NULL, cell_progress},
    {"SOURCE", NULL, cell_source},
    {"TARGET", NULL, cell_target},
    {"AUTOMATIC", "automatic", NULL},
    {NULL, NULL, NULL},
};

static const struct option list_long[] = {
    {"state", required_argument, NULL, OPT_STATE},
    {"owner", required_argument, NULL, OPT_OWNER},
    {NULL, 0, NULL, 0},
};

static cli_status_t migration_list(cli_t *cli, int argc, char **argv)
{
    mig_opts_t o = {0};
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, "", list_long, on_mig_opt, &o, &first, &st))
        return st;
    if (first < argc)
        return cli_usage(cli, "unexpected argument \"%s\"", argv[first]);
    if ((st = dc_owner_check(cli, o.owner)) != CLI_OK)
        return st;
    char *query = NULL;
    if (o.state != NULL)
        dc_query_add(cli, &query, "state", o.state);
    if (call_owner(&o) != NULL)
        dc_query_add(cli, &query, "owner_uuid", call_owner(&o));
    json_t *rows;
    st = dc_list(cli, "/migrations", query, &rows);
    if (st == CLI_OK)
        output_table(stdout, &cli->out, rows, migration_columns, NULL);
    json_decref(rows);
    free(query);
    return st;
}

static const struct option one_long[] = {
    {"owner", required_argument, NULL, OPT_OWNER},
    {NULL, 0, NULL, 0},
};

/* The one argument, MIGRATION or VM, of get and watch. */
static cli_status_t one_migration_arg(cli_t *cli, int argc, char **argv, mig_opts_t *o,
                                      const char **ref)
{
    int first;
    cli_status_t st;
    if (!args_parse(cli, argc, argv, "", one_long, on_mig_opt, o, &first, &st))
        return st;
    if (first >= argc)
        return cli_usage(cli, "missing MIGRATION or VM (a uuid, or an instance's alias)");
    if (first + 1 < argc)
        return cli_usage(cli, "unexpected argument \"%s\"", argv[first + 1]);
    if ((st = dc_owner_check(cli, o->owner)) != CLI_OK ||
        (st = check_vm_arg(cli, argv[first])) != CLI_OK)
        return st;
    *ref = argv[first];
    return CLI_OK;
}

static double num_of(const json_t *o, const char *key)
{
    const json_t *j = json_object_get(o, key);
    return json_is_number(j) ? json_number_value(j) : -1;
}

/* The fields `get` shows, in order, with sizes and times as people read them. */
static json_t *summary_of(const json_t *rec)
{
    static const char *const keys[] = {"uuid",
                                       "vm_uuid",
                                       "state",
                                       "phase",
                                       "automatic",
                                       "account_uuid",
                                       "source_server_uuid",
                                       "target_server_uuid",
                                       "created_timestamp",
                                       "scheduled_timestamp",
                                       "started_timestamp",
                                       "finished_timestamp",
                                       "finalized_timestamp",
                                       "num_sync_phases",
                                       "switch_reason",
                                       "send_mbps_limit",
                                       "error",
                                       "errorDetail",
                                       NULL};
    json_t *s = json_object();
    for (const char *const *k = keys; *k != NULL; k++) {
        const json_t *v = json_object_get(rec, *k);
        if (v != NULL && !json_is_null(v))
            json_object_set(s, *k, (json_t *)v);
    }
    char buf[64];
    double last = num_of(rec, "last_sync_size");
    if (last >= 0)
        json_object_set_new(s, "last_sync_size", json_string(units_bytes(last, buf, sizeof buf)));
    /* A running migration's latest progress, as the watch's live line says it; while a
     * job of the migration waits for a slot, that wait (in any state). */
    const json_t *progress = json_object_get(rec, "progress");
    const char *state = json_string_value(json_object_get(rec, "state"));
    char wait[256];
    if (wait_text(rec, 0, wait, sizeof wait) != NULL) {
        json_object_set_new(s, "progress", json_string(wait));
        const json_t *w = json_object_get(rec, "waiting_for_slot");
        const char *job = json_string_value(json_object_get(w, "job_uuid"));
        const char *action = json_string_value(json_object_get(w, "action"));
        const char *since = json_string_value(json_object_get(w, "since"));
        json_object_set_new(s, "waiting_job", json_string(job != NULL ? job : "-"));
        if (action != NULL)
            json_object_set_new(s, "waiting_action", json_string(action));
        if (since != NULL)
            json_object_set_new(s, "waiting_since", json_string(since));
    } else if (json_is_object(progress) && state != NULL && strcmp(state, "running") == 0) {
        const json_t *cur = json_object_get(progress, "current_progress");
        const json_t *tot = json_object_get(progress, "total_progress");
        double pct = json_is_number(cur) && json_is_number(tot) && json_number_value(tot) > 0
                         ? json_number_value(cur) * 100.0 / json_number_value(tot)
                         : -1;
        const char *msg = json_string_value(json_object_get(progress, "message"));
        const char *phase = json_string_value(json_object_get(rec, "phase"));
        char line[512];
        migration_view_live_text(msg != NULL ? msg : migration_view_phase_text(phase),
                                 pct > 100 ? 100 : pct, progress, line, sizeof line);
        json_object_set_new(s, "progress", json_string(line));
    }
    uint64_t a, b;
    const char *st = json_string_value(json_object_get(rec, "started_timestamp"));
    const char *fin = json_string_value(json_object_get(rec, "finished_timestamp"));
    if (st != NULL && units_parse_iso(st, &a)) {
        b = fin != NULL && units_parse_iso(fin, &b) ? b : clock_wall_ms();
        json_object_set_new(s, "total_runtime",
                            json_string(units_duration_ms(b > a ? b - a : 0, buf, sizeof buf)));
    }
    return s;
}

static void cell_entry_duration(const json_t *row, char *buf, size_t n)
{
    double ms = num_of(row, "duration_ms");
    if (ms < 0)
        snprintf(buf, n, "-");
    else
        units_duration_ms((uint64_t)ms, buf, n);
}

static void cell_entry_bytes(const json_t *row, char *buf, size_t n)
{
    double b = num_of(row, "current_progress");
    if (json_object_get(row, "pass") == NULL || b < 0)
        snprintf(buf, n, "-");
    else
        units_bytes(b, buf, n);
}

static const output_column_t pass_columns[] = {
    {"PASS", "pass", NULL},
    {"PHASE", "phase", NULL},
    {"BYTES", NULL, cell_entry_bytes},
    {"DURATION", NULL, cell_entry_duration},
    {"STARTED", "started_timestamp", NULL},
    {NULL, NULL, NULL},
};

static const output_column_t history_columns[] = {
    {"PHASE", "phase", NULL},
    {"STATE", "state", NULL},
    {"MESSAGE", "message", NULL},
    {"STARTED", "started_timestamp", NULL},
    {"DURATION", NULL, cell_entry_duration},
    {"ERROR", "error", NULL},
    {NULL, NULL, NULL},
};

static cli_status_t migration_get(cli_t *cli, int argc, char **argv)
{
    mig_opts_t o = {0};
    const char *ref;
    cli_status_t st = one_migration_arg(cli, argc, argv, &o, &ref);
    json_t *rec;
    if (st != CLI_OK || (st = find_migration(cli, ref, call_owner(&o), &rec)) != CLI_OK)
        return st;
    if (output_wants_generic(&cli->out)) {
        output_object(stdout, &cli->out, rec, migration_columns);
    } else {
        json_t *summary = summary_of(rec);
        output_fields(stdout, summary);
        json_decref(summary);
        const json_t *history = json_object_get(rec, "progress_history");
        json_t *passes = json_array();
        size_t i;
        const json_t *e;
        json_array_foreach(history, i, e)
        {
            if (json_object_get(e, "pass") != NULL)
                json_array_append(passes, (json_t *)e);
        }
        output_opts_t plain = {0};
        if (json_array_size(passes) > 0) {
            printf("\npasses:\n");
            output_table(stdout, &plain, passes, pass_columns, NULL);
        }
        json_decref(passes);
        if (json_array_size(history) > 0) {
            printf("\nhistory:\n");
            output_table(stdout, &plain, history, history_columns, NULL);
        }
    }
    json_decref(rec);
    return CLI_OK;
}

static cli_status_t migration_watch(cli_t *cli, int argc, char **argv)
{
    mig_opts_t o = {0};
    const char *ref;
    cli_status_t st = one_migration_arg(cli, argc, argv, &o, &ref);
    json_t *rec;
    if (st != CLI_OK || (st = find_migration(cli, ref, call_owner(&o), &rec)) != CLI_OK)
        return st;
    const char *uuid = json_string_value(json_object_get(rec, "uuid"));
    if (uuid == NULL)
        st = cli_fail(cli, CLI_UNREACHABLE, NULL, "the migration of \"%s\" came without a uuid",
                      ref);
    else
        st = watch_migration(cli, uuid, call_owner(&o), NULL);
    json_decref(rec);
    return st;
}

#define ACTION_USAGE(verb, extra) "migration " verb " VM" extra " [--owner U] [-w]"

#define COMMON_HELP                                                                                \
    "  VM                the instance's uuid or alias\n"                                           \
    "  --owner U         act as that owner (a user's call: the migration must be\n"                \
    "                    allowed for the VM, and only its own migrations are seen);\n"             \
    "                    default $TERN_OWNER_UUID, else the operator\n"                            \
    "  -w, --wait        follow the migration until this action's phase ends, drawn as\n"          \
    "                    `tern migration watch` draws it\n"                                        \
    "\nWithout -w, prints the job's and the migration's uuids. A refusal (the admission\n"         \
    "check's) prints its code and message (exit status 3); with -w the exit status is\n"           \
    "0 when the phase ended as asked, 1 when the migration failed (or was aborted, for\n"          \
    "another action than abort and rollback), 130 on Ctrl-C (the migration goes on).\n"

#define PLACEMENT_HELP                                                                             \
    "  --target SERVER   the target server (uuid or hostname); else placement chooses,\n"          \
    "                    never the source, with the VM's actual RAM and disk\n"                    \
    "  --affinity RULES  far=VM, near=VM (a server without / with that VM) or\n"                   \
    "                    rack=same|other, comma separated or repeated\n"

#define LIMIT_HELP                                                                                 \
    "  --limit-mbps N    this migration's transfer limit in megabits per second (a\n"              \
    "                    positive number; default the datacenter's\n"                              \
    "                    migration_send_mbps_limit)\n"

const cli_command_t cmd_migration_commands[] = {
    {"migration", "begin", migration_action,
     ACTION_USAGE("begin", " [--target S] [--affinity R] [--limit-mbps N]"),
     "Begin migrating an instance: reserve a target, then pause (migrate-begin).",
     PLACEMENT_HELP LIMIT_HELP COMMON_HELP},
    {"migration", "automatic", migration_action,
     ACTION_USAGE("automatic", " [--target S] [--affinity R] [--limit-mbps N]"),
     "Migrate an instance from start to end (migrate-automatic).",
     PLACEMENT_HELP LIMIT_HELP COMMON_HELP},
    {"migration", "schedule", migration_action,
     ACTION_USAGE("schedule", " --at TIME [--target S] [--affinity R] [--limit-mbps N]"),
     "Begin and sync now, switch at a given time (migrate-schedule).",
     "  --at TIME         when the switch starts: ISO 8601 in UTC (2026-11-27T03:00:00Z;\n"
     "                    an explicit offset is converted) or from now (+30m, +2h, +1d);\n"
     "                    a time not in the future is refused\n" PLACEMENT_HELP LIMIT_HELP
         COMMON_HELP},
    {"migration", "sync", migration_action, ACTION_USAGE("sync", " [--limit-mbps N]"),
     "Copy what changed to the target, then pause (migrate-sync).", LIMIT_HELP COMMON_HELP},
    {"migration", "switch", migration_action, ACTION_USAGE("switch", " [--limit-mbps N]"),
     "Stop, copy the rest, verify, and run the instance on the target (migrate-switch).",
     LIMIT_HELP COMMON_HELP},
    {"migration", "pause", migration_action, ACTION_USAGE("pause", ""),
     "Pause a running sync at its next safe point (migrate-pause).", COMMON_HELP},
    {"migration", "abort", migration_action, ACTION_USAGE("abort", " [--target-lost]"),
     "Abort a migration and put the instance back as it was (migrate-abort).",
     "  --target-lost     the target server is lost: end without removing the target's\n"
     "                    copy, which is removed when that server is back\n"
     "                    (migrate-target-clean)\n" COMMON_HELP},
    {"migration", "rollback", migration_action, ACTION_USAGE("rollback", ""),
     "Move a successful migration's instance back to its source (migrate-rollback).", COMMON_HELP},
    {"migration", "finalize", migration_action, ACTION_USAGE("finalize", ""),
     "Remove the source's copy of a successful migration (migrate-finalize).", COMMON_HELP},
    {"migration", "estimate", migration_action,
     "migration estimate VM [--limit-mbps N] [--owner U]",
     "Estimate a migration's size, time and downtime (migrate-estimate).",
     LIMIT_HELP "  VM                the instance's uuid or alias\n"
                "\nWaits for the job and prints its estimate (-j: {size_bytes, total_seconds,\n"
                "downtime_seconds}).\n"},
    {"migration", "list", migration_list, "migration list [--state S] [--owner U]",
     "List migrations, newest first.",
     "  --state S    scheduled, running, paused, aborted, failed, successful, or active\n"
     "               (running, paused, scheduled or failed)\n"
     "  --owner U    that owner's (default $TERN_OWNER_UUID, else all)\n"
     "\nColumns: SHORTID VM PHASE STATE AGE PROGRESS SOURCE TARGET AUTOMATIC; -j prints\n"
     "the records.\n"},
    {"migration", "get", migration_get, "migration get MIGRATION|VM [--owner U]",
     "Show a migration: its record, passes and history.",
     "  MIGRATION|VM  a migration's uuid, or an instance (uuid or alias): its newest\n"
     "\nShows state, phase, times, total runtime, the sync passes with their bytes, then\n"
     "the history; -j prints the record as the API has it.\n"},
    {"migration", "watch", migration_watch, "migration watch MIGRATION|VM [--owner U]",
     "Follow a migration until it stops (Ctrl-C stops the watching only).",
     "  MIGRATION|VM  a migration's uuid, or an instance (uuid or alias): its newest\n"
     "\nDraws each finished step (✓ making a reservation (3m18s)), a live line with percent,\n"
     "rate and ETA, and the final line (Migration was successful.). Exit status 0 when it\n"
     "stops successful, paused or scheduled, 1 when it failed or was aborted; -j prints\n"
     "the stream's events as JSON lines.\n"},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};
