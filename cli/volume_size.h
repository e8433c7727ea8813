/*
 * volume_size.h -- the SIZE of `tern volume create -s SIZE`: a whole number of GiB
 * written "NG" or "Ng" (10G is 10240 MiB, the unit the API takes).
 *
 * G is the only unit and it is required, so a size never means something the user did
 * not write: "10" (no unit), "10M", "1T", "10GB", "10GiB", "0G", "-10G", "1.5G", "" and
 * "G" are refused before any request. A size the form allows may still not be one the
 * datacenter offers (exactly the list GET /volumesizes answers, never rounded):
 * volume_size_listed() judges it against that list.
 * Pure: no request is made here.
 */
#ifndef TERN_CLI_VOLUME_SIZE_H
#define TERN_CLI_VOLUME_SIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* The largest GiB a SIZE may say before it is judged against the list: 2^53 - 1 MiB
 * (what the dc plugin's Lua numbers hold exactly) in whole GiB. */
#define VOLUME_SIZE_MAX_GIB (((UINT64_C(1) << 53) - 1) / 1024)

/* What the CLI says of a size the datacenter does not offer (Triton's words, with the
 * command that lists the sizes). */
#define VOLUME_SIZE_NOT_AVAILABLE                                                                  \
    "volume size not available, use tern volume sizes command for available sizes"

/* Parses `s` into *mib. Returns true, or false with a message naming `s` and the form
 * expected in err (*mib is then 0). */
bool volume_size_parse(const char *s, uint64_t *mib, char *err, size_t errlen);

/* True when `sizes` (GET /volumesizes: an array of {"size": MiB, "type"}; borrowed)
 * holds `mib`. */
bool volume_size_listed(const json_t *sizes, uint64_t mib);

/* A size for people: "10G" when `mib` is whole GiB, else "1536M". */
void volume_size_text(uint64_t mib, char *buf, size_t n);

#endif /* TERN_CLI_VOLUME_SIZE_H */
