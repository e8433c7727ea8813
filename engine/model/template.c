/*
 * template.c -- the ${...} templates of step arguments: syntax, checking, expansion.
 *
 * This file owns the template language: how a string splits into literal text and
 * templates, which names exist, how a name resolves against a scope and how a value
 * is spelled inside a longer string. It does not know where scopes come from (the
 * runner builds them from a job) nor which roots a given part of a workflow may use
 * (workflow.c decides and passes the bits to template_check()).
 *
 * One scanner (next_piece) and one name parser (parse_name) serve both the load-time
 * check and the run-time expansion, so a template that passes the check never fails
 * for syntax when a job runs. A default may contain balanced braces and JSON strings,
 * so "${params.opts:-{\"a\": 1}}" is one template whose default is an object.
 *
 * A name that resolves to JSON null is a value (null) when written without a default;
 * with a default, null takes the default, as ${x:-d} does for an empty variable in
 * the shell.
 */
#include "model/template.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

/* ---- messages and paths --------------------------------------------------------- */

/* Writes "path: message" (or just the message when path is empty) into err and
 * returns TERN_EINVAL. */
static int fail(char *err, size_t errlen, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return TERN_EINVAL;
    int n = 0;
    if (path != NULL && path[0] != '\0')
        n = snprintf(err, errlen, "%s: ", path);
    if (n < 0 || (size_t)n >= errlen)
        return TERN_EINVAL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return TERN_EINVAL;
}

/* A growable NUL-terminated byte string, used for paths and expanded text. */
typedef struct buf {
    char *p;
    size_t len, cap;
} buf_t;

static void buf_append(buf_t *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        b->p = xrealloc(b->p, cap);
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_init(buf_t *b, const char *s)
{
    b->p = NULL;
    b->len = b->cap = 0;
    buf_append(b, s != NULL ? s : "", s != NULL ? strlen(s) : 0);
}

static void buf_truncate(buf_t *b, size_t len)
{
    b->len = len;
    b->p[len] = '\0';
}

/* Appends ".key" (or "key" to an empty path) and returns the previous length. */
static size_t path_push_key(buf_t *b, const char *key)
{
    size_t old = b->len;
    if (b->len > 0)
        buf_append(b, ".", 1);
    buf_append(b, key, strlen(key));
    return old;
}

static size_t path_push_index(buf_t *b, size_t i)
{
    char tmp[32];
    size_t old = b->len;
    int n = snprintf(tmp, sizeof tmp, "[%zu]", i);
    buf_append(b, tmp, (size_t)n);
    return old;
}

/* ---- the scanner ---------------------------------------------------------------- */

/* One template as written. */
typedef struct ref {
    const char *text; /* "${...}" as written, for messages */
    size_t text_len;
    const char *name; /* "params.disks.0.size" */
    size_t name_len;
    const char *def; /* the default's text after ":-" */
    size_t def_len;
    bool has_def;
} ref_t;

enum piece_kind { PIECE_END, PIECE_TEXT, PIECE_REF };

typedef struct piece {
    enum piece_kind kind;
    const char *text; /* PIECE_TEXT: literal bytes */
    size_t len;
    ref_t ref; /* PIECE_REF */
} piece_t;

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
}

/* Length of the text to quote in a message about the template at s[0..len): up to
 * and including the first "}", at most 80 bytes. */
static int quote_len(const char *s, size_t len)
{
    size_t n = 0;
    while (n < len && n < 80 && s[n] != '}')
        n++;
    if (n < len && n < 80)
        n++;
    return (int)n;
}

/* Reads the template that starts at s[i] ("${") into r; *end is the index after its
 * closing brace. */
static int scan_ref(const char *s, size_t len, size_t i, ref_t *r, size_t *end, const char *path,
                    char *err, size_t errlen)
{
    size_t j = i + 2;
    const char *t = s + i;
    size_t rest = len - i;

    memset(r, 0, sizeof *r);
    while (j < len && s[j] != '}') {
        char c = s[j];
        if (c == ':' && j + 1 < len && s[j + 1] == '-')
            break;
        if (!is_name_char(c)) {
            if (isprint((unsigned char)c))
                return fail(err, errlen, path,
                            "%.*s has a bad character '%c' in its name (names use letters, "
                            "digits, '_', '-' and '.'; write \"$${\" for a literal \"${\")",
                            quote_len(t, rest), t, c);
            return fail(err, errlen, path,
                        "%.*s has a bad byte 0x%02x in its name (names use letters, digits, "
                        "'_', '-' and '.'; write \"$${\" for a literal \"${\")",
                        quote_len(t, rest), t, (unsigned char)c);
        }
        j++;
    }
    if (j >= len)
        goto Unterminated;
    r->name = s + i + 2;
    r->name_len = j - (i + 2);
    if (s[j] == ':') {
        /* The default runs to the first "}" outside nested braces and JSON strings. */
        size_t k = j + 2;
        int depth = 0;
        bool in_str = false;
        for (; k < len; k++) {
            char c = s[k];
            if (in_str) {
                if (c == '\\')
                    k++;
                else if (c == '"')
                    in_str = false;
            } else if (c == '"') {
                in_str = true;
            } else if (c == '{') {
                depth++;
            } else if (c == '}') {
                if (depth == 0)
                    break;
                depth--;
            }
        }
        if (k >= len)
            goto Unterminated;
        r->has_def = true;
        r->def = s + j + 2;
        r->def_len = k - (j + 2);
        j = k;
    }
    r->text = t;
    r->text_len = j + 1 - i;
    *end = j + 1;
    if (r->name_len == 0)
        return fail(err, errlen, path, "%.*s has an empty name", (int)r->text_len, r->text);
    return 0;

Unterminated:
    return fail(err, errlen, path,
                "%.*s%s has no closing \"}\" (write \"$${\" for a literal \"${\")",
                rest > 80 ? 80 : (int)rest, t, rest > 80 ? "..." : "");
}

/* Reads the piece of s[0..len) at *pos and advances *pos past it. */
static int next_piece(const char *s, size_t len, size_t *pos, piece_t *pc, const char *path,
                      char *err, size_t errlen)
{
    size_t i = *pos;

    memset(pc, 0, sizeof *pc);
    if (i >= len) {
        pc->kind = PIECE_END;
        return 0;
    }
    if (len - i >= 3 && s[i] == '$' && s[i + 1] == '$' && s[i + 2] == '{') {
        pc->kind = PIECE_TEXT; /* "$${" is a literal "${" */
        pc->text = s + i + 1;
        pc->len = 2;
        *pos = i + 3;
        return 0;
    }
    if (len - i >= 2 && s[i] == '$' && s[i + 1] == '{') {
        pc->kind = PIECE_REF;
        return scan_ref(s, len, i, &pc->ref, pos, path, err, errlen);
    }
    /* Literal text up to the next '$' that could start something. */
    size_t j = i + 1;
    while (j < len && s[j] != '$')
        j++;
    pc->kind = PIECE_TEXT;
    pc->text = s + i;
    pc->len = j - i;
    *pos = j;
    return 0;
}

/* ---- names ---------------------------------------------------------------------- */

/* A name split into its root and the path that is walked below the root's value. */
typedef struct name {
    enum template_root root;
    const char *step; /* TEMPLATE_STEPS: the step's name; TEMPLATE_ADMISSION: the check's */
    size_t step_len;
    const char *member; /* TEMPLATE_STEPS: "result" or "error"; TEMPLATE_ADMISSION: "result" */
    size_t member_len;
    const char *path; /* dot-separated keys walked below; may be empty */
    size_t path_len;
} name_t;

static bool seg_is(const char *s, size_t n, const char *word)
{
    return strlen(word) == n && memcmp(s, word, n) == 0;
}

/* Reads the segment of name[0..len) at *pos (up to a '.' or the end). */
static void next_seg(const char *name, size_t len, size_t *pos, const char **seg, size_t *seg_len)
{
    size_t i = *pos, j = i;
    while (j < len && name[j] != '.')
        j++;
    *seg = name + i;
    *seg_len = j - i;
    *pos = j < len ? j + 1 : j;
}

static int parse_name(const ref_t *r, name_t *nm, const char *path, char *err, size_t errlen)
{
    const char *n = r->name;
    size_t len = r->name_len, pos = 0, nsegs = 1;
    const char *seg;
    size_t seg_len;

    memset(nm, 0, sizeof *nm);
    for (size_t i = 0; i < len; i++) {
        if (n[i] == '.') {
            nsegs++;
            if (i == 0 || i + 1 == len || n[i + 1] == '.')
                return fail(err, errlen, path, "%.*s has an empty key in its name",
                            (int)r->text_len, r->text);
        }
    }

    next_seg(n, len, &pos, &seg, &seg_len);
    if (seg_is(seg, seg_len, "params")) {
        nm->root = TEMPLATE_PARAMS;
    } else if (seg_is(seg, seg_len, "state")) {
        nm->root = TEMPLATE_STATE;
    } else if (seg_is(seg, seg_len, "steps")) {
        nm->root = TEMPLATE_STEPS;
        if (nsegs < 3)
            goto BadSteps;
        next_seg(n, len, &pos, &nm->step, &nm->step_len);
        next_seg(n, len, &pos, &nm->member, &nm->member_len);
        if (!seg_is(nm->member, nm->member_len, "result") &&
            !seg_is(nm->member, nm->member_len, "error"))
            goto BadSteps;
    } else if (seg_is(seg, seg_len, "job")) {
        nm->root = TEMPLATE_JOB;
        if (nsegs != 2 ||
            !(seg_is(n + pos, len - pos, "uuid") || seg_is(n + pos, len - pos, "target") ||
              seg_is(n + pos, len - pos, "workflow")))
            return fail(err, errlen, path,
                        "%.*s is not a name of the job (job.uuid, job.target or job.workflow)",
                        (int)r->text_len, r->text);
    } else if (seg_is(seg, seg_len, "admission")) {
        nm->root = TEMPLATE_ADMISSION;
        if (nsegs < 3)
            goto BadAdmission;
        next_seg(n, len, &pos, &nm->step, &nm->step_len);
        next_seg(n, len, &pos, &nm->member, &nm->member_len);
        if (!seg_is(nm->member, nm->member_len, "result"))
            goto BadAdmission;
    } else if (seg_is(seg, seg_len, "error")) {
        nm->root = TEMPLATE_ERROR;
        if (nsegs != 2 ||
            !(seg_is(n + pos, len - pos, "code") || seg_is(n + pos, len - pos, "message") ||
              seg_is(n + pos, len - pos, "step")))
            return fail(err, errlen, path,
                        "%.*s is not a name of the error (error.code, error.message or "
                        "error.step)",
                        (int)r->text_len, r->text);
    } else {
        return fail(err, errlen, path,
                    "%.*s names \"%.*s\"; a name starts with params, steps, state, job, error "
                    "or admission",
                    (int)r->text_len, r->text, (int)seg_len, seg);
    }
    nm->path = n + pos;
    nm->path_len = len - pos;
    return 0;

BadSteps:
    return fail(err, errlen, path,
                "%.*s must name steps.<step>.result or steps.<step>.error, with an optional "
                "path below",
                (int)r->text_len, r->text);

BadAdmission:
    return fail(err, errlen, path,
                "%.*s must name admission.<check>.result, with an optional path below",
                (int)r->text_len, r->text);
}

/* Walks the dot-separated keys of path below v. Keys that are all digits index
 * arrays. Returns a borrowed value or NULL. */
static const json_t *walk(const json_t *v, const char *path, size_t len)
{
    size_t pos = 0;
    while (v != NULL && pos < len) {
        const char *seg;
        size_t seg_len;
        next_seg(path, len, &pos, &seg, &seg_len);
        if (json_is_object(v)) {
            v = json_object_getn(v, seg, seg_len);
        } else if (json_is_array(v)) {
            size_t idx = 0;
            for (size_t i = 0; i < seg_len; i++) {
                if (seg[i] < '0' || seg[i] > '9' || idx > (SIZE_MAX - 9) / 10)
                    return NULL;
                idx = idx * 10 + (size_t)(seg[i] - '0');
            }
            v = json_array_get(v, idx);
        } else {
            return NULL;
        }
    }
    return v;
}

static const json_t *resolve(const name_t *nm, const template_scope_t *sc)
{
    const json_t *base = NULL;
    switch (nm->root) {
    case TEMPLATE_PARAMS:
        base = sc->params;
        break;
    case TEMPLATE_STATE:
        base = sc->state;
        break;
    case TEMPLATE_JOB:
        base = sc->job;
        break;
    case TEMPLATE_ERROR:
        base = sc->error;
        break;
    case TEMPLATE_STEPS:
        base = sc->steps != NULL && json_is_object(sc->steps)
                   ? json_object_getn(sc->steps, nm->step, nm->step_len)
                   : NULL;
        base = base != NULL && json_is_object(base)
                   ? json_object_getn(base, nm->member, nm->member_len)
                   : NULL;
        break;
    case TEMPLATE_ADMISSION:
        base = sc->admission != NULL && json_is_object(sc->admission)
                   ? json_object_getn(sc->admission, nm->step, nm->step_len)
                   : NULL;
        base = base != NULL && json_is_object(base)
                   ? json_object_getn(base, nm->member, nm->member_len)
                   : NULL;
        break;
    }
    return walk(base, nm->path, nm->path_len);
}

/* ---- expansion ------------------------------------------------------------------ */

/* The value of one template: a new reference, or NULL with a message. */
static json_t *ref_value(const ref_t *r, const template_scope_t *sc, const char *path, char *err,
                         size_t errlen)
{
    name_t nm;
    if (parse_name(r, &nm, path, err, errlen) != 0)
        return NULL;
    const json_t *v = resolve(&nm, sc);
    if (v != NULL && !(r->has_def && json_is_null(v)))
        return json_deep_copy(v);
    if (!r->has_def) {
        fail(err, errlen, path, "%.*s names nothing", (int)r->text_len, r->text);
        return NULL;
    }
    json_t *d = json_loadb(r->def, r->def_len, JSON_DECODE_ANY, NULL);
    if (d == NULL)
        d = json_stringn(r->def, r->def_len);
    /* Text from JSON is valid UTF-8, but template_expand_string takes any C string. */
    if (d == NULL)
        fail(err, errlen, path, "%.*s: the default is not valid UTF-8", (int)r->text_len, r->text);
    return d;
}

/* Appends v as it reads inside a longer string. */
static void spell(buf_t *b, const json_t *v)
{
    if (json_is_string(v)) {
        buf_append(b, json_string_value(v), json_string_length(v));
        return;
    }
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
    if (s != NULL) {
        buf_append(b, s, strlen(s));
        free(s);
    }
}

/* Expands s[0..len) into *b. When keep_type is true and the string is exactly one
 * template, the value is returned in *whole instead (a new reference). */
static int expand_text(const char *s, size_t len, bool keep_type, const char *path,
                       const template_scope_t *sc, buf_t *b, json_t **whole, char *err,
                       size_t errlen)
{
    size_t pos = 0;
    piece_t pc;
    *whole = NULL;
    for (;;) {
        size_t start = pos;
        if (next_piece(s, len, &pos, &pc, path, err, errlen) != 0)
            return TERN_EINVAL;
        if (pc.kind == PIECE_END)
            return 0;
        if (pc.kind == PIECE_TEXT) {
            buf_append(b, pc.text, pc.len);
            continue;
        }
        json_t *v = ref_value(&pc.ref, sc, path, err, errlen);
        if (v == NULL)
            return TERN_EINVAL;
        if (keep_type && start == 0 && pos == len) {
            *whole = v;
            return 0;
        }
        spell(b, v);
        json_decref(v);
    }
}

/* What map_strings does with each string it meets: a new value for it, or NULL with err set.
 * path is the string's JSON path, for messages. */
typedef json_t *(*string_fn)(const char *s, size_t len, const char *path,
                             const template_scope_t *sc, char *err, size_t errlen);

/* A string's templates interpolated; a string that is exactly one template keeps the
 * JSON type of what it names. */
static json_t *text_of_string(const char *s, size_t len, const char *path,
                              const template_scope_t *sc, char *err, size_t errlen)
{
    if (memchr(s, '$', len) == NULL)
        return json_stringn_nocheck(s, len);
    buf_t b;
    json_t *whole, *out = NULL;
    buf_init(&b, NULL);
    if (expand_text(s, len, true, path, sc, &b, &whole, err, errlen) == 0)
        out = whole != NULL ? whole : json_stringn_nocheck(b.p, b.len);
    free(b.p);
    return out;
}

/* {"strings": [...], "values": [...]} of one string: the literal pieces and, between
 * each two of them, the value of a template. */
static json_t *parts_of_string(const char *s, size_t len, const char *path,
                               const template_scope_t *sc, char *err, size_t errlen)
{
    json_t *strings = json_array(), *values = json_array();
    buf_t b;
    size_t pos = 0;
    piece_t pc;
    buf_init(&b, NULL);
    for (;;) {
        if (next_piece(s, len, &pos, &pc, path, err, errlen) != 0)
            goto Error;
        if (pc.kind == PIECE_END)
            break;
        if (pc.kind == PIECE_TEXT) {
            buf_append(&b, pc.text, pc.len);
            continue;
        }
        json_t *v = ref_value(&pc.ref, sc, path, err, errlen);
        if (v == NULL)
            goto Error;
        json_array_append_new(strings, json_stringn_nocheck(b.p, b.len));
        json_array_append_new(values, v);
        buf_truncate(&b, 0);
    }
    json_array_append_new(strings, json_stringn_nocheck(b.p, b.len));
    free(b.p);
    return json_pack("{s:o, s:o}", "strings", strings, "values", values);

Error:
    free(b.p);
    json_decref(strings);
    json_decref(values);
    return NULL;
}

/* A new value of v's shape whose every string is leaf's answer for it (new reference). */
static json_t *map_value(const json_t *v, buf_t *path, const template_scope_t *sc, string_fn leaf,
                         char *err, size_t errlen)
{
    json_t *out = NULL;
    switch (json_typeof(v)) {
    case JSON_STRING:
        return leaf(json_string_value(v), json_string_length(v), path->p, sc, err, errlen);
    case JSON_OBJECT: {
        const char *key;
        json_t *val;
        out = json_object();
        json_object_foreach((json_t *)v, key, val)
        {
            size_t old = path_push_key(path, key);
            json_t *x = map_value(val, path, sc, leaf, err, errlen);
            buf_truncate(path, old);
            if (x == NULL) {
                json_decref(out);
                return NULL;
            }
            json_object_set_new_nocheck(out, key, x);
        }
        return out;
    }
    case JSON_ARRAY: {
        size_t i;
        json_t *val;
        out = json_array();
        json_array_foreach(v, i, val)
        {
            size_t old = path_push_index(path, i);
            json_t *x = map_value(val, path, sc, leaf, err, errlen);
            buf_truncate(path, old);
            if (x == NULL) {
                json_decref(out);
                return NULL;
            }
            json_array_append_new(out, x);
        }
        return out;
    }
    default:
        return json_deep_copy(v);
    }
}

static json_t *map_strings(const json_t *tmpl, const char *path, const template_scope_t *scope,
                           string_fn leaf, char *err, size_t errlen)
{
    static const template_scope_t empty;
    buf_t p;
    if (tmpl == NULL) {
        fail(err, errlen, path, "no value to expand");
        return NULL;
    }
    buf_init(&p, path);
    json_t *out = map_value(tmpl, &p, scope != NULL ? scope : &empty, leaf, err, errlen);
    free(p.p);
    return out;
}

json_t *template_expand(const json_t *tmpl, const char *path, const template_scope_t *scope,
                        char *err, size_t errlen)
{
    return map_strings(tmpl, path, scope, text_of_string, err, errlen);
}

json_t *template_expand_parts(const json_t *tmpl, const char *path, const template_scope_t *scope,
                              char *err, size_t errlen)
{
    return map_strings(tmpl, path, scope, parts_of_string, err, errlen);
}

/* A syntax error also gives NULL, with its message in err. */
char *template_expand_string(const char *s, const char *path, const template_scope_t *scope,
                             char *err, size_t errlen)
{
    static const template_scope_t empty;
    buf_t b;
    json_t *whole;
    buf_init(&b, NULL);
    if (expand_text(s, strlen(s), false, path, scope != NULL ? scope : &empty, &b, &whole, err,
                    errlen) != 0) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

bool template_present(const char *s)
{
    for (const char *p = strchr(s, '$'); p != NULL; p = strchr(p + 1, '$')) {
        if (p[1] == '$' && p[2] == '{')
            p += 2; /* an escaped "$${": skip the literal "${" it writes */
        else if (p[1] == '{')
            return true;
    }
    return false;
}

/* ---- checking ------------------------------------------------------------------- */

typedef template_names_t check_t;

static void roots_list(unsigned roots, char *out, size_t len)
{
    static const struct {
        unsigned bit;
        const char *name;
    } all[] = {
        {TEMPLATE_PARAMS, "params"}, {TEMPLATE_STATE, "state"}, {TEMPLATE_JOB, "job"},
        {TEMPLATE_STEPS, "steps"},   {TEMPLATE_ERROR, "error"}, {TEMPLATE_ADMISSION, "admission"},
    };
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < TERN_ARRAY_SIZE(all); i++) {
        if ((roots & all[i].bit) == 0)
            continue;
        int w = snprintf(out + n, len - n, "%s%s", n > 0 ? ", " : "", all[i].name);
        if (w < 0 || (size_t)w >= len - n)
            return;
        n += (size_t)w;
    }
    if (n == 0)
        snprintf(out, len, "none");
}

static const char *root_word(enum template_root root)
{
    switch (root) {
    case TEMPLATE_PARAMS:
        return "params";
    case TEMPLATE_STATE:
        return "state";
    case TEMPLATE_JOB:
        return "job";
    case TEMPLATE_STEPS:
        return "steps";
    case TEMPLATE_ERROR:
        return "error";
    case TEMPLATE_ADMISSION:
        return "admission";
    }
    return "?";
}

static int check_string(const char *s, size_t len, const char *path, const check_t *ck, char *err,
                        size_t errlen)
{
    size_t pos = 0;
    piece_t pc;
    name_t nm;
    for (;;) {
        if (next_piece(s, len, &pos, &pc, path, err, errlen) != 0)
            return TERN_EINVAL;
        if (pc.kind == PIECE_END)
            return 0;
        if (pc.kind == PIECE_TEXT)
            continue;
        const ref_t *r = &pc.ref;
        if (parse_name(r, &nm, path, err, errlen) != 0)
            return TERN_EINVAL;
        if ((ck->roots & nm.root) == 0) {
            char avail[64];
            roots_list(ck->roots, avail, sizeof avail);
            return fail(
                err, errlen, path, "%.*s uses %s, which is not available here (available: %s)%s",
                (int)r->text_len, r->text, root_word(nm.root), avail,
                nm.root == TEMPLATE_ERROR
                    ? "; error.* exists only in the args of onerror, oncancel and fallback steps"
                    : "");
        }
        if (nm.root == TEMPLATE_STEPS) {
            bool found = false;
            for (size_t i = 0; i < ck->n_steps && !found; i++)
                found = ck->steps[i] != NULL && seg_is(nm.step, nm.step_len, ck->steps[i]);
            if (!found)
                return fail(err, errlen, path,
                            "%.*s names step \"%.*s\", which does not run before this step",
                            (int)r->text_len, r->text, (int)nm.step_len, nm.step);
        }
        if (nm.root == TEMPLATE_ADMISSION) {
            bool found = false;
            for (size_t i = 0; i < ck->n_admission && !found; i++)
                found = ck->admission[i] != NULL && seg_is(nm.step, nm.step_len, ck->admission[i]);
            if (!found)
                return fail(err, errlen, path,
                            "%.*s names admission check \"%.*s\", which does not run before "
                            "this",
                            (int)r->text_len, r->text, (int)nm.step_len, nm.step);
        }
    }
}

static int check_value(const json_t *v, buf_t *path, const check_t *ck, char *err, size_t errlen)
{
    int rc = 0;
    switch (json_typeof(v)) {
    case JSON_STRING:
        return check_string(json_string_value(v), json_string_length(v), path->p, ck, err, errlen);
    case JSON_OBJECT: {
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)v, key, val)
        {
            size_t old = path_push_key(path, key);
            rc = check_value(val, path, ck, err, errlen);
            buf_truncate(path, old);
            if (rc != 0)
                return rc;
        }
        return 0;
    }
    case JSON_ARRAY: {
        size_t i;
        json_t *val;
        json_array_foreach(v, i, val)
        {
            size_t old = path_push_index(path, i);
            rc = check_value(val, path, ck, err, errlen);
            buf_truncate(path, old);
            if (rc != 0)
                return rc;
        }
        return 0;
    }
    default:
        return 0;
    }
}

int template_check_names(const json_t *tmpl, const char *path, const template_names_t *names,
                         char *err, size_t errlen)
{
    buf_t p;
    if (tmpl == NULL)
        return 0;
    buf_init(&p, path);
    int rc = check_value(tmpl, &p, names, err, errlen);
    free(p.p);
    return rc;
}

int template_check(const json_t *tmpl, const char *path, unsigned roots,
                   const char *const *known_steps, size_t n_known, char *err, size_t errlen)
{
    template_names_t names = {.roots = roots, .steps = known_steps, .n_steps = n_known};
    return template_check_names(tmpl, path, &names, err, errlen);
}
