/*
 * file_checks.c -- see file_checks.h.
 */
#include "file_checks.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK (1024 * 1024)

uint64_t test_file_checksum(const char *path, off_t from, off_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        fail_msg("%s: %s", path, strerror(errno));
    unsigned char *buf = malloc(CHUNK);
    assert_non_null(buf);
    uint64_t h = 0xcbf29ce484222325ull;
    while (len > 0) {
        size_t want = len < CHUNK ? (size_t)len : (size_t)CHUNK;
        ssize_t got = pread(fd, buf, want, from);
        if (got <= 0)
            fail_msg("%s: cannot read %zu bytes at %lld", path, want, (long long)from);
        for (ssize_t i = 0; i < got; i++) {
            h ^= buf[i];
            h *= 0x100000001b3ull;
        }
        from += got;
        len -= got;
    }
    free(buf);
    close(fd);
    return h;
}

struct stat test_file_stat(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        fail_msg("%s: %s", path, strerror(errno));
    return st;
}

bool test_file_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

char *test_path(const char *fmt, ...)
{
    static char buf[8][PATH_MAX + 256];
    static int next;
    char *p = buf[next++ % 8];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p, sizeof buf[0], fmt, ap);
    va_end(ap);
    return p;
}

void test_file_write_pattern(const char *path, off_t at, unsigned seed, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        fail_msg("%s: %s", path, strerror(errno));
    unsigned char *buf = malloc(len);
    assert_non_null(buf);
    for (size_t i = 0; i < len; i++)
        buf[i] = (unsigned char)(1 + (seed * 31 + i * 7) % 251);
    assert_int_equal(pwrite(fd, buf, len, at), (ssize_t)len);
    assert_int_equal(fsync(fd), 0);
    free(buf);
    close(fd);
}
