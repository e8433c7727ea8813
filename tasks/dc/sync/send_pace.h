/*
 * send_pace.h -- when dc.migration_send's timer reports a pass's progress to the
 * control (docs/MIGRATION.md "The transfer"): at each tick where bytes moved or the
 * walk compared blocks since the last report, and otherwise once every keep-alive
 * interval, so a pass that neither walks nor moves bytes (a target that does not read)
 * still shows it lives and still learns of a pause or abort. A pass in its walk (which
 * reads and hashes every block the target has before the first byte goes) thus learns
 * of a pause or abort within a tick too, not only at the keep-alive. The pass's start
 * counts as a report: a pass that has just started reports nothing until it walks,
 * bytes move or the interval passes.
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
    uint64_t last_walked;  /* the blocks walked it reported */
} send_pace_t;

/* A pass starting at now_ms with nothing sent nor walked. */
void send_pace_start(send_pace_t *p, uint64_t keepalive_ms, uint64_t now_ms);

/* Whether a report is due at now_ms with `sent` bytes sent and `walked` blocks
 * compared by the walk so far (sync_counters_t). */
bool send_pace_due(const send_pace_t *p, uint64_t now_ms, uint64_t sent, uint64_t walked);

/* A report went out at now_ms with `sent` and `walked`. */
void send_pace_reported(send_pace_t *p, uint64_t now_ms, uint64_t sent, uint64_t walked);

#endif
