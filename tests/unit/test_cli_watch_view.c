/*
 * test_cli_watch_view.c -- how `tern job watch` draws a job (cli/watch_view.c):
 * the lines piped output gets, and what a terminal shows once the live line has been
 * redrawn in place (a small screen model interprets '\r', '\n' and the clear-line
 * escape), with and without colours, and on a "dumb" terminal.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "term.h"
#include "watch_view.h"

#define T0 1795236448000ull /* 2026-11-21T04:47:28Z */

static const char *const job_json =
    "{\"uuid\": \"6f0c\", \"name\": \"migrate\", \"version\": \"1.0.0\","
    " \"chain\": [{\"name\": \"reserve\"}, {\"name\": \"sync\"}, {\"name\": \"switch\"}],"
    " \"onerror\": [{\"name\": \"report\"}],"
    " \"elapsed\": 2.5,"
    " \"error\": {\"code\": \"Bad\", \"message\": \"no route\", \"step\": \"switch\"}}";

/* The events of a migration whose switch fails, as the API streams them. */
static const char *const events[] = {
    "{\"type\": \"created\", \"time\": 1795236448000}",
    "{\"type\": \"running\", \"time\": 1795236448010}",
    "{\"type\": \"step\", \"status\": \"succeeded\", \"phase\": \"chain\", \"index\": 0,"
    " \"name\": \"reserve\", \"attempt\": 1, \"duration_ms\": 198000, \"time\": 1795236448100}",
    "{\"type\": \"progress\", \"name\": \"sync\", \"time\": 1795236448200,"
    " \"progress\": {\"percent\": 5, \"bytes\": 52428800, \"total_bytes\": 1048576000,"
    " \"rate\": 10485760, \"eta_s\": 95}}",
    "{\"type\": \"progress\", \"name\": \"sync\", \"time\": 1795236448300,"
    " \"progress\": {\"percent\": 7}}",
    "{\"type\": \"progress\", \"name\": \"sync\", \"time\": 1795236448400,"
    " \"progress\": {\"percent\": 42, \"message\": \"disk0\"}}",
    "{\"type\": \"step\", \"status\": \"succeeded\", \"phase\": \"chain\", \"index\": 1,"
    " \"name\": \"sync\", \"attempt\": 1, \"duration_ms\": 6727000, \"time\": 1795236448500}",
    "{\"type\": \"step\", \"status\": \"retry\", \"phase\": \"chain\", \"index\": 2,"
    " \"name\": \"switch\", \"attempt\": 1, \"duration_ms\": 4100, \"time\": 1795236448600,"
    " \"error\": {\"code\": \"TaskTimeout\", \"message\": \"no answer in 4 s\"}}",
    "{\"type\": \"step\", \"status\": \"failed\", \"phase\": \"chain\", \"index\": 2,"
    " \"name\": \"switch\", \"attempt\": 2, \"duration_ms\": 12, \"time\": 1795236448700,"
    " \"error\": {\"code\": \"Bad\", \"message\": \"no route\"}}",
    "{\"type\": \"step\", \"status\": \"succeeded\", \"phase\": \"onerror\", \"index\": 0,"
    " \"name\": \"report\", \"attempt\": 1, \"duration_ms\": 1, \"time\": 1795236448800}",
    "{\"type\": \"finished\", \"execution\": \"failed\", \"time\": 1795236448900}",
    NULL,
};

/* Draws the whole story with `caps` and returns what was written (caller frees). */
static char *draw(const term_caps_t *caps)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    json_t *job = json_loads(job_json, 0, NULL);
    assert_non_null(job);
    watch_view_t *v = watch_view_new(out, caps);
    watch_view_job(v, job);
    for (size_t i = 0; events[i] != NULL; i++) {
        json_t *ev = json_loads(events[i], 0, NULL);
        assert_non_null(ev);
        watch_view_event(v, ev, T0 + 1000);
        watch_view_tick(v, T0 + 2000);
        json_decref(ev);
    }
    watch_view_outcome(v, "failed", job);
    watch_view_free(v);
    json_decref(job);
    fclose(out);
    return buf;
}

/* What a terminal shows after `s`: '\r' returns to the line's start, "\033[2K" clears
 * the line, '\n' starts a new one, other escapes (colours) take no room, and a UTF-8
 * character takes one column. Trailing spaces are dropped (they cleared a live line). */
typedef struct cell {
    char c[5];
} cell_t;

static void flush_line(cell_t *line, size_t width, char *out, size_t *n)
{
    size_t last = 0;
    for (size_t i = 0; i < width; i++)
        if (line[i].c[0] != '\0' && strcmp(line[i].c, " ") != 0)
            last = i + 1;
    for (size_t i = 0; i < last; i++) {
        const char *c = line[i].c[0] != '\0' ? line[i].c : " ";
        memcpy(out + *n, c, strlen(c));
        *n += strlen(c);
    }
}

static char *screen(const char *s)
{
    size_t cap = strlen(s) + 1;
    char *out = calloc(cap, 1);
    cell_t *line = calloc(cap, sizeof *line);
    size_t col = 0, n = 0;
    for (const char *p = s; *p != '\0'; p++) {
        if (*p == '\033') {
            const char *end = p + 1;
            if (*end == '[')
                end++;
            while (*end != '\0' && !((*end >= 'A' && *end <= 'Z') || (*end >= 'a' && *end <= 'z')))
                end++;
            if (*end == 'K')
                memset(line, 0, cap * sizeof *line); /* the whole line */
            p = *end != '\0' ? end : end - 1;
        } else if (*p == '\r') {
            col = 0;
        } else if (*p == '\n') {
            flush_line(line, cap, out, &n);
            out[n++] = '\n';
            memset(line, 0, cap * sizeof *line);
            col = 0;
        } else {
            size_t len = 1;
            while (len < 4 && ((unsigned char)p[len] & 0xC0) == 0x80)
                len++;
            memset(line[col].c, 0, sizeof line[col].c);
            memcpy(line[col].c, p, len);
            col++;
            p += len - 1;
        }
    }
    flush_line(line, cap, out, &n); /* a live line left on screen */
    out[n] = '\0';
    free(line);
    return out;
}

static const char *const story = "Job 6f0c (migrate 1.0.0):\n"
                                 "\u2713 reserve (3m18s)\n"
                                 "\u2713 sync (1h52m07s)\n"
                                 "\u21bb switch (4.1s): TaskTimeout: no answer in 4 s; will retry\n"
                                 "\u2717 switch (12ms, attempt 2): Bad: no route\n"
                                 "\u2713 onerror: report (1ms)\n"
                                 "Job failed after 2.5s: Bad: no route (step switch).\n";

static void test_piped_output_is_plain_lines(void **state)
{
    (void)state;
    term_caps_t caps = term_caps_from(false, "xterm", NULL, 0, NULL);
    char *out = draw(&caps);
    assert_null(strchr(out, '\033'));
    assert_null(strchr(out, '\r'));
    /* The story, with a progress line at 5% and at 42% (each new tenth), not at 7%. */
    assert_string_equal(out, "Job 6f0c (migrate 1.0.0):\n"
                             "\u2713 reserve (3m18s)\n"
                             "\u2610 sync   5%  50.0 MiB/1000 MiB  10.0 MiB/s  ETA 1m35s\n"
                             "\u2610 sync  42%  disk0\n"
                             "\u2713 sync (1h52m07s)\n"
                             "\u21bb switch (4.1s): TaskTimeout: no answer in 4 s; will retry\n"
                             "\u2717 switch (12ms, attempt 2): Bad: no route\n"
                             "\u2713 onerror: report (1ms)\n"
                             "Job failed after 2.5s: Bad: no route (step switch).\n");
    free(out);
}

static void test_terminal_redraws_in_place(void **state)
{
    (void)state;
    term_caps_t caps = term_caps_from(true, "xterm", "1", 60, NULL); /* NO_COLOR=1 */
    char *out = draw(&caps);
    /* The live line was drawn and cleared with the ANSI escape, no colours. */
    assert_non_null(strstr(out, "\r\033[2K"));
    assert_null(strstr(out, "\033[3"));
    assert_non_null(strstr(out, "\u2610 sync  42% ["));
    assert_non_null(strstr(out, "\u2610 queued (1s)"));
    /* What stays on screen: the story and nothing of the live line. */
    char *seen = screen(out);
    assert_string_equal(seen, story);
    free(seen);
    free(out);
}

static void test_colours_only_when_allowed(void **state)
{
    (void)state;
    term_caps_t caps = term_caps_from(true, "xterm-256color", NULL, 100, NULL);
    char *out = draw(&caps);
    assert_non_null(strstr(out, "\033[32m\u2713\033[0m reserve"));
    assert_non_null(strstr(out, "\033[31m\u2717\033[0m switch"));
    assert_non_null(strstr(out, "\033[33m\u21bb\033[0m switch"));
    char *seen = screen(out);
    assert_string_equal(seen, story);
    free(seen);
    free(out);
}

static void test_dumb_terminal_gets_no_escapes(void **state)
{
    (void)state;
    term_caps_t caps = term_caps_from(true, "dumb", NULL, 60, NULL);
    char *out = draw(&caps);
    assert_null(strchr(out, '\033'));
    assert_non_null(strchr(out, '\r')); /* redrawn with '\r' and spaces */
    char *seen = screen(out);
    assert_string_equal(seen, story);
    free(seen);
    free(out);
}

/* The other marks, a run retried after it ended, and a job that succeeds. */
static void test_wait_cancel_redrive(void **state)
{
    (void)state;
    static const char *const evs[] = {
        "{\"type\": \"step\", \"status\": \"waiting\", \"phase\": \"chain\", \"index\": 0,"
        " \"name\": \"reserve\", \"job\": \"6f0c\", \"duration_ms\": 3}",
        "{\"type\": \"resumed\"}",
        "{\"type\": \"cancel_requested\"}",
        "{\"type\": \"step\", \"status\": \"canceled\", \"phase\": \"chain\", \"index\": 0,"
        " \"name\": \"reserve\", \"duration_ms\": 2000}",
        "{\"type\": \"finished\", \"execution\": \"canceled\"}",
        "RUN_END canceled",
        "{\"type\": \"redrive\", \"index\": 1}",
        "{\"type\": \"retried\", \"runner\": \"r2\"}",
        "{\"type\": \"step\", \"status\": \"requeued\", \"phase\": \"chain\", \"index\": 1,"
        " \"name\": \"sync\", \"duration_ms\": 0}",
        "{\"type\": \"hold_wait\", \"resource\": \"vm:7\"}",
        "{\"type\": \"step\", \"status\": \"succeeded\", \"phase\": \"chain\", \"index\": 2,"
        " \"name\": \"switch\", \"attempt\": 1, \"duration_ms\": 22000}",
        "{\"type\": \"finished\", \"execution\": \"succeeded\"}",
        NULL,
    };
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    term_caps_t caps = term_caps_from(false, NULL, NULL, 0, NULL);
    json_t *job = json_loads(job_json, 0, NULL);
    json_object_set_new(job, "elapsed", json_real(1.5));
    watch_view_t *v = watch_view_new(out, &caps);
    watch_view_job(v, job);
    for (size_t i = 0; evs[i] != NULL; i++) {
        if (strncmp(evs[i], "RUN_END ", 8) == 0) {
            watch_view_run_end(v, evs[i] + 8);
            continue;
        }
        json_t *ev = json_loads(evs[i], 0, NULL);
        assert_non_null(ev);
        watch_view_event(v, ev, T0);
        json_decref(ev);
    }
    watch_view_outcome(v, "succeeded", job);
    watch_view_free(v);
    json_decref(job);
    fclose(out);
    assert_string_equal(buf, "Job 6f0c (migrate 1.0.0):\n"
                             "\u23f8 reserve (3ms): waiting for `tern job resume 6f0c`\n"
                             "\u25b6 resumed\n"
                             "\u2298 cancel requested\n"
                             "\u2298 reserve (2.0s): canceled\n"
                             "\u2298 job canceled\n"
                             "\u21ba retry from step sync\n"
                             "\u21bb job re-queued: runner r2 stopped renewing its lease\n"
                             "\u21bb sync (0ms): requeued, runs again later\n"
                             "\u2610 waiting for resource vm:7\n"
                             "\u2713 switch (22s)\n"
                             "Job succeeded in 1.5s.\n");
    free(buf);
}

/* Names and messages come from plugins and operators: none of them may move the cursor
 * or start an escape sequence, on a terminal or in a pipe. */
static void test_values_cannot_inject_escapes(void **state)
{
    (void)state;
    static const char *const evs[] = {
        "{\"type\": \"step\", \"status\": \"failed\", \"phase\": \"chain\", \"index\": 0,"
        " \"name\": \"x\\u001b[2Jy\", \"duration_ms\": 1,"
        " \"error\": {\"code\": \"E\\r\", \"message\": \"line1\\nline2\\u001b]0;owned\\u0007\"}}",
        "{\"type\": \"progress\", \"name\": \"p\\u001b[1A\", \"progress\": {\"percent\": 50,"
        " \"message\": \"m\\u001b[K\"}}",
        "{\"type\": \"hold_wait\", \"resource\": \"vm:\\u001b[31m\"}",
        NULL,
    };
    for (int tty = 0; tty < 2; tty++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&buf, &len);
        term_caps_t caps = term_caps_from(tty, "xterm", "1", 80, NULL);
        json_t *job = json_loads("{\"uuid\": \"u\\u001b[2J\", \"name\": \"n\\n\"}", 0, NULL);
        watch_view_t *v = watch_view_new(out, &caps);
        watch_view_job(v, job);
        for (size_t i = 0; evs[i] != NULL; i++) {
            json_t *ev = json_loads(evs[i], 0, NULL);
            assert_non_null(ev);
            watch_view_event(v, ev, T0);
            json_decref(ev);
        }
        watch_view_outcome(v, "failed", job);
        watch_view_free(v);
        json_decref(job);
        fclose(out);
        /* The only escapes are the view's own clear-line ones (NO_COLOR is set). */
        for (const char *p = buf; (p = strchr(p, '\033')) != NULL; p++)
            if (strncmp(p, "\033[2K", 4) != 0)
                fail_msg("foreign escape in %s output: %s", tty ? "terminal" : "piped", p);
        assert_null(strchr(buf, '\a'));
        assert_non_null(strstr(buf, "line1 line2"));
        if (!tty)
            assert_null(strchr(buf, '\r'));
        free(buf);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_piped_output_is_plain_lines),
        cmocka_unit_test(test_terminal_redraws_in_place),
        cmocka_unit_test(test_colours_only_when_allowed),
        cmocka_unit_test(test_dumb_terminal_gets_no_escapes),
        cmocka_unit_test(test_wait_cancel_redrive),
        cmocka_unit_test(test_values_cannot_inject_escapes),
    };
    return cmocka_run_group_tests_name("cli_watch_view", tests, NULL, NULL) == 0 ? 0 : 1;
}
