/*
 * volume_snapshot.c -- dc.volume_snapshot, on a server's agent: a shared volume's
 * snapshots and rollback on its storage instance's files (docs/VOLUMES.md "Snapshots,
 * rollback and networks"):
 *
 *   <dir>/export/                 the volume's data
 *   <dir>/snapshots/<name>/       snapshot <name>: a copy of export/ (tree_copy.h)
 *   <dir>/snapshots/<name>.part/  a snapshot being made (never whole)
 *   <dir>/export.rollback/        a rollback's new export/ being built (never whole
 *                                 while export/ is there)
 *   <dir>/export.old/             the export/ a rollback replaced, being removed
 *
 *   {"vm_uuid", "op": "create"|"delete"|"rollback", "name", "later"?: [names],
 *    "free_bytes"?}
 *   -> {"op", "name", "snapshots": [names of the whole snapshot directories, sorted],
 *       "data_bytes": what the op copied (0 for a delete or a create already done),
 *       "cloned": whether a file was a reflink}
 *
 *   create    export/ copied to snapshots/<name>.part/, synced, renamed to
 *             snapshots/<name>; refused ServerDiskFull (naming the bytes needed and
 *             free) before anything is copied when the file system has no room for
 *             the export's data, and failed ServerDiskFull with the .part removed if
 *             it fills up midway. A snapshot already whole is done.
 *   delete    snapshots/<name>/ (and any .part of it) removed. Absent is done.
 *   rollback  the share process must be stopped (the workflow's step before stops
 *             it: InvalidState otherwise). snapshots/<name>/ copied to
 *             export.rollback/, synced; then export/ renamed to export.old/ and
 *             export.rollback/ to export/ (each rename synced), export.old/ removed;
 *             then the snapshots named in `later` removed. Run again it copies again:
 *             the result is the same.
 *
 * A step killed midway: every op (and the agent's start, through
 * volume_leftovers_recover) first puts back what a killed rollback left, so
 * export/ is always either the old data or the new, whole: export/ with an
 * export.rollback/ beside it -> the partial build is removed (old data);
 * export.old/ and export.rollback/ without export/ -> the build was whole: it is
 * renamed into place (new data); export/ with export.old/ -> export.old/ removed.
 * A snapshot .part is removed (every one, by the same function) and made again.
 *
 * "free_bytes" is for tests only: it stands in for what statvfs reports free, so a
 * test can make the server look full without a file system of its own; no workflow
 * passes it.
 *
 * The work runs on the thread pool (file_work.h) under the instance directory's key,
 * so it never overlaps another step on the same instance. The instance must be a
 * storage instance (vm.json "role": "nfsvolumestorage").
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dc_fail.h"
#include "dc_state.h"
#include "disk_file.h"
#include "file_work.h"
#include "instance_dir.h"
#include "lib/args.h"
#include "tree_copy.h"
#include "volume_snapshot.h"

#define ROLE              "nfsvolumestorage"
#define SNAPSHOT_NAME_MAX 250 /* "<name>.part" fits a file name (255) */
#define LATER_MAX         1024

/* The codes a retry cannot help, beyond the dc ones. */
static const char *const fatal_codes[] = {"InvalidArgument",     "NotAnAgent",
                                          "PathOutsideDataRoot", "InstanceNotFound",
                                          "ServerDiskFull",      "VolumeSnapshotNotFound",
                                          "InvalidState",        NULL};

typedef enum { OP_CREATE, OP_DELETE, OP_ROLLBACK } snap_op_t;

typedef struct snap_job {
    snap_op_t op;
    char name[SNAPSHOT_NAME_MAX + 1];
    char **later; /* owned, n_later names */
    size_t n_later;
    bool has_free;
    uint64_t free_bytes;
    instance_paths_t p;
    char exp[PATH_MAX], snaps[PATH_MAX], rollback[PATH_MAX], old[PATH_MAX];
    const char *code; /* a literal */
    json_t *answer;   /* owned until handed to the engine */
} snap_job_t;

/* A volume snapshot's name: a volume name's rule (^[a-zA-Z0-9][a-zA-Z0-9_.-]+$),
 * at most 250 characters, never ending in ".part". */
static bool name_ok(const char *name)
{
    size_t n = name != NULL ? strlen(name) : 0;
    if (n < 2 || n > SNAPSHOT_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '_' && c != '.' && c != '-')))
            return false;
    }
    return !(n >= 5 && strcmp(name + n - 5, ".part") == 0);
}

static void job_free(void *data)
{
    snap_job_t *j = data;
    for (size_t i = 0; i < j->n_later; i++)
        free(j->later[i]);
    free(j->later);
    json_decref(j->answer);
    free(j);
}

static bool is_dir(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

static int snapshot_path(const snap_job_t *j, const char *name, bool part, char *out, char *err,
                         size_t errlen)
{
    if (snprintf(out, PATH_MAX, "%s/%s%s", j->snaps, name, part ? ".part" : "") >= PATH_MAX)
        return dc_fail(err, errlen, -ENAMETOOLONG, "%s/%s: path too long", j->snaps, name);
    return 0;
}

static int rename_synced(const char *from, const char *to, const char *dir, char *err,
                         size_t errlen)
{
    if (rename(from, to) != 0)
        return dc_fail(err, errlen, -errno, "cannot rename %s to %s: %s", from, to,
                       strerror(errno));
    return dc_tree_dir_sync(dir, err, errlen);
}

/* Every snapshots/<name>.part/ under dir removed. */
static int remove_parts(const char *dir, char *err, size_t errlen)
{
    char snaps[PATH_MAX];
    if (snprintf(snaps, sizeof snaps, "%s/snapshots", dir) >= (int)sizeof snaps)
        return dc_fail(err, errlen, -ENAMETOOLONG, "%s: path too long", dir);
    if (!is_dir(snaps))
        return 0;
    DIR *d = opendir(snaps);
    if (d == NULL)
        return dc_fail(err, errlen, -errno, "%s: %s", snaps, strerror(errno));
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        char path[PATH_MAX];
        if (n <= 5 || strcmp(de->d_name + n - 5, ".part") != 0 || de->d_name[0] == '.' ||
            snprintf(path, sizeof path, "%s/%s", snaps, de->d_name) >= (int)sizeof path)
            continue;
        rc = dc_tree_remove(path, err, errlen);
    }
    closedir(d);
    return rc;
}

/* See volume_snapshot.h. */
int volume_leftovers_recover(const char *dir, char *err, size_t errlen)
{
    int parts = remove_parts(dir, err, errlen);
    if (parts != 0)
        return parts;

    char exp[PATH_MAX], rollback[PATH_MAX], old[PATH_MAX];
    if (snprintf(exp, sizeof exp, "%s/export", dir) >= (int)sizeof exp ||
        snprintf(rollback, sizeof rollback, "%s/export.rollback", dir) >= (int)sizeof rollback ||
        snprintf(old, sizeof old, "%s/export.old", dir) >= (int)sizeof old)
        return dc_fail(err, errlen, -ENAMETOOLONG, "%s: path too long", dir);
    bool have_export = exists(exp), have_old = exists(old), have_new = exists(rollback);
    int rc = 0;
    if (!have_export && have_old && have_new)
        rc = rename_synced(rollback, exp, dir, err, errlen); /* the new data */
    else if (!have_export && have_old)
        rc = rename_synced(old, exp, dir, err, errlen); /* the old data back */
    else if (have_export && have_new)
        rc = dc_tree_remove(rollback, err, errlen); /* a build cut short */
    if (rc == 0 && exists(exp) && exists(old))
        rc = dc_tree_remove(old, err, errlen);
    return rc;
}

/* Whether the file system holding dir has room for bytes (free_bytes stands in for
 * statvfs when the test gave it). */
static int space_check(snap_job_t *j, const char *dir, uint64_t bytes, char *err, size_t errlen)
{
    int rc;
    if (j->has_free)
        rc = bytes > j->free_bytes
                 ? dc_fail(err, errlen, -ENOSPC,
                           "%s: the copy needs %llu bytes and its file system has %llu free", dir,
                           (unsigned long long)bytes, (unsigned long long)j->free_bytes)
                 : 0;
    else
        rc = dc_disk_space_check(dir, bytes, err, errlen);
    if (rc == -ENOSPC)
        j->code = "ServerDiskFull";
    return rc;
}

/* A copy of src to dst (dst absent), dst removed again when it fails. */
static int copy_whole(snap_job_t *j, const char *src, const char *dst, const atomic_bool *stop,
                      char *err, size_t errlen)
{
    uint64_t need = 0;
    int rc = dc_tree_data_bytes(src, &need, err, errlen);
    if (rc == 0)
        rc = space_check(j, j->p.dir, need, err, errlen);
    bool cloned = false;
    if (rc == 0)
        rc = dc_tree_copy(src, dst, stop, &cloned, err, errlen);
    if (rc == -ENOSPC)
        j->code = "ServerDiskFull";
    if (rc != 0) {
        char ignored[256];
        /* Nothing half-made stays. */
        if (dc_tree_remove(dst, ignored, sizeof ignored) != 0)
            strncat(err, "; and the partial copy could not be removed", errlen - strlen(err) - 1);
        return rc;
    }
    json_object_set_new(j->answer, "data_bytes", json_integer((json_int_t)need));
    json_object_set_new(j->answer, "cloned", json_boolean(cloned));
    return 0;
}

static int op_create(snap_job_t *j, const atomic_bool *stop, char *err, size_t errlen)
{
    char whole[PATH_MAX], part[PATH_MAX];
    int rc = snapshot_path(j, j->name, false, whole, err, errlen);
    if (rc == 0)
        rc = snapshot_path(j, j->name, true, part, err, errlen);
    if (rc != 0)
        return rc;
    if (is_dir(whole))
        return 0;                           /* made by an earlier run */
    rc = dc_tree_remove(part, err, errlen); /* a killed copy's */
    if (rc != 0)
        return rc;
    if (mkdir(j->snaps, 0755) != 0 && errno != EEXIST)
        return dc_fail(err, errlen, -errno, "cannot make %s: %s", j->snaps, strerror(errno));
    rc = copy_whole(j, j->exp, part, stop, err, errlen);
    if (rc == 0)
        rc = rename_synced(part, whole, j->snaps, err, errlen);
    if (rc != 0 && !exists(whole)) {
        char ignored[256];
        if (dc_tree_remove(part, ignored, sizeof ignored) != 0)
            strncat(err, "; and the partial copy could not be removed", errlen - strlen(err) - 1);
    }
    return rc;
}

static int remove_snapshot(snap_job_t *j, const char *name, char *err, size_t errlen)
{
    char whole[PATH_MAX], part[PATH_MAX];
    int rc = snapshot_path(j, name, false, whole, err, errlen);
    if (rc == 0)
        rc = snapshot_path(j, name, true, part, err, errlen);
    if (rc == 0)
        rc = dc_tree_remove(whole, err, errlen);
    if (rc == 0)
        rc = dc_tree_remove(part, err, errlen);
    return rc;
}

static int op_rollback(snap_job_t *j, const atomic_bool *stop, char *err, size_t errlen)
{
    char whole[PATH_MAX];
    int rc = snapshot_path(j, j->name, false, whole, err, errlen);
    if (rc != 0)
        return rc;
    if (!is_dir(whole)) {
        j->code = "VolumeSnapshotNotFound";
        return dc_fail(err, errlen, -ENOENT, "%s: snapshot %s has no copy on this server", whole,
                       j->name);
    }
    pid_t pid = instance_workload_pid(&j->p);
    if (pid > 0) {
        j->code = "InvalidState";
        return dc_fail(err, errlen, -EBUSY,
                       "the share process of %s (pid %d) is running: stop it before a rollback",
                       j->p.dir, (int)pid);
    }
    rc = copy_whole(j, whole, j->rollback, stop, err, errlen);
    if (rc != 0)
        return rc;
    /* The swap: export/ is whole at every instant but between the two renames, when
     * export.old/ and a whole export.rollback/ say which way recover_export goes. */
    if (exists(j->exp))
        rc = rename_synced(j->exp, j->old, j->p.dir, err, errlen);
    if (rc == 0)
        rc = rename_synced(j->rollback, j->exp, j->p.dir, err, errlen);
    if (rc == 0)
        rc = dc_tree_remove(j->old, err, errlen);
    for (size_t i = 0; rc == 0 && i < j->n_later; i++)
        rc = remove_snapshot(j, j->later[i], err, errlen);
    return rc;
}

/* The whole snapshot directories, sorted by name. */
static json_t *snapshot_names(const snap_job_t *j)
{
    json_t *names = json_array();
    DIR *d = opendir(j->snaps);
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
        char path[PATH_MAX];
        if (!name_ok(de->d_name) ||
            snprintf(path, sizeof path, "%s/%s", j->snaps, de->d_name) >= (int)sizeof path ||
            !is_dir(path))
            continue;
        json_array_append_new(names, json_string(de->d_name));
    }
    if (d != NULL)
        closedir(d);
    size_t n = json_array_size(names);
    /* Insertion sort: a volume holds few snapshots (max_snapshots_per_volume). */
    for (size_t a = 1; a < n; a++)
        for (size_t b = a; b > 0 && strcmp(json_string_value(json_array_get(names, b - 1)),
                                           json_string_value(json_array_get(names, b))) > 0;
             b--) {
            json_t *x = json_incref(json_array_get(names, b - 1));
            json_array_set(names, b - 1, json_array_get(names, b));
            json_array_set_new(names, b, x);
        }
    return names;
}

static int job_work(void *data, const atomic_bool *stop, char *err, size_t errlen)
{
    snap_job_t *j = data;
    j->code = "VolumeFileFailed";
    json_t *vm = NULL;
    int rc = instance_json_read(j->p.vm_json, &vm, err, errlen);
    if (rc == -ENOENT) {
        j->code = "InstanceNotFound";
        return dc_fail(err, errlen, rc, "no instance %s on this server (%s)", j->p.dir,
                       j->p.vm_json);
    }
    if (rc != 0)
        return rc;
    const char *role = json_string_value(json_object_get(vm, "role"));
    bool storage = role != NULL && strcmp(role, ROLE) == 0;
    json_decref(vm);
    if (!storage) {
        j->code = "InvalidArgument";
        return dc_fail(err, errlen, -EINVAL,
                       "vm_uuid: %s is not a storage instance (vm.json role is not " ROLE ")",
                       j->p.dir);
    }
    struct stat st;
    if (lstat(j->snaps, &st) == 0 && !S_ISDIR(st.st_mode)) {
        j->code = "PathOutsideDataRoot";
        return dc_fail(err, errlen, -EPERM, "%s is not a directory of its own: refused", j->snaps);
    }
    rc = volume_leftovers_recover(j->p.dir, err, errlen);
    if (rc == 0 && (lstat(j->exp, &st) != 0 || !S_ISDIR(st.st_mode))) {
        j->code = "PathOutsideDataRoot";
        rc = dc_fail(err, errlen, -EPERM, "%s is missing or not a directory of its own", j->exp);
    }
    if (rc != 0)
        return rc;
    json_object_set_new(j->answer, "data_bytes", json_integer(0));
    json_object_set_new(j->answer, "cloned", json_false());
    if (j->op == OP_CREATE)
        rc = op_create(j, stop, err, errlen);
    else if (j->op == OP_DELETE)
        rc = remove_snapshot(j, j->name, err, errlen);
    else
        rc = op_rollback(j, stop, err, errlen);
    if (rc == 0)
        json_object_set_new(j->answer, "snapshots", snapshot_names(j));
    return rc;
}

static void job_done(tern_ctx *ctx, void *data, int rc, const char *err)
{
    snap_job_t *j = data;
    if (rc != 0) {
        tern_task_fail(ctx, j->code, "dc.volume_snapshot: %s", err);
        return;
    }
    json_t *answer = j->answer;
    j->answer = NULL;
    tern_task_done(ctx, answer);
}

/* The arguments checked into j: NULL, or the message naming the bad one. */
static const char *read_args(const json_t *args, snap_job_t *j, const char **vm_uuid, char *msg,
                             size_t msglen)
{
    const char *op = NULL, *name = NULL;
    const char *bad = task_args_string(args, "vm_uuid", vm_uuid, NULL, msg, msglen);
    if (bad == NULL)
        bad = task_args_string(args, "op", &op, NULL, msg, msglen);
    if (bad == NULL)
        bad = task_args_string(args, "name", &name, NULL, msg, msglen);
    if (bad == NULL)
        bad = task_args_uint(args, "free_bytes", UINT64_MAX, &j->free_bytes, msg, msglen);
    if (bad != NULL)
        return bad;
    if (*vm_uuid == NULL || !dc_uuid_ok(*vm_uuid))
        return "vm_uuid: expected a lowercase UUID";
    if (op != NULL && strcmp(op, "create") == 0)
        j->op = OP_CREATE;
    else if (op != NULL && strcmp(op, "delete") == 0)
        j->op = OP_DELETE;
    else if (op != NULL && strcmp(op, "rollback") == 0)
        j->op = OP_ROLLBACK;
    else
        return "op: expected create, delete or rollback";
    if (!name_ok(name))
        return "name: expected a snapshot name (^[a-zA-Z0-9][a-zA-Z0-9_.-]+$, at most 250 "
               "characters, not ending in .part)";
    snprintf(j->name, sizeof j->name, "%s", name);
    const json_t *f = json_object_get(args, "free_bytes");
    j->has_free = f != NULL && !json_is_null(f);
    const json_t *later = json_object_get(args, "later");
    if (later == NULL || json_is_null(later))
        return NULL;
    if (!json_is_array(later) || json_array_size(later) > LATER_MAX)
        return "later: expected an array of snapshot names";
    if (j->op != OP_ROLLBACK && json_array_size(later) > 0)
        return "later: only a rollback removes later snapshots";
    j->later = calloc(json_array_size(later) + 1, sizeof *j->later);
    if (j->later == NULL)
        return "later: out of memory";
    size_t i;
    const json_t *s;
    json_array_foreach(later, i, s)
    {
        if (!name_ok(json_string_value(s))) {
            snprintf(msg, msglen, "later[%zu]: expected a snapshot name", i);
            return msg;
        }
        if (strcmp(json_string_value(s), j->name) == 0) {
            snprintf(msg, msglen, "later[%zu]: %s is the snapshot rolled back to", i, j->name);
            return msg;
        }
        j->later[j->n_later] = strdup(json_string_value(s));
        if (j->later[j->n_later] == NULL)
            return "later: out of memory";
        j->n_later++;
    }
    return NULL;
}

static void snapshot_start(tern_ctx *ctx, const json_t *args)
{
    const dc_state_t *s = dc_agent_state(ctx, "dc.volume_snapshot");
    if (s == NULL)
        return;
    snap_job_t *j = calloc(1, sizeof *j);
    if (j == NULL) {
        tern_task_fail(ctx, "OutOfMemory", "dc.volume_snapshot: out of memory");
        return;
    }
    char msg[1024];
    const char *vm_uuid = NULL;
    const char *bad = read_args(args, j, &vm_uuid, msg, sizeof msg);
    if (bad != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "dc.volume_snapshot: %s", bad);
        job_free(j);
        return;
    }
    int rc = instance_paths(s->server->data_root, vm_uuid, &j->p, msg, sizeof msg);
    if (rc == 0 && (snprintf(j->exp, PATH_MAX, "%s/export", j->p.dir) >= PATH_MAX ||
                    snprintf(j->snaps, PATH_MAX, "%s/snapshots", j->p.dir) >= PATH_MAX ||
                    snprintf(j->rollback, PATH_MAX, "%s/export.rollback", j->p.dir) >= PATH_MAX ||
                    snprintf(j->old, PATH_MAX, "%s/export.old", j->p.dir) >= PATH_MAX))
        rc = dc_fail(msg, sizeof msg, -ENAMETOOLONG, "%s: path too long", j->p.dir);
    j->answer = json_pack("{s:s, s:s}", "op",
                          j->op == OP_CREATE   ? "create"
                          : j->op == OP_DELETE ? "delete"
                                               : "rollback",
                          "name", j->name);
    if (rc == 0 && j->answer == NULL)
        rc = dc_fail(msg, sizeof msg, -ENOMEM, "out of memory");
    if (rc != 0) {
        tern_task_fail(ctx, rc == -EPERM ? "PathOutsideDataRoot" : "InvalidArgument",
                       "dc.volume_snapshot: %s", msg);
        job_free(j);
        return;
    }
    /* The instance directory's key: one step at a time per instance, and none beside
     * its create or destroy. */
    char key[PATH_MAX];
    snprintf(key, sizeof key, "%s", j->p.dir);
    rc = file_job_start(ctx, s->files, key, job_work, j, job_free, job_done);
    if (rc != 0)
        tern_task_fail(ctx, "VolumeFileFailed",
                       "dc.volume_snapshot: cannot queue the work on %s: %s", key, strerror(-rc));
}

const tern_task_def dc_volume_snapshot_agent_task = {
    .size = sizeof(tern_task_def),
    .name = "volume_snapshot",
    .summary = "A shared volume's snapshot made, deleted or rolled back to on its storage "
               "instance's files, idempotently; a kill midway leaves the old or the new data.",
    .args_schema = "{\"required\": [\"vm_uuid\", \"op\", \"name\"], \"properties\": {\"vm_uuid\": "
                   "{\"type\": \"string\"}, \"op\": {\"type\": \"string\"}, \"name\": {\"type\": "
                   "\"string\"}, \"later\": {\"type\": \"any\"}, \"free_bytes\": {\"type\": "
                   "\"any\"}}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = snapshot_start,
    .cancel = dc_agent_cancel,
};
