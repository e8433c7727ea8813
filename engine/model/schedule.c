/*
 * schedule.c -- a schedule's definition read and normalized, its next tick, and the
 * uuid of a tick's job; see schedule.h.
 */
#include "model/schedule.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/describe.h"
#include "base/error.h"

static const char *const members[] = {"workflow", "name",      "params",  "target", "every",
                                      "cron",     "time_zone", "overlap", "paused"};

int schedule_interval_parse(const char *text, uint64_t *ms, char *err, size_t errlen)
{
    const char *s = text;
    uint64_t total = 0;
    bool any = false;
    while (*s != '\0') {
        if (!isdigit((unsigned char)*s))
            goto Bad;
        char *end;
        unsigned long long n = strtoull(s, &end, 10);
        if (end - s > 9)
            goto Bad;
        s = end;
        uint64_t unit;
        if (strncmp(s, "ms", 2) == 0) {
            unit = 1;
            s += 2;
        } else if (*s == 'd') {
            unit = 86400000;
            s++;
        } else if (*s == 'h') {
            unit = 3600000;
            s++;
        } else if (*s == 'm') {
            unit = 60000;
            s++;
        } else if (*s == 's') {
            unit = 1000;
            s++;
        } else {
            goto Bad;
        }
        total += n * unit;
        any = true;
    }
    if (!any)
        goto Bad;
    if (total < SCHEDULE_EVERY_MIN_MS)
        return err_set(err, errlen, TERN_EINVAL,
                       "\"%.40s\" is under one second, the shortest interval", text);
    *ms = total;
    return 0;
Bad:
    return err_set(err, errlen, TERN_EINVAL,
                   "expected an interval such as \"30s\", \"5m\" or \"1h30m\" (units d, h, m, s, "
                   "ms), got \"%.40s\"",
                   text);
}

/* The string member `key` of v or NULL; TERN_EINVAL when it is there and not a string. */
static int get_string(const json_t *v, const char *path, const char *key, const char **out,
                      char *err, size_t errlen)
{
    const json_t *m = json_object_get(v, key);
    *out = NULL;
    if (m == NULL)
        return 0;
    if (!json_is_string(m) || json_string_length(m) == 0) {
        char buf[64];
        return err_set(err, errlen, TERN_EINVAL, "%s%s: expected a non-empty string, got %s", path,
                       key, describe_json(m, buf, sizeof buf));
    }
    *out = json_string_value(m);
    return 0;
}

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= SCHEDULE_NAME_MAX || !isalnum((unsigned char)s[0]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-' &&
            s[i] != '@') /* "@": a task's schedule per server, net-reconcile@cn1 */
            return false;
    return true;
}

static int parse(const json_t *v, const char *path, const char *implied, bool *paused,
                 schedule_spec_t *out, char *err, size_t errlen)
{
    char buf[64];
    if (!json_is_object(v)) {
        /* "schedules[0]." names the member itself without its dot. */
        size_t n = strlen(path);
        return err_set(err, errlen, TERN_EINVAL, "%.*s: expected an object, got %s",
                       n > 0 ? (int)n - 1 : 8, n > 0 ? path : "schedule",
                       describe_json(v, buf, sizeof buf));
    }
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)v, key, value)
    {
        bool known = false;
        for (size_t i = 0; i < TERN_ARRAY_SIZE(members) && !known; i++)
            known = strcmp(key, members[i]) == 0 && (paused != NULL || strcmp(key, "paused") != 0);
        if (!known)
            return err_set(err, errlen, TERN_EINVAL,
                           "%s%s: unknown member; a schedule has workflow, name, params, target, "
                           "every, cron, time_zone and overlap%s",
                           path, key, paused != NULL ? " (and paused)" : "");
        (void)value;
    }
    const char *workflow, *name, *target, *every, *cron, *tz, *overlap;
    int rc;
    if ((rc = get_string(v, path, "workflow", &workflow, err, errlen)) != 0 ||
        (rc = get_string(v, path, "name", &name, err, errlen)) != 0 ||
        (rc = get_string(v, path, "target", &target, err, errlen)) != 0 ||
        (rc = get_string(v, path, "every", &every, err, errlen)) != 0 ||
        (rc = get_string(v, path, "cron", &cron, err, errlen)) != 0 ||
        (rc = get_string(v, path, "time_zone", &tz, err, errlen)) != 0 ||
        (rc = get_string(v, path, "overlap", &overlap, err, errlen)) != 0)
        return rc;
    if (implied != NULL) {
        if (workflow != NULL)
            return err_set(err, errlen, TERN_EINVAL,
                           "%sworkflow: not allowed: a workflow's schedule runs that workflow",
                           path);
        if (name == NULL)
            return err_set(err, errlen, TERN_EINVAL,
                           "%sname: required (it keeps the schedule one when the workflow is "
                           "loaded again)",
                           path);
        workflow = implied;
    } else if (workflow == NULL) {
        return err_set(err, errlen, TERN_EINVAL, "%sworkflow: required (a workflow uuid or name)",
                       path);
    }
    if (name != NULL && !valid_name(name))
        return err_set(err, errlen, TERN_EINVAL,
                       "%sname: expected a letter or digit, then up to %d letters, digits, '_', "
                       "'.', '-' or '@', got \"%.40s\"",
                       path, SCHEDULE_NAME_MAX - 2, name);
    const json_t *params = json_object_get(v, "params");
    if (params != NULL && !json_is_object(params))
        return err_set(err, errlen, TERN_EINVAL, "%sparams: expected an object, got %s", path,
                       describe_json(params, buf, sizeof buf));
    const json_t *p = json_object_get(v, "paused");
    if (paused != NULL) {
        if (p != NULL && !json_is_boolean(p))
            return err_set(err, errlen, TERN_EINVAL, "%spaused: expected true or false, got %s",
                           path, describe_json(p, buf, sizeof buf));
        *paused = json_is_true(p);
    }
    if ((every == NULL) == (cron == NULL))
        return err_set(err, errlen, TERN_EINVAL,
                       every != NULL ? "%severy: give either every or cron, not both"
                                     : "%severy: required, or cron (one of them)",
                       path);
    char why[256];
    memset(out, 0, sizeof *out);
    if (every != NULL) {
        if (tz != NULL)
            return err_set(err, errlen, TERN_EINVAL,
                           "%stime_zone: only with cron (an interval is the same in every zone)",
                           path);
        if (schedule_interval_parse(every, &out->every_ms, why, sizeof why) != 0)
            return err_set(err, errlen, TERN_EINVAL, "%severy: %s", path, why);
    } else {
        if (cron_parse(cron, &out->cron, why, sizeof why) != 0)
            return err_set(err, errlen, TERN_EINVAL, "%scron: %s", path, why);
        if (time_zone_load(tz != NULL ? tz : "UTC", &out->zone, why, sizeof why) != 0)
            return err_set(err, errlen, TERN_EINVAL, "%stime_zone: %s", path, why);
    }
    out->overlap = SCHEDULE_OVERLAP_SKIP;
    if (overlap != NULL) {
        if (strcmp(overlap, "queue") == 0) {
            out->overlap = SCHEDULE_OVERLAP_QUEUE;
        } else if (strcmp(overlap, "skip") != 0) {
            time_zone_free(out->zone);
            out->zone = NULL;
            return err_set(err, errlen, TERN_EINVAL,
                           "%soverlap: expected \"skip\" or \"queue\", got \"%.40s\"", path,
                           overlap);
        }
    }
    json_t *doc = json_object();
    json_object_set_new(doc, "workflow", json_string(workflow));
    if (name != NULL)
        json_object_set_new(doc, "name", json_string(name));
    json_object_set_new(doc, "params", params != NULL ? json_deep_copy(params) : json_object());
    if (target != NULL)
        json_object_set_new(doc, "target", json_string(target));
    if (every != NULL) {
        json_object_set_new(doc, "every", json_string(every));
    } else {
        json_object_set_new(doc, "cron", json_string(cron));
        json_object_set_new(doc, "time_zone", json_string(tz != NULL ? tz : "UTC"));
    }
    json_object_set_new(doc, "overlap",
                        json_string(out->overlap == SCHEDULE_OVERLAP_QUEUE ? "queue" : "skip"));
    out->doc = doc;
    out->workflow = json_string_value(json_object_get(doc, "workflow"));
    out->name = json_string_value(json_object_get(doc, "name"));
    out->target = json_string_value(json_object_get(doc, "target"));
    out->params = json_object_get(doc, "params");
    return 0;
}

int schedule_spec_parse(const json_t *v, const char *path, const char *workflow, bool *paused,
                        schedule_spec_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    return parse(v, path != NULL ? path : "", workflow, paused, out, err, errlen);
}

int schedule_spec_parse_text(const char *text, size_t len, schedule_spec_t *out, char *err,
                             size_t errlen)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *v = json_loadb(text, len, 0, &je);
    if (v == NULL)
        return err_set(err, errlen, TERN_EINVAL, "stored schedule: %s", je.text);
    int rc = parse(v, "", NULL, NULL, out, err, errlen);
    json_decref(v);
    return rc;
}

void schedule_spec_dispose(schedule_spec_t *s)
{
    json_decref(s->doc);
    time_zone_free(s->zone);
    memset(s, 0, sizeof *s);
}

int schedule_next(const schedule_spec_t *s, int64_t anchor_ms, int64_t after_ms, int64_t *out_ms)
{
    if (s->every_ms == 0)
        return cron_next(&s->cron, s->zone, after_ms, out_ms);
    int64_t every = (int64_t)s->every_ms;
    if (after_ms < anchor_ms) {
        *out_ms = anchor_ms + every;
        return 0;
    }
    *out_ms = anchor_ms + ((after_ms - anchor_ms) / every + 1) * every;
    return 0;
}

static uint64_t fnv1a(const char *s, uint64_t h)
{
    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

void schedule_job_uuid(const char *schedule_uuid, int64_t tick_ms, char out[37])
{
    char text[96];
    snprintf(text, sizeof text, "%s/%lld", schedule_uuid, (long long)tick_ms);
    uint64_t a = fnv1a(text, 0xcbf29ce484222325ull);
    uint64_t b = fnv1a(text, a ^ 0x84222325cbf29ce4ull);
    /* Version 8 (made by a rule of its own, RFC 9562), variant 10. */
    a = (a & ~0xf000ull) | 0x8000ull;
    b = (b & 0x3fffffffffffffffull) | 0x8000000000000000ull;
    snprintf(out, 37, "%08llx-%04llx-%04llx-%04llx-%012llx", (unsigned long long)(a >> 32),
             (unsigned long long)((a >> 16) & 0xffff), (unsigned long long)(a & 0xffff),
             (unsigned long long)(b >> 48), (unsigned long long)(b & 0xffffffffffffull));
}
