/*
 * units.c -- human units, durations and times; see units.h.
 */
#include "units.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

char *units_bytes(double bytes, char *buf, size_t n)
{
    static const char *const prefix[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (!isfinite(bytes) || bytes < 0) {
        snprintf(buf, n, "?");
        return buf;
    }
    if (bytes < 1024) {
        snprintf(buf, n, "%.0f B", floor(bytes));
        return buf;
    }
    double v = bytes / 1024;
    size_t u = 0;
    /* Move up a unit when the value would print as 1024 or more. */
    while (v >= 1023.5 && u + 1 < sizeof prefix / sizeof prefix[0]) {
        v /= 1024;
        u++;
    }
    if (v < 9.995)
        snprintf(buf, n, "%.2f %s", v, prefix[u]);
    else if (v < 99.95)
        snprintf(buf, n, "%.1f %s", v, prefix[u]);
    else
        snprintf(buf, n, "%.0f %s", v, prefix[u]);
    return buf;
}

char *units_rate(double bytes_per_s, char *buf, size_t n)
{
    char b[32];
    units_bytes(bytes_per_s, b, sizeof b);
    snprintf(buf, n, "%s/s", b);
    return buf;
}

char *units_duration_ms(uint64_t ms, char *buf, size_t n)
{
    unsigned long long v = ms;
    if (v < 1000)
        snprintf(buf, n, "%llums", v);
    else if (v < 10000)
        snprintf(buf, n, "%llu.%llus", v / 1000, (v % 1000) / 100);
    else if (v < 60000)
        snprintf(buf, n, "%llus", v / 1000);
    else if (v < 3600000)
        snprintf(buf, n, "%llum%02llus", v / 60000, (v / 1000) % 60);
    else
        snprintf(buf, n, "%lluh%02llum%02llus", v / 3600000, (v / 60000) % 60, (v / 1000) % 60);
    return buf;
}

char *units_eta_s(double seconds, char *buf, size_t n)
{
    if (!isfinite(seconds) || seconds < 0 || seconds > 1e12) {
        snprintf(buf, n, "?");
        return buf;
    }
    unsigned long long s = (unsigned long long)llround(seconds);
    if (s < 60)
        snprintf(buf, n, "%llus", s);
    else if (s < 3600)
        snprintf(buf, n, "%llum%02llus", s / 60, s % 60);
    else if (s < 86400)
        snprintf(buf, n, "%lluh%02llum", s / 3600, (s / 60) % 60);
    else
        snprintf(buf, n, "%llud%02lluh", s / 86400, (s / 3600) % 24);
    return buf;
}

/* Reads exactly `digits` decimal digits at *p into *out. */
static bool read_digits(const char **p, int digits, int *out)
{
    int v = 0;
    for (int i = 0; i < digits; i++) {
        if (!isdigit((unsigned char)(*p)[i]))
            return false;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += digits;
    *out = v;
    return true;
}

bool units_parse_iso(const char *s, uint64_t *ms)
{
    int year, mon, day, hour, min, sec;
    const char *p = s;
    if (!read_digits(&p, 4, &year) || *p++ != '-' || !read_digits(&p, 2, &mon) || *p++ != '-' ||
        !read_digits(&p, 2, &day) || (*p != 'T' && *p != 't' && *p != ' '))
        return false;
    p++;
    if (!read_digits(&p, 2, &hour) || *p++ != ':' || !read_digits(&p, 2, &min) || *p++ != ':' ||
        !read_digits(&p, 2, &sec))
        return false;
    if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60)
        return false;
    long frac_ms = 0;
    if (*p == '.') {
        p++;
        int digits = 0;
        long scale = 100;
        while (isdigit((unsigned char)*p)) {
            if (digits < 3) {
                frac_ms += (*p - '0') * scale;
                scale /= 10;
            }
            digits++;
            p++;
        }
        if (digits == 0)
            return false;
    }
    long offset_s = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p++ == '-' ? -1 : 1, oh, om;
        if (!read_digits(&p, 2, &oh))
            return false;
        if (*p == ':')
            p++;
        if (!read_digits(&p, 2, &om) || oh > 23 || om > 59)
            return false;
        offset_s = sign * (oh * 3600L + om * 60L);
    }
    if (*p != '\0')
        return false;
    struct tm tm = {.tm_year = year - 1900,
                    .tm_mon = mon - 1,
                    .tm_mday = day,
                    .tm_hour = hour,
                    .tm_min = min,
                    .tm_sec = sec};
    time_t t = timegm(&tm);
    if (t == (time_t)-1 || tm.tm_mday != day) /* timegm normalizes 31 February */
        return false;
    long long total = (long long)t - offset_s;
    if (total < 0)
        return false;
    *ms = (uint64_t)total * 1000u + (uint64_t)frac_ms;
    return true;
}

bool units_parse_relative(const char *s, uint64_t *ms)
{
    if (s[0] != '+' || !isdigit((unsigned char)s[1]))
        return false;
    char *end;
    unsigned long long v = strtoull(s + 1, &end, 10);
    uint64_t unit;
    if (strcmp(end, "s") == 0)
        unit = 1000;
    else if (strcmp(end, "m") == 0)
        unit = 60 * 1000;
    else if (strcmp(end, "h") == 0)
        unit = 3600 * 1000;
    else if (strcmp(end, "d") == 0)
        unit = 86400ull * 1000;
    else
        return false;
    if (v == 0 || v > UINT64_MAX / unit / 2)
        return false;
    *ms = v * unit;
    return true;
}
