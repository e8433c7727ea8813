/*
 * vm_disks.c -- an instance's disks and snapshots on the agent (vm_disks.h). Owns
 * v->vm; every json_t made here is owned by the function that made it until it is
 * set into v->vm or handed out.
 */
#include "vm_disks.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "disk_file.h"
#include "snapshot_space.h"
#include "sparse.h"
#include "dc_fail.h"

int vm_disks_slot_function(const char *slot)
{
    if (slot == NULL || strncmp(slot, "0:4:", 4) != 0 || slot[4] < '0' || slot[4] > '7' ||
        slot[5] != '\0')
        return -1;
    return slot[4] - '0';
}

bool vm_disks_snapshot_name_ok(const char *name)
{
    size_t n = name != NULL ? strlen(name) : 0;
    if (n < 1 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '_' && c != '.' && c != '-')))
            return false;
    }
    return !(n >= 5 && strcmp(name + n - 5, ".part") == 0);
}

void vm_disks_now(char *out, size_t outlen)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char secs[32];
    strftime(secs, sizeof secs, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, outlen, "%s.%03ldZ", secs, ts.tv_nsec / 1000000L);
}

int vm_disks_open(const char *root, const char *vm_uuid, vm_disks_t *v, char *err, size_t errlen)
{
    memset(v, 0, sizeof *v);
    int rc = instance_paths(root, vm_uuid, &v->p, err, errlen);
    if (rc != 0)
        return rc;
    snprintf(v->snapshots, sizeof v->snapshots, "%s/snapshots", v->p.dir);
    struct stat st;
    if (lstat(v->snapshots, &st) == 0 && !S_ISDIR(st.st_mode))
        return dc_fail(err, errlen, -EPERM, "%s is not a directory of its own: refused",
                       v->snapshots);
    rc = instance_json_read(v->p.vm_json, &v->vm, err, errlen);
    if (rc == 0 && !json_is_array(json_object_get(v->vm, "disks"))) {
        json_decref(v->vm);
        v->vm = NULL;
        return dc_fail(err, errlen, -EINVAL, "%s: \"disks\" is not an array", v->p.vm_json);
    }
    if (rc == 0)
        v->as_read = json_deep_copy(v->vm);
    return rc;
}

void vm_disks_close(vm_disks_t *v)
{
    json_decref(v->vm);
    json_decref(v->as_read);
    v->vm = NULL;
    v->as_read = NULL;
}

void vm_disks_file(const vm_disks_t *v, int function, char *out)
{
    /* A path too long comes out empty, which every file call refuses (ENOENT). */
    if (snprintf(out, PATH_MAX, "%s/disk%d.img", v->p.disks, function) >= PATH_MAX)
        out[0] = '\0';
}

void vm_disks_copy_file(const char *snapshot_dir, int function, char *out)
{
    if (snprintf(out, PATH_MAX, "%s/disk%d.img", snapshot_dir, function) >= PATH_MAX)
        out[0] = '\0';
}

void vm_disks_snapshot_dir(const vm_disks_t *v, const char *name, bool part, char *out)
{
    /* A path too long comes out empty, which every file call refuses (ENOENT). */
    if (snprintf(out, PATH_MAX, "%s/%s%s", v->snapshots, name, part ? ".part" : "") >= PATH_MAX)
        out[0] = '\0';
}

json_t *vm_disks_find(const vm_disks_t *v, const char *id, int function)
{
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(v->vm, "disks"), i, d)
    {
        const char *did = json_string_value(json_object_get(d, "id"));
        int f = vm_disks_slot_function(json_string_value(json_object_get(d, "pci_slot")));
        if ((id == NULL || (did != NULL && strcmp(did, id) == 0)) &&
            (function < 0 || f == function))
            return d;
    }
    return NULL;
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    int rc = type == FTW_DP ? rmdir(path) : unlink(path);
    return rc != 0 && errno != ENOENT ? -1 : 0;
}

int vm_disks_remove_snapshot_dir(const vm_disks_t *v, const char *path, char *err, size_t errlen)
{
    size_t n = strlen(v->snapshots);
    const char *name = path + n + 1;
    if (strncmp(path, v->snapshots, n) != 0 || path[n] != '/' || strchr(name, '/') != NULL ||
        name[0] == '\0' || name[0] == '.')
        return dc_fail(err, errlen, -EPERM, "%s is not a snapshot directory of %s: refused", path,
                       v->p.dir);
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : dc_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return dc_fail(err, errlen, -EPERM, "%s is not a directory: refused", path);
    /* FTW_PHYS: a symlink inside is removed, never followed; FTW_MOUNT: never leaves
     * the data root's file system. */
    if (nftw(path, remove_one, 8, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) != 0)
        return dc_fail(err, errlen, -errno, "cannot remove %s: %s", path, strerror(errno));
    return dc_disk_dir_sync(path, err, errlen);
}

int vm_disks_remove_parts(const vm_disks_t *v, char *err, size_t errlen)
{
    int rc = 0;
    DIR *d = opendir(v->p.disks);
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        if (n > 5 && strcmp(de->d_name + n - 5, ".part") == 0 &&
            unlinkat(dirfd(d), de->d_name, 0) != 0 && errno != ENOENT && rc == 0)
            rc = dc_fail(err, errlen, -errno, "cannot remove %s/%s: %s", v->p.disks, de->d_name,
                         strerror(errno));
    }
    if (d != NULL)
        closedir(d);
    d = opendir(v->snapshots);
    while (d != NULL && (de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        if (n <= 5 || strcmp(de->d_name + n - 5, ".part") != 0 || de->d_name[0] == '.')
            continue;
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", v->snapshots, de->d_name) >= (int)sizeof path)
            continue;
        int e = vm_disks_remove_snapshot_dir(v, path, err, errlen);
        if (rc == 0)
            rc = e;
    }
    if (d != NULL)
        closedir(d);
    return rc;
}

/* ---- making vm.json agree with the files ------------------------------------------ */

static int by_function(const void *a, const void *b)
{
    const json_t *da = *(json_t *const *)a, *db = *(json_t *const *)b;
    return vm_disks_slot_function(json_string_value(json_object_get(da, "pci_slot"))) -
           vm_disks_slot_function(json_string_value(json_object_get(db, "pci_slot")));
}

/* The disks whose files exist, each with its file's size and its path, by PCI
 * function (new reference in *out). */
static int synced_disks(const vm_disks_t *v, json_t **out, char *err, size_t errlen)
{
    json_t *disks = json_object_get(v->vm, "disks");
    json_t *kept[VM_DISKS_MAX];
    size_t n = 0;
    size_t i;
    json_t *d;
    json_array_foreach(disks, i, d)
    {
        int f = vm_disks_slot_function(json_string_value(json_object_get(d, "pci_slot")));
        int rc = 0;
        if (f < 0 || n == VM_DISKS_MAX)
            rc = dc_fail(err, errlen, -EINVAL, "%s: disks[%zu]: pci_slot is not 0:4:0 to 0:4:7",
                         v->p.vm_json, i);
        char path[PATH_MAX];
        uint64_t mib = 0;
        if (rc == 0) {
            vm_disks_file(v, f, path);
            rc = dc_disk_file_size(path, &mib, err, errlen);
        }
        if (rc == -ENOENT)
            continue; /* unlinked by a delete that ended before vm.json was written */
        if (rc != 0) {
            for (size_t k = 0; k < n; k++)
                json_decref(kept[k]);
            return rc;
        }
        json_t *copy = json_deep_copy(d);
        json_object_set_new(copy, "size", json_integer((json_int_t)mib));
        json_object_set_new(copy, "path", json_string(path));
        kept[n++] = copy;
    }
    qsort(kept, n, sizeof kept[0], by_function);
    *out = json_array();
    for (size_t k = 0; k < n; k++)
        json_array_append_new(*out, kept[k]);
    return 0;
}

static int by_created(const void *a, const void *b)
{
    const json_t *sa = *(json_t *const *)a, *sb = *(json_t *const *)b;
    const char *ta = json_string_value(json_object_get(sa, "created_timestamp"));
    const char *tb = json_string_value(json_object_get(sb, "created_timestamp"));
    int c = strcmp(ta != NULL ? ta : "", tb != NULL ? tb : "");
    if (c != 0)
        return c;
    /* Equal times keep vm.json's order (the index it was appended at). */
    return (int)json_integer_value(json_object_get(sa, "#")) -
           (int)json_integer_value(json_object_get(sb, "#"));
}

static const json_t *listed_snapshot(const json_t *list, const char *name)
{
    size_t i;
    const json_t *s;
    json_array_foreach(list, i, s)
    {
        const char *n = json_string_value(json_object_get(s, "name"));
        if (n != NULL && strcmp(n, name) == 0)
            return s;
    }
    return NULL;
}

/* The whole snapshot directories, oldest first (new reference in *out); .part ones
 * (what a copy killed midway left) removed. A whole directory vm.json does not list
 * (made by a step killed before it wrote vm.json) is listed with its directory's
 * time. */
static int synced_snapshots(const vm_disks_t *v, json_t **out, char *err, size_t errlen)
{
    const json_t *listed = json_object_get(v->vm, "snapshots");
    json_t *found = json_array();
    DIR *d = opendir(v->snapshots);
    if (d == NULL && errno != ENOENT) {
        json_decref(found);
        return dc_fail(err, errlen, -errno, "%s: %s", v->snapshots, strerror(errno));
    }
    struct dirent *de;
    int rc = 0;
    while (d != NULL && rc == 0 && (de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        size_t n = strlen(name);
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
            continue;
        char path[PATH_MAX];
        if (n > 5 && strcmp(name + n - 5, ".part") == 0) {
            vm_disks_snapshot_dir(v, name, false, path);
            rc = vm_disks_remove_snapshot_dir(v, path, err, errlen);
            continue;
        }
        if (!vm_disks_snapshot_name_ok(name))
            continue; /* not a snapshot this agent made */
        vm_disks_snapshot_dir(v, name, false, path);
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        const json_t *had = listed_snapshot(listed, name);
        json_t *s;
        if (had != NULL) {
            s = json_deep_copy(had);
        } else {
            char when[64], secs[32];
            struct tm tm;
            gmtime_r(&st.st_mtim.tv_sec, &tm);
            strftime(secs, sizeof secs, "%Y-%m-%dT%H:%M:%S", &tm);
            snprintf(when, sizeof when, "%s.%03ldZ", secs, st.st_mtim.tv_nsec / 1000000L);
            s = json_pack("{s:s, s:s}", "name", name, "created_timestamp", when);
        }
        size_t at = json_array_size(listed);
        for (size_t i = 0; had != NULL && i < json_array_size(listed); i++)
            if (json_array_get(listed, i) == had)
                at = i;
        json_object_set_new(s, "#", json_integer((json_int_t)at));
        json_array_append_new(found, s);
    }
    if (d != NULL)
        closedir(d);
    if (rc != 0) {
        json_decref(found);
        return rc;
    }
    size_t n = json_array_size(found);
    json_t **items = calloc(n + 1, sizeof *items);
    if (items == NULL)
        abort();
    for (size_t i = 0; i < n; i++)
        items[i] = json_array_get(found, i);
    qsort(items, n, sizeof items[0], by_created);
    *out = json_array();
    for (size_t i = 0; i < n; i++) {
        json_object_del(items[i], "#");
        json_array_append(*out, items[i]);
    }
    free(items);
    json_decref(found);
    return 0;
}

int vm_disks_sync(vm_disks_t *v, char *err, size_t errlen)
{
    json_t *disks = NULL, *snapshots = NULL;
    int rc = synced_disks(v, &disks, err, errlen);
    if (rc == 0)
        rc = synced_snapshots(v, &snapshots, err, errlen);
    if (rc != 0) {
        json_decref(disks);
        return rc;
    }
    const json_t *old_snapshots = json_object_get(v->as_read, "snapshots");
    bool same = json_equal(disks, json_object_get(v->as_read, "disks")) &&
                (old_snapshots != NULL ? json_equal(snapshots, old_snapshots)
                                       : json_array_size(snapshots) == 0);
    json_object_set_new(v->vm, "disks", disks);
    json_object_set_new(v->vm, "snapshots", snapshots);
    if (same)
        return 0;
    rc = instance_json_write(v->p.vm_json, v->vm, err, errlen);
    if (rc == 0) {
        json_decref(v->as_read);
        v->as_read = json_deep_copy(v->vm);
    }
    return rc;
}

/* ---- measuring ---------------------------------------------------------------------- */

int vm_disks_measure(const vm_disks_t *v, const atomic_bool *stop, json_t **out, char *err,
                     size_t errlen)
{
    const json_t *snapshots = json_object_get(v->vm, "snapshots");
    size_t nsnap = json_array_size(snapshots);
    char(*copies)[PATH_MAX] = calloc(nsnap + 1, PATH_MAX);
    const char **copy_of = calloc(nsnap + 1, sizeof *copy_of);
    if (copies == NULL || copy_of == NULL)
        abort();
    json_t *answer_disks = json_array(), *names = json_array();
    int rc = 0;
    size_t i;
    const json_t *s;
    json_array_foreach(snapshots, i, s) json_array_append(names, json_object_get(s, "name"));
    const json_t *d;
    json_array_foreach(json_object_get(v->vm, "disks"), i, d)
    {
        const char *slot = json_string_value(json_object_get(d, "pci_slot"));
        int f = vm_disks_slot_function(slot);
        char path[PATH_MAX];
        vm_disks_file(v, f, path);
        uint64_t mib = 0, data = 0, snap = 0;
        rc = dc_disk_file_size(path, &mib, err, errlen);
        if (rc == 0 && (rc = dc_sparse_data_bytes(path, &data)) != 0)
            dc_fail(err, errlen, rc, "%s: cannot find its data extents: %s", path, strerror(-rc));
        for (size_t k = 0; rc == 0 && k < nsnap; k++) {
            const char *name =
                json_string_value(json_object_get(json_array_get(snapshots, k), "name"));
            char dir[PATH_MAX];
            vm_disks_snapshot_dir(v, name, false, dir);
            vm_disks_copy_file(dir, f, copies[k]);
            /* A snapshot taken before this disk was added has no copy of it. */
            copy_of[k] = access(copies[k], F_OK) == 0 ? copies[k] : NULL;
        }
        if (rc == 0)
            rc = dc_snapshot_bytes(copy_of, nsnap, path, &snap, stop, err, errlen);
        if (rc != 0)
            break;
        json_array_append_new(answer_disks,
                              json_pack("{s:O, s:s, s:s, s:I, s:I, s:I, s:I}", "id",
                                        json_object_get(d, "id") ?: json_null(), "pci_slot", slot,
                                        "path", path, "size", (json_int_t)mib, "data_bytes",
                                        (json_int_t)data, "snapshot_bytes", (json_int_t)snap,
                                        "snapshot_size", (json_int_t)dc_snapshot_size_mib(snap)));
    }
    free(copies);
    free(copy_of);
    if (rc != 0) {
        json_decref(answer_disks);
        json_decref(names);
        return rc;
    }
    *out = json_pack("{s:o, s:o}", "disks", answer_disks, "snapshots", names);
    return 0;
}
