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

#endif /* TERN_LOG_H */
