/*
 * tree_copy.c -- copies and removals of directory trees (tree_copy.h).
 */
#include "tree_copy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dc_fail.h"
#include "sparse.h"

#define CHUNK (1024 * 1024)

/* The mode bits a copy keeps: rwx for all and the sticky bit. Setuid and setgid are
 * dropped, as owners are: the agent's user owns the copy, and a consumer's setuid file
 * put back by a rollback would be a setuid file of the agent's. */
#define COPY_MODE_BITS 01777u

static bool stopped(const atomic_bool *stop)
{
    return stop != NULL && atomic_load(stop);
}

static int join(char *out, const char *dir, const char *name, char *err, size_t errlen)
{
    if (snprintf(out, PATH_MAX, "%s/%s", dir, name) >= PATH_MAX)
        return dc_fail(err, errlen, -ENAMETOOLONG, "%s/%s: path too long", dir, name);
    return 0;
}

int dc_tree_dir_sync(const char *dir, char *err, size_t errlen)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return dc_fail(err, errlen, -errno, "%s: %s", dir, strerror(errno));
    int rc =
        fsync(fd) != 0 ? dc_fail(err, errlen, -errno, "%s: fsync: %s", dir, strerror(errno)) : 0;
    close(fd);
    return rc;
}

/* ---- measuring ----------------------------------------------------------------------- */

static int data_bytes(const char *dir, uint64_t *sum, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return dc_fail(err, errlen, -errno, "%s: %s", dir, strerror(errno));
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char path[PATH_MAX];
        struct stat st;
        rc = join(path, dir, de->d_name, err, errlen);
        if (rc != 0)
            break;
        if (lstat(path, &st) != 0) {
            if (errno != ENOENT)
                rc = dc_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            rc = data_bytes(path, sum, err, errlen);
        } else if (S_ISREG(st.st_mode)) {
            uint64_t n = 0;
            int e = dc_sparse_data_bytes(path, &n);
            if (e != 0 && e != -ENOENT)
                rc = dc_fail(err, errlen, e, "%s: cannot measure its data: %s", path, strerror(-e));
            *sum += n;
        }
    }
    closedir(d);
    return rc;
}

int dc_tree_data_bytes(const char *dir, uint64_t *out, char *err, size_t errlen)
{
    *out = 0;
    return data_bytes(dir, out, err, errlen);
}

/* ---- copying ------------------------------------------------------------------------- */

/* [from, to) of in written at the same offsets of out. */
static int copy_range(int in, int out, off_t from, off_t to, unsigned char *buf,
                      const atomic_bool *stop, const char *src, char *err, size_t errlen)
{
    while (from < to) {
        if (stopped(stop))
            return dc_fail(err, errlen, -ECANCELED, "%s: copy stopped", src);
        size_t want = (size_t)(to - from) < CHUNK ? (size_t)(to - from) : CHUNK;
        ssize_t n = pread(in, buf, want, from);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return dc_fail(err, errlen, -errno, "%s: read: %s", src, strerror(errno));
        if (n == 0)
            break; /* the file shrank while copied: the copy is what was there */
        for (ssize_t done = 0; done < n;) {
            ssize_t w = pwrite(out, buf + done, (size_t)(n - done), from + done);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                return dc_fail(err, errlen, -errno, "copy of %s: write: %s", src, strerror(errno));
            done += w;
        }
        from += n;
    }
    return 0;
}

/* The data extents of in copied to out, holes left holes, then out's size set. */
static int copy_extents(int in, int out, off_t size, const atomic_bool *stop, const char *src,
                        char *err, size_t errlen)
{
    unsigned char *buf = malloc(CHUNK);
    if (buf == NULL)
        return dc_fail(err, errlen, -ENOMEM, "%s: out of memory", src);
    int rc = 0;
    off_t at = 0;
    while (rc == 0 && at < size) {
        off_t data = lseek(in, at, SEEK_DATA);
        if (data < 0 && errno == ENXIO)
            break; /* only a hole is left */
        if (data < 0) {
            rc = dc_fail(err, errlen, -errno, "%s: SEEK_DATA: %s", src, strerror(errno));
            break;
        }
        off_t hole = lseek(in, data, SEEK_HOLE);
        if (hole < 0) {
            rc = dc_fail(err, errlen, -errno, "%s: SEEK_HOLE: %s", src, strerror(errno));
            break;
        }
        rc = copy_range(in, out, data, hole, buf, stop, src, err, errlen);
        at = hole;
    }
    free(buf);
    if (rc == 0 && ftruncate(out, size) != 0)
        rc = dc_fail(err, errlen, -errno, "copy of %s: ftruncate: %s", src, strerror(errno));
    return rc;
}

/* 1 when src vanished before it was opened (nothing made), 0 when copied. */
static int copy_file(const char *src, const char *dst, const atomic_bool *stop, bool *cloned,
                     char *err, size_t errlen)
{
    int in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in < 0)
        return errno == ENOENT ? 1 : dc_fail(err, errlen, -errno, "%s: %s", src, strerror(errno));
    struct stat st;
    if (fstat(in, &st) != 0) {
        int e = errno;
        close(in);
        return dc_fail(err, errlen, -e, "%s: %s", src, strerror(e));
    }
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0) {
        int e = errno;
        close(in);
        return dc_fail(err, errlen, -e, "%s: %s", dst, strerror(e));
    }
    int rc = 0;
    if (ioctl(out, FICLONE, in) == 0) {
        if (cloned != NULL)
            *cloned = true;
    } else if (errno == EOPNOTSUPP || errno == ENOTTY || errno == EXDEV || errno == EINVAL ||
               errno == ENOSYS) {
        /* Not a file system that shares blocks (ext4, tmpfs): the data extents. */
        rc = copy_extents(in, out, st.st_size, stop, src, err, errlen);
    } else {
        rc = dc_fail(err, errlen, -errno, "%s: FICLONE from %s: %s", dst, src, strerror(errno));
    }
    struct timespec times[2] = {st.st_atim, st.st_mtim};
    if (rc == 0 && fchmod(out, st.st_mode & COPY_MODE_BITS) != 0)
        rc = dc_fail(err, errlen, -errno, "%s: chmod: %s", dst, strerror(errno));
    if (rc == 0 && futimens(out, times) != 0)
        rc = dc_fail(err, errlen, -errno, "%s: times: %s", dst, strerror(errno));
    if (rc == 0 && fsync(out) != 0)
        rc = dc_fail(err, errlen, -errno, "%s: fsync: %s", dst, strerror(errno));
    if (close(out) != 0 && rc == 0)
        rc = dc_fail(err, errlen, -errno, "%s: close: %s", dst, strerror(errno));
    close(in);
    return rc;
}

static int copy_link(const char *src, const char *dst, const struct stat *st, char *err,
                     size_t errlen)
{
    char target[PATH_MAX];
    ssize_t n = readlink(src, target, sizeof target - 1);
    if (n < 0)
        return errno == ENOENT ? 0 : dc_fail(err, errlen, -errno, "%s: %s", src, strerror(errno));
    target[n] = '\0';
    if (symlink(target, dst) != 0)
        return dc_fail(err, errlen, -errno, "%s: symlink: %s", dst, strerror(errno));
    struct timespec times[2] = {st->st_atim, st->st_mtim};
    if (utimensat(AT_FDCWD, dst, times, AT_SYMLINK_NOFOLLOW) != 0)
        return dc_fail(err, errlen, -errno, "%s: times: %s", dst, strerror(errno));
    return 0;
}

/* The copied directory given its source's mode and times, then synced (after its
 * entries: writing them changed its times). */
static int finish_dir(const char *dst, const struct stat *st, char *err, size_t errlen)
{
    struct timespec times[2] = {st->st_atim, st->st_mtim};
    if (chmod(dst, st->st_mode & COPY_MODE_BITS) != 0)
        return dc_fail(err, errlen, -errno, "%s: chmod: %s", dst, strerror(errno));
    if (utimensat(AT_FDCWD, dst, times, AT_SYMLINK_NOFOLLOW) != 0)
        return dc_fail(err, errlen, -errno, "%s: times: %s", dst, strerror(errno));
    return dc_tree_dir_sync(dst, err, errlen);
}

static int copy_dir(const char *src, const char *dst, const struct stat *st,
                    const atomic_bool *stop, bool *cloned, char *err, size_t errlen)
{
    if (mkdir(dst, 0700) != 0)
        return dc_fail(err, errlen, -errno, "%s: %s", dst, strerror(errno));
    DIR *d = opendir(src);
    if (d == NULL)
        return dc_fail(err, errlen, -errno, "%s: %s", src, strerror(errno));
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (stopped(stop)) {
            rc = dc_fail(err, errlen, -ECANCELED, "%s: copy stopped", src);
            break;
        }
        char from[PATH_MAX], to[PATH_MAX];
        struct stat cst;
        rc = join(from, src, de->d_name, err, errlen);
        if (rc == 0)
            rc = join(to, dst, de->d_name, err, errlen);
        if (rc != 0)
            break;
        if (lstat(from, &cst) != 0) {
            if (errno != ENOENT)
                rc = dc_fail(err, errlen, -errno, "%s: %s", from, strerror(errno));
            continue;
        }
        if (S_ISDIR(cst.st_mode))
            rc = copy_dir(from, to, &cst, stop, cloned, err, errlen);
        else if (S_ISREG(cst.st_mode))
            rc = copy_file(from, to, stop, cloned, err, errlen);
        else if (S_ISLNK(cst.st_mode))
            rc = copy_link(from, to, &cst, err, errlen);
        if (rc > 0)
            rc = 0; /* vanished before it was opened: not part of the copy */
    }
    closedir(d);
    return rc != 0 ? rc : finish_dir(dst, st, err, errlen);
}

int dc_tree_copy(const char *src, const char *dst, const atomic_bool *stop, bool *cloned, char *err,
                 size_t errlen)
{
    if (cloned != NULL)
        *cloned = false;
    struct stat st;
    if (lstat(src, &st) != 0)
        return dc_fail(err, errlen, -errno, "%s: %s", src, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return dc_fail(err, errlen, -ENOTDIR, "%s is not a directory", src);
    if (lstat(dst, &(struct stat){0}) == 0)
        return dc_fail(err, errlen, -EEXIST, "%s exists", dst);
    return copy_dir(src, dst, &st, stop, cloned, err, errlen);
}

/* ---- removing ------------------------------------------------------------------------ */

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    int rc = flag == FTW_DP ? rmdir(path) : unlink(path);
    return rc != 0 && errno != ENOENT ? -1 : 0;
}

int dc_tree_remove(const char *dir, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(dir, &st) != 0)
        return errno == ENOENT ? 0 : dc_fail(err, errlen, -errno, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return dc_fail(err, errlen, -ENOTDIR, "%s is not a directory: refused", dir);
    /* FTW_PHYS: a symlink inside is removed, never followed; FTW_MOUNT: never leaves
     * the file system. */
    if (nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) != 0)
        return dc_fail(err, errlen, -errno, "cannot remove %s: %s", dir, strerror(errno));
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash == NULL)
        return 0;
    *slash = '\0';
    return dc_tree_dir_sync(parent[0] != '\0' ? parent : "/", err, errlen);
}
