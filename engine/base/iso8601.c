/*
 * iso8601.c -- ISO 8601 date-times to and from milliseconds since the epoch; see
 * iso8601.h.
 * Calendar arithmetic is the days-from-civil algorithm (proleptic Gregorian), so no
 * libc time zone state is touched.
 */
#include "base/iso8601.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "base/error.h"

/* Reads exactly n digits at *p and advances past them. */
static bool digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        char c = (*p)[i];
        if (c < '0' || c > '9')
            return false;
        v = v * 10 + (c - '0');
    }
    *p += n;
    *out = v;
    return true;
}

static int days_in_month(int y, int m)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

/* Days since 1970-01-01 of a valid date. */
static int64_t days_from_civil(int y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* Reads the zone at *p into an offset east of UTC in minutes. */
static bool zone(const char **p, int *offset_min)
{
    const char *s = *p;
    if (*s == 'Z' || *s == 'z') {
        *offset_min = 0;
        *p = s + 1;
        return true;
    }
    if (*s != '+' && *s != '-')
        return false;
    int sign = *s == '-' ? -1 : 1, hh, mm = 0;
    s++;
    if (!digits(&s, 2, &hh) || hh > 23)
        return false;
    if (*s == ':') {
        s++;
        if (!digits(&s, 2, &mm))
            return false;
    } else if (*s >= '0' && *s <= '9' && !digits(&s, 2, &mm)) {
        return false;
    }
    if (mm > 59)
        return false;
    *offset_min = sign * (hh * 60 + mm);
    *p = s;
    return true;
}

int iso8601_parse_ms(const char *s, uint64_t *out_ms)
{
    const char *p = s;
    int y, mo, d, h = 0, mi = 0, sec = 0, ms = 0, offset = 0;
    if (p == NULL || !digits(&p, 4, &y) || *p++ != '-' || !digits(&p, 2, &mo) || *p++ != '-' ||
        !digits(&p, 2, &d))
        return TERN_EINVAL;
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo))
        return TERN_EINVAL;
    if (*p == 'T' || *p == 't' || *p == ' ') {
        p++;
        if (!digits(&p, 2, &h) || *p++ != ':' || !digits(&p, 2, &mi))
            return TERN_EINVAL;
        if (*p == ':') {
            p++;
            if (!digits(&p, 2, &sec))
                return TERN_EINVAL;
            if (*p == '.' || *p == ',') {
                p++;
                int n = 0;
                for (; *p >= '0' && *p <= '9'; p++, n++)
                    if (n < 3)
                        ms = ms * 10 + (*p - '0');
                if (n == 0)
                    return TERN_EINVAL;
                for (; n < 3; n++)
                    ms *= 10;
            }
        }
        if (h > 23 || mi > 59 || sec > 59)
            return TERN_EINVAL;
        if (*p != '\0' && !zone(&p, &offset))
            return TERN_EINVAL;
    }
    if (*p != '\0')
        return TERN_EINVAL;
    int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - offset * 60;
    if (secs < 0)
        return TERN_EINVAL;
    *out_ms = (uint64_t)secs * 1000u + (uint64_t)ms;
    return 0;
}

void iso8601_format(uint64_t ms, char out[32])
{
    /* The text up to the second is kept for the last second asked (per thread): every
     * log line and every new job's view asks for the time, and gmtime_r and strftime
     * cost more than the rest of a line's fields together. */
    static __thread uint64_t cached_secs = UINT64_MAX;
    static __thread char cached[32];
    static __thread size_t cached_len;
    uint64_t secs_u = ms / 1000u;
    if (secs_u != cached_secs) {
        time_t secs = (time_t)secs_u;
        struct tm tm;
        gmtime_r(&secs, &tm);
        cached_len = strftime(cached, sizeof cached, "%Y-%m-%dT%H:%M:%S", &tm);
        cached_secs = secs_u;
    }
    memcpy(out, cached, cached_len);
    /* As snprintf(out + n, 32 - n, ".%03uZ", ms % 1000) would, cut to fit. */
    unsigned frac = (unsigned)(ms % 1000u);
    char tail[6] = {
        '.', (char)('0' + frac / 100), (char)('0' + frac / 10 % 10), (char)('0' + frac % 10), 'Z',
        '\0'};
    size_t room = 32 - cached_len - 1, n = room < 5 ? room : 5;
    memcpy(out + cached_len, tail, n);
    out[cached_len + n] = '\0';
}
