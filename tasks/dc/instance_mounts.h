/*
 * instance_mounts.h -- the shared volumes an instance mounts, on an agent's disk
 * (docs/VOLUMES.md "Volumes at provision"):
 *
 *   <data_root>/<vm_uuid>/mounts/<mountpoint without its leading "/">
 *       a symlink to the volume's export directory (its storage instance's
 *       <data_root>/<storage vm>/export), the directories above it made
 *
 * and what vm.json says of them: "volumes" ([{name, volume_uuid, mountpoint, mode,
 * type, nfsvolume, export_path}]) and internal_metadata["sdc:volumes"], the JSON text
 * RFD 26 gives: [{"mountpoint","name","nfsvolume","mode","type"}], in that order.
 * A mount in mode "ro" is recorded, not enforced on the files: the lab makes symlinks,
 * not bind mounts, which would need root.
 *
 * Errors are negative errno values with a message in err; json_t results are new
 * references.
 */
#ifndef DC_INSTANCE_MOUNTS_H
#define DC_INSTANCE_MOUNTS_H

#include <stddef.h>

#include <jansson.h>

/* The most volumes an instance mounts, and the longest mountpoint. */
#define INSTANCE_MOUNTS_MAX     16
#define INSTANCE_MOUNTPOINT_MAX 1024

/* The volumes of a create's arguments (borrowed; NULL or null: none) checked and
 * copied: a new reference to an array, or NULL with msg naming the fault by its path
 * ("volumes[1].mountpoint: ..."). Each entry has exactly name, volume_uuid,
 * mountpoint (absolute, no empty, "." or ".." segment, not "/", used once and never
 * inside another's), mode ("rw" or "ro"), type ("tritonnfs"), nfsvolume (a string or
 * null) and export_path (absolute, no "." or ".." segment). */
json_t *instance_mounts_plan(const json_t *volumes, char *msg, size_t msglen);

/* internal_metadata["sdc:volumes"] of the planned volumes (borrowed): malloc'd text,
 * or NULL when out of memory. */
char *instance_mounts_metadata(const json_t *volumes);

/* Makes <dir>/mounts/<mountpoint> for each planned volume (borrowed): the
 * directories above it, then the symlink to its export_path. A symlink already there
 * to the same export is kept; anything else there is refused (-EEXIST) naming it. */
int instance_mounts_make(const char *dir, const json_t *volumes, char *err, size_t errlen);

#endif
