/*
 * migration_args.c -- the migration commands' arguments, judged before any request;
 * see migration_args.h.
 */
#include "migration_args.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "units.h"

#define P MIGRATION_TAKES_PLACEMENT
#define L MIGRATION_TAKES_LIMIT

const migration_action_t migration_actions[] = {
    {"begin", P | L | MIGRATION_HAS_PHASE, "Beginning the migration of", true},
    {"automatic", P | L | MIGRATION_HAS_PHASE, "Migrating", true},
    {"schedule", P | L | MIGRATION_TAKES_AT | MIGRATION_HAS_PHASE, "Scheduling the migration of",
     true},
    {"sync", L | MIGRATION_HAS_PHASE, "Synchronizing the migration of", false},
    {"switch", L | MIGRATION_HAS_PHASE, "Switching the migration of", false},
    {"pause", MIGRATION_HAS_PHASE, "Pausing the migration of", false},
    {"abort", MIGRATION_HAS_PHASE | MIGRATION_TAKES_TARGET_LOST, "Aborting the migration of",
     false},
    {"rollback", MIGRATION_HAS_PHASE, "Rolling back the migration of", false},
    {"finalize", 0, "Finalizing the migration of", false},
    {"estimate", L, "Estimating the migration of", false},
    {NULL, 0, NULL, false},
};

#undef P
#undef L

const migration_action_t *migration_action_find(const char *name)
{
    for (const migration_action_t *a = migration_actions; name != NULL && a->name != NULL; a++)
        if (strcmp(a->name, name) == 0)
            return a;
    return NULL;
}

/* True when the ISO time `s` names its zone (Z or an offset), which units_parse_iso
 * does not require. */
static bool has_zone(const char *s)
{
    size_t n = strlen(s);
    if (n > 0 && (s[n - 1] == 'Z' || s[n - 1] == 'z'))
        return true;
    /* "+HH:MM" or "+HHMM" after the seconds: a sign in the time part. */
    const char *t = strpbrk(s, "Tt ");
    return t != NULL && strpbrk(t, "+-") != NULL;
}

bool migration_parse_at(const char *s, uint64_t now_ms, char *iso, size_t isolen, char *err,
                        size_t errlen)
{
    uint64_t at_ms = 0;
    if (s[0] == '+') {
        uint64_t rel;
        if (!units_parse_relative(s, &rel)) {
            snprintf(err, errlen,
                     "--at \"%s\": expected a time from now: +N and a unit s, m, h or d (+10m)", s);
            return false;
        }
        at_ms = now_ms + rel;
    } else if (!units_parse_iso(s, &at_ms)) {
        snprintf(err, errlen,
                 "--at \"%s\": expected an ISO 8601 time in UTC (2026-11-27T03:00:00Z) or a "
                 "time from now (+10m)",
                 s);
        return false;
    } else if (!has_zone(s)) {
        snprintf(err, errlen, "--at \"%s\": give the zone: end the time with Z for UTC (%sZ)", s,
                 s);
        return false;
    }
    /* The API keeps seconds: a time within this second would be in the past there. */
    uint64_t at_s = (at_ms + 999) / 1000;
    if (at_s * 1000 <= now_ms) {
        snprintf(err, errlen, "--at \"%s\": that time is not in the future", s);
        return false;
    }
    time_t t = (time_t)at_s;
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL || tm.tm_year + 1900 > 9999) {
        snprintf(err, errlen, "--at \"%s\": too far in the future", s);
        return false;
    }
    strftime(iso, isolen, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return true;
}

bool migration_parse_limit(const char *s, double *mbps, char *err, size_t errlen)
{
    char *end = NULL;
    errno = 0;
    bool plain = s[0] != '\0' && (isdigit((unsigned char)s[0]) || s[0] == '.');
    double v = plain ? strtod(s, &end) : 0;
    if (!plain || errno != 0 || end == s || *end != '\0' || !isfinite(v)) {
        snprintf(err, errlen,
                 "--limit-mbps \"%s\": expected a positive number of megabits per "
                 "second (500, 80.5)",
                 s);
        return false;
    }
    if (v <= 0) {
        snprintf(err, errlen, "--limit-mbps \"%s\": must be more than 0", s);
        return false;
    }
    if (v > 1000000) {
        snprintf(err, errlen, "--limit-mbps \"%s\": at most 1000000 (a terabit per second)", s);
        return false;
    }
    *mbps = v;
    return true;
}

/* Appends `vm` to the array affinity[key], made when missing. */
static void add_vm(json_t *affinity, const char *key, const char *vm)
{
    json_t *list = json_object_get(affinity, key);
    if (!json_is_array(list)) {
        list = json_array();
        json_object_set_new(affinity, key, list);
    }
    json_array_append_new(list, json_string(vm));
}

bool migration_parse_affinity(const char *s, json_t *affinity, char *err, size_t errlen)
{
    bool ok = true;
    char *copy = xstrdup(s);
    char *save = NULL;
    if (copy[0] == '\0') {
        snprintf(err, errlen, "--affinity: expected far=VM, near=VM or rack=same|other");
        ok = false;
    }
    for (char *rule = strtok_r(copy, ",", &save); ok && rule != NULL;
         rule = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(rule, '=');
        const char *value = eq != NULL ? eq + 1 : "";
        if (eq != NULL)
            *eq = '\0';
        if (eq == NULL ||
            (strcmp(rule, "far") != 0 && strcmp(rule, "near") != 0 && strcmp(rule, "rack") != 0)) {
            snprintf(err, errlen,
                     "--affinity \"%s\": \"%s\" is not a rule: expected far=VM, near=VM or "
                     "rack=same|other",
                     s, rule);
            ok = false;
        } else if (value[0] == '\0') {
            snprintf(err, errlen, "--affinity \"%s\": %s= names nothing", s, rule);
            ok = false;
        } else if (strcmp(rule, "rack") == 0) {
            if (strcmp(value, "same") != 0 && strcmp(value, "other") != 0) {
                snprintf(err, errlen, "--affinity \"%s\": rack=%s: expected same or other", s,
                         value);
                ok = false;
            } else {
                json_object_set_new(affinity, "rack", json_string(value));
            }
        } else {
            add_vm(affinity, rule, value);
        }
    }
    free(copy);
    return ok;
}
