/*
 * share_probe.c -- the agent's half of the share states (docs/VOLUMES.md "Share
 * states"), the steps `probe` and `restart` of volume-share-watch:
 *
 *   dc.share_probe {} -> {"server_uuid", "storage": [{"vm_uuid", "volume_uuid",
 *                         "state" (vm.json's), "alive", "pid"}],
 *                         "consumers": [{"vm_uuid", "mounts_ok"}]}
 *       every storage instance of this data root (vm.json role nfsvolumestorage), with
 *       whether its share process runs (its pid file names a live tern-workload of
 *       it); every other instance whose vm.json lists volumes, with whether each of
 *       its mount links resolves to a directory (instance_mounts.h)
 *
 *   dc.share_restart {"restart": [vm uuid], "remount": [vm uuid], "exports"?: {volume
 *       uuid: export path} or null}
 *       -> {"started": [vm uuid], "remounted": [vm uuid], "skipped": [{"vm_uuid",
 *           "reason"}], "failed": [{"vm_uuid", "reason"}]}
 *       starts the share process of each storage instance listed (as dc.instance_start
 *       does; one already running is counted started), one after the other; re-makes
 *       the mount links of each consumer listed from its vm.json, whose volumes are
 *       first pointed (and vm.json rewritten) at the export_path `exports` names for
 *       them: a storage instance migrated serves from its new server's data root. A storage
 * instance whose vm.json state is not running was stopped on purpose (a rollback, an operator) and
 * is skipped; one that is not there, not a storage instance, or whose share refuses to start (its
 * export/ gone) is listed failed. The step itself fails only on bad arguments: the control's settle
 * records what did start.
 *
 * Both read and write only inside the data root (instance_dir.h).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dc_state.h"
#include "instance_dir.h"
#include "instance_mounts.h"
#include "instance_power.h"

#define STORAGE_ROLE "nfsvolumestorage"
#define LIST_MAX     1024 /* instances a restart names at most */

/* ---- probe ------------------------------------------------------------------------ */

static void probe_one(const char *root, const char *uuid, json_t *storage, json_t *consumers)
{
    instance_paths_t p;
    char err[512];
    json_t *vm = NULL;
    if (instance_paths(root, uuid, &p, err, sizeof err) != 0 ||
        instance_json_read(p.vm_json, &vm, err, sizeof err) != 0)
        return; /* not an instance, or a partial one its create will redo */
    const char *role = json_string_value(json_object_get(vm, "role"));
    const json_t *volumes = json_object_get(vm, "volumes");
    if (role != NULL && strcmp(role, STORAGE_ROLE) == 0) {
        pid_t pid = instance_workload_pid(&p);
        const json_t *state = json_object_get(vm, "state");
        const json_t *vol = json_object_get(vm, "volume_uuid");
        json_array_append_new(storage,
                              json_pack("{s:s, s:O, s:O, s:b, s:o}", "vm_uuid", uuid, "volume_uuid",
                                        vol != NULL ? vol : json_null(), "state",
                                        state != NULL ? state : json_null(), "alive", pid > 0,
                                        "pid", pid > 0 ? json_integer(pid) : json_null()));
    } else if (json_array_size(volumes) > 0) {
        json_array_append_new(consumers, json_pack("{s:s, s:b}", "vm_uuid", uuid, "mounts_ok",
                                                   instance_mounts_ok(&p, volumes)));
    }
    json_decref(vm);
}

static void probe_start(tern_ctx *ctx, const json_t *args)
{
    (void)args;
    const char *task = "dc.share_probe";
    const dc_state_t *s = dc_agent_state(ctx, task);
    if (s == NULL)
        return;
    DIR *d = opendir(s->server->data_root);
    if (d == NULL) {
        tern_task_fail(ctx, "DataRootUnreadable", "%s: the data root %s: %s", task,
                       s->server->data_root, strerror(errno));
        return;
    }
    json_t *storage = json_array(), *consumers = json_array();
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (dc_uuid_ok(de->d_name))
            probe_one(s->server->data_root, de->d_name, storage, consumers);
    }
    closedir(d);
    tern_task_done(ctx, json_pack("{s:s, s:o, s:o}", "server_uuid", s->server->uuid, "storage",
                                  storage, "consumers", consumers));
}

const tern_task_def dc_share_probe_task = {
    .size = sizeof(tern_task_def),
    .name = "share_probe",
    .summary = "This server's storage instances (vm.json state, share process alive) and "
               "consumers of volumes (mount links resolve).",
    .args_schema = "{\"required\": [], \"properties\": {}, \"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = probe_start,
};

/* ---- restart ---------------------------------------------------------------------- */

typedef struct restart_run {
    json_t *restart; /* the uuids to start (owned) */
    json_t *remount; /* the uuids to remount (owned) */
    json_t *exports; /* {volume uuid: export_path} where volumes are served now (owned) */
    size_t next;     /* the index in restart of the next to start */
    json_t *started, *remounted, *skipped, *failed; /* the answer's lists (owned) */
} restart_run_t;

static void restart_run_free(void *data)
{
    restart_run_t *r = data;
    json_decref(r->restart);
    json_decref(r->remount);
    json_decref(r->exports);
    json_decref(r->started);
    json_decref(r->remounted);
    json_decref(r->skipped);
    json_decref(r->failed);
    free(r);
}

static void listed(json_t *list, const char *uuid, const char *reason)
{
    json_array_append_new(list, json_pack("{s:s, s:s}", "vm_uuid", uuid, "reason", reason));
}

/* vm.json's volumes pointed at where exports says each is served now (a storage
 * instance migrated: its export moved with it). true when one changed. */
static bool repoint(json_t *vm, const json_t *exports)
{
    bool changed = false;
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(vm, "volumes"), i, m)
    {
        const char *vol = json_string_value(json_object_get(m, "volume_uuid"));
        const char *now = vol != NULL ? json_string_value(json_object_get(exports, vol)) : NULL;
        const char *was = json_string_value(json_object_get(m, "export_path"));
        if (now != NULL && (was == NULL || strcmp(was, now) != 0)) {
            json_object_set_new(m, "export_path", json_string(now));
            changed = true;
        }
    }
    return changed;
}

/* The consumers' links made again from their vm.json, repointed first. */
static void remount_all(const dc_state_t *s, restart_run_t *r)
{
    size_t i;
    const json_t *u;
    json_array_foreach(r->remount, i, u)
    {
        const char *uuid = json_string_value(u);
        instance_paths_t p;
        char err[1024];
        json_t *vm = NULL;
        if (instance_paths(s->server->data_root, uuid, &p, err, sizeof err) == 0 &&
            instance_json_read(p.vm_json, &vm, err, sizeof err) == 0 &&
            (!repoint(vm, r->exports) ||
             instance_json_write(p.vm_json, vm, err, sizeof err) == 0) &&
            instance_mounts_make(&p, json_object_get(vm, "volumes"), err, sizeof err) == 0)
            json_array_append_new(r->remounted, json_string(uuid));
        else
            listed(r->failed, uuid, err);
        json_decref(vm);
    }
}

static void restart_next(tern_ctx *ctx, restart_run_t *r);

static void restart_started(tern_ctx *ctx, const instance_paths_t *p, pid_t pid, const char *code,
                            const char *msg, void *data)
{
    restart_run_t *r = data;
    const char *uuid = json_string_value(json_array_get(r->restart, r->next - 1));
    (void)p;
    if (pid > 0)
        json_array_append_new(r->started, json_string(uuid));
    else
        listed(r->failed, uuid, msg != NULL ? msg : code);
    restart_next(ctx, r);
}

/* Starts the next share that needs it, or, when none is left, remounts and answers. */
static void restart_next(tern_ctx *ctx, restart_run_t *r)
{
    const dc_state_t *s = tern_plugin_state(ctx);
    while (r->next < json_array_size(r->restart)) {
        const char *uuid = json_string_value(json_array_get(r->restart, r->next++));
        instance_paths_t p;
        char err[1024];
        json_t *vm = NULL;
        if (instance_paths(s->server->data_root, uuid, &p, err, sizeof err) != 0 ||
            instance_json_read(p.vm_json, &vm, err, sizeof err) != 0) {
            listed(r->failed, uuid, err);
            continue;
        }
        const char *role = json_string_value(json_object_get(vm, "role"));
        const char *state = json_string_value(json_object_get(vm, "state"));
        bool storage = role != NULL && strcmp(role, STORAGE_ROLE) == 0;
        bool running = state != NULL && strcmp(state, "running") == 0;
        json_decref(vm);
        if (!storage) {
            listed(r->failed, uuid, "not a storage instance");
            continue;
        }
        if (!running) {
            listed(r->skipped, uuid, "its state is not running: stopped on purpose");
            continue;
        }
        if (instance_workload_pid(&p) > 0) {
            json_array_append_new(r->started, json_string(uuid));
            continue;
        }
        instance_start_workload(ctx, "dc.share_restart", &p, "share", restart_started, r);
        return;
    }
    remount_all(s, r);
    json_t *answer = json_pack("{s:O, s:O, s:O, s:O}", "started", r->started, "remounted",
                               r->remounted, "skipped", r->skipped, "failed", r->failed);
    attempts_end(s->attempts, ctx); /* frees r */
    tern_task_done(ctx, answer);
}

/* The fault of a list of instance uuids, or NULL. */
static const char *uuids_fault(const json_t *args, const char *key, char *msg, size_t msglen)
{
    const json_t *v = json_object_get(args, key);
    if (v == NULL || json_is_null(v))
        return NULL;
    if (!json_is_array(v) || json_array_size(v) > LIST_MAX) {
        snprintf(msg, msglen, "%s: expected an array of at most %d instance uuids", key, LIST_MAX);
        return msg;
    }
    size_t i;
    const json_t *u;
    json_array_foreach(v, i, u)
    {
        if (!json_is_string(u) || !dc_uuid_ok(json_string_value(u))) {
            snprintf(msg, msglen, "%s[%zu]: expected a UUID (lowercase 8-4-4-4-12 hex)", key, i);
            return msg;
        }
    }
    return NULL;
}

static void restart_start(tern_ctx *ctx, const json_t *args)
{
    const char *task = "dc.share_restart";
    const dc_state_t *s = dc_agent_state(ctx, task);
    if (s == NULL)
        return;
    char msg[256];
    const char *bad = uuids_fault(args, "restart", msg, sizeof msg);
    if (bad == NULL)
        bad = uuids_fault(args, "remount", msg, sizeof msg);
    const json_t *exports = json_object_get(args, "exports");
    if (bad == NULL && exports != NULL && !json_is_null(exports) && !json_is_object(exports))
        bad = "exports: expected {volume uuid: export path} or null";
    if (bad == NULL && json_is_object(exports)) {
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)exports, k, v)
        {
            const char *path = json_string_value(v);
            if (path == NULL || path[0] != '/') {
                snprintf(msg, sizeof msg, "exports.%.64s: expected an absolute path", k);
                bad = msg;
                break;
            }
        }
    }
    if (bad != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "%s: %s", task, bad);
        return;
    }
    restart_run_t *r = calloc(1, sizeof *r);
    if (r == NULL)
        abort();
    const json_t *restart = json_object_get(args, "restart");
    const json_t *remount = json_object_get(args, "remount");
    r->restart = json_is_array(restart) ? json_deep_copy(restart) : json_array();
    r->remount = json_is_array(remount) ? json_deep_copy(remount) : json_array();
    r->exports = json_is_object(exports) ? json_deep_copy(exports) : json_object();
    r->started = json_array();
    r->remounted = json_array();
    r->skipped = json_array();
    r->failed = json_array();
    attempts_add(s->attempts, ctx, r, restart_run_free);
    restart_next(ctx, r);
}

/* A cancelled restart: the start in flight (if any) and the run's own data. */
static void restart_cancel(tern_ctx *ctx)
{
    const dc_state_t *s = tern_plugin_state(ctx);
    if (s == NULL || s->attempts == NULL)
        return;
    attempts_end(s->attempts, ctx);
    attempts_end(s->attempts, ctx);
}

const tern_task_def dc_share_restart_task = {
    .size = sizeof(tern_task_def),
    .name = "share_restart",
    .summary = "Starts the share process of the storage instances named and re-makes the "
               "mount links of the consumers named; answers what started and was remounted.",
    .args_schema = "{\"required\": [], \"properties\": {\"restart\": {\"type\": \"any\"}, "
                   "\"remount\": {\"type\": \"any\"}, \"exports\": {\"type\": \"any\"}}, "
                   "\"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = restart_start,
    .cancel = restart_cancel,
};
