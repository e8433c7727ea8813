/*
 * params.h -- job parameters from the command line: `-p KEY=VALUE` and `-f FILE`.
 *
 * A VALUE that is valid JSON keeps its JSON type (`-p size=10`, `-p force=true`,
 * `-p disk='{"id":1}'`, `-p name='"007"'`); anything else is a string (`-p name=db1`,
 * `-p id=007`). A dotted KEY builds nested objects: `-p disk.size=10 -p disk.id=2` gives
 * {"disk": {"size": 10, "id": 2}}; a literal dot is written `\.`. A later -p for the
 * same key replaces the earlier value. -p values are set over the object read with -f
 * (a JSON object in a file, or "-" for standard input), whichever order they come in.
 */
#ifndef TERN_CLI_PARAMS_H
#define TERN_CLI_PARAMS_H

#include <stddef.h>

#include <jansson.h>

/* Sets one "KEY=VALUE" into `params` (an object, modified). Returns 0, or -1 with a
 * message in err: no '=', an empty key or key segment, or a key that goes through a
 * value that is not an object ("disk is 10, cannot set disk.size"). */
int params_set(json_t *params, const char *assignment, char *err, size_t errlen);

/* Reads a JSON object from `path` ("-": standard input). Returns a new reference, or
 * NULL with "FILE: line 2, column 5: ..." or "FILE: expected a JSON object" in err. */
json_t *params_load_file(const char *path, char *err, size_t errlen);

/* Deep-merges `src` (borrowed) into `dst` (modified): objects merge key by key, any
 * other value replaces. */
void params_merge(json_t *dst, const json_t *src);

#endif /* TERN_CLI_PARAMS_H */
