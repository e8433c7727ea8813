/*
 * migration_send.c -- dc.migration_send, on the source's agent: the passes of a
 * migration's block transfer to the target's listener (the transfer's sync_send_pass,
 * sync_send.h), each on the thread pool (file_work.h), while a timer on the loop
 * reports the progress to the control's record and learns whether to stop.
 *
 *   {migration_uuid, vm_uuid, addr, mode: "pass"|"converge"|"final",
 *    send_mbps_limit, block_kib, window_blocks,
 *    converge: {max_mib, max_passes, stall_passes, min_reduction_pct}}
 *   -> {outcome: "done"|"paused"|"aborted", passes: [{pass, bytes, wire_bytes, total,
 *       blocks, holes, duration_ms}], switch_reason, digests?: [{disk, size, digest,
 *       block_kib}]}
 *
 * The migration's secret, which the pass proves to the target's listener, is read from
 * the control's record (migration_secret.lua) before the first pass: no step's args or
 * result carry it, as GET /jobs/:uuid shows those.
 *
 * Every second the timer reads the pass's counters and, while bytes move or the walk
 * compares blocks (or every 60 s when neither, to show the send lives and learn of a
 * pause: send_pace.h), runs the control's dc.migration_progress script with
 * {migration_uuid, event: {type, phase ("sync", or "switch" for the final pass), state
 * "running", current_progress, total_progress, transfer_bytes_second (over the last
 * 2 s), eta_ms, message}}; each pass's end is reported with pass_done (and
 * switch_reason when converge decided). An answer with pause_requested or
 * abort_requested stops the pass at its next window boundary, or within
 * SYNC_WALK_STOP_BLOCKS blocks when it is walking (sync_send.h): outcome "paused" or
 * "aborted" (a pass cut short is not counted). Its send_mbps_limit applies from the
 * next pass (a pass keeps its rate).
 *
 * mode pass: one pass. converge: passes until converge_decide says why to switch
 * (size, max_passes, stalled), at most 100. final: refused InstanceRunning while the
 * instance's workload lives (proc_check.h), one pass, then each disk's digest
 * (sync_digest.h), for dc.migration_verify on the target.
 *
 * Re-run, a pass sends only what the target lacks (the target's manifest is the
 * authority), so a retried step resumes. A cancelled attempt stops the pass at its
 * next window boundary.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "converge.h"
#include "dc_state.h"
#include "instance_dir.h"
#include "inventory_script.h"
#include "lib/args.h"
#include "lua_scripts.h"
#include "migration_agent.h"
#include "send_pace.h"
#include "sync_auth.h"
#include "sync_digest.h"
#include "sync_tree.h"
#include "sync_send.h"

#define TICK_MS      1000u
#define MAX_PASSES   100u /* converge's own bound, whatever max_passes says */
#define CONNECT_MS   30000u
#define RATE_SAMPLES 3u /* the ticks of the last 2 s */

typedef enum { MODE_PASS, MODE_CONVERGE, MODE_FINAL } send_mode_t;

/* One pass on the pool: its arguments, its counters (read by the loop's timer) and its
 * result. Owned by file_work (freed with pass_job_free). */
typedef struct pass_job {
    instance_paths_t p;
    char vm[40], mig[40], secret[72], addr[64];
    sync_send_opts_t o;
    sync_counters_t c;
    atomic_bool stop_req; /* pause, abort or the attempt cancelled */
    sync_pass_result_t r;
    bool final;
    json_t *digests;       /* final: the disks' digests (owned until taken) */
    struct send_state *st; /* its attempt's: read on the loop only, never after a cancel */
} pass_job_t;

typedef struct send_state {
    tern_ctx *ctx;
    instance_paths_t p;
    char vm[40], mig[40], secret[72], addr[64];
    send_mode_t mode;
    uint64_t rate_bytes_s;
    uint32_t block_size, window_blocks;
    converge_rule_t rule;
    pass_job_t *job;        /* the pass in flight, or NULL */
    int timer;              /* -1: none */
    bool calling;           /* a progress call is in flight */
    json_t *pass_done_args; /* a pass end waiting for the call in flight (owned) */
    bool pause, abort;
    uint64_t pass_bytes[MAX_PASSES];
    size_t n_passes;
    json_t *passes;  /* owned */
    json_t *digests; /* owned */
    const char *switch_reason;
    uint64_t sample_ms[RATE_SAMPLES], sample_sent[RATE_SAMPLES];
    size_t n_samples;
    send_pace_t pace;
    uint64_t pass_started_ms;
    char pass_started_iso[40];
} send_state_t;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void pass_job_free(void *data)
{
    pass_job_t *j = data;
    sync_secret_wipe(j->secret, sizeof j->secret);
    json_decref(j->digests);
    free(j);
}

/* Frees the state (attempts.h: at the report, or from the cancel hook). A pass still
 * running is told to stop; its job stays file_work's. */
static void send_state_free(void *data)
{
    send_state_t *st = data;
    if (st->job != NULL)
        atomic_store(&st->job->stop_req, true);
    sync_secret_wipe(st->secret, sizeof st->secret);
    json_decref(st->pass_done_args);
    json_decref(st->passes);
    json_decref(st->digests);
    free(st);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every disks/ *.img's digest, by name (new reference), or NULL with err. A disk the
 * pass r digested (the final pass, with the instance stopped, hashed every block it
 * holds) takes that digest; any other is read here. Reading the disks again doubled
 * the final pass's time, all of it downtime (bench_migration_downtime.py). */
static json_t *disk_digests(const instance_paths_t *p, uint32_t block_size,
                            const sync_pass_result_t *r, char *err, size_t errlen)
{
    DIR *d = opendir(p->disks);
    if (d == NULL && errno == ENOENT && r->tree)
        return json_array(); /* a storage instance: no disks, its trees digested below */
    if (d == NULL) {
        snprintf(err, errlen, "%s: %s", p->disks, strerror(errno));
        return NULL;
    }
    char *names[64];
    size_t n = 0;
    struct dirent *de;
    while (n < 64 && (de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len > 4 && strcmp(de->d_name + len - 4, ".img") == 0)
            names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof names[0], by_name);
    json_t *out = json_array();
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX + 64], hex[65];
        uint64_t size = 0;
        snprintf(path, sizeof path, "%s/%s", p->disks, names[i] != NULL ? names[i] : "");
        int num = names[i] != NULL ? sync_disk_number(names[i]) : -1;
        if (num >= 0 && r->digested[num]) {
            memcpy(hex, r->digest[num], sizeof hex);
            size = r->digest_size[num];
        } else if (out != NULL && (names[i] == NULL || sync_disk_digest(path, block_size, hex,
                                                                        &size, err, errlen) != 0)) {
            json_decref(out);
            out = NULL;
        }
        if (out != NULL)
            json_array_append_new(out, json_pack("{s:s, s:I, s:s, s:I}", "disk", names[i], "size",
                                                 (json_int_t)size, "digest", hex, "block_kib",
                                                 (json_int_t)(block_size / 1024u)));
        free(names[i]);
    }
    return out;
}

/* On a pool thread. */
static int pass_work(void *arg, const atomic_bool *cancelled, char *err, size_t errlen)
{
    (void)cancelled; /* the cancel hook sets stop_req, which the pass watches */
    pass_job_t *j = arg;
    /* A storage instance's final pass: its export fenced first, so a consumer's
     * write can no longer land on the source after the pass read it (the share is
     * stopped: its NFS clients would be waiting). The switch's hide_source keeps it
     * fenced; showing the instance again (an abort, a rollback) unfences it. */
    if (j->final && sync_tree_present(j->p.dir)) {
        int frc = sync_tree_fence(j->p.dir, true, err, errlen);
        if (frc < 0)
            return frc;
    }
    int rc = sync_send_pass(&j->o, &j->c, &j->stop_req, &j->r, err, errlen);
    if (rc == 0 && j->final && !j->r.stopped) {
        j->digests = disk_digests(&j->p, j->o.block_size, &j->r, err, errlen);
        if (j->digests == NULL)
            rc = -EIO;
        else if (j->r.tree)
            /* The trees' digest, as the final pass listed them with the share stopped
             * and the export fenced: what the verify compares the target's with. */
            json_array_append_new(j->digests,
                                  json_pack("{s:s, s:b, s:I, s:s, s:I}", "disk", "export", "tree",
                                            1, "size", (json_int_t)j->r.tree_entries, "digest",
                                            j->r.tree_digest, "block_kib",
                                            (json_int_t)(j->o.block_size / 1024u)));
    }
    return rc;
}

static void start_pass(send_state_t *st);
static void progress_call(send_state_t *st, json_t *args);

/* Reports the outcome and frees the state. */
static void finish(send_state_t *st, const char *outcome)
{
    tern_ctx *ctx = st->ctx;
    json_t *result = json_pack("{s:s, s:O, s:s?}", "outcome", outcome, "passes", st->passes,
                               "switch_reason", st->switch_reason);
    if (st->digests != NULL)
        json_object_set(result, "digests", st->digests);
    const dc_state_t *s = tern_plugin_state(ctx);
    attempts_end(s->attempts, ctx);
    tern_task_done(ctx, result);
}

static void fail(send_state_t *st, const char *code, const char *msg)
{
    tern_ctx *ctx = st->ctx;
    char text[1200];
    snprintf(text, sizeof text, "dc.migration_send: migration %s, instance %s: %s", st->mig, st->vm,
             msg);
    const dc_state_t *s = tern_plugin_state(ctx);
    attempts_end(s->attempts, ctx);
    tern_task_fail(ctx, code, "%s", text);
}

/* After a pass's end was recorded: another pass, or the outcome. */
static void after_pass(send_state_t *st)
{
    if (st->abort)
        finish(st, "aborted");
    else if (st->pause && st->mode == MODE_CONVERGE && st->switch_reason == NULL)
        finish(st, "paused");
    else if (st->mode == MODE_CONVERGE && st->switch_reason == NULL)
        start_pass(st);
    else
        finish(st, "done");
}

static void on_progress(tern_ctx *ctx, const json_t *ok, const char *code, const char *message,
                        void *data)
{
    send_state_t *st = data;
    st->calling = false;
    bool was_pass_end = st->job == NULL && st->pass_done_args == NULL;
    if (ok == NULL) {
        /* A tick lost is only a late figure; a pass end not recorded fails the step
         * (a re-run resends nothing the target has). */
        if (!was_pass_end) {
            tern_log(ctx, TERN_LOG_WARN, "dc.migration_send: progress of migration %s: %s: %s",
                     st->mig, code, message);
            /* No record any more: nobody wants these bytes. */
            if (strcmp(code, "MigrationNotFound") == 0) {
                st->abort = true;
                if (st->job != NULL)
                    atomic_store(&st->job->stop_req, true);
            }
        } else {
            char msg[600];
            snprintf(msg, sizeof msg, "recording the pass's end: %s", message);
            fail(st, code, msg);
            return;
        }
    } else {
        /* A migration that stopped running (paused, failed, aborted by the control)
         * takes no more passes from this send. */
        const char *state = json_string_value(json_object_get(ok, "state"));
        bool stopped = state != NULL && strcmp(state, "running") != 0;
        st->pause = st->pause || json_is_true(json_object_get(ok, "pause_requested")) ||
                    (stopped && strcmp(state, "paused") == 0);
        st->abort = st->abort || json_is_true(json_object_get(ok, "abort_requested")) ||
                    (stopped && strcmp(state, "paused") != 0);
        const json_t *limit = json_object_get(ok, "send_mbps_limit");
        if (json_is_number(limit) && json_number_value(limit) > 0)
            st->rate_bytes_s = (uint64_t)(json_number_value(limit) * 125000.0);
        if (st->job != NULL && (st->pause || st->abort))
            atomic_store(&st->job->stop_req, true);
    }
    if (st->pass_done_args != NULL) {
        json_t *args = st->pass_done_args;
        st->pass_done_args = NULL;
        progress_call(st, args);
    } else if (was_pass_end) {
        after_pass(st);
    }
}

/* Runs the control's progress script with args (taken). */
static void progress_call(send_state_t *st, json_t *args)
{
    if (st->calling) {
        json_decref(st->pass_done_args);
        st->pass_done_args = args;
        return;
    }
    st->calling = true;
    int rc = dc_script_call(st->ctx, dc_lua_migration_progress, args, on_progress, st);
    json_decref(args);
    if (rc != 0) {
        st->calling = false;
        on_progress(st->ctx, NULL, "RedisUnavailable", "Redis is not reachable from this runner",
                    st);
    }
}

/* The rate over the last 2 s of samples, bytes/s. */
static uint64_t recent_rate(const send_state_t *st)
{
    if (st->n_samples < 2)
        return 0;
    size_t last = (st->n_samples - 1) % RATE_SAMPLES;
    size_t first = st->n_samples >= RATE_SAMPLES ? st->n_samples % RATE_SAMPLES : 0;
    uint64_t dt = st->sample_ms[last] - st->sample_ms[first];
    uint64_t db = st->sample_sent[last] - st->sample_sent[first];
    return dt > 0 ? db * 1000u / dt : 0;
}

static void on_tick(tern_ctx *ctx, void *data)
{
    send_state_t *st = data;
    st->timer = -1;
    pass_job_t *j = st->job;
    if (j == NULL)
        return;
    uint64_t t = now_ms();
    uint64_t sent = atomic_load(&j->c.sent), total = atomic_load(&j->c.total);
    uint64_t walked = atomic_load(&j->c.walked);
    size_t at = st->n_samples % RATE_SAMPLES;
    st->sample_ms[at] = t;
    st->sample_sent[at] = sent;
    st->n_samples++;
    if (!st->calling && send_pace_due(&st->pace, t, sent, walked)) {
        uint64_t rate = recent_rate(st);
        char message[160];
        /* Before the first byte goes, the pass walks: what it compared so far is all
         * the progress there is to show. */
        if (sent == 0 && walked > 0)
            snprintf(message, sizeof message,
                     "pass %zu: comparing with the target, %llu blocks so far", st->n_passes + 1,
                     (unsigned long long)walked);
        else
            snprintf(message, sizeof message, "pass %zu: %.1f of %.1f MiB", st->n_passes + 1,
                     (double)sent / 1048576.0, (double)total / 1048576.0);
        json_t *eta = rate > 0 && total >= sent
                          ? json_integer((json_int_t)((total - sent) * 1000u / rate))
                          : json_null();
        json_t *event =
            json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:o, s:s}", "type", "progress", "phase",
                      st->mode == MODE_FINAL ? "switch" : "sync", "state", "running",
                      "current_progress", (json_int_t)sent, "total_progress", (json_int_t)total,
                      "transfer_bytes_second", (json_int_t)rate, "eta_ms", eta, "message", message);
        send_pace_reported(&st->pace, t, sent, walked);
        progress_call(st, json_pack("{s:s, s:o}", "migration_uuid", st->mig, "event", event));
    }
    st->timer = tern_timer_start(ctx, TICK_MS, on_tick, st);
}

static void iso_now(char *out, size_t len)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char base[24];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, len, "%s.%03ldZ", base, ts.tv_nsec / 1000000L);
}

/* On the loop once the pass ended (never after a cancel). */
static void on_pass_done(tern_ctx *ctx, void *arg, int rc, const char *err)
{
    pass_job_t *j = arg;
    send_state_t *st = j->st;
    st->job = NULL;
    if (st->timer >= 0) {
        tern_timer_stop(ctx, st->timer);
        st->timer = -1;
    }
    if (rc != 0) {
        /* The transfer answers EACCES when the target refused the sender's proof of
         * the secret (sync_send.h): retrying with the same secret cannot help. */
        fail(st, rc == -EACCES ? "TransferRefused" : "TransferFailed", err);
        return;
    }
    if (j->r.stopped) {
        finish(st, st->abort ? "aborted" : "paused");
        return;
    }
    uint64_t pass = st->n_passes + 1;
    st->pass_bytes[st->n_passes++] = j->r.sent;
    json_array_append_new(
        st->passes,
        json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "pass", (json_int_t)pass, "bytes",
                  (json_int_t)j->r.sent, "wire_bytes", (json_int_t)j->r.wire, "total",
                  (json_int_t)j->r.total, "blocks", (json_int_t)j->r.blocks, "holes",
                  (json_int_t)j->r.holes, "duration_ms", (json_int_t)j->r.duration_ms));
    if (j->digests != NULL) {
        json_decref(st->digests);
        st->digests = j->digests;
        j->digests = NULL;
    }
    if (st->mode == MODE_CONVERGE) {
        st->switch_reason = converge_decide(&st->rule, st->pass_bytes, st->n_passes);
        if (st->switch_reason == NULL && st->n_passes >= MAX_PASSES)
            st->switch_reason = "max_passes";
    }
    json_t *args = json_pack(
        "{s:s, s:{s:I, s:I, s:I, s:I, s:s}}", "migration_uuid", st->mig, "pass_done", "pass",
        (json_int_t)pass, "bytes", (json_int_t)j->r.sent, "total", (json_int_t)j->r.total,
        "duration_ms", (json_int_t)j->r.duration_ms, "started_timestamp", st->pass_started_iso);
    if (st->switch_reason != NULL)
        json_object_set_new(args, "switch_reason", json_string(st->switch_reason));
    progress_call(st, args);
}

/* The migration's secret read from its record (migration_secret.lua), so that no step's
 * args or result carry it; then the first pass. */
static void on_secret(tern_ctx *ctx, const json_t *ok, const char *code, const char *message,
                      void *data)
{
    (void)ctx;
    send_state_t *st = data;
    const char *secret = json_string_value(json_object_get(ok, "secret"));
    if (ok == NULL || secret == NULL || strlen(secret) != 64 ||
        strspn(secret, "0123456789abcdef") != 64) {
        char msg[600];
        snprintf(msg, sizeof msg, "its secret: %s", ok == NULL ? message : "not 64 hex digits");
        fail(st, ok == NULL ? code : "InvalidState", msg);
        return;
    }
    snprintf(st->secret, sizeof st->secret, "%s", secret);
    start_pass(st);
}

static void start_pass(send_state_t *st)
{
    const dc_state_t *s = tern_plugin_state(st->ctx);
    pass_job_t *j = calloc(1, sizeof *j);
    if (j == NULL)
        abort();
    j->st = st;
    j->p = st->p;
    memcpy(j->vm, st->vm, sizeof j->vm);
    memcpy(j->mig, st->mig, sizeof j->mig);
    memcpy(j->secret, st->secret, sizeof j->secret);
    memcpy(j->addr, st->addr, sizeof j->addr);
    j->final = st->mode == MODE_FINAL;
    atomic_init(&j->stop_req, st->pause || st->abort);
    j->o = (sync_send_opts_t){.instance_dir = j->p.dir,
                              .vm_uuid = j->vm,
                              .migration_uuid = j->mig,
                              .secret = j->secret,
                              .addr = j->addr,
                              .rate_bytes_s = st->rate_bytes_s,
                              .block_size = st->block_size,
                              .window_blocks = st->window_blocks,
                              .connect_timeout_ms = CONNECT_MS,
                              .digests = j->final};
    st->pass_started_ms = now_ms();
    /* The pass's start is the first sample, so the first tick has a rate. */
    st->sample_ms[0] = st->pass_started_ms;
    st->sample_sent[0] = 0;
    st->n_samples = 1;
    send_pace_start(&st->pace, SEND_PACE_KEEPALIVE_MS, st->pass_started_ms);
    iso_now(st->pass_started_iso, sizeof st->pass_started_iso);
    st->job = j;
    int rc =
        file_job_start(st->ctx, s->files, st->p.dir, pass_work, j, pass_job_free, on_pass_done);
    if (rc != 0) {
        st->job = NULL;
        char msg[256];
        snprintf(msg, sizeof msg, "cannot queue the pass: %s", strerror(-rc));
        fail(st, "TransferFailed", msg);
        return;
    }
    if (st->timer < 0)
        st->timer = tern_timer_start(st->ctx, TICK_MS, on_tick, st);
}

/* A number argument of args at `name` in [min, max], or the default when absent.
 * NULL, or msg naming it. */
static const char *number_arg(const json_t *args, const char *name, double min, double max,
                              double *out, char *msg, size_t msglen)
{
    const json_t *v = json_object_get(args, name);
    if (v == NULL || json_is_null(v))
        return NULL;
    if (!json_is_number(v) || json_number_value(v) < min || json_number_value(v) > max) {
        snprintf(msg, msglen, "%s: expected a number from %g to %g", name, min, max);
        return msg;
    }
    *out = json_number_value(v);
    return NULL;
}

static void send_start(tern_ctx *ctx, const json_t *args)
{
    const char *task = "dc.migration_send";
    const dc_state_t *s = dc_agent_state(ctx, task);
    if (s == NULL)
        return;
    char msg[PATH_MAX + 512];
    const char *mig = NULL, *vm_uuid = NULL, *addr = NULL, *mode = NULL;
    double mbps = 0, block_kib = 1024, window = 16;
    double max_mib = 50, max_passes = 10, stall_passes = 3, min_red = 10;
    /* What the args leave out comes from the description's settings: a workflow cannot
     * read them (test_migration_abort's pass at 2 MB/s stops at its 4-block window). */
    if (s->dc != NULL) {
        const dc_settings_t *set = &s->dc->set;
        mbps = (double)set->migration_send_mbps_limit;
        block_kib = (double)set->migration_block_kib;
        window = (double)set->migration_window_blocks;
        max_mib = (double)set->migration_converge_max_mib;
        max_passes = (double)set->migration_converge_max_passes;
        stall_passes = (double)set->migration_converge_stall_passes;
        min_red = (double)set->migration_converge_min_reduction_pct;
    }
    const json_t *conv = json_object_get(args, "converge");
    const char *bad = migration_arg_uuid(args, "migration_uuid", &mig, msg, sizeof msg);
    if (bad == NULL)
        bad = migration_arg_uuid(args, "vm_uuid", &vm_uuid, msg, sizeof msg);
    int swapped = bad == NULL ? migration_arg_swapped(args, msg, sizeof msg) : 0;
    if (swapped < 0)
        bad = msg;
    if (bad == NULL && swapped) {
        /* A failed switch finished forward: its final pass was made before the swap,
         * and the target may run since (docs/MIGRATION.md "After a failure"). */
        tern_task_done(ctx, json_pack("{s:[], s:b}", "digests", "skipped", 1));
        return;
    }
    if (bad == NULL)
        bad = task_args_string(args, "addr", &addr, NULL, msg, sizeof msg);
    if (bad == NULL && (addr == NULL || strlen(addr) >= 64 || migration_listen_fault(addr) != NULL))
        bad = "addr: expected HOST:PORT, the target's migration listener (127.0.0.1:PORT)";
    if (bad == NULL)
        bad = task_args_string(args, "mode", &mode, NULL, msg, sizeof msg);
    if (bad == NULL &&
        (mode == NULL || (strcmp(mode, "pass") != 0 && strcmp(mode, "converge") != 0 &&
                          strcmp(mode, "final") != 0)))
        bad = "mode: expected pass, converge or final";
    if (bad == NULL)
        bad = number_arg(args, "send_mbps_limit", 0, 1e6, &mbps, msg, sizeof msg);
    if (bad == NULL)
        bad = number_arg(args, "block_kib", 4, 65536, &block_kib, msg, sizeof msg);
    if (bad == NULL)
        bad = number_arg(args, "window_blocks", 1, 1024, &window, msg, sizeof msg);
    if (bad == NULL && conv != NULL && !json_is_null(conv) && !json_is_object(conv))
        bad = "converge: expected an object {max_mib, max_passes, stall_passes, "
              "min_reduction_pct}";
    if (bad == NULL && json_is_object(conv)) {
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)conv, key, v)
        {
            if (bad == NULL && strcmp(key, "max_mib") != 0 && strcmp(key, "max_passes") != 0 &&
                strcmp(key, "stall_passes") != 0 && strcmp(key, "min_reduction_pct") != 0) {
                snprintf(msg, sizeof msg,
                         "converge.%s: unknown (expected max_mib, max_passes, stall_passes, "
                         "min_reduction_pct)",
                         key);
                bad = msg;
            }
        }
        if (bad == NULL)
            bad = number_arg(conv, "max_mib", 0, 1048576, &max_mib, msg, sizeof msg);
        if (bad == NULL)
            bad = number_arg(conv, "max_passes", 1, MAX_PASSES, &max_passes, msg, sizeof msg);
        if (bad == NULL)
            bad = number_arg(conv, "stall_passes", 1, MAX_PASSES, &stall_passes, msg, sizeof msg);
        if (bad == NULL)
            bad = number_arg(conv, "min_reduction_pct", 0, 100, &min_red, msg, sizeof msg);
        if (bad != NULL && bad == msg && strncmp(msg, "converge.", 9) != 0) {
            char inner[sizeof msg];
            snprintf(inner, sizeof inner, "%s", msg);
            snprintf(msg, sizeof msg, "converge.%.1000s", inner);
        }
    }
    if (bad != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "%s: %s", task, bad);
        return;
    }
    instance_paths_t p;
    json_t *vm = NULL;
    int rc = instance_read(s->server->data_root, vm_uuid, &p, &vm, msg, sizeof msg);
    if (rc != 0) {
        tern_task_fail(ctx, instance_read_code(rc), "%s: %s", task, msg);
        return;
    }
    /* A hidden target is filled by a migration, never the source of one; a target
     * promoted earlier is an instance like any other. */
    bool is_target = migration_hidden_target_of(vm) != NULL;
    json_decref(vm);
    if (is_target) {
        tern_task_fail(ctx, "InvalidState",
                       "%s: instance %s here is a migration's target, not a source", task, vm_uuid);
        return;
    }
    pid_t pid = instance_workload_pid(&p);
    if (strcmp(mode, "final") == 0 && pid > 0) {
        tern_task_fail(ctx, "InstanceRunning",
                       "%s: the workload of instance %s still runs (pid %d): the final pass needs "
                       "the instance stopped",
                       task, vm_uuid, (int)pid);
        return;
    }
    send_state_t *st = calloc(1, sizeof *st);
    if (st == NULL)
        abort();
    st->ctx = ctx;
    st->p = p;
    snprintf(st->vm, sizeof st->vm, "%s", vm_uuid);
    snprintf(st->mig, sizeof st->mig, "%s", mig);
    snprintf(st->addr, sizeof st->addr, "%s", addr);
    st->mode = strcmp(mode, "pass") == 0       ? MODE_PASS
               : strcmp(mode, "converge") == 0 ? MODE_CONVERGE
                                               : MODE_FINAL;
    st->rate_bytes_s = (uint64_t)(mbps * 125000.0);
    st->block_size = (uint32_t)block_kib * 1024u;
    st->window_blocks = (uint32_t)window;
    st->rule = (converge_rule_t){.max_bytes = (uint64_t)(max_mib * 1048576.0),
                                 .max_passes = (uint32_t)max_passes,
                                 .stall_passes = (uint32_t)stall_passes,
                                 .min_reduction_pct = (uint32_t)min_red};
    st->timer = -1;
    st->passes = json_array();
    attempts_add(s->attempts, ctx, st, send_state_free);
    if (migration_secret_ask(ctx, st->mig, on_secret, st) != 0)
        fail(st, "RedisError", "cannot ask the control for the migration's secret");
}

const tern_task_def dc_migration_send_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_send",
    .summary = "A migration's passes from this source to the target's listener, with progress "
               "each second; stops when a pause or abort is asked.",
    .args_schema = "{\"required\": [\"migration_uuid\", \"vm_uuid\", \"addr\", \"mode\"], "
                   "\"properties\": {\"migration_uuid\": {\"type\": \"string\"}, "
                   "\"vm_uuid\": {\"type\": \"string\"}, \"addr\": {\"type\": \"string\"}, "
                   "\"mode\": {\"type\": \"string\"}, "
                   "\"send_mbps_limit\": {\"type\": \"any\"}, \"block_kib\": {\"type\": \"any\"}, "
                   "\"window_blocks\": {\"type\": \"any\"}, \"converge\": {\"type\": \"any\"}, "
                   "\"switch_step\": {\"type\": \"any\"}}, "
                   "\"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = send_start,
    .cancel = dc_agent_cancel,
};
