/*
 * fd_inherit.c -- close-on-exec on every descriptor above the standard streams; see
 * fd_inherit.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "base/fd_inherit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/error.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* The same, one descriptor at a time, from /proc/self/fd: for kernels before 5.11,
 * which have no close_range(CLOSE_RANGE_CLOEXEC). */
static int by_proc(char *err, size_t errlen)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return err_set(err, errlen, TERN_EIO, "cannot list /proc/self/fd: %s", strerror(errno));
    int self = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end != '\0' || end == e->d_name || fd < 3 || fd == self)
            continue;
        int flags = fcntl((int)fd, F_GETFD);
        if (flags >= 0 && !(flags & FD_CLOEXEC) &&
            fcntl((int)fd, F_SETFD, flags | FD_CLOEXEC) != 0) {
            int rc = err_set(err, errlen, TERN_EIO, "close-on-exec on descriptor %ld: %s", fd,
                             strerror(errno));
            closedir(d);
            return rc;
        }
    }
    closedir(d);
    return 0;
}

int fd_inherit_none(char *err, size_t errlen)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
        return 0;
    if (errno != ENOSYS && errno != EINVAL)
        return err_set(err, errlen, TERN_EIO, "close_range: %s", strerror(errno));
#endif
    return by_proc(err, errlen);
}
