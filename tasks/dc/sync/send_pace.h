/*
 * send_pace.h -- when dc.migration_send's timer reports a pass's progress to the
 * control (docs/MIGRATION.md "The transfer"): at each tick where bytes moved since the
 * last report, and otherwise once every keep-alive interval, so a pass whose bytes do
 * not move (a slow walk, a target that does not read) still shows it lives and still
 * learns of a pause or abort. The pass's start counts as a report: a pass that has
 * just started reports nothing until bytes move or the interval passes.
 *
 * Plain arithmetic on a clock the caller reads, so the unit test (test_send_pace)
 * runs the 60 s interval in no time.
 */
#ifndef DC_SYNC_SEND_PACE_H
#define DC_SYNC_SEND_PACE_H

#include <stdbool.h>
#include <stdint.h>

/* The keep-alive interval of dc.migration_send (docs/MIGRATION.md "The tasks"). */
#define SEND_PACE_KEEPALIVE_MS 60000u

typedef struct send_pace {
    uint64_t keepalive_ms; /* the interval without moving bytes; 0 is taken as 1 */
    uint64_t last_ms;      /* when the last report went out (or the pass started) */
    uint64_t last_sent;    /* the bytes sent it reported */
} send_pace_t;

/* A pass starting at now_ms with nothing sent. */
void send_pace_start(send_pace_t *p, uint64_t keepalive_ms, uint64_t now_ms);

/* Whether a report is due at now_ms with `sent` bytes sent so far. */
bool send_pace_due(const send_pace_t *p, uint64_t now_ms, uint64_t sent);

/* A report went out at now_ms with `sent`. */
void send_pace_reported(send_pace_t *p, uint64_t now_ms, uint64_t sent);

#endif
