/*
 * ident.h -- identifiers: random (version 4) UUIDs, their validation, and random
 * 64-bit values (not for secrets).
 */
#ifndef TERN_IDENT_H
#define TERN_IDENT_H

#include <stdbool.h>
#include <stdint.h>

/* Writes a fresh random (version 4) UUID in canonical lowercase form: 36 chars + NUL.
 * Returns true when its bits came from the kernel's random source, false when
 * getrandom failed and a clock mix stood in (unique enough for a name, not to be
 * trusted as never made before: see ops/job_create.c). */
bool uuid_v4(char out[37]);
/* True when s is a canonical lowercase or uppercase UUID. */
bool uuid_valid(const char *s);
/* A uniformly random 64-bit value (not for secrets). */
uint64_t random_u64(void);

#endif /* TERN_IDENT_H */
