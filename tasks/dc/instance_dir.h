/*
 * instance_dir.h -- an instance on an agent's disk, under the server's data root:
 *
 *   <data_root>/<vm_uuid>/vm.json           the instance (written last, atomically:
 *                                           an instance without it is partial)
 *   <data_root>/<vm_uuid>/disks/diskN.img   disk N (0: boot), sparse
 *   <data_root>/<vm_uuid>/workload.pid      the running workload's pid
 *   <data_root>/<vm_uuid>/workload.log      its log
 *   <data_root>/images/<image_uuid>.img     the server's copy of an image
 *
 * Every path handed out is checked to lead inside the data root: a vm_uuid that is
 * not a UUID, or an instance directory that is a symlink or resolves elsewhere, is
 * refused before anything is read, written or removed.
 *
 * Errors are negative errno values with a message in err; json_t results are new
 * references.
 */
#ifndef DC_INSTANCE_DIR_H
#define DC_INSTANCE_DIR_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

typedef struct instance_paths {
    char dir[PATH_MAX];
    char disks[PATH_MAX];
    char vm_json[PATH_MAX];
    char pidfile[PATH_MAX];
} instance_paths_t;

/* true for a lowercase 8-4-4-4-12 hex UUID. */
bool dc_uuid_ok(const char *s);

/* The paths of instance `vm_uuid` under `root` (absolute, resolved). -EINVAL when
 * vm_uuid is not a UUID; -EPERM when <root>/<vm_uuid> (or its disks/) exists but is
 * not a directory of its own (a symlink, a file) or resolves outside root. The
 * directory need not exist. */
int instance_paths(const char *root, const char *vm_uuid, instance_paths_t *out, char *err,
                   size_t errlen);

/* <root>/images/<image_uuid>.img into out; -EINVAL when image_uuid is not a UUID. */
int instance_image_path(const char *root, const char *image_uuid, char *out, size_t outlen,
                        char *err, size_t errlen);

/* Removes the directory `dir` and everything in it, never following a symlink, after
 * checking that dir is <root>/<one name>. Absent is done. */
int instance_tree_remove(const char *root, const char *dir, char *err, size_t errlen);

/* Writes `doc` (borrowed) to path as "<path>.part", synced, renamed into place and the
 * directory synced: the file is the old one or the new one, whole. */
int instance_json_write(const char *path, const json_t *doc, char *err, size_t errlen);

/* Reads the JSON object at path into *out (new reference). -ENOENT when absent. */
int instance_json_read(const char *path, json_t **out, char *err, size_t errlen);

/* Reads instance vm_uuid's vm.json under root: 0 with *p and *vm (new reference).
 * Otherwise *vm is NULL, err says why and the value is -EINVAL (vm_uuid is not a
 * UUID), -EPERM (its directory is not its own: instance_paths), -ENOENT (no vm.json:
 * err names the file; *p is filled) or another negative errno (unreadable, or not a
 * JSON object: -EIO). instance_read_code names each for a task's failure. */
int instance_read(const char *root, const char *vm_uuid, instance_paths_t *p, json_t **vm,
                  char *err, size_t errlen);

/* The error code of an instance_read failure: InvalidArgument, PathOutsideDataRoot,
 * InstanceNotFound or InstanceUnreadable (a static string). */
const char *instance_read_code(int rc);

/* The workload customer_metadata (borrowed, may be NULL) asks for under
 * "lab:workload": "idle" when absent. NULL with err naming the value and the allowed
 * ones when it is not a workload the lab has. */
const char *instance_workload_kind(const json_t *customer_metadata, char *err, size_t errlen);

/* The workload kinds, for messages: "idle, writer". */
#define INSTANCE_WORKLOADS "idle, writer"

/* The instances under root: an array of {"uuid", "state", "dir", "pid", "alive"} for
 * each <root>/<uuid>/ holding a vm.json (new reference; [] when none). pid is null
 * when no pid file names a live workload of that instance. */
json_t *instance_scan(const char *root);

/* The pid of the instance's workload when its pid file names a live tern-workload
 * started for this instance (its --pidfile argument is this pid file), else 0. */
pid_t instance_workload_pid(const instance_paths_t *p);

#endif
