/*
 * schedule_fire.h -- the firer of recurring schedules: at each schedule's tick, one
 * job, created through job_ops_create, in whichever ternd claims the tick.
 *
 * Every ternd with the API role runs a firer; Redis decides who fires each tick. The
 * unpaused schedules wait in tern:sched:due by their next tick; a firer claims the due
 * ones with schedule_claim.lua, which gives it a lease on each (its entry moves to the
 * lease's expiry), makes the tick's job under a uuid derived from the schedule and the
 * tick (schedule_job_uuid), then records the outcome and the next tick with
 * schedule_advance.lua. A firer that dies holding a lease leaves the tick to the one
 * that claims it when the lease runs out, whose create of the same uuid answers
 * "already exists" if the job was made: a tick never has two jobs and is never lost.
 *
 * No polling: the firer's timer is armed to the earliest due time (or lease expiry) it
 * learned from its last claim or from tern:sched:wake, on which a schedule that becomes
 * the earliest (created, resumed, advanced) is announced. Next ticks are computed from
 * the Redis server's clock at the time of firing, from the later of now and the tick
 * fired: a schedule whose ticks were missed while no ternd ran fires once when one comes
 * back, and a clock that went back never fires a tick at or before the last one fired
 * (schedule_advance.lua refuses it too).
 *
 * Ownership: the firer owns its subscription connection, its timer and each tick in
 * flight; it borrows the job operations (and their store), which must outlive it
 * (schedule_fire_stop finishes before they go).
 */
#ifndef TERN_SCHEDULE_FIRE_H
#define TERN_SCHEDULE_FIRE_H

#include <stdbool.h>

#include <uv.h>

#include "ops/job_ops.h"

/* How long a claimed tick is the claimer's: longer than a create can take (the
 * store's command timeout and the lock checks). */
#define SCHEDULE_LEASE_MS 15000u

typedef struct schedule_fire schedule_fire_t;

/* Creates the firer (`id` names this process in logs); it starts claiming when told
 * the store is up. Never returns NULL. */
schedule_fire_t *schedule_fire_new(uv_loop_t *loop, job_ops_t *ops, store_t *store, const char *id);

/* Tells the firer the store's connection state changed. */
void schedule_fire_store_state(schedule_fire_t *f, bool up);

/* Stops claiming; calls on_stopped(data) once the ticks in flight are answered and its
 * handles are closed, and frees the firer after that call. A tick whose create was not
 * answered is left to its lease. */
void schedule_fire_stop(schedule_fire_t *f, void (*on_stopped)(void *data), void *data);

#endif /* TERN_SCHEDULE_FIRE_H */
