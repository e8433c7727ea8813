/*
 * vm_disks.h -- an instance's disks and snapshots as the agent keeps them, and the
 * one rule that binds them: vm.json agrees with the files once a step ends.
 *
 *   <dir>/disks/disk<N>.img                disk in PCI slot 0:4:N (N 0..7), sparse
 *   <dir>/snapshots/<name>/disk<N>.img     that disk's copy in snapshot <name>
 *   <dir>/snapshots/<name>.part/           a snapshot being made (never whole)
 *   <dir>/vm.json  "disks": [{"id", "boot", "image"?, "size", "pci_slot", "path"}]
 *                  (by PCI function), "snapshots": [{"name", "created_timestamp"}]
 *                  (oldest first: the order snapshot_bytes takes them in)
 *
 * The files decide: vm_disks_sync makes vm.json say what the files are (a disk whose
 * file is gone is dropped, each size is its file's, a whole snapshot directory is
 * listed, a .part one removed). Every path is built here from the instance directory
 * (checked by instance_paths), a PCI function and a checked snapshot name, never
 * taken from an argument or from vm.json.
 *
 * Runs on a pool thread (file_work.h): nothing here touches the loop. Errors are
 * negative errno values with a message in err.
 */
#ifndef DC_VM_DISKS_H
#define DC_VM_DISKS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "instance_dir.h"

#define VM_DISKS_MAX 8 /* PCI functions 0:4:0 .. 0:4:7 */

typedef struct vm_disks {
    instance_paths_t p;
    char snapshots[PATH_MAX]; /* <dir>/snapshots */
    json_t *vm;               /* vm.json as read, then changed by the work (owned) */
    json_t *as_read;          /* vm.json as read (owned): what vm_disks_sync compares */
} vm_disks_t;

/* The PCI function N of "0:4:N" (N 0..7), or -1 for anything else. */
int vm_disks_slot_function(const char *slot);

/* true for a snapshot name: ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$ (never "..", never a
 * slash, never ending in ".part"). */
bool vm_disks_snapshot_name_ok(const char *name);

/* Reads vm.json of instance vm_uuid under root into v. -ENOENT when the instance has
 * none; -EPERM when its directory or snapshots/ is not the data root's own. */
int vm_disks_open(const char *root, const char *vm_uuid, vm_disks_t *v, char *err, size_t errlen);

void vm_disks_close(vm_disks_t *v);

/* <dir>/disks/disk<function>.img into out (PATH_MAX). */
void vm_disks_file(const vm_disks_t *v, int function, char *out);

/* <snapshot_dir>/disk<function>.img into out (PATH_MAX): a disk's copy in a snapshot. */
void vm_disks_copy_file(const char *snapshot_dir, int function, char *out);

/* <dir>/snapshots/<name> (part: <name>.part) into out (PATH_MAX); name checked. */
void vm_disks_snapshot_dir(const vm_disks_t *v, const char *name, bool part, char *out);

/* The disk of vm.json (borrowed) with this id (NULL: any) in this PCI function (-1:
 * any), or NULL. */
json_t *vm_disks_find(const vm_disks_t *v, const char *id, int function);

/* Removes the directory `path` (a snapshot's, under snapshots/) and all in it, never
 * following a symlink. Absent is done. */
int vm_disks_remove_snapshot_dir(const vm_disks_t *v, const char *path, char *err, size_t errlen);

/* Removes what steps killed midway left: snapshots/<name>.part/ directories and
 * the disks' "<file>.part" files. Only while no step runs on the instance (at the agent's start).
 */
int vm_disks_remove_parts(const vm_disks_t *v, char *err, size_t errlen);

/* Makes vm.json agree with the files (see above) and writes it when that changed
 * anything. A disk file whose size is not whole MiB is -EINVAL naming it. */
int vm_disks_sync(vm_disks_t *v, char *err, size_t errlen);

/* The answer of the disk tasks (new reference in *out): {"disks": [{"id", "pci_slot",
 * "path", "size", "data_bytes", "snapshot_bytes", "snapshot_size"}], "snapshots":
 * [names, oldest first]}, measured on the files of the disks vm.json lists. */
int vm_disks_measure(const vm_disks_t *v, const atomic_bool *stop, json_t **out, char *err,
                     size_t errlen);

/* An ISO 8601 UTC time with milliseconds, "2026-01-02T03:04:05.678Z", into out. */
void vm_disks_now(char *out, size_t outlen);

#endif
