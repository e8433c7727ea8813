/*
 * instance_dir.c -- an instance's files under the data root (instance_dir.h). Owns
 * nothing past a call: what it opens is closed before it returns.
 */
#include "instance_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc_check.h"
#include "dc_fail.h"

#define WORKLOAD_COMM "tern-workload"

bool dc_uuid_ok(const char *s)
{
    if (s == NULL || strlen(s) != 36)
        return false;
    for (size_t i = 0; i < 36; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? s[i] != '-' : !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    }
    return true;
}

static int join(char *out, size_t outlen, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int join(char *out, size_t outlen, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, outlen, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= outlen)
        return dc_fail(err, errlen, -ENAMETOOLONG, "%s...: path too long", out);
    return 0;
}

int instance_paths(const char *root, const char *vm_uuid, instance_paths_t *out, char *err,
                   size_t errlen)
{
    if (!dc_uuid_ok(vm_uuid))
        return dc_fail(err, errlen, -EINVAL,
                       "vm_uuid: \"%.64s\" is not a UUID (lowercase 8-4-4-4-12 hex)",
                       vm_uuid != NULL ? vm_uuid : "");
    int rc = join(out->dir, sizeof out->dir, err, errlen, "%s/%s", root, vm_uuid);
    if (rc == 0)
        rc = join(out->disks, sizeof out->disks, err, errlen, "%s/disks", out->dir);
    if (rc == 0)
        rc = join(out->vm_json, sizeof out->vm_json, err, errlen, "%s/vm.json", out->dir);
    if (rc == 0)
        rc = join(out->pidfile, sizeof out->pidfile, err, errlen, "%s/workload.pid", out->dir);
    if (rc != 0)
        return rc;
    struct stat st;
    if (lstat(out->dir, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        return dc_fail(err, errlen, -errno, "%s: %s", out->dir, strerror(errno));
    }
    if (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode))
        return dc_fail(err, errlen, -EPERM,
                       "%s is %s, not an instance directory of the data root %s: refused", out->dir,
                       S_ISLNK(st.st_mode) ? "a symlink" : "not a directory", root);
    char *real = realpath(out->dir, NULL);
    bool inside = real != NULL && strcmp(real, out->dir) == 0;
    free(real);
    if (!inside)
        return dc_fail(err, errlen, -EPERM, "%s resolves outside the data root %s: refused",
                       out->dir, root);
    /* The disks a workload writes to must not lead elsewhere either. */
    if (lstat(out->disks, &st) == 0 && (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode)))
        return dc_fail(err, errlen, -EPERM, "%s is %s, not the instance's disks directory: refused",
                       out->disks, S_ISLNK(st.st_mode) ? "a symlink" : "not a directory");
    return 0;
}

int instance_image_path(const char *root, const char *image_uuid, char *out, size_t outlen,
                        char *err, size_t errlen)
{
    if (!dc_uuid_ok(image_uuid))
        return dc_fail(err, errlen, -EINVAL,
                       "image_uuid: \"%.64s\" is not a UUID (lowercase 8-4-4-4-12 hex)",
                       image_uuid != NULL ? image_uuid : "");
    return join(out, outlen, err, errlen, "%s/images/%s.img", root, image_uuid);
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    int rc = type == FTW_DP ? rmdir(path) : unlink(path);
    return rc != 0 && errno != ENOENT ? -1 : 0;
}

int instance_tree_remove(const char *root, const char *dir, char *err, size_t errlen)
{
    size_t n = strlen(root);
    if (strncmp(dir, root, n) != 0 || dir[n] != '/' || dir[n + 1] == '\0' ||
        strchr(dir + n + 1, '/') != NULL || strcmp(dir + n + 1, "..") == 0 ||
        strcmp(dir + n + 1, ".") == 0)
        return dc_fail(err, errlen, -EPERM, "%s is not a directory of the data root %s: refused",
                       dir, root);
    struct stat st;
    if (lstat(dir, &st) != 0)
        return errno == ENOENT ? 0 : dc_fail(err, errlen, -errno, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return dc_fail(err, errlen, -EPERM, "%s is not a directory: refused", dir);
    /* FTW_PHYS: a symlink inside is removed, never followed; FTW_MOUNT: never leaves
     * the data root's file system. */
    if (nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) != 0)
        return dc_fail(err, errlen, -errno, "cannot remove %s: %s", dir, strerror(errno));
    return 0;
}

static int sync_dir_of(const char *path)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        return 0;
    *slash = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) != 0 ? -errno : 0;
    close(fd);
    return rc;
}

int instance_json_write(const char *path, const json_t *doc, char *err, size_t errlen)
{
    char part[PATH_MAX];
    int rc = join(part, sizeof part, err, errlen, "%s.part", path);
    if (rc != 0)
        return rc;
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (text == NULL)
        return dc_fail(err, errlen, -ENOMEM, "%s: cannot encode the document", path);
    size_t len = strlen(text);
    int fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = dc_fail(err, errlen, -errno, "%s: %s", part, strerror(errno));
        free(text);
        return rc;
    }
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            rc = dc_fail(err, errlen, -errno, "%s: write: %s", part, strerror(errno));
            break;
        }
        done += (size_t)w;
    }
    free(text);
    if (rc == 0 && (write(fd, "\n", 1) != 1 || fsync(fd) != 0))
        rc = dc_fail(err, errlen, -errno, "%s: write: %s", part, strerror(errno));
    if (close(fd) != 0 && rc == 0)
        rc = dc_fail(err, errlen, -errno, "%s: close: %s", part, strerror(errno));
    if (rc == 0 && rename(part, path) != 0)
        rc =
            dc_fail(err, errlen, -errno, "cannot rename %s to %s: %s", part, path, strerror(errno));
    if (rc != 0) {
        unlink(part); /* may be gone: nothing to report */
        return rc;
    }
    int s = sync_dir_of(path);
    if (s != 0)
        return dc_fail(err, errlen, s, "%s: cannot sync its directory: %s", path, strerror(-s));
    return 0;
}

int instance_json_read(const char *path, json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (access(path, F_OK) != 0)
        return dc_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
    json_error_t je;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (doc == NULL || !json_is_object(doc)) {
        json_decref(doc);
        return dc_fail(err, errlen, -EINVAL, "%s: not a JSON object (%s, line %d)", path, je.text,
                       je.line);
    }
    *out = doc;
    return 0;
}

int instance_read(const char *root, const char *vm_uuid, instance_paths_t *p, json_t **vm,
                  char *err, size_t errlen)
{
    *vm = NULL;
    int rc = instance_paths(root, vm_uuid, p, err, errlen);
    if (rc != 0)
        return rc;
    rc = instance_json_read(p->vm_json, vm, err, errlen);
    if (rc == -ENOENT)
        return dc_fail(err, errlen, rc, "instance %s has no %s on this server", vm_uuid,
                       p->vm_json);
    /* instance_json_read's -EINVAL is a file that is not a JSON object: unreadable, not
     * a bad argument. */
    return rc == -EINVAL ? -EIO : rc;
}

const char *instance_read_code(int rc)
{
    switch (rc) {
    case -EINVAL:
        return "InvalidArgument";
    case -EPERM:
        return "PathOutsideDataRoot";
    case -ENOENT:
        return "InstanceNotFound";
    default:
        return "InstanceUnreadable";
    }
}

const char *instance_workload_kind(const json_t *customer_metadata, char *err, size_t errlen)
{
    const json_t *v = json_is_object(customer_metadata)
                          ? json_object_get(customer_metadata, "lab:workload")
                          : NULL;
    if (v == NULL || json_is_null(v))
        return "idle";
    const char *s = json_string_value(v);
    if (s != NULL && strcmp(s, "idle") == 0)
        return "idle";
    if (s != NULL && strcmp(s, "writer") == 0)
        return "writer";
    if (s != NULL)
        dc_fail(err, errlen, 0,
                "customer_metadata[\"lab:workload\"]: unknown workload \"%.64s\" (expected one of "
                "" INSTANCE_WORKLOADS ")",
                s);
    else
        dc_fail(
            err, errlen, 0,
            "customer_metadata[\"lab:workload\"]: expected a string, one of " INSTANCE_WORKLOADS);
    return NULL;
}

pid_t instance_workload_pid(const instance_paths_t *p)
{
    pid_t pid = dc_pidfile_read(p->pidfile);
    return pid > 0 && dc_proc_runs_with(pid, WORKLOAD_COMM, p->pidfile) ? pid : 0;
}

json_t *instance_scan(const char *root)
{
    json_t *list = json_array();
    DIR *d = opendir(root);
    if (d == NULL)
        return list;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        instance_paths_t p;
        char err[256];
        if (!dc_uuid_ok(de->d_name) || instance_paths(root, de->d_name, &p, err, sizeof err) != 0)
            continue;
        json_t *vm = NULL;
        if (instance_json_read(p.vm_json, &vm, err, sizeof err) != 0)
            continue; /* partial: the create that made it will redo it */
        pid_t pid = instance_workload_pid(&p);
        const json_t *state = json_object_get(vm, "state");
        json_array_append_new(
            list, json_pack("{s:s, s:O, s:s, s:o, s:b}", "uuid", de->d_name, "state",
                            state != NULL ? state : json_null(), "dir", p.dir, "pid",
                            pid > 0 ? json_integer(pid) : json_null(), "alive", pid > 0));
        json_decref(vm);
    }
    closedir(d);
    return list;
}
