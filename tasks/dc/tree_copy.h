/*
 * tree_copy.h -- point-in-time copies of a directory tree: what stands in locally for
 * a zfs snapshot of a volume's delegated dataset (a storage instance's export/), and
 * for the rollback that puts one back.
 *
 * A copy keeps directories, regular files and symlinks with their modes and times;
 * each regular file is a reflink (FICLONE) where the file system shares blocks, else
 * a copy of its data extents only (SEEK_DATA/SEEK_HOLE), so a hole stays a hole.
 * Symlinks are copied as links, never followed; other kinds (sockets, fifos, devices)
 * are skipped, and a hard link becomes a file of its own. Owners are not copied (the
 * agent's user owns what it writes), nor are setuid and setgid bits. A file that
 * vanishes while the tree is walked (a probe file the share process removes) is
 * skipped. Everything written is synced before the copy returns.
 *
 * Part of dc_model: the C library and nothing else. Errors are negative errno values
 * with a message naming the file in err.
 */
#ifndef DC_TREE_COPY_H
#define DC_TREE_COPY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of data the regular files under `dir` hold (the sum of their data extents),
 * into *out: what a copy of the tree writes at most. */
int dc_tree_data_bytes(const char *dir, uint64_t *out, char *err, size_t errlen);

/* Copies the directory `src` to `dst`, which must not exist (-EEXIST). Gives up with
 * -ECANCELED when *stop becomes true (checked before each file and each MiB; stop
 * may be NULL). On failure dst is left as far as it got: the caller removes it (a
 * copy is made under a name that says it is partial, then renamed). *cloned (may be
 * NULL) is set when at least one file was a reflink. */
int dc_tree_copy(const char *src, const char *dst, const atomic_bool *stop, bool *cloned, char *err,
                 size_t errlen);

/* Removes the directory `dir` and everything in it, never following a symlink and
 * never leaving dir's file system, then syncs the directory that held it. Absent is
 * done; a path that is not a directory is refused (-ENOTDIR). */
int dc_tree_remove(const char *dir, char *err, size_t errlen);

/* Syncs the directory `dir` itself (after entries were renamed into or out of it). */
int dc_tree_dir_sync(const char *dir, char *err, size_t errlen);

#endif
