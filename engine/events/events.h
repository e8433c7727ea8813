/*
 * events.h -- following an event stream: a job's (tern:job:<uuid>:events) or the
 * global one (tern:events), from its start or from now, on a connection of its own
 * (XREAD BLOCK would delay every other reply on a shared one). Events are JSON objects
 * with at least "type", "job" and "time"; see "Events" in docs/WORKFLOWS.md.
 */
#ifndef TERN_EVENTS_H
#define TERN_EVENTS_H

#include <stdbool.h>

#include <jansson.h>
#include <uv.h>

#include "redis/redis_addr.h"

typedef struct events_follow events_follow_t;

/* One event: `id` is the id of its stream entry (the global stream's entries may hold
 * several events, which then share it), `event` borrowed for the call. Return false
 * to stop following (the follower is then freed after the callback returns). */
typedef bool (*events_cb)(void *data, const char *id, const json_t *event);

/* Starts following. `uuid` NULL means the global stream. `from_id` is "0" for the whole
 * retained history, "$" for new events only, or an entry id to continue after.
 * Never returns NULL. */
events_follow_t *events_follow(uv_loop_t *loop, const redis_addr_t *addr, const char *uuid,
                               const char *from_id, events_cb cb, void *data);

/* Stops following; the callback does not run again. Not to be called from inside the
 * callback (return false there instead). */
void events_follow_stop(events_follow_t *f);

#endif /* TERN_EVENTS_H */
