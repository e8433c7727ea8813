/*
 * test_cli_migration_view.c -- how `tern migration watch` draws a migration
 * (cli/migration_view.c) from recorded watch streams, shaped as the control's scripts
 * write them (an entry published when it opens, again when it closes; the send's
 * progress events; one end event): an automatic run with three passes, a pause, an
 * abort, a failure, progress that would pass 100 %, a stream cut before its end and
 * read again. Piped output is compared line for line; a terminal's through a small
 * screen model that interprets '\r', '\n' and the clear-line escape.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "migration_view.h"
#include "term.h"

#define MIG "6f0c1d2e-0000-4000-8000-000000000001"

static const term_caps_t piped = {.tty = false, .ansi = false, .color = false, .width = 80};
static const term_caps_t tty = {.tty = true, .ansi = true, .color = false, .width = 100};

/* Feeds the NDJSON `stream` to a new view, event i at now_ms = i * step_ms, and
 * returns what it wrote (caller frees). *ended tells whether it saw the end. */
static char *draw(const term_caps_t *caps, const char *stream, uint64_t step_ms, bool *ended,
                  migration_view_t **keep)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    assert_non_null(out);
    migration_view_t *v = migration_view_new(out, caps, MIG);
    const char *p = stream;
    uint64_t now = 0;
    while (*p != '\0') {
        const char *nl = strchr(p, '\n');
        size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);
        json_error_t err;
        json_t *ev = json_loadb(p, n, 0, &err);
        if (ev == NULL)
            fail_msg("bad recorded line: %.*s: %s", (int)n, p, err.text);
        migration_view_event(v, ev, now);
        json_decref(ev);
        now += step_ms;
        p += n + (nl != NULL);
    }
    if (ended != NULL)
        *ended = migration_view_ended(v, NULL, NULL);
    if (keep != NULL) {
        *keep = v;
    } else {
        migration_view_free(v);
    }
    fclose(out);
    return buf;
}

static void assert_text(const char *got, const char *want)
{
    if (strcmp(got, want) != 0)
        fail_msg("got:\n%s\nwanted:\n%s", got, want);
}

/* What a terminal shows after `s` (see the file's comment): one char per column. */
static char *screen(const char *s)
{
    size_t cap = strlen(s) + 1;
    char *out = calloc(cap, 1), *line = calloc(cap, 1);
    size_t col = 0, n = 0, width = 0;
    for (const char *p = s; *p != '\0'; p++) {
        if (*p == '\033') {
            const char *end = p + 1 + (p[1] == '[');
            while (*end != '\0' && !((*end >= 'A' && *end <= 'Z') || (*end >= 'a' && *end <= 'z')))
                end++;
            if (*end == 'K') {
                memset(line, 0, cap);
                width = 0;
            }
            p = *end != '\0' ? end : end - 1;
        } else if (*p == '\r') {
            col = 0;
        } else if (*p == '\n') {
            memcpy(out + n, line, strlen(line));
            n += strlen(line);
            out[n++] = '\n';
            memset(line, 0, cap);
            col = width = 0;
        } else {
            /* Bytes, not columns: enough for a model that only overwrites whole lines. */
            line[col++] = *p;
            width = col > width ? col : width;
        }
    }
    memcpy(out + n, line, strlen(line));
    n += strlen(line);
    out[n] = '\0';
    free(line);
    return out;
}

/* ---- recorded streams ---------------------------------------------------------- */

#define ENTRY(phase, state, msg, start, extra)                                                     \
    "{\"type\":\"progress\",\"phase\":\"" phase "\",\"state\":\"" state "\",\"message\":\"" msg    \
    "\",\"started_timestamp\":\"2026-11-26T10:" start "Z\",\"job_uuid\":\"" MIG "\"" extra "}\n"
#define DONE(ms) ",\"duration_ms\":" #ms
#define PROGRESS(phase, cur, tot, rate, eta)                                                       \
    "{\"type\":\"progress\",\"phase\":\"" phase                                                    \
    "\",\"state\":\"running\",\"current_progress\":" #cur ",\"total_progress\":" #tot              \
    ",\"transfer_bytes_second\":" #rate ",\"eta_ms\":" #eta "}\n"
#define MIB 1048576

/* An automatic migration: begin, three sync passes (the first the phase's own entry,
 * the next opened and closed at their ends), then the switch. */
static const char automatic_stream[] = ENTRY(
    "begin", "running", "making a reservation", "00:00.000",
    "") ENTRY("begin", "successful", "making a reservation", "00:00.000",
              DONE(198000)) ENTRY("sync", "running", "synchronizing filesystems", "03:18.000",
                                  "") PROGRESS("sync", 10485760, 104857600, 10485760,
                                               9000) PROGRESS("sync", 52428800, 104857600, 10485760,
                                                              5000) PROGRESS("sync", 104857600,
                                                                             104857600, 10485760, 0)
    ENTRY("sync", "successful", "synchronizing filesystems", "03:18.000",
          DONE(10100) ",\"pass\":1,\"current_progress\":104857600,\"total_progress\":104857600")
        PROGRESS("sync", 1048576, 20971520, 10485760, 1900) PROGRESS("sync", 20971520, 20971520,
                                                                     10485760, 0)
            ENTRY("sync", "running", "synchronizing filesystems", "03:29.000", ",\"pass\":2") ENTRY(
                "sync",
                "successful",
                "synchronizing filesystems",
                "03:29.000",
                DONE(2050) ",\"pass\":2,\"current_progress\":20971520,\"total_progress\":20971520")
                PROGRESS("sync", 2097152, 2097152, 10485760, 0) ENTRY(
                    "sync", "running", "synchronizing filesystems", "03:31.000", ",\"pass\":3")
                    ENTRY("sync", "successful", "synchronizing filesystems", "03:31.000",
                          DONE(300) ",\"pass\":3,\"current_progress\":2097152,\"total_progress\":"
                                    "2097152") ENTRY("switch", "running", "stopping instance",
                                                     "03:32.000", "")
                        ENTRY("switch", "successful", "stopping instance", "03:32.000", DONE(19000))
                            ENTRY("switch", "running", "re-synchronizing filesystems", "03:51.000",
                                  "") PROGRESS("switch", 524288, 1048576, 1048576, 500)
                                ENTRY("switch", "successful", "re-synchronizing filesystems",
                                      "03:51.000",
                                      DONE(1200) ",\"pass\":4,\"current_progress\":1048576,\"total_"
                                                 "progress\":1048576")
                                    ENTRY("switch", "running", "switching instance information",
                                          "03:53.000",
                                          "") ENTRY("switch", "successful",
                                                    "switching instance information", "03:53.000",
                                                    DONE(30000)) ENTRY("switch", "running",
                                                                       "restarting instance",
                                                                       "04:23.000", "")
                                        ENTRY("switch", "successful", "restarting instance",
                                              "04:23.000",
                                              DONE(22000)) "{\"type\":\"end\",\"phase\":\"switch\","
                                                           "\"state\":\"successful\"}\n";

static void test_automatic_three_passes_piped(void **state)
{
    (void)state;
    bool ended = false;
    /* One event a second: a pass's progress lines come at most every 5 s, plus when a
     * new item starts. */
    char *out = draw(&piped, automatic_stream, 1000, &ended, NULL);
    assert_true(ended);
    assert_text(out, "Migration progress (" MIG "):\n"
                     "☐ making a reservation\n"
                     "✓ making a reservation (3m18s)\n"
                     "☐ synchronizing filesystems\n"
                     "✓ synchronizing filesystems (10s)\n"
                     "☐ synchronizing filesystems (5% 10.0 MiB/s ETA 2s)\n"
                     "✓ synchronizing filesystems (2.0s)\n"
                     "☐ synchronizing filesystems (100% 10.0 MiB/s ETA 0s)\n"
                     "✓ synchronizing filesystems (300ms)\n"
                     "☐ stopping instance\n"
                     "✓ stopping instance (19s)\n"
                     "☐ re-synchronizing filesystems\n"
                     "✓ re-synchronizing filesystems (1.2s)\n"
                     "☐ switching instance information\n"
                     "✓ switching instance information (30s)\n"
                     "☐ restarting instance\n"
                     "✓ restarting instance (22s)\n"
                     "Migration was successful.\n");
    free(out);
}

static void test_automatic_three_passes_piped_throttled(void **state)
{
    (void)state;
    /* Ten seconds between events: every change of a pass's progress is printed. */
    char *out = draw(&piped, automatic_stream, 10000, NULL, NULL);
    assert_non_null(strstr(out, "☐ synchronizing filesystems\n"
                                "☐ synchronizing filesystems (10% 10.0 MiB/s ETA 9s)\n"
                                "☐ synchronizing filesystems (50% 10.0 MiB/s ETA 5s)\n"
                                "☐ synchronizing filesystems (100% 10.0 MiB/s ETA 0s)\n"
                                "✓ synchronizing filesystems (10s)\n"));
    assert_null(strchr(out, '\r'));
    assert_null(strchr(out, '\033'));
    free(out);
}

static void test_automatic_on_a_terminal(void **state)
{
    (void)state;
    char *out = draw(&tty, automatic_stream, 1000, NULL, NULL);
    /* The live line is redrawn in place, */
    assert_non_null(strstr(out, "\r\033[2K☐ synchronizing filesystems (50% 10.0 MiB/s ETA 5s)"));
    /* and what stays on screen is the RFD's mock-up. */
    char *seen = screen(out);
    assert_text(seen, "Migration progress (" MIG "):\n"
                      "✓ making a reservation (3m18s)\n"
                      "✓ synchronizing filesystems (10s)\n"
                      "✓ synchronizing filesystems (2.0s)\n"
                      "✓ synchronizing filesystems (300ms)\n"
                      "✓ stopping instance (19s)\n"
                      "✓ re-synchronizing filesystems (1.2s)\n"
                      "✓ switching instance information (30s)\n"
                      "✓ restarting instance (22s)\n"
                      "Migration was successful.\n");
    free(seen);
    free(out);
}

/* An on-demand begin, a sync, and a pause asked during the second sync. */
static void test_pause(void **state)
{
    (void)state;
    static const char begin[] = ENTRY("begin", "running", "making a reservation", "00:00.000", "")
        ENTRY("begin", "successful", "making a reservation", "00:00.000",
              DONE(2500)) "{\"type\":\"end\",\"phase\":\"begin\",\"state\":\"paused\"}\n";
    char *out = draw(&piped, begin, 1000, NULL, NULL);
    assert_text(out, "Migration progress (" MIG "):\n"
                     "☐ making a reservation\n"
                     "✓ making a reservation (2.5s)\n"
                     "Begin migration phase was successful.\n");
    free(out);

    static const char sync[] = ENTRY("begin", "successful", "making a reservation", "00:00.000",
                                     DONE(2500)) ENTRY("sync", "running",
                                                       "synchronizing filesystems", "00:10.000", "")
        PROGRESS("sync", 1048576, 2097152, 1048576, 1000) ENTRY(
            "sync", "successful", "synchronizing filesystems", "00:10.000",
            DONE(
                2000) ",\"pass\":1") "{\"type\":\"end\",\"phase\":\"sync\",\"state\":\"paused\"}\n";
    out = draw(&tty, sync, 1000, NULL, NULL);
    char *seen = screen(out);
    assert_text(seen, "Migration progress (" MIG "):\n"
                      "✓ making a reservation (2.5s)\n"
                      "✓ synchronizing filesystems (2.0s)\n"
                      "Sync migration phase was successful.\n");
    free(seen);
    free(out);

    static const char paused[] =
        ENTRY("sync", "running", "synchronizing filesystems", "01:00.000", "")
            PROGRESS("sync", 4194304, 104857600, 1048576, 95000)
                ENTRY("sync", "paused", "synchronizing filesystems", "01:00.000",
                      DONE(12000)) "{\"type\":\"end\",\"phase\":\"sync\",\"state\":\"paused\"}\n";
    migration_view_t *v;
    bool ended;
    out = draw(&piped, paused, 1000, &ended, &v);
    assert_true(ended);
    assert_true(migration_view_was_paused(v));
    const char *st, *ph;
    assert_true(migration_view_ended(v, &st, &ph));
    assert_string_equal(st, "paused");
    assert_string_equal(ph, "sync");
    migration_view_free(v);
    assert_text(out, "Migration progress (" MIG "):\n"
                     "☐ synchronizing filesystems\n"
                     "⏸ synchronizing filesystems (12s)\n"
                     "Migration was paused.\n");
    free(out);
}

static void test_abort(void **state)
{
    (void)state;
    static const char stream[] =
        ENTRY("begin", "successful", "making a reservation", "00:00.000",
              DONE(198000)) ENTRY("sync", "running", "synchronizing filesystems", "03:18.000",
                                  "") PROGRESS("sync", 10485760, 104857600, 10485760, 9000)
            ENTRY("sync", "aborted", "synchronizing filesystems", "03:18.000",
                  DONE(4000)) ENTRY("abort", "running", "aborting", "03:22.000", "")
                ENTRY("abort", "successful", "aborting", "03:22.000",
                      DONE(5000)) "{\"type\":\"end\",\"phase\":\"abort\",\"state\":\"aborted\"}\n";
    char *out = draw(&tty, stream, 1000, NULL, NULL);
    char *seen = screen(out);
    assert_text(seen, "Migration progress (" MIG "):\n"
                      "✓ making a reservation (3m18s)\n"
                      "⊘ synchronizing filesystems (4.0s)\n"
                      "✓ aborting (5.0s)\n"
                      "Migration was aborted.\n");
    free(seen);
    free(out);
}

static void test_failure(void **state)
{
    (void)state;
    static const char stream[] = ENTRY("switch", "running", "re-synchronizing filesystems",
                                       "00:00.000", "")
        PROGRESS("switch", 1048576, 1048576, 1048576, 0) ENTRY(
            "switch", "failed", "re-synchronizing filesystems", "00:00.000",
            DONE(2000) ",\"error\":\"VerifyFailed: disk0: aa != bb\"") "{\"type\":\"end\","
                                                                       "\"phase\":\"switch\","
                                                                       "\"state\":\"failed\","
                                                                       "\"message\":\"VerifyFailed:"
                                                                       " disk0: aa != bb\"}\n";
    char *out = draw(&piped, stream, 1000, NULL, NULL);
    assert_text(out, "Migration progress (" MIG "):\n"
                     "☐ re-synchronizing filesystems\n"
                     "✗ re-synchronizing filesystems (2.0s): VerifyFailed: disk0: aa != bb\n"
                     "Migration failed: VerifyFailed: disk0: aa != bb\n");
    free(out);
}

/* Reads every "N%" of `s` and fails on one over 100, or one lower than the one before
 * within an item (items separated by the lines of finished entries). */
static void assert_percents_sane(const char *s)
{
    double last = -1;
    for (const char *p = s; *p != '\0'; p++) {
        if (strncmp(p, "✓", strlen("✓")) == 0)
            last = -1;
        if (*p != '%')
            continue;
        const char *q = p;
        while (q > s && q[-1] >= '0' && q[-1] <= '9')
            q--;
        double pct = atof(q);
        if (pct > 100)
            fail_msg("%.0f%% shown:\n%s", pct, s);
        if (pct < last)
            fail_msg("%.0f%% after %.0f%%:\n%s", pct, last, s);
        last = pct;
    }
}

static void test_percent_never_over_100_nor_backwards(void **state)
{
    (void)state;
    /* A pass whose bytes outgrow the total it announced (the guest writes), then one
     * whose count drops (a resent window): 100 % at most, never lower than shown. */
    static const char stream[] = PROGRESS("sync", 52428800, 104857600, 10485760, 5000)
        PROGRESS("sync", 157286400, 104857600, 10485760, 0)
            PROGRESS("sync", 94371840, 104857600, 10485760, 1000)
                PROGRESS("sync", 209715200, 104857600, 10485760, 0)
                    ENTRY("sync", "successful", "synchronizing filesystems", "00:00.000",
                          DONE(20000) ",\"pass\":1")
                        PROGRESS("sync", 1048576, 10485760, 10485760,
                                 900) "{\"type\":\"progress\",\"phase\":\"sync\",\"state\":"
                                      "\"running\",\"current_progress\":1,"
                                      "\"total_progress\":0}\n"
                                      "{\"type\":\"progress\",\"phase\":\"sync\",\"state\":"
                                      "\"running\",\"current_progress\":-5,"
                                      "\"total_progress\":10}\n";
    for (int i = 0; i < 2; i++) {
        char *out = draw(i == 0 ? &piped : &tty, stream, 10000, NULL, NULL);
        assert_percents_sane(out);
        assert_null(strstr(out, "(90%"));
        assert_non_null(strstr(out, "(100% 10.0 MiB/s ETA 0s)"));
        /* The next pass starts again from its own percent. */
        assert_non_null(strstr(out, "(10% 10.0 MiB/s ETA 1s)"));
        free(out);
    }
    char buf[256];
    json_t *ev = json_pack("{s:f, s:f}", "current_progress", 3e9, "total_progress", 1e9);
    assert_string_equal(
        migration_view_live_text("synchronizing filesystems", 100, ev, buf, sizeof buf),
        "synchronizing filesystems (100%)");
    json_decref(ev);
}

static void test_stream_cut_and_read_again(void **state)
{
    (void)state;
    static const char first[] =
        ENTRY("begin", "successful", "making a reservation", "00:00.000", DONE(198000))
            ENTRY("sync", "running", "synchronizing filesystems", "03:18.000", "")
                PROGRESS("sync", 10485760, 104857600, 10485760, 9000);
    /* Cut: no end event, and the live line is cleared before leaving. */
    migration_view_t *v;
    bool ended = true;
    char *out = draw(&tty, first, 1000, &ended, &v);
    assert_false(ended);
    assert_null(strstr(out, "Migration was"));
    free(out);

    /* Read again from the start (the watch view replays the history): nothing drawn
     * twice, and the stream's end is drawn once. */
    static const char again[] = ENTRY(
        "begin", "successful", "making a reservation", "00:00.000",
        DONE(198000)) ENTRY("sync", "running", "synchronizing filesystems", "03:18.000", "")
        PROGRESS("sync", 52428800, 104857600, 10485760, 5000) ENTRY(
            "sync", "successful", "synchronizing filesystems", "03:18.000",
            DONE(
                10000) ",\"pass\":1") "{\"type\":\"end\",\"phase\":\"sync\",\"state\":\"paused\"}\n"
                                      "{\"type\":\"end\",\"phase\":\"sync\",\"state\":\"failed\","
                                      "\"message\":\"late\"}\n";
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    migration_view_free(v);
    v = migration_view_new(f, &tty, MIG);
    const char *p = first;
    for (int pass = 0; pass < 2; pass++) {
        migration_view_clear(v); /* the driver clears before it reconnects */
        p = pass == 0 ? first : again;
        while (*p != '\0') {
            const char *nl = strchr(p, '\n');
            json_t *ev = json_loadb(p, (size_t)(nl - p), 0, NULL);
            migration_view_event(v, ev, 0);
            json_decref(ev);
            p = nl + 1;
        }
    }
    const char *st;
    assert_true(migration_view_ended(v, &st, NULL));
    assert_string_equal(st, "paused");
    migration_view_free(v);
    fclose(f);
    char *seen = screen(buf);
    assert_text(seen, "Migration progress (" MIG "):\n"
                      "✓ making a reservation (3m18s)\n"
                      "✓ synchronizing filesystems (10s)\n"
                      "Sync migration phase was successful.\n");
    free(seen);
    free(buf);
}

static void test_final_lines(void **state)
{
    (void)state;
    static const struct {
        const char *end;
        bool paused;
        const char *line;
    } cases[] = {
        {"{\"phase\":\"switch\",\"state\":\"successful\"}", false, "Migration was successful."},
        {"{\"phase\":\"begin\",\"state\":\"paused\"}", false,
         "Begin migration phase was successful."},
        {"{\"phase\":\"sync\",\"state\":\"paused\"}", false,
         "Sync migration phase was successful."},
        {"{\"phase\":\"sync\",\"state\":\"paused\"}", true, "Migration was paused."},
        {"{\"phase\":\"abort\",\"state\":\"aborted\"}", false, "Migration was aborted."},
        {"{\"phase\":\"rollback\",\"state\":\"aborted\"}", false, "Migration was rolled back."},
        {"{\"phase\":\"sync\",\"state\":\"scheduled\"}", false,
         "Sync migration phase was successful; the switch is scheduled."},
        {"{\"phase\":\"sync\",\"state\":\"failed\",\"message\":\"TransferRefused: bad key\"}",
         false, "Migration failed: TransferRefused: bad key"},
        {"{\"phase\":\"sync\",\"state\":\"failed\"}", false, "Migration failed: no reason given"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *end = json_loads(cases[i].end, 0, NULL);
        char buf[256];
        assert_string_equal(migration_view_final_line(end, cases[i].paused, buf, sizeof buf),
                            cases[i].line);
        json_decref(end);
    }
}

static void test_transfer_after_an_open_step(void **state)
{
    (void)state;
    /* The switch's final pass reports bytes while "stopping instance" is still the
     * entry open: the live line names the transfer, not the stop. */
    static const char stream[] = ENTRY("switch", "running", "stopping instance", "00:00.000", "")
        PROGRESS("switch", 524288, 1048576, 1048576, 500)
            ENTRY("switch", "successful", "stopping instance", "00:00.000", DONE(19000));
    char *out = draw(&tty, stream, 1000, NULL, NULL);
    assert_non_null(strstr(out, "☐ re-synchronizing filesystems (50% 1.00 MiB/s ETA 1s)"));
    assert_null(strstr(out, "☐ stopping instance (50%"));
    free(out);
}

/* A sync waiting for a migration slot: the engine's hold_wait is the live line until
 * the grant, then the pass; a wait for another resource (the VM's ticket) is not drawn;
 * a server's uuid cannot inject an escape either. */
static void test_wait_for_a_slot(void **state)
{
    (void)state;
#define HOLD(type, res, extra)                                                                     \
    "{\"type\":\"" type "\",\"job_uuid\":\"" MIG "\",\"workflow\":\"migrate-sync\","               \
    "\"resource\":\"" res "\",\"capacity\":1" extra "}\n"
    static const char stream[] = HOLD("hold_wait", "vm:x", "") HOLD("hold_granted", "vm:x", "")
        HOLD("hold_wait", "migration-slot:e1000000-0000-4000-8000-000000000001",
             ",\"ahead\":2,\"holders\":1")
            HOLD("hold_granted", "migration-slot:e1000000-0000-4000-8000-000000000001", "")
                ENTRY("sync", "running", "synchronizing filesystems", "00:00.000", "")
                    PROGRESS("sync", 524288, 1048576, 1048576, 500)
                        ENTRY("sync", "successful", "synchronizing filesystems", "00:00.000",
                              DONE(2000)) "{\"type\":\"end\",\"phase\":\"sync\",\"state\":"
                                          "\"paused\"}\n";
    char *out = draw(&piped, stream, 1000, NULL, NULL);
    assert_text(out, "Migration progress (" MIG "):\n"
                     "☐ waiting for a migration slot on e1000000 (2 ahead)\n"
                     "☐ synchronizing filesystems\n"
                     "✓ synchronizing filesystems (2.0s)\n"
                     "Sync migration phase was successful.\n");
    free(out);
    char text[128];
    assert_string_equal(
        migration_view_wait_text("e1000000-0000-4000-8000-000000000001", 0, 0, text, sizeof text),
        "waiting for a migration slot on e1000000-0000-4000-8000-000000000001");
    assert_string_equal(migration_view_wait_text(NULL, 0, 8, text, sizeof text),
                        "waiting for a migration slot");
    static const char evil[] = HOLD("hold_wait", "migration-slot:\\u001b[2J", "");
    out = draw(&tty, evil, 1000, NULL, NULL);
    assert_null(strstr(out, "\033[2J"));
    free(out);
#undef HOLD
}

static void test_values_cannot_inject_escapes(void **state)
{
    (void)state;
    static const char stream[] = ENTRY("sync", "successful", "evil\\u001b[2J\\rtext", "00:00.000",
                                       DONE(1000)) "{\"type\":\"end\",\"phase\":\"sync\",\"state\":"
                                                   "\"failed\",\"message\":\"a\\nb\\u001b\"}\n";
    char *out = draw(&piped, stream, 1000, NULL, NULL);
    assert_null(strchr(out, '\033'));
    assert_null(strchr(out, '\r'));
    assert_non_null(strstr(out, "✓ evil [2J text (1.0s)\n"));
    assert_non_null(strstr(out, "Migration failed: a b \n"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_automatic_three_passes_piped),
        cmocka_unit_test(test_automatic_three_passes_piped_throttled),
        cmocka_unit_test(test_automatic_on_a_terminal),
        cmocka_unit_test(test_pause),
        cmocka_unit_test(test_abort),
        cmocka_unit_test(test_failure),
        cmocka_unit_test(test_percent_never_over_100_nor_backwards),
        cmocka_unit_test(test_stream_cut_and_read_again),
        cmocka_unit_test(test_final_lines),
        cmocka_unit_test(test_transfer_after_an_open_step),
        cmocka_unit_test(test_wait_for_a_slot),
        cmocka_unit_test(test_values_cannot_inject_escapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
