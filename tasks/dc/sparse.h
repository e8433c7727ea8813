/*
 * sparse.h -- copies of sparse files that stay sparse: what stands in locally for a
 * zfs clone of an image (a boot disk) and, later, for the full send of a migration.
 * Only the data extents of the source are read (SEEK_DATA/SEEK_HOLE); a hole stays a
 * hole in the copy, and so does a block of the source's data that holds only zeros.
 * Nothing is ever written out as zeros.
 *
 * Part of dc_model: the C library and nothing else. Errors are negative errno values
 * (the engine's TERN_E* codes) with a message naming the file in err.
 */
#ifndef DC_SPARSE_H
#define DC_SPARSE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The size of the blocks the copy compares against zero (bytes). */
#define DC_SPARSE_BLOCK 4096

/* Copies `src` to `dst`, then sets the copy's size to size_bytes (0: the source's
 * size; smaller than the source's is refused with -EINVAL: a copy never cuts data
 * off). The copy is written as "<dst>.part", synced, and renamed over dst, so dst is
 * either absent or whole, and a copy started again after a crash begins afresh.
 * `dst` gets mode 0600. Returns 0, or a negative errno with the message in err; on
 * failure dst is untouched and the partial file removed. */
int dc_sparse_copy(const char *src, const char *dst, uint64_t size_bytes, char *err, size_t errlen);

/* dc_sparse_copy that gives up when *stop becomes true (checked before each MiB it
 * reads, from any thread): -ECANCELED, the partial file removed, dst untouched. How a
 * copy on the thread pool ends soon after its task was cancelled. `stop` may be NULL. */
int dc_sparse_copy_stoppable(const char *src, const char *dst, uint64_t size_bytes,
                             const atomic_bool *stop, char *err, size_t errlen);

/* Bytes of data the file at `path` holds: the sum of its data extents as SEEK_DATA
 * and SEEK_HOLE report them. Returns 0 and *out, or a negative errno. */
int dc_sparse_data_bytes(const char *path, uint64_t *out);

#endif
