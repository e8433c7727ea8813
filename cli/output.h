/*
 * output.h -- how commands print what the API answered: human tables by default, the
 * JSON itself with -j, chosen columns with -o, no header with -H.
 *
 * A table is a JSON array of objects (the rows) and a list of columns. A column has a
 * name (its header and its -o name) and either a JSON path into the row ("uuid",
 * "cursor.step", "chain_results.0.name") or a function that computes its text. With -o,
 * each name is matched against the command's known columns (case-insensitively), and
 * any other name is taken as a JSON path, so `-o uuid,params.vm_uuid` works on any
 * command. With -j the rows are printed as JSON; with -j and -o, each row is reduced to
 * the chosen paths.
 *
 * Cells: strings as they are (control characters shown as spaces), null or missing as
 * "-", numbers and booleans as JSON writes them, arrays of scalars joined by ",",
 * anything else as compact JSON. Columns are separated by two spaces, padded by display
 * width (UTF-8 code points), and the last column is not padded.
 *
 * All functions here are pure apart from writing to the FILE given; json_t arguments are
 * borrowed.
 */
#ifndef TERN_CLI_OUTPUT_H
#define TERN_CLI_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

typedef struct output_opts {
    bool json;           /* -j */
    const char *columns; /* -o, borrowed from argv, or NULL */
    bool no_header;      /* -H */
} output_opts_t;

/* Computes the text of a cell into buf (NUL-terminated, truncated to n). */
typedef void (*output_cell_fn)(const json_t *row, char *buf, size_t n);

typedef struct output_column {
    const char *name;  /* "UUID": the header; -o matches it case-insensitively */
    const char *path;  /* JSON path in the row, or NULL when fn is set */
    output_cell_fn fn; /* or NULL */
} output_column_t;

/* The value at a dotted path ("a.b.0.c": object keys, array indexes); borrowed from
 * `root`, or NULL when absent. */
const json_t *output_path_get(const json_t *root, const char *path);

/* Copies s into buf (truncated to n), control characters (newlines, tabs, escapes) as
 * spaces, so that a value can never break a table or smuggle a terminal escape. */
void output_clean(const char *s, char *buf, size_t n);

/* The text of a value as a table cell (see above), into buf. */
void output_cell_text(const json_t *v, char *buf, size_t n);

/* Number of terminal columns the UTF-8 string takes (code points; no wide glyphs). */
size_t output_display_width(const char *s);

/* Prints `v` as indented JSON and a newline. */
void output_json(FILE *out, const json_t *v);

/* Prints `rows` (an array of objects) as the options ask. `columns` is the default
 * column list and also the known names for -o (ended by an entry whose name is NULL).
 * With -j and no -o, `json_doc` (or `rows` when NULL) is printed as it is. */
void output_table(FILE *out, const output_opts_t *o, const json_t *rows,
                  const output_column_t *columns, const json_t *json_doc);

/* Columns made from the keys of the first row whose values are scalars or arrays of
 * scalars (for answers whose shape the CLI does not know). Returns a malloc'd list
 * ended by a NULL name; names and paths point into `rows` (valid while it lives). */
output_column_t *output_auto_columns(const json_t *rows);

/* True when -o or -j asks for something else than the command's own human view: then
 * a single object should go through output_object. */
bool output_wants_generic(const output_opts_t *o);

/* Prints one object: with -j as JSON (reduced to the -o paths when given), with -o as
 * a one-row table. Used for `get` commands before their human view. */
void output_object(FILE *out, const output_opts_t *o, const json_t *obj,
                   const output_column_t *columns);

/* Prints an object as "KEY  VALUE" lines, keys padded to the longest, values as table
 * cells (`tern get` of an object, `tern vm get`). */
void output_fields(FILE *out, const json_t *obj);

#endif /* TERN_CLI_OUTPUT_H */
