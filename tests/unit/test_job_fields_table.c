/*
 * test_job_fields_table.c -- the table of job fields in engine/store/store.h against the code:
 * every field of a job's hash (tern:job:<uuid>) that a script or a C file writes or reads
 * by name must have a line in the table, and every line must name a field the code uses.
 * The source root is the first argument of this program.
 *
 * The table: the lines after the one whose first two words are "field" and "type", up
 * to the first empty comment line; the first word of a line that starts in the column of
 * "field" is a field's name (other lines go on with the columns of the line above).
 *
 * What counts as code using a field (heuristic rules, fitted to how the code is written;
 * Lua comments are dropped first):
 *   L1 Lua: redis.call('HSET' | 'HSETNX' | 'HINCRBY' | 'HDEL' | 'HGET' | 'HMGET' |
 *      'HEXISTS', KEY, ...) where KEY is a job's hash: jkey(...), or the names the scripts
 *      give it, `k` and `wk`. A field argument (every argument after KEY; for HSET,
 *      HSETNX and HINCRBY every other one, starting with the first) that is a string
 *      literal names a field; 'pb_attempt:' .. i names the pattern pb_attempt:<i>; the
 *      argument unpack(T) names the fields of table T (rule L2).
 *   L2 Lua: the fields of a table T: the string literals of a table named in capitals
 *      ending in _FIELDS or _GONE (RARE_FIELDS, FINISH_FIELDS...: all its literals are
 *      names); for any other T passed to HSET with unpack(T) (a name/value list), the
 *      literals at name positions of `local T = {...}`, of runs of `T[#T + 1] = ...`
 *      lines (the first, third... of a run), and of `ipairs({...})` whose loop appends
 *      each element to T.
 *   L3 Lua: put('name', ...) (step_commit.lua's writer of the job's fields).
 *   L4 Lua: reads of a job's fields as a table: f.name, now_f.name and cur.name (the
 *      names the scripts give hash_fields(...), finish_fields(...) and step_commit's
 *      record), and fields[i] == 'name' (a flat HGETALL answer).
 *   C1 C, in files that include job_fields.h: job_fields_get, field_str, field_json,
 *      field_ll, field_time and text_field_str with a string literal as second argument,
 *      and the rows {"member", M_KIND, "field", n} of job_view.c's member table.
 *   C2 C: field_push(op, args, "name", ...) (the fields job_create.c sends job_create.lua).
 * Fields a hash has under other names than these (a later rule's business) are missed:
 * the rules are kept precise rather than complete, so that no word is taken for a field.
 *
 * The columns: each place the rules find a field written (read) must be listed in the
 * field's "written by" ("read by") column: a script by its stem, a library of
 * engine/store/lua/lib/ as lib/<stem> (a table or helper of a library counts as that
 * library, even where a script unpacks it), job_view.c as "view", runner.c as "runner",
 * another C file by its name. The columns may list more
 * (readers the rules cannot see, such as step_commit's reads through RARE_FIELDS).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *source_root; /* argv[1] */

/* ---- names and where they are used ----------------------------------------------- */

enum { USE_READ = 1, USE_WRITE = 2 };

typedef struct field_use {
    char name[64];
    char where[64]; /* file stem (Lua) or file name (C) */
    int how;        /* USE_READ | USE_WRITE */
    /* In the table only: the texts of its "written by" and "read by" columns. */
    char writers[512], readers[512];
} field_use_t;

typedef struct uses {
    field_use_t *v;
    size_t n, cap;
} uses_t;

static void uses_add(uses_t *u, const char *name, size_t len, const char *where, int how)
{
    if (len == 0 || len >= sizeof u->v[0].name)
        return;
    for (size_t i = 0; i < u->n; i++)
        if (strlen(u->v[i].name) == len && strncmp(u->v[i].name, name, len) == 0 &&
            strcmp(u->v[i].where, where) == 0) {
            u->v[i].how |= how;
            return;
        }
    if (u->n == u->cap) {
        u->cap = u->cap > 0 ? 2 * u->cap : 64;
        u->v = realloc(u->v, u->cap * sizeof u->v[0]);
        assert_non_null(u->v);
    }
    field_use_t *e = &u->v[u->n++];
    memcpy(e->name, name, len);
    e->name[len] = '\0';
    snprintf(e->where, sizeof e->where, "%s", where);
    e->how = how;
    e->writers[0] = e->readers[0] = '\0';
}

static bool uses_has(const uses_t *u, const char *name, int how)
{
    for (size_t i = 0; i < u->n; i++)
        if (strcmp(u->v[i].name, name) == 0 && (u->v[i].how & how) != 0)
            return true;
    return false;
}

static bool is_name_char(char c)
{
    return islower((unsigned char)c) || isdigit((unsigned char)c) || c == '_';
}

/* ---- Lua ------------------------------------------------------------------------- */

/* The text without its comments (-- to the end of the line, outside strings); owned by
 * the caller. */
static char *lua_strip_comments(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(n + 1), *o = out;
    assert_non_null(out);
    char quote = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (quote != 0) {
            if (c == '\\' && i + 1 < n) {
                *o++ = c;
                c = s[++i];
            } else if (c == quote || c == '\n') {
                quote = 0;
            }
        } else if (c == '\'' || c == '"') {
            quote = c;
        } else if (c == '-' && s[i + 1] == '-') {
            while (i < n && s[i] != '\n')
                i++;
            if (i < n)
                *o++ = '\n';
            continue;
        }
        *o++ = c;
    }
    *o = '\0';
    return out;
}

/* The end of the bracketed list that starts after s[0] (one of `(` or `{`): the index of
 * its closing bracket, or 0 when it has none. */
static size_t bracket_end(const char *s)
{
    int depth = 0;
    char quote = 0;
    for (size_t i = 0; s[i] != '\0'; i++) {
        char c = s[i];
        if (quote != 0) {
            if (c == '\\' && s[i + 1] != '\0')
                i++;
            else if (c == quote)
                quote = 0;
        } else if (c == '\'' || c == '"') {
            quote = c;
        } else if (c == '(' || c == '{' || c == '[') {
            depth++;
        } else if (c == ')' || c == '}' || c == ']') {
            if (--depth == 0)
                return i;
        }
    }
    return 0;
}

#define MAX_ARGS 64

typedef struct arg {
    const char *s; /* trimmed, not terminated */
    size_t len;
} arg_t;

/* Splits s[0..len) at commas outside brackets and strings; returns the count. */
static size_t split_args(const char *s, size_t len, arg_t *args)
{
    size_t n = 0, start = 0;
    int depth = 0;
    char quote = 0;
    for (size_t i = 0; i <= len && n < MAX_ARGS; i++) {
        char c = i < len ? s[i] : ',';
        if (quote != 0) {
            if (c == '\\')
                i++;
            else if (c == quote)
                quote = 0;
            continue;
        }
        if (c == '\'' || c == '"')
            quote = c;
        else if (c == '(' || c == '{' || c == '[')
            depth++;
        else if (c == ')' || c == '}' || c == ']')
            depth--;
        else if (c == ',' && depth == 0) {
            size_t a = start, b = i;
            while (a < b && isspace((unsigned char)s[a]))
                a++;
            while (b > a && isspace((unsigned char)s[b - 1]))
                b--;
            args[n++] = (arg_t){s + a, b - a};
            start = i + 1;
        }
    }
    return n;
}

static bool arg_is(const arg_t *a, const char *word)
{
    return a->len == strlen(word) && strncmp(a->s, word, a->len) == 0;
}

/* The field an argument names: 'name' -> name, 'name:' .. x -> name:<i>. Writes it to
 * out and returns true, or false when the argument is not such a literal. */
static bool lua_field_literal(const arg_t *a, char *out, size_t outlen)
{
    if (a->len < 3 || (a->s[0] != '\'' && a->s[0] != '"'))
        return false;
    size_t i = 1;
    while (i < a->len && is_name_char(a->s[i]))
        i++;
    if (i == 1 || !islower((unsigned char)a->s[1]))
        return false;
    if (i + 1 == a->len && a->s[i] == a->s[0]) {
        snprintf(out, outlen, "%.*s", (int)(i - 1), a->s + 1);
        return true;
    }
    if (a->s[i] == ':' && i + 1 < a->len && a->s[i + 1] == a->s[0]) {
        const char *rest = a->s + i + 2;
        size_t restlen = a->len - i - 2;
        while (restlen > 0 && isspace((unsigned char)*rest))
            rest++, restlen--;
        if (restlen > 2 && strncmp(rest, "..", 2) == 0) {
            snprintf(out, outlen, "%.*s:<i>", (int)(i - 1), a->s + 1);
            return true;
        }
    }
    return false;
}

/* A table passed to a job's HSET/HMGET/HDEL with unpack(): its name, and how. */
typedef struct unpacked {
    char name[64];
    int how;
    bool pairs; /* a name/value list (HSET) */
} unpacked_t;

typedef struct lua_scan {
    unpacked_t t[32];
    size_t n;
} lua_scan_t;

static bool lua_key_is_job(const arg_t *key)
{
    return arg_is(key, "k") || arg_is(key, "wk") ||
           (key->len > 5 && strncmp(key->s, "jkey(", 5) == 0);
}

/* Rule L1 on one call's arguments. */
static void lua_call(const char *s, size_t len, const char *where, lua_scan_t *ls, uses_t *u)
{
    static const struct {
        const char *cmd;
        int how;
        bool pairs;
    } cmds[] = {{"'HSET'", USE_WRITE, true},    {"'HSETNX'", USE_WRITE, true},
                {"'HINCRBY'", USE_WRITE, true}, {"'HDEL'", USE_WRITE, false},
                {"'HGET'", USE_READ, false},    {"'HMGET'", USE_READ, false},
                {"'HEXISTS'", USE_READ, false}};
    arg_t args[MAX_ARGS];
    size_t n = split_args(s, len, args);
    if (n < 3 || !lua_key_is_job(&args[1]))
        return;
    size_t c = 0;
    while (c < sizeof cmds / sizeof cmds[0] && !arg_is(&args[0], cmds[c].cmd))
        c++;
    if (c == sizeof cmds / sizeof cmds[0])
        return;
    for (size_t i = 2; i < n; i += cmds[c].pairs ? 2 : 1) {
        char name[64];
        if (lua_field_literal(&args[i], name, sizeof name)) {
            uses_add(u, name, strlen(name), where, cmds[c].how);
        } else if (args[i].len > 8 && strncmp(args[i].s, "unpack(", 7) == 0 &&
                   ls->n < sizeof ls->t / sizeof ls->t[0]) {
            unpacked_t *t = &ls->t[ls->n++];
            snprintf(t->name, sizeof t->name, "%.*s", (int)(args[i].len - 8), args[i].s + 7);
            t->how = cmds[c].how;
            t->pairs = cmds[c].pairs;
        }
    }
}

/* The literal names of a table constructor's items (every item, or those at name
 * positions of a name/value list). */
static void lua_table_items(const char *s, size_t len, bool pairs, const char *where, int how,
                            uses_t *u)
{
    arg_t items[MAX_ARGS];
    size_t n = split_args(s, len, items);
    for (size_t i = 0; i < n; i += pairs ? 2 : 1) {
        char name[64];
        if (lua_field_literal(&items[i], name, sizeof name))
            uses_add(u, name, strlen(name), where, how);
    }
}

/* True when the line (s, up to its end) is `T[#T + 1] = ...`; *value is the text after
 * the `=`. */
static bool lua_append_line(const char *s, const char *t, const char **value)
{
    char head[160];
    snprintf(head, sizeof head, "%s[#%s + 1] =", t, t);
    while (*s == ' ')
        s++;
    if (strncmp(s, head, strlen(head)) != 0)
        return false;
    *value = s + strlen(head);
    while (**value == ' ')
        (*value)++;
    return true;
}

/* `for _, v in ipairs({...}) do` right before `line` (an append of v to a table): the
 * names of that list of pairs. */
static void lua_ipairs_before(const char *text, const char *line, const char *where, int how,
                              uses_t *u)
{
    static const char loop[] = "in ipairs({";
    const char *last = NULL;
    for (const char *p = strstr(text, loop); p != NULL && p < line; p = strstr(p + 1, loop))
        last = p;
    if (last == NULL)
        return;
    const char *open = last + strlen(loop) - 1;
    size_t end = bracket_end(open);
    if (end == 0)
        return;
    const char *q = open + end + 1;
    if (*q++ != ')')
        return;
    while (*q == ' ')
        q++;
    if (strncmp(q, "do", 2) != 0)
        return;
    for (q += 2; q < line; q++)
        if (!isspace((unsigned char)*q))
            return;
    lua_table_items(open + 1, end - 1, true, where, how, u);
}

/* Rule L2 for a table of name/value pairs `t` in the text. */
static void lua_pairs_table(const char *text, const char *t, const char *where, int how, uses_t *u)
{
    char decl[96];
    snprintf(decl, sizeof decl, "local %s = {", t);
    for (const char *p = strstr(text, decl); p != NULL; p = strstr(p + 1, decl)) {
        const char *open = p + strlen(decl) - 1;
        size_t end = bracket_end(open);
        if (end > 0)
            lua_table_items(open + 1, end - 1, true, where, how, u);
    }
    /* Runs of appends: the first, third... line of a run appends a name. */
    size_t run = 0;
    for (const char *line = text; *line != '\0';) {
        const char *eol = strchr(line, '\n');
        size_t linelen = eol != NULL ? (size_t)(eol - line) : strlen(line);
        const char *value;
        if (lua_append_line(line, t, &value)) {
            arg_t a = {value, (size_t)(line + linelen - value)};
            while (a.len > 0 && isspace((unsigned char)a.s[a.len - 1]))
                a.len--;
            char name[64];
            if (run % 2 == 0 && lua_field_literal(&a, name, sizeof name))
                uses_add(u, name, strlen(name), where, how);
            if (run == 0 && lua_field_literal(&a, name, sizeof name) == false)
                lua_ipairs_before(text, line, where, how, u);
            run++;
        } else if (linelen > 0) {
            run = 0;
        }
        line = eol != NULL ? eol + 1 : line + linelen;
    }
}

/* Rules L2 (tables in capitals), L3 and L4: words followed by a literal or a name. */
static void lua_scan_words(const char *text, const char *where, uses_t *u)
{
    for (const char *p = text; *p != '\0'; p++) {
        if (p > text && (is_name_char(p[-1]) || isupper((unsigned char)p[-1]) || p[-1] == '.'))
            continue;
        /* L2: local NAME_FIELDS = {...} / NAME_GONE = {...} */
        if (strncmp(p, "local ", 6) == 0 && isupper((unsigned char)p[6])) {
            const char *n = p + 6, *e = n;
            while (isupper((unsigned char)*e) || *e == '_')
                e++;
            size_t nl = (size_t)(e - n);
            bool fields = nl > 7 && strncmp(e - 7, "_FIELDS", 7) == 0;
            bool gone = nl > 5 && strncmp(e - 5, "_GONE", 5) == 0;
            if ((fields || gone) && strncmp(e, " = {", 4) == 0) {
                size_t end = bracket_end(e + 3);
                if (end > 0)
                    lua_table_items(e + 4, end - 1, false, where, gone ? USE_WRITE : USE_READ, u);
            }
            continue;
        }
        /* L3: put('name', ...) */
        if (strncmp(p, "put(", 4) == 0) {
            arg_t args[MAX_ARGS];
            size_t end = bracket_end(p + 3);
            char name[64];
            if (end > 0 && split_args(p + 4, end - 1, args) >= 1 &&
                lua_field_literal(&args[0], name, sizeof name))
                uses_add(u, name, strlen(name), where, USE_WRITE);
            continue;
        }
        /* L4: f.name, now_f.name, cur.name; fields[i] == 'name' */
        static const char *const records[] = {"f.", "now_f.", "cur."};
        for (size_t r = 0; r < sizeof records / sizeof records[0]; r++) {
            size_t rl = strlen(records[r]);
            if (strncmp(p, records[r], rl) == 0 && islower((unsigned char)p[rl])) {
                size_t e = rl;
                while (is_name_char(p[e]))
                    e++;
                uses_add(u, p + rl, e - rl, where, USE_READ);
            }
        }
        if (strncmp(p, "fields[i] == ", 13) == 0) {
            const char *q = p + 13;
            const char *e = q + 1;
            while (*e != '\0' && *e != *q && *e != '\n')
                e++;
            arg_t a = {q, (size_t)(e - q + 1)};
            char name[64];
            if (*e == *q && lua_field_literal(&a, name, sizeof name))
                uses_add(u, name, strlen(name), where, USE_READ);
        }
    }
}

/* Every rule on one script's text (comments included: they are dropped here). */
static void lua_scan(const char *source, const char *where, uses_t *u)
{
    char *text = lua_strip_comments(source);
    lua_scan_t ls = {.n = 0};
    static const char call[] = "redis.call(";
    for (const char *p = strstr(text, call); p != NULL; p = strstr(p + 1, call)) {
        const char *open = p + strlen(call) - 1;
        size_t end = bracket_end(open);
        if (end > 0)
            lua_call(open + 1, end - 1, where, &ls, u);
    }
    for (size_t i = 0; i < ls.n; i++)
        if (ls.t[i].pairs && islower((unsigned char)ls.t[i].name[0]))
            lua_pairs_table(text, ls.t[i].name, where, ls.t[i].how, u);
    lua_scan_words(text, where, u);
    free(text);
}

/* ---- C --------------------------------------------------------------------------- */

/* After `p` (just past a call's open parenthesis): skip `skip` arguments and take a
 * string literal, if that is what comes. */
static void c_literal_arg(const char *p, int skip, const char *where, int how, uses_t *u)
{
    for (int i = 0; i < skip; i++) {
        p = strchr(p, ',');
        if (p == NULL)
            return;
        p++;
    }
    while (isspace((unsigned char)*p))
        p++;
    if (*p != '"')
        return;
    const char *e = p + 1;
    while (is_name_char(*e))
        e++;
    if (*e == '"' && e > p + 1)
        uses_add(u, p + 1, (size_t)(e - p - 1), where, how);
}

static void c_scan(const char *text, const char *where, uses_t *u)
{
    bool reads = strstr(text, "#include \"store/job_fields.h\"") != NULL;
    static const struct {
        const char *call;
        int skip; /* arguments before the name */
    } getters[] = {{"job_fields_get(", 1}, {"field_str(", 1},  {"field_json(", 1},
                   {"field_ll(", 1},       {"field_time(", 1}, {"text_field_str(", 2}};
    for (const char *p = text; *p != '\0'; p++) {
        if (p > text && is_name_char(p[-1]))
            continue;
        if (strncmp(p, "field_push(", 11) == 0)
            c_literal_arg(p + 11, 2, where, USE_WRITE, u);
        if (!reads)
            continue;
        for (size_t g = 0; g < sizeof getters / sizeof getters[0]; g++)
            if (strncmp(p, getters[g].call, strlen(getters[g].call)) == 0)
                c_literal_arg(p + strlen(getters[g].call), getters[g].skip, where, USE_READ, u);
        /* {"member", M_KIND, "field", n} */
        if (p[0] == '{' && p[1] == '"') {
            const char *m = strstr(p, "\", M_");
            const char *eol = strchr(p, '\n');
            if (m != NULL && (eol == NULL || m < eol)) {
                const char *k = m + 5;
                while (isupper((unsigned char)*k) || *k == '_')
                    k++;
                if (*k == ',')
                    c_literal_arg(k + 1, 0, where, USE_READ, u);
            }
        }
    }
}

/* ---- files ----------------------------------------------------------------------- */

static char *read_text(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    size_t got = fread(s, 1, (size_t)n, fp);
    s[got] = '\0';
    fclose(fp);
    return s;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

/* Scans every .lua file in dir and its lib/ (a library of lib/ as "lib/<stem>"), every .c
 * file in dir and below. */
static void scan_dir(const char *dir, bool lua, uses_t *u, size_t *nfiles)
{
    bool in_lib = lua && ends_with(dir, "/lib");
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (lua && ends_with(e->d_name, ".lua")) {
            char *text = read_text(path);
            assert_non_null(text);
            char stem[64];
            snprintf(stem, sizeof stem, "%s%.*s", in_lib ? "lib/" : "",
                     (int)(strlen(e->d_name) - 4), e->d_name);
            lua_scan(text, stem, u);
            free(text);
            (*nfiles)++;
        } else if (lua && !in_lib && e->d_type == DT_DIR && strcmp(e->d_name, "lib") == 0) {
            scan_dir(path, true, u, nfiles);
        } else if (!lua && ends_with(e->d_name, ".c")) {
            char *text = read_text(path);
            assert_non_null(text);
            c_scan(text, e->d_name, u);
            free(text);
            (*nfiles)++;
        } else if (!lua && e->d_type == DT_DIR) {
            scan_dir(path, false, u, nfiles);
        }
    }
    closedir(d);
}

/* The field names of the table in store.h's text (into u, where "store.h"). */
/* Appends line[from, to) (to: at most len) and a blank to column text col. */
static void column_add(char *col, size_t size, const char *line, size_t len, size_t from, size_t to)
{
    if (from >= len)
        return;
    if (to > len)
        to = len;
    size_t have = strlen(col);
    snprintf(col + have, size - have, "%.*s ", (int)(to - from), line + from);
}

static size_t table_parse(const char *text, uses_t *u)
{
    size_t n = 0, column = 0, wcol = 0, rcol = 0;
    bool in_table = false;
    for (const char *line = text; *line != '\0';) {
        const char *eol = strchr(line, '\n');
        size_t len = eol != NULL ? (size_t)(eol - line) : strlen(line);
        const char *p = line;
        while (p < line + len && (*p == ' ' || *p == '*'))
            p++;
        const char *w = p;
        while (p < line + len && *p != ' ')
            p++;
        size_t wl = (size_t)(p - w);
        while (p < line + len && *p == ' ')
            p++;
        if (!in_table) {
            in_table = wl == 5 && strncmp(w, "field", 5) == 0 && strncmp(p, "type ", 5) == 0;
            column = (size_t)(w - line);
            const char *wc = strstr(line, "written by"), *rc = strstr(line, "read by");
            if (in_table) {
                assert_true(wc != NULL && rc != NULL && wc < rc && rc < line + len);
                wcol = (size_t)(wc - line);
                rcol = (size_t)(rc - line);
            }
        } else if (wl == 0 || strncmp(line, " */", 3) == 0) {
            break;
        } else {
            if ((size_t)(w - line) == column) {
                uses_add(u, w, wl, "store.h", USE_READ | USE_WRITE);
                n++;
            }
            if (u->n > 0) {
                field_use_t *row = &u->v[u->n - 1];
                column_add(row->writers, sizeof row->writers, line, len, wcol, rcol);
                column_add(row->readers, sizeof row->readers, line, len, rcol, len);
            }
        }
        line = eol != NULL ? eol + 1 : line + len;
    }
    return n;
}

/* True when the column text lists `name` as a word. */
static bool column_lists(const char *col, const char *name)
{
    size_t nl = strlen(name);
    for (const char *p = strstr(col, name); p != NULL; p = strstr(p + 1, name)) {
        bool before = p == col || (!is_name_char(p[-1]) && p[-1] != '.');
        bool after = !is_name_char(p[nl]) && (p[nl] != '.' || !is_name_char(p[nl + 1]));
        if (before && after)
            return true;
    }
    return false;
}

/* How the table's columns name where code is: a script by its stem, job_view.c as
 * "view", runner.c as "runner", any other C file by its name. */
static const char *column_name(const char *where)
{
    if (strcmp(where, "job_view.c") == 0)
        return "view";
    if (strcmp(where, "runner.c") == 0)
        return "runner";
    return where;
}

/* Compares; prints each difference and returns their count. */
static int table_check(const uses_t *table, const uses_t *code)
{
    int bad = 0;
    for (size_t i = 0; i < code->n; i++) {
        if (uses_has(table, code->v[i].name, USE_READ | USE_WRITE))
            continue;
        bool first = true;
        for (size_t j = 0; j < i; j++)
            if (strcmp(code->v[j].name, code->v[i].name) == 0)
                first = false;
        if (!first)
            continue;
        print_error("job field %s: used by the code but not in store.h's table:", code->v[i].name);
        for (size_t j = i; j < code->n; j++)
            if (strcmp(code->v[j].name, code->v[i].name) == 0)
                print_error(" %s %s;", code->v[j].how & USE_WRITE ? "written in" : "read in",
                            code->v[j].where);
        print_error("\n");
        bad++;
    }
    for (size_t i = 0; i < code->n; i++) {
        const field_use_t *c = &code->v[i];
        for (size_t j = 0; j < table->n; j++) {
            const field_use_t *row = &table->v[j];
            if (strcmp(row->name, c->name) != 0)
                continue;
            const char *col = column_name(c->where);
            if ((c->how & USE_WRITE) != 0 && !column_lists(row->writers, col)) {
                print_error("job field %s: written in %s, not listed in its \"written by\"\n",
                            c->name, col);
                bad++;
            }
            if ((c->how & USE_READ) != 0 && !column_lists(row->readers, col)) {
                print_error("job field %s: read in %s, not listed in its \"read by\"\n", c->name,
                            col);
                bad++;
            }
        }
    }
    for (size_t i = 0; i < table->n; i++)
        if (!uses_has(code, table->v[i].name, USE_READ | USE_WRITE)) {
            print_error("job field %s: in store.h's table, but no code uses it (stale)\n",
                        table->v[i].name);
            bad++;
        }
    return bad;
}

static void scan_tree(uses_t *code)
{
    char dir[1024];
    size_t nlua = 0, nc = 0;
    snprintf(dir, sizeof dir, "%s/engine/store/lua", source_root);
    scan_dir(dir, true, code, &nlua);
    snprintf(dir, sizeof dir, "%s/engine", source_root);
    scan_dir(dir, false, code, &nc);
    assert_true(nlua >= 20);
    assert_true(nc >= 40);
}

static char *store_h(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/engine/store/store.h", source_root);
    char *text = read_text(path);
    assert_non_null(text);
    return text;
}

/* ---- tests ----------------------------------------------------------------------- */

static void test_scanner_lua_rules(void **state)
{
    (void)state;
    uses_t u = {0};
    lua_scan("local k = jkey(uuid)\n"
             "redis.call('HSET', k, 'alpha', '1', 'beta', x) -- 'not_me'\n"
             "redis.call('HSET', P .. 'locks', uuid, 'gamma')\n"
             "redis.call('HDEL', jkey(u), 'delta',\n    'epsilon')\n"
             "redis.call('HINCRBY', k, 'pb_fence:' .. idx, 1)\n"
             "local set = {'zeta', string.format('%d', 1), 'eta', 'theta'}\n"
             "set[#set + 1] = 'iota'\n"
             "set[#set + 1] = 'kappa'\n"
             "redis.call('HSET', k, unpack(set))\n"
             "local SOME_FIELDS = {'lambda', 'mu'}\n"
             "put('nu', 'xi')\n"
             "if f.omicron then end\n",
             "snippet", &u);
    assert_true(uses_has(&u, "alpha", USE_WRITE));
    assert_true(uses_has(&u, "beta", USE_WRITE));
    assert_false(uses_has(&u, "not_me", USE_READ | USE_WRITE));
    assert_false(uses_has(&u, "gamma", USE_READ | USE_WRITE));
    assert_true(uses_has(&u, "delta", USE_WRITE));
    assert_true(uses_has(&u, "epsilon", USE_WRITE));
    assert_true(uses_has(&u, "pb_fence:<i>", USE_WRITE));
    assert_true(uses_has(&u, "zeta", USE_WRITE));
    assert_true(uses_has(&u, "eta", USE_WRITE));
    assert_false(uses_has(&u, "theta", USE_READ | USE_WRITE)); /* a value */
    assert_true(uses_has(&u, "iota", USE_WRITE));
    assert_false(uses_has(&u, "kappa", USE_READ | USE_WRITE)); /* a value */
    assert_true(uses_has(&u, "lambda", USE_READ));
    assert_true(uses_has(&u, "mu", USE_READ));
    assert_true(uses_has(&u, "nu", USE_WRITE));
    assert_false(uses_has(&u, "xi", USE_READ | USE_WRITE));
    assert_true(uses_has(&u, "omicron", USE_READ));
    free(u.v);
}

static void test_scanner_c_rules(void **state)
{
    (void)state;
    uses_t u = {0};
    c_scan("#include \"store/job_fields.h\"\n"
           "    {\"shown\", M_STR, \"alpha\", 0},\n"
           "    {\"chain\", M_STEPS, NULL, 0},\n"
           "    v = job_fields_get(f, \"beta\", NULL);\n"
           "    n = field_ll(f, \"gamma\", 0);\n"
           "    text_field_str(t, f, \"delta\");\n"
           "    field_push(op, &a, \"epsilon\", x);\n"
           "    json_object_get(o, \"not_me\");\n",
           "snippet.c", &u);
    assert_true(uses_has(&u, "alpha", USE_READ));
    assert_true(uses_has(&u, "beta", USE_READ));
    assert_true(uses_has(&u, "gamma", USE_READ));
    assert_true(uses_has(&u, "delta", USE_READ));
    assert_true(uses_has(&u, "epsilon", USE_WRITE));
    assert_false(uses_has(&u, "not_me", USE_READ | USE_WRITE));
    assert_false(uses_has(&u, "shown", USE_READ | USE_WRITE));
    assert_int_equal(u.n, 5);
    free(u.v);
}

/* The table in store.h names every field the code uses, and nothing else. */
static void test_table_matches_code(void **state)
{
    (void)state;
    uses_t table = {0}, code = {0};
    char *text = store_h();
    scan_tree(&code);
    if (getenv("TERN_FIELDS_LIST") != NULL) /* what the rules find, to write the table */
        for (size_t i = 0; i < code.n; i++)
            printf("%s %s%s %s\n", code.v[i].name, code.v[i].how & USE_WRITE ? "W" : "",
                   code.v[i].how & USE_READ ? "R" : "", code.v[i].where);
    assert_true(table_parse(text, &table) >= 30);
    assert_int_equal(table_check(&table, &code), 0);
    free(text);
    free(table.v);
    free(code.v);
}

/* Drift is caught: the table without its rf line, a script writing a new field, a
 * writer missing from a field's line. */
static void test_drift_is_caught(void **state)
{
    (void)state;
    char *text = store_h();
    char *rf = strstr(text, "\n *   rf ");
    assert_non_null(rf);
    char *next = strchr(rf + 1, '\n');
    memmove(rf, next, strlen(next) + 1);
    uses_t table = {0}, code = {0};
    table_parse(text, &table);
    scan_tree(&code);
    assert_false(uses_has(&table, "rf", USE_READ));
    assert_int_equal(table_check(&table, &code), 1);
    free(table.v);
    free(text);

    text = store_h();
    table = (uses_t){0};
    table_parse(text, &table);
    lua_scan("local k = jkey(ARGV[3])\nredis.call('HSET', k, 'brand_new', '1')\n", "copy", &code);
    assert_int_equal(table_check(&table, &code), 1);
    free(table.v);
    free(code.v);

    /* A writer left out of a field's line: job_info_add of xk's. */
    char *xk = strstr(text, "\n *   xk ");
    assert_non_null(xk);
    char *writer = strstr(xk, "job_info_add");
    assert_non_null(writer);
    memset(writer, ' ', strlen("job_info_add"));
    table = (uses_t){0};
    code = (uses_t){0};
    table_parse(text, &table);
    scan_tree(&code);
    for (size_t i = 0; i < table.n; i++)
        if (strcmp(table.v[i].name, "xk") == 0)
            assert_false(column_lists(table.v[i].writers, "job_info_add"));
    assert_int_equal(table_check(&table, &code), 1);
    free(table.v);
    free(code.v);
    free(text);
}

int main(int argc, char **argv)
{
    source_root = argc > 1 ? argv[1] : ".";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scanner_lua_rules),
        cmocka_unit_test(test_scanner_c_rules),
        cmocka_unit_test(test_table_matches_code),
        cmocka_unit_test(test_drift_is_caught),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
