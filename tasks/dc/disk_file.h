/*
 * disk_file.h -- an instance's disk as a file: what stands in locally for a zvol of
 * `volsize` MiB. A disk file is sparse (made with ftruncate, never filled with
 * zeros), its apparent size is always a whole number of MiB (the disk's size), and it
 * changes size only through ftruncate followed by fsync, so a grow adds a hole and a
 * shrink keeps the first bytes.
 *
 * Part of dc_model: the C library and nothing else. Errors are negative errno values
 * with a message naming the file in err. Symlinks are never followed: a disk path that
 * is a symlink is refused (-ELOOP), since it could lead out of the data root.
 */
#ifndef DC_DISK_FILE_H
#define DC_DISK_FILE_H

#include <stddef.h>
#include <stdint.h>

#define DC_MIB          (1024ull * 1024ull)
#define DC_DISK_MAX_MIB (64ull * 1024ull * 1024ull) /* 64 TiB: far beyond any package */

/* Makes a sparse file of size_mib MiB at path, mode 0600: written as "<path>.part"
 * (any left by an earlier attempt is replaced), synced, renamed into place and its
 * directory synced, so path is absent or whole. A file already at path is refused
 * with -EEXIST (the caller decides whether it is the one it wanted). size_mib must be
 * 1 .. DC_DISK_MAX_MIB (-EINVAL). */
int dc_disk_file_make(const char *path, uint64_t size_mib, char *err, size_t errlen);

/* Sets the size of the disk file at path to size_mib MiB (ftruncate, then fsync):
 * growing adds a hole at the end, shrinking keeps the first size_mib MiB. The same
 * size is done at once. -ENOENT when absent. */
int dc_disk_file_resize(const char *path, uint64_t size_mib, char *err, size_t errlen);

/* The size of the disk file at path in MiB into *size_mib. -ENOENT when absent;
 * -EINVAL when its apparent size is not a whole number of MiB (the message names the
 * file and its size in bytes): such a file is not a disk any record could describe. */
int dc_disk_file_size(const char *path, uint64_t *size_mib, char *err, size_t errlen);

/* Whether the file system holding `dir` has `bytes` free for an unprivileged writer
 * (statvfs: f_bavail x f_frsize): 0, or -ENOSPC with a message naming the directory,
 * the bytes needed and the bytes free. Checked before a write whose size is known
 * (a snapshot's copies), so a copy that cannot fit is refused before it starts rather
 * than failing with ENOSPC midway. */
int dc_disk_space_check(const char *dir, uint64_t bytes, char *err, size_t errlen);

/* Syncs the directory that holds path (after a rename or an unlink in it). */
int dc_disk_dir_sync(const char *path, char *err, size_t errlen);

#endif
