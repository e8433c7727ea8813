/*
 * volume_spec.c -- volume names and --volume values; see volume_spec.h.
 */
#include "volume_spec.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

#define SPEC_FORM "NAME:/MOUNTPOINT, NAME:/MOUNTPOINT:ro or NAME:/MOUNTPOINT:rw"

static bool name_char(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (!first && (c == '_' || c == '.' || c == '-'));
}

const char *volume_name_fault(const char *name)
{
    size_t n = strlen(name);
    if (n == 0)
        return "is empty";
    if (!name_char(name[0], true))
        return "must start with a letter or a digit";
    for (size_t i = 1; i < n; i++)
        if (!name_char(name[i], false))
            return "may hold only letters, digits, '_', '.' and '-'";
    if (n < 2)
        return "must be at least 2 characters";
    if (n > VOLUME_NAME_MAX)
        return "must be at most 256 characters";
    return NULL;
}

/* One value split: name, mountpoint and mode, each a malloc'd string (mode NULL when
 * not given). */
typedef struct mount {
    const char *spec;
    char *name, *mountpoint, *mode;
} mount_t;

static void mount_dispose(mount_t *m)
{
    free(m->name);
    free(m->mountpoint);
    free(m->mode);
}

/* Splits `spec` at its colons: NAME before the first (none when it starts with '/'),
 * MODE after the last when there are two, MOUNTPOINT between. */
static void mount_split(const char *spec, mount_t *m)
{
    *m = (mount_t){.spec = spec};
    const char *rest = spec;
    if (spec[0] != '/') {
        const char *colon = strchr(spec, ':');
        if (colon == NULL) {
            m->name = xstrdup(spec);
            return;
        }
        m->name = xstrndup(spec, (size_t)(colon - spec));
        rest = colon + 1;
    } else {
        m->name = xstrdup("");
    }
    const char *last = strrchr(rest, ':');
    if (last != NULL) {
        m->mountpoint = xstrndup(rest, (size_t)(last - rest));
        m->mode = xstrdup(last + 1);
    } else {
        m->mountpoint = xstrdup(rest);
    }
}

/* The mountpoint as compared for duplicates: repeated and trailing slashes dropped
 * (malloc'd). */
static char *mountpoint_key(const char *mp)
{
    char *k = xstrdup(mp);
    size_t at = 0;
    for (size_t i = 0; mp[i] != '\0'; i++)
        if (!(mp[i] == '/' && at > 0 && k[at - 1] == '/'))
            k[at++] = mp[i];
    while (at > 1 && k[at - 1] == '/')
        at--;
    k[at] = '\0';
    return k;
}

/* True when the path has a ".." segment. */
static bool has_dotdot(const char *mp)
{
    for (const char *p = mp; (p = strstr(p, "..")) != NULL; p += 2)
        if ((p == mp || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
            return true;
    return false;
}

/* True when `s` is UTF-8 text (what a JSON string may hold). */
static bool utf8_valid(const char *s)
{
    json_t *j = json_string(s);
    bool ok = j != NULL;
    json_decref(j);
    return ok;
}

/* What is wrong with one value alone, into err; true when nothing is. */
static bool mount_check(const mount_t *m, char *err, size_t errlen)
{
    if (m->mountpoint == NULL) {
        snprintf(err, errlen, "--volume \"%s\": no mountpoint: expected " SPEC_FORM, m->spec);
        return false;
    }
    if (m->name[0] == '\0') {
        snprintf(err, errlen,
                 "--volume \"%s\": no volume name (tern mounts only named shared volumes): "
                 "expected " SPEC_FORM,
                 m->spec);
        return false;
    }
    const char *fault = volume_name_fault(m->name);
    if (fault != NULL) {
        snprintf(err, errlen,
                 "--volume \"%s\": volume name \"%s\" %s (2-256 of A-Za-z0-9_.-, starting "
                 "with a letter or digit)",
                 m->spec, m->name, fault);
        return false;
    }
    const char *mp = m->mountpoint;
    if (strlen(mp) > VOLUME_MOUNTPOINT_MAX) {
        /* Not echoed whole: the first characters say which value it is. */
        snprintf(err, errlen,
                 "--volume \"%.40s...\": mountpoint is longer than %d characters (%zu)", m->spec,
                 VOLUME_MOUNTPOINT_MAX, strlen(mp));
        return false;
    }
    if (mp[0] != '/')
        fault = mp[0] == '\0' ? "is empty" : "is not absolute (it must start with /)";
    else if (mp[strspn(mp, "/")] == '\0')
        fault = "is the root";
    else if (has_dotdot(mp))
        fault = "has a \"..\" segment";
    else if (strchr(mp, ':') != NULL)
        fault = "holds a colon";
    else if (!utf8_valid(mp))
        fault = "is not UTF-8";
    if (fault != NULL) {
        snprintf(err, errlen, "--volume \"%s\": mountpoint \"%s\" %s", m->spec, mp, fault);
        return false;
    }
    if (m->mode != NULL && strcmp(m->mode, "ro") != 0 && strcmp(m->mode, "rw") != 0) {
        snprintf(err, errlen,
                 "--volume \"%s\": mode \"%s\": expected ro or rw (a mountpoint may not hold "
                 "a colon)",
                 m->spec, m->mode);
        return false;
    }
    return true;
}

bool volume_spec_parse(const json_t *specs, json_t **volumes, char *err, size_t errlen)
{
    *volumes = NULL;
    size_t n = json_array_size(specs);
    mount_t *mounts = xcalloc(n > 0 ? n : 1, sizeof *mounts);
    char **keys = xcalloc(n > 0 ? n : 1, sizeof *keys);
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        mount_split(json_string_value(json_array_get(specs, i)), &mounts[i]);
        if (mounts[i].mountpoint != NULL)
            keys[i] = mountpoint_key(mounts[i].mountpoint);
    }
    /* A shared mountpoint first: it names both values, whatever else is wrong with
     * either (`-v /bar -v foo:/bar`). */
    for (size_t i = 0; ok && i < n; i++)
        for (size_t j = 0; ok && j < i; j++)
            if (keys[i] != NULL && keys[j] != NULL && strcmp(keys[i], keys[j]) == 0) {
                snprintf(err, errlen,
                         "--volume \"%s\": mountpoint %s is also that of --volume \"%s\"; "
                         "each mountpoint takes one volume",
                         mounts[i].spec, mounts[i].mountpoint, mounts[j].spec);
                ok = false;
            }
    for (size_t i = 0; ok && i < n; i++)
        ok = mount_check(&mounts[i], err, errlen);
    if (ok) {
        *volumes = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(*volumes,
                                  json_pack("{s:s, s:s, s:s}", "name", mounts[i].name, "mountpoint",
                                            mounts[i].mountpoint, "mode",
                                            mounts[i].mode != NULL ? mounts[i].mode : "rw"));
    }
    for (size_t i = 0; i < n; i++) {
        mount_dispose(&mounts[i]);
        free(keys[i]);
    }
    free(mounts);
    free(keys);
    return ok;
}
