/*
 * cron.h -- cron expressions of five fields (minute hour day-of-month month
 * day-of-week) and the next time one matches, in a time zone.
 *
 * Each field is "*", a number, a range "a-b", one of those followed by a step "/n"
 * ("a/n" runs from a to the field's end), or a list of those separated by commas;
 * months also take JAN-DEC and days of the week SUN-SAT (case-insensitive), Sunday
 * being 0 or 7.
 * Vixie cron's rule for the two day fields: when both are restricted (neither starts
 * with "*"), a day matches when either does; otherwise both must (a "*" matches
 * every day).
 *
 * Times are matched on the zone's wall clock. A wall time the clocks skip (the hour
 * lost when daylight time starts) runs at the change, once however many of its
 * minutes match; a wall time that occurs twice (the hour repeated when it ends) runs
 * at its first occurrence only (time_zone_from_local).
 */
#ifndef TERN_CRON_H
#define TERN_CRON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/time_zone.h"

typedef struct cron {
    uint64_t minutes; /* bit m: minute m (0-59) */
    uint32_t hours;   /* bit h: hour h (0-23) */
    uint32_t days;    /* bit d: day of the month d (1-31) */
    uint16_t months;  /* bit m: month m (1-12) */
    uint8_t weekdays; /* bit d: day of the week d (0 Sunday - 6) */
    bool days_any;    /* the day-of-month field starts with "*" */
    bool weekdays_any;
} cron_t;

/* Parses `expr`. Returns 0, or TERN_EINVAL with a message naming the field and the
 * fault ("hour \"25\": 25 is out of range 0-23"). An expression that can never match
 * ("0 0 31 2 *") is refused too. */
int cron_parse(const char *expr, cron_t *out, char *err, size_t errlen);

/* The first time (ms since the epoch, whole minutes) strictly after `after_ms` at which
 * `c` matches on the wall clock of `z`. Returns 0, or TERN_ENOENT when there is none in
 * the next 30 years. */
int cron_next(const cron_t *c, const time_zone_t *z, int64_t after_ms, int64_t *out_ms);

#endif /* TERN_CRON_H */
