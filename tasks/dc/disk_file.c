/*
 * disk_file.c -- disk files (disk_file.h). Owns the descriptors it opens and the
 * "<path>.part" file until it is renamed or removed.
 */
#include "disk_file.h"
#include "dc_fail.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

static int size_ok(const char *path, uint64_t size_mib, char *err, size_t errlen)
{
    if (size_mib < 1 || size_mib > DC_DISK_MAX_MIB)
        return dc_fail(err, errlen, -EINVAL, "%s: size %llu MiB is not 1 to %llu MiB", path,
                       (unsigned long long)size_mib, (unsigned long long)DC_DISK_MAX_MIB);
    return 0;
}

int dc_disk_dir_sync(const char *path, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return dc_fail(err, errlen, -ENAMETOOLONG, "%s: path too long", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        return 0;
    *slash = '\0';
    int fd = open(dir[0] != '\0' ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return dc_fail(err, errlen, -errno, "%s: %s", dir, strerror(errno));
    int rc =
        fsync(fd) != 0 ? dc_fail(err, errlen, -errno, "%s: fsync: %s", dir, strerror(errno)) : 0;
    close(fd);
    return rc;
}

int dc_disk_file_make(const char *path, uint64_t size_mib, char *err, size_t errlen)
{
    int rc = size_ok(path, size_mib, err, errlen);
    if (rc != 0)
        return rc;
    struct stat st;
    if (lstat(path, &st) == 0)
        return dc_fail(err, errlen, -EEXIST, "%s: already exists", path);
    if (errno != ENOENT)
        return dc_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
    char part[PATH_MAX];
    if (snprintf(part, sizeof part, "%s.part", path) >= (int)sizeof part)
        return dc_fail(err, errlen, -ENAMETOOLONG, "%s: path too long", path);
    /* O_NOFOLLOW: a symlink planted at the .part name is never written through. */
    unlink(part); /* what an attempt killed midway left; usually absent */
    int fd = open(part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return dc_fail(err, errlen, -errno, "%s: %s", part, strerror(errno));
    if (ftruncate(fd, (off_t)(size_mib * DC_MIB)) != 0)
        rc = dc_fail(err, errlen, -errno, "%s: cannot set its size to %llu MiB: %s", part,
                     (unsigned long long)size_mib, strerror(errno));
    else if (fsync(fd) != 0)
        rc = dc_fail(err, errlen, -errno, "%s: fsync: %s", part, strerror(errno));
    if (close(fd) != 0 && rc == 0)
        rc = dc_fail(err, errlen, -errno, "%s: close: %s", part, strerror(errno));
    if (rc == 0 && rename(part, path) != 0)
        rc =
            dc_fail(err, errlen, -errno, "cannot rename %s to %s: %s", part, path, strerror(errno));
    if (rc != 0) {
        unlink(part); /* may be gone: nothing to report */
        return rc;
    }
    return dc_disk_dir_sync(path, err, errlen);
}

int dc_disk_file_resize(const char *path, uint64_t size_mib, char *err, size_t errlen)
{
    int rc = size_ok(path, size_mib, err, errlen);
    if (rc != 0)
        return rc;
    int fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return dc_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0)
        rc = dc_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = dc_fail(err, errlen, -EINVAL, "%s: not a regular file", path);
    else if ((uint64_t)st.st_size == size_mib * DC_MIB)
        rc = 0; /* already that size: a resize run again */
    else if (ftruncate(fd, (off_t)(size_mib * DC_MIB)) != 0)
        rc = dc_fail(err, errlen, -errno, "%s: cannot set its size to %llu MiB: %s", path,
                     (unsigned long long)size_mib, strerror(errno));
    else if (fsync(fd) != 0)
        rc = dc_fail(err, errlen, -errno, "%s: fsync: %s", path, strerror(errno));
    if (close(fd) != 0 && rc == 0)
        rc = dc_fail(err, errlen, -errno, "%s: close: %s", path, strerror(errno));
    return rc;
}

int dc_disk_file_size(const char *path, uint64_t *size_mib, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return dc_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
    if (S_ISLNK(st.st_mode))
        return dc_fail(err, errlen, -ELOOP, "%s: a symlink, not a disk file: refused", path);
    if (!S_ISREG(st.st_mode))
        return dc_fail(err, errlen, -EINVAL, "%s: not a regular file", path);
    if ((uint64_t)st.st_size % DC_MIB != 0)
        return dc_fail(err, errlen, -EINVAL, "%s: its size %lld bytes is not a whole number of MiB",
                       path, (long long)st.st_size);
    *size_mib = (uint64_t)st.st_size / DC_MIB;
    return 0;
}

int dc_disk_space_check(const char *dir, uint64_t bytes, char *err, size_t errlen)
{
    struct statvfs fs;
    if (statvfs(dir, &fs) != 0)
        return dc_fail(err, errlen, -errno, "%s: statvfs: %s", dir, strerror(errno));
    uint64_t free_bytes = (uint64_t)fs.f_bavail * (uint64_t)fs.f_frsize;
    if (bytes > free_bytes)
        return dc_fail(err, errlen, -ENOSPC,
                       "%s: the copy needs %llu bytes and its file system has %llu free", dir,
                       (unsigned long long)bytes, (unsigned long long)free_bytes);
    return 0;
}
