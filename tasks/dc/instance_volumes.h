/*
 * instance_volumes.h -- the volumes a create is asked to mount (dc.instance_create's
 * "volumes", dc.volumes_wait's answer) checked before anything is made, and what
 * vm.json says of them besides "volumes": internal_metadata["sdc:volumes"], the JSON
 * text RFD 26 gives, [{"mountpoint","name","nfsvolume","mode","type"}] in that
 * order. The mount links themselves are instance_mounts.h's.
 *
 * json_t results are new references; nothing else is owned past a call.
 */
#ifndef DC_INSTANCE_VOLUMES_H
#define DC_INSTANCE_VOLUMES_H

#include <stddef.h>

#include <jansson.h>

/* The most volumes an instance mounts. */
#define INSTANCE_VOLUMES_MAX 16

/* The volumes of a create's arguments (borrowed; NULL or null: none) checked and
 * copied: a new reference to an array, or NULL with msg naming the fault by its path
 * ("volumes[1].mountpoint: ..."). Each entry has exactly name, volume_uuid,
 * mountpoint (instance_mountpoint_fault's rules, no control character, used once and
 * never inside another's), mode ("rw" or "ro"), type ("tritonnfs"), nfsvolume (a
 * string or null) and export_path (absolute, no empty, "." or ".." segment). */
json_t *instance_volumes_plan(const json_t *volumes, char *msg, size_t msglen);

/* internal_metadata["sdc:volumes"] of the planned volumes (borrowed): malloc'd text,
 * or NULL when out of memory. */
char *instance_volumes_metadata(const json_t *volumes);

#endif
