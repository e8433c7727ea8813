/*
 * lock_pattern.c -- job locks' regular expressions: a parser to a syntax tree, a size
 * check of the program the tree would make, the program (Thompson's construction) and
 * a simulation of all its states at once over the target; see lock_pattern.h.
 *
 * This module owns the syntax and the matching of locks only; which locks exist and
 * which jobs they refuse is the business of ops/job_checks.c.
 *
 * Everything works on code points: the pattern is decoded from UTF-8 as it is parsed,
 * the target as it is matched. Bracket expressions become sorted, merged lists of code
 * point ranges (a negated one is stored as its complement), found by binary search.
 */
#include "model/lock_pattern.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

/* The code points a target can hold: Unicode's, then one per byte that is not valid
 * UTF-8 (CP_BAD + byte), which only `.` and negated sets match. */
#define CP_BAD    0x110000u
#define CP_LAST   (CP_BAD + 0xffu)
#define CP_NONE   0xffffffffu /* before the start or past the end of the target */
#define REP_INF   (-1)        /* no maximum: {n,} * + */
#define COUNT_CAP 1000000     /* counts above this read as this (the size check refuses them) */

typedef struct range {
    uint32_t lo, hi; /* inclusive */
} range_t;

typedef struct char_class {
    size_t first, n; /* its ranges in the pattern's `ranges`, sorted and disjoint */
} char_class_t;

/* ---- syntax tree ---------------------------------------------------------------- */

enum node_kind {
    N_EMPTY,
    N_CHAR,   /* val: a code point */
    N_ANY,    /* . */
    N_CLASS,  /* val: a class index */
    N_BOL,    /* ^ */
    N_EOL,    /* $ */
    N_WORDB,  /* \b */
    N_NWORDB, /* \B */
    N_CAT,    /* children from `first` through `next` */
    N_ALT,    /* children from `first` through `next` */
    N_REPEAT, /* `first` repeated min to max (REP_INF) times */
};

typedef struct node {
    enum node_kind kind;
    uint32_t val;
    int first, next; /* child list, -1 for none */
    int min, max;
    uint64_t size; /* instructions it emits, saturated at SIZE_CAP; 0 until counted */
    bool counted;
} node_t;

#define SIZE_CAP ((uint64_t)LOCK_PATTERN_MAX_PROGRAM + 1)

/* ---- program -------------------------------------------------------------------- */

enum op {
    OP_CHAR,  /* arg: the code point */
    OP_ANY,   /* any code point but a line terminator */
    OP_CLASS, /* arg: the class index */
    OP_SPLIT, /* go on at x and y */
    OP_JMP,   /* go on at x */
    OP_BOL,
    OP_EOL,
    OP_WORDB,
    OP_NWORDB,
    OP_MATCH,
};

typedef struct inst {
    enum op op;
    uint32_t arg;
    uint32_t x, y;
} inst_t;

struct lock_pattern {
    inst_t *prog;
    size_t n;
    range_t *ranges;
    char_class_t *classes;
    size_t size;   /* n plus the tables' memory in instructions (lock_pattern_size) */
    bool anchored; /* the program starts with ^: only a thread from the start can match */
};

/* What a test works in, n entries each (one test's, so that a table of many locks keeps
 * only their programs). */
typedef struct scratch {
    uint32_t *mark; /* the step at which a pc was last added to a list */
    uint32_t *list[2];
    uint32_t *stack;
    uint64_t steps; /* instructions visited so far: the work done (lock_match_run) */
} scratch_t;

#define SCRATCH_ON_STACK 256 /* programs up to this size test without allocating */

/* ---- parser --------------------------------------------------------------------- */

typedef struct parser {
    const unsigned char *s;
    size_t len, pos;
    node_t *nodes;
    size_t n_nodes, cap_nodes;
    range_t *ranges;
    size_t n_ranges, cap_ranges;
    char_class_t *classes;
    size_t n_classes, cap_classes;
    int depth; /* groups and quantifiers around the current position */
    int rc;
    char *err;
    size_t errlen;
} parser_t;

static int fail(parser_t *p, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Records the first error; returns -1 (no node) for the callers' convenience. */
static int fail(parser_t *p, int rc, const char *fmt, ...)
{
    if (p->rc == 0) {
        p->rc = rc;
        if (p->err != NULL && p->errlen > 0) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(p->err, p->errlen, fmt, ap);
            va_end(ap);
        }
    }
    return -1;
}

static int node_new(parser_t *p, enum node_kind kind, uint32_t val)
{
    if (p->n_nodes == p->cap_nodes) {
        p->cap_nodes = p->cap_nodes ? 2 * p->cap_nodes : 64;
        p->nodes = xrealloc(p->nodes, p->cap_nodes * sizeof *p->nodes);
    }
    node_t *n = &p->nodes[p->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->val = val;
    n->first = n->next = -1;
    return (int)p->n_nodes++;
}

static void range_add(parser_t *p, uint32_t lo, uint32_t hi)
{
    if (p->n_ranges == p->cap_ranges) {
        p->cap_ranges = p->cap_ranges ? 2 * p->cap_ranges : 32;
        p->ranges = xrealloc(p->ranges, p->cap_ranges * sizeof *p->ranges);
    }
    p->ranges[p->n_ranges++] = (range_t){lo, hi};
}

/* Decodes one code point of strict UTF-8 at s (len > 0 bytes left); returns its length
 * in bytes, or 0 when the bytes are not UTF-8. */
static size_t utf8_decode(const unsigned char *s, size_t len, uint32_t *cp)
{
    unsigned c = s[0];
    size_t n;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if (c >= 0xc2 && c < 0xe0) {
        n = 2, v = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c < 0xf0) {
        n = 3, v = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c < 0xf5) {
        n = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (len < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return n;
}

/* The ranges of the shorthand classes and POSIX classes (ASCII, as the C locale). */
static const range_t DIGIT[] = {{'0', '9'}};
static const range_t WORD[] = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
/* JavaScript's \s: WhiteSpace and LineTerminator. */
static const range_t SPACE_JS[] = {
    {0x09, 0x0d},     {0x20, 0x20},     {0xa0, 0xa0},     {0x1680, 0x1680}, {0x2000, 0x200a},
    {0x2028, 0x2029}, {0x202f, 0x202f}, {0x205f, 0x205f}, {0x3000, 0x3000}, {0xfeff, 0xfeff}};

typedef struct named_class {
    const char *name;
    range_t r[4];
    size_t n;
} named_class_t;

static const named_class_t POSIX_CLASSES[] = {
    {"alpha", {{'A', 'Z'}, {'a', 'z'}}, 2},
    {"digit", {{'0', '9'}}, 1},
    {"alnum", {{'0', '9'}, {'A', 'Z'}, {'a', 'z'}}, 3},
    {"upper", {{'A', 'Z'}}, 1},
    {"lower", {{'a', 'z'}}, 1},
    {"space", {{0x09, 0x0d}, {' ', ' '}}, 2},
    {"blank", {{'\t', '\t'}, {' ', ' '}}, 2},
    {"punct", {{0x21, 0x2f}, {0x3a, 0x40}, {0x5b, 0x60}, {0x7b, 0x7e}}, 4},
    {"print", {{0x20, 0x7e}}, 1},
    {"graph", {{0x21, 0x7e}}, 1},
    {"cntrl", {{0x00, 0x1f}, {0x7f, 0x7f}}, 2},
    {"xdigit", {{'0', '9'}, {'A', 'F'}, {'a', 'f'}}, 3},
};

/* Adds `r` (sorted, disjoint), or everything else when `negate`. */
static void ranges_add_set(parser_t *p, const range_t *r, size_t n, bool negate)
{
    if (!negate) {
        for (size_t i = 0; i < n; i++)
            range_add(p, r[i].lo, r[i].hi);
        return;
    }
    uint32_t next = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].lo > next)
            range_add(p, next, r[i].lo - 1);
        next = r[i].hi + 1;
    }
    if (next <= CP_LAST)
        range_add(p, next, CP_LAST);
}

static int cmp_range(const void *a, const void *b)
{
    const range_t *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Makes the ranges from `first` on one class (sorted, merged, complemented when
 * `negate`); returns its index. */
static uint32_t class_end(parser_t *p, size_t first, bool negate)
{
    range_t *r = p->ranges + first;
    size_t n = p->n_ranges - first, m = 0;
    qsort(r, n, sizeof *r, cmp_range);
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && (uint64_t)r[i].lo <= (uint64_t)r[m - 1].hi + 1) {
            if (r[i].hi > r[m - 1].hi)
                r[m - 1].hi = r[i].hi;
        } else {
            r[m++] = r[i];
        }
    }
    p->n_ranges = first + m;
    if (negate) {
        range_t *copy = xmalloc((m ? m : 1) * sizeof *copy);
        memcpy(copy, p->ranges + first, m * sizeof *copy);
        p->n_ranges = first;
        ranges_add_set(p, copy, m, true);
        free(copy);
    }
    if (p->n_classes == p->cap_classes) {
        p->cap_classes = p->cap_classes ? 2 * p->cap_classes : 8;
        p->classes = xrealloc(p->classes, p->cap_classes * sizeof *p->classes);
    }
    p->classes[p->n_classes] = (char_class_t){first, p->n_ranges - first};
    return (uint32_t)p->n_classes++;
}

static int hex_value(unsigned c)
{
    if (c >= '0' && c <= '9')
        return (int)(c - '0');
    if (c >= 'a' && c <= 'f')
        return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F')
        return (int)(c - 'A' + 10);
    return -1;
}

/* Reads `digits` hex digits at p->pos; returns the value or -1 (pos unchanged). */
static long hex_read(parser_t *p, int digits)
{
    long v = 0;
    if (p->len - p->pos < (size_t)digits)
        return -1;
    for (int i = 0; i < digits; i++) {
        int h = hex_value(p->s[p->pos + (size_t)i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    p->pos += (size_t)digits;
    return v;
}

/* What an escape stands for. */
typedef enum esc_kind { ESC_CHAR, ESC_SET, ESC_WORDB, ESC_NWORDB, ESC_ERROR } esc_kind_t;

/* Parses the escape at p->pos (a backslash). ESC_CHAR sets *cp; ESC_SET sets *set, *n
 * and *negate. Inside a bracket expression \b is a backspace and \B is refused. */
static esc_kind_t parse_escape(parser_t *p, bool in_class, uint32_t *cp, const range_t **set,
                               size_t *n, bool *negate)
{
    size_t at = p->pos;
    if (at + 1 >= p->len) {
        fail(p, TERN_EINVAL, "trailing backslash at offset %zu", at);
        return ESC_ERROR;
    }
    unsigned c = p->s[at + 1];
    p->pos = at + 2;
    *negate = false;
    switch (c) {
    case 'd':
    case 'D':
        *set = DIGIT, *n = sizeof DIGIT / sizeof *DIGIT, *negate = c == 'D';
        return ESC_SET;
    case 'w':
    case 'W':
        *set = WORD, *n = sizeof WORD / sizeof *WORD, *negate = c == 'W';
        return ESC_SET;
    case 's':
    case 'S':
        *set = SPACE_JS, *n = sizeof SPACE_JS / sizeof *SPACE_JS, *negate = c == 'S';
        return ESC_SET;
    case 'b':
        if (in_class) {
            *cp = 0x08;
            return ESC_CHAR;
        }
        return ESC_WORDB;
    case 'B':
        if (in_class)
            break;
        return ESC_NWORDB;
    case 'n':
        *cp = '\n';
        return ESC_CHAR;
    case 'r':
        *cp = '\r';
        return ESC_CHAR;
    case 't':
        *cp = '\t';
        return ESC_CHAR;
    case 'f':
        *cp = '\f';
        return ESC_CHAR;
    case 'v':
        *cp = '\v';
        return ESC_CHAR;
    case '0':
        if (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
            fail(p, TERN_EINVAL, "octal escape \\0%c at offset %zu is not supported", p->s[p->pos],
                 at);
            return ESC_ERROR;
        }
        *cp = 0;
        return ESC_CHAR;
    case 'x': {
        long v = hex_read(p, 2);
        if (v < 0) {
            fail(p, TERN_EINVAL, "\\x at offset %zu: expected two hex digits", at);
            return ESC_ERROR;
        }
        *cp = (uint32_t)v;
        return ESC_CHAR;
    }
    case 'u': {
        long v = hex_read(p, 4);
        if (v < 0) {
            fail(p, TERN_EINVAL, "\\u at offset %zu: expected four hex digits", at);
            return ESC_ERROR;
        }
        if (v >= 0xd800 && v <= 0xdbff && p->pos + 1 < p->len && p->s[p->pos] == '\\' &&
            p->s[p->pos + 1] == 'u') {
            /* A surrogate pair, as JavaScript strings write a code point above U+FFFF. */
            size_t save = p->pos;
            p->pos += 2;
            long lo = hex_read(p, 4);
            if (lo >= 0xdc00 && lo <= 0xdfff) {
                *cp = 0x10000 + (((uint32_t)v - 0xd800) << 10) + ((uint32_t)lo - 0xdc00);
                return ESC_CHAR;
            }
            p->pos = save;
        }
        if (v >= 0xd800 && v <= 0xdfff) {
            fail(p, TERN_EINVAL, "\\u%04lX at offset %zu: a lone surrogate never matches UTF-8", v,
                 at);
            return ESC_ERROR;
        }
        *cp = (uint32_t)v;
        return ESC_CHAR;
    }
    default:
        if (c >= '1' && c <= '9') {
            if (in_class)
                fail(p, TERN_EINVAL, "octal escape \\%c at offset %zu is not supported", c, at);
            else
                fail(p, TERN_EINVAL,
                     "back-reference \\%c at offset %zu is not supported (locks are matched "
                     "without back-references)",
                     c, at);
            return ESC_ERROR;
        }
        if (c >= 0x80) {
            /* A non-ASCII code point stands for itself. */
            size_t n8 = utf8_decode(p->s + at + 1, p->len - at - 1, cp);
            if (n8 == 0) {
                fail(p, TERN_EINVAL, "not valid UTF-8 at offset %zu", at + 1);
                return ESC_ERROR;
            }
            p->pos = at + 1 + n8;
            return ESC_CHAR;
        }
        /* GNU's \< \> \` \' are anchors in glibc and literals in JavaScript. */
        if (c >= 0x20 && c < 0x7f && !strchr("<>`'", (int)c) &&
            !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
            *cp = c;
            return ESC_CHAR;
        }
        break;
    }
    if (c >= 0x20 && c < 0x7f)
        fail(p, TERN_EINVAL, "escape \\%c at offset %zu is not supported", c, at);
    else
        fail(p, TERN_EINVAL, "escape of byte 0x%02x at offset %zu is not supported", c, at);
    return ESC_ERROR;
}

/* Parses a bracket expression at p->pos ('['). */
static int parse_bracket(parser_t *p)
{
    size_t start = p->pos++;
    bool negate = false;
    if (p->pos < p->len && p->s[p->pos] == '^') {
        negate = true;
        p->pos++;
    }
    size_t first = p->n_ranges;
    bool at_first = true; /* a ']' first is a literal (POSIX) */
    for (;;) {
        if (p->pos >= p->len)
            return fail(p, TERN_EINVAL, "unterminated bracket expression at offset %zu", start);
        size_t at = p->pos;
        unsigned c = p->s[at];
        if (c == ']' && !at_first) {
            p->pos++;
            break;
        }
        at_first = false;
        uint32_t lo = 0;
        bool single = true;
        if (c == '[' && at + 1 < p->len &&
            (p->s[at + 1] == ':' || p->s[at + 1] == '=' || p->s[at + 1] == '.')) {
            if (p->s[at + 1] != ':')
                return fail(p, TERN_EINVAL, "collating element [%c at offset %zu is not supported",
                            p->s[at + 1], at);
            const char *end = NULL;
            for (size_t i = at + 2; i + 1 < p->len; i++) {
                if (p->s[i] == ':' && p->s[i + 1] == ']') {
                    end = (const char *)p->s + i;
                    break;
                }
            }
            if (end == NULL)
                return fail(p, TERN_EINVAL, "unterminated class [: at offset %zu", at);
            size_t name_len = (size_t)(end - (const char *)p->s) - (at + 2);
            const named_class_t *nc = NULL;
            for (size_t i = 0; i < sizeof POSIX_CLASSES / sizeof *POSIX_CLASSES; i++)
                if (strlen(POSIX_CLASSES[i].name) == name_len &&
                    memcmp(POSIX_CLASSES[i].name, p->s + at + 2, name_len) == 0)
                    nc = &POSIX_CLASSES[i];
            if (nc == NULL)
                return fail(p, TERN_EINVAL, "unknown class [:%.*s:] at offset %zu",
                            (int)(name_len > 32 ? 32 : name_len), p->s + at + 2, at);
            ranges_add_set(p, nc->r, nc->n, false);
            p->pos = at + 2 + name_len + 2;
            single = false;
        } else if (c == '\\') {
            const range_t *set;
            size_t n;
            bool neg;
            esc_kind_t k = parse_escape(p, true, &lo, &set, &n, &neg);
            if (k == ESC_ERROR)
                return -1;
            if (k == ESC_SET) {
                ranges_add_set(p, set, n, neg);
                single = false;
            }
        } else {
            size_t n8 = utf8_decode(p->s + at, p->len - at, &lo);
            if (n8 == 0)
                return fail(p, TERN_EINVAL, "not valid UTF-8 at offset %zu", at);
            p->pos += n8;
        }
        if (!single)
            continue;
        /* A range: lo '-' hi, unless the '-' is the last character of the set. */
        if (p->pos + 1 < p->len && p->s[p->pos] == '-' && p->s[p->pos + 1] != ']') {
            size_t hi_at = ++p->pos;
            uint32_t hi = 0;
            unsigned h = p->s[hi_at];
            if (h == '[' && hi_at + 1 < p->len &&
                (p->s[hi_at + 1] == ':' || p->s[hi_at + 1] == '=' || p->s[hi_at + 1] == '.'))
                return fail(p, TERN_EINVAL, "range at offset %zu ends in a class", at);
            if (h == '\\') {
                const range_t *set;
                size_t n;
                bool neg;
                esc_kind_t k = parse_escape(p, true, &hi, &set, &n, &neg);
                if (k == ESC_ERROR)
                    return -1;
                if (k != ESC_CHAR)
                    return fail(p, TERN_EINVAL, "range at offset %zu ends in a class", at);
            } else {
                size_t n8 = utf8_decode(p->s + hi_at, p->len - hi_at, &hi);
                if (n8 == 0)
                    return fail(p, TERN_EINVAL, "not valid UTF-8 at offset %zu", hi_at);
                p->pos += n8;
            }
            if (hi < lo)
                return fail(p, TERN_EINVAL, "range at offset %zu is out of order", at);
            range_add(p, lo, hi);
        } else {
            range_add(p, lo, lo);
        }
    }
    return node_new(p, N_CLASS, class_end(p, first, negate));
}

/* Reads a decimal count at p->pos (saturated at COUNT_CAP); -1 when there is none. */
static int count_read(parser_t *p)
{
    if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9')
        return -1;
    long v = 0;
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        v = v * 10 + (p->s[p->pos++] - '0');
        if (v > COUNT_CAP)
            v = COUNT_CAP;
    }
    return (int)v;
}

/* Whether a quantifier starts at p->pos; if so reads it (and a lazy '?', which changes
 * which match is found, not whether there is one). Returns 1 with *min and *max set, 0
 * when there is none (a '{' that is no quantifier is a literal, as in JavaScript), -1 on
 * error. */
static int quantifier_read(parser_t *p, int *min, int *max)
{
    if (p->pos >= p->len)
        return 0;
    size_t at = p->pos;
    switch (p->s[at]) {
    case '*':
        *min = 0, *max = REP_INF, p->pos++;
        break;
    case '+':
        *min = 1, *max = REP_INF, p->pos++;
        break;
    case '?':
        *min = 0, *max = 1, p->pos++;
        break;
    case '{': {
        p->pos++;
        if (p->pos + 1 < p->len && p->s[p->pos] == ',' && p->s[p->pos + 1] >= '0' &&
            p->s[p->pos + 1] <= '9') {
            p->pos = at;
            return fail(p, TERN_EINVAL,
                        "{,m} at offset %zu is ambiguous (POSIX reads {0,m}, JavaScript the "
                        "text): write {0,m}",
                        at);
        }
        int lo = count_read(p), hi = lo;
        if (lo >= 0 && p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            hi = count_read(p);
            if (hi < 0)
                hi = REP_INF;
        }
        if (lo < 0 || p->pos >= p->len || p->s[p->pos] != '}') {
            p->pos = at;
            return 0;
        }
        p->pos++;
        if (hi != REP_INF && hi < lo)
            return fail(p, TERN_EINVAL, "repetition at offset %zu: minimum %d above maximum %d", at,
                        lo, hi);
        *min = lo, *max = hi;
        break;
    }
    default:
        return 0;
    }
    if (p->pos < p->len && p->s[p->pos] == '?')
        p->pos++;
    return 1;
}

static int parse_alt(parser_t *p);

/* Parses one atom; *quantifiable says whether a quantifier may follow it. Returns the
 * node, or -1 with the error recorded, or -2 when the position holds no atom. */
static int parse_atom(parser_t *p, bool *quantifiable)
{
    size_t at = p->pos;
    unsigned c = p->s[at];
    *quantifiable = true;
    switch (c) {
    case '(': {
        p->pos++;
        if (p->pos < p->len && p->s[p->pos] == '?') {
            const unsigned char *q = p->s + p->pos;
            size_t left = p->len - p->pos;
            if (left >= 2 && q[1] == ':') {
                p->pos += 2;
            } else if (left >= 2 && (q[1] == '=' || q[1] == '!')) {
                return fail(p, TERN_EINVAL, "lookahead (?%c at offset %zu is not supported", q[1],
                            at);
            } else if (left >= 3 && q[1] == '<' && (q[2] == '=' || q[2] == '!')) {
                return fail(p, TERN_EINVAL, "lookbehind (?<%c at offset %zu is not supported", q[2],
                            at);
            } else if (left >= 2 && q[1] == '<') {
                /* A named group: the name changes nothing here. */
                size_t i = 2;
                while (i < left &&
                       ((q[i] >= 'a' && q[i] <= 'z') || (q[i] >= 'A' && q[i] <= 'Z') ||
                        q[i] == '_' || q[i] == '$' || (i > 2 && q[i] >= '0' && q[i] <= '9')))
                    i++;
                if (i == 2 || i >= left || q[i] != '>')
                    return fail(p, TERN_EINVAL, "bad group name at offset %zu", at);
                p->pos += i + 1;
            } else {
                return fail(p, TERN_EINVAL, "group (? at offset %zu is not supported", at);
            }
        }
        if (++p->depth > LOCK_PATTERN_MAX_DEPTH)
            return fail(p, TERN_E2BIG, "more than %d nested groups and quantifiers at offset %zu",
                        LOCK_PATTERN_MAX_DEPTH, at);
        int inner = parse_alt(p);
        if (inner < 0)
            return -1;
        p->depth--;
        if (p->pos >= p->len || p->s[p->pos] != ')')
            return fail(p, TERN_EINVAL, "unmatched ( at offset %zu", at);
        p->pos++;
        return inner;
    }
    case '[':
        return parse_bracket(p);
    case '.':
        p->pos++;
        return node_new(p, N_ANY, 0);
    case '^':
        p->pos++;
        *quantifiable = false;
        return node_new(p, N_BOL, 0);
    case '$':
        p->pos++;
        *quantifiable = false;
        return node_new(p, N_EOL, 0);
    case '\\': {
        uint32_t cp = 0;
        const range_t *set;
        size_t n;
        bool neg;
        switch (parse_escape(p, false, &cp, &set, &n, &neg)) {
        case ESC_CHAR:
            return node_new(p, N_CHAR, cp);
        case ESC_SET: {
            size_t first = p->n_ranges;
            ranges_add_set(p, set, n, neg);
            return node_new(p, N_CLASS, class_end(p, first, false));
        }
        case ESC_WORDB:
            *quantifiable = false;
            return node_new(p, N_WORDB, 0);
        case ESC_NWORDB:
            *quantifiable = false;
            return node_new(p, N_NWORDB, 0);
        case ESC_ERROR:
            break;
        }
        return -1;
    }
    case '*':
    case '+':
    case '?':
        return fail(p, TERN_EINVAL, "quantifier %c at offset %zu has nothing to repeat", c, at);
    case '{': {
        int min, max;
        int q = quantifier_read(p, &min, &max);
        if (q < 0)
            return -1;
        if (q > 0) {
            p->pos = at;
            return fail(p, TERN_EINVAL, "quantifier { at offset %zu has nothing to repeat", at);
        }
        p->pos++;
        return node_new(p, N_CHAR, '{');
    }
    default: {
        uint32_t cp;
        size_t n8 = utf8_decode(p->s + at, p->len - at, &cp);
        if (n8 == 0)
            return fail(p, TERN_EINVAL, "not valid UTF-8 at offset %zu", at);
        p->pos += n8;
        return node_new(p, N_CHAR, cp);
    }
    }
}

/* An atom and the quantifiers after it (POSIX lets them stack: a** and a{2}{3}). */
static int parse_repeat(parser_t *p)
{
    bool quantifiable;
    int depth = p->depth;
    int atom = parse_atom(p, &quantifiable);
    if (atom < 0)
        return -1;
    for (;;) {
        size_t at = p->pos;
        int min = 0, max = 0; /* set by quantifier_read when it answers 1 */
        int q = quantifier_read(p, &min, &max);
        if (q < 0)
            return -1;
        if (q == 0)
            break;
        if (!quantifiable)
            return fail(p, TERN_EINVAL, "quantifier at offset %zu has nothing to repeat", at);
        if (++p->depth > LOCK_PATTERN_MAX_DEPTH)
            return fail(p, TERN_E2BIG, "more than %d nested groups and quantifiers at offset %zu",
                        LOCK_PATTERN_MAX_DEPTH, at);
        int r = node_new(p, N_REPEAT, 0);
        p->nodes[r].first = atom;
        p->nodes[r].min = min;
        p->nodes[r].max = max;
        atom = r;
    }
    p->depth = depth;
    return atom;
}

/* A sequence of repeats, up to '|', ')' or the end. */
static int parse_cat(parser_t *p)
{
    int cat = -1, last = -1, only = -1;
    while (p->pos < p->len && p->s[p->pos] != '|' && p->s[p->pos] != ')') {
        int r = parse_repeat(p);
        if (r < 0)
            return -1;
        if (only < 0) {
            only = last = r;
            continue;
        }
        if (cat < 0) {
            cat = node_new(p, N_CAT, 0);
            p->nodes[cat].first = only;
        }
        p->nodes[last].next = r;
        last = r;
    }
    if (cat >= 0)
        return cat;
    return only >= 0 ? only : node_new(p, N_EMPTY, 0);
}

static int parse_alt(parser_t *p)
{
    int alt = -1, last = -1;
    for (;;) {
        int c = parse_cat(p);
        if (c < 0)
            return -1;
        if (alt < 0 && (p->pos >= p->len || p->s[p->pos] != '|'))
            return c;
        if (alt < 0) {
            alt = node_new(p, N_ALT, 0);
            p->nodes[alt].first = c;
        } else {
            p->nodes[last].next = c;
        }
        last = c;
        if (p->pos >= p->len || p->s[p->pos] != '|')
            return alt;
        p->pos++;
    }
}

/* ---- size and code -------------------------------------------------------------- */

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a + b > SIZE_CAP ? SIZE_CAP : a + b;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    if (a == 0 || b == 0)
        return 0;
    return a > SIZE_CAP / b ? SIZE_CAP : (a * b > SIZE_CAP ? SIZE_CAP : a * b);
}

/* The instructions node `i` emits, saturated at SIZE_CAP (each node counted once). */
static uint64_t node_size(parser_t *p, int i)
{
    node_t *n = &p->nodes[i];
    if (n->counted)
        return n->size;
    uint64_t size = 0;
    switch (n->kind) {
    case N_EMPTY:
        break;
    case N_CAT:
    case N_ALT: {
        uint64_t k = 0;
        for (int c = p->nodes[i].first; c >= 0; c = p->nodes[c].next, k++)
            size = sat_add(size, node_size(p, c));
        if (p->nodes[i].kind == N_ALT)
            size = sat_add(size, 2 * (k - 1)); /* a SPLIT and a JMP per alternative but one */
        break;
    }
    case N_REPEAT: {
        uint64_t s = node_size(p, p->nodes[i].first);
        int min = p->nodes[i].min, max = p->nodes[i].max;
        if (s == 0)
            break;
        size = sat_mul(s, (uint64_t)min);
        if (max == REP_INF)
            size = sat_add(size, s + 2); /* L: SPLIT; e; JMP L */
        else
            size = sat_add(size, sat_mul(s + 1, (uint64_t)(max - min))); /* SPLIT; e */
        break;
    }
    default:
        size = 1;
        break;
    }
    n = &p->nodes[i];
    n->size = size;
    n->counted = true;
    return size;
}

typedef struct emitter {
    const parser_t *p;
    inst_t *prog;
    size_t pc;
} emitter_t;

static size_t emit_inst(emitter_t *e, enum op op, uint32_t arg)
{
    e->prog[e->pc] = (inst_t){op, arg, 0, 0};
    return e->pc++;
}

static void emit(emitter_t *e, int i)
{
    const node_t *n = &e->p->nodes[i];
    switch (n->kind) {
    case N_EMPTY:
        break;
    case N_CHAR:
        emit_inst(e, OP_CHAR, n->val);
        break;
    case N_ANY:
        emit_inst(e, OP_ANY, 0);
        break;
    case N_CLASS:
        emit_inst(e, OP_CLASS, n->val);
        break;
    case N_BOL:
        emit_inst(e, OP_BOL, 0);
        break;
    case N_EOL:
        emit_inst(e, OP_EOL, 0);
        break;
    case N_WORDB:
        emit_inst(e, OP_WORDB, 0);
        break;
    case N_NWORDB:
        emit_inst(e, OP_NWORDB, 0);
        break;
    case N_CAT:
        for (int c = n->first; c >= 0; c = e->p->nodes[c].next)
            emit(e, c);
        break;
    case N_ALT: {
        /* SPLIT next, other; e1; JMP end; SPLIT ...; en. The JMPs wait for the end in a
         * list threaded through their x. */
        uint32_t jumps = UINT32_MAX;
        for (int c = n->first; c >= 0; c = e->p->nodes[c].next) {
            if (e->p->nodes[c].next < 0) {
                emit(e, c);
                break;
            }
            size_t split = emit_inst(e, OP_SPLIT, 0);
            e->prog[split].x = (uint32_t)e->pc;
            emit(e, c);
            size_t jmp = emit_inst(e, OP_JMP, 0);
            e->prog[jmp].x = jumps;
            jumps = (uint32_t)jmp;
            e->prog[split].y = (uint32_t)e->pc;
        }
        while (jumps != UINT32_MAX) {
            uint32_t next = e->prog[jumps].x;
            e->prog[jumps].x = (uint32_t)e->pc;
            jumps = next;
        }
        break;
    }
    case N_REPEAT: {
        if (e->p->nodes[n->first].size == 0)
            break;
        for (int k = 0; k < n->min; k++)
            emit(e, n->first);
        if (n->max == REP_INF) {
            size_t split = emit_inst(e, OP_SPLIT, 0);
            e->prog[split].x = (uint32_t)e->pc;
            emit(e, n->first);
            size_t jmp = emit_inst(e, OP_JMP, 0);
            e->prog[jmp].x = (uint32_t)split;
            e->prog[split].y = (uint32_t)e->pc;
        } else {
            /* Each optional copy may skip to the end of all: y waits in a list. */
            uint32_t skips = UINT32_MAX;
            for (int k = n->min; k < n->max; k++) {
                size_t split = emit_inst(e, OP_SPLIT, 0);
                e->prog[split].x = (uint32_t)e->pc;
                e->prog[split].y = skips;
                skips = (uint32_t)split;
                emit(e, n->first);
            }
            while (skips != UINT32_MAX) {
                uint32_t next = e->prog[skips].y;
                e->prog[skips].y = (uint32_t)e->pc;
                skips = next;
            }
        }
        break;
    }
    }
}

int lock_pattern_compile(const char *text, lock_pattern_t **out, char *err, size_t errlen)
{
    *out = NULL;
    size_t len = strlen(text);
    parser_t p = {.s = (const unsigned char *)text, .len = len, .err = err, .errlen = errlen};
    if (len > LOCK_PATTERN_MAX_BYTES) {
        fail(&p, TERN_E2BIG, "%zu bytes, the limit is %d", len, LOCK_PATTERN_MAX_BYTES);
        return p.rc;
    }
    int root = parse_alt(&p);
    if (root >= 0 && p.pos < p.len)
        root = fail(&p, TERN_EINVAL, "unmatched ) at offset %zu", p.pos);
    uint64_t size = root >= 0 ? sat_add(node_size(&p, root), 1) : 0;
    /* The tables of bracket expressions and classes are kept beside the program, one per
     * occurrence in the text (a repetition shares its atom's): counted as the
     * instructions of the same memory, so that the size bounds all a pattern holds (a
     * \S takes 11 ranges, 104 bytes, for its one instruction of 16). */
    uint64_t tables =
        (p.n_ranges * sizeof(range_t) + p.n_classes * sizeof(char_class_t) + sizeof(inst_t) - 1) /
        sizeof(inst_t);
    if (root >= 0 && size > LOCK_PATTERN_MAX_PROGRAM)
        fail(&p, TERN_E2BIG,
             "the pattern needs more than %d instructions (counted repetitions are "
             "expanded: lower their counts)",
             LOCK_PATTERN_MAX_PROGRAM);
    else if (root >= 0 && size + tables > LOCK_PATTERN_MAX_PROGRAM)
        fail(&p, TERN_E2BIG,
             "the pattern needs more than %d instructions (its %zu bracket expressions and "
             "classes count as %llu: use fewer)",
             LOCK_PATTERN_MAX_PROGRAM, p.n_classes, (unsigned long long)tables);
    if (p.rc != 0) {
        free(p.nodes);
        free(p.ranges);
        free(p.classes);
        return p.rc;
    }
    lock_pattern_t *lp = xcalloc(1, sizeof *lp);
    lp->n = (size_t)size;
    lp->prog = xcalloc(lp->n, sizeof *lp->prog);
    emitter_t e = {&p, lp->prog, 0};
    emit(&e, root);
    emit_inst(&e, OP_MATCH, 0);
    /* Held for the pattern's life: no more than was counted. */
    if (p.n_ranges > 0) {
        lp->ranges = xrealloc(p.ranges, p.n_ranges * sizeof *p.ranges);
    } else {
        free(p.ranges); /* a class of everything negated: no range left */
        lp->ranges = NULL;
    }
    lp->classes =
        p.n_classes > 0 ? xrealloc(p.classes, p.n_classes * sizeof *p.classes) : p.classes;
    lp->size = (size_t)(size + tables);
    lp->anchored = lp->prog[0].op == OP_BOL;
    free(p.nodes);
    *out = lp;
    return 0;
}

size_t lock_pattern_size(const lock_pattern_t *p)
{
    return p->size;
}

void lock_pattern_free(lock_pattern_t *p)
{
    if (p == NULL)
        return;
    free(p->prog);
    free(p->ranges);
    free(p->classes);
    free(p);
}

/* ---- matching ------------------------------------------------------------------- */

static bool is_word(uint32_t c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static bool class_has(const lock_pattern_t *p, uint32_t idx, uint32_t c)
{
    size_t lo = 0, hi = p->classes[idx].n;
    if (hi == 0)
        return false; /* p->ranges may be NULL */
    const range_t *r = p->ranges + p->classes[idx].first;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c < r[mid].lo)
            hi = mid;
        else if (c > r[mid].hi)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

static bool consumes(const lock_pattern_t *p, const inst_t *in, uint32_t c)
{
    switch (in->op) {
    case OP_CHAR:
        return c == in->arg;
    case OP_ANY:
        return c != '\n' && c != '\r' && c != 0x2028 && c != 0x2029;
    case OP_CLASS:
        return class_has(p, in->arg, c);
    default:
        return false;
    }
}

/* Where the simulation stands: the code points before and at the current position. */
typedef struct position {
    uint32_t prev, cur;
} position_t;

/* Adds the thread at `pc` and every thread it reaches without consuming (through jumps,
 * splits and assertions that hold at `at`) to `list`, each pc once per `step`; returns
 * true when one of them is MATCH. */
static bool add_thread(const lock_pattern_t *p, scratch_t *w, uint32_t *list, size_t *n,
                       uint32_t pc, uint32_t step, position_t at)
{
    size_t sp = 0;
    if (w->mark[pc] == step)
        return false;
    w->mark[pc] = step;
    w->stack[sp++] = pc;
    while (sp > 0) {
        pc = w->stack[--sp];
        w->steps++;
        const inst_t *in = &p->prog[pc];
        uint32_t go[2];
        size_t n_go = 0;
        switch (in->op) {
        case OP_MATCH:
            return true;
        case OP_JMP:
            go[n_go++] = in->x;
            break;
        case OP_SPLIT:
            go[n_go++] = in->x;
            go[n_go++] = in->y;
            break;
        case OP_BOL:
            if (at.prev == CP_NONE)
                go[n_go++] = pc + 1;
            break;
        case OP_EOL:
            if (at.cur == CP_NONE)
                go[n_go++] = pc + 1;
            break;
        case OP_WORDB:
        case OP_NWORDB: {
            bool boundary = is_word(at.prev) != is_word(at.cur);
            if (boundary == (in->op == OP_WORDB))
                go[n_go++] = pc + 1;
            break;
        }
        default:
            list[(*n)++] = pc;
            break;
        }
        for (size_t i = 0; i < n_go; i++) {
            if (w->mark[go[i]] != step) {
                w->mark[go[i]] = step;
                w->stack[sp++] = go[i];
            }
        }
    }
    return false;
}

/* The code point at t[pos] (CP_NONE at the end) and its length in bytes. */
static uint32_t target_at(const char *t, size_t len, size_t pos, size_t *n)
{
    uint32_t cp;
    if (pos >= len) {
        *n = 0;
        return CP_NONE;
    }
    *n = utf8_decode((const unsigned char *)t + pos, len - pos, &cp);
    if (*n == 0) {
        *n = 1;
        return CP_BAD + (unsigned char)t[pos];
    }
    return cp;
}

/* A test in progress: the simulation's state between two positions of the target, so
 * that a caller can run it in slices (lock_match_run). */
struct lock_match {
    const lock_pattern_t *p;
    const char *target;
    size_t len;
    scratch_t w;
    uint32_t *mem; /* w's lists: small, or malloc'd for a large program */
    size_t cap;    /* instructions mem has room for */
    uint32_t step; /* the mark of the threads added for the current position */
    size_t n_cur;  /* threads at the current position, in cur */
    size_t pos;    /* the byte offset of the current position */
    size_t width;  /* the length in bytes of the code point there */
    uint32_t *cur, *next;
    position_t at;
    int outcome; /* LOCK_MATCH_MORE until the test is decided */
    uint32_t small[4 * SCRATCH_ON_STACK];
};

/* Starts the simulation: the threads of the first position. */
static void match_begin(lock_match_t *m)
{
    const lock_pattern_t *p = m->p;
    memset(m->w.mark, 0, p->n * sizeof *m->w.mark);
    m->step = 1;
    m->n_cur = 0;
    m->pos = 0;
    m->cur = m->w.list[0];
    m->next = m->w.list[1];
    m->at = (position_t){CP_NONE, target_at(m->target, m->len, 0, &m->width)};
    m->outcome = LOCK_MATCH_MORE;
    if (add_thread(p, &m->w, m->cur, &m->n_cur, 0, m->step, m->at))
        m->outcome = LOCK_MATCH_YES;
    else if (m->at.cur == CP_NONE)
        m->outcome = LOCK_MATCH_NO;
}

/* Moves the simulation one code point on; sets m->outcome when the test is decided. */
static void match_advance(lock_match_t *m)
{
    const lock_pattern_t *p = m->p;
    scratch_t *w = &m->w;
    size_t next_width, n_next = 0;
    position_t after = {m->at.cur, target_at(m->target, m->len, m->pos + m->width, &next_width)};
    m->step++;
    w->steps += m->n_cur;
    for (size_t i = 0; i < m->n_cur; i++) {
        uint32_t pc = m->cur[i];
        if (consumes(p, &p->prog[pc], m->at.cur) &&
            add_thread(p, w, m->next, &n_next, pc + 1, m->step, after)) {
            m->outcome = LOCK_MATCH_YES;
            return;
        }
    }
    /* A match may start at any position (a search, not a full match); a program
     * that starts with ^ only from the first. */
    if (!p->anchored && add_thread(p, w, m->next, &n_next, 0, m->step, after)) {
        m->outcome = LOCK_MATCH_YES;
        return;
    }
    if ((n_next == 0 && p->anchored) || after.cur == CP_NONE) {
        m->outcome = LOCK_MATCH_NO;
        return;
    }
    uint32_t *swap = m->cur;
    m->cur = m->next;
    m->next = swap;
    m->n_cur = n_next;
    m->pos += m->width;
    m->width = next_width;
    m->at = after;
}

lock_match_t *lock_match_new(const lock_pattern_t *p, const char *target, size_t len)
{
    lock_match_t *m = xmalloc(sizeof *m);
    m->mem = m->small;
    m->cap = SCRATCH_ON_STACK;
    lock_match_reset(m, p, target, len);
    return m;
}

void lock_match_reset(lock_match_t *m, const lock_pattern_t *p, const char *target, size_t len)
{
    if (p->n > m->cap) {
        if (m->mem != m->small)
            free(m->mem);
        m->mem = xmalloc(4 * p->n * sizeof *m->mem);
        m->cap = p->n;
    }
    m->p = p;
    m->target = target;
    m->len = len;
    m->w = (scratch_t){m->mem, {m->mem + p->n, m->mem + 2 * p->n}, m->mem + 3 * p->n, 0};
    match_begin(m);
}

int lock_match_run(lock_match_t *m, uint64_t *budget)
{
    uint64_t before = m->w.steps;
    while (m->outcome == LOCK_MATCH_MORE && m->w.steps - before < *budget)
        match_advance(m);
    uint64_t used = m->w.steps - before;
    *budget = used < *budget ? *budget - used : 0;
    return m->outcome;
}

void lock_match_free(lock_match_t *m)
{
    if (m == NULL)
        return;
    if (m->mem != m->small)
        free(m->mem);
    free(m);
}

bool lock_pattern_test(const lock_pattern_t *p, const char *target, size_t len)
{
    lock_match_t *m = lock_match_new(p, target, len);
    uint64_t unlimited = UINT64_MAX;
    bool match = lock_match_run(m, &unlimited) == LOCK_MATCH_YES;
    lock_match_free(m);
    return match;
}
