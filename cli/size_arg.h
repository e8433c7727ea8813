/*
 * size_arg.h -- the SIZE of `tern vm disk add|resize`: "N" or "NM" (MiB), "NG" (GiB),
 * or "remaining" (what is left of the instance's flexible_disk_size; add only).
 *
 * N is one or more decimal digits and nothing else: no sign, no space, no fraction, no
 * other unit ("10GB", "10MiB", "1T" are refused, so a size never means something the
 * user did not write). A size of 0 is refused, and so is one above SIZE_ARG_MAX_MIB.
 * Pure: no request is made, so a bad size is refused before anything is sent.
 */
#ifndef TERN_CLI_SIZE_ARG_H
#define TERN_CLI_SIZE_ARG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest size in MiB: 2^53 - 1, the largest integer the dc plugin's Lua scripts
 * (whose numbers are doubles) read exactly. */
#define SIZE_ARG_MAX_MIB ((UINT64_C(1) << 53) - 1)

typedef struct size_arg {
    bool remaining; /* "remaining" (then mib is 0) */
    uint64_t mib;   /* the size in MiB otherwise */
} size_arg_t;

/* Parses `s` into *out. `remaining_ok` allows "remaining". Returns true, or false with
 * a message naming `s` and what is expected in err. */
bool size_arg_parse(const char *s, bool remaining_ok, size_arg_t *out, char *err, size_t errlen);

#endif /* TERN_CLI_SIZE_ARG_H */
