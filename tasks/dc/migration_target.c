/*
 * migration_target.c -- the target's first two steps of a migration, on its agent:
 *
 *   dc.migration_target_create {migration_uuid, vm: <the VM's record>} -> {dir}
 *     makes <root>/<vm>/ hidden: vm.json is the record's configuration with
 *     do_not_inventory true, autoboot false, nics [] and migration_target the
 *     migration's uuid (the agents' scans list it as do_not_inventory, which the NIC
 *     reconcile leaves alone); disks/ empty (the passes make the files), and for a
 *     storage instance (role nfsvolumestorage) an empty export/ and workload "share",
 *     served by nothing until the switch starts it; the volume
 *     mounts the record's volumes name with their export (instance_mounts.h). Run
 *     again for the same migration it answers the same; a directory of anything else
 *     is InstanceExists, untouched, but for the hidden target an aborted migration of
 *     the VM left on a lost server (the control says so: migration_leftover.lua
 *     "stale"), which is removed and made anew. A directory without vm.json whose
 *     disks/ is empty is what an attempt cut short left, and is made again.
 *
 *   dc.migration_recv_open {migration_uuid, vm_uuid} -> {addr} (the secret it writes
 *                          read from the control's record: migration_secret.lua)
 *     writes <vm>/.migration/session.json (0600) that the listener checks a sender
 *     against, and answers the listener's address. NotConfigured when the agent has no
 *     "migration_listen"; the instance must be this migration's target (InvalidState).
 *
 * Both are a few small files on the loop: no copy, nothing long.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dc_state.h"
#include "instance_dir.h"
#include "instance_mounts.h"
#include "instance_volumes.h"
#include "inventory_script.h"
#include "lib/args.h"
#include "lua_scripts.h"
#include "migration_agent.h"
#include "vm_disks.h"

/* true when the directory `path` holds no entry (or is absent). */
static bool dir_empty(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL)
        return errno == ENOENT;
    struct dirent *de;
    bool empty = true;
    while (empty && (de = readdir(d)) != NULL)
        empty = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
    closedir(d);
    return empty;
}

/* The target's vm.json from the record (borrowed): a new reference, or NULL with msg. */
/* A storage instance's record (docs/VOLUMES.md "Storage instances": its
 * internal_metadata's sdc:system_role, its vm.json's role). */
static bool migration_is_storage(const json_t *rec)
{
    const char *role = json_string_value(json_object_get(rec, "role"));
    const char *sys = json_string_value(
        json_object_get(json_object_get(rec, "internal_metadata"), "sdc:system_role"));
    return (role != NULL && strcmp(role, "nfsvolumestorage") == 0) ||
           (sys != NULL && strcmp(sys, "nfsvolumestorage") == 0);
}

static json_t *target_vm_json(const json_t *rec, const instance_paths_t *p,
                              const char *migration_uuid, char *msg, size_t msglen)
{
    /* A storage instance's workload is its share (storage_create.c), whatever its
     * metadata says. */
    const char *workload =
        migration_is_storage(rec)
            ? "share"
            : instance_workload_kind(json_object_get(rec, "customer_metadata"), msg, msglen);
    if (workload == NULL)
        return NULL;
    json_t *disks = json_array();
    size_t i;
    const json_t *d;
    json_array_foreach(json_object_get(rec, "disks"), i, d)
    {
        const char *slot = json_string_value(json_object_get(d, "pci_slot"));
        int f = slot != NULL ? vm_disks_slot_function(slot) : (int)i;
        if (!json_is_object(d) || f < 0) {
            snprintf(msg, msglen, "vm.disks[%zu].pci_slot: expected 0:4:0 to 0:4:7", i);
            json_decref(disks);
            return NULL;
        }
        json_t *copy = json_deep_copy(d);
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/disk%d.img", p->disks, f);
        json_object_set_new(copy, "path", json_string(path));
        json_array_append_new(disks, copy);
    }
    json_t *vm = json_pack("{s:s, s:s, s:o, s:s, s:b, s:b, s:[], s:s}", "uuid",
                           json_string_value(json_object_get(rec, "uuid")), "state", "stopped",
                           "disks", disks, "workload", workload, "do_not_inventory", 1, "autoboot",
                           0, "nics", "migration_target", migration_uuid);
    static const char *const copied[] = {"image_uuid",
                                         "alias",
                                         "owner_uuid",
                                         "brand",
                                         "ram",
                                         "vcpus",
                                         "volumes",
                                         "customer_metadata",
                                         "internal_metadata",
                                         "create_timestamp",
                                         "volume_uuid",
                                         NULL};
    for (size_t k = 0; copied[k] != NULL; k++) {
        const json_t *v = json_object_get(rec, copied[k]);
        json_object_set_new(vm, copied[k], v != NULL ? json_deep_copy(v) : json_null());
    }
    if (migration_is_storage(rec))
        json_object_set_new(vm, "role", json_string("nfsvolumestorage"));
    return vm;
}

/* Makes the migration's hidden target at p from rec (the VM's record), reporting the
 * outcome. */
static void target_make(tern_ctx *ctx, const instance_paths_t *p, const char *mig,
                        const json_t *rec)
{
    char msg[PATH_MAX + 512];
    json_t *vm = target_vm_json(rec, p, mig, msg, sizeof msg);
    json_t *volumes = NULL;
    if (vm != NULL && json_array_size(json_object_get(rec, "volumes")) > 0 &&
        json_object_get(json_array_get(json_object_get(rec, "volumes"), 0), "export_path") != NULL)
        volumes = instance_volumes_plan(json_object_get(rec, "volumes"), msg, sizeof msg);
    else if (vm != NULL)
        volumes = json_array();
    if (vm == NULL || volumes == NULL) {
        json_decref(vm);
        tern_task_fail(ctx, "InvalidArgument", "dc.migration_target_create: vm: %s", msg);
        return;
    }
    if (json_array_size(volumes) > 0)
        json_object_set(vm, "volumes", volumes);
    const char *failed = NULL;
    if ((mkdir(p->dir, 0755) != 0 && errno != EEXIST) ||
        (mkdir(p->disks, 0755) != 0 && errno != EEXIST))
        failed = strerror(errno);
    /* A storage instance's export/, empty and served by nothing until the switch: the
     * passes fill it (sync_tree_xfer.h). */
    char export_dir[PATH_MAX + 16];
    snprintf(export_dir, sizeof export_dir, "%s/export", p->dir);
    if (failed == NULL && migration_is_storage(rec) && mkdir(export_dir, 0755) != 0 &&
        errno != EEXIST)
        failed = strerror(errno);
    int rc = failed == NULL ? instance_mounts_make(p, volumes, msg, sizeof msg) : -1;
    if (rc == 0)
        rc = instance_json_write(p->vm_json, vm, msg, sizeof msg);
    json_decref(volumes);
    json_decref(vm);
    if (failed != NULL || rc != 0) {
        tern_task_fail(ctx, "InstanceCreateFailed", "dc.migration_target_create: %s: %s", p->dir,
                       failed != NULL ? failed : msg);
        return;
    }
    tern_task_done(ctx, json_pack("{s:s}", "dir", p->dir));
}

/* A hidden target of another migration of the VM in the way, while the control is
 * asked whether it is stale (attempts.h keeps it). */
typedef struct stale_ask {
    instance_paths_t p;
    char mig[40];   /* this migration */
    char stale[40]; /* the migration whose target is in the way */
    json_t *rec;    /* the VM's record (owned) */
} stale_ask_t;

static void stale_ask_free(void *data)
{
    stale_ask_t *sa = data;
    json_decref(sa->rec);
    free(sa);
}

/* The control's answer (migration_leftover.lua "stale"). The hidden target an earlier
 * migration of the VM left here (an abort whose target server was lost: docs/MIGRATION.md
 * "A lost target") is removed before this migration's is made, so that its stale disks
 * are never taken for this one's; its own clean-up job, finding this migration's target
 * here, leaves it alone. Any other migration's target is InstanceExists, untouched, as
 * is one whose workload runs (none ever runs in a hidden target). */
static void on_stale_answer(tern_ctx *ctx, const json_t *ok, const char *code, const char *message,
                            void *data)
{
    stale_ask_t *sa = data;
    const dc_state_t *s = tern_plugin_state(ctx);
    instance_paths_t p = sa->p;
    char mig[40], stale[40];
    snprintf(mig, sizeof mig, "%s", sa->mig);
    snprintf(stale, sizeof stale, "%s", sa->stale);
    json_t *rec = json_incref(sa->rec);
    attempts_end(s->attempts, ctx);
    char msg[PATH_MAX + 512];
    pid_t pid = 0;
    if (ok == NULL) {
        tern_task_fail(ctx, code,
                       "dc.migration_target_create: migration %s, whose target is "
                       "in %s: %s",
                       stale, p.dir, message);
    } else if (!json_is_true(json_object_get(ok, "stale"))) {
        const char *state = json_string_value(json_object_get(ok, "state"));
        tern_task_fail(ctx, "InstanceExists",
                       "dc.migration_target_create: instance %s is already on this server (%s), "
                       "the target of migration %s (%s), not of %s; nothing was changed",
                       json_string_value(json_object_get(rec, "uuid")), p.dir, stale,
                       state != NULL ? state : "no record", mig);
    } else if ((pid = instance_workload_pid(&p)) > 0) {
        tern_task_fail(ctx, "InstanceExists",
                       "dc.migration_target_create: %s is the hidden target migration %s left "
                       "and its workload runs (pid %ld); nothing was changed",
                       p.dir, stale, (long)pid);
    } else if (instance_tree_remove(s->server->data_root, p.dir, msg, sizeof msg) != 0) {
        tern_task_fail(ctx, "InstanceRemoveFailed",
                       "dc.migration_target_create: the target migration %s left: %s", stale, msg);
    } else {
        tern_log(ctx, TERN_LOG_WARN,
                 "dc.migration_target_create: removed %s, the hidden target aborted migration "
                 "%s left here, to make migration %s's",
                 p.dir, stale, mig);
        target_make(ctx, &p, mig, rec);
    }
    json_decref(rec);
}

/* Asks the control whether `stale`'s target at p is left over (see on_stale_answer). */
static void stale_ask(tern_ctx *ctx, const dc_state_t *s, const instance_paths_t *p,
                      const char *mig, const char *stale, const json_t *rec)
{
    stale_ask_t *sa = calloc(1, sizeof *sa);
    json_t *q = json_pack("{s:s, s:s, s:s}", "op", "stale", "migration_uuid", stale, "vm_uuid",
                          json_string_value(json_object_get(rec, "uuid")));
    if (sa == NULL || q == NULL || (sa->rec = json_deep_copy(rec)) == NULL) {
        json_decref(q);
        if (sa != NULL)
            stale_ask_free(sa);
        tern_task_fail(ctx, "OutOfMemory", "dc.migration_target_create: out of memory");
        return;
    }
    sa->p = *p;
    snprintf(sa->mig, sizeof sa->mig, "%s", mig);
    snprintf(sa->stale, sizeof sa->stale, "%s", stale);
    attempts_add(s->attempts, ctx, sa, stale_ask_free);
    if (dc_script_call(ctx, dc_lua_migration_leftover, q, on_stale_answer, sa) != 0) {
        attempts_end(s->attempts, ctx);
        tern_task_fail(ctx, "RedisError",
                       "dc.migration_target_create: cannot ask the control about migration %s",
                       stale);
    }
    json_decref(q);
}

static void target_create_start(tern_ctx *ctx, const json_t *args)
{
    const dc_state_t *s = dc_agent_state(ctx, "dc.migration_target_create");
    if (s == NULL)
        return;
    char msg[PATH_MAX + 512];
    const char *mig = NULL, *vm_uuid = NULL;
    const json_t *rec = NULL;
    const char *bad = migration_arg_uuid(args, "migration_uuid", &mig, msg, sizeof msg);
    if (bad == NULL)
        bad = task_args_object(args, "vm", &rec, msg, sizeof msg);
    if (bad == NULL && rec == NULL)
        bad = "vm: required (the VM's record)";
    if (bad == NULL && migration_arg_uuid(rec, "uuid", &vm_uuid, msg, sizeof msg) != NULL) {
        char inner[sizeof msg];
        snprintf(inner, sizeof inner, "%s", msg);
        snprintf(msg, sizeof msg, "vm.%.1000s", inner);
        bad = msg;
    }
    if (bad != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "dc.migration_target_create: %s", bad);
        return;
    }
    instance_paths_t p;
    json_t *have = NULL;
    int rc = instance_read(s->server->data_root, vm_uuid, &p, &have, msg, sizeof msg);
    if (rc == 0) {
        const char *of = migration_target_of(have);
        const char *hidden_of = migration_hidden_target_of(have);
        if (hidden_of != NULL && strcmp(hidden_of, mig) != 0) {
            stale_ask(ctx, s, &p, mig, hidden_of, rec);
            json_decref(have);
            return;
        }
        bool ours = of != NULL && strcmp(of, mig) == 0;
        json_decref(have);
        if (!ours) {
            tern_task_fail(ctx, "InstanceExists",
                           "dc.migration_target_create: instance %s is already on this server "
                           "(%s) and is not the target of migration %s; nothing was changed",
                           vm_uuid, p.dir, mig);
            return;
        }
    } else if (rc != -ENOENT) {
        tern_task_fail(ctx, instance_read_code(rc), "dc.migration_target_create: %s", msg);
        return;
    } else if (access(p.dir, F_OK) == 0 && !dir_empty(p.disks)) {
        tern_task_fail(ctx, "InstanceExists",
                       "dc.migration_target_create: %s holds disks but no vm.json: not made by "
                       "migration %s; nothing was changed",
                       p.dir, mig);
        return;
    }
    target_make(ctx, &p, mig, rec);
}

const tern_task_def dc_migration_target_create_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_target_create",
    .summary = "A migration's hidden target instance on this server: vm.json (do_not_inventory, "
               "no autoboot, no NICs, migration_target), empty disks/, the volume mounts.",
    .args_schema = "{\"required\": [\"migration_uuid\", \"vm\"], \"properties\": {"
                   "\"migration_uuid\": {\"type\": \"string\"}, \"vm\": {\"type\": \"object\"}}, "
                   "\"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = target_create_start,
    .cancel = dc_agent_cancel,
};

/* ---- dc.migration_recv_open ------------------------------------------------------- */

/* Writes session.json (0600) through a ".part" file, synced and renamed. */
static int session_write(const instance_paths_t *p, const char *mig, const char *secret, char *err,
                         size_t errlen)
{
    char dir[PATH_MAX], path[PATH_MAX + 16], part[PATH_MAX + 24];
    migration_dir(p, dir);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return -errno;
    }
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: not a directory of its own", dir);
        return -EPERM;
    }
    snprintf(path, sizeof path, "%s/session.json", dir);
    snprintf(part, sizeof part, "%s.part", path);
    json_t *doc = json_pack("{s:s, s:s}", "migration_uuid", mig, "secret", secret);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    int fd =
        text != NULL ? open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600) : -1;
    int rc = 0;
    if (fd < 0 || fchmod(fd, 0600) != 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) ||
        fsync(fd) != 0)
        rc = -(errno != 0 ? errno : EIO);
    if (fd >= 0 && close(fd) != 0 && rc == 0)
        rc = -errno;
    if (text != NULL) {
        volatile char *v = text;
        for (size_t i = 0; v[i] != '\0'; i++)
            v[i] = '\0';
        free(text);
    }
    if (rc == 0 && rename(part, path) != 0)
        rc = -errno;
    if (rc != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(-rc));
        unlink(part); /* may be absent: the error above is the one to report */
        return rc;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        rc = fsync(dfd) != 0 ? -errno : 0;
        close(dfd);
        if (rc != 0) {
            snprintf(err, errlen, "%s: %s", dir, strerror(-rc));
            return rc;
        }
    }
    return 0;
}

/* What recv_open keeps while it asks for the secret (attempts.h). */
typedef struct recv_open {
    instance_paths_t p;
    char mig[40];
} recv_open_t;

/* The migration's secret read from its record (migration_secret.lua), so that no step's
 * args or result carry it (GET /jobs/:uuid shows those); then the session written. */
static void on_recv_secret(tern_ctx *ctx, const json_t *ok, const char *code, const char *message,
                           void *data)
{
    recv_open_t *ro = data;
    const dc_state_t *s = tern_plugin_state(ctx);
    const char *secret = json_string_value(json_object_get(ok, "secret"));
    char msg[PATH_MAX + 512];
    const char *fail_code = NULL;
    if (ok == NULL) {
        fail_code = code;
        snprintf(msg, sizeof msg, "migration %s: its secret: %s", ro->mig, message);
    } else if (secret == NULL || strlen(secret) != 64 || strspn(secret, "0123456789abcdef") != 64) {
        fail_code = "InvalidState";
        snprintf(msg, sizeof msg, "migration %s: its secret is not 64 hex digits", ro->mig);
    } else if (session_write(&ro->p, ro->mig, secret, msg, sizeof msg) != 0) {
        fail_code = "SessionWriteFailed";
    }
    if (fail_code != NULL) {
        attempts_end(s->attempts, ctx);
        tern_task_fail(ctx, fail_code, "dc.migration_recv_open: %s", msg);
        return;
    }
    attempts_end(s->attempts, ctx);
    tern_task_done(ctx, json_pack("{s:s}", "addr", migration_listener_addr(s->migration)));
}

static void recv_open_start(tern_ctx *ctx, const json_t *args)
{
    const dc_state_t *s = dc_agent_state(ctx, "dc.migration_recv_open");
    if (s == NULL)
        return;
    char msg[PATH_MAX + 512];
    const char *mig = NULL, *vm_uuid = NULL;
    const char *bad = migration_arg_uuid(args, "migration_uuid", &mig, msg, sizeof msg);
    if (bad == NULL)
        bad = migration_arg_uuid(args, "vm_uuid", &vm_uuid, msg, sizeof msg);
    int swapped = bad == NULL ? migration_arg_swapped(args, msg, sizeof msg) : 0;
    if (swapped < 0)
        bad = msg;
    if (bad != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "dc.migration_recv_open: %s", bad);
        return;
    }
    if (swapped) {
        /* A failed switch finished forward: the target has its data and may run. The
         * empty addr is never dialled: the send given the same switch_step skips too. */
        tern_task_done(ctx, json_pack("{s:s, s:b}", "addr", "", "skipped", 1));
        return;
    }
    if (s->migration == NULL) {
        tern_task_fail(ctx, "NotConfigured",
                       "dc.migration_recv_open: the agent of server %s has no \"migration_listen\" "
                       "in its dc configuration: it cannot be a migration's target",
                       s->server->uuid);
        return;
    }
    instance_paths_t p;
    json_t *vm = NULL;
    int rc = instance_read(s->server->data_root, vm_uuid, &p, &vm, msg, sizeof msg);
    if (rc != 0) {
        tern_task_fail(ctx, instance_read_code(rc), "dc.migration_recv_open: %s", msg);
        return;
    }
    const char *of = migration_target_of(vm);
    bool ours = of != NULL && strcmp(of, mig) == 0;
    json_decref(vm);
    if (!ours) {
        tern_task_fail(ctx, "InvalidState",
                       "dc.migration_recv_open: instance %s on this server is not the target of "
                       "migration %s",
                       vm_uuid, mig);
        return;
    }
    recv_open_t *ro = calloc(1, sizeof *ro);
    if (ro == NULL) {
        tern_task_fail(ctx, "OutOfMemory", "dc.migration_recv_open: out of memory");
        return;
    }
    ro->p = p;
    snprintf(ro->mig, sizeof ro->mig, "%s", mig);
    attempts_add(s->attempts, ctx, ro, free);
    if (migration_secret_ask(ctx, mig, on_recv_secret, ro) != 0) {
        attempts_end(s->attempts, ctx);
        tern_task_fail(ctx, "RedisError",
                       "dc.migration_recv_open: cannot ask the control for migration %s's secret",
                       mig);
    }
}

const tern_task_def dc_migration_recv_open_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_recv_open",
    .summary = "Lets a migration's source send into its target here: the session file the "
               "listener checks, and the listener's address.",
    .args_schema = "{\"required\": [\"migration_uuid\", \"vm_uuid\"], \"properties\": {"
                   "\"migration_uuid\": {\"type\": \"string\"}, \"vm_uuid\": {\"type\": "
                   "\"string\"}, \"switch_step\": {\"type\": \"any\"}}, \"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = recv_open_start,
    .cancel = dc_agent_cancel,
};
