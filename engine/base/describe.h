/*
 * describe.h -- short descriptions of JSON values for error messages, so that every
 * message that names a bad value (workflow definitions, retry policies) shows it the
 * same way: `chain[1].retry.initial_ms: expected a positive integer, got -5`.
 */
#ifndef TERN_DESCRIBE_H
#define TERN_DESCRIBE_H

#include <stddef.h>

#include <jansson.h>

/* Describes `v` (borrowed): a container by its kind ("an object", "an array"), a
 * string quoted and cut after 40 characters, any other scalar in its JSON spelling.
 * Returns a static string or `buf` (of `len` bytes), which it fills. */
const char *describe_json(const json_t *v, char *buf, size_t len);

#endif /* TERN_DESCRIBE_H */
