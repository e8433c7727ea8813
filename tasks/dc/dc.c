/*
 * dc.c -- the "dc" task family: the datacenter's plugin. One plugin, so one Redis
 * namespace holds the whole inventory and a change to several records is one script.
 * It knows the datacenter's static description and, on an agent, which server it is;
 * the control plane's tasks and views keep and read the inventory in Redis
 * (inventory_tasks.c, views.c, docs/DATACENTER.md).
 *
 *   dc.agent_info   {}   -> {"server_uuid", "hostname", "rack", "data_root",
 *                            "instances": [{"uuid", "state", "dir", "pid", "alive"}],
 *                            "instances_at_init"}
 *                           on a server's agent; fails NotAnAgent elsewhere
 *
 * and, on a server's agent only, the data plane: dc.image_ensure (image_ensure.c),
 * dc.instance_create (instance_create.c), dc.instance_start and dc.instance_stop
 * (instance_power.c), dc.instance_destroy (instance_destroy.c), and the disks'
 * changes: dc.disk_usage (disk_usage.c), dc.disk_apply (disk_apply.c), dc.disk_undo
 * (disk_undo.c), on the files vm_disks.h describes; dc.instances_scan
 * (instances_scan.c) lists its instances for the NIC reconcile; a shared volume's
 * storage instance, dc.storage_create (storage_create.c), and the share states' probe
 * and restart, dc.share_probe and dc.share_restart (share_probe.c), whose control half
 * is dc.share_states (share_tasks.c). An agent finds its
 * instances again when it starts (init scans its data root), so one restarted or
 * killed -9 lists, stops and destroys the workloads it started before.
 *
 * Its configuration ({"plugins": {"dc": {...}}} in ternd's configuration file), which
 * `tern-lab up` writes for the control ternd and for each agent:
 *
 *   "datacenter": FILE        the description (datacenter.h); read and checked at
 *                             load, every fault refusing the plugin
 *   "lab_dir": DIR            what its relative paths are relative to (required with
 *                             "datacenter")
 *   "server_uuid": UUID       this ternd is that server's agent (needs "datacenter")
 *   "data_root": DIR          that server's data root, which must be the one the
 *                             description gives: the only directory the agent's tasks
 *                             touch
 *   "workload_bin": PATH       tern-workload, the program an instance runs (agents)
 *   "api_url": URL            the control's own API (http://HOST:PORT), where the
 *                             provision's volume steps ask for volume-create and
 *                             volume-delete jobs (provision_volumes.c)
 *   "api_token_file": FILE    the bearer token of api_url (its first line), read at
 *                             load; else $TERN_API_TOKEN when the plugin's process
 *                             still has it (ternd takes it out of its environment
 *                             before plugins load, so a ternd with a token needs the
 *                             file)
 *   "migration_listen": "127.0.0.1:PORT"  an agent's address for the migrations into
 *                             its server (migration_listener.h; port 0: a free one);
 *                             without it the agent is never a migration's target
 *                             (dc.migration_recv_open fails NotConfigured)
 *
 * The state init builds is dc_state.h's.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tern/task.h>

#include "attempts.h"
#include "datacenter.h"
#include "dc_state.h"
#include "dc_tasks.h"
#include "file_work.h"
#include "instance_dir.h"
#include "vm_disks.h"
#include "volume_snapshot.h"

/* Retrying does not help these: the arguments, the configuration or the data root
 * must change first. */
const char *const dc_fatal_codes[] = {"InvalidArgument",       "NotAnAgent",
                                      "NoWorkloadBin",         "ResourceNotFound",
                                      "PathOutsideDataRoot",   "InstanceNotFound",
                                      "ImageFileMissing",      "InstanceConflict",
                                      "DiskFileInvalid",       "DiskFileMissing",
                                      "ServerDiskFull",        "VolumeNotFound",
                                      "VolumeAlreadyExists",   "VolumeSizeNotAvailable",
                                      "VolumeInUse",           "VolumeNotReady",
                                      "NotConfigured",         "InstanceExists",
                                      "InvalidState",          "TransferRefused",
                                      "VerifyFailed",          "InstanceRunning",
                                      "DiskGenerationChanged", NULL};

/* ---- configuration ------------------------------------------------------------------- */

static const char *config_string(const json_t *config, const char *key, char *err, size_t errlen,
                                 int *bad)
{
    const json_t *v = json_object_get(config, key);
    if (v == NULL)
        return NULL;
    if (!json_is_string(v) || json_string_length(v) == 0) {
        snprintf(err, errlen, "%s: expected a non-empty string", key);
        *bad = 1;
        return NULL;
    }
    return json_string_value(v);
}

static void dc_fini(void *state)
{
    dc_state_t *s = state;
    if (s == NULL)
        return;
    /* First: its threads write under the data root until joined. */
    migration_listener_stop(s->migration);
    file_work_free(s->files);
    attempts_free(s->attempts);
    free(s->workload_bin);
    free(s->api_url);
    if (s->api_token != NULL) {
        volatile char *p = s->api_token;
        for (size_t i = 0; p[i] != '\0'; i++)
            p[i] = '\0';
        free(s->api_token);
    }
    datacenter_free(s->dc);
    free(s);
}

/* The API the volume steps ask for jobs (without a trailing "/") and its token: from
 * the token file's first line, else $TERN_API_TOKEN. 0, or -1 with err. */
static int api_settings(dc_state_t *s, const char *url, const char *token_file, char *err,
                        size_t errlen)
{
    if (url != NULL) {
        s->api_url = strdup(url);
        if (s->api_url == NULL) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        size_t n = strlen(s->api_url);
        while (n > 0 && s->api_url[n - 1] == '/')
            s->api_url[--n] = '\0';
    }
    char line[1024] = "";
    if (token_file != NULL) {
        FILE *f = fopen(token_file, "re");
        if (f == NULL) {
            snprintf(err, errlen, "api_token_file: %s: %s", token_file, strerror(errno));
            return -1;
        }
        bool got = fgets(line, sizeof line, f) != NULL;
        fclose(f);
        line[strcspn(line, "\r\n")] = '\0';
        if (!got || line[0] == '\0') {
            snprintf(err, errlen, "api_token_file: %s holds no token on its first line",
                     token_file);
            return -1;
        }
    } else if (getenv("TERN_API_TOKEN") != NULL) {
        snprintf(line, sizeof line, "%s", getenv("TERN_API_TOKEN"));
    }
    if (line[0] != '\0') {
        s->api_token = strdup(line);
        volatile char *p = line;
        for (size_t i = 0; p[i] != '\0'; i++)
            p[i] = '\0';
        if (s->api_token == NULL) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    return 0;
}

/* What an agent killed -9 left: copies of images cut short (their ".part" files,
 * which a new copy would truncate anyway, removed so they take no space meanwhile),
 * and its instances, counted. An instance without vm.json is left for the create that
 * made it, which redoes it. */
static void rediscover(dc_state_t *s)
{
    char images[PATH_MAX];
    snprintf(images, sizeof images, "%s/images", s->server->data_root);
    DIR *d = opendir(images);
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        if (n > 5 && strcmp(de->d_name + n - 5, ".part") == 0 && dirfd(d) >= 0)
            unlinkat(dirfd(d), de->d_name, 0); /* may be gone: nothing to report */
    }
    if (d != NULL)
        closedir(d);
    json_t *found = instance_scan(s->server->data_root);
    s->found_at_init = json_array_size(found);
    /* And each instance's disk and snapshot copies cut short: a snapshot is whole or
     * absent, so a step run again makes it afresh. */
    size_t i;
    const json_t *inst;
    json_array_foreach(found, i, inst)
    {
        vm_disks_t v;
        char err[512];
        /* One that cannot be removed now is removed by the next step on that instance
         * (vm_disks_sync), which fails naming it if it still cannot. */
        if (vm_disks_open(s->server->data_root, json_string_value(json_object_get(inst, "uuid")),
                          &v, err, sizeof err) == 0 &&
            vm_disks_remove_parts(&v, err, sizeof err) != 0)
            err[0] = '\0';
        vm_disks_close(&v);
        /* A storage instance's snapshot copies cut short, and the export/ a rollback
         * was replacing: the old data or the new, whole, before its share is started
         * again (volume_snapshot.h). What cannot be put right now is by the next
         * dc.volume_snapshot on it. */
        instance_paths_t p;
        if (instance_paths(s->server->data_root, json_string_value(json_object_get(inst, "uuid")),
                           &p, err, sizeof err) == 0 &&
            volume_leftovers_recover(p.dir, err, sizeof err) != 0)
            err[0] = '\0';
    }
    json_decref(found);
}

static int dc_init(const tern_host *host, const json_t *config, void **state, char *err,
                   size_t errlen)
{
    (void)host;
    *state = NULL;
    if (config != NULL && !json_is_object(config)) {
        snprintf(err, errlen, "expected an object");
        return -1;
    }
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)config, key, v)
    {
        if (strcmp(key, "datacenter") != 0 && strcmp(key, "lab_dir") != 0 &&
            strcmp(key, "server_uuid") != 0 && strcmp(key, "data_root") != 0 &&
            strcmp(key, "workload_bin") != 0 && strcmp(key, "allow_networks") != 0 &&
            strcmp(key, "api_url") != 0 && strcmp(key, "api_token_file") != 0 &&
            strcmp(key, "migration_listen") != 0) {
            snprintf(err, errlen,
                     "%s: unknown setting (expected datacenter, lab_dir, server_uuid, data_root, "
                     "workload_bin, api_url, api_token_file, migration_listen)",
                     key);
            return -1;
        }
    }
    int bad = 0;
    const char *file = config_string(config, "datacenter", err, errlen, &bad);
    const char *lab_dir = bad ? NULL : config_string(config, "lab_dir", err, errlen, &bad);
    const char *server = bad ? NULL : config_string(config, "server_uuid", err, errlen, &bad);
    const char *root = bad ? NULL : config_string(config, "data_root", err, errlen, &bad);
    const char *workload = bad ? NULL : config_string(config, "workload_bin", err, errlen, &bad);
    const char *api_url = bad ? NULL : config_string(config, "api_url", err, errlen, &bad);
    const char *token_file =
        bad ? NULL : config_string(config, "api_token_file", err, errlen, &bad);
    const char *migration_listen =
        bad ? NULL : config_string(config, "migration_listen", err, errlen, &bad);
    if (bad)
        return -1;
    if (migration_listen != NULL && server == NULL) {
        snprintf(err, errlen,
                 "migration_listen: only an agent (with \"server_uuid\") receives migrations");
        return -1;
    }
    if (migration_listen != NULL && migration_listen_fault(migration_listen) != NULL) {
        snprintf(err, errlen, "migration_listen: %s: %s", migration_listen,
                 migration_listen_fault(migration_listen));
        return -1;
    }
    if (api_url != NULL && strncmp(api_url, "http://", 7) != 0 &&
        strncmp(api_url, "https://", 8) != 0) {
        snprintf(err, errlen, "api_url: %s is not an http:// or https:// URL", api_url);
        return -1;
    }
    if (workload != NULL && server == NULL) {
        snprintf(err, errlen, "workload_bin: only an agent (with \"server_uuid\") runs workloads");
        return -1;
    }
    if (workload != NULL && (workload[0] != '/' || access(workload, X_OK) != 0)) {
        snprintf(err, errlen,
                 "workload_bin: %s is not an executable file given by its absolute path", workload);
        return -1;
    }
    if (file != NULL && lab_dir == NULL) {
        snprintf(err, errlen, "lab_dir: required with \"datacenter\"");
        return -1;
    }
    if (server != NULL && (file == NULL || root == NULL)) {
        snprintf(err, errlen, "server_uuid: an agent needs \"datacenter\" and \"data_root\" too");
        return -1;
    }
    if (root != NULL && server == NULL) {
        snprintf(err, errlen, "data_root: only an agent (with \"server_uuid\") has one");
        return -1;
    }

    dc_state_t *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    s->attempts = attempts_new();
    if (s->attempts == NULL || api_settings(s, api_url, token_file, err, errlen) != 0) {
        if (s->attempts == NULL)
            snprintf(err, errlen, "out of memory");
        dc_fini(s);
        return -1;
    }
    if (file != NULL) {
        dc_faults_t faults = {0};
        if (datacenter_load(file, lab_dir, &s->dc, &faults) != 0) {
            /* Every fault, so one look at the log tells all that is wrong. */
            int used = snprintf(err, errlen, "datacenter %s: ", file);
            for (size_t i = 0; i < faults.n && used >= 0 && (size_t)used < errlen; i++)
                used += snprintf(err + used, errlen - (size_t)used, "%s%s", i > 0 ? "; " : "",
                                 faults.items[i]);
            dc_faults_dispose(&faults);
            dc_fini(s);
            return -1;
        }
        dc_faults_dispose(&faults);
    }
    if (server != NULL) {
        s->server = datacenter_server_find(s->dc, server);
        char *real_root = s->server != NULL ? datacenter_resolve_path(lab_dir, root) : NULL;
        if (s->server == NULL || real_root == NULL ||
            strcmp(real_root, s->server->data_root) != 0) {
            if (s->server == NULL)
                snprintf(err, errlen, "server_uuid: %s is not a server of datacenter %s", server,
                         file);
            else
                snprintf(err, errlen, "data_root: %s is not the data root of server %s in %s (%s)",
                         root, server, file, s->server->data_root);
            free(real_root);
            dc_fini(s);
            return -1;
        }
        free(real_root);
        s->files = file_work_new();
        s->workload_bin = workload != NULL ? strdup(workload) : NULL;
        if (s->files == NULL || (workload != NULL && s->workload_bin == NULL)) {
            snprintf(err, errlen, "out of memory");
            dc_fini(s);
            return -1;
        }
        rediscover(s);
        if (migration_listen != NULL &&
            migration_listener_start(migration_listen, s->server->data_root, &s->migration, err,
                                     errlen) != 0) {
            char why[512];
            snprintf(why, sizeof why, "%s", err);
            snprintf(err, errlen, "migration_listen: %s", why);
            dc_fini(s);
            return -1;
        }
    }
    *state = s;
    return 0;
}

/* ---- dc.agent_info ----------------------------------------------------------------- */

const dc_state_t *dc_agent_state(tern_ctx *ctx, const char *task)
{
    const dc_state_t *s = tern_plugin_state(ctx);
    if (s == NULL || s->server == NULL) {
        tern_task_fail(ctx, "NotAnAgent",
                       "%s: this runner is not a server's agent (its dc "
                       "configuration names no server_uuid); run the step on a server's queue",
                       task);
        return NULL;
    }
    return s;
}

void dc_agent_cancel(tern_ctx *ctx)
{
    const dc_state_t *s = tern_plugin_state(ctx);
    if (s == NULL)
        return;
    file_work_cancel(s->files, ctx);
    if (s->attempts != NULL)
        attempts_end(s->attempts, ctx);
}

static void agent_info_start(tern_ctx *ctx, const json_t *args)
{
    (void)args;
    const dc_state_t *s = dc_agent_state(ctx, "dc.agent_info");
    if (s == NULL)
        return;
    tern_task_done(ctx,
                   json_pack("{s:s, s:s, s:s, s:s, s:o, s:I}", "server_uuid", s->server->uuid,
                             "hostname", s->server->hostname, "rack", s->server->rack, "data_root",
                             s->server->data_root, "instances", instance_scan(s->server->data_root),
                             "instances_at_init", (json_int_t)s->found_at_init));
}

static const tern_task_def agent_info_task = {
    .size = sizeof(tern_task_def),
    .name = "agent_info",
    .summary = "The server this agent serves: its uuid, hostname, rack, data root and "
               "instances (each with its workload's pid and whether it is alive).",
    .args_schema = "{\"required\": [], \"properties\": {}, \"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = agent_info_start,
};

/* One entry a line. */
static const tern_task_def *const tasks[] = {
    &agent_info_task,
    &dc_inventory_load_task,
    &dc_provision_check_task,
    &dc_vm_check_task,
    &dc_place_task,
    &dc_nics_provision_task,
    &dc_vm_set_state_task,
    &dc_release_task,
    &dc_disk_check_task,
    &dc_disk_reserve_task,
    &dc_disk_commit_task,
    &dc_disk_settle_task,
    &dc_volume_check_task,
    &dc_volume_claim_task,
    &dc_volume_ready_task,
    &dc_volume_fail_task,
    &dc_volume_delete_begin_task,
    &dc_volume_delete_finish_task,
    &dc_volume_update_task,
    &dc_image_ensure_task,
    &dc_instance_create_task,
    &dc_instance_start_task,
    &dc_instance_stop_task,
    &dc_instance_destroy_task,
    &dc_disk_usage_task,
    &dc_disk_apply_task,
    &dc_disk_undo_task,
    &dc_instances_scan_task,
    &dc_net_reconcile_check_task,
    &dc_net_reconcile_task,
    &dc_storage_create_task,
    &dc_share_probe_task,
    &dc_share_restart_task,
    &dc_share_states_task,
    &dc_share_watch_check_task,
    &dc_volume_op_check_task,
    &dc_volume_snapshot_record_task,
    &dc_volume_network_task,
    &dc_volume_snapshot_agent_task,
    &dc_instance_nics_task,
    &dc_volumes_reserve_task,
    &dc_volumes_wait_task,
    &dc_volumes_reference_task,
    &dc_volumes_unreserve_task,
    &dc_reservations_clean_task,
    &dc_migration_check_task,
    &dc_migration_claim_task,
    &dc_migration_schedule_switch_task,
    &dc_migration_cancel_switch_task,
    &dc_migration_phase_task,
    &dc_migration_progress_task,
    &dc_migration_switch_task,
    &dc_migration_unswitch_task,
    &dc_migration_step_task,
    &dc_migration_request_task,
    &dc_migration_target_leave_task,
    &dc_migration_leftover_check_task,
    &dc_migration_leftover_done_task,
    &dc_migration_target_create_task,
    &dc_migration_recv_open_task,
    &dc_migration_send_task,
    &dc_migration_verify_task,
    &dc_migration_image_send_task,
    &dc_migration_flip_task,
    &dc_migration_cleanup_task,
    &dc_migration_estimate_task,
    &dc_vm_update_check_task,
    &dc_vm_update_task,
    &dc_vm_update_revert_task,
    &dc_instance_update_task,
    NULL,
};

static const tern_plugin dc_plugin = {
    .magic = TERN_PLUGIN_MAGIC,
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
    .size = sizeof(tern_plugin),
    .name = "dc",
    .version = "0.1.0",
    .init = dc_init,
    .fini = dc_fini,
    .tasks = tasks,
    .views = dc_views,
};

TERN_PLUGIN(dc_plugin)
