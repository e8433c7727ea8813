/*
 * disk_ref.c -- which disk a DISK argument names; see disk_ref.h.
 */
#include "disk_ref.h"

#include <stdio.h>
#include <string.h>

bool disk_ref_is_slot(const char *s)
{
    /* three runs of 1-3 digits joined by ':' */
    for (int part = 0; part < 3; part++) {
        int digits = 0;
        while (*s >= '0' && *s <= '9' && digits < 4) {
            s++;
            digits++;
        }
        if (digits == 0 || digits > 3 || *s != (part < 2 ? ':' : '\0'))
            return false;
        if (part < 2)
            s++;
    }
    return true;
}

/* "0:4:0 (1a2b3c4d), 0:4:1 (...)": the instance's disks, for messages. */
static void list_disks(const json_t *disks, char *buf, size_t n)
{
    size_t i, at = 0;
    const json_t *d;
    buf[0] = '\0';
    json_array_foreach(disks, i, d)
    {
        const char *slot = json_string_value(json_object_get(d, "pci_slot"));
        const char *id = json_string_value(json_object_get(d, "id"));
        int w = snprintf(buf + at, n - at, "%s%s (%.8s)", i > 0 ? ", " : "",
                         slot != NULL ? slot : "?", id != NULL ? id : "?");
        if (w < 0 || (size_t)w >= n - at)
            return;
        at += (size_t)w;
    }
    if (i == 0)
        snprintf(buf, n, "none");
}

disk_ref_status_t disk_ref_find(const json_t *vm, const char *vm_name, const char *ref,
                                const json_t **disk, char *err, size_t errlen)
{
    *disk = NULL;
    const json_t *disks = json_object_get(vm, "disks");
    bool slot = disk_ref_is_slot(ref);
    size_t len = strlen(ref);
    if (!slot && len < DISK_REF_MIN_PREFIX) {
        snprintf(err, errlen,
                 "disk \"%s\": expected a PCI slot (0:4:1), a disk id or at least %d "
                 "characters of one",
                 ref, DISK_REF_MIN_PREFIX);
        return DISK_REF_BAD;
    }
    size_t i, found = 0;
    const json_t *d;
    json_array_foreach(disks, i, d)
    {
        const char *key = json_string_value(json_object_get(d, slot ? "pci_slot" : "id"));
        if (key == NULL)
            continue;
        bool match = slot ? strcmp(key, ref) == 0 : strncmp(key, ref, len) == 0;
        if (match && found++ == 0)
            *disk = d;
    }
    if (found == 1)
        return DISK_REF_OK;
    *disk = NULL;
    char names[512];
    list_disks(disks, names, sizeof names);
    if (found == 0) {
        snprintf(err, errlen, "instance %s has no disk \"%s\" (its disks: %s)", vm_name, ref,
                 names);
        return DISK_REF_UNKNOWN;
    }
    snprintf(err, errlen,
             "disk \"%s\" of instance %s is ambiguous: %zu disk ids start with it "
             "(its disks: %s); give more of the id or the PCI slot",
             ref, vm_name, found, names);
    return DISK_REF_AMBIGUOUS;
}
