/*
 * common.c -- allocation wrappers, error formatting, clocks and uuids shared by every
 * engine file. See common.h.
 */
#include "common.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static void die_oom(size_t n)
{
    fprintf(stderr, "tern: out of memory allocating %zu bytes\n", n);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        die_oom(n);
    return p;
}

void *xcalloc(size_t nmemb, size_t n)
{
    void *p = calloc(nmemb ? nmemb : 1, n ? n : 1);
    if (p == NULL)
        die_oom(nmemb * n);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        die_oom(n);
    return q;
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *p = xmalloc(len + 1);
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        die_oom(strlen(fmt));
    return s;
}

int tern_seterr(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

uint64_t tern_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t tern_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void tern_iso_time(uint64_t ms, char out[32])
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

uint64_t tern_random_u64(void)
{
    uint64_t v;
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) {
        /* getrandom on Linux >= 3.17 does not fail for 8 bytes once seeded; fall back
         * to a clock mix rather than abort. */
        v = tern_mono_ms() * 6364136223846793005ull + (uint64_t)clock();
    }
    return v;
}

char *tern_u64_text(uint64_t v, char buf[TERN_U64_DIGITS + 1])
{
    char *p = buf + TERN_U64_DIGITS;
    *p = '\0';
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    return p;
}

bool tern_uuid_v4(char out[37])
{
    /* One getrandom for both halves and the hex written by hand: every job create
     * makes one, and two system calls and a snprintf were 2 % of ternd's CPU per
     * HTTP create. */
    uint8_t b[16];
    bool kernel = getrandom(b, sizeof b, 0) == (ssize_t)sizeof b;
    if (!kernel) {
        uint64_t a = tern_random_u64(), c = tern_random_u64();
        memcpy(b, &a, 8);
        memcpy(b + 8, &c, 8);
    }
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    static const char hex[] = "0123456789abcdef";
    char *p = out;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *p++ = '-';
        *p++ = hex[b[i] >> 4];
        *p++ = hex[b[i] & 0x0f];
    }
    *p = '\0';
    return kernel;
}

bool tern_uuid_valid(const char *s)
{
    static const int dash[] = {8, 13, 18, 23};
    if (s == NULL || strlen(s) != 36)
        return false;
    for (int i = 0, d = 0; i < 36; i++) {
        if (d < 4 && i == dash[d]) {
            if (s[i] != '-')
                return false;
            d++;
            continue;
        }
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
            return false;
    }
    return true;
}
