/*
 * time_zone.h -- IANA time zones read from the system's TZif files, for schedules
 * whose cron expressions are in local time.
 *
 * A zone is the table of transitions of its TZif file (version 1 data, or the 64-bit
 * data of version 2 and later) and, past the last transition, the POSIX TZ rule of the
 * file's footer ("CET-1CEST,M3.5.0,M10.5.0/3"), so that times after 2037 keep their
 * daylight-saving changes. The process's own TZ and localtime() are never touched:
 * other threads and the logs keep UTC.
 *
 * Files are read from TERN_ZONEINFO_DIR (/usr/share/zoneinfo, Debian's tzdata) unless
 * the environment names another directory in TZDIR. "UTC" needs no file.
 */
#ifndef TERN_TIME_ZONE_H
#define TERN_TIME_ZONE_H

#include <stddef.h>
#include <stdint.h>

#define TERN_ZONEINFO_DIR "/usr/share/zoneinfo"

typedef struct time_zone time_zone_t;

/* Loads zone `name` ("Europe/Paris", "UTC"). Returns 0 and *out (free with
 * time_zone_free), or TERN_EINVAL for a name that is not a zone's ("unknown time zone
 * \"Mars/Base\"") with the message in err. */
int time_zone_load(const char *name, time_zone_t **out, char *err, size_t errlen);

/* Reads a zone from the bytes of a TZif file (borrowed). TERN_EINVAL when they are not
 * one. */
int time_zone_parse(const char *name, const unsigned char *buf, size_t len, time_zone_t **out,
                    char *err, size_t errlen);

void time_zone_free(time_zone_t *z);

/* The zone's name as loaded (borrowed). */
const char *time_zone_name(const time_zone_t *z);

/* The offset from UTC in seconds (east positive) at `t` (seconds since the epoch). */
int32_t time_zone_offset(const time_zone_t *z, int64_t t);

/* The UTC time (seconds) of local wall time `local` (seconds since the epoch as if the
 * wall clock were UTC). A wall time that occurs twice (the hour repeated when clocks
 * go back) gives its first occurrence; one that does not occur (the hour skipped when
 * clocks go forward) gives the instant of the change, the first one after it. */
int64_t time_zone_from_local(const time_zone_t *z, int64_t local);

/* Days since 1970-01-01 of a proleptic Gregorian date, and back. */
int64_t time_zone_days_from_civil(int64_t y, unsigned m, unsigned d);
void time_zone_civil_from_days(int64_t days, int64_t *y, unsigned *m, unsigned *d);

#endif /* TERN_TIME_ZONE_H */
