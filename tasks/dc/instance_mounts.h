/*
 * instance_mounts.h -- a consumer instance's mounts of shared volumes on the agent's
 * disk (docs/VOLUMES.md): vm.json "volumes" lists them ({name, volume_uuid,
 * mountpoint, mode, type, nfsvolume, export_path}), and each is
 *
 *   <data_root>/<vm_uuid>/mounts/<mountpoint without its leading "/">
 *
 * its parent directories made, its last component a symlink to the volume's
 * export_path (the lab has no bind mounts without root; "mode" is recorded, not
 * enforced on the files). Nothing under mounts/ but the links is followed: a parent
 * that is a symlink or a file is refused.
 *
 * Errors are negative errno values with a message in err; nothing is owned past a
 * call.
 */
#ifndef DC_INSTANCE_MOUNTS_H
#define DC_INSTANCE_MOUNTS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "instance_dir.h"

/* The fault of a mountpoint (absolute, no empty, "." or ".." segment, at most 1024
 * characters), or NULL. */
const char *instance_mountpoint_fault(const char *mountpoint);

/* Makes (or makes again) the link of each entry of `volumes` (borrowed, vm.json's
 * "volumes"); an existing link is replaced by a rename, so a reader sees the old link
 * or the new one. */
int instance_mounts_make(const instance_paths_t *p, const json_t *volumes, char *err,
                         size_t errlen);

/* true when every entry's link is a symlink that resolves to a directory. */
bool instance_mounts_ok(const instance_paths_t *p, const json_t *volumes);

#endif
