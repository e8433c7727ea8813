/*
 * iso8601.h -- the ISO 8601 date-times of the API: reads the ones clients send
 * (node-workflow's `exec_after`, written by JavaScript's Date.prototype.toISOString)
 * into milliseconds since the epoch, and writes the ones tern shows.
 */
#ifndef TERN_ISO8601_H
#define TERN_ISO8601_H

#include <stdint.h>

/* The latest time accepted, 9999-12-31T23:59:59.999Z: the last one ISO 8601 writes
 * with four year digits, so every time tern stores reads back as the same text. */
#define ISO8601_MAX_MS 253402300799999ULL

/* Parses "2026-11-21T04:47:28.512Z" and its usual variants: a date alone
 * ("2026-11-21", midnight UTC), minutes without seconds, any number of fraction
 * digits (milliseconds kept, the rest truncated), 'T', 't' or ' ' between date and
 * time, and a zone of "Z", "z", "+02:00", "+0200" or "+02". A date-time without a
 * zone is read as UTC (a server's local time is no business of its clients'). Dates
 * before 1970 and years of more than four digits are refused. Returns 0 and *out_ms, or
 * TERN_EINVAL. */
int iso8601_parse_ms(const char *s, uint64_t *out_ms);

/* Formats ms since the epoch as ISO 8601 UTC with milliseconds: 24 chars + NUL. */
void iso8601_format(uint64_t ms, char out[32]);

#endif /* TERN_ISO8601_H */
