/*
 * view_runner.h -- runs the scripts of plugins' read views (tern_view_def), for the
 * HTTP API, on a Redis connection of their own, each bounded in time.
 *
 * A view's script runs with EVAL_RO in its plugin's namespace: every key is put inside
 * "tern:p:<plugin>:" as tern_redis_eval does, and Redis refuses a write command in it
 * (Redis 7 or later). Views have their own connection so that a slow one never holds
 * the store's calls behind it in one FIFO, nor gets the store's connection dropped by
 * its watchdog.
 *
 * The bound. Redis runs a script to its end and serves nothing else meanwhile, so a
 * view's caller is answered TERN_ETIMEDOUT once `timeout_ms` passed without the
 * script's answer, and the runner then sends SCRIPT KILL on a second connection. Redis
 * reads that command only once the script has run past its busy-reply-threshold
 * (lua-time-limit, 5 s by default; until then it answers nobody), and kills only a
 * script that has not written: a view's never has, being EVAL_RO. So a runaway view
 * holds Redis for about busy-reply-threshold, not for as long as it loops. A kill that
 * finds no script running ("NOTBUSY") changes nothing; one that finds another client's
 * script past the threshold and not written kills that one, which Redis was answering
 * every other client BUSY for (no script of tern's store runs that long).
 */
#ifndef TERN_VIEW_RUNNER_H
#define TERN_VIEW_RUNNER_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>
#include <uv.h>

#include "redis/redis_addr.h"

typedef struct view_runner view_runner_t;

/* The answer of one view script: status 0 and `reply` (valid during the call), or
 * TERN_EINVAL with Redis's error text (the script failed), TERN_ETIMEDOUT (no answer
 * within the bound), TERN_ENOTCONN / TERN_EIO (Redis unreachable, or the connection
 * dropped) with a message. */
typedef void (*view_runner_cb)(void *data, int status, const redisReply *reply, const char *errmsg);

#define VIEW_RUNNER_TIMEOUT_MS_DEFAULT 2000

/* Connects to `addr` (copied). `timeout_ms` is the bound of one script (0: the
 * default). Never returns NULL. */
view_runner_t *view_runner_new(uv_loop_t *loop, const redis_addr_t *addr, uint32_t timeout_ms);

/* Runs `script` with the `nkeys` keys (each put inside `plugin`'s namespace) and the
 * `nargs` arguments, all copied. Returns 0, and `cb` runs exactly once, later, from
 * the loop; or TERN_ENOTCONN (nothing sent, cb never runs). */
int view_runner_eval(view_runner_t *vr, const char *plugin, const char *script, size_t nkeys,
                     const char *const *keys, size_t nargs, const char *const *args,
                     view_runner_cb cb, void *data);

/* Answers every script still waiting with TERN_EIO (during this call), closes the
 * connections and frees the runner once its handles are closed (run the loop). */
void view_runner_free(view_runner_t *vr);

#endif /* TERN_VIEW_RUNNER_H */
