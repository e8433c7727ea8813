/*
 * migration_view.h -- how `tern migration watch` (and the -w of every migration action)
 * draws a migration from the events of GET /migrations/:uuid/watch, RFD 34's mock-up:
 *
 *   Migration progress (6f0c1d2e-...):
 *   ✓ making a reservation (3m18s)
 *   ✓ synchronizing filesystems (1h52m07s)
 *   ✓ synchronizing filesystems (20m55s)
 *   ☐ synchronizing filesystems (39% 45.3 MiB/s ETA 1h33m)
 *   ...
 *   Migration was successful.
 *
 * The stream is newline-delimited JSON: the history entries of the record, then live
 * events, then one {"type": "end", phase, state, message?}. An event whose state is not
 * "running" is a finished history entry: one permanent line, its mark saying how it
 * ended (✓ successful, ✗ failed with its error, ⏸ paused, ⊘ aborted or anything else)
 * and its duration. A running event (an entry just opened, or the send's progress:
 * current_progress and total_progress in bytes, transfer_bytes_second, eta_ms) is the
 * live line "☐ <text> (<pct>% <rate> ETA <dur>)", the parts that are known: <text> is
 * its message, else the phase's ("synchronizing filesystems" in sync,
 * "re-synchronizing filesystems" in switch, ...).
 *
 * The percent is clamped to 0..100 and never goes backwards within one item (a pass):
 * an item ends with a finished entry, or changes with the event's phase, text, `pass`
 * or `started_timestamp`. On a terminal the live line is redrawn in place; piped, it is
 * printed as a plain line when a new item starts and otherwise at most once every
 * MIGRATION_VIEW_PLAIN_MS, never with an escape code. A finished entry already drawn is
 * not drawn again (a reconnected watch replays the history). The end event ends the
 * view with RFD 34's final line (see migration_view_final_line).
 *
 * The engine's events of a job of the migration waiting for a migration slot (type
 * `hold_wait` on a resource "migration-slot:<server>") draw the live line "☐ waiting
 * for a migration slot on <server> (N ahead)"; its grant or its leaving the line
 * (`hold_granted`, `hold_left`) ends it. Waits for other resources are not drawn.
 *
 * The view is pure: it is fed parsed events and the clock and writes to a FILE.
 * json_t arguments are borrowed.
 */
#ifndef TERN_CLI_MIGRATION_VIEW_H
#define TERN_CLI_MIGRATION_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "term.h"

/* Piped output: progress lines of one item at most this often. */
#define MIGRATION_VIEW_PLAIN_MS 5000

typedef struct migration_view migration_view_t;

/* A view writing to `out` with the capabilities `term` (copied); `uuid` (copied, may be
 * NULL) names the migration in the header, printed before the first event. */
migration_view_t *migration_view_new(FILE *out, const term_caps_t *term, const char *uuid);
void migration_view_free(migration_view_t *v);

/* Draws one event of the stream; `now_ms` is the clock (ms) for the piped throttle.
 * Events after the end event are ignored. */
void migration_view_event(migration_view_t *v, const json_t *event, uint64_t now_ms);

/* True once the end event was drawn; then *state (borrowed from the view, valid while
 * it lives) is its state ("successful", "paused", "scheduled", "aborted", "failed") and
 * *phase its phase. */
bool migration_view_ended(const migration_view_t *v, const char **state, const char **phase);

/* True when the last finished entry before the end ended "paused" (a pause asked). */
bool migration_view_was_paused(const migration_view_t *v);

/* Clears the live line, if one is shown (before leaving early). */
void migration_view_clear(migration_view_t *v);

/* The final line of end event `end` (borrowed) into buf: "Migration was successful.",
 * "Begin migration phase was successful.", "Sync migration phase was successful.",
 * "Migration was paused." (`paused`: the last entry ended paused), "Migration was
 * aborted.", "Migration was rolled back.", "Sync migration phase was successful; the
 * switch is scheduled.", "Migration failed: <message>". Returns buf. */
char *migration_view_final_line(const json_t *end, bool paused, char *buf, size_t n);

/* The live line's text for a running event `ev` (without the "☐ "), with `pct` the
 * percent to show (< 0: unknown): "synchronizing filesystems (39% 45.3 MiB/s ETA 41s)".
 * `text` is the item's text. Returns buf. */
char *migration_view_live_text(const char *text, double pct, const json_t *ev, char *buf, size_t n);

/* The text of a wait for a migration slot: "waiting for a migration slot on <server>"
 * (the server's uuid cut to `server_chars`, 0 for all of it), then " (N ahead)" when
 * `ahead` > 0. `server` may be NULL. Returns buf. */
char *migration_view_wait_text(const char *server, long long ahead, size_t server_chars, char *buf,
                               size_t n);

/* The text of a step of `phase` whose events carry no message: "making a reservation"
 * (begin), "synchronizing filesystems" (sync), "re-synchronizing filesystems" (switch:
 * its bytes are the final pass), "aborting", "reverting migration" (rollback); the
 * phase itself otherwise, "migrating" for NULL. Static text. */
const char *migration_view_phase_text(const char *phase);

#endif /* TERN_CLI_MIGRATION_VIEW_H */
