/*
 * time_zone.c -- TZif files and POSIX TZ rules read into a table of offsets; see
 * time_zone.h. The file format is RFC 8536's; the rule of its footer is POSIX's TZ
 * (names, offsets, and the Mm.w.d, Jn and n forms of a change's date).
 */
#include "model/time_zone.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

#define TZIF_MAX_BYTES (1u << 20)

typedef struct rule_date {
    char kind;    /* 'M' (month, week, weekday), 'J' (1-365, no Feb 29), 'N' (0-365) */
    int m, w, d;  /* for 'M' */
    int n;        /* for 'J' and 'N' */
    int32_t time; /* local time of the change, seconds after midnight */
} rule_date_t;

typedef struct tz_rule {
    bool present;
    bool has_dst;
    int32_t std_off, dst_off; /* seconds east of UTC */
    rule_date_t start, end;
} tz_rule_t;

struct time_zone {
    char *name;
    size_t n;       /* transitions */
    int64_t *at;    /* transition i happens at at[i] (UTC seconds), ascending */
    int32_t *off;   /* ... and the offset from then on */
    int32_t before; /* the offset before the first transition */
    tz_rule_t rule; /* after the last transition, when present */
};

/* ---- calendar (proleptic Gregorian, days since 1970-01-01) ------------------------ */

int64_t time_zone_days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void time_zone_civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
    *m = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static int64_t floor_div(int64_t a, int64_t b)
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

static bool is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static unsigned month_days(int64_t y, unsigned m)
{
    static const unsigned days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/* ---- POSIX TZ rules ----------------------------------------------------------------- */

static bool rule_name(const char **p)
{
    const char *s = *p;
    if (*s == '<') {
        const char *e = strchr(s, '>');
        if (e == NULL)
            return false;
        *p = e + 1;
        return true;
    }
    size_t n = 0;
    while ((s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= 'a' && s[n] <= 'z'))
        n++;
    if (n < 3)
        return false;
    *p = s + n;
    return true;
}

/* [+-]hh[:mm[:ss]] in seconds. */
static bool rule_hms(const char **p, int32_t *out)
{
    const char *s = *p;
    int sign = 1;
    if (*s == '+' || *s == '-')
        sign = *s++ == '-' ? -1 : 1;
    if (*s < '0' || *s > '9')
        return false;
    long part[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        char *end;
        part[i] = strtol(s, &end, 10);
        if (end == s || part[i] < 0 || part[i] > 167)
            return false;
        s = end;
        if (*s != ':' || i == 2)
            break;
        s++;
    }
    *out = (int32_t)(sign * (part[0] * 3600 + part[1] * 60 + part[2]));
    *p = s;
    return true;
}

static bool rule_date(const char **p, rule_date_t *rd)
{
    const char *s = *p;
    char *end;
    memset(rd, 0, sizeof *rd);
    rd->time = 7200;
    if (*s == 'M') {
        rd->kind = 'M';
        rd->m = (int)strtol(s + 1, &end, 10);
        if (*end != '.')
            return false;
        rd->w = (int)strtol(end + 1, &end, 10);
        if (*end != '.')
            return false;
        rd->d = (int)strtol(end + 1, &end, 10);
        if (rd->m < 1 || rd->m > 12 || rd->w < 1 || rd->w > 5 || rd->d < 0 || rd->d > 6)
            return false;
    } else if (*s == 'J') {
        rd->kind = 'J';
        rd->n = (int)strtol(s + 1, &end, 10);
        if (rd->n < 1 || rd->n > 365)
            return false;
    } else if (*s >= '0' && *s <= '9') {
        rd->kind = 'N';
        rd->n = (int)strtol(s, &end, 10);
        if (rd->n > 365)
            return false;
    } else {
        return false;
    }
    s = end;
    if (*s == '/') {
        s++;
        if (!rule_hms(&s, &rd->time))
            return false;
    }
    *p = s;
    return true;
}

/* Parses a footer such as "CET-1CEST,M3.5.0,M10.5.0/3"; false when it is not one. */
static bool rule_parse(const char *s, tz_rule_t *r)
{
    memset(r, 0, sizeof *r);
    int32_t west;
    if (!rule_name(&s) || !rule_hms(&s, &west))
        return false;
    r->std_off = -west;
    r->present = true;
    if (*s == '\0')
        return true;
    if (!rule_name(&s))
        return false;
    r->has_dst = true;
    r->dst_off = r->std_off + 3600;
    if (*s != ',' && *s != '\0') {
        if (!rule_hms(&s, &west))
            return false;
        r->dst_off = -west;
    }
    if (*s == '\0') {
        /* No dates: POSIX leaves them to the implementation; these are the US rules. */
        r->start = (rule_date_t){.kind = 'M', .m = 3, .w = 2, .d = 0, .time = 7200};
        r->end = (rule_date_t){.kind = 'M', .m = 11, .w = 1, .d = 0, .time = 7200};
        return true;
    }
    if (*s++ != ',' || !rule_date(&s, &r->start) || *s++ != ',' || !rule_date(&s, &r->end))
        return false;
    return *s == '\0';
}

/* The day (since the epoch) of a rule's date in year y. */
static int64_t rule_day(const rule_date_t *rd, int64_t y)
{
    int64_t jan1 = time_zone_days_from_civil(y, 1, 1);
    if (rd->kind == 'J')
        return jan1 + rd->n - 1 + (is_leap(y) && rd->n >= 60 ? 1 : 0);
    if (rd->kind == 'N')
        return jan1 + rd->n;
    int64_t first = time_zone_days_from_civil(y, (unsigned)rd->m, 1);
    int64_t wday = ((first % 7) + 7 + 4) % 7; /* 1970-01-01 was a Thursday */
    int64_t day = first + (rd->d - wday + 7) % 7 + (int64_t)(rd->w - 1) * 7;
    while (day >= first + month_days(y, (unsigned)rd->m))
        day -= 7;
    return day;
}

/* The UTC times daylight time starts and ends in year y. */
static void rule_changes(const tz_rule_t *r, int64_t y, int64_t *start, int64_t *end)
{
    *start = rule_day(&r->start, y) * 86400 + r->start.time - r->std_off;
    *end = rule_day(&r->end, y) * 86400 + r->end.time - r->dst_off;
}

static int32_t rule_offset(const tz_rule_t *r, int64_t t)
{
    if (!r->has_dst)
        return r->std_off;
    int64_t y;
    unsigned m, d;
    time_zone_civil_from_days(floor_div(t + r->std_off, 86400), &y, &m, &d);
    int64_t s, e;
    rule_changes(r, y, &s, &e);
    bool dst = s < e ? (t >= s && t < e) : !(t >= e && t < s);
    return dst ? r->dst_off : r->std_off;
}

/* ---- TZif ----------------------------------------------------------------------------- */

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const unsigned char *p)
{
    return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

typedef struct tzif_header {
    char version;
    uint32_t isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt;
} tzif_header_t;

static bool header_read(const unsigned char *p, size_t len, tzif_header_t *h)
{
    if (len < 44 || memcmp(p, "TZif", 4) != 0)
        return false;
    h->version = (char)p[4];
    h->isutcnt = be32(p + 20);
    h->isstdcnt = be32(p + 24);
    h->leapcnt = be32(p + 28);
    h->timecnt = be32(p + 32);
    h->typecnt = be32(p + 36);
    h->charcnt = be32(p + 40);
    return h->typecnt > 0 && h->typecnt <= 256 && h->timecnt <= 100000 && h->charcnt <= 100000 &&
           h->leapcnt <= 100000;
}

static size_t block_size(const tzif_header_t *h, size_t time_size)
{
    return h->timecnt * time_size + h->timecnt + h->typecnt * 6u + h->charcnt +
           h->leapcnt * (time_size + 4) + h->isstdcnt + h->isutcnt;
}

int time_zone_parse(const char *name, const unsigned char *buf, size_t len, time_zone_t **out,
                    char *err, size_t errlen)
{
    tzif_header_t h;
    if (!header_read(buf, len, &h))
        return err_set(err, errlen, TERN_EINVAL, "time zone \"%s\": not a TZif file", name);
    const unsigned char *p = buf + 44;
    size_t rest = len - 44, time_size = 4;
    if (h.version >= '2') {
        size_t skip = block_size(&h, 4);
        if (skip > rest || !header_read(p + skip, rest - skip, &h))
            return err_set(err, errlen, TERN_EINVAL, "time zone \"%s\": TZif file cut short", name);
        p += skip + 44;
        rest -= skip + 44;
        time_size = 8;
    }
    if (block_size(&h, time_size) > rest)
        return err_set(err, errlen, TERN_EINVAL, "time zone \"%s\": TZif file cut short", name);
    const unsigned char *times = p, *idx = p + h.timecnt * time_size, *types = idx + h.timecnt;
    for (uint32_t i = 0; i < h.timecnt; i++)
        if (idx[i] >= h.typecnt)
            return err_set(err, errlen, TERN_EINVAL,
                           "time zone \"%s\": transition %u names type %u of %u", name, i, idx[i],
                           h.typecnt);
    time_zone_t *z = xcalloc(1, sizeof *z);
    z->name = xstrdup(name);
    z->n = h.timecnt;
    z->at = xcalloc(z->n ? z->n : 1, sizeof *z->at);
    z->off = xcalloc(z->n ? z->n : 1, sizeof *z->off);
    for (size_t i = 0; i < z->n; i++) {
        z->at[i] = time_size == 8 ? be64(times + i * 8) : (int32_t)be32(times + i * 4);
        z->off[i] = (int32_t)be32(types + idx[i] * 6u);
    }
    z->before = (int32_t)be32(types);
    if (time_size == 8) {
        const unsigned char *footer = p + block_size(&h, 8);
        size_t flen = (size_t)(buf + len - footer);
        if (flen >= 2 && footer[0] == '\n') {
            const unsigned char *nl = memchr(footer + 1, '\n', flen - 1);
            if (nl != NULL && nl > footer + 1) {
                char *text = xstrndup((const char *)footer + 1, (size_t)(nl - footer - 1));
                bool ok = rule_parse(text, &z->rule);
                free(text);
                if (!ok) {
                    time_zone_free(z);
                    return err_set(err, errlen, TERN_EINVAL,
                                   "time zone \"%s\": its TZ rule does not parse", name);
                }
            }
        }
    }
    *out = z;
    return 0;
}

static bool name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 128 || name[0] == '/' || strstr(name, "..") != NULL)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '/' || c == '_' || c == '+' || c == '-'))
            return false;
    }
    return true;
}

int time_zone_load(const char *name, time_zone_t **out, char *err, size_t errlen)
{
    if (strcmp(name, "UTC") == 0) {
        time_zone_t *z = xcalloc(1, sizeof *z);
        z->name = xstrdup(name);
        *out = z;
        return 0;
    }
    if (!name_ok(name))
        return err_set(err, errlen, TERN_EINVAL,
                       "unknown time zone \"%s\" (an IANA name such as \"Europe/Paris\")", name);
    const char *dir = getenv("TZDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir != NULL && dir[0] != '\0' ? dir : TERN_ZONEINFO_DIR,
             name);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return err_set(err, errlen, TERN_EINVAL,
                       "unknown time zone \"%s\" (an IANA name such as \"Europe/Paris\")", name);
    /* Sized to the file (a few KiB): a zone is loaded each time a tick is fired. */
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (size <= 0 || size > (long)TZIF_MAX_BYTES || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return err_set(err, errlen, TERN_EINVAL,
                       "unknown time zone \"%s\" (an IANA name such as \"Europe/Paris\")", name);
    }
    unsigned char *buf = xmalloc((size_t)size);
    size_t len = fread(buf, 1, (size_t)size, f);
    bool failed = ferror(f) != 0;
    fclose(f);
    int rc = failed ? err_set(err, errlen, TERN_EINVAL,
                              "unknown time zone \"%s\": %s cannot be read", name, path)
                    : time_zone_parse(name, buf, len, out, err, errlen);
    free(buf);
    return rc;
}

void time_zone_free(time_zone_t *z)
{
    if (z == NULL)
        return;
    free(z->name);
    free(z->at);
    free(z->off);
    free(z);
}

const char *time_zone_name(const time_zone_t *z)
{
    return z->name;
}

int32_t time_zone_offset(const time_zone_t *z, int64_t t)
{
    if (z->n == 0 || t >= z->at[z->n - 1]) {
        if (z->rule.present)
            return rule_offset(&z->rule, t);
        return z->n == 0 ? z->before : z->off[z->n - 1];
    }
    if (t < z->at[0])
        return z->before;
    size_t lo = 0, hi = z->n - 1; /* at[lo] <= t < at[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (z->at[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    return z->off[lo];
}

/* The first change of offset after t, or t itself when none is known. */
static int64_t next_change(const time_zone_t *z, int64_t t)
{
    size_t lo = 0, hi = z->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (z->at[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < z->n)
        return z->at[lo];
    if (!z->rule.present || !z->rule.has_dst)
        return t;
    int64_t y;
    unsigned m, d;
    time_zone_civil_from_days(floor_div(t, 86400), &y, &m, &d);
    int64_t best = -1;
    for (int64_t yy = y - 1; yy <= y + 1; yy++) {
        int64_t s, e;
        rule_changes(&z->rule, yy, &s, &e);
        if (s > t && (best < 0 || s < best))
            best = s;
        if (e > t && (best < 0 || e < best))
            best = e;
    }
    return best > t ? best : t;
}

int64_t time_zone_from_local(const time_zone_t *z, int64_t local)
{
    int32_t oa = time_zone_offset(z, local - 86400), ob = time_zone_offset(z, local + 86400);
    int64_t ua = local - oa, ub = local - ob;
    bool a_ok = time_zone_offset(z, ua) == oa, b_ok = time_zone_offset(z, ub) == ob;
    if (a_ok && b_ok)
        return ua < ub ? ua : ub;
    if (a_ok)
        return ua;
    if (b_ok)
        return ub;
    /* Skipped: the wall clock jumped over `local`; the change is between ub and ua. */
    int64_t change = next_change(z, ua < ub ? ua : ub);
    return change;
}
