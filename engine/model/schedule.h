/*
 * schedule.h -- a recurring schedule's definition: which workflow to run with what,
 * and when ("every" an interval, or a "cron" expression in a time zone), and what to
 * do with a tick that comes while the schedule's previous job is unfinished
 * ("overlap"). Pure: the request of POST /schedules and the "schedules" of a workflow
 * definition are read here; the store keeps them and ops fires them.
 *
 * A definition reads into a normalized document (the members below, with their
 * defaults filled in) that is what Redis keeps and what the API shows; reading that
 * document again gives the same definition.
 *
 *   workflow   a workflow uuid or name (its latest version at each tick); implied by
 *              the workflow that declares the schedule
 *   name       required in a workflow's "schedules" (the key that makes installing
 *              it again change it rather than add one), optional in a request
 *   params     object, default {}; each tick's job gets schedule_uuid and
 *              scheduled_for added to it
 *   target     string, optional
 *   every      "30s", "5m", "1h30m", "2d" (units d, h, m, s, ms; at least 1 s), or
 *   cron       5 fields (cron.h), with
 *   time_zone  an IANA name, default "UTC" (cron only)
 *   overlap    "skip" (default: no job for that tick, counted) or "queue" (the job is
 *              created and waits on the hold schedule:<uuid>, capacity 1)
 */
#ifndef TERN_SCHEDULE_H
#define TERN_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "model/cron.h"
#include "model/time_zone.h"

#define SCHEDULE_EVERY_MIN_MS 1000u
#define SCHEDULE_NAME_MAX     128

typedef enum schedule_overlap {
    SCHEDULE_OVERLAP_SKIP,
    SCHEDULE_OVERLAP_QUEUE,
} schedule_overlap_t;

typedef struct schedule_spec {
    json_t *doc;          /* owned: the normalized definition */
    const char *name;     /* borrowed from doc; NULL when none */
    const char *workflow; /* borrowed from doc */
    const char *target;   /* borrowed from doc; NULL when none */
    const json_t *params; /* borrowed from doc: an object */
    uint64_t every_ms;    /* the interval, or 0 for a cron schedule */
    cron_t cron;          /* when every_ms is 0 */
    time_zone_t *zone;    /* owned; NULL for an interval */
    schedule_overlap_t overlap;
} schedule_spec_t;

/* Reads the definition `v` (borrowed). `path` prefixes every message ("" for a request,
 * "schedules[0]." in a workflow); `workflow`, when not NULL, is the name of the
 * workflow that declares the schedule: "workflow" may then not be given and "name"
 * must. `paused`, when not NULL, may be given as a member (a request's) and is read
 * into *paused; else that member is unknown. Returns 0 and *out (dispose of it with
 * schedule_spec_dispose), or TERN_EINVAL naming the member and the fault
 * ("cron: hour \"25\": 25 is out of range 0-23"), an unknown member included. */
int schedule_spec_parse(const json_t *v, const char *path, const char *workflow, bool *paused,
                        schedule_spec_t *out, char *err, size_t errlen);

/* Reads a stored normalized document (JSON text). */
int schedule_spec_parse_text(const char *text, size_t len, schedule_spec_t *out, char *err,
                             size_t errlen);

void schedule_spec_dispose(schedule_spec_t *s);

/* Reads an interval ("1h30m") into milliseconds. TERN_EINVAL with a message without
 * a path ("expected an interval such as \"30s\", \"5m\" or \"1h30m\", got \"x\""), also
 * for one under SCHEDULE_EVERY_MIN_MS. */
int schedule_interval_parse(const char *text, uint64_t *ms, char *err, size_t errlen);

/* The first tick strictly after `after_ms`: for an interval, the first of anchor_ms +
 * k * every (k >= 1) after it, so that ticks keep the phase of the schedule's
 * creation; for cron, cron_next. Returns 0, or TERN_ENOENT when there is none. */
int schedule_next(const schedule_spec_t *s, int64_t anchor_ms, int64_t after_ms, int64_t *out_ms);

/* The uuid of the job of tick `tick_ms` of schedule `schedule_uuid`: the same for the
 * same pair in every process, so that a create repeated by another process after a
 * crash finds the job it made ("already exists") instead of making a second one. */
void schedule_job_uuid(const char *schedule_uuid, int64_t tick_ms, char out[37]);

#endif /* TERN_SCHEDULE_H */
