/*
 * volume_spec.h -- what the CLI judges of volume names and of the mounts of `tern vm
 * create --volume NAME:/MOUNTPOINT[:ro|:rw]` before any request.
 *
 * A name is 2 to 256 of A-Za-z0-9_.- starting with a letter or digit (RFD 26's rule,
 * the same the datacenter applies). A --volume value is NAME, a colon, an absolute
 * MOUNTPOINT, and optionally ":ro" or ":rw" (default rw); it becomes one entry
 * {"name", "mountpoint", "mode"} of the provision's "volumes" (the type is left to its
 * default, tritonnfs). A MOUNTPOINT is absolute, not "/" alone, has no ".." segment
 * and no colon, and is at most 1024 characters; two values may not share a mountpoint
 * ("/bar" and "/bar/" are one), which is also what refuses Docker's `-v /bar -v
 * foo:/bar` (a local volume and a shared one on one mountpoint). A value without a
 * NAME ("/bar") is refused: tern mounts only named shared volumes.
 * Pure: no request is made here.
 */
#ifndef TERN_CLI_VOLUME_SPEC_H
#define TERN_CLI_VOLUME_SPEC_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#define VOLUME_NAME_MAX       256
#define VOLUME_MOUNTPOINT_MAX 1024

/* NULL when `name` is a valid volume name, else what is wrong with it (a static
 * string: "is empty", "must start with a letter or a digit", ...). */
const char *volume_name_fault(const char *name);

/* Parses the --volume values `specs` (an array of strings, in the order given;
 * borrowed) into *volumes, a new array of {"name", "mountpoint", "mode"} in that order.
 * Returns true, or false with *volumes NULL and a message in err naming the value
 * ("--volume \"data\": ...") and what is wrong. */
bool volume_spec_parse(const json_t *specs, json_t **volumes, char *err, size_t errlen);

#endif /* TERN_CLI_VOLUME_SPEC_H */
