/*
 * sync_digest.h -- one digest per disk that the source and the target compute alike
 * and compare before a migration switches: equal for equal contents whatever the
 * holes (a sparse copy and its original agree; an all-zero block written out as data
 * counts as a hole).
 *
 * Thread-safe.
 */
#ifndef DC_SYNC_DIGEST_H
#define DC_SYNC_DIGEST_H

#include <stddef.h>
#include <stdint.h>

/* A disk's digest: SHA-256 over (u64 LE block index, 32-byte block SHA-256) of every
 * block that is not all zero, then u64 LE size: equal for equal contents whatever the
 * holes. Writes 64 lowercase hex digits and their NUL into hex, the file's size into
 * *size. Only data extents are read. 0, or -errno with err naming the file. */
int sync_disk_digest(const char *path, uint32_t block_size, char hex[65], uint64_t *size, char *err,
                     size_t errlen);

#endif
