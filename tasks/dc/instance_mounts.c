/*
 * instance_mounts.c -- a consumer's mount links (instance_mounts.h).
 */
#include "instance_mounts.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dc_fail.h"

#define MOUNTPOINT_MAX 1024

const char *instance_mountpoint_fault(const char *mp)
{
    if (mp == NULL)
        return "expected a string";
    if (mp[0] != '/')
        return "expected an absolute path";
    if (strlen(mp) > MOUNTPOINT_MAX)
        return "at most 1024 characters";
    if (strcmp(mp, "/") == 0)
        return "the root cannot be a mountpoint";
    for (const char *seg = mp + 1; *seg != '\0';) {
        size_t n = strcspn(seg, "/");
        if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
            return "no empty, \".\" or \"..\" segment";
        seg += n;
        if (*seg == '/')
            seg++;
    }
    return NULL;
}

/* The link of a mountpoint: <dir>/mounts/<mountpoint without its leading "/">. */
static int link_path(const instance_paths_t *p, const char *mp, char *out, size_t outlen, char *err,
                     size_t errlen)
{
    const char *fault = instance_mountpoint_fault(mp);
    if (fault != NULL)
        return dc_fail(err, errlen, -EINVAL, "mountpoint \"%.64s\": %s", mp ?: "", fault);
    if (snprintf(out, outlen, "%s/mounts%s", p->dir, mp) >= (int)outlen)
        return dc_fail(err, errlen, -ENAMETOOLONG, "%s/mounts%s: path too long", p->dir, mp);
    return 0;
}

/* Makes each directory of path up to its last component (exclusive), from the
 * instance's directory on, refusing one that is a symlink or not a directory. */
static int make_parents(const instance_paths_t *p, char *path, char *err, size_t errlen)
{
    size_t base = strlen(p->dir);
    for (char *slash = strchr(path + base + 1, '/'); slash != NULL;
         slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        struct stat st;
        int rc = 0;
        if (lstat(path, &st) != 0) {
            if (errno != ENOENT || (mkdir(path, 0755) != 0 && errno != EEXIST))
                rc = dc_fail(err, errlen, -errno, "cannot make %s: %s", path, strerror(errno));
        } else if (!S_ISDIR(st.st_mode)) {
            rc = dc_fail(err, errlen, -EPERM, "%s is %s, not a directory: refused", path,
                         S_ISLNK(st.st_mode) ? "a symlink" : "a file");
        }
        *slash = '/';
        if (rc != 0)
            return rc;
    }
    return 0;
}

int instance_mounts_make(const instance_paths_t *p, const json_t *volumes, char *err, size_t errlen)
{
    size_t i;
    const json_t *m;
    json_array_foreach(volumes, i, m)
    {
        const char *mp = json_string_value(json_object_get(m, "mountpoint"));
        const char *target = json_string_value(json_object_get(m, "export_path"));
        char path[PATH_MAX], tmp[PATH_MAX + 16];
        int rc = link_path(p, mp, path, sizeof path, err, errlen);
        if (rc != 0)
            return rc;
        if (target == NULL || target[0] != '/')
            return dc_fail(err, errlen, -EINVAL,
                           "volumes[%zu].export_path: expected an absolute path", i);
        rc = make_parents(p, path, err, errlen);
        if (rc != 0)
            return rc;
        struct stat st;
        if (lstat(path, &st) == 0 && !S_ISLNK(st.st_mode))
            return dc_fail(err, errlen, -EPERM, "%s is %s, not a mount link: refused", path,
                           S_ISDIR(st.st_mode) ? "a directory" : "a file");
        snprintf(tmp, sizeof tmp, "%s.part", path);
        unlink(tmp); /* what an attempt cut short left, or nothing */
        if (symlink(target, tmp) != 0 || rename(tmp, path) != 0) {
            int e = errno;
            unlink(tmp);
            return dc_fail(err, errlen, -e, "cannot link %s to %s: %s", path, target, strerror(e));
        }
    }
    return 0;
}

bool instance_mounts_ok(const instance_paths_t *p, const json_t *volumes)
{
    size_t i;
    const json_t *m;
    json_array_foreach(volumes, i, m)
    {
        char path[PATH_MAX], err[256];
        struct stat st;
        if (link_path(p, json_string_value(json_object_get(m, "mountpoint")), path, sizeof path,
                      err, sizeof err) != 0 ||
            lstat(path, &st) != 0 || !S_ISLNK(st.st_mode) || stat(path, &st) != 0 ||
            !S_ISDIR(st.st_mode))
            return false;
    }
    return true;
}
