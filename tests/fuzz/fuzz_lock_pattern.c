/*
 * fuzz_lock_pattern.c -- libFuzzer target for the regular expressions of job locks
 * (lock_pattern.h). The input is a pattern, then targets, separated by NUL bytes. Any
 * pattern is compiled (refused with a message, or accepted with a program within the
 * limit) and an accepted one is tested against each target. A short pattern of the
 * syntax POSIX and JavaScript share (a, b, c, '.', brackets, groups, '|', '*', '+',
 * '?', '^' first, '$' last) must get glibc's answer (regexec, REG_EXTENDED|REG_NOSUB)
 * on every target mapped onto a small alphabet, unless glibc's two matchers (with and
 * without positions) disagree with each other.
 */
#include <regex.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/lock_pattern.h"

#define DIFF_MAX_PATTERN 24 /* bytes: glibc compiles these in microseconds */
#define MAX_TARGETS      8

/* Whether glibc and lock patterns read `p` alike: a small alphabet, no backslash, '^'
 * only first or right after '[' (glibc lets '^' in a repeated group match after the
 * first iteration), '$' only last, no quantifier right after another (x+? is lazy for
 * locks, as in JavaScript, and (x+)? for POSIX). */
static bool in_shared_subset(const char *p, size_t len)
{
    if (len == 0 || len > DIFF_MAX_PATTERN)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (i > 0 && strchr("*+?", c) != NULL && strchr("*+?", p[i - 1]) != NULL)
            return false;
        if (strchr("abc.()|*+?[]-", c) != NULL && c != '\0')
            continue;
        if (c == '^' && (i == 0 || p[i - 1] == '['))
            continue;
        if (c == '$' && i == len - 1)
            continue;
        return false;
    }
    return true;
}

static bool glibc_says(const char *pattern, const char *target, int flags, bool *ok)
{
    regex_t re;
    *ok = regcomp(&re, pattern, REG_EXTENDED | flags) == 0;
    if (!*ok)
        return false;
    regmatch_t m;
    bool match = regexec(&re, target, flags & REG_NOSUB ? 0 : 1, &m, 0) == 0;
    regfree(&re);
    return match;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    const char *end = memchr(in, '\0', size);
    size_t plen = end != NULL ? (size_t)(end - in) : size;
    char *pattern = malloc(plen + 1);
    memcpy(pattern, in, plen);
    pattern[plen] = '\0';

    lock_pattern_t *p = (lock_pattern_t *)1;
    char err[256] = "";
    int rc = lock_pattern_compile(pattern, &p, err, sizeof err);
    if (rc != 0) {
        /* A refusal says why and leaves nothing behind. */
        if (p != NULL || err[0] == '\0')
            abort();
        free(pattern);
        return 0;
    }
    if (p == NULL || lock_pattern_size(p) == 0 || lock_pattern_size(p) > LOCK_PATTERN_MAX_PROGRAM)
        abort();
    bool diff = in_shared_subset(pattern, plen);
    size_t pos = end != NULL ? plen + 1 : size;
    for (int t = 0; t < MAX_TARGETS && pos <= size; t++) {
        const char *tstart = in + pos;
        const char *tend = memchr(tstart, '\0', size - pos);
        size_t tlen = tend != NULL ? (size_t)(tend - tstart) : size - pos;
        bool got = lock_pattern_test(p, tstart, tlen);
        if (diff && tlen <= 32) {
            char mapped[33];
            for (size_t i = 0; i < tlen; i++)
                mapped[i] = "abc-]"[(unsigned char)tstart[i] % 5];
            mapped[tlen] = '\0';
            got = lock_pattern_test(p, mapped, tlen);
            bool ok, ok_full;
            bool want = glibc_says(pattern, mapped, REG_NOSUB, &ok);
            bool full = glibc_says(pattern, mapped, 0, &ok_full);
            if (ok && ok_full && want == full && got != want) {
                fprintf(stderr, "\"%s\" on \"%s\": %d, glibc says %d\n", pattern, mapped, got,
                        want);
                abort();
            }
        }
        (void)got;
        pos += tlen + 1;
    }
    lock_pattern_free(p);
    free(pattern);
    return 0;
}
