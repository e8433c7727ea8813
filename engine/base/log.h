/*
 * log.h -- structured logs: one JSON object per line in bunyan's shape, so Triton
 * operators' tools (`bunyan`) read them:
 *   {"name":"ternd","hostname":"cn1","pid":812,"level":40,"component":"runner",
 *    "job":"4f1c...","step":"resize","msg":"timeout after 300 s",
 *    "time":"2026-11-21T04:47:28.512Z","v":0}
 * Each line is written with a single write(2), so lines of concurrent processes
 * sharing a file never interleave. Secrets never go through here: callers log a
 * Redis URL through redis_addr_redacted() and never log tokens.
 */
#ifndef TERN_LOG_H
#define TERN_LOG_H

#include <stdarg.h>

#include <jansson.h>
#include <tern/task.h> /* enum tern_log_level */

/* Sets the process name ("ternd"), the lowest level written, and the file descriptor
 * (default: 2, stderr). Safe to call again (e.g. after parsing the configuration). */
void log_init(const char *name, int min_level, int fd);

/* Parses "trace", "debug", "info", "warn", "error", "fatal" or a bunyan number.
 * Returns the level, or -1 when unknown. */
int log_level_parse(const char *s);

/* True when `level` would be written (to skip building costly fields). */
int log_enabled(int level);

/* Writes one line. `component` may be NULL; `fields` (borrowed, may be NULL) is an
 * object whose members are added to the line (they cannot override the bunyan core
 * fields). */
void log_msg(int level, const char *component, const json_t *fields, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void log_vmsg(int level, const char *component, const json_t *fields, const char *fmt, va_list ap);

/* One member of a line written by log_line: its value as it is, for lines written
 * often enough (the access log, one per request) that a jansson object per line and
 * an encoder run per member cost more than writing the line. */
typedef struct log_field {
    const char *key; /* borrowed */
    enum { LOG_FIELD_STR, LOG_FIELD_INT, LOG_FIELD_REAL } type;
    const char *str; /* LOG_FIELD_STR (borrowed) */
    long long num;   /* LOG_FIELD_INT */
    double real;     /* LOG_FIELD_REAL: written as jansson writes a real */
} log_field_t;

/* Writes one line as log_msg would with an object of the same members in the same
 * order, the same bytes, but for the message: `msg` (borrowed, `msglen` bytes) is
 * taken as it is, not as a format (cut at the same length as log_msg's). */
void log_line(int level, const char *component, const log_field_t *fields, size_t n,
              const char *msg, size_t msglen);

#endif /* TERN_LOG_H */
