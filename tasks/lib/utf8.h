/*
 * utf8.h -- UTF-8 as JSON needs it. Bytes from outside (an HTTP body, a program's
 * output) may be any bytes, while a JSON string must be valid UTF-8: jansson refuses
 * anything else, and a result that cannot be stored is a step that cannot finish.
 */
#ifndef TASK_UTF8_H
#define TASK_UTF8_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* The length (1 to 4) of the valid UTF-8 sequence at s, reading at most n bytes (n >=
 * 1), or 0 when it is not valid: a stray continuation byte, a truncated or overlong
 * sequence, a surrogate or a code point above U+10FFFF. */
size_t task_utf8_len(const unsigned char *s, size_t n);

/* A JSON string of the n bytes at s, with each invalid byte replaced by U+FFFD and a
 * NUL byte by a space; when one_line, control characters (below 0x20) become spaces
 * too. New reference, or NULL when out of memory. */
json_t *task_utf8_to_json(const char *s, size_t n, bool one_line);

#endif
