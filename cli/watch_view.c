/*
 * watch_view.c -- drawing a job's events; see watch_view.h.
 *
 * The view keeps what it needs to draw the live line: where the job is (the cursor,
 * worked out from the events: a succeeded step moves it on, a retried one keeps it, a
 * failure moves it to onerror), since when, and the running step's last progress
 * report. Permanent lines are written after clearing the live line, which is then
 * drawn again, so the terminal always ends with at most one live line.
 */
#include "watch_view.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "output.h"
#include "units.h"

#define GREEN   "\033[32m"
#define RED     "\033[31m"
#define YELLOW  "\033[33m"
#define CYAN    "\033[36m"
#define MAGENTA "\033[35m"
#define BOLD    "\033[1m"
#define DIM     "\033[2m"
#define RESET   "\033[0m"

#define MARK_RUNNING "\u2610" /* ☐ */

/* Where the job is, as far as the events tell. */
typedef enum live_state {
    LIVE_NONE,    /* nothing to draw: not started, waiting for an operator, finished */
    LIVE_QUEUED,  /* in a queue (created, re-queued, resumed, retried) */
    LIVE_RUNNING, /* a step runs */
    LIVE_HOLD,    /* parked until a resource is granted */
} live_state_t;

struct watch_view {
    FILE *out;
    term_caps_t term;
    json_t *job; /* the last job learned (a reference of ours), or NULL */
    bool header_done;
    live_state_t state;
    uint64_t since_ms; /* event time the state began */
    int phase;         /* 0 chain, 1 onerror, 2 oncancel */
    long index;        /* step index in that chain */
    json_t *progress;  /* the running step's last report (ours), or NULL */
    char progress_name[256];
    int plain_tenth;         /* last tenth of progress printed when piped (-1: none) */
    char plain_message[256]; /* last progress message printed when piped */
    char hold[256];          /* the resource waited for */
    bool live_shown;
    size_t live_width;    /* display width of the live line on screen */
    char live_text[1024]; /* the live line on screen */
    uint64_t first_running_ms, finished_ms;
};

static const char *const phase_names[] = {"chain", "onerror", "oncancel"};

static int phase_of(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (name != NULL && strcmp(name, phase_names[i]) == 0)
            return i;
    return 0;
}

watch_view_t *watch_view_new(FILE *out, const term_caps_t *term)
{
    watch_view_t *v = xcalloc(1, sizeof *v);
    v->out = out;
    v->term = *term;
    v->plain_tenth = -1;
    return v;
}

void watch_view_free(watch_view_t *v)
{
    if (v == NULL)
        return;
    json_decref(v->job);
    json_decref(v->progress);
    free(v);
}

/* ---- progress line (pure) ------------------------------------------------------ */

static double num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

double watch_progress_percent(const json_t *progress)
{
    double pct = num(progress, "percent");
    if (isnan(pct)) {
        double bytes = num(progress, "bytes"), total = num(progress, "total_bytes");
        if (!isnan(bytes) && !isnan(total) && total > 0)
            pct = bytes / total * 100.0;
    }
    if (isnan(pct))
        return -1;
    return pct < 0 ? 0 : pct > 100 ? 100 : pct;
}

enum { P_PCT, P_BAR, P_BYTES, P_RATE, P_ETA, P_MSG, NPARTS };

/* Copies at most `width` display columns of s into buf, ending with "…" when cut. */
static void fit_text(char *buf, size_t n, const char *raw, size_t width)
{
    char s[512];
    output_clean(raw, s, sizeof s);
    if (output_display_width(s) <= width) {
        snprintf(buf, n, "%s", s);
        return;
    }
    size_t k = 0, w = 0;
    while (s[k] != '\0' && w + 1 < width && k + 4 < n) {
        k++;
        while (((unsigned char)s[k] & 0xC0) == 0x80)
            k++;
        w++;
    }
    snprintf(buf, n, "%.*s%s", (int)k, s, width > 0 ? "\u2026" : "");
}

char *watch_progress_line(char *buf, size_t n, int width, const char *name, const json_t *progress,
                          bool with_bar)
{
    char part[NPARTS][256] = {{0}};
    bool on[NPARTS] = {false};
    double pct = watch_progress_percent(progress);
    if (pct >= 0) {
        snprintf(part[P_PCT], sizeof part[P_PCT], " %3d%%", (int)floor(pct));
        on[P_PCT] = true;
        on[P_BAR] = with_bar;
    }
    double bytes = num(progress, "bytes"), total = num(progress, "total_bytes");
    double rate = num(progress, "rate"), eta = num(progress, "eta_s");
    char a[32], b[32];
    if (!isnan(bytes)) {
        if (!isnan(total) && total > 0)
            snprintf(part[P_BYTES], sizeof part[P_BYTES], "  %s/%s",
                     units_bytes(bytes, a, sizeof a), units_bytes(total, b, sizeof b));
        else
            snprintf(part[P_BYTES], sizeof part[P_BYTES], "  %s", units_bytes(bytes, a, sizeof a));
        on[P_BYTES] = true;
    }
    if (!isnan(rate) && rate >= 0) {
        snprintf(part[P_RATE], sizeof part[P_RATE], "  %s", units_rate(rate, a, sizeof a));
        on[P_RATE] = true;
    }
    if (isnan(eta) && !isnan(rate) && rate > 0 && !isnan(bytes) && !isnan(total) && total > bytes)
        eta = (total - bytes) / rate;
    if (!isnan(eta) && eta >= 0 && pct < 100) {
        snprintf(part[P_ETA], sizeof part[P_ETA], "  ETA %s", units_eta_s(eta, a, sizeof a));
        on[P_ETA] = true;
    }
    const char *msg = json_string_value(json_object_get(progress, "message"));
    if (msg != NULL && msg[0] != '\0') {
        char clean[200];
        output_cell_text(json_object_get(progress, "message"), clean, sizeof clean);
        snprintf(part[P_MSG], sizeof part[P_MSG], "  %s", clean);
        on[P_MSG] = true;
    }

    const char *mark = MARK_RUNNING " ";
    size_t name_w = output_display_width(mark) + output_display_width(name);
    size_t w = width > 0 ? (size_t)width : 0;
    size_t bar_inner = 0;
    bool avail[NPARTS];
    memcpy(avail, on, sizeof avail);

    /* First try with a bar of at least 10 columns, giving up message, rate, bytes. */
    if (on[P_BAR]) {
        static const int drop_for_bar[] = {P_MSG, P_RATE, P_BYTES};
        for (size_t d = 0;; d++) {
            size_t used = name_w + 3; /* " [" and "]" */
            for (int p = 0; p < NPARTS; p++)
                if (on[p] && p != P_BAR)
                    used += output_display_width(part[p]);
            if (used + 10 <= w) {
                bar_inner = w - used > 30 ? 30 : w - used;
                break;
            }
            if (d == sizeof drop_for_bar / sizeof drop_for_bar[0]) {
                /* No room for a bar: take the parts back and go on without it. */
                memcpy(on, avail, sizeof on);
                on[P_BAR] = false;
                break;
            }
            on[drop_for_bar[d]] = false;
        }
    }
    /* Without a bar, give up message, rate, bytes, ETA, percent until it fits. */
    if (!on[P_BAR]) {
        static const int drop[] = {P_MSG, P_RATE, P_BYTES, P_ETA, P_PCT};
        for (size_t d = 0; d <= sizeof drop / sizeof drop[0]; d++) {
            size_t used = name_w;
            for (int p = 0; p < NPARTS; p++)
                if (on[p])
                    used += output_display_width(part[p]);
            if (used <= w || d == sizeof drop / sizeof drop[0])
                break;
            on[drop[d]] = false;
        }
    }
    if (on[P_BAR]) {
        size_t filled = (size_t)floor((double)bar_inner * pct / 100.0);
        size_t k = 0;
        part[P_BAR][k++] = ' ';
        part[P_BAR][k++] = '[';
        for (size_t i = 0; i < bar_inner; i++) {
            char c = ' ';
            if (i < filled)
                c = '=';
            else if (i == filled && pct > 0 && filled < bar_inner)
                c = '>';
            part[P_BAR][k++] = c;
        }
        part[P_BAR][k++] = ']';
        part[P_BAR][k] = '\0';
    }
    size_t rest = 0;
    for (int p = 0; p < NPARTS; p++)
        if (on[p])
            rest += output_display_width(part[p]);
    size_t mark_w = output_display_width(mark);
    char shown[512];
    size_t room = w > rest + mark_w ? w - rest - mark_w : 0;
    fit_text(shown, sizeof shown, name, room);
    size_t k = (size_t)snprintf(buf, n, "%s%s", mark, shown);
    for (int p = 0; p < NPARTS && k < n; p++)
        if (on[p])
            k += (size_t)snprintf(buf + k, n - k, "%s", part[p]);
    return buf;
}

/* ---- drawing ------------------------------------------------------------------- */

static void paint(watch_view_t *v, const char *color)
{
    if (v->term.color && color != NULL)
        fputs(color, v->out);
}

static void unpaint(watch_view_t *v, const char *color)
{
    if (v->term.color && color != NULL)
        fputs(RESET, v->out);
}

void watch_view_clear(watch_view_t *v)
{
    if (!v->live_shown)
        return;
    if (v->term.ansi) {
        fputs("\r\033[2K", v->out);
    } else {
        /* A terminal without escapes: overwrite with spaces. */
        fputc('\r', v->out);
        for (size_t i = 0; i < v->live_width; i++)
            fputc(' ', v->out);
        fputc('\r', v->out);
    }
    v->live_shown = false;
    fflush(v->out);
}

/* The name of step `index` of chain `phase` in the job, or NULL. */
static const char *step_name(const watch_view_t *v, int phase, long index)
{
    const json_t *chain = json_object_get(v->job, phase_names[phase >= 0 && phase < 3 ? phase : 0]);
    return json_string_value(json_object_get(json_array_get(chain, (size_t)index), "name"));
}

static void draw_live(watch_view_t *v, uint64_t now_ms)
{
    if (!v->term.tty)
        return;
    char line[1024], clock[32];
    int width = v->term.width - 1; /* the last column would wrap on some terminals */
    uint64_t since = now_ms > v->since_ms ? now_ms - v->since_ms : 0;
    units_eta_s((double)(since / 1000), clock, sizeof clock);
    const char *name = step_name(v, v->phase, v->index);
    char text[512];
    switch (v->state) {
    case LIVE_RUNNING:
        if (v->progress != NULL) {
            watch_progress_line(line, sizeof line, width, v->progress_name, v->progress, true);
            break;
        }
        /* "greet (12s)", "onerror: report (1s)" */
        snprintf(text, sizeof text, "%s%s%s (%s)", v->phase > 0 ? phase_names[v->phase] : "",
                 v->phase > 0 ? ": " : "", name != NULL ? name : "running", clock);
        watch_progress_line(line, sizeof line, width, text, NULL, false);
        break;
    case LIVE_QUEUED:
        snprintf(text, sizeof text, "queued (%s)", clock);
        watch_progress_line(line, sizeof line, width, text, NULL, false);
        break;
    case LIVE_HOLD:
        snprintf(text, sizeof text, "waiting for resource %s (%s)", v->hold, clock);
        watch_progress_line(line, sizeof line, width, text, NULL, false);
        break;
    default:
        watch_view_clear(v);
        return;
    }
    if (v->live_shown && strcmp(line, v->live_text) == 0)
        return; /* unchanged: no flicker, no needless writes */
    if (v->live_shown && v->term.ansi)
        fputs("\r\033[2K", v->out);
    else if (v->live_shown)
        watch_view_clear(v);
    fputs(line, v->out);
    v->live_shown = true;
    v->live_width = output_display_width(line);
    snprintf(v->live_text, sizeof v->live_text, "%s", line);
    fflush(v->out);
}

/* Writes text that came from the API (names, messages) with control characters as
 * spaces, so that no value can move the cursor or inject an escape sequence. */
static void put_clean(watch_view_t *v, const char *s)
{
    for (; *s != '\0'; s++)
        fputc(((unsigned char)*s < 0x20 || *s == 0x7f) ? ' ' : *s, v->out);
}

/* Prints a permanent line: mark (coloured), text, newline. */
static void emit(watch_view_t *v, const char *mark, const char *color, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void emit(watch_view_t *v, const char *mark, const char *color, const char *fmt, ...)
{
    watch_view_clear(v);
    if (mark != NULL) {
        paint(v, color);
        fputs(mark, v->out);
        unpaint(v, color);
        fputc(' ', v->out);
    }
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    put_clean(v, text);
    fputc('\n', v->out);
    fflush(v->out);
}

static void set_state(watch_view_t *v, live_state_t s, uint64_t t)
{
    v->state = s;
    v->since_ms = t;
    if (s != LIVE_RUNNING) {
        json_decref(v->progress);
        v->progress = NULL;
        v->plain_tenth = -1;
        v->plain_message[0] = '\0';
    }
}

void watch_view_job(watch_view_t *v, const json_t *job)
{
    json_decref(v->job);
    v->job = json_incref((json_t *)job);
    if (v->header_done)
        return;
    v->header_done = true;
    const char *uuid = json_string_value(json_object_get(job, "uuid"));
    const char *name = json_string_value(json_object_get(job, "name"));
    const char *version = json_string_value(json_object_get(job, "version"));
    watch_view_clear(v);
    char text[600];
    paint(v, BOLD);
    snprintf(text, sizeof text, "Job %s", uuid != NULL ? uuid : "?");
    put_clean(v, text);
    unpaint(v, BOLD);
    if (name != NULL) {
        snprintf(text, sizeof text, " (%s%s%s)", name, version != NULL ? " " : "",
                 version ? version : "");
        put_clean(v, text);
    }
    fputs(":\n", v->out);
    fflush(v->out);
}

/* "Code: message" of an error value (object or string) into buf; "" when none. */
static void error_text(const json_t *err, char *buf, size_t n)
{
    buf[0] = '\0';
    if (err == NULL || json_is_null(err))
        return;
    if (json_is_string(err)) {
        output_cell_text(err, buf, n);
        return;
    }
    char code[128], msg[700];
    output_cell_text(json_object_get(err, "code"), code, sizeof code);
    output_cell_text(json_object_get(err, "message"), msg, sizeof msg);
    int len = snprintf(buf, n, "%s: %s", code, msg);
    if (len >= 0 && (size_t)len >= n && n > 4)
        memcpy(buf + n - 4, "...", 4); /* a long message is cut visibly */
}

/* The line of a finished step attempt. */
static void draw_step(watch_view_t *v, const json_t *ev, uint64_t t)
{
    const char *status = json_string_value(json_object_get(ev, "status"));
    const char *name = json_string_value(json_object_get(ev, "name"));
    int phase = phase_of(json_string_value(json_object_get(ev, "phase")));
    json_int_t index = json_integer_value(json_object_get(ev, "index"));
    json_int_t attempt = json_integer_value(json_object_get(ev, "attempt"));
    const json_t *dur = json_object_get(ev, "duration_ms");
    char d[48] = "", e[800];
    if (json_is_integer(dur) && json_integer_value(dur) >= 0)
        units_duration_ms((uint64_t)json_integer_value(dur), d, sizeof d);
    if (attempt > 1)
        snprintf(d + strlen(d), sizeof d - strlen(d), "%sattempt %lld", d[0] ? ", " : "",
                 (long long)attempt);
    error_text(json_object_get(ev, "error"), e, sizeof e);
    char who[300];
    snprintf(who, sizeof who, "%s%s%s", phase > 0 ? phase_names[phase] : "", phase > 0 ? ": " : "",
             name != NULL ? name : "?");
    char dpart[64] = "";
    if (d[0] != '\0')
        snprintf(dpart, sizeof dpart, " (%s)", d);
    const char *st = status != NULL ? status : "";

    if (strcmp(st, "succeeded") == 0) {
        emit(v, "\u2713", GREEN, "%s%s", who, dpart); /* ✓ */
        v->phase = phase;
        v->index = (long)index + 1;
        /* The next step runs, unless that was the chain's last one. */
        set_state(v, step_name(v, phase, v->index) != NULL ? LIVE_RUNNING : LIVE_NONE, t);
    } else if (strcmp(st, "failed") == 0) {
        emit(v, "\u2717", RED, "%s%s%s%s", who, dpart, e[0] ? ": " : "", e); /* ✗ */
        set_state(v, LIVE_RUNNING, t);
        /* What runs next: the chain's onerror (a fallback or the end we cannot know). */
        if (phase == 0 && json_array_size(json_object_get(v->job, "onerror")) > 0) {
            v->phase = 1;
            v->index = 0;
        } else {
            set_state(v, LIVE_NONE, t);
        }
    } else if (strcmp(st, "retry") == 0) {
        emit(v, "\u21bb", YELLOW, "%s%s%s%s; will retry", who, dpart, e[0] ? ": " : "", e); /* ↻ */
        v->phase = phase;
        v->index = (long)index;
        set_state(v, LIVE_RUNNING, t);
    } else if (strcmp(st, "requeued") == 0) {
        emit(v, "\u21bb", YELLOW, "%s%s: requeued, runs again later", who, dpart);
        v->phase = phase;
        v->index = (long)index;
        set_state(v, LIVE_QUEUED, t);
    } else if (strcmp(st, "waiting") == 0) {
        const char *uuid = json_string_value(json_object_get(ev, "job"));
        emit(v, "\u23f8", CYAN, "%s%s: waiting for `tern job resume %s`", who, dpart, /* ⏸ */
             uuid != NULL ? uuid : "UUID");
        v->phase = phase;
        v->index = (long)index;
        set_state(v, LIVE_NONE, t);
    } else if (strcmp(st, "canceled") == 0) {
        emit(v, "\u2298", MAGENTA, "%s%s: canceled", who, dpart); /* ⊘ */
        if (phase == 0 && json_array_size(json_object_get(v->job, "oncancel")) > 0) {
            v->phase = 2;
            v->index = 0;
            set_state(v, LIVE_RUNNING, t);
        } else {
            set_state(v, LIVE_NONE, t);
        }
    } else {
        emit(v, "\u00b7", NULL, "%s%s: %s", who, dpart, st); /* · an unknown status */
    }
}

/* A progress report: kept for the live line, or printed plainly at each tenth. */
static void take_progress(watch_view_t *v, const json_t *ev, uint64_t t)
{
    const json_t *p = json_object_get(ev, "progress");
    const char *name = json_string_value(json_object_get(ev, "name"));
    if (!json_is_object(p))
        return;
    if (v->state != LIVE_RUNNING)
        set_state(v, LIVE_RUNNING, t);
    if (name != NULL && strcmp(name, v->progress_name) != 0) {
        v->plain_tenth = -1;
        v->plain_message[0] = '\0';
    }
    snprintf(v->progress_name, sizeof v->progress_name, "%s", name != NULL ? name : "?");
    json_decref(v->progress);
    v->progress = json_deep_copy(p);
    if (v->term.tty)
        return;
    double pct = watch_progress_percent(p);
    int tenth = pct >= 0 ? (int)floor(pct / 10.0) : -1;
    const char *msg = json_string_value(json_object_get(p, "message"));
    bool new_msg = msg != NULL && strcmp(msg, v->plain_message) != 0;
    if ((tenth >= 0 && tenth > v->plain_tenth) || (tenth < 0 && new_msg)) {
        char line[1024];
        watch_progress_line(line, sizeof line, 200, v->progress_name, p, false);
        emit(v, NULL, NULL, "%s", line);
        if (tenth >= 0)
            v->plain_tenth = tenth;
        if (msg != NULL)
            snprintf(v->plain_message, sizeof v->plain_message, "%s", msg);
    }
}

void watch_view_event(watch_view_t *v, const json_t *ev, uint64_t now_ms)
{
    const char *type = json_string_value(json_object_get(ev, "type"));
    const json_t *time = json_object_get(ev, "time");
    uint64_t t = json_is_integer(time) && json_integer_value(time) > 0
                     ? (uint64_t)json_integer_value(time)
                     : now_ms;
    const char *runner = json_string_value(json_object_get(ev, "runner"));
    if (type == NULL)
        return;
    if (strcmp(type, "step") == 0) {
        draw_step(v, ev, t);
    } else if (strcmp(type, "progress") == 0) {
        take_progress(v, ev, t);
    } else if (strcmp(type, "created") == 0) {
        set_state(v, LIVE_QUEUED, t);
    } else if (strcmp(type, "running") == 0) {
        if (v->first_running_ms == 0)
            v->first_running_ms = t;
        set_state(v, LIVE_RUNNING, t);
    } else if (strcmp(type, "retried") == 0) {
        emit(v, "\u21bb", YELLOW, "job re-queued: runner %s stopped renewing its lease",
             runner != NULL ? runner : "?");
        set_state(v, LIVE_QUEUED, t);
    } else if (strcmp(type, "released") == 0) {
        emit(v, "\u21bb", YELLOW, "job handed back to its queue by runner %s (shutting down)",
             runner != NULL ? runner : "?");
        set_state(v, LIVE_QUEUED, t);
    } else if (strcmp(type, "resumed") == 0) {
        emit(v, "\u25b6", CYAN, "resumed"); /* ▶ */
        set_state(v, LIVE_QUEUED, t);
    } else if (strcmp(type, "cancel_requested") == 0) {
        emit(v, "\u2298", MAGENTA, "cancel requested");
    } else if (strcmp(type, "redrive") == 0) {
        json_int_t idx = json_integer_value(json_object_get(ev, "index"));
        const char *name = step_name(v, 0, (long)idx);
        emit(v, "\u21ba", CYAN, "retry from step %s", name != NULL ? name : "?"); /* ↺ */
        v->phase = 0;
        v->index = (long)idx;
        set_state(v, LIVE_QUEUED, t);
    } else if (strcmp(type, "hold_wait") == 0) {
        const char *res = json_string_value(json_object_get(ev, "resource"));
        snprintf(v->hold, sizeof v->hold, "%s", res != NULL ? res : "?");
        if (!v->term.tty)
            emit(v, MARK_RUNNING, NULL, "waiting for resource %s", v->hold);
        set_state(v, LIVE_HOLD, t);
    } else if (strcmp(type, "hold_granted") == 0) {
        if (v->state == LIVE_HOLD)
            set_state(v, LIVE_RUNNING, t);
    } else if (strcmp(type, "step_interrupted") == 0) {
        emit(v, "\u2717", RED,
             "step interrupted: runner %s died during a step that must not run twice; "
             "retry or cancel the job",
             runner != NULL ? runner : "?");
        set_state(v, LIVE_NONE, t);
    } else if (strcmp(type, "timed_out") == 0) {
        emit(v, "\u2717", RED, "workflow timed out");
    } else if (strcmp(type, "info") == 0) {
        char text[700];
        const json_t *entry = json_object_get(ev, "info");
        output_cell_text(entry != NULL ? entry : ev, text, sizeof text);
        emit(v, "\u00b7", NULL, "info: %s", text);
    } else if (strcmp(type, "finished") == 0) {
        v->finished_ms = t;
        set_state(v, LIVE_NONE, t);
    }
    draw_live(v, now_ms);
}

void watch_view_tick(watch_view_t *v, uint64_t now_ms)
{
    if (v->live_shown || v->state != LIVE_NONE)
        draw_live(v, now_ms);
}

void watch_view_run_end(watch_view_t *v, const char *execution)
{
    bool ok = execution != NULL && strcmp(execution, "succeeded") == 0;
    bool canceled = execution != NULL && strcmp(execution, "canceled") == 0;
    emit(v,
         ok         ? "\u2713"
         : canceled ? "\u2298"
                    : "\u2717",
         ok         ? GREEN
         : canceled ? MAGENTA
                    : RED,
         "job %s", execution != NULL ? execution : "ended");
}

void watch_view_outcome(watch_view_t *v, const char *execution, const json_t *job)
{
    set_state(v, LIVE_NONE, 0);
    watch_view_clear(v);
    char took[48] = "";
    const json_t *elapsed = json_object_get(job, "elapsed");
    if (json_is_number(elapsed) && json_number_value(elapsed) >= 0)
        units_duration_ms((uint64_t)llround(json_number_value(elapsed) * 1000.0), took,
                          sizeof took);
    else if (v->first_running_ms > 0 && v->finished_ms >= v->first_running_ms)
        units_duration_ms(v->finished_ms - v->first_running_ms, took, sizeof took);
    const char *ex = execution != NULL ? execution : "?";
    bool ok = strcmp(ex, "succeeded") == 0, failed = strcmp(ex, "failed") == 0;
    const char *color = ok ? GREEN : failed ? RED : MAGENTA;
    char e[900] = "";
    if (failed) {
        const json_t *err = json_object_get(job, "error");
        error_text(err, e, sizeof e);
        const char *step = json_string_value(json_object_get(err, "step"));
        if (e[0] != '\0' && step != NULL)
            snprintf(e + strlen(e), sizeof e - strlen(e), " (step %s)", step);
    }
    char text[1200];
    if (ok)
        snprintf(text, sizeof text, "Job succeeded%s%s.", took[0] ? " in " : "", took);
    else
        snprintf(text, sizeof text, "Job %s%s%s%s%s.", ex, took[0] ? " after " : "", took,
                 e[0] ? ": " : "", e);
    paint(v, BOLD);
    paint(v, color);
    put_clean(v, text);
    unpaint(v, color);
    fputc('\n', v->out);
    fflush(v->out);
}
