/*
 * migration_verify.c -- two read-only looks at an instance's disks, on the thread pool
 * (file_work.h):
 *
 *   dc.migration_verify {migration_uuid, vm_uuid, digests: [{disk, size, digest,
 *     block_kib?}]} -> {disks: [{disk, size, digest}]}        (the target's agent)
 *     recomputes each disk's size and digest (sync_digest.h, with the block size the
 *     source used: block_kib, 1024 when absent) and compares them with the source's
 *     (dc.migration_send's final answer). A difference, a disk missing, or a disk
 *     the source does not have fails VerifyFailed naming the disk and both digests.
 *     An entry {disk: "export", tree: true, size: entries, digest} (a storage
 *     instance's final pass) is its trees' digest (sync_tree.h), compared the same way.
 *
 *   dc.migration_estimate {vm_uuid, send_mbps_limit} -> {size_bytes, total_seconds,
 *     downtime_seconds}                                        (the source's agent)
 *     size_bytes: the bytes of the disks' data extents (SEEK_DATA) in 1 MiB blocks,
 *     all-zero blocks not counted, and of a storage instance's trees' files (their
 *     data extents: tree_copy.h's dc_tree_data_bytes), what a first pass sends; total_seconds =
 * size / rate + 10 (the begin's and switch's own steps); downtime_seconds = 15: a final pass of
 * what a running instance wrote meanwhile (5 s) and the stop and start (10 s). A rough figure for
 * an operator, documented as such in docs/MIGRATION.md.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dc_state.h"
#include "file_work.h"
#include "instance_dir.h"
#include "lib/args.h"
#include "migration_agent.h"
#include "sync_digest.h"
#include "sync_tree.h"
#include "tree_copy.h"

#define EST_BLOCK (1024u * 1024u)

typedef struct look_arg {
    instance_paths_t p;
    json_t *want;   /* verify: the source's digests (owned); NULL for an estimate */
    json_t *out;    /* verify: the disks computed (owned) */
    uint64_t bytes; /* estimate: the data bytes */
    const char *code;
} look_arg_t;

static void look_arg_free(void *data)
{
    look_arg_t *a = data;
    json_decref(a->want);
    json_decref(a->out);
    free(a);
}

/* The names of disks/ *.img (new reference, sorted by jansson's insertion: readdir's). */
static json_t *disk_names(const instance_paths_t *p, char *err, size_t errlen)
{
    DIR *d = opendir(p->disks);
    if (d == NULL && errno == ENOENT)
        return json_object(); /* a storage instance has none */
    if (d == NULL) {
        snprintf(err, errlen, "%s: %s", p->disks, strerror(errno));
        return NULL;
    }
    json_t *names = json_object();
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len > 4 && strcmp(de->d_name + len - 4, ".img") == 0)
            json_object_set_new(names, de->d_name, json_true());
    }
    closedir(d);
    return names;
}

static int verify_work(void *arg, const atomic_bool *stop, char *err, size_t errlen)
{
    look_arg_t *a = arg;
    a->code = "VerifyFailed";
    json_t *have = disk_names(&a->p, err, errlen);
    if (have == NULL)
        return -ENOENT;
    a->out = json_array();
    size_t i;
    const json_t *w;
    int rc = 0;
    json_array_foreach(a->want, i, w)
    {
        if (atomic_load(stop)) {
            rc = -ECANCELED;
            break;
        }
        const char *disk = json_string_value(json_object_get(w, "disk"));
        const char *digest = json_string_value(json_object_get(w, "digest"));
        json_int_t size = json_integer_value(json_object_get(w, "size"));
        json_int_t kib = json_is_integer(json_object_get(w, "block_kib"))
                             ? json_integer_value(json_object_get(w, "block_kib"))
                             : 1024;
        if (json_is_true(json_object_get(w, "tree"))) {
            /* A storage instance's export/ and snapshots/ (sync_tree.h): paths, kinds,
             * modes, sizes, contents and link targets, listed here from the files. */
            char hex[65], why[512];
            uint64_t entries = 0;
            if (sync_tree_dir_digest(a->p.dir, (uint32_t)kib * 1024u, hex, &entries, why,
                                     sizeof why) != 0) {
                a->code = "DigestFailed";
                snprintf(err, errlen, "%s: %s", disk, why);
                rc = -EIO;
                break;
            }
            json_array_append_new(a->out, json_pack("{s:s, s:b, s:I, s:s}", "disk", disk, "tree", 1,
                                                    "size", (json_int_t)entries, "digest", hex));
            if ((json_int_t)entries != size || strcmp(hex, digest) != 0) {
                snprintf(err, errlen,
                         "%s differs: source %s (%lld entries), target %s (%llu entries)", disk,
                         digest, (long long)size, hex, (unsigned long long)entries);
                rc = -EIO;
                break;
            }
            continue;
        }
        if (json_object_get(have, disk) == NULL) {
            snprintf(err, errlen, "disk %s: missing on the target (source: %s, %lld bytes)", disk,
                     digest, (long long)size);
            rc = -ENOENT;
            break;
        }
        json_object_del(have, disk);
        char path[PATH_MAX + 64], hex[65];
        uint64_t got = 0;
        snprintf(path, sizeof path, "%s/%s", a->p.disks, disk);
        char why[512];
        if (sync_disk_digest(path, (uint32_t)kib * 1024u, hex, &got, why, sizeof why) != 0) {
            a->code = "DigestFailed";
            snprintf(err, errlen, "disk %s: %s", disk, why);
            rc = -EIO;
            break;
        }
        json_array_append_new(a->out, json_pack("{s:s, s:I, s:s}", "disk", disk, "size",
                                                (json_int_t)got, "digest", hex));
        if ((json_int_t)got != size || strcmp(hex, digest) != 0) {
            snprintf(err, errlen, "disk %s differs: source %s (%lld bytes), target %s (%llu bytes)",
                     disk, digest, (long long)size, hex, (unsigned long long)got);
            rc = -EIO;
            break;
        }
    }
    if (rc == 0 && json_object_size(have) > 0) {
        const char *extra = json_object_iter_key(json_object_iter(have));
        snprintf(err, errlen, "disk %s: on the target but not on the source", extra);
        rc = -EEXIST;
    }
    json_decref(have);
    return rc;
}

static void verify_done(tern_ctx *ctx, void *arg, int rc, const char *err)
{
    look_arg_t *a = arg;
    if (rc != 0) {
        tern_task_fail(ctx, a->code, "dc.migration_verify: %s", err);
        return;
    }
    tern_task_done(ctx, json_pack("{s:O}", "disks", a->out));
}

static void verify_start(tern_ctx *ctx, const json_t *args)
{
    const char *task = "dc.migration_verify";
    const dc_state_t *s = dc_agent_state(ctx, task);
    if (s == NULL)
        return;
    char msg[PATH_MAX + 512];
    const char *mig = NULL, *vm_uuid = NULL;
    const json_t *digests = json_object_get(args, "digests");
    const char *bad = migration_arg_uuid(args, "migration_uuid", &mig, msg, sizeof msg);
    if (bad == NULL)
        bad = migration_arg_uuid(args, "vm_uuid", &vm_uuid, msg, sizeof msg);
    int swapped = bad == NULL ? migration_arg_swapped(args, msg, sizeof msg) : 0;
    if (swapped < 0)
        bad = msg;
    if (bad == NULL && swapped) {
        /* Verified before the swap (switch step 3); the target may run since. */
        tern_task_done(ctx, json_pack("{s:[], s:b}", "disks", "skipped", 1));
        return;
    }
    if (bad == NULL && (!json_is_array(digests) || json_array_size(digests) == 0))
        bad = "digests: expected the source's [{disk, size, digest}], at least one";
    size_t i;
    const json_t *d;
    json_array_foreach(digests, i, d)
    {
        const char *disk = json_string_value(json_object_get(d, "disk"));
        const char *hex = json_string_value(json_object_get(d, "digest"));
        const json_t *kib = json_object_get(d, "block_kib");
        if (bad == NULL &&
            (disk == NULL || strchr(disk, '/') != NULL || disk[0] == '.' || hex == NULL ||
             strlen(hex) != 64 || !json_is_integer(json_object_get(d, "size")) ||
             (kib != NULL && (!json_is_integer(kib) || json_integer_value(kib) < 4 ||
                              json_integer_value(kib) > 65536)))) {
            snprintf(msg, sizeof msg,
                     "digests[%zu]: expected {disk: a file name, size: an integer, digest: 64 "
                     "hex digits, block_kib?: 4 to 65536}",
                     i);
            bad = msg;
        }
    }
    if (bad != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "%s: %s", task, bad);
        return;
    }
    look_arg_t *a = calloc(1, sizeof *a);
    if (a == NULL)
        abort();
    int rc = instance_paths(s->server->data_root, vm_uuid, &a->p, msg, sizeof msg);
    if (rc != 0) {
        look_arg_free(a);
        tern_task_fail(ctx, rc == -EPERM ? "PathOutsideDataRoot" : "InvalidArgument", "%s: %s",
                       task, msg);
        return;
    }
    a->want = json_deep_copy(digests);
    rc = file_job_start(ctx, s->files, a->p.dir, verify_work, a, look_arg_free, verify_done);
    if (rc != 0)
        tern_task_fail(ctx, "VerifyFailed", "%s: cannot queue the work: %s", task, strerror(-rc));
}

const tern_task_def dc_migration_verify_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_verify",
    .summary = "Compares the target's disks here with the source's digests; VerifyFailed names "
               "a disk that differs and both digests.",
    .args_schema = "{\"required\": [\"migration_uuid\", \"vm_uuid\", \"digests\"], \"properties\": "
                   "{\"migration_uuid\": {\"type\": \"string\"}, \"vm_uuid\": {\"type\": "
                   "\"string\"}, \"digests\": {\"type\": \"array\"}, "
                   "\"switch_step\": {\"type\": \"any\"}}, \"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = verify_start,
    .cancel = dc_agent_cancel,
};

/* ---- dc.migration_estimate -------------------------------------------------------- */

/* The data bytes of one file: each data extent's 1 MiB blocks that are not all zero. */
static int data_bytes(const char *path, const atomic_bool *stop, uint64_t *out, char *err,
                      size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -errno;
    }
    char *buf = malloc(EST_BLOCK);
    off_t end = lseek(fd, 0, SEEK_END);
    off_t at = 0;
    int rc = buf == NULL || end < 0 ? -ENOMEM : 0;
    while (rc == 0 && at < end) {
        off_t data = lseek(fd, at, SEEK_DATA);
        if (data < 0)
            break; /* ENXIO: no data after at */
        at = data - data % EST_BLOCK;
        ssize_t n = pread(fd, buf, EST_BLOCK, at);
        if (n <= 0) {
            rc = n < 0 ? -errno : 0;
            break;
        }
        bool zero = true;
        for (ssize_t k = 0; k < n && zero; k++)
            zero = buf[k] == 0;
        if (!zero)
            *out += (uint64_t)n;
        at += EST_BLOCK;
        if (atomic_load(stop))
            rc = -ECANCELED;
    }
    if (rc != 0)
        snprintf(err, errlen, "%s: %s", path, strerror(-rc));
    free(buf);
    close(fd);
    return rc;
}

static int estimate_work(void *arg, const atomic_bool *stop, char *err, size_t errlen)
{
    look_arg_t *a = arg;
    json_t *names = disk_names(&a->p, err, errlen);
    if (names == NULL)
        return -ENOENT;
    const char *name;
    json_t *v;
    int rc = 0;
    json_object_foreach(names, name, v)
    {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/%s", a->p.disks, name);
        if (rc == 0)
            rc = data_bytes(path, stop, &a->bytes, err, errlen);
    }
    json_decref(names);
    /* A storage instance's trees: the data its files hold, what a first pass sends
     * of them (sync_tree.h). */
    for (size_t i = 0; rc == 0 && i < sizeof sync_tree_tops / sizeof *sync_tree_tops; i++) {
        char top[PATH_MAX + 64];
        sync_tree_file_path(a->p.dir, sync_tree_tops[i], top, sizeof top);
        uint64_t bytes = 0;
        if (access(top, F_OK) != 0)
            continue;
        rc = dc_tree_data_bytes(top, &bytes, err, errlen);
        a->bytes += bytes;
    }
    return rc;
}

typedef struct estimate_arg {
    look_arg_t look;
    double mbps;
} estimate_arg_t;

static void estimate_done(tern_ctx *ctx, void *arg, int rc, const char *err)
{
    estimate_arg_t *e = arg;
    if (rc != 0) {
        tern_task_fail(ctx, rc == -ENOENT ? "InstanceNotFound" : "EstimateFailed",
                       "dc.migration_estimate: %s", err);
        return;
    }
    double rate = e->mbps * 125000.0;
    double total = (double)e->look.bytes / rate + 10.0;
    tern_task_done(ctx, json_pack("{s:I, s:I, s:I, s:f}", "size_bytes", (json_int_t)e->look.bytes,
                                  "total_seconds", (json_int_t)(total + 0.999), "downtime_seconds",
                                  (json_int_t)15, "send_mbps_limit", e->mbps));
}

static void estimate_free(void *data)
{
    free(data);
}

static void estimate_start(tern_ctx *ctx, const json_t *args)
{
    const char *task = "dc.migration_estimate";
    const dc_state_t *s = dc_agent_state(ctx, task);
    if (s == NULL)
        return;
    char msg[PATH_MAX + 512];
    const char *vm_uuid = NULL;
    const json_t *mbps = json_object_get(args, "send_mbps_limit");
    const char *bad = migration_arg_uuid(args, "vm_uuid", &vm_uuid, msg, sizeof msg);
    if (bad == NULL && (!json_is_number(mbps) || json_number_value(mbps) <= 0))
        bad = "send_mbps_limit: expected a positive number of megabits per second";
    if (bad != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "%s: %s", task, bad);
        return;
    }
    estimate_arg_t *e = calloc(1, sizeof *e);
    if (e == NULL)
        abort();
    e->mbps = json_number_value(mbps);
    int rc = instance_paths(s->server->data_root, vm_uuid, &e->look.p, msg, sizeof msg);
    if (rc != 0) {
        free(e);
        tern_task_fail(ctx, rc == -EPERM ? "PathOutsideDataRoot" : "InvalidArgument", "%s: %s",
                       task, msg);
        return;
    }
    /* A key of its own: reading never waits behind a long pass on the instance. */
    char key[PATH_MAX + 16];
    snprintf(key, sizeof key, "%s#estimate", e->look.p.dir);
    rc = file_job_start(ctx, s->files, key, estimate_work, e, estimate_free, estimate_done);
    if (rc != 0)
        tern_task_fail(ctx, "EstimateFailed", "%s: cannot queue the work: %s", task, strerror(-rc));
}

const tern_task_def dc_migration_estimate_task = {
    .size = sizeof(tern_task_def),
    .name = "migration_estimate",
    .summary = "How long migrating an instance of this server would take: its disks' data "
               "bytes, the transfer time at a rate, the downtime.",
    .args_schema = "{\"required\": [\"vm_uuid\", \"send_mbps_limit\"], \"properties\": {"
                   "\"vm_uuid\": {\"type\": \"string\"}, \"send_mbps_limit\": {\"type\": "
                   "\"number\"}}, \"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = estimate_start,
    .cancel = dc_agent_cancel,
};
