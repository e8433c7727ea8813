/*
 * volume_ref.h -- the VOL of `tern volume get|delete|rename|snapshot|...`: which of an
 * owner's volumes a word names, decided from their records before any job is made.
 *
 * A VOL is a volume's uuid, its name, or the first 8 or more characters of its uuid,
 * tried in that order. A name names the volume that holds it: a failed volume gives
 * its name back (so a new one can take it), and is named by it only while no volume
 * that is not failed has it. Nothing named, or several (two failed volumes of one
 * name, a prefix of several uuids), is refused with a message naming the word and,
 * for several, each volume. Pure: reads the records given.
 */
#ifndef TERN_CLI_VOLUME_REF_H
#define TERN_CLI_VOLUME_REF_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* The fewest characters of a uuid that name a volume by prefix. */
#define VOLUME_REF_MIN_PREFIX 8

typedef enum volume_ref_status {
    VOLUME_REF_OK,
    VOLUME_REF_UNKNOWN,   /* nothing is named */
    VOLUME_REF_AMBIGUOUS, /* several volumes are */
} volume_ref_status_t;

/* Finds the volume among `volumes` (the owner's records, an array; borrowed) that
 * `ref` names. On VOLUME_REF_OK *vol is that element (borrowed from volumes);
 * otherwise *vol is NULL and err says why, naming `ref` and `owner`. */
volume_ref_status_t volume_ref_find(const json_t *volumes, const char *owner, const char *ref,
                                    const json_t **vol, char *err, size_t errlen);

#endif /* TERN_CLI_VOLUME_REF_H */
