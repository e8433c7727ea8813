/*
 * file_checks.h -- what the unit tests of the datacenter's files (sparse copies, disk
 * files, instances, the agent's disk tasks) look at: a file's content checksum, its
 * stat, whether a path exists, and paths built from a format; and the data they write
 * to look at. Each failure to read or write fails the running cmocka test.
 */
#ifndef TEST_FILE_CHECKS_H
#define TEST_FILE_CHECKS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* FNV-1a of bytes [from, from + len) of the file (which must hold them). */
uint64_t test_file_checksum(const char *path, off_t from, off_t len);

/* stat(2) of path; the test fails naming the path when there is none. */
struct stat test_file_stat(const char *path);

/* true when something (a symlink too) is at path. */
bool test_file_exists(const char *path);

/* Writes len bytes of a pattern seeded by `seed` at offset `at` of the file (made when
 * missing, mode 0644), never a zero byte, and syncs it. */
void test_file_write_pattern(const char *path, off_t at, unsigned seed, size_t len);

/* A path from a printf format, in one of eight static buffers used in turn: valid
 * until the eighth call after this one. */
char *test_path(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
