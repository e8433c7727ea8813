/*
 * instance_volumes.c -- the volumes a create is asked to mount (instance_volumes.h).
 */
#include "instance_volumes.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "instance_dir.h"
#include "instance_mounts.h"

/* NULL, or what is wrong with a path holding a control character. */
static const char *control_fault(const char *path)
{
    for (const char *p = path; *p != '\0'; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return "holds a control character";
    return NULL;
}

/* true when `inner` is `outer` or lies below it. */
static bool path_within(const char *inner, const char *outer)
{
    size_t n = strlen(outer);
    return strncmp(inner, outer, n) == 0 && (inner[n] == '\0' || inner[n] == '/');
}

static const char *string_or_null(const json_t *v, bool *ok)
{
    *ok = v == NULL || json_is_null(v) || json_is_string(v);
    return json_string_value(v);
}

json_t *instance_volumes_plan(const json_t *volumes, char *msg, size_t msglen)
{
    if (volumes == NULL || json_is_null(volumes))
        return json_array();
    if (!json_is_array(volumes) || json_array_size(volumes) > INSTANCE_VOLUMES_MAX) {
        snprintf(msg, msglen, "volumes: expected an array of at most %d mounts",
                 INSTANCE_VOLUMES_MAX);
        return NULL;
    }
    json_t *out = json_array();
    size_t i;
    const json_t *m;
    json_array_foreach(volumes, i, m)
    {
        char fault[640] = "";
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)m, key, v)
        {
            if (strcmp(key, "name") != 0 && strcmp(key, "volume_uuid") != 0 &&
                strcmp(key, "mountpoint") != 0 && strcmp(key, "mode") != 0 &&
                strcmp(key, "type") != 0 && strcmp(key, "nfsvolume") != 0 &&
                strcmp(key, "export_path") != 0 && fault[0] == '\0')
                snprintf(fault, sizeof fault,
                         "%.64s: unknown (expected name, volume_uuid, mountpoint, mode, type, "
                         "nfsvolume, export_path)",
                         key);
        }
        const char *name = json_string_value(json_object_get(m, "name"));
        const char *uuid = json_string_value(json_object_get(m, "volume_uuid"));
        const char *mp = json_string_value(json_object_get(m, "mountpoint"));
        const char *mode = json_string_value(json_object_get(m, "mode"));
        const char *type = json_string_value(json_object_get(m, "type"));
        const char *export_path = json_string_value(json_object_get(m, "export_path"));
        bool nfs_ok;
        const char *nfs = string_or_null(json_object_get(m, "nfsvolume"), &nfs_ok);
        const char *why;
        if (!json_is_object(m))
            snprintf(fault, sizeof fault, "expected an object");
        else if (fault[0] != '\0')
            ;
        else if (name == NULL || name[0] == '\0')
            snprintf(fault, sizeof fault, "name: expected the volume's name");
        else if (!dc_uuid_ok(uuid))
            snprintf(fault, sizeof fault, "volume_uuid: expected a lowercase UUID");
        else if ((why = instance_mountpoint_fault(mp)) != NULL || (why = control_fault(mp)) != NULL)
            snprintf(fault, sizeof fault, "mountpoint: \"%.200s\": %s", mp != NULL ? mp : "", why);
        else if (mode == NULL || (strcmp(mode, "rw") != 0 && strcmp(mode, "ro") != 0))
            snprintf(fault, sizeof fault, "mode: expected \"rw\" or \"ro\"");
        else if (type == NULL || strcmp(type, "tritonnfs") != 0)
            snprintf(fault, sizeof fault, "type: expected \"tritonnfs\"");
        else if (!nfs_ok)
            snprintf(fault, sizeof fault, "nfsvolume: expected a string or null");
        else if (export_path == NULL || strlen(export_path) >= PATH_MAX)
            snprintf(fault, sizeof fault, "export_path: expected the volume's export directory");
        else if ((why = instance_mountpoint_fault(export_path)) != NULL ||
                 (why = control_fault(export_path)) != NULL)
            snprintf(fault, sizeof fault, "export_path: \"%.200s\": %s", export_path, why);
        for (size_t k = 0; fault[0] == '\0' && k < i; k++) {
            const char *other =
                json_string_value(json_object_get(json_array_get(out, k), "mountpoint"));
            if (path_within(mp, other) || path_within(other, mp))
                snprintf(fault, sizeof fault, "mountpoint: %.200s %s volumes[%zu]'s %.200s", mp,
                         strcmp(mp, other) == 0 ? "is also" : "overlaps", k, other);
        }
        if (fault[0] != '\0') {
            snprintf(msg, msglen, "volumes[%zu].%s", i, fault);
            json_decref(out);
            return NULL;
        }
        json_array_append_new(out,
                              json_pack("{s:s, s:s, s:s, s:s, s:s, s:s?, s:s}", "name", name,
                                        "volume_uuid", uuid, "mountpoint", mp, "mode", mode, "type",
                                        type, "nfsvolume", nfs, "export_path", export_path));
    }
    return out;
}

char *instance_volumes_metadata(const json_t *volumes)
{
    json_t *items = json_array();
    size_t i;
    const json_t *m;
    json_array_foreach(volumes, i, m)
    {
        /* Members in RFD 26's order: jansson keeps the order they are set in. */
        json_t *o = json_object();
        static const char *const keys[] = {"mountpoint", "name", "nfsvolume", "mode", "type"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            const json_t *v = json_object_get(m, keys[k]);
            json_object_set_new(o, keys[k], v != NULL ? json_deep_copy(v) : json_null());
        }
        json_array_append_new(items, o);
    }
    char *text = json_dumps(items, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(items);
    return text;
}
