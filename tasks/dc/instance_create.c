/*
 * instance_create.c -- dc.instance_create, on a server's agent: an instance's files.
 *
 *   <data_root>/<vm_uuid>/disks/disk0.img   the boot disk: a sparse copy of the
 *                                           server's image (dc.image_ensure made it),
 *                                           grown to the disk's size
 *   <data_root>/<vm_uuid>/disks/diskN.img   data disks: sparse files of their size
 *                                           (ftruncate: nothing written)
 *   (N the PCI function of the disk's slot 0:4:N, so a disk's file keeps its name)
 *   <data_root>/<vm_uuid>/mounts/<mountpoint>  a symlink to each mounted volume's
 *                                           export (instance_mounts.h)
 *   <data_root>/<vm_uuid>/vm.json           the instance, written last
 *
 * Every file is made as "<file>.part" and renamed, and
 * vm.json is renamed into place last, so an instance with a vm.json is complete: run
 * again, the task answers what that vm.json says (nothing made twice), or fails
 * InstanceConflict when it holds another image or other disks. A directory
 * without vm.json is what an attempt killed midway left: it is removed and made again.
 * The work runs on the thread pool; a cancelled attempt removes what it made.
 *
 *   {"vm_uuid", "image_uuid", "disks": [{"size" (MiB), "boot"?, "image_uuid"?}, ...],
 *    "alias"?, "owner_uuid"?, "brand"?, "ram"?, "vcpus"?, "nics"?, "customer_metadata"?,
 *    "autoboot"?, "volumes"?: [{"name", "volume_uuid", "mountpoint", "mode", "type",
 *    "nfsvolume", "export_path"}]}
 *   -> {"disks": [{"path", "size", "pci_slot", "boot", "image_uuid"?}], "created": bool}
 *
 * disks[0] is the boot disk, the only one that boots (up to 8 disks); its size is at
 * least the image's.
 * volumes (dc.volumes_wait's answer) are written into vm.json with
 * internal_metadata["sdc:volumes"], and mounted; an instance found complete with other
 * volumes is InstanceConflict.
 * customer_metadata["lab:workload"] must name a workload of the lab (InvalidArgument
 * otherwise, before anything is made). The server's image missing is ImageFileMissing
 * naming the file, with nothing left behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dc_state.h"
#include "file_work.h"
#include "instance_dir.h"
#include "instance_mounts.h"
#include "instance_volumes.h"
#include "lib/args.h"
#include "sparse.h"
#include "vm_disks.h"

#define MIB          (1024ull * 1024ull)
#define DISK_MAX_MIB (64ull * 1024ull * 1024ull) /* 64 TiB: far beyond any package */
#define DISKS_MAX    VM_DISKS_MAX

typedef struct create_arg {
    char root[PATH_MAX]; /* the data root */
    instance_paths_t p;
    char image[PATH_MAX]; /* the server's image file */
    json_t *vm;           /* the vm.json to write (owned) */
    json_t *existing;     /* the vm.json found complete (owned), or NULL */
    const char *code;     /* the failure's code, a literal */
} create_arg_t;

static void create_arg_free(void *data)
{
    create_arg_t *a = data;
    json_decref(a->vm);
    json_decref(a->existing);
    free(a);
}

/* A sparse file of `bytes` at path, through "<path>.part". */
static int make_sparse(const char *path, uint64_t bytes, char *err, size_t errlen)
{
    char part[PATH_MAX];
    snprintf(part, sizeof part, "%s.part", path);
    int fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", part, strerror(e));
        return -e;
    }
    int rc = 0;
    if (ftruncate(fd, (off_t)bytes) != 0 || fsync(fd) != 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: cannot set its size to %llu bytes: %s", part,
                 (unsigned long long)bytes, strerror(errno));
    }
    if (close(fd) != 0 && rc == 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: close: %s", part, strerror(errno));
    }
    if (rc == 0 && rename(part, path) != 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot rename %s to %s: %s", part, path, strerror(errno));
    }
    if (rc != 0)
        unlink(part); /* may be gone: nothing to report */
    return rc;
}

static int make_files(create_arg_t *a, const atomic_bool *stop, char *err, size_t errlen)
{
    if (mkdir(a->p.dir, 0755) != 0 || mkdir(a->p.disks, 0755) != 0) {
        int e = errno;
        snprintf(err, errlen, "cannot make %s: %s", a->p.dir, strerror(e));
        return -e;
    }
    const json_t *disks = json_object_get(a->vm, "disks");
    size_t i;
    const json_t *d;
    json_array_foreach(disks, i, d)
    {
        const char *path = json_string_value(json_object_get(d, "path"));
        uint64_t bytes = (uint64_t)json_integer_value(json_object_get(d, "size")) * MIB;
        int rc = json_is_true(json_object_get(d, "boot"))
                     ? dc_sparse_copy_stoppable(a->image, path, bytes, stop, err, errlen)
                     : make_sparse(path, bytes, err, errlen);
        if (rc != 0)
            return rc;
        if (atomic_load(stop)) {
            snprintf(err, errlen, "%s: stopped", a->p.dir);
            return -ECANCELED;
        }
    }
    int rc = instance_mounts_make(&a->p, json_object_get(a->vm, "volumes"), err, errlen);
    if (rc != 0)
        return rc;
    return instance_json_write(a->p.vm_json, a->vm, err, errlen);
}

/* A complete instance answers a create asking for it again (the same image, the same
 * disks); one that differs is another instance under the same uuid, never taken for
 * the one asked: InstanceConflict. */
static int same_instance(create_arg_t *a, char *err, size_t errlen)
{
    const json_t *want = json_object_get(a->vm, "disks");
    const json_t *have = json_object_get(a->existing, "disks");
    const char *img_want = json_string_value(json_object_get(a->vm, "image_uuid"));
    const char *img_have = json_string_value(json_object_get(a->existing, "image_uuid"));
    bool same = img_have != NULL && strcmp(img_want, img_have) == 0 &&
                json_array_size(want) == json_array_size(have);
    for (size_t i = 0; same && i < json_array_size(want); i++)
        same = json_equal(json_object_get(json_array_get(want, i), "size"),
                          json_object_get(json_array_get(have, i), "size")) &&
               json_equal(json_object_get(json_array_get(want, i), "pci_slot"),
                          json_object_get(json_array_get(have, i), "pci_slot"));
    const json_t *vols_want = json_object_get(a->vm, "volumes");
    const json_t *vols_have = json_object_get(a->existing, "volumes");
    if (same && json_array_size(vols_want) + json_array_size(vols_have) > 0 &&
        !json_equal(vols_want, vols_have)) {
        a->code = "InstanceConflict";
        snprintf(err, errlen, "%s holds instance %s mounting other volumes than the ones asked for",
                 a->p.dir, json_string_value(json_object_get(a->existing, "uuid")) ?: "?");
        return -EEXIST;
    }
    if (same) /* its mounts may have been removed since: made again */
        return instance_mounts_make(&a->p, vols_have, err, errlen);
    a->code = "InstanceConflict";
    char *text = json_dumps(have, JSON_COMPACT);
    snprintf(err, errlen,
             "%s holds instance %s of image %s with disks %s, not the one asked for (image %s)",
             a->p.dir, json_string_value(json_object_get(a->existing, "uuid")) ?: "?",
             img_have != NULL ? img_have : "?", text != NULL ? text : "?", img_want);
    free(text);
    return -EEXIST;
}

static int create_work(void *data, const atomic_bool *stop, char *err, size_t errlen)
{
    create_arg_t *a = data;
    a->code = "InstanceCreateFailed";
    if (instance_json_read(a->p.vm_json, &a->existing, err, errlen) == 0)
        return same_instance(a, err, errlen); /* complete: made by an earlier attempt */
    /* Partial (no vm.json): what an attempt killed midway left, made again. */
    int rc = instance_tree_remove(a->root, a->p.dir, err, errlen);
    if (rc != 0)
        return rc;
    struct stat st;
    if (stat(a->image, &st) != 0) {
        int e = errno;
        a->code = "ImageFileMissing";
        snprintf(err, errlen, "the server's image file %s: %s (dc.image_ensure makes it)", a->image,
                 strerror(e));
        return -e;
    }
    const json_t *boot = NULL;
    size_t i;
    const json_t *d;
    json_array_foreach(json_object_get(a->vm, "disks"), i,
                       d) if (json_is_true(json_object_get(d, "boot"))) boot = d;
    uint64_t boot_bytes = (uint64_t)json_integer_value(json_object_get(boot, "size")) * MIB;
    if ((uint64_t)st.st_size > boot_bytes) {
        a->code = "InvalidArgument";
        snprintf(err, errlen, "disks[0].size: %llu MiB is smaller than the image %s (%lld bytes)",
                 (unsigned long long)(boot_bytes / MIB), a->image, (long long)st.st_size);
        return -EINVAL;
    }
    rc = make_files(a, stop, err, errlen);
    if (rc != 0) {
        char ignored[256];
        /* Nothing half-made stays: without vm.json it would be redone anyway, but a
         * failed create leaves the data root as it found it. */
        if (instance_tree_remove(a->root, a->p.dir, ignored, sizeof ignored) != 0)
            strncat(err, "; and what was made could not be removed", errlen - strlen(err) - 1);
    }
    return rc;
}

static void create_done(tern_ctx *ctx, void *data, int rc, const char *err)
{
    create_arg_t *a = data;
    if (rc != 0) {
        tern_task_fail(ctx, a->code, "dc.instance_create: %s", err);
        return;
    }
    const json_t *vm = a->existing != NULL ? a->existing : a->vm;
    json_t *disks = json_object_get(vm, "disks");
    tern_task_done(ctx, json_pack("{s:O, s:b}", "disks", disks != NULL ? disks : json_null(),
                                  "created", a->existing == NULL));
}

static int by_function(const void *a, const void *b)
{
    const json_t *da = *(json_t *const *)a, *db = *(json_t *const *)b;
    return vm_disks_slot_function(json_string_value(json_object_get(da, "pci_slot"))) -
           vm_disks_slot_function(json_string_value(json_object_get(db, "pci_slot")));
}

/* The disks of the instance (new reference), each with its path and PCI slot, by PCI
 * function, or NULL with msg naming the fault. */
static json_t *plan_disks(const json_t *args, const instance_paths_t *p, const char *image_uuid,
                          char *msg, size_t msglen)
{
    const json_t *disks = json_object_get(args, "disks");
    if (!json_is_array(disks) || json_array_size(disks) == 0 ||
        json_array_size(disks) > DISKS_MAX) {
        snprintf(msg, msglen, "disks: expected an array of 1 to %d disks", DISKS_MAX);
        return NULL;
    }
    json_t *planned[DISKS_MAX];
    size_t by_slot[DISKS_MAX]; /* the index of the disk in each function, +1 */
    memset(by_slot, 0, sizeof by_slot);
    size_t n = 0;
    size_t i;
    const json_t *d;
    json_array_foreach(disks, i, d)
    {
        const json_t *size = json_object_get(d, "size");
        const json_t *boot = json_object_get(d, "boot");
        const json_t *id = json_object_get(d, "id");
        const json_t *slot = json_object_get(d, "pci_slot");
        const json_t *img = json_object_get(d, "image");
        if (img == NULL || json_is_null(img))
            img = json_object_get(d, "image_uuid");
        const char *img_key = json_object_get(d, "image") != NULL ? "image" : "image_uuid";
        int f = slot == NULL || json_is_null(slot)
                    ? (int)i
                    : vm_disks_slot_function(json_string_value(slot));
        char fault[160] = "";
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)d, key, v)
        {
            if (strcmp(key, "size") != 0 && strcmp(key, "boot") != 0 && strcmp(key, "id") != 0 &&
                strcmp(key, "pci_slot") != 0 && strcmp(key, "image") != 0 &&
                strcmp(key, "image_uuid") != 0 && fault[0] == '\0')
                snprintf(fault, sizeof fault,
                         "%s: unknown (expected id, boot, image, size, pci_slot)", key);
        }
        if (!json_is_object(d))
            snprintf(fault, sizeof fault, "expected an object");
        else if (fault[0] != '\0')
            ;
        else if (!json_is_integer(size) || json_integer_value(size) < 1 ||
                 (uint64_t)json_integer_value(size) > DISK_MAX_MIB)
            snprintf(fault, sizeof fault, "size: expected an integer of MiB, 1 to 67108864");
        else if (boot != NULL && !json_is_boolean(boot))
            snprintf(fault, sizeof fault, "boot: expected a boolean");
        else if (i == 0 && boot != NULL && !json_is_true(boot))
            snprintf(fault, sizeof fault, "boot: the first disk is the boot disk");
        else if (i > 0 && json_is_true(boot))
            snprintf(fault, sizeof fault, "boot: only the first disk boots");
        else if (img != NULL && !json_is_null(img) &&
                 (i > 0 || !json_is_string(img) || strcmp(json_string_value(img), image_uuid)))
            snprintf(fault, sizeof fault, "%s: %s", img_key,
                     i > 0 ? "only the boot disk has an image" : "not the instance's image_uuid");
        else if (id != NULL && !json_is_null(id) &&
                 (!json_is_string(id) || !dc_uuid_ok(json_string_value(id))))
            snprintf(fault, sizeof fault, "id: expected a lowercase UUID");
        else if (f < 0)
            snprintf(fault, sizeof fault, "pci_slot: expected 0:4:0 to 0:4:7");
        else if (by_slot[f] != 0)
            snprintf(fault, sizeof fault, "pci_slot: 0:4:%d is disks[%zu]'s too", f,
                     by_slot[f] - 1);
        if (fault[0] != '\0') {
            snprintf(msg, msglen, "disks[%zu].%s", i, fault);
            for (size_t k = 0; k < n; k++)
                json_decref(planned[k]);
            return NULL;
        }
        by_slot[f] = i + 1;
        char path[PATH_MAX + 32], slot_text[32];
        snprintf(path, sizeof path, "%s/disk%d.img", p->disks, f);
        snprintf(slot_text, sizeof slot_text, "0:4:%d", f);
        json_t *disk = json_pack("{s:b, s:I, s:s, s:s}", "boot", i == 0, "size",
                                 json_integer_value(size), "pci_slot", slot_text, "path", path);
        if (id != NULL && !json_is_null(id))
            json_object_set(disk, "id", (json_t *)id);
        if (i == 0)
            json_object_set_new(disk, "image", json_string(image_uuid));
        planned[n++] = disk;
    }
    qsort(planned, n, sizeof planned[0], by_function);
    json_t *out = json_array();
    for (size_t k = 0; k < n; k++)
        json_array_append_new(out, planned[k]);
    return out;
}

static void create_start(tern_ctx *ctx, const json_t *args)
{
    const dc_state_t *s = dc_agent_state(ctx, "dc.instance_create");
    if (s == NULL)
        return;
    char msg[1024];
    const char *vm_uuid = NULL, *image_uuid = NULL;
    const json_t *metadata = NULL;
    const char *bad = task_args_string(args, "vm_uuid", &vm_uuid, NULL, msg, sizeof msg);
    if (bad == NULL)
        bad = task_args_string(args, "image_uuid", &image_uuid, NULL, msg, sizeof msg);
    if (bad == NULL)
        bad = task_args_object(args, "customer_metadata", &metadata, msg, sizeof msg);
    if (bad == NULL && (vm_uuid == NULL || image_uuid == NULL))
        bad = vm_uuid == NULL ? "vm_uuid: required" : "image_uuid: required";
    if (bad != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "dc.instance_create: %s", bad);
        return;
    }
    create_arg_t *a = calloc(1, sizeof *a);
    if (a == NULL)
        abort();
    snprintf(a->root, sizeof a->root, "%s", s->server->data_root);
    int rc = instance_paths(a->root, vm_uuid, &a->p, msg, sizeof msg);
    if (rc == 0)
        rc = instance_image_path(a->root, image_uuid, a->image, sizeof a->image, msg, sizeof msg);
    const char *workload = rc == 0 ? instance_workload_kind(metadata, msg, sizeof msg) : NULL;
    json_t *disks = workload != NULL ? plan_disks(args, &a->p, image_uuid, msg, sizeof msg) : NULL;
    json_t *volumes = disks != NULL
                          ? instance_volumes_plan(json_object_get(args, "volumes"), msg, sizeof msg)
                          : NULL;
    if (volumes == NULL) {
        json_decref(disks);
        create_arg_free(a);
        tern_task_fail(ctx, rc == -EPERM ? "PathOutsideDataRoot" : "InvalidArgument",
                       "dc.instance_create: %s", msg);
        return;
    }
    char now[48];
    vm_disks_now(now, sizeof now);
    a->vm = json_pack("{s:s, s:s, s:s, s:o, s:s, s:s}", "uuid", vm_uuid, "image_uuid", image_uuid,
                      "state", "stopped", "disks", disks, "workload", workload, "create_timestamp",
                      now);
    static const char *const copied[] = {"alias", "owner_uuid",        "brand",    "ram", "vcpus",
                                         "nics",  "customer_metadata", "autoboot", NULL};
    for (size_t i = 0; copied[i] != NULL; i++) {
        const json_t *v = json_object_get(args, copied[i]);
        json_object_set_new(a->vm, copied[i], v != NULL ? json_deep_copy(v) : json_null());
    }
    if (json_array_size(volumes) > 0) {
        char *text = instance_volumes_metadata(volumes);
        if (text == NULL)
            abort();
        json_object_set_new(a->vm, "volumes", json_incref(volumes));
        json_object_set_new(a->vm, "internal_metadata", json_pack("{s:s}", "sdc:volumes", text));
        free(text);
    }
    json_decref(volumes);
    char key[PATH_MAX];
    snprintf(key, sizeof key, "%s", a->p.dir);
    rc = file_job_start(ctx, s->files, key, create_work, a, create_arg_free, create_done);
    if (rc != 0)
        tern_task_fail(ctx, "InstanceCreateFailed",
                       "dc.instance_create: cannot queue the work on %s: %s", key, strerror(-rc));
}

const tern_task_def dc_instance_create_task = {
    .size = sizeof(tern_task_def),
    .name = "instance_create",
    .summary = "An instance's files on this server: vm.json and sparse disks (the boot disk "
               "a copy of the server's image); a complete one is kept, a partial one redone.",
    .args_schema = "{\"required\": [\"vm_uuid\", \"image_uuid\", \"disks\"], \"properties\": {"
                   "\"vm_uuid\": {\"type\": \"string\"}, \"image_uuid\": {\"type\": \"string\"}, "
                   "\"disks\": {\"type\": \"array\"}, \"alias\": {\"type\": \"any\"}, "
                   "\"owner_uuid\": {\"type\": \"any\"}, \"brand\": {\"type\": \"any\"}, "
                   "\"ram\": {\"type\": \"any\"}, \"vcpus\": {\"type\": \"any\"}, "
                   "\"nics\": {\"type\": \"any\"}, \"customer_metadata\": {\"type\": \"any\"}, "
                   "\"autoboot\": {\"type\": \"any\"}, \"volumes\": {\"type\": \"any\"}}, "
                   "\"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = create_start,
    .cancel = dc_agent_cancel,
};
