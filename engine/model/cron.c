/*
 * cron.c -- cron expressions read into bit sets, and the next matching time found by
 * walking the zone's wall-clock days; see cron.h.
 */
#include "model/cron.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/error.h"

#define SEARCH_DAYS (366 * 30)

typedef struct field_def {
    const char *name;
    int lo, hi;
    const char *const *names; /* names of lo, lo+1, ... or NULL */
} field_def_t;

static const char *const month_names[] = {"jan", "feb", "mar", "apr", "may", "jun", "jul",
                                          "aug", "sep", "oct", "nov", "dec", NULL};
static const char *const weekday_names[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL};

static const field_def_t fields[5] = {
    {"minute", 0, 59, NULL},
    {"hour", 0, 23, NULL},
    {"day-of-month", 1, 31, NULL},
    {"month", 1, 12, month_names},
    /* 7 is Sunday too; it is folded into 0 once parsed. */
    {"day-of-week", 0, 7, weekday_names},
};

/* A number or a name of field f at *p. */
static bool field_value(const field_def_t *f, const char **p, int *out)
{
    const char *s = *p;
    if (isdigit((unsigned char)*s)) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end - s > 4)
            return false;
        *out = (int)v;
        *p = end;
        return true;
    }
    if (f->names != NULL)
        for (int i = 0; f->names[i] != NULL; i++)
            if (strncasecmp(s, f->names[i], 3) == 0 && !isalpha((unsigned char)s[3])) {
                *out = f->lo + i;
                *p = s + 3;
                return true;
            }
    return false;
}

/* One field's text (NUL-terminated) into bits; err names the field. */
static int field_parse(const field_def_t *f, const char *text, uint64_t *bits, char *err,
                       size_t errlen)
{
    *bits = 0;
    const char *s = text;
    for (;;) {
        int a, b, step = 1;
        if (*s == '*') {
            a = f->lo;
            b = f->hi;
            s++;
        } else {
            if (!field_value(f, &s, &a))
                return err_set(err, errlen, TERN_EINVAL,
                               "%s \"%s\": expected a number%s, \"*\", a range or a list", f->name,
                               text, f->names != NULL ? " or a name" : "");
            b = a;
            if (*s == '-') {
                s++;
                if (!field_value(f, &s, &b))
                    return err_set(err, errlen, TERN_EINVAL,
                                   "%s \"%s\": a range needs an end (\"a-b\")", f->name, text);
            } else if (*s == '/') {
                b = f->hi; /* "a/n": from a to the end */
            }
            if (a < f->lo || a > f->hi || b < f->lo || b > f->hi)
                return err_set(err, errlen, TERN_EINVAL, "%s \"%s\": %d is out of range %d-%d",
                               f->name, text, a < f->lo || a > f->hi ? a : b, f->lo, f->hi);
            if (b < a)
                return err_set(err, errlen, TERN_EINVAL,
                               "%s \"%s\": the range %d-%d runs backwards", f->name, text, a, b);
        }
        if (*s == '/') {
            s++;
            char *end;
            long v = isdigit((unsigned char)*s) ? strtol(s, &end, 10) : 0;
            if (v < 1 || v > f->hi + 1)
                return err_set(err, errlen, TERN_EINVAL,
                               "%s \"%s\": a step is a number from 1 to %d", f->name, text,
                               f->hi + 1);
            step = (int)v;
            s = end;
        }
        for (int v = a; v <= b; v += step)
            *bits |= 1ull << v;
        if (*s == '\0')
            return 0;
        if (*s != ',')
            return err_set(err, errlen, TERN_EINVAL, "%s \"%s\": unexpected \"%c\"", f->name, text,
                           *s);
        s++;
    }
}

int cron_parse(const char *expr, cron_t *out, char *err, size_t errlen)
{
    char copy[256];
    memset(out, 0, sizeof *out);
    if (strlen(expr) >= sizeof copy)
        return err_set(err, errlen, TERN_EINVAL, "expected at most %zu characters",
                       sizeof copy - 1);
    snprintf(copy, sizeof copy, "%s", expr);
    char *part[6], *save = NULL;
    int n = 0;
    for (char *t = strtok_r(copy, " \t", &save); t != NULL; t = strtok_r(NULL, " \t", &save)) {
        if (n == 5)
            return err_set(err, errlen, TERN_EINVAL,
                           "expected 5 fields (minute hour day-of-month month day-of-week), "
                           "got more");
        part[n++] = t;
    }
    if (n != 5)
        return err_set(err, errlen, TERN_EINVAL,
                       "expected 5 fields (minute hour day-of-month month day-of-week), got %d", n);
    uint64_t bits[5];
    for (int i = 0; i < 5; i++) {
        int rc = field_parse(&fields[i], part[i], &bits[i], err, errlen);
        if (rc != 0)
            return rc;
    }
    out->minutes = bits[0];
    out->hours = (uint32_t)bits[1];
    out->days = (uint32_t)bits[2];
    out->months = (uint16_t)bits[3];
    out->weekdays = (uint8_t)((bits[4] | (bits[4] >> 7)) & 0x7f);
    out->days_any = part[2][0] == '*';
    out->weekdays_any = part[4][0] == '*';
    /* A day of the month no month given has (the 30th of February) never comes: refused
     * rather than stored as a schedule that never runs. */
    if (out->weekdays_any) {
        static const int longest[13] = {0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        bool possible = false;
        for (int m = 1; m <= 12 && !possible; m++)
            for (int d = 1; d <= longest[m] && !possible; d++)
                possible = (out->months >> m & 1) && (out->days >> d & 1);
        if (!possible)
            return err_set(err, errlen, TERN_EINVAL,
                           "day-of-month \"%s\": no month in \"%s\" has such a day", part[2],
                           part[3]);
    }
    return 0;
}

static bool day_matches(const cron_t *c, unsigned day, unsigned weekday)
{
    bool dom = (c->days >> day) & 1, dow = (c->weekdays >> weekday) & 1;
    if (c->days_any || c->weekdays_any)
        return dom && dow;
    return dom || dow;
}

int cron_next(const cron_t *c, const time_zone_t *z, int64_t after_ms, int64_t *out_ms)
{
    int64_t after_s = after_ms >= 0 ? after_ms / 1000 : -((-after_ms + 999) / 1000);
    int64_t local = after_s + time_zone_offset(z, after_s);
    int64_t day0 = local >= 0 ? local / 86400 : -((-local + 86399) / 86400);
    /* A wall time maps to a UTC time no earlier than that of any wall time before it
     * (time_zone_from_local), so the first match after `after_ms` in wall-clock order
     * is the earliest. Wall times of the day before are looked at too: a time the
     * zone repeats may map before `local`. */
    for (int64_t day = day0 - 1; day < day0 + SEARCH_DAYS; day++) {
        int64_t y;
        unsigned m, d;
        time_zone_civil_from_days(day, &y, &m, &d);
        if (!((c->months >> m) & 1))
            continue;
        unsigned weekday = (unsigned)(((day % 7) + 7 + 4) % 7);
        if (!day_matches(c, d, weekday))
            continue;
        for (int h = 0; h < 24; h++) {
            if (!((c->hours >> h) & 1))
                continue;
            for (int mi = 0; mi < 60; mi++) {
                if (!((c->minutes >> mi) & 1))
                    continue;
                int64_t wall = day * 86400 + h * 3600 + mi * 60;
                /* No zone's wall clock moves back by four hours at once. */
                if (wall + 4 * 3600 < local)
                    continue;
                int64_t t = time_zone_from_local(z, wall) * 1000;
                if (t > after_ms) {
                    *out_ms = t;
                    return 0;
                }
            }
        }
    }
    return TERN_ENOENT;
}
