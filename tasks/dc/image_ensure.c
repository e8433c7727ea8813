/*
 * image_ensure.c -- dc.image_ensure, on a server's agent: the server's copy of an
 * image, <data_root>/images/<image_uuid>.img, a sparse copy of the lab's image file
 * (its data extents only; a 10 GiB image with 1 MiB of data costs 1 MiB). The copy is
 * made on the thread pool as "<file>.part" and renamed, so a file that is there is
 * whole; one that is there with the lab file's size is done.
 *
 *   {"image_uuid", "missing_ok"?} -> {"path", "size" (MiB), "copied": bool,
 *                                     "present": bool}
 *
 * Fails ResourceNotFound for an image the description does not list, and
 * ImageFileMissing naming the lab's file when it is gone. With missing_ok (a
 * migration's begin, which can get the image from the source server instead) neither
 * fails: the answer is present false, or present true when the server has its copy
 * already ("store" names why in both: "gone" or "unlisted"). With missing_ok an
 * image_uuid null (an instance without an image: a storage instance) is present
 * true, store "none", path null.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dc_state.h"
#include "file_work.h"
#include "instance_dir.h"
#include "lib/args.h"
#include "sparse.h"

#define MIB (1024ull * 1024ull)

typedef struct ensure_arg {
    char src[PATH_MAX];
    char dst[PATH_MAX];
    uint64_t size_mib;
    bool copied;
    bool missing_ok, missing; /* missing: the store lacks the image (missing_ok only) */
    const char *code;         /* the failure's code, a literal */
} ensure_arg_t;

static int mkdir_one(const char *path)
{
    return mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -errno;
}

static int ensure_work(void *data, const atomic_bool *stop, char *err, size_t errlen)
{
    ensure_arg_t *a = data;
    struct stat src, dst;
    if (stat(a->src, &src) != 0 && a->missing_ok && errno == ENOENT) {
        a->missing = true;
        return 0;
    }
    if (stat(a->src, &src) != 0) {
        a->code = "ImageFileMissing";
        int e = errno;
        snprintf(err, errlen, "the lab's image file %s: %s", a->src, strerror(e));
        return -e;
    }
    if (stat(a->dst, &dst) == 0 && dst.st_size == src.st_size)
        return 0; /* whole: it was renamed into place */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", a->dst);
    *strrchr(dir, '/') = '\0';
    struct stat st;
    if (lstat(dir, &st) == 0 && (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode))) {
        a->code = "PathOutsideDataRoot";
        snprintf(err, errlen, "%s is %s, not the data root's images directory: refused", dir,
                 S_ISLNK(st.st_mode) ? "a symlink" : "not a directory");
        return -EPERM;
    }
    int rc = mkdir_one(dir);
    if (rc != 0) {
        a->code = "ImageCopyFailed";
        snprintf(err, errlen, "%s: %s", dir, strerror(-rc));
        return rc;
    }
    rc = dc_sparse_copy_stoppable(a->src, a->dst, 0, stop, err, errlen);
    if (rc != 0) {
        a->code = "ImageCopyFailed";
        return rc;
    }
    a->copied = true;
    return 0;
}

static void ensure_done(tern_ctx *ctx, void *data, int rc, const char *err)
{
    const ensure_arg_t *a = data;
    if (rc != 0) {
        tern_task_fail(ctx, a->code != NULL ? a->code : "ImageCopyFailed", "dc.image_ensure: %s",
                       err);
        return;
    }
    bool present = true;
    if (a->missing) {
        struct stat st;
        present = lstat(a->dst, &st) == 0 && S_ISREG(st.st_mode);
    }
    json_t *r = json_pack("{s:s, s:I, s:b, s:b}", "path", a->dst, "size", (json_int_t)a->size_mib,
                          "copied", a->copied, "present", present);
    if (a->missing)
        json_object_set_new(r, "store", json_string(a->size_mib == 0 ? "unlisted" : "gone"));
    tern_task_done(ctx, r);
}

static void ensure_start(tern_ctx *ctx, const json_t *args)
{
    const dc_state_t *s = dc_agent_state(ctx, "dc.image_ensure");
    if (s == NULL)
        return;
    char msg[512];
    const char *uuid = NULL;
    /* A migration's begin of an instance without an image (a storage instance, whose
     * data is its export/ tree): nothing to make present. Only with missing_ok, so an
     * image_uuid forgotten elsewhere is still refused. */
    if (json_is_null(json_object_get(args, "image_uuid")) &&
        json_is_true(json_object_get(args, "missing_ok"))) {
        tern_task_done(ctx, json_pack("{s:n, s:I, s:b, s:b, s:s}", "path", "size", (json_int_t)0,
                                      "copied", 0, "present", 1, "store", "none"));
        return;
    }
    const char *bad = task_args_string(args, "image_uuid", &uuid, NULL, msg, sizeof msg);
    const json_t *missing_ok = json_object_get(args, "missing_ok");
    if (bad == NULL && missing_ok != NULL && !json_is_boolean(missing_ok))
        bad = "missing_ok: expected a boolean";
    if (bad != NULL || uuid == NULL) {
        tern_task_fail(ctx, "InvalidArgument", "dc.image_ensure: %s",
                       bad != NULL ? bad : "image_uuid: required");
        return;
    }
    const dc_image_t *img = NULL;
    for (size_t i = 0; i < s->dc->n_images && img == NULL; i++)
        if (strcmp(s->dc->images[i].uuid, uuid) == 0)
            img = &s->dc->images[i];
    if (img == NULL && !json_is_true(missing_ok)) {
        tern_task_fail(ctx, "ResourceNotFound",
                       "dc.image_ensure: image_uuid: %.64s is not an image of the datacenter",
                       uuid);
        return;
    }
    ensure_arg_t *a = calloc(1, sizeof *a);
    if (a == NULL)
        abort();
    a->missing_ok = json_is_true(missing_ok);
    if (instance_image_path(s->server->data_root, uuid, a->dst, sizeof a->dst, msg, sizeof msg) !=
        0) {
        free(a);
        tern_task_fail(ctx, "InvalidArgument", "dc.image_ensure: %s", msg);
        return;
    }
    if (img == NULL) {
        /* Not in the store: only what this server has (size 0 says "unlisted"). */
        a->missing = true;
        ensure_done(ctx, a, 0, "");
        free(a);
        return;
    }
    a->size_mib = img->size_mib;
    snprintf(a->src, sizeof a->src, "%s", img->file);
    char key[PATH_MAX];
    snprintf(key, sizeof key, "%s", a->dst);
    int rc = file_job_start(ctx, s->files, key, ensure_work, a, free, ensure_done);
    if (rc != 0)
        tern_task_fail(ctx, "ImageCopyFailed", "dc.image_ensure: cannot queue the copy of %s: %s",
                       key, strerror(-rc));
}

const tern_task_def dc_image_ensure_task = {
    .size = sizeof(tern_task_def),
    .name = "image_ensure",
    .summary = "The server's sparse copy of an image (data_root/images/<uuid>.img), made "
               "from the lab's image file unless whole already.",
    .args_schema = "{\"required\": [\"image_uuid\"], \"properties\": {\"image_uuid\": "
                   "{\"type\": \"any\"}, \"missing_ok\": {\"type\": \"boolean\"}}, "
                   "\"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = ensure_start,
    .cancel = dc_agent_cancel,
};
