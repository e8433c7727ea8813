/*
 * json_text.h -- JSON text written directly into a growable buffer, byte for byte as
 * jansson's compact encoder (json_dumps with JSON_COMPACT) writes the same values.
 *
 * For answers made often enough that a jansson tree and json_dumps over it cost more
 * than the work itself (a new job's view is made for every POST /jobs; json_dumps
 * hashes every object and array it visits to detect loops). The caller writes the
 * structure ("{", "\"name\":", ",", ...) with json_text_raw and the values with the
 * writers below.
 */
#ifndef TERN_JSON_TEXT_H
#define TERN_JSON_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

typedef struct json_text {
    char *p; /* owned (malloc'd); NUL-terminated after every write */
    size_t len, cap;
} json_text_t;

/* Starts an empty text with room for `cap` bytes (it grows as needed). */
void json_text_init(json_text_t *t, size_t cap);

/* Frees the text; *t is empty (and may be initialised again). */
void json_text_dispose(json_text_t *t);

/* Appends n bytes as they are: structure, or text that is already JSON in jansson's
 * compact encoding. */
void json_text_raw(json_text_t *t, const char *s, size_t n);

/* The most bytes json_escape writes for n bytes of input: 6 per byte (\u00XX, or
 * \ufffd for a byte that is not UTF-8) and the quotes. */
#define JSON_ESCAPE_MAX(n) ((n)*6 + 2)

/* Writes s[0..n) as a JSON string, quotes included, into `out` (room for
 * JSON_ESCAPE_MAX(n) bytes; no NUL added), escaped as jansson escapes: '"', '\\' and
 * control characters (\b \f \n \r \t, others \u00XX); everything else, non-ASCII
 * included, as it is. With `repair`, each byte that is not part of valid UTF-8 becomes
 * \ufffd, so that text of any origin (a log message) makes valid JSON; without, `s` must
 * be valid UTF-8 (every string jansson decoded is). Returns the bytes written. The one
 * escaper of the engine: json_text_str and the log's lines use it. */
size_t json_escape(char *out, const char *s, size_t n, bool repair);

/* Appends s[0..n), valid UTF-8, as a JSON string (json_escape). */
void json_text_str(json_text_t *t, const char *s, size_t n);

/* Appends an integer. */
void json_text_int(json_text_t *t, long long v);

/* Appends any value (borrowed) through jansson's encoder: for values rare enough
 * that writing them here is not worth a second encoder (reals, objects). Returns 0, or
 * TERN_EINVAL when v is NULL or jansson cannot encode it (t is then as before). */
int json_text_value(json_text_t *t, const json_t *v);

#endif /* TERN_JSON_TEXT_H */
