/*
 * watch.c -- the driver of `tern job watch`: the event stream (with reconnection) or
 * polling, feeding watch_view; see watch.h.
 *
 * A follower (follow_t) lives on the stack of watch_job for the whole watch. It owns
 * the view, the last job read, and the id of the last event drawn, which is all a
 * reconnection needs.
 */
#include "watch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "client.h"
#include "term.h"
#include "units.h"
#include "watch_view.h"

#define POLL_MS          500   /* polling interval */
#define FINISH_SETTLE_MS 2000  /* a "finished" followed by silence this long is the last */
#define RECONNECT_MAX_MS 5000  /* backoff cap between reconnections */
#define GIVE_UP_MS       30000 /* no answer from the API for this long ends the watch */

typedef struct follow {
    cli_t *cli;
    const char *uuid;
    watch_view_t *view;   /* NULL with -j */
    json_t *job;          /* the last job read (ours) */
    char last_id[64];     /* SSE id of the last event handled, "" before any */
    char line_id[64];     /* the "id:" of the event being read */
    unsigned long events; /* events handled since the start */
    unsigned long skip;   /* events to skip after a reconnection without ids */
    bool have_finish;     /* the last event handled was "finished" */
    char finish_exec[32];
    uint64_t finish_mono_ms; /* when it came */
} follow_t;

static bool is_final(const char *execution)
{
    return execution != NULL &&
           (strcmp(execution, "succeeded") == 0 || strcmp(execution, "failed") == 0 ||
            strcmp(execution, "canceled") == 0);
}

static const char *execution_of(const json_t *job)
{
    return json_string_value(json_object_get(job, "execution"));
}

/* Sleeps `ms` unless interrupted. Returns false when Ctrl-C came. */
static bool pause_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (!client_interrupted() && nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    return !client_interrupted();
}

/* Reads the job into f->job. */
static cli_status_t read_job(follow_t *f)
{
    char *esc = client_escape(cli_client(f->cli), f->uuid);
    char *path = xasprintf("/jobs/%s", esc);
    client_reply_t reply;
    cli_status_t st = client_call(cli_client(f->cli), "GET", path, NULL, &reply, &f->cli->err);
    free(path);
    free(esc);
    if (st == CLI_OK) {
        memset(&f->cli->err, 0, sizeof f->cli->err); /* an earlier failure was transient */
        json_decref(f->job);
        f->job = json_incref(reply.json);
        if (f->view != NULL)
            watch_view_job(f->view, f->job);
    }
    client_reply_dispose(&reply);
    return st;
}

/* Ends the watch with the job's outcome. */
static cli_status_t outcome(follow_t *f, const char *execution)
{
    if (f->view != NULL)
        watch_view_outcome(f->view, execution, f->job);
    return strcmp(execution, "succeeded") == 0 ? CLI_OK : CLI_FAILED;
}

/* Handles one event (borrowed). */
static void handle_event(follow_t *f, const json_t *ev, const char *text)
{
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (f->have_finish) {
        /* Something came after "finished": that run was retried afterwards. */
        f->have_finish = false;
        if (f->view != NULL)
            watch_view_run_end(f->view, f->finish_exec);
    }
    if (type != NULL && strcmp(type, "finished") == 0) {
        f->have_finish = true;
        const char *ex = json_string_value(json_object_get(ev, "execution"));
        snprintf(f->finish_exec, sizeof f->finish_exec, "%s", ex != NULL ? ex : "failed");
        f->finish_mono_ms = clock_mono_ms();
    }
    if (f->view != NULL) {
        watch_view_event(f->view, ev, clock_wall_ms());
    } else {
        fputs(text, stdout);
        fputc('\n', stdout);
        fflush(stdout);
    }
}

/* ---- the event stream ---------------------------------------------------------- */

static bool on_line(void *data, const char *line, size_t len)
{
    follow_t *f = data;
    const char *payload = line;
    size_t plen = len;
    if (len == 0 || line[0] == ':')
        return true; /* an SSE separator or comment, or an ND-JSON keep-alive */
    if (len >= 3 && strncmp(line, "id:", 3) == 0) {
        size_t off = len > 3 && line[3] == ' ' ? 4 : 3;
        snprintf(f->line_id, sizeof f->line_id, "%.*s", (int)(len - off), line + off);
        return true;
    }
    if (len >= 5 && strncmp(line, "data:", 5) == 0) {
        payload = line + 5 + (len > 5 && line[5] == ' ');
        plen = len - (size_t)(payload - line);
    } else if (line[0] != '{') {
        return true; /* "event:", "retry:" and anything else that is not an event */
    }
    json_t *ev = json_loadb(payload, plen, 0, NULL);
    if (json_is_object(ev)) {
        if (f->skip > 0) {
            f->skip--; /* replayed by a server that sent no ids */
        } else {
            char *text = xstrndup(payload, plen);
            handle_event(f, ev, text);
            free(text);
            f->events++;
        }
        if (f->line_id[0] != '\0')
            snprintf(f->last_id, sizeof f->last_id, "%s", f->line_id);
    }
    f->line_id[0] = '\0';
    json_decref(ev);
    return true;
}

static bool on_tick(void *data)
{
    follow_t *f = data;
    if (f->view != NULL)
        watch_view_tick(f->view, clock_wall_ms());
    /* A server that keeps the stream open after the last "finished": stop reading, the
     * caller asks the job. */
    return !(f->have_finish && clock_mono_ms() - f->finish_mono_ms > FINISH_SETTLE_MS);
}

/* Follows the stream, reconnecting after drops. Returns the outcome or an error; sets
 * *no_route (and returns CLI_OK) when the API has no event stream. */
static cli_status_t follow_stream(follow_t *f, bool *no_route)
{
    unsigned backoff_ms = 250;
    uint64_t failing_since = 0;
    *no_route = false;
    for (;;) {
        char *esc = client_escape(cli_client(f->cli), f->uuid);
        char *path;
        if (f->last_id[0] != '\0') {
            char *from = client_escape(cli_client(f->cli), f->last_id);
            path = xasprintf("/jobs/%s/events?from=%s", esc, from);
            free(from);
        } else {
            path = xasprintf("/jobs/%s/events", esc);
            /* Without ids a reconnection replays what was drawn already. */
            f->skip = f->events;
        }
        free(esc);
        unsigned long before = f->events;
        long status = 0;
        cli_error_t err = {0};
        cli_status_t st = client_stream(cli_client(f->cli), path, "text/event-stream", on_line,
                                        on_tick, f, &status, &err);
        free(path);
        if (st == CLI_INTERRUPTED)
            return st;
        if (st == CLI_API && (status == 404 || status == 405) && f->events == 0) {
            *no_route = true;
            return CLI_OK;
        }
        if (st == CLI_API && status < 500) {
            f->cli->err = err;
            return st;
        }
        if (f->have_finish) {
            /* The stream ended (or went quiet) after a "finished": the last one, unless
             * the job was retried since. */
            cli_status_t rs = read_job(f);
            if (rs == CLI_INTERRUPTED)
                return rs;
            const char *ex = rs == CLI_OK ? execution_of(f->job) : NULL;
            if (rs != CLI_OK || is_final(ex)) {
                /* Without the job, the "finished" event tells the outcome. */
                memset(&f->cli->err, 0, sizeof f->cli->err);
                return outcome(f, is_final(ex) ? ex : f->finish_exec);
            }
            /* Retried after that run ended: follow the next run. */
            continue;
        }
        /* Dropped, or ended without a "finished" (the server shut down): reconnect. A
         * stream that delivered events resets the backoff. */
        if (f->events > before) {
            backoff_ms = 250;
            failing_since = 0;
        } else if (failing_since == 0) {
            failing_since = clock_mono_ms();
        } else if (clock_mono_ms() - failing_since > GIVE_UP_MS) {
            if (st == CLI_OK || st == CLI_API)
                snprintf(err.message, sizeof err.message,
                         "the event stream of job %s keeps ending without events", f->uuid);
            f->cli->err = err;
            return st == CLI_API ? CLI_API : CLI_UNREACHABLE;
        }
        if (!pause_ms(backoff_ms))
            return CLI_INTERRUPTED;
        backoff_ms = backoff_ms * 2 > RECONNECT_MAX_MS ? RECONNECT_MAX_MS : backoff_ms * 2;
    }
}

/* ---- polling ------------------------------------------------------------------- */

static uint64_t iso_ms(const json_t *v)
{
    uint64_t ms = 0;
    const char *s = json_string_value(v);
    return s != NULL && units_parse_iso(s, &ms) ? ms : 0;
}

/* Draws the results of phase `p` from index `from` as step events. */
static void draw_results(follow_t *f, int p, size_t from)
{
    static const char *const lists[] = {"chain_results", "onerror_results", "oncancel_results"};
    static const char *const phases[] = {"chain", "onerror", "oncancel"};
    const json_t *results = json_object_get(f->job, lists[p]);
    for (size_t i = from; i < json_array_size(results); i++) {
        const json_t *r = json_array_get(results, i);
        const json_t *error = json_object_get(r, "error");
        bool failed = error != NULL && !json_is_null(error);
        uint64_t a = iso_ms(json_object_get(r, "started_at"));
        uint64_t b = iso_ms(json_object_get(r, "finished_at"));
        json_t *ev = json_pack(
            "{s:s, s:s, s:s, s:s, s:I, s:O?, s:O?, s:O?, s:I, s:O?}", "type", "step", "job",
            f->uuid, "status", failed ? "failed" : "succeeded", "phase", phases[p], "index",
            (json_int_t)i, "name", json_object_get(r, "name"), "task", json_object_get(r, "task"),
            "attempt", json_object_get(r, "attempts"), "duration_ms",
            (json_int_t)(b >= a && a > 0 ? b - a : 0), "error", failed ? error : NULL);
        if (ev != NULL) {
            char *text = json_dumps(ev, JSON_COMPACT);
            handle_event(f, ev, text);
            free(text);
            json_decref(ev);
        }
    }
}

static cli_status_t follow_poll(follow_t *f)
{
    size_t seen[3] = {0, 0, 0};
    char last_exec[32] = "";
    uint64_t failing_since = 0;
    for (bool first = true;; first = false) {
        cli_status_t st = first ? CLI_OK : read_job(f);
        if (st == CLI_INTERRUPTED)
            return st;
        if (st == CLI_API)
            return st;
        if (st == CLI_UNREACHABLE) {
            if (failing_since == 0)
                failing_since = clock_mono_ms();
            else if (clock_mono_ms() - failing_since > GIVE_UP_MS)
                return st;
        } else {
            failing_since = 0;
            static const char *const lists[] = {"chain_results", "onerror_results",
                                                "oncancel_results"};
            const char *ex = execution_of(f->job);
            if (ex != NULL && strcmp(ex, last_exec) != 0 &&
                (strcmp(ex, "running") == 0 || strcmp(ex, "queued") == 0)) {
                json_t *ev =
                    json_pack("{s:s, s:s}", "type",
                              strcmp(ex, "running") == 0 ? "running" : "created", "job", f->uuid);
                char *text = json_dumps(ev, JSON_COMPACT);
                handle_event(f, ev, text);
                free(text);
                json_decref(ev);
            }
            for (int p = 0; p < 3; p++) {
                size_t n = json_array_size(json_object_get(f->job, lists[p]));
                if (n < seen[p])
                    seen[p] = n; /* retried from an earlier step */
                draw_results(f, p, seen[p]);
                seen[p] = n;
            }
            if (ex != NULL && strcmp(ex, "waiting") == 0 && strcmp(last_exec, "waiting") != 0) {
                const json_t *cur = json_object_get(f->job, "cursor");
                json_t *ev =
                    json_pack("{s:s, s:s, s:s, s:O?, s:O?, s:O?}", "type", "step", "job", f->uuid,
                              "status", "waiting", "phase", json_object_get(cur, "phase"), "index",
                              json_object_get(cur, "index"), "name", json_object_get(cur, "step"));
                char *text = json_dumps(ev, JSON_COMPACT);
                handle_event(f, ev, text);
                free(text);
                json_decref(ev);
            }
            if (is_final(ex))
                return outcome(f, ex);
            snprintf(last_exec, sizeof last_exec, "%s", ex != NULL ? ex : "");
        }
        if (f->view != NULL)
            watch_view_tick(f->view, clock_wall_ms());
        if (!pause_ms(POLL_MS))
            return CLI_INTERRUPTED;
    }
}

/* ---- the watch ------------------------------------------------------------------- */

cli_status_t watch_job(cli_t *cli, const char *uuid, bool poll)
{
    follow_t f = {.cli = cli, .uuid = uuid};
    term_caps_t caps = term_probe(STDOUT_FILENO);
    if (!cli->out.json)
        f.view = watch_view_new(stdout, &caps);
    cli_status_t st = read_job(&f);
    if (st == CLI_OK && !poll) {
        bool no_route = false;
        st = follow_stream(&f, &no_route);
        poll = st == CLI_OK && no_route;
        if (poll)
            fprintf(stderr,
                    "tern: the API at %s has no event stream (GET /jobs/:uuid/events); "
                    "polling the job every %d ms\n",
                    cli->url, POLL_MS);
    }
    if (st == CLI_OK && poll)
        st = follow_poll(&f);
    if (st == CLI_INTERRUPTED) {
        if (f.view != NULL)
            watch_view_clear(f.view);
        cli_fail(cli, CLI_INTERRUPTED, NULL, "stopped watching; job %s goes on (tern job watch %s)",
                 uuid, uuid);
    }
    watch_view_free(f.view);
    json_decref(f.job);
    return st;
}
