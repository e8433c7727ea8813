/*
 * volume_ref.c -- which volume a VOL argument names; see volume_ref.h.
 */
#include "volume_ref.h"

#include <stdio.h>
#include <string.h>

static const char *str(const json_t *v, const char *key)
{
    const char *s = json_string_value(json_object_get(v, key));
    return s != NULL ? s : "?";
}

static bool is_failed(const json_t *v)
{
    return strcmp(str(v, "state"), "failed") == 0;
}

/* "1a2b3c4d (data, failed), ...": the volumes that match, for messages. */
static void list_matches(const json_t *const *matches, size_t n, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        int w =
            snprintf(buf + at, len - at, "%s%s (%s, %s)", i > 0 ? ", " : "",
                     str(matches[i], "uuid"), str(matches[i], "name"), str(matches[i], "state"));
        if (w < 0 || (size_t)w >= len - at)
            return;
        at += (size_t)w;
    }
}

/* The elements of `volumes` that `pred` keeps, the first up to `cap` into out; returns
 * how many matched in all. */
typedef bool (*match_fn)(const json_t *v, const char *ref, size_t len);

static size_t collect(const json_t *volumes, match_fn pred, const char *ref, const json_t **out,
                      size_t cap)
{
    size_t i, n = 0, len = strlen(ref);
    const json_t *v;
    json_array_foreach(volumes, i, v)
    {
        if (pred(v, ref, len)) {
            if (n < cap)
                out[n] = v;
            n++;
        }
    }
    return n;
}

static bool by_uuid(const json_t *v, const char *ref, size_t len)
{
    (void)len;
    return strcmp(str(v, "uuid"), ref) == 0;
}

static bool by_name(const json_t *v, const char *ref, size_t len)
{
    (void)len;
    const char *name = json_string_value(json_object_get(v, "name"));
    return name != NULL && strcmp(name, ref) == 0;
}

static bool by_live_name(const json_t *v, const char *ref, size_t len)
{
    return by_name(v, ref, len) && !is_failed(v);
}

static bool by_prefix(const json_t *v, const char *ref, size_t len)
{
    return len >= VOLUME_REF_MIN_PREFIX && strncmp(str(v, "uuid"), ref, len) == 0;
}

/* At most this many matches are named in a message. */
#define MATCHES_SHOWN 8

volume_ref_status_t volume_ref_find(const json_t *volumes, const char *owner, const char *ref,
                                    const json_t **vol, char *err, size_t errlen)
{
    *vol = NULL;
    const json_t *m[MATCHES_SHOWN];
    const char *how = "uuid";
    size_t n = collect(volumes, by_uuid, ref, m, MATCHES_SHOWN);
    if (n == 0) {
        how = "name";
        n = collect(volumes, by_live_name, ref, m, MATCHES_SHOWN);
        if (n == 0)
            n = collect(volumes, by_name, ref, m, MATCHES_SHOWN);
    }
    if (n == 0) {
        how = "uuid prefix";
        n = collect(volumes, by_prefix, ref, m, MATCHES_SHOWN);
    }
    if (n == 1) {
        *vol = m[0];
        return VOLUME_REF_OK;
    }
    if (n == 0) {
        snprintf(err, errlen,
                 "owner %s has no volume \"%s\" (a VOL is a volume's name, its uuid, or at "
                 "least %d characters of its uuid)",
                 owner, ref, VOLUME_REF_MIN_PREFIX);
        return VOLUME_REF_UNKNOWN;
    }
    char names[1024];
    list_matches(m, n < MATCHES_SHOWN ? n : MATCHES_SHOWN, names, sizeof names);
    snprintf(err, errlen,
             "volume \"%s\" is ambiguous: %zu volumes of owner %s have that %s (%s%s); "
             "name one by its uuid",
             ref, n, owner, how, names, n > MATCHES_SHOWN ? ", ..." : "");
    return VOLUME_REF_AMBIGUOUS;
}
