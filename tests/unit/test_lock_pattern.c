/*
 * test_lock_pattern.c -- the regular expressions of job locks (lock_pattern.h): what
 * they match (a table of patterns and targets, and random patterns of the syntax POSIX
 * and JavaScript share checked against glibc's regexec, since whether a pattern matches
 * somewhere does not depend on how an engine picks among matches), what they refuse
 * and with which message, and that the worst program within the limits is tested in
 * bounded time.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <malloc.h>
#include <regex.h>

#include "base/alloc.h"
#include "base/error.h"
#include "model/lock_pattern.h"

static bool test_one(const char *pattern, const char *target)
{
    lock_pattern_t *p;
    char err[256];
    if (lock_pattern_compile(pattern, &p, err, sizeof err) != 0)
        fail_msg("\"%s\" refused: %s", pattern, err);
    bool m = lock_pattern_test(p, target, strlen(target));
    lock_pattern_free(p);
    return m;
}

typedef struct case_ {
    const char *pattern, *target;
    bool match;
} case_t;

static void test_table(void **state)
{
    (void)state;
    static const case_t cases[] = {
        /* Search anywhere, anchors. */
        {"vm", "a-vm-1", true},
        {"^vm-1[0-9]$", "vm-12", true},
        {"^vm-1[0-9]$", "vm-123", false},
        {"^vm-1[0-9]$", "xvm-12", false},
        {"", "anything", true},
        {"^$", "x", false},
        {"a$|^b", "ba", true},
        {"x^", "x", false},
        /* Lists of uuids, as locks are written. */
        {"^(6f0c1e2a-0000-4000-8000-000000000000|6f0c1e2a-0000-4000-8000-000000000001)$",
         "6f0c1e2a-0000-4000-8000-000000000001", true},
        {"^(6f0c1e2a-0000-4000-8000-000000000000|6f0c1e2a-0000-4000-8000-000000000001)$",
         "6f0c1e2a-0000-4000-8000-000000000002", false},
        /* Quantifiers, counted, stacked (POSIX) and lazy (JavaScript). */
        {"^a{2}$", "aa", true},
        {"^a{2}$", "aaa", false},
        {"^a{2,}$", "aaaa", true},
        {"^a{2,3}$", "aaaa", false},
        {"^a{0,0}b$", "b", true},
        {"^(ab)+$", "ababab", true},
        {"^(ab)+$", "ababa", false},
        {"^a**$", "aaa", true},
        {"^(a{2}){3}$", "aaaaaa", true},
        {"^(a{2}){3}$", "aaaaa", false},
        {"^a+?b*?c??$", "aab", true},
        {"^a{1,2}?$", "aa", true},
        {"(a*)*b", "aaac", false},
        {"(a|)+$", "b", true},
        /* Braces that are no quantifier are text, as in JavaScript. */
        {"a{", "a{", true},
        {"^{}$", "{}", true},
        {"x{a}", "x{a}", true},
        /* Bracket expressions. */
        {"[]a]", "]", true},
        {"[^]a]", "]a", false},
        {"[a-]", "-", true},
        {"[^a-z]", "abc", false},
        {"[^a-z]", "abC", true},
        {"[[:digit:]]+", "vm-7", true},
        {"^[[:alpha:]_][[:alnum:]_]*$", "_x9", true},
        {"^[[:space:]]$", "\t", true},
        {"[[:upper:]]", "abc", false},
        {"[[:punct:]]", "a.b", true},
        {"[[:xdigit:]]{2}", "zF0", true},
        {"[\\d-]", "-", true},
        {"[\\w.]+@", "a.b@", true},
        {"[\\]]", "]", true},
        {"[\\D]", "123", false},
        /* JavaScript escapes. */
        {"\\d+", "vm-7", true},
        {"^\\D+$", "vm-7", false},
        {"^\\w+$", "vm_7", true},
        {"\\W", "vm_7", false},
        {"\\s", "a b", true},
        {"\\S", " \t", false},
        {"^vm\\.1$", "vm.1", true},
        {"^vm\\.1$", "vmx1", false},
        {"^\\/vms\\/\\-1$", "/vms/-1", true},
        {"\\bfoo\\b", "a.foo!", true},
        {"\\bfoo\\b", "foobar", false},
        {"\\Boo", "foo", true},
        {"\\Bfo", "foo", false},
        {"^\\x41\\u00e9$", "A\xc3\xa9", true},
        {"^\\ud83d\\ude00$", "\xf0\x9f\x98\x80", true},
        {"(?:ab)+c", "ababc", true},
        {"(?<host>vm)-(?<n>\\d)", "vm-3", true},
        {"a\\tb", "a\tb", true},
        /* Code points: '.' and negated sets take a whole UTF-8 character. */
        {"^.$", "\xc3\xa9", true},
        {"^..$", "\xc3\xa9", false},
        {"^[^a]$", "\xe2\x82\xac", true},
        {"^[\xc3\xa0-\xc3\xbf]+$", "\xc3\xa9\xc3\xa0", true},
        {"^\xc3\xa9$", "\xc3\xa9", true},
        {"^.$", "\xff", true}, /* an invalid byte is one character */
        {"^[a-z]$", "\xff", false},
        /* '.' skips line terminators, as in JavaScript. */
        {"a.b", "a\nb", false},
        {"a.b", "a\rb", false},
        {"a[^x]b", "a\nb", true},
        /* Case matters. */
        {"VM", "vm", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        bool m = test_one(cases[i].pattern, cases[i].target);
        if (m != cases[i].match)
            fail_msg("\"%s\" on \"%s\": %s, expected %s", cases[i].pattern, cases[i].target,
                     m ? "match" : "no match", cases[i].match ? "match" : "no match");
    }
}

typedef struct refusal {
    const char *pattern;
    int rc;
    const char *message;
} refusal_t;

static void test_refusals(void **state)
{
    (void)state;
    static const refusal_t cases[] = {
        {"(.*)(.*)(.*)(.*)(.*)\\5\\4\\3\\2\\1x", TERN_EINVAL,
         "back-reference \\5 at offset 20 is not supported (locks are matched without "
         "back-references)"},
        {"a{1,1000}{1,1000}", TERN_E2BIG,
         "the pattern needs more than 2500 instructions (counted repetitions are expanded: "
         "lower their counts)"},
        {"(a{1,60}){1,60}", TERN_E2BIG,
         "the pattern needs more than 2500 instructions (counted repetitions are expanded: "
         "lower their counts)"},
        {"vm(?=1)", TERN_EINVAL, "lookahead (?= at offset 2 is not supported"},
        {"vm(?!1)", TERN_EINVAL, "lookahead (?! at offset 2 is not supported"},
        {"(?<=a)b", TERN_EINVAL, "lookbehind (?<= at offset 0 is not supported"},
        {"(?i)vm", TERN_EINVAL, "group (? at offset 0 is not supported"},
        {"a{,3}", TERN_EINVAL,
         "{,m} at offset 1 is ambiguous (POSIX reads {0,m}, JavaScript the text): write {0,m}"},
        {"a{3,2}", TERN_EINVAL, "repetition at offset 1: minimum 3 above maximum 2"},
        {"*a", TERN_EINVAL, "quantifier * at offset 0 has nothing to repeat"},
        {"a|+", TERN_EINVAL, "quantifier + at offset 2 has nothing to repeat"},
        {"^*", TERN_EINVAL, "quantifier at offset 1 has nothing to repeat"},
        {"{2}", TERN_EINVAL, "quantifier { at offset 0 has nothing to repeat"},
        {"vm-[0-9", TERN_EINVAL, "unterminated bracket expression at offset 3"},
        {"(vm", TERN_EINVAL, "unmatched ( at offset 0"},
        {"vm)", TERN_EINVAL, "unmatched ) at offset 2"},
        {"[z-a]", TERN_EINVAL, "range at offset 1 is out of order"},
        {"[[:word:]]", TERN_EINVAL, "unknown class [:word:] at offset 1"},
        {"[[=a=]]", TERN_EINVAL, "collating element [= at offset 1 is not supported"},
        {"a\\", TERN_EINVAL, "trailing backslash at offset 1"},
        {"\\p{L}", TERN_EINVAL, "escape \\p at offset 0 is not supported"},
        {"\\cJ", TERN_EINVAL, "escape \\c at offset 0 is not supported"},
        {"\\<a", TERN_EINVAL, "escape \\< at offset 0 is not supported"},
        {"\\x4", TERN_EINVAL, "\\x at offset 0: expected two hex digits"},
        {"\\ud800", TERN_EINVAL, "\\uD800 at offset 0: a lone surrogate never matches UTF-8"},
        {"\\01", TERN_EINVAL, "octal escape \\01 at offset 0 is not supported"},
        {"[\\1]", TERN_EINVAL, "octal escape \\1 at offset 1 is not supported"},
        {"[\\B]", TERN_EINVAL, "escape \\B at offset 1 is not supported"},
        {"a\xc3", TERN_EINVAL, "not valid UTF-8 at offset 1"},
        {"(?<1x>a)", TERN_EINVAL, "bad group name at offset 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        lock_pattern_t *p = (lock_pattern_t *)1;
        char err[256] = "";
        int rc = lock_pattern_compile(cases[i].pattern, &p, err, sizeof err);
        if (rc != cases[i].rc || strcmp(err, cases[i].message) != 0)
            fail_msg("\"%s\": %d \"%s\", expected %d \"%s\"", cases[i].pattern, rc, err,
                     cases[i].rc, cases[i].message);
        assert_null(p);
    }
}

/* The limits: the length, nesting, and the program's size counted before any program
 * is made (a{1,1000}{1,1000} would be a million instructions). */
static void test_limits(void **state)
{
    (void)state;
    char err[256];
    lock_pattern_t *p;
    char *text = xmalloc(LOCK_PATTERN_MAX_BYTES + 2);
    memset(text, 'a', LOCK_PATTERN_MAX_BYTES + 1);
    text[LOCK_PATTERN_MAX_BYTES + 1] = '\0';
    assert_int_equal(lock_pattern_compile(text, &p, err, sizeof err), TERN_E2BIG);
    assert_string_equal(err, "2049 bytes, the limit is 2048");
    /* Exactly the limit, and a program within its own. */
    memset(text, 'a', LOCK_PATTERN_MAX_BYTES);
    text[LOCK_PATTERN_MAX_BYTES] = '\0';
    assert_int_equal(lock_pattern_compile(text, &p, err, sizeof err), 0);
    assert_int_equal(lock_pattern_size(p), LOCK_PATTERN_MAX_BYTES + 1);
    lock_pattern_free(p);
    free(text);

    /* Fifty uuids: longer locks than that are rare. */
    char list[2048];
    size_t n = (size_t)snprintf(list, sizeof list, "^(");
    for (int i = 0; i < 50; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s6f0c1e2a-0000-4000-8000-0000000000%02d",
                              i ? "|" : "", i);
    snprintf(list + n, sizeof list - n, ")$");
    assert_int_equal(lock_pattern_compile(list, &p, err, sizeof err), 0);
    assert_true(lock_pattern_test(p, "6f0c1e2a-0000-4000-8000-000000000049", 36));
    assert_false(lock_pattern_test(p, "6f0c1e2a-0000-4000-8000-000000000050", 36));
    lock_pattern_free(p);

    /* The largest counts: refused fast, whatever they multiply to. */
    static const char *const huge[] = {"a{1000000}", "(a{1000}){1000}{1000}",
                                       "((((a{99}){99}){99}){99}){99}",
                                       "(()){1000000}{1000000}x{3000}"};
    for (size_t i = 0; i < sizeof huge / sizeof *huge; i++) {
        assert_int_equal(lock_pattern_compile(huge[i], &p, err, sizeof err), TERN_E2BIG);
        assert_null(p);
    }
    /* Empty groups repeated emit nothing. */
    assert_int_equal(lock_pattern_compile("(()){1000000}{1000000}x", &p, err, sizeof err), 0);
    assert_true(lock_pattern_test(p, "x", 1));
    lock_pattern_free(p);

    /* Nesting. */
    char deep[2 * LOCK_PATTERN_MAX_DEPTH + 8];
    memset(deep, '(', LOCK_PATTERN_MAX_DEPTH + 1);
    memset(deep + LOCK_PATTERN_MAX_DEPTH + 1, ')', LOCK_PATTERN_MAX_DEPTH + 1);
    deep[2 * LOCK_PATTERN_MAX_DEPTH + 2] = '\0';
    assert_int_equal(lock_pattern_compile(deep, &p, err, sizeof err), TERN_E2BIG);
    assert_string_equal(err, "more than 100 nested groups and quantifiers at offset 100");
    char stacked[LOCK_PATTERN_MAX_DEPTH + 8] = "a";
    memset(stacked + 1, '*', LOCK_PATTERN_MAX_DEPTH + 1);
    stacked[LOCK_PATTERN_MAX_DEPTH + 2] = '\0';
    assert_int_equal(lock_pattern_compile(stacked, &p, err, sizeof err), TERN_E2BIG);
}

/* A pattern holds about 16 bytes per unit of lock_pattern_size, whatever it is made of,
 * so that max_lock_instructions bounds the memory of every process's lock table: a
 * class like \S keeps 11 ranges for its one instruction. Measured with glibc's
 * counters (skipped under an allocator that keeps none). */
static void test_size_bounds_memory(void **state)
{
    (void)state;
    static const struct {
        const char *unit;
        int reps;
    } cases[] = {{"a", 2048},   {"\\S", 1024}, {"[\\sa]", 409},      {"\\W", 1024},
                 {"[^a]", 512}, {"\\d", 1024}, {"[0-9a-f]{8}-", 100}};
    enum { COPIES = 20 };
    bool measured = false;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char text[LOCK_PATTERN_MAX_BYTES + 1] = "";
        size_t len = strlen(cases[i].unit);
        for (int k = 0; k < cases[i].reps && (k + 1) * len <= LOCK_PATTERN_MAX_BYTES; k++)
            memcpy(text + k * len, cases[i].unit, len + 1);
        lock_pattern_t *p[COPIES] = {NULL};
        char err[256];
        size_t before = mallinfo2().uordblks, units = 0;
        int rc = 0;
        for (int k = 0; k < COPIES && rc == 0; k++) {
            rc = lock_pattern_compile(text, &p[k], err, sizeof err);
            if (rc == 0)
                units += lock_pattern_size(p[k]);
        }
        size_t after = mallinfo2().uordblks;
        if (rc != 0) {
            /* Refused at once (the leak checker of the sanitizer build sees it keeps
             * nothing). */
            assert_int_equal(rc, TERN_E2BIG);
            for (int k = 0; k < COPIES && p[k] != NULL; k++)
                lock_pattern_free(p[k]);
            continue;
        }
        assert_true(lock_pattern_size(p[0]) <= LOCK_PATTERN_MAX_PROGRAM);
        for (int k = 0; k < COPIES; k++)
            lock_pattern_free(p[k]);
        if (after == before)
            continue;
        measured = true;
        /* 16 bytes a unit, and up to 1 KiB per pattern for its own struct, the allocator's
         * headers and what the parser freed into its caches. */
        size_t bound = 16 * units + COPIES * 1024;
        print_message("%s x%d: %zu units, %zu bytes held (bound %zu)\n", cases[i].unit,
                      cases[i].reps, units / COPIES, (after - before) / COPIES, bound / COPIES);
        if (after - before > bound)
            fail_msg("%s x%d: %zu bytes for %zu units", cases[i].unit, cases[i].reps,
                     (after - before) / COPIES, units / COPIES);
    }
    if (!measured)
        skip();
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The worst programs within the limits against the longest target (1024 bytes) take
 * (target length x program size) steps: bounded well under a second even on a slow,
 * shared machine (a few ms on an idle one). */
static void test_worst_case_time(void **state)
{
    (void)state;
    static const char *const worst[] = {"(.?){1240}x", "(a*){830}b", "([[:alpha:]\\d\\s]?){1240}x",
                                        "(.*.*.*.*.*.*.*.*.*.*){80}x"};
    char target[1025];
    memset(target, 'a', 1024);
    target[1024] = '\0';
    for (size_t i = 0; i < sizeof worst / sizeof *worst; i++) {
        lock_pattern_t *p;
        char err[256];
        if (lock_pattern_compile(worst[i], &p, err, sizeof err) != 0)
            fail_msg("\"%s\" refused: %s", worst[i], err);
        assert_true(lock_pattern_size(p) > LOCK_PATTERN_MAX_PROGRAM * 9 / 10);
        double worst_ms = 0;
        for (int k = 0; k < 5; k++) {
            double t0 = now_ms();
            assert_false(lock_pattern_test(p, target, 1024));
            double ms = now_ms() - t0;
            worst_ms = ms > worst_ms ? ms : worst_ms;
        }
        print_message("\"%s\" (%zu instructions) on 1024 bytes: %.2f ms at most of 5\n", worst[i],
                      lock_pattern_size(p), worst_ms);
        if (worst_ms > 500)
            fail_msg("\"%s\" on 1024 bytes took %.0f ms", worst[i], worst_ms);
        lock_pattern_free(p);
    }
}

/* A test run in slices gives the answer of one run, and no slice spends much more than
 * its budget: whatever the pattern, a caller bounds the time of each slice. */
static void test_sliced(void **state)
{
    (void)state;
    static const struct {
        const char *pattern;
        bool match;
    } cases[] = {{"(.?){1240}x", false}, {"(.?){1240}x", true}, {"(a*){830}b", false},
                 {"a+x", true},          {"a{3}z", false},      {"^$", false}};
    char target[1025];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        memset(target, 'a', 1024);
        target[1024] = '\0';
        if (cases[i].match)
            target[700] = 'x';
        lock_pattern_t *p;
        char err[256];
        if (lock_pattern_compile(cases[i].pattern, &p, err, sizeof err) != 0)
            fail_msg("\"%s\" refused: %s", cases[i].pattern, err);
        uint64_t slice = 5000, slices = 0, total = 0;
        lock_match_t *m = lock_match_new(p, target, 1024);
        int r;
        do {
            uint64_t budget = slice;
            r = lock_match_run(m, &budget);
            uint64_t spent = slice - budget;
            /* Spent past the budget only to finish a code point: at most 3 steps per
             * instruction more. */
            assert_true(budget > 0 || r != LOCK_MATCH_MORE || spent == slice);
            total += spent;
            slices++;
            assert_true(slices < 100000);
        } while (r == LOCK_MATCH_MORE);
        assert_int_equal(r == LOCK_MATCH_YES, cases[i].match);
        assert_int_equal(lock_pattern_test(p, target, 1024), cases[i].match);
        /* Decided: the same answer again, for nothing. */
        uint64_t budget = 10;
        assert_int_equal(lock_match_run(m, &budget), r);
        assert_int_equal(budget, 10);
        lock_match_free(m);
        print_message("\"%s\": %llu steps in %llu slices\n", cases[i].pattern,
                      (unsigned long long)total, (unsigned long long)slices);
        lock_pattern_free(p);
    }
    /* How many steps a millisecond holds here, for the budget of job_ops's slices. */
    lock_pattern_t *p;
    char err[256];
    assert_int_equal(lock_pattern_compile("(.?){1240}x", &p, err, sizeof err), 0);
    memset(target, 'a', 1024);
    lock_match_t *m = lock_match_new(p, target, 1024);
    uint64_t budget = UINT64_MAX;
    double t0 = now_ms();
    assert_int_equal(lock_match_run(m, &budget), LOCK_MATCH_NO);
    double ms = now_ms() - t0;
    print_message("(.?){1240}x on 1024 bytes: %llu steps in %.2f ms\n",
                  (unsigned long long)(UINT64_MAX - budget), ms);
    lock_match_free(m);
    lock_pattern_free(p);
}

/* ---- against glibc ------------------------------------------------------------- */

typedef struct gen {
    uint64_t s;
    char *p;
    size_t n, cap;
} gen_t;

static unsigned rnd(gen_t *g, unsigned n)
{
    g->s = g->s * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((g->s >> 33) % n);
}

static void put(gen_t *g, const char *s)
{
    size_t l = strlen(s);
    if (g->n + l + 1 > g->cap)
        return;
    memcpy(g->p + g->n, s, l + 1);
    g->n += l;
}

/* Writes a random expression of the shared syntax (no empty alternatives, one
 * quantifier per atom, no backslash in brackets: the places where POSIX and JavaScript
 * part ways or glibc extends POSIX). Anchors only at the top: glibc lets ^ in a repeated
 * group match after the first iteration ("(b|^a)+c" matches "bac"). */
static void gen_expr(gen_t *g, int depth, bool top);

static void gen_atom(gen_t *g, int depth)
{
    static const char *const atoms[] = {"a",     "b",     "c",           ".",    "[ab]", "[^a]",
                                        "[a-b]", "[^bc]", "[[:alpha:]]", "[]a]", "[a-]", "-"};
    unsigned k = rnd(g, depth > 0 ? 16 : 12);
    if (k < 12) {
        put(g, atoms[k]);
    } else {
        put(g, "(");
        gen_expr(g, depth - 1, false);
        put(g, ")");
    }
    static const char *const quants[] = {"*", "+", "?", "{2}", "{1,2}", "{0,1}", "{2,}", "{0,3}"};
    if (rnd(g, 3) == 0)
        put(g, quants[rnd(g, 8)]);
}

static void gen_expr(gen_t *g, int depth, bool top)
{
    unsigned alts = 1 + (rnd(g, 4) == 0);
    for (unsigned a = 0; a < alts; a++) {
        if (a > 0)
            put(g, "|");
        if (top && rnd(g, 8) == 0)
            put(g, "^");
        unsigned n = 1 + rnd(g, 4);
        for (unsigned i = 0; i < n; i++)
            gen_atom(g, depth);
        if (top && rnd(g, 8) == 0)
            put(g, "$");
    }
}

static void test_against_glibc(void **state)
{
    (void)state;
    char pattern[256], target[16];
    gen_t g = {.s = 42, .p = pattern, .cap = sizeof pattern};
    size_t compared = 0, glibc_split = 0;
    for (int i = 0; i < 20000; i++) {
        g.n = 0;
        pattern[0] = '\0';
        gen_expr(&g, 2, true);
        regex_t re;
        if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0)
            fail_msg("glibc refuses \"%s\"", pattern);
        lock_pattern_t *p;
        char err[256];
        if (lock_pattern_compile(pattern, &p, err, sizeof err) != 0)
            fail_msg("\"%s\" refused: %s", pattern, err);
        for (int t = 0; t < 6; t++) {
            size_t len = rnd(&g, 8);
            for (size_t k = 0; k < len; k++)
                target[k] = "abc-]"[rnd(&g, 5)];
            target[len] = '\0';
            bool want = regexec(&re, target, 0, NULL, 0) == 0;
            bool got = lock_pattern_test(p, target, len);
            compared++;
            if (want == got)
                continue;
            /* glibc's REG_NOSUB matcher and its matcher with positions disagree on a
             * few nested repetitions (e.g. "b([^a]([a-]{0,3}$)(^b*)?|[]a]){1,2}[ab]{2}"
             * on "ba]]aa-", which only the first says matches): such a case is counted,
             * not judged. */
            regex_t full;
            regmatch_t m;
            assert_int_equal(regcomp(&full, pattern, REG_EXTENDED), 0);
            bool full_says = regexec(&full, target, 1, &m, 0) == 0;
            regfree(&full);
            if (full_says == want)
                fail_msg("\"%s\" on \"%s\": %d, glibc says %d", pattern, target, got, want);
            glibc_split++;
        }
        lock_pattern_free(p);
        regfree(&re);
    }
    assert_int_equal(compared, 120000);
    print_message("compared with glibc: %zu (pattern, target) pairs, %zu where glibc's two "
                  "matchers disagree\n",
                  compared, glibc_split);
    assert_true(glibc_split < compared / 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),           cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_limits),          cmocka_unit_test(test_size_bounds_memory),
        cmocka_unit_test(test_worst_case_time), cmocka_unit_test(test_against_glibc),
        cmocka_unit_test(test_sliced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
