/*
 * loop_util.h -- waiting on a libuv loop with a bound, for tests (and a closed port to
 * be refused on, found with such a wait).
 *
 * Tests never sleep and hope: they run the loop until the event they wait for has
 * happened, with a timer that ends the wait if it never does. The bounding timer is
 * closed before the function returns, so the loop is left as it was found.
 */
#ifndef TERN_LOOP_UTIL_H
#define TERN_LOOP_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

/* Returns true when the condition holds. */
typedef bool (*loop_cond_fn)(void *data);

/* Runs `loop` until cond(data) is true or `bound_ms` has passed. Returns 0 when the
 * condition held, -ETIMEDOUT when the bound passed first. */
int loop_run_until(uv_loop_t *loop, loop_cond_fn cond, void *data, uint64_t bound_ms);

/* The same for a flag that a callback sets. */
int loop_run_until_flag(uv_loop_t *loop, const bool *flag, uint64_t bound_ms);

/* Runs the loop until nothing is active or closing any more (at most bound_ms), then
 * closes it. Returns uv_loop_close's result (0 when every handle was closed). */
int loop_close_bounded(uv_loop_t *loop, uint64_t bound_ms);

/* A loopback TCP port that was free a moment ago: bound on `loop`, read back and
 * closed (the close awaited, at most bound_ms), so that a connection to it is refused.
 * Returns the port, or a negative libuv error code. */
int loop_closed_port(uv_loop_t *loop, uint64_t bound_ms);

#endif /* TERN_LOOP_UTIL_H */
