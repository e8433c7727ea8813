/*
 * ident.c -- see ident.h.
 */
#include "base/ident.h"

#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base/clock.h"

uint64_t random_u64(void)
{
    uint64_t v;
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) {
        /* getrandom on Linux >= 3.17 does not fail for 8 bytes once seeded; fall back
         * to a clock mix rather than abort. */
        v = clock_mono_ms() * 6364136223846793005ull + (uint64_t)clock();
    }
    return v;
}

bool uuid_v4(char out[37])
{
    /* One getrandom for both halves and the hex written by hand: every job create
     * makes one, and two system calls and a snprintf were 2 % of ternd's CPU per
     * HTTP create. */
    uint8_t b[16];
    bool kernel = getrandom(b, sizeof b, 0) == (ssize_t)sizeof b;
    if (!kernel) {
        uint64_t a = random_u64(), c = random_u64();
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

bool uuid_valid(const char *s)
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
