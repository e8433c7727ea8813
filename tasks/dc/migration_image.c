/*
 * migration_image.c -- dc.migration_image_send, on the source's agent: a begin whose
 * image the image store no longer has (dc.image_ensure with missing_ok answered
 * present false on the target) sends the source server's own copy,
 * <data_root>/images/<image uuid>.img, to the target over the migration's
 * authenticated stream (an image pass, sync_image.h), never through a path the two
 * servers share. The target checks the copy's digest against the source's before it
 * renames it into place, then the migration's history gets one warning entry naming
 * the image and where it came from (dc.migration_progress's `warning`).
 *
 *   {migration_uuid, vm_uuid, image_uuid, addr, target_has: bool}
 *   -> {image_uuid, copied: bool, bytes, source_server_uuid}
 *
 * target_has true (the store had it, or the target had its copy, or the instance has
 * no image: image_uuid null, a storage instance): nothing to do,
 * copied false. bytes: what this attempt sent (0 when an earlier attempt of the step
 * had sent it all). The source without its copy: ImageFileMissing naming the file (the
 * image is then nowhere the migration can take it from). Re-run: the target answers
 * that it has the digest already, and nothing is sent again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dc_state.h"
#include "file_work.h"
#include "instance_dir.h"
#include "inventory_script.h"
#include "lib/args.h"
#include "lua_scripts.h"
#include "migration_agent.h"
#include "migration_listener.h"
#include "sync_auth.h"
#include "sync_send.h"

#define CONNECT_MS 30000u

/* The pass on the pool, with its own copies of what it reads (a cancelled attempt's
 * job outlives the attempt's state). Owned by file_work. */
typedef struct image_job {
    char vm[40], mig[40], image[40], secret[72], addr[64], path[PATH_MAX];
    uint32_t block_size;
    sync_send_opts_t o;
    sync_counters_t c;
    sync_pass_result_t r;
    struct image_state *st; /* its attempt's: read on the loop only, never after a cancel */
} image_job_t;

/* The attempt's state between its callbacks (attempts.h). */
typedef struct image_state {
    tern_ctx *ctx;
    char vm[40], mig[40], image[40], addr[64], path[PATH_MAX], server[40];
    uint32_t block_size;
    uint64_t bytes;
} image_state_t;

static void image_job_free(void *data)
{
    image_job_t *j = data;
    sync_secret_wipe(j->secret, sizeof j->secret);
    free(j);
}

static void fail(image_state_t *st, const char *code, const char *msg)
{
    tern_ctx *ctx = st->ctx;
    char text[PATH_MAX + 700];
    snprintf(text, sizeof text, "dc.migration_image_send: migration %s, image %s: %s", st->mig,
             st->image, msg);
    const dc_state_t *s = tern_plugin_state(ctx);
    attempts_end(s->attempts, ctx);
    tern_task_fail(ctx, code, "%s", text);
}

static void finish(image_state_t *st, bool copied)
{
    tern_ctx *ctx = st->ctx;
    json_t *r = json_pack("{s:s, s:b, s:I, s:s}", "image_uuid", st->image, "copied", copied,
                          "bytes", (json_int_t)st->bytes, "source_server_uuid", st->server);
    const dc_state_t *s = tern_plugin_state(ctx);
    attempts_end(s->attempts, ctx);
    tern_task_done(ctx, r);
}

static void on_warning(tern_ctx *ctx, const json_t *ok, const char *code, const char *message,
                       void *data)
{
    (void)ctx;
    image_state_t *st = data;
    if (ok == NULL) {
        char msg[600];
        snprintf(msg, sizeof msg, "the copy is made, its warning not recorded: %s", message);
        fail(st, code, msg);
        return;
    }
    finish(st, true);
}

static int image_work(void *arg, const atomic_bool *stop, char *err, size_t errlen)
{
    image_job_t *j = arg;
    return sync_send_pass(&j->o, &j->c, stop, &j->r, err, errlen);
}

static void on_sent(tern_ctx *ctx, void *arg, int rc, const char *err)
{
    (void)ctx;
    image_job_t *j = arg;
    image_state_t *st = j->st; /* file_work calls back only an attempt not cancelled */
    if (rc != 0) {
        fail(st, rc == -EACCES ? "TransferRefused" : "TransferFailed", err);
        return;
    }
    /* The target had no copy when the begin looked (target_has false): whatever this
     * attempt sent, the copy there is this step's, so the warning is recorded even when
     * an earlier attempt sent the bytes and lost its answer (image_present now). */
    st->bytes = j->r.sent;
    char text[512];
    snprintf(text, sizeof text,
             "image %s is not in the image store: copied from the source server %s, its "
             "digest checked on the target",
             st->image, st->server);
    json_t *args = json_pack("{s:s, s:{s:s, s:s, s:s, s:s}}", "migration_uuid", st->mig, "warning",
                             "message", text, "image_uuid", st->image, "image_source", "source",
                             "source_server_uuid", st->server);
    int qrc =
        args != NULL ? dc_script_call(ctx, dc_lua_migration_progress, args, on_warning, st) : -1;
    json_decref(args);
    if (qrc != 0)
        fail(st, "RedisError", "cannot record the image's warning with the control");
}

static void on_secret(tern_ctx *ctx, const json_t *ok, const char *code, const char *message,
                      void *data)
{
    image_state_t *st = data;
    const char *secret = json_string_value(json_object_get(ok, "secret"));
    if (ok == NULL || secret == NULL || strlen(secret) != 64 ||
        strspn(secret, "0123456789abcdef") != 64) {
        char msg[600];
        snprintf(msg, sizeof msg, "its secret: %s", ok == NULL ? message : "not 64 hex digits");
        fail(st, ok == NULL ? code : "InvalidState", msg);
        return;
    }
    image_job_t *j = calloc(1, sizeof *j);
    if (j == NULL)
        abort();
    j->st = st;
    memcpy(j->vm, st->vm, sizeof j->vm);
    memcpy(j->mig, st->mig, sizeof j->mig);
    memcpy(j->image, st->image, sizeof j->image);
    memcpy(j->addr, st->addr, sizeof j->addr);
    memcpy(j->path, st->path, sizeof j->path);
    snprintf(j->secret, sizeof j->secret, "%s", secret);
    j->o = (sync_send_opts_t){.vm_uuid = j->vm,
                              .migration_uuid = j->mig,
                              .secret = j->secret,
                              .addr = j->addr,
                              .block_size = st->block_size,
                              .window_blocks = 1,
                              .connect_timeout_ms = CONNECT_MS,
                              .image_path = j->path,
                              .image_uuid = j->image};
    const dc_state_t *s = tern_plugin_state(ctx);
    int rc = file_job_start(ctx, s->files, st->path, image_work, j, image_job_free, on_sent);
    if (rc != 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "cannot queue the image pass: %s", strerror(-rc));
        fail(st, "TransferFailed", msg);
    }
}

static void image_send_start(tern_ctx *ctx, const json_t *args)
{
    const char *task = "dc.migration_image_send";
    const dc_state_t *s = dc_agent_state(ctx, task);
    if (s == NULL)
        return;
    char msg[PATH_MAX + 256];
    const char *mig = NULL, *vm = NULL, *image = NULL, *addr = NULL;
    const json_t *has = json_object_get(args, "target_has");
    /* An instance without an image (a storage instance): image_ensure said present;
     * nothing to send. */
    if (json_is_null(json_object_get(args, "image_uuid")) && json_is_true(has)) {
        tern_task_done(ctx, json_pack("{s:n, s:b, s:I, s:s}", "image_uuid", "copied", 0, "bytes",
                                      (json_int_t)0, "source_server_uuid", s->server->uuid));
        return;
    }
    const char *bad = migration_arg_uuid(args, "migration_uuid", &mig, msg, sizeof msg);
    if (bad == NULL)
        bad = migration_arg_uuid(args, "vm_uuid", &vm, msg, sizeof msg);
    if (bad == NULL)
        bad = migration_arg_uuid(args, "image_uuid", &image, msg, sizeof msg);
    if (bad == NULL)
        bad = task_args_string(args, "addr", &addr, NULL, msg, sizeof msg);
    if (bad == NULL && (addr == NULL || strlen(addr) >= 64 || migration_listen_fault(addr) != NULL))
        bad = "addr: expected HOST:PORT, the target's migration listener (127.0.0.1:PORT)";
    if (bad == NULL && !json_is_boolean(has))
        bad = "target_has: expected a boolean (dc.image_ensure's present on the target)";
    if (bad != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "%s: %s", task, bad);
        return;
    }
    image_state_t *st = calloc(1, sizeof *st);
    if (st == NULL)
        abort();
    st->ctx = ctx;
    snprintf(st->vm, sizeof st->vm, "%s", vm);
    snprintf(st->mig, sizeof st->mig, "%s", mig);
    snprintf(st->image, sizeof st->image, "%s", image);
    snprintf(st->addr, sizeof st->addr, "%s", addr);
    snprintf(st->server, sizeof st->server, "%s", s->server->uuid);
    st->block_size = s->dc != NULL ? s->dc->set.migration_block_kib * 1024u : 1024u * 1024u;
    attempts_add(s->attempts, ctx, st, free);
    if (json_is_true(has)) {
        finish(st, false);
        return;
    }
    struct stat sb;
    if (instance_image_path(s->server->data_root, image, st->path, sizeof st->path, msg,
                            sizeof msg) != 0) {
        fail(st, "InvalidArgument", msg);
        return;
    }
    if (lstat(st->path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(msg, sizeof msg,
                 "the image store lacks it and this source server has no copy (%s): nowhere "
                 "to take it from",
                 st->path);
        fail(st, "ImageFileMissing", msg);
        return;
    }
    if (migration_secret_ask(ctx, st->mig, on_secret, st) != 0)
        fail(st, "RedisError", "cannot ask the control for the migration's secret");
}

const tern_task_def dc_migration_image_send_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_image_send",
    .summary = "A begin's image the store lacks, sent from this source server's copy to the "
               "target over the migration's authenticated stream, its digest checked there; "
               "records a warning.",
    .args_schema = "{\"required\": [\"migration_uuid\", \"vm_uuid\", \"image_uuid\", \"addr\", "
                   "\"target_has\"], \"properties\": {\"migration_uuid\": {\"type\": \"string\"}, "
                   "\"vm_uuid\": {\"type\": \"string\"}, \"image_uuid\": {\"type\": \"any\"}, "
                   "\"addr\": {\"type\": \"string\"}, \"target_has\": {\"type\": \"boolean\"}}, "
                   "\"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = image_send_start,
    .cancel = dc_agent_cancel,
};
