/*
 * plugin_redis.h -- tern_redis_eval for plugins, over the engine's store connection.
 * The task context has already put every key inside the plugin's namespace
 * ("tern:p:<plugin>:<key>"); this runs the script with EVAL and converts the reply to
 * JSON (integers, strings, null, arrays; an error reply becomes the error text).
 */
#ifndef TERN_PLUGIN_REDIS_H
#define TERN_PLUGIN_REDIS_H

#include "run/task_ctx.h"
#include "store/store.h"

/* Fills *ops so that task contexts run plugin scripts on `store` (borrowed; it must
 * outlive every context using the ops). */
void plugin_redis_ops(store_t *store, task_redis_ops_t *ops);

/* Runs a read view's script (a plugin's, not a task's: no context) on `store`: every
 * key is put inside `plugin`'s namespace ("tern:p:<plugin>:<key>") exactly as
 * tern_redis_eval does, and the script runs with EVAL_RO, so a write command in it is
 * refused by Redis (Redis 7 or later). `cb` gets the reply as store_command gives it
 * (a Lua error as TERN_EINVAL with Redis's text) and runs exactly once unless this
 * returns non-zero (TERN_ENOTCONN: nothing sent). Arguments are copied. */
int plugin_redis_view_eval(store_t *store, const char *plugin, const char *script, size_t nkeys,
                           const char *const *keys, size_t nargs, const char *const *args,
                           store_reply_cb cb, void *data);

/* Converts a hiredis reply to JSON (new reference). Exposed for tests. */
json_t *plugin_redis_reply_json(const redisReply *r);

#endif /* TERN_PLUGIN_REDIS_H */
