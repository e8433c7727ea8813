/*
 * disk_ref.h -- the DISK of `tern vm disk resize|delete`: which disk of an instance a
 * word names, decided from the instance's record before any job is made.
 *
 * A DISK is a PCI slot ("0:4:1", matched exactly), a disk id (a uuid), or the first 8
 * or more characters of one that no other disk of the instance shares. An unknown
 * DISK, an ambiguous prefix and a shorter one are refused with a message naming the
 * word and the instance's disks. Pure: reads the record given.
 */
#ifndef TERN_CLI_DISK_REF_H
#define TERN_CLI_DISK_REF_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* The fewest characters of an id that name a disk by prefix. */
#define DISK_REF_MIN_PREFIX 8

typedef enum disk_ref_status {
    DISK_REF_OK,
    DISK_REF_BAD,       /* neither a slot nor 8+ characters of an id */
    DISK_REF_UNKNOWN,   /* no disk of the instance is named */
    DISK_REF_AMBIGUOUS, /* a prefix of several disks' ids */
} disk_ref_status_t;

/* True when `s` is a PCI slot, "B:D:F" in decimal ("0:4:1"). */
bool disk_ref_is_slot(const char *s);

/* Finds the disk of `vm` (its record; borrowed) that `ref` names. On DISK_REF_OK *disk
 * is that element of vm.disks (borrowed from vm); otherwise *disk is NULL and err says
 * why, naming `ref` and `vm_name`. */
disk_ref_status_t disk_ref_find(const json_t *vm, const char *vm_name, const char *ref,
                                const json_t **disk, char *err, size_t errlen);

#endif /* TERN_CLI_DISK_REF_H */
