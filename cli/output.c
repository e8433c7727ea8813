/*
 * output.c -- tables, columns and JSON output; see output.h. It knows nothing of jobs
 * or workflows: commands hand it rows and column lists.
 */
#include "output.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"

#define CELL_MAX 1024

const json_t *output_path_get(const json_t *root, const char *path)
{
    const json_t *v = root;
    const char *p = path;
    while (v != NULL && *p != '\0') {
        const char *dot = strchr(p, '.');
        size_t len = dot != NULL ? (size_t)(dot - p) : strlen(p);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)len, p);
        if (json_is_object(v)) {
            v = json_object_get(v, key);
        } else if (json_is_array(v)) {
            char *end;
            unsigned long i = strtoul(key, &end, 10);
            v = (len > 0 && *end == '\0') ? json_array_get(v, i) : NULL;
        } else {
            v = NULL;
        }
        p += len;
        if (*p == '.')
            p++;
    }
    return v;
}

void output_clean(const char *s, char *buf, size_t n)
{
    if (n == 0)
        return;
    size_t k = 0;
    for (; *s != '\0' && k + 1 < n; s++)
        buf[k++] = ((unsigned char)*s < 0x20 || *s == 0x7f) ? ' ' : *s;
    buf[k] = '\0';
}

static bool is_scalar(const json_t *v)
{
    return !json_is_object(v) && !json_is_array(v);
}

void output_cell_text(const json_t *v, char *buf, size_t n)
{
    if (n == 0)
        return;
    buf[0] = '\0';
    if (v == NULL || json_is_null(v)) {
        snprintf(buf, n, "-");
    } else if (json_is_string(v)) {
        output_clean(json_string_value(v), buf, n);
    } else if (json_is_array(v)) {
        bool scalars = true;
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e) scalars = scalars && is_scalar(e);
        if (scalars && json_array_size(v) == 0) {
            snprintf(buf, n, "-");
            return;
        }
        if (scalars) {
            size_t k = 0;
            json_array_foreach(v, i, e)
            {
                char cell[CELL_MAX];
                output_cell_text(e, cell, sizeof cell);
                int w = snprintf(buf + k, n - k, "%s%s", i > 0 ? "," : "", cell);
                if (w < 0 || (size_t)w >= n - k)
                    break;
                k += (size_t)w;
            }
            return;
        }
    }
    if (buf[0] == '\0' && v != NULL && !json_is_string(v)) {
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
        output_clean(s != NULL ? s : "?", buf, n);
        free(s);
    }
}

size_t output_display_width(const char *s)
{
    size_t w = 0;
    for (; *s != '\0'; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            w++;
    return w;
}

void output_json(FILE *out, const json_t *v)
{
    char *s = json_dumps(v, JSON_INDENT(2) | JSON_ENCODE_ANY);
    if (s != NULL) {
        fputs(s, out);
        fputc('\n', out);
        free(s);
    }
}

/* ---- columns ------------------------------------------------------------------- */

/* A column chosen with -o: either one of the known columns or a JSON path. */
typedef struct chosen {
    char *given;                  /* the name as typed (malloc'd), the key in -j -o output */
    char *header;                 /* malloc'd */
    const output_column_t *known; /* or NULL: `given` is a path */
} chosen_t;

/* A malloc'd upper-case copy of s: the header of a column. */
static char *upper(const char *s)
{
    char *h = xstrdup(s);
    for (char *p = h; *p != '\0'; p++)
        *p = (char)toupper((unsigned char)*p);
    return h;
}

static size_t parse_columns(const char *spec, const output_column_t *known, chosen_t **out)
{
    size_t n = 0, cap = 8;
    chosen_t *cols = xcalloc(cap, sizeof *cols);
    const char *p = spec;
    while (*p != '\0') {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        while (len > 0 && isspace((unsigned char)*p)) {
            p++;
            len--;
        }
        while (len > 0 && isspace((unsigned char)p[len - 1]))
            len--;
        if (len > 0) {
            if (n == cap) {
                cap *= 2;
                cols = xrealloc(cols, cap * sizeof *cols);
            }
            chosen_t *c = &cols[n++];
            c->given = xstrndup(p, len);
            c->known = NULL;
            for (const output_column_t *k = known; k != NULL && k->name != NULL; k++) {
                if (strcasecmp(k->name, c->given) == 0 ||
                    (k->path != NULL && strcmp(k->path, c->given) == 0)) {
                    c->known = k;
                    break;
                }
            }
            c->header = upper(c->known != NULL ? c->known->name : c->given);
        }
        p += len;
        while (*p != '\0' && *p != ',')
            p++;
        if (*p == ',')
            p++;
    }
    *out = cols;
    return n;
}

static void free_columns(chosen_t *cols, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(cols[i].given);
        free(cols[i].header);
    }
    free(cols);
}

/* The chosen columns: -o's, or all the defaults. */
static size_t choose(const output_opts_t *o, const output_column_t *defaults, chosen_t **out)
{
    if (o->columns != NULL && o->columns[0] != '\0')
        return parse_columns(o->columns, defaults, out);
    size_t n = 0;
    while (defaults != NULL && defaults[n].name != NULL)
        n++;
    chosen_t *cols = xcalloc(n > 0 ? n : 1, sizeof *cols);
    for (size_t i = 0; i < n; i++) {
        cols[i].given = xstrdup(defaults[i].name);
        cols[i].header = upper(defaults[i].name);
        cols[i].known = &defaults[i];
    }
    *out = cols;
    return n;
}

static void cell_of(const json_t *row, const chosen_t *c, char *buf, size_t n)
{
    if (c->known != NULL && c->known->fn != NULL)
        c->known->fn(row, buf, n);
    else
        output_cell_text(output_path_get(row, c->known != NULL ? c->known->path : c->given), buf,
                         n);
}

/* The row reduced to the chosen columns, for -j -o. */
static json_t *reduce_row(const json_t *row, const chosen_t *cols, size_t n)
{
    json_t *obj = json_object();
    for (size_t i = 0; i < n; i++) {
        const chosen_t *c = &cols[i];
        json_t *v;
        if (c->known != NULL && c->known->fn != NULL) {
            char buf[CELL_MAX];
            c->known->fn(row, buf, sizeof buf);
            v = json_string(buf);
        } else {
            const json_t *src = output_path_get(row, c->known != NULL ? c->known->path : c->given);
            v = src != NULL ? json_deep_copy(src) : json_null();
        }
        json_object_set_new(obj, c->given, v != NULL ? v : json_null());
    }
    return obj;
}

static void print_padded(FILE *out, const char *s, size_t width, bool last)
{
    fputs(s, out);
    if (last)
        return;
    for (size_t w = output_display_width(s); w < width + 2; w++)
        fputc(' ', out);
}

static void print_table(FILE *out, const output_opts_t *o, const json_t *rows, const chosen_t *cols,
                        size_t ncols)
{
    size_t nrows = json_array_size(rows);
    char **cells = xcalloc(nrows * ncols + 1, sizeof *cells);
    size_t *width = xcalloc(ncols + 1, sizeof *width);
    for (size_t c = 0; c < ncols; c++)
        width[c] = o->no_header ? 0 : output_display_width(cols[c].header);
    for (size_t r = 0; r < nrows; r++) {
        for (size_t c = 0; c < ncols; c++) {
            char buf[CELL_MAX];
            cell_of(json_array_get(rows, r), &cols[c], buf, sizeof buf);
            cells[r * ncols + c] = xstrdup(buf);
            size_t w = output_display_width(buf);
            if (w > width[c])
                width[c] = w;
        }
    }
    if (!o->no_header && ncols > 0) {
        for (size_t c = 0; c < ncols; c++)
            print_padded(out, cols[c].header, width[c], c + 1 == ncols);
        fputc('\n', out);
    }
    for (size_t r = 0; r < nrows; r++) {
        for (size_t c = 0; c < ncols; c++)
            print_padded(out, cells[r * ncols + c], width[c], c + 1 == ncols);
        fputc('\n', out);
    }
    for (size_t i = 0; i < nrows * ncols; i++)
        free(cells[i]);
    free(cells);
    free(width);
}

void output_table(FILE *out, const output_opts_t *o, const json_t *rows,
                  const output_column_t *columns, const json_t *json_doc)
{
    bool with_cols = o->columns != NULL && o->columns[0] != '\0';
    if (o->json && !with_cols) {
        output_json(out, json_doc != NULL ? json_doc : rows);
        return;
    }
    chosen_t *cols;
    size_t ncols = choose(o, columns, &cols);
    if (o->json) {
        json_t *reduced = json_array();
        size_t i;
        const json_t *row;
        json_array_foreach(rows, i, row)
            json_array_append_new(reduced, reduce_row(row, cols, ncols));
        output_json(out, reduced);
        json_decref(reduced);
    } else {
        print_table(out, o, rows, cols, ncols);
    }
    free_columns(cols, ncols);
}

output_column_t *output_auto_columns(const json_t *rows)
{
    const json_t *first = NULL;
    size_t i;
    const json_t *row;
    json_array_foreach(rows, i, row)
    {
        if (json_is_object(row)) {
            first = row;
            break;
        }
    }
    size_t n = json_object_size(first);
    output_column_t *cols = xcalloc(n + 1, sizeof *cols);
    size_t k = 0;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)first, key, v)
    {
        char text[CELL_MAX];
        bool simple = is_scalar(v);
        if (json_is_array(v)) {
            output_cell_text(v, text, sizeof text);
            simple = text[0] != '[' && text[0] != '{';
        }
        if (simple) {
            cols[k].name = key;
            cols[k].path = key;
            k++;
        }
    }
    return cols;
}

bool output_wants_generic(const output_opts_t *o)
{
    return o->json || (o->columns != NULL && o->columns[0] != '\0');
}

void output_object(FILE *out, const output_opts_t *o, const json_t *obj,
                   const output_column_t *columns)
{
    json_t *rows = json_pack("[O]", obj);
    output_table(out, o, rows, columns, obj);
    json_decref(rows);
}

void output_fields(FILE *out, const json_t *obj)
{
    size_t width = 0;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        size_t w = output_display_width(key);
        if (w > width)
            width = w;
    }
    json_object_foreach((json_t *)obj, key, v)
    {
        char k[256], text[4096];
        output_clean(key, k, sizeof k);
        output_cell_text(v, text, sizeof text);
        fprintf(out, "%s%*s  %s\n", k, (int)(width - output_display_width(k)), "", text);
    }
}
