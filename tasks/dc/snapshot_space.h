/*
 * snapshot_space.h -- snapshots of disk files and the space they use: what stands in
 * locally for zfs snapshots of a zvol and for their `usedbysnapshots`.
 *
 * A snapshot of a disk is a point-in-time copy of its file: a reflink (FICLONE) where
 * the file system shares blocks, else a sparse copy (dc_sparse_copy) that reads only
 * the data extents and keeps holes as holes.
 *
 * Whatever the copy cost the file system, the space a disk's snapshots use is measured
 * the way zfs accounts it, so the space rule does not depend on which file system the
 * lab runs on: `snapshot_bytes` is the data the snapshots hold that nothing newer
 * holds. Taking the disk's copies oldest to newest, a 4 KiB block of a copy counts
 * when it lies in a data extent of the copy (SEEK_DATA) and differs from the same
 * block of the next newer copy (the live disk for the newest), or lies past the end
 * of that newer file. So a fresh snapshot costs 0; overwriting data a snapshot holds
 * raises it by exactly the blocks overwritten; writing into a hole of the disk raises
 * nothing (the snapshot held no data there). Only data extents of the copies are
 * read, so the cost of measuring follows the data, not the disks' sizes.
 *
 * Part of dc_model: the C library and nothing else. Errors are negative errno values
 * with a message naming the file in err.
 */
#ifndef DC_SNAPSHOT_SPACE_H
#define DC_SNAPSHOT_SPACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Copies the disk file src to dst (mode 0600) as "<dst>.part", synced and renamed, by
 * FICLONE when the file system allows it, else by a sparse copy. dst is absent or
 * whole; a .part left by a killed attempt is replaced. Gives up with -ECANCELED when
 * *stop becomes true (stop may be NULL), the .part removed. *cloned (may be NULL)
 * tells which way it went. */
int dc_snapshot_copy(const char *src, const char *dst, const atomic_bool *stop, bool *cloned,
                     char *err, size_t errlen);

/* The snapshot_bytes of one disk: copies[0 .. n) are its copies in the snapshots,
 * oldest first (an entry may be NULL: that snapshot has no copy of this disk), live
 * the disk file itself. Result in *out. Gives up with -ECANCELED when *stop becomes
 * true (stop may be NULL). */
int dc_snapshot_bytes(const char *const *copies, size_t n, const char *live, uint64_t *out,
                      const atomic_bool *stop, char *err, size_t errlen);

/* ceil(bytes / 2^20): the snapshot_size recorded, rounded up so space is never
 * over-granted. */
uint64_t dc_snapshot_size_mib(uint64_t bytes);

#endif
