/*
 * units.h -- numbers as people read them: bytes and rates in binary units, durations
 * the way RFD 34's migration watch prints them ("3m18s", "1h52m07s"), estimated times
 * left, and ISO 8601 times. Pure functions; each writes a NUL-terminated string into
 * the caller's buffer (truncated to its size) and returns it.
 */
#ifndef TERN_CLI_UNITS_H
#define TERN_CLI_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes with binary prefixes and three significant digits: "0 B", "999 B", "1.00 KiB",
 * "45.3 MiB", "512 MiB", "1.21 GiB". Negative or not finite: "?". */
char *units_bytes(double bytes, char *buf, size_t n);

/* A rate in bytes per second: units_bytes + "/s" ("45.3 MiB/s"). */
char *units_rate(double bytes_per_s, char *buf, size_t n);

/* A duration: "0ms", "812ms" below a second, "1.2s" below ten seconds, "19s" below a
 * minute, "3m18s" below an hour, then "1h52m07s". */
char *units_duration_ms(uint64_t ms, char *buf, size_t n);

/* A time left, coarser: "0s", "45s", "1m20s", "1h33m" (seconds dropped past an hour),
 * "2d03h" past a day. Negative or not finite: "?". */
char *units_eta_s(double seconds, char *buf, size_t n);

/* Parses an ISO 8601 time "YYYY-MM-DDTHH:MM:SS[.fff][Z|+HH:MM|-HH:MM]" (a space may
 * stand for the T; no zone means UTC) into ms since the epoch. Returns false when it
 * is not one. */
bool units_parse_iso(const char *s, uint64_t *ms);

/* Parses a relative time "+30s", "+10m", "+2h", "+1d" (a positive integer and a unit)
 * into milliseconds. Returns false when it is not one. */
bool units_parse_relative(const char *s, uint64_t *ms);

#endif /* TERN_CLI_UNITS_H */
