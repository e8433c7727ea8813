/*
 * instance_power.c -- dc.instance_start and dc.instance_stop, on a server's agent.
 *
 *   dc.instance_start {"vm_uuid", "autoboot"?} -> {"pid", "started": bool, "state"}
 *                     (autoboot false: nothing started, the instance left "stopped")
 *   dc.instance_stop  {"vm_uuid"} -> {"pid": the workload's pid, or null when none ran}
 *
 * The workload is `<workload_bin> <kind> --dir <dir> [--file <dir>/disks/disk1.img --rate
 * <the settings' writer_records_per_s>] --daemonize --pidfile <dir>/workload.pid`, kind being
 * vm.json's "workload" (what customer_metadata["lab:workload"] chose at create: idle or writer, the
 * writer on the data disk; or "share", which dc.storage_create gives a storage instance, run as
 * `share --dir <dir> --health-ms <the settings' share_health_ms>`, no --file). The command line is
 * the agent's: a caller names a kind, never a program or an argument. --daemonize makes the
 * workload the child of init, never the agent's, so an agent that restarts or is killed takes no
 * instance with it; the program the agent runs (through tern_spawn) returns once the workload runs
 * and its pid file is written. Start then waits, bounded, until the pid file names a live workload
 * of this instance, and answers its pid; a live one already there is answered as it is.
 *
 * A pid file is trusted only while /proc says its pid is a live tern-workload whose
 * --pidfile is this instance's (proc_check.h), so a stale file never gets another
 * process signalled. Stop: SIGTERM, a bounded wait, SIGKILL, another bounded wait.
 * Both record the state (running, stopped) in vm.json.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attempts.h"
#include "dc_state.h"
#include "instance_dir.h"
#include "instance_power.h"
#include "lib/args.h"
#include "proc_check.h"

#define WORKLOAD_COMM    "tern-workload"
#define SPAWN_TIMEOUT_MS 10000 /* the starting program returns once the workload runs */
#define PIDFILE_WAIT_MS  5000  /* after it returned, for a live pid in the pid file */
#define STOP_GRACE_MS    10000 /* SIGTERM to SIGKILL */
#define KILL_WAIT_MS     5000  /* SIGKILL to giving up */
#define POLL_MS          20

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The instance's paths and vm.json for task `task`, or false after failing the
 * attempt (instance_read_code: InvalidArgument, PathOutsideDataRoot, InstanceNotFound,
 * InstanceUnreadable). *vm is a new reference when wanted. */
static bool instance_open(tern_ctx *ctx, const char *task, const dc_state_t *s, const json_t *args,
                          instance_paths_t *p, json_t **vm)
{
    char msg[1024];
    const char *vm_uuid = NULL;
    const char *bad = task_args_string(args, "vm_uuid", &vm_uuid, NULL, msg, sizeof msg);
    if (bad != NULL || vm_uuid == NULL) {
        tern_task_fail(ctx, "InvalidArgument", "%s: %s", task,
                       bad != NULL ? bad : "vm_uuid: required");
        return false;
    }
    int rc = vm == NULL ? instance_paths(s->server->data_root, vm_uuid, p, msg, sizeof msg)
                        : instance_read(s->server->data_root, vm_uuid, p, vm, msg, sizeof msg);
    if (rc != 0) {
        tern_task_fail(ctx, instance_read_code(rc), "%s: %s", task, msg);
        return false;
    }
    return true;
}

/* Sets vm.json's state; false after failing the attempt. */
static bool record_state(tern_ctx *ctx, const char *task, const instance_paths_t *p,
                         const char *state)
{
    char msg[1024];
    json_t *vm = NULL;
    int rc = instance_json_read(p->vm_json, &vm, msg, sizeof msg);
    if (rc == 0 && strcmp(json_string_value(json_object_get(vm, "state")) ?: "", state) != 0) {
        json_object_set_new(vm, "state", json_string(state));
        rc = instance_json_write(p->vm_json, vm, msg, sizeof msg);
    }
    json_decref(vm);
    if (rc != 0)
        tern_task_fail(ctx, "InstanceBroken", "%s: cannot record the state %s: %s", task, state,
                       msg);
    return rc == 0;
}

/* ---- start -------------------------------------------------------------------------- */

typedef struct start_attempt {
    const char *task;
    instance_paths_t p;
    uint64_t deadline_ms;
    instance_started_cb then;
    void *data;
} start_attempt_t;

/* Ends the attempt's start and calls its `then`: pid > 0, or 0 with code and msg. */
static void start_end(tern_ctx *ctx, start_attempt_t *st, pid_t pid, const char *code,
                      const char *msg)
{
    const dc_state_t *s = tern_plugin_state(ctx);
    instance_paths_t p = st->p;
    instance_started_cb then = st->then;
    void *data = st->data;
    attempts_end(s->attempts, ctx); /* frees st */
    then(ctx, &p, pid, code, msg, data);
}

/* Whether the pid file names a live workload yet: done, failed past the deadline, or
 * another look in POLL_MS. */
static void start_poll(tern_ctx *ctx, void *data)
{
    start_attempt_t *st = data;
    pid_t pid = instance_workload_pid(&st->p);
    if (pid > 0) {
        start_end(ctx, st, pid, NULL, NULL);
        return;
    }
    if (now_ms() >= st->deadline_ms || tern_timer_start(ctx, POLL_MS, start_poll, st) < 0) {
        char msg[PATH_MAX * 2 + 128];
        snprintf(msg, sizeof msg,
                 "%s: %s names no live workload %d ms after it was started (see "
                 "%s/workload.log)",
                 st->task, st->p.pidfile, PIDFILE_WAIT_MS, st->p.dir);
        start_end(ctx, st, 0, "WorkloadStartFailed", msg);
    }
}

static void start_spawned(tern_ctx *ctx, const tern_spawn_res *res, void *data)
{
    start_attempt_t *st = data;
    if (res->error != NULL || res->exit_status != 0) {
        char msg[PATH_MAX + 2400];
        snprintf(msg, sizeof msg, "%s: %s: %s%s", st->task, st->p.dir,
                 res->error != NULL    ? res->error
                 : res->timed_out      ? "the workload did not start in time"
                 : res->stderr_len > 0 ? res->stderr_tail
                                       : "the workload exited",
                 res->term_signal != 0 ? " (killed by a signal)" : "");
        start_end(ctx, st, 0, "WorkloadStartFailed", msg);
        return;
    }
    st->deadline_ms = now_ms() + PIDFILE_WAIT_MS;
    start_poll(ctx, st);
}

void instance_start_workload(tern_ctx *ctx, const char *task, const instance_paths_t *p,
                             const char *kind, instance_started_cb then, void *data)
{
    const dc_state_t *s = tern_plugin_state(ctx);
    char msg[PATH_MAX + 256];
    if (s->workload_bin == NULL) {
        snprintf(msg, sizeof msg,
                 "%s: the dc plugin's configuration names no workload_bin (tern-workload)", task);
        then(ctx, p, 0, "NoWorkloadBin", msg, data);
        return;
    }
    bool writer = strcmp(kind, "writer") == 0, share = strcmp(kind, "share") == 0;
    char disk1[PATH_MAX + 32], health_ms[32], rate[32];
    snprintf(disk1, sizeof disk1, "%s/disk1.img", p->disks);
    snprintf(health_ms, sizeof health_ms, "%llu",
             (unsigned long long)(s->dc != NULL ? s->dc->set.share_health_ms : 5000));
    snprintf(rate, sizeof rate, "%llu",
             (unsigned long long)(s->dc != NULL ? s->dc->set.writer_records_per_s : 10));
    const char *argv[14];
    size_t n = 0;
    argv[n++] = s->workload_bin;
    argv[n++] = writer ? "writer" : share ? "share" : "idle";
    argv[n++] = "--dir";
    argv[n++] = p->dir;
    if (writer) {
        argv[n++] = "--file";
        argv[n++] = disk1;
        argv[n++] = "--rate";
        argv[n++] = rate;
    }
    if (share) {
        argv[n++] = "--health-ms";
        argv[n++] = health_ms;
    }
    argv[n++] = "--daemonize";
    argv[n++] = "--pidfile";
    argv[n++] = p->pidfile;
    argv[n] = NULL;
    start_attempt_t *st = malloc(sizeof *st);
    if (st == NULL)
        abort();
    *st = (start_attempt_t){.task = task, .p = *p, .then = then, .data = data};
    attempts_add(s->attempts, ctx, st, free);
    tern_spawn_opts opts = {.size = sizeof opts,
                            .argv = argv,
                            .timeout_ms = SPAWN_TIMEOUT_MS,
                            .cwd = p->dir,
                            .tail_bytes = 2048};
    int rc = tern_spawn(ctx, &opts, start_spawned, st);
    if (rc != 0) {
        snprintf(msg, sizeof msg, "%s: cannot run %s: %s", task, s->workload_bin,
                 strerror(rc < 0 ? -rc : rc));
        start_end(ctx, st, 0, "WorkloadStartFailed", msg);
    }
}

static void start_started(tern_ctx *ctx, const instance_paths_t *p, pid_t pid, const char *code,
                          const char *msg, void *data)
{
    (void)data;
    if (pid <= 0) {
        tern_task_fail(ctx, code, "%s", msg);
        return;
    }
    if (record_state(ctx, "dc.instance_start", p, "running"))
        tern_task_done(
            ctx, json_pack("{s:i, s:b, s:s}", "pid", (int)pid, "started", 1, "state", "running"));
}

static void start_start(tern_ctx *ctx, const json_t *args)
{
    const char *task = "dc.instance_start";
    const dc_state_t *s = dc_agent_state(ctx, task);
    instance_paths_t p;
    json_t *vm = NULL;
    if (s == NULL || !instance_open(ctx, task, s, args, &p, &vm))
        return;
    pid_t pid = instance_workload_pid(&p);
    /* A provision with autoboot false makes the instance and leaves it stopped: the
     * step answers the state the instance is left in, which the provision records. */
    if (json_is_false(json_object_get(args, "autoboot")) && pid <= 0) {
        json_decref(vm);
        if (record_state(ctx, task, &p, "stopped"))
            tern_task_done(ctx,
                           json_pack("{s:n, s:b, s:s}", "pid", "started", 0, "state", "stopped"));
        return;
    }
    if (pid > 0) {
        json_decref(vm);
        if (record_state(ctx, task, &p, "running"))
            tern_task_done(ctx, json_pack("{s:i, s:b, s:s}", "pid", (int)pid, "started", 0, "state",
                                          "running"));
        return;
    }
    char msg[512];
    const json_t *kind_v = json_object_get(vm, "workload");
    const char *kind =
        kind_v != NULL
            ? json_string_value(kind_v)
            : instance_workload_kind(json_object_get(vm, "customer_metadata"), msg, sizeof msg);
    /* "share" is a storage instance's (dc.storage_create writes it), never a
     * customer's choice: instance_workload_kind does not accept it. */
    if (kind == NULL ||
        (strcmp(kind, "idle") != 0 && strcmp(kind, "writer") != 0 && strcmp(kind, "share") != 0)) {
        if (kind != NULL || kind_v != NULL)
            snprintf(msg, sizeof msg, "workload: expected one of " INSTANCE_WORKLOADS ", share");
        json_decref(vm);
        tern_task_fail(ctx, "InvalidArgument", "%s: %s: %s", task, p.vm_json, msg);
        return;
    }
    bool writer = strcmp(kind, "writer") == 0, share = strcmp(kind, "share") == 0;
    kind = writer ? "writer" : share ? "share" : "idle"; /* not vm's: released below */
    bool has_disk1 = json_array_size(json_object_get(vm, "disks")) > 1;
    json_decref(vm);
    if (writer && !has_disk1) {
        tern_task_fail(ctx, "InvalidArgument",
                       "%s: the writer workload writes to the data disk, and instance %s has "
                       "none (disks[1])",
                       task, p.dir);
        return;
    }
    instance_start_workload(ctx, task, &p, kind, start_started, NULL);
}

const tern_task_def dc_instance_start_task = {
    .size = sizeof(tern_task_def),
    .name = "instance_start",
    .summary = "Starts the instance's workload (detached, never the agent's child) and "
               "answers its pid; a live one is answered as it is.",
    .args_schema = "{\"required\": [\"vm_uuid\"], \"properties\": {\"vm_uuid\": {\"type\": "
                   "\"string\"}, \"autoboot\": {\"type\": \"boolean\"}}, \"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = start_start,
    .cancel = dc_agent_cancel,
};

/* ---- stop --------------------------------------------------------------------------- */

typedef struct stop_attempt {
    const char *task;
    instance_paths_t p;
    pid_t pid;
    bool killed; /* SIGKILL sent */
    uint64_t deadline_ms;
    instance_stopped_cb then;
    void *data;
} stop_attempt_t;

static void stop_gone(tern_ctx *ctx, stop_attempt_t *st)
{
    unlink(st->p.pidfile); /* the workload removes it on a clean stop: may be gone */
    instance_paths_t p = st->p;
    pid_t pid = st->pid;
    instance_stopped_cb then = st->then;
    void *data = st->data;
    const dc_state_t *s = tern_plugin_state(ctx);
    attempts_end(s->attempts, ctx);
    then(ctx, &p, pid > 0 ? pid : 0, data);
}

static void stop_poll(tern_ctx *ctx, void *data)
{
    stop_attempt_t *st = data;
    const dc_state_t *s = tern_plugin_state(ctx);
    if (!dc_proc_runs_with(st->pid, WORKLOAD_COMM, st->p.pidfile)) {
        stop_gone(ctx, st);
        return;
    }
    if (now_ms() >= st->deadline_ms) {
        if (st->killed) {
            tern_task_fail(ctx, "WorkloadStuck",
                           "%s: the workload of %s (pid %ld) is still there %d ms after SIGKILL",
                           st->task, st->p.dir, (long)st->pid, KILL_WAIT_MS);
            attempts_end(s->attempts, ctx);
            return;
        }
        tern_log(ctx, TERN_LOG_WARN,
                 "%s: workload pid %ld of %s ignored SIGTERM for %d ms: SIGKILL", st->task,
                 (long)st->pid, st->p.dir, STOP_GRACE_MS);
        if (kill(st->pid, SIGKILL) != 0 && errno == ESRCH) {
            stop_gone(ctx, st);
            return;
        }
        st->killed = true;
        st->deadline_ms = now_ms() + KILL_WAIT_MS;
    }
    if (tern_timer_start(ctx, POLL_MS, stop_poll, st) < 0) {
        tern_task_fail(ctx, "WorkloadStopFailed", "%s: cannot start a timer", st->task);
        attempts_end(s->attempts, ctx);
    }
}

void instance_stop_workload(tern_ctx *ctx, const char *task, const instance_paths_t *p,
                            instance_stopped_cb then, void *data)
{
    const dc_state_t *s = tern_plugin_state(ctx);
    stop_attempt_t *st = malloc(sizeof *st);
    if (st == NULL)
        abort();
    *st = (stop_attempt_t){.task = task, .p = *p, .then = then, .data = data};
    attempts_add(s->attempts, ctx, st, free);
    st->pid = instance_workload_pid(p);
    if (st->pid <= 0) {
        stop_gone(ctx, st);
        return;
    }
    if (kill(st->pid, SIGTERM) != 0) {
        if (errno == ESRCH) {
            stop_gone(ctx, st);
            return;
        }
        tern_task_fail(ctx, "WorkloadStopFailed", "%s: cannot signal pid %ld of %s: %s", task,
                       (long)st->pid, p->dir, strerror(errno));
        attempts_end(s->attempts, ctx);
        return;
    }
    st->deadline_ms = now_ms() + STOP_GRACE_MS;
    stop_poll(ctx, st);
}

static void stop_recorded(tern_ctx *ctx, const instance_paths_t *p, pid_t pid, void *data)
{
    (void)data;
    if (record_state(ctx, "dc.instance_stop", p, "stopped"))
        tern_task_done(ctx, json_pack("{s:o}", "pid", pid > 0 ? json_integer(pid) : json_null()));
}

static void stop_start(tern_ctx *ctx, const json_t *args)
{
    const char *task = "dc.instance_stop";
    const dc_state_t *s = dc_agent_state(ctx, task);
    instance_paths_t p;
    json_t *vm = NULL;
    if (s == NULL || !instance_open(ctx, task, s, args, &p, &vm))
        return;
    json_decref(vm);
    instance_stop_workload(ctx, task, &p, stop_recorded, NULL);
}

const tern_task_def dc_instance_stop_task = {
    .size = sizeof(tern_task_def),
    .name = "instance_stop",
    .summary = "Stops the instance's workload: SIGTERM, a bounded wait, SIGKILL; done when "
               "none runs.",
    .args_schema = "{\"required\": [\"vm_uuid\"], \"properties\": {\"vm_uuid\": {\"type\": "
                   "\"string\"}}, \"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = stop_start,
    .cancel = dc_agent_cancel,
};
