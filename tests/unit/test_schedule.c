/*
 * test_schedule.c -- unit tests of recurring schedules' pure parts: cron expressions
 * (engine/model/cron.c), time zones read from the system's TZif files
 * (engine/model/time_zone.c), intervals, definitions and their messages
 * (engine/model/schedule.c). Next times are checked across the daylight-saving
 * changes of Europe/Paris and America/New_York in 2026:
 *
 *   Paris     starts Sun 29 Mar, 02:00 CET -> 03:00 CEST (01:00Z)
 *             ends   Sun 25 Oct, 03:00 CEST -> 02:00 CET  (01:00Z)
 *   New York  starts Sun  8 Mar, 02:00 EST -> 03:00 EDT  (07:00Z)
 *             ends   Sun  1 Nov, 02:00 EDT -> 01:00 EST  (06:00Z)
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/ident.h"
#include "base/iso8601.h"
#include "model/cron.h"
#include "model/schedule.h"
#include "model/time_zone.h"

static int64_t at(const char *iso)
{
    uint64_t ms = 0;
    if (iso8601_parse_ms(iso, &ms) != 0)
        fail_msg("bad time in the test: %s", iso);
    return (int64_t)ms;
}

static time_zone_t *zone(const char *name)
{
    time_zone_t *z = NULL;
    char err[256];
    if (time_zone_load(name, &z, err, sizeof err) != 0)
        fail_msg("%s: %s", name, err);
    return z;
}

/* Asserts that the next time of `expr` in zone `tz` after `after` is `want`. */
static void next_is(const char *expr, const char *tz, const char *after, const char *want)
{
    cron_t c;
    char err[256];
    if (cron_parse(expr, &c, err, sizeof err) != 0)
        fail_msg("\"%s\" refused: %s", expr, err);
    time_zone_t *z = zone(tz);
    int64_t next = 0;
    assert_int_equal(cron_next(&c, z, at(after), &next), 0);
    char got[32];
    iso8601_format((uint64_t)next, got);
    time_zone_free(z);
    if (strcmp(got, want) != 0)
        fail_msg("\"%s\" in %s after %s: got %s, want %s", expr, tz, after, got, want);
}

static void cron_refused(const char *expr, const char *msg)
{
    cron_t c;
    char err[256] = "";
    assert_int_equal(cron_parse(expr, &c, err, sizeof err), TERN_EINVAL);
    if (strcmp(err, msg) != 0)
        fail_msg("\"%s\": got \"%s\", want \"%s\"", expr, err, msg);
}

static void test_cron_fields(void **state)
{
    (void)state;
    next_is("*/15 * * * *", "UTC", "2026-11-26T10:07:00.000Z", "2026-11-26T10:15:00.000Z");
    next_is("0 12 * * *", "UTC", "2026-11-26T12:00:00.000Z", "2026-11-27T12:00:00.000Z");
    next_is("5,10-12 3 * * *", "UTC", "2026-11-26T03:10:30.000Z", "2026-11-26T03:11:00.000Z");
    next_is("30/10 * * * *", "UTC", "2026-11-26T03:51:00.000Z", "2026-11-26T04:30:00.000Z");
    next_is("0 0 1 jan,JUL *", "UTC", "2026-11-26T00:00:00.000Z", "2027-01-01T00:00:00.000Z");
    next_is("0 0 29 2 *", "UTC", "2026-11-26T00:00:00.000Z", "2028-02-29T00:00:00.000Z");
    /* Sunday is 0, 7 or SUN. 2026-11-29 is a Sunday. */
    next_is("0 8 * * 7", "UTC", "2026-11-26T00:00:00.000Z", "2026-11-29T08:00:00.000Z");
    next_is("0 8 * * sun", "UTC", "2026-11-26T00:00:00.000Z", "2026-11-29T08:00:00.000Z");
    /* Vixie's rule: both day fields restricted is either (Friday the 27th, or the 13th);
     * one of them "*" is the other alone. */
    next_is("0 0 13 * 5", "UTC", "2026-11-26T00:00:00.000Z", "2026-11-27T00:00:00.000Z");
    next_is("0 0 13 * *", "UTC", "2026-11-26T00:00:00.000Z", "2026-12-13T00:00:00.000Z");
    next_is("0 0 * * 5", "UTC", "2026-11-27T00:00:00.000Z", "2026-12-04T00:00:00.000Z");
    /* A field starting with "*" counts as "*" for that rule, a step too: the 1st, 11th,
     * 21st or 31st that is a Monday (not Monday the 30th). */
    next_is("0 0 */10 * 1", "UTC", "2026-11-26T00:00:00.000Z", "2026-12-21T00:00:00.000Z");
}

static void test_cron_refusals(void **state)
{
    (void)state;
    cron_refused("61 * * * *", "minute \"61\": 61 is out of range 0-59");
    cron_refused("* 24 * * *", "hour \"24\": 24 is out of range 0-23");
    cron_refused("* * 0 * *", "day-of-month \"0\": 0 is out of range 1-31");
    cron_refused("* * * 13 *", "month \"13\": 13 is out of range 1-12");
    cron_refused("* * * * 8", "day-of-week \"8\": 8 is out of range 0-7");
    cron_refused("* * * *",
                 "expected 5 fields (minute hour day-of-month month day-of-week), got 4");
    cron_refused("* * * * * *",
                 "expected 5 fields (minute hour day-of-month month day-of-week), got more");
    cron_refused("", "expected 5 fields (minute hour day-of-month month day-of-week), got 0");
    cron_refused("*/0 * * * *", "minute \"*/0\": a step is a number from 1 to 60");
    cron_refused("5-1 * * * *", "minute \"5-1\": the range 5-1 runs backwards");
    cron_refused("5- * * * *", "minute \"5-\": a range needs an end (\"a-b\")");
    cron_refused("x * * * *", "minute \"x\": expected a number, \"*\", a range or a list");
    cron_refused("* * * foo *",
                 "month \"foo\": expected a number or a name, \"*\", a range or a list");
    cron_refused("1,,2 * * * *", "minute \"1,,2\": expected a number, \"*\", a range or a list");
    cron_refused("1;2 * * * *", "minute \"1;2\": unexpected \";\"");
    cron_refused("0 0 30 2 *", "day-of-month \"30\": no month in \"2\" has such a day");
    cron_refused("0 0 31 4,6 *", "day-of-month \"31\": no month in \"4,6\" has such a day");
}

static void test_dst_paris(void **state)
{
    (void)state;
    const char *tz = "Europe/Paris";
    /* The day before: 02:30 CET is 01:30Z. */
    next_is("30 2 * * *", tz, "2026-03-27T12:00:00.000Z", "2026-03-28T01:30:00.000Z");
    /* 02:30 does not occur on 29 March: it runs at the change, 03:00 CEST (01:00Z). */
    next_is("30 2 * * *", tz, "2026-03-28T12:00:00.000Z", "2026-03-29T01:00:00.000Z");
    next_is("30 2 * * *", tz, "2026-03-29T01:00:00.000Z", "2026-03-30T00:30:00.000Z");
    /* Every quarter: the skipped hour's four run once, at the change. */
    next_is("*/15 * * * *", tz, "2026-03-29T00:50:00.000Z", "2026-03-29T01:00:00.000Z");
    next_is("*/15 * * * *", tz, "2026-03-29T01:00:00.000Z", "2026-03-29T01:15:00.000Z");
    /* 02:30 occurs twice on 25 October: only the first (CEST, 00:30Z) runs. */
    next_is("30 2 * * *", tz, "2026-10-24T12:00:00.000Z", "2026-10-25T00:30:00.000Z");
    next_is("30 2 * * *", tz, "2026-10-25T00:30:00.000Z", "2026-10-26T01:30:00.000Z");
    /* Hourly through the repeated hour: 02:00 and 02:30 CEST, then 03:00 CET. */
    next_is("0,30 * * * *", tz, "2026-10-25T00:00:00.000Z", "2026-10-25T00:30:00.000Z");
    next_is("0,30 * * * *", tz, "2026-10-25T00:30:00.000Z", "2026-10-25T02:00:00.000Z");
    /* Summer and winter offsets of a daily time. */
    next_is("0 9 * * *", tz, "2026-07-01T00:00:00.000Z", "2026-07-01T07:00:00.000Z");
    next_is("0 9 * * *", tz, "2026-12-01T00:00:00.000Z", "2026-12-01T08:00:00.000Z");
    /* Past the last transition of the file, the TZ rule of its footer still changes. */
    next_is("0 9 * * *", tz, "2045-07-01T00:00:00.000Z", "2045-07-01T07:00:00.000Z");
    next_is("0 9 * * *", tz, "2045-12-01T00:00:00.000Z", "2045-12-01T08:00:00.000Z");
    next_is("30 2 * * *", tz, "2045-03-25T12:00:00.000Z", "2045-03-26T01:00:00.000Z");
}

static void test_dst_new_york(void **state)
{
    (void)state;
    const char *tz = "America/New_York";
    /* Weekdays at 09:00: Friday 6 March in EST (14:00Z), Monday 9 March in EDT (13:00Z). */
    next_is("0 9 * * 1-5", tz, "2026-03-06T12:00:00.000Z", "2026-03-06T14:00:00.000Z");
    next_is("0 9 * * mon-fri", tz, "2026-03-06T14:00:00.000Z", "2026-03-09T13:00:00.000Z");
    /* 02:30 is skipped on 8 March: it runs at 03:00 EDT (07:00Z). */
    next_is("30 2 * * *", tz, "2026-03-07T12:00:00.000Z", "2026-03-08T07:00:00.000Z");
    next_is("*/20 * * * *", tz, "2026-03-08T06:50:00.000Z", "2026-03-08T07:00:00.000Z");
    next_is("*/20 * * * *", tz, "2026-03-08T07:00:00.000Z", "2026-03-08T07:20:00.000Z");
    /* 01:30 occurs twice on 1 November: 05:30Z (EDT) runs, 06:30Z (EST) does not. */
    next_is("30 1 * * *", tz, "2026-10-31T12:00:00.000Z", "2026-11-01T05:30:00.000Z");
    next_is("30 1 * * *", tz, "2026-11-01T05:30:00.000Z", "2026-11-02T06:30:00.000Z");
    /* Asked from within the repeated hour (01:10 EST), the next 01:30 is tomorrow's. */
    next_is("30 1 * * *", tz, "2026-11-01T06:10:00.000Z", "2026-11-02T06:30:00.000Z");
}

static void test_time_zones(void **state)
{
    (void)state;
    time_zone_t *z = zone("Europe/Paris");
    assert_int_equal(time_zone_offset(z, at("2026-01-15T00:00:00.000Z") / 1000), 3600);
    assert_int_equal(time_zone_offset(z, at("2026-07-15T00:00:00.000Z") / 1000), 7200);
    assert_int_equal(time_zone_offset(z, at("2026-03-29T00:59:59.000Z") / 1000), 3600);
    assert_int_equal(time_zone_offset(z, at("2026-03-29T01:00:00.000Z") / 1000), 7200);
    assert_int_equal(time_zone_offset(z, at("2080-07-15T00:00:00.000Z") / 1000), 7200);
    assert_string_equal(time_zone_name(z), "Europe/Paris");
    time_zone_free(z);
    z = zone("UTC");
    assert_int_equal(time_zone_offset(z, 0), 0);
    time_zone_free(z);
    /* The southern hemisphere, past the file's table: summer time spans the new year. */
    z = zone("Australia/Sydney");
    assert_int_equal(time_zone_offset(z, at("2045-01-15T00:00:00.000Z") / 1000), 39600);
    assert_int_equal(time_zone_offset(z, at("2045-07-15T00:00:00.000Z") / 1000), 36000);
    assert_int_equal(time_zone_offset(z, at("2045-12-31T13:30:00.000Z") / 1000), 39600);
    time_zone_free(z);
    z = zone("Asia/Kolkata");
    assert_int_equal(time_zone_offset(z, at("2026-07-15T00:00:00.000Z") / 1000), 19800);
    time_zone_free(z);

    char err[256];
    z = NULL;
    assert_int_equal(time_zone_load("Mars/Base", &z, err, sizeof err), TERN_EINVAL);
    assert_string_equal(err, "unknown time zone \"Mars/Base\" (an IANA name such as "
                             "\"Europe/Paris\")");
    assert_null(z);
    assert_int_equal(time_zone_load("../../etc/passwd", &z, err, sizeof err), TERN_EINVAL);
    assert_int_equal(time_zone_load("/etc/passwd", &z, err, sizeof err), TERN_EINVAL);
    assert_int_equal(time_zone_load("", &z, err, sizeof err), TERN_EINVAL);
    /* A directory of zones is not one. */
    assert_int_equal(time_zone_load("Europe", &z, err, sizeof err), TERN_EINVAL);
    assert_string_equal(err, "unknown time zone \"Europe\" (an IANA name such as "
                             "\"Europe/Paris\")");
    assert_null(z);
    /* A file that is not TZif. */
    const unsigned char junk[] = "not a zone file at all, not even close to one";
    assert_int_equal(time_zone_parse("x", junk, sizeof junk, &z, err, sizeof err), TERN_EINVAL);
    assert_string_equal(err, "time zone \"x\": not a TZif file");

    /* The calendar both ways, around the epoch and a leap day. */
    int64_t y;
    unsigned m, d;
    assert_int_equal(time_zone_days_from_civil(1970, 1, 1), 0);
    time_zone_civil_from_days(time_zone_days_from_civil(2028, 2, 29), &y, &m, &d);
    assert_true(y == 2028 && m == 2 && d == 29);
    time_zone_civil_from_days(-1, &y, &m, &d);
    assert_true(y == 1969 && m == 12 && d == 31);
}

static void interval_is(const char *text, uint64_t want)
{
    uint64_t ms = 0;
    char err[256];
    if (schedule_interval_parse(text, &ms, err, sizeof err) != 0)
        fail_msg("\"%s\" refused: %s", text, err);
    assert_int_equal(ms, want);
}

static void interval_refused(const char *text, const char *msg)
{
    uint64_t ms = 0;
    char err[256] = "";
    assert_int_equal(schedule_interval_parse(text, &ms, err, sizeof err), TERN_EINVAL);
    if (strcmp(err, msg) != 0)
        fail_msg("\"%s\": got \"%s\", want \"%s\"", text, err, msg);
}

static void test_intervals(void **state)
{
    (void)state;
    interval_is("1s", 1000);
    interval_is("30s", 30000);
    interval_is("5m", 300000);
    interval_is("1h", 3600000);
    interval_is("1h30m", 5400000);
    interval_is("2d", 172800000);
    interval_is("1500ms", 1500);
    interval_is("1m30s", 90000);
    interval_refused("500ms", "\"500ms\" is under one second, the shortest interval");
    interval_refused("0s", "\"0s\" is under one second, the shortest interval");
    const char *bad = "expected an interval such as \"30s\", \"5m\" or \"1h30m\" (units d, h, "
                      "m, s, ms), got \"%s\"";
    const char *texts[] = {"", "5", "m", "5x", "-5s", "1h 30m", "1.5h", "9999999999s"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        char want[256];
        snprintf(want, sizeof want, bad, texts[i]);
        interval_refused(texts[i], want);
    }

    /* Interval ticks keep the phase of the anchor; a tick missed is not made up. */
    schedule_spec_t s = {.every_ms = 60000};
    int64_t next = 0;
    assert_int_equal(schedule_next(&s, 1000, 1000, &next), 0);
    assert_int_equal(next, 61000);
    assert_int_equal(schedule_next(&s, 1000, 61000, &next), 0);
    assert_int_equal(next, 121000);
    assert_int_equal(schedule_next(&s, 1000, 10 * 60000 + 5000, &next), 0);
    assert_int_equal(next, 11 * 60000 + 1000);
    assert_int_equal(schedule_next(&s, 1000, 0, &next), 0);
    assert_int_equal(next, 61000);
}

static void spec_refused(const char *text, const char *path, const char *implied, const char *msg)
{
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    assert_non_null(v);
    schedule_spec_t s;
    bool paused;
    char err[512] = "";
    int rc = schedule_spec_parse(v, path, implied, implied == NULL ? &paused : NULL, &s, err,
                                 sizeof err);
    json_decref(v);
    if (rc != TERN_EINVAL || strcmp(err, msg) != 0)
        fail_msg("%s: got %d \"%s\", want \"%s\"", text, rc, err, msg);
}

static void test_definitions(void **state)
{
    (void)state;
    json_t *v = json_loads("{\"workflow\": \"nightly\", \"cron\": \"0 3 * * *\", \"time_zone\": "
                           "\"Europe/Paris\", \"params\": {\"n\": 1}, \"target\": \"t\", "
                           "\"overlap\": \"queue\", \"paused\": true}",
                           0, NULL);
    schedule_spec_t s;
    bool paused = false;
    char err[512];
    assert_int_equal(schedule_spec_parse(v, "", NULL, &paused, &s, err, sizeof err), 0);
    assert_true(paused);
    assert_int_equal(s.overlap, SCHEDULE_OVERLAP_QUEUE);
    assert_string_equal(s.workflow, "nightly");
    assert_string_equal(s.target, "t");
    assert_int_equal(s.every_ms, 0);
    /* The normalized document reads back as the same definition. */
    char *text = json_dumps(s.doc, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(text, "{\"cron\":\"0 3 * * *\",\"overlap\":\"queue\",\"params\":{\"n\":1},"
                              "\"target\":\"t\",\"time_zone\":\"Europe/Paris\",\"workflow\":"
                              "\"nightly\"}");
    schedule_spec_t again;
    assert_int_equal(schedule_spec_parse_text(text, strlen(text), &again, err, sizeof err), 0);
    assert_true(json_equal(again.doc, s.doc));
    int64_t next = 0;
    assert_int_equal(schedule_next(&again, 0, at("2026-07-01T00:00:00.000Z"), &next), 0);
    assert_int_equal(next, at("2026-07-01T01:00:00.000Z"));
    free(text);
    schedule_spec_dispose(&again);
    schedule_spec_dispose(&s);
    json_decref(v);

    /* Defaults: overlap skip, params {}, no time zone for an interval. */
    v = json_loads("{\"workflow\": \"w\", \"every\": \"1h\"}", 0, NULL);
    assert_int_equal(schedule_spec_parse(v, "", NULL, &paused, &s, err, sizeof err), 0);
    assert_false(paused);
    text = json_dumps(s.doc, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(text,
                        "{\"every\":\"1h\",\"overlap\":\"skip\",\"params\":{},\"workflow\":\"w\"}");
    free(text);
    schedule_spec_dispose(&s);
    json_decref(v);

    /* A schedule per server: the lab's net-reconcile@<hostname>. */
    v = json_loads("{\"workflow\": \"w\", \"every\": \"5s\", \"name\": \"net-reconcile@cn1\"}", 0,
                   NULL);
    assert_int_equal(schedule_spec_parse(v, "", NULL, &paused, &s, err, sizeof err), 0);
    schedule_spec_dispose(&s);
    json_decref(v);

    spec_refused("{\"workflow\": \"w\", \"cron\": \"0 25 * * *\"}", "", NULL,
                 "cron: hour \"25\": 25 is out of range 0-23");
    spec_refused("{\"workflow\": \"w\", \"every\": \"500ms\"}", "", NULL,
                 "every: \"500ms\" is under one second, the shortest interval");
    spec_refused("{\"workflow\": \"w\", \"cron\": \"0 3 * * *\", \"time_zone\": \"Europe/Pariss\"}",
                 "", NULL,
                 "time_zone: unknown time zone \"Europe/Pariss\" (an IANA name such as "
                 "\"Europe/Paris\")");
    spec_refused("{\"workflow\": \"w\", \"every\": \"1h\", \"overlap\": \"wait\"}", "", NULL,
                 "overlap: expected \"skip\" or \"queue\", got \"wait\"");
    spec_refused("{\"workflow\": \"w\", \"every\": \"1h\", \"evry\": 1}", "", NULL,
                 "evry: unknown member; a schedule has workflow, name, params, target, every, "
                 "cron, time_zone and overlap (and paused)");
    spec_refused("{\"every\": \"1h\"}", "", NULL, "workflow: required (a workflow uuid or name)");
    spec_refused("{\"workflow\": \"w\"}", "", NULL, "every: required, or cron (one of them)");
    spec_refused("{\"workflow\": \"w\", \"every\": \"1h\", \"cron\": \"* * * * *\"}", "", NULL,
                 "every: give either every or cron, not both");
    spec_refused("{\"workflow\": \"w\", \"every\": \"1h\", \"time_zone\": \"UTC\"}", "", NULL,
                 "time_zone: only with cron (an interval is the same in every zone)");
    spec_refused("{\"workflow\": \"w\", \"every\": \"1h\", \"params\": [1]}", "", NULL,
                 "params: expected an object, got an array");
    spec_refused("{\"workflow\": \"w\", \"every\": 60}", "", NULL,
                 "every: expected a non-empty string, got 60");
    spec_refused("{\"workflow\": \"w\", \"every\": \"1h\", \"paused\": 1}", "", NULL,
                 "paused: expected true or false, got 1");
    spec_refused("[]", "", NULL, "schedule: expected an object, got an array");
    /* In a workflow: the path, an implied workflow, a required name, no "paused". */
    spec_refused("{\"every\": \"1h\"}", "schedules[2].", "w",
                 "schedules[2].name: required (it keeps the schedule one when the workflow is "
                 "loaded again)");
    spec_refused("{\"name\": \"n\", \"workflow\": \"x\", \"every\": \"1h\"}", "schedules[0].", "w",
                 "schedules[0].workflow: not allowed: a workflow's schedule runs that workflow");
    spec_refused("{\"name\": \"n\", \"every\": \"1h\", \"paused\": true}", "schedules[0].", "w",
                 "schedules[0].paused: unknown member; a schedule has workflow, name, params, "
                 "target, every, cron, time_zone and overlap");
    spec_refused("{\"name\": \"bad name\", \"every\": \"1h\"}", "schedules[0].", "w",
                 "schedules[0].name: expected a letter or digit, then up to 126 letters, digits, "
                 "'_', '.', '-' or '@', got \"bad name\"");
    spec_refused("3", "schedules[1].", "w", "schedules[1]: expected an object, got 3");
}

static void test_job_uuids(void **state)
{
    (void)state;
    const char *sched = "aa05336d-a4ff-4899-b76b-c08c87c638fb";
    char a[37], b[37], c[37];
    schedule_job_uuid(sched, 1795240921000, a);
    schedule_job_uuid(sched, 1795240921000, b);
    schedule_job_uuid(sched, 1795240922000, c);
    assert_true(uuid_valid(a));
    assert_string_equal(a, b);
    assert_string_not_equal(a, c);
    assert_int_equal(a[14], '8'); /* version 8 */
    assert_true(strchr("89ab", a[19]) != NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cron_fields), cmocka_unit_test(test_cron_refusals),
        cmocka_unit_test(test_dst_paris),   cmocka_unit_test(test_dst_new_york),
        cmocka_unit_test(test_time_zones),  cmocka_unit_test(test_intervals),
        cmocka_unit_test(test_definitions), cmocka_unit_test(test_job_uuids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
