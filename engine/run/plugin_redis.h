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

/* Converts a hiredis reply to JSON (new reference). Exposed for tests. */
json_t *plugin_redis_reply_json(const redisReply *r);

#endif /* TERN_PLUGIN_REDIS_H */
