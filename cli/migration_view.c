/*
 * migration_view.c -- drawing a migration's watch stream; see migration_view.h.
 *
 * The view keeps one live item (the entry running or the pass whose progress comes in)
 * and the keys of the finished entries it drew. Nothing here reads a clock or the
 * network: the driver (cmd_migration.c) feeds it.
 */
#include "migration_view.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "output.h"
#include "units.h"

struct migration_view {
    FILE *out;
    term_caps_t term;
    char *uuid;
    bool header_done;
    bool ended, paused;
    char end_state[32], end_phase[32];
    json_t *drawn; /* keys of the finished entries drawn (an object used as a set) */
    /* The live item. */
    bool live;
    char text[256];  /* its text */
    char phase[32];  /* its phase */
    char item[128];  /* its pass and start, "" when the events name none */
    double pct;      /* the highest percent shown in this item, -1 before any */
    char line[1024]; /* the live line as last rendered */
    /* On a terminal: what is on screen. */
    bool shown;
    size_t shown_width;
    /* Piped: the last progress line printed and when. */
    char printed[1100];
    uint64_t printed_ms;
};

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

const char *migration_view_phase_text(const char *phase)
{
    if (phase == NULL)
        return "migrating";
    if (strcmp(phase, "begin") == 0)
        return "making a reservation";
    if (strcmp(phase, "sync") == 0)
        return "synchronizing filesystems";
    if (strcmp(phase, "switch") == 0)
        return "re-synchronizing filesystems"; /* the switch's bytes are its final pass */
    if (strcmp(phase, "abort") == 0)
        return "aborting";
    if (strcmp(phase, "rollback") == 0)
        return "reverting migration";
    return phase;
}

migration_view_t *migration_view_new(FILE *out, const term_caps_t *term, const char *uuid)
{
    migration_view_t *v = xcalloc(1, sizeof *v);
    v->out = out;
    v->term = *term;
    v->uuid = uuid != NULL ? xstrdup(uuid) : NULL;
    v->drawn = json_object();
    v->pct = -1;
    return v;
}

void migration_view_free(migration_view_t *v)
{
    if (v == NULL)
        return;
    json_decref(v->drawn);
    free(v->uuid);
    free(v);
}

bool migration_view_ended(const migration_view_t *v, const char **state, const char **phase)
{
    if (state != NULL)
        *state = v->end_state;
    if (phase != NULL)
        *phase = v->end_phase;
    return v->ended;
}

bool migration_view_was_paused(const migration_view_t *v)
{
    return v->paused;
}

/* ---- text ---------------------------------------------------------------------- */

/* A number of `ev`, or -1 when it is absent or not a finite number >= 0. */
static double num(const json_t *ev, const char *key)
{
    const json_t *j = json_object_get(ev, key);
    if (!json_is_number(j))
        return -1;
    double d = json_number_value(j);
    return isfinite(d) && d >= 0 ? d : -1;
}

/* The percent done an event reports, clamped to 0..100; -1 when unknown. */
static double event_percent(const json_t *ev)
{
    double cur = num(ev, "current_progress"), tot = num(ev, "total_progress");
    if (cur < 0 || tot <= 0)
        return -1;
    double p = cur * 100.0 / tot;
    return p > 100 ? 100 : p;
}

char *migration_view_live_text(const char *text, double pct, const json_t *ev, char *buf, size_t n)
{
    double rate = num(ev, "transfer_bytes_second");
    double eta_ms = num(ev, "eta_ms");
    double eta_s = eta_ms >= 0 ? eta_ms / 1000.0 : -1;
    if (eta_s < 0 && rate > 0) {
        double cur = num(ev, "current_progress"), tot = num(ev, "total_progress");
        if (cur >= 0 && tot >= cur)
            eta_s = (tot - cur) / rate;
    }
    char parts[256] = "", a[64];
    size_t k = 0;
    /* A step without work measured yet (an entry just opened: 0 of 100) shows no 0 %. */
    if (pct > 0 || (pct == 0 && (rate >= 0 || eta_s >= 0)))
        k += (size_t)snprintf(parts + k, sizeof parts - k, "%s%.0f%%", k ? " " : "", floor(pct));
    if (rate >= 0 && k < sizeof parts)
        k += (size_t)snprintf(parts + k, sizeof parts - k, "%s%s", k ? " " : "",
                              units_rate(rate, a, sizeof a));
    if (eta_s >= 0 && (rate >= 0 || pct > 0) && k < sizeof parts)
        k += (size_t)snprintf(parts + k, sizeof parts - k, "%sETA %s", k ? " " : "",
                              units_eta_s(eta_s, a, sizeof a));
    if (k > 0)
        snprintf(buf, n, "%s (%s)", text, parts);
    else
        snprintf(buf, n, "%s", text);
    return buf;
}

char *migration_view_wait_text(const char *server, long long ahead, size_t server_chars, char *buf,
                               size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "waiting for a migration slot");
    if (server != NULL && k < n)
        k += (size_t)snprintf(buf + k, n - k, " on %.*s", server_chars > 0 ? (int)server_chars : 64,
                              server);
    if (ahead > 0 && k < n)
        snprintf(buf + k, n - k, " (%lld ahead)", ahead);
    return buf;
}

char *migration_view_final_line(const json_t *end, bool paused, char *buf, size_t n)
{
    const char *state = str(end, "state"), *phase = str(end, "phase"), *msg = str(end, "message");
    state = state != NULL ? state : "";
    phase = phase != NULL ? phase : "";
    if (strcmp(state, "successful") == 0)
        snprintf(buf, n, "Migration was successful.");
    else if (strcmp(state, "paused") == 0 && paused)
        snprintf(buf, n, "Migration was paused.");
    else if (strcmp(state, "paused") == 0 && strcmp(phase, "begin") == 0)
        snprintf(buf, n, "Begin migration phase was successful.");
    else if (strcmp(state, "paused") == 0)
        snprintf(buf, n, "Sync migration phase was successful.");
    else if (strcmp(state, "scheduled") == 0)
        snprintf(buf, n, "Sync migration phase was successful; the switch is scheduled.");
    else if (strcmp(state, "aborted") == 0 && strcmp(phase, "rollback") == 0)
        snprintf(buf, n, "Migration was rolled back.");
    else if (strcmp(state, "aborted") == 0)
        snprintf(buf, n, "Migration was aborted.");
    else if (strcmp(state, "failed") == 0)
        snprintf(buf, n, "Migration failed: %s", msg != NULL ? msg : "no reason given");
    else
        snprintf(buf, n, "Migration stopped (%s%s%s).", phase, phase[0] ? ", " : "", state);
    return buf;
}

/* ---- drawing ------------------------------------------------------------------- */

void migration_view_clear(migration_view_t *v)
{
    if (!v->shown)
        return;
    if (v->term.ansi) {
        fputs("\r\033[2K", v->out);
    } else {
        fputc('\r', v->out);
        for (size_t i = 0; i < v->shown_width; i++)
            fputc(' ', v->out);
        fputc('\r', v->out);
    }
    v->shown = false;
    fflush(v->out);
}

/* Writes text from the API with control characters as spaces: no value can move the
 * cursor or inject an escape sequence. */
static void put_clean(migration_view_t *v, const char *s)
{
    for (; *s != '\0'; s++)
        fputc(((unsigned char)*s < 0x20 || *s == 0x7f) ? ' ' : *s, v->out);
}

static void header(migration_view_t *v)
{
    if (v->header_done)
        return;
    v->header_done = true;
    if (v->uuid != NULL) {
        fputs("Migration progress (", v->out);
        put_clean(v, v->uuid);
        fputs("):\n", v->out);
    }
}

/* A permanent line: `mark` (may be NULL), then `text`. */
static void emit(migration_view_t *v, const char *mark, const char *text)
{
    migration_view_clear(v);
    header(v);
    if (mark != NULL) {
        fputs(mark, v->out);
        fputc(' ', v->out);
    }
    put_clean(v, text);
    fputc('\n', v->out);
    fflush(v->out);
}

/* Cuts `s` to at most `cols` display columns (UTF-8 code points). */
static void fit(char *s, size_t cols)
{
    size_t w = 0;
    for (char *p = s; *p != '\0'; p++) {
        if (((unsigned char)*p & 0xc0) == 0x80)
            continue;
        if (w++ == cols) {
            *p = '\0';
            return;
        }
    }
}

/* Shows v->line: redrawn in place on a terminal; piped, printed when the item is new
 * (`fresh`) or MIGRATION_VIEW_PLAIN_MS after the last print of a different line. */
static void show_live(migration_view_t *v, bool fresh, uint64_t now_ms)
{
    char line[1100];
    snprintf(line, sizeof line, "☐ %s", v->line);
    if (v->term.tty) {
        if (v->term.width > 1)
            fit(line, (size_t)v->term.width - 1); /* the last column wraps on some terminals */
        header(v);
        if (v->shown && v->term.ansi)
            fputs("\r\033[2K", v->out);
        else if (v->shown)
            migration_view_clear(v);
        for (const char *s = line; *s != '\0'; s++)
            fputc(((unsigned char)*s < 0x20 || *s == 0x7f) ? ' ' : *s, v->out);
        v->shown = true;
        v->shown_width = output_display_width(line);
        fflush(v->out);
        return;
    }
    if (strcmp(line, v->printed) == 0)
        return;
    if (!fresh && v->printed[0] != '\0' && now_ms < v->printed_ms + MIGRATION_VIEW_PLAIN_MS)
        return;
    emit(v, NULL, line);
    snprintf(v->printed, sizeof v->printed, "%s", line);
    v->printed_ms = now_ms;
}

static void end_live(migration_view_t *v)
{
    migration_view_clear(v);
    v->live = false;
    v->pct = -1;
    v->printed[0] = '\0';
}

/* What tells one item from the next besides its text: its pass and start. */
static void item_key(const json_t *ev, char *buf, size_t n)
{
    const json_t *pass = json_object_get(ev, "pass");
    const char *started = str(ev, "started_timestamp");
    snprintf(buf, n, "%lld|%s", json_is_integer(pass) ? (long long)json_integer_value(pass) : -1LL,
             started != NULL ? started : "");
}

static void on_running(migration_view_t *v, const json_t *ev, uint64_t now_ms)
{
    const char *phase = str(ev, "phase");
    const char *msg = str(ev, "message");
    char key[128];
    item_key(ev, key, sizeof key);
    bool keyed = strcmp(key, "-1|") != 0;
    /* A progress event without a message continues the item running in its phase;
     * bytes moving in a step that is not a transfer ("stopping instance" left open)
     * are the phase's transfer ("re-synchronizing filesystems"). */
    bool bytes = json_object_get(ev, "transfer_bytes_second") != NULL;
    const char *text = msg != NULL ? msg
                       : v->live && phase != NULL && strcmp(phase, v->phase) == 0 &&
                               (!bytes || strstr(v->text, "synchronizing") != NULL)
                           ? v->text
                           : migration_view_phase_text(phase);
    bool fresh = !v->live || strcmp(text, v->text) != 0 ||
                 strcmp(phase != NULL ? phase : "", v->phase) != 0 ||
                 (keyed && v->item[0] != '\0' && strcmp(key, v->item) != 0);
    if (fresh) {
        end_live(v);
        v->live = true;
        snprintf(v->text, sizeof v->text, "%s", text);
        snprintf(v->phase, sizeof v->phase, "%s", phase != NULL ? phase : "");
        v->item[0] = '\0';
    }
    if (keyed)
        snprintf(v->item, sizeof v->item, "%s", key);
    double pct = event_percent(ev);
    if (pct > v->pct)
        v->pct = pct; /* never backwards within an item */
    migration_view_live_text(v->text, v->pct, ev, v->line, sizeof v->line);
    show_live(v, fresh, now_ms);
}

/* The key of a finished entry, so a replayed history is not drawn twice. */
static void entry_key(const json_t *ev, char *buf, size_t n)
{
    const json_t *pass = json_object_get(ev, "pass");
    const char *p = str(ev, "phase"), *m = str(ev, "message"), *s = str(ev, "started_timestamp"),
               *st = str(ev, "state"), *j = str(ev, "job_uuid");
    snprintf(buf, n, "%s|%s|%s|%s|%s|%lld", p ? p : "", m ? m : "", s ? s : "", st ? st : "",
             j ? j : "", json_is_integer(pass) ? (long long)json_integer_value(pass) : -1LL);
}

/* The duration of a finished entry into buf, or "" when unknown. */
static void entry_duration(const json_t *ev, char *buf, size_t n)
{
    double ms = num(ev, "duration_ms");
    uint64_t a, b;
    const char *s = str(ev, "started_timestamp"), *f = str(ev, "finished_timestamp");
    if (ms < 0 && s != NULL && f != NULL && units_parse_iso(s, &a) && units_parse_iso(f, &b) &&
        b >= a)
        ms = (double)(b - a);
    if (ms >= 0)
        units_duration_ms((uint64_t)ms, buf, n);
    else
        buf[0] = '\0';
}

static void on_finished(migration_view_t *v, const json_t *ev, const char *state)
{
    char key[512];
    entry_key(ev, key, sizeof key);
    const char *phase = str(ev, "phase");
    const char *msg = str(ev, "message");
    const char *text = msg != NULL ? msg : migration_view_phase_text(phase);
    /* The live item this entry closes ends here. */
    if (v->live && (strcmp(text, v->text) == 0 || strcmp(phase ? phase : "", v->phase) != 0))
        end_live(v);
    else
        migration_view_clear(v);
    v->paused = strcmp(state, "paused") == 0;
    if (json_object_get(v->drawn, key) != NULL) {
        if (v->live)
            show_live(v, false, 0); /* put the live line back */
        return;
    }
    json_object_set_new(v->drawn, key, json_true());
    const char *mark = strcmp(state, "successful") == 0 ? "✓"
                       : strcmp(state, "failed") == 0   ? "✗"
                       : strcmp(state, "paused") == 0   ? "⏸"
                                                        : "⊘";
    char dur[64], line[1024];
    entry_duration(ev, dur, sizeof dur);
    const char *err = str(ev, "error");
    size_t k = (size_t)snprintf(line, sizeof line, "%s", text);
    if (dur[0] != '\0' && k < sizeof line)
        k += (size_t)snprintf(line + k, sizeof line - k, " (%s)", dur);
    if (strcmp(state, "failed") == 0 && err != NULL && k < sizeof line)
        snprintf(line + k, sizeof line - k, ": %s", err);
    emit(v, mark, line);
    if (v->live)
        show_live(v, false, 0);
}

static void on_end(migration_view_t *v, const json_t *ev)
{
    end_live(v);
    const char *state = str(ev, "state"), *phase = str(ev, "phase");
    snprintf(v->end_state, sizeof v->end_state, "%s", state != NULL ? state : "");
    snprintf(v->end_phase, sizeof v->end_phase, "%s", phase != NULL ? phase : "");
    char line[1200];
    migration_view_final_line(ev, v->paused, line, sizeof line);
    emit(v, NULL, line);
    v->ended = true;
}

#define SLOT_PREFIX "migration-slot:"

/* An engine event of a wait for a ticket: a wait for a migration slot is the live line
 * until it is granted or left. */
static void on_hold(migration_view_t *v, const json_t *ev, const char *type, uint64_t now_ms)
{
    const char *res = str(ev, "resource");
    if (res == NULL || strncmp(res, SLOT_PREFIX, strlen(SLOT_PREFIX)) != 0)
        return;
    if (strcmp(type, "hold_wait") != 0) {
        if (v->live && strncmp(v->text, "waiting for a migration slot", 28) == 0)
            end_live(v);
        return;
    }
    const json_t *ahead = json_object_get(ev, "ahead");
    char text[256];
    migration_view_wait_text(res + strlen(SLOT_PREFIX),
                             json_is_integer(ahead) ? (long long)json_integer_value(ahead) : 0, 8,
                             text, sizeof text);
    bool fresh = !v->live || strcmp(text, v->text) != 0;
    if (fresh) {
        end_live(v);
        v->live = true;
        snprintf(v->text, sizeof v->text, "%s", text);
        v->phase[0] = '\0';
        v->item[0] = '\0';
    }
    snprintf(v->line, sizeof v->line, "%s", text);
    show_live(v, fresh, now_ms);
}

void migration_view_event(migration_view_t *v, const json_t *event, uint64_t now_ms)
{
    if (v->ended || !json_is_object(event))
        return;
    const char *type = str(event, "type");
    const char *state = str(event, "state");
    if (type != NULL && strcmp(type, "end") == 0) {
        on_end(v, event);
    } else if (type != NULL && strncmp(type, "hold_", 5) == 0) {
        on_hold(v, event, type, now_ms);
    } else if (type == NULL || strcmp(type, "progress") == 0) {
        if (state == NULL || strcmp(state, "running") == 0)
            on_running(v, event, now_ms);
        else
            on_finished(v, event, state);
    }
    /* Any other type (a later addition) is not drawn. */
}
