/*
 * greet.c -- an out-of-tree tern plugin: one task, greet.hello, that answers after a
 * timer with a greeting built from its arguments and the job's target. It shows the
 * whole contract of include/tern/task.h: the descriptor, an argument schema, a
 * non-retryable code, an asynchronous start, a cancel hook that needs nothing because
 * host timers are stopped by the engine, and job state.
 *
 * greet.remember keeps a greeting in the plugin's own Redis namespace (a Redis script
 * through the host), and two read views (ABI 1.2) serve what it kept over the HTTP API:
 * GET /greet/greetings lists them by name, a page at a time, and
 * GET /greet/greetings/:name reads one.
 */
#include <stdio.h>
#include <stdlib.h>

#include <tern/task.h>

static void on_timer(tern_ctx *ctx, void *data)
{
    (void)data;
    const json_t *name = tern_state_get(ctx, "greet_name");
    char msg[256];
    snprintf(msg, sizeof msg, "hello, %s", json_string_value(name));
    tern_state_set(ctx, "greeted", json_true());
    tern_task_done(ctx, json_pack("{s:s}", "greeting", msg));
}

static void hello_start(tern_ctx *ctx, const json_t *args)
{
    const char *name = json_string_value(json_object_get(args, "name"));
    if (name == NULL || name[0] == '\0') {
        tern_task_fail(ctx, "NoName", "args.name: a non-empty string is required");
        return;
    }
    /* Kept in the attempt's state so the timer callback needs no allocation. */
    tern_state_set(ctx, "greet_name", json_string(name));
    json_int_t delay = json_integer_value(json_object_get(args, "delay_ms"));
    if (tern_timer_start(ctx, (uint64_t)(delay > 0 ? delay : 100), on_timer, NULL) < 0)
        tern_task_fail(ctx, "TimerError", "cannot start a timer");
}

static const char *const fatal_codes[] = {"NoName", NULL};

static const tern_task_def hello_def = {
    .size = sizeof(tern_task_def),
    .name = "hello",
    .summary = "greets args.name after args.delay_ms (default 100 ms)",
    .args_schema = "{\"required\": [\"name\"], \"properties\": {\"name\": {\"type\": \"string\"},"
                   " \"delay_ms\": {\"type\": \"integer\"}}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = hello_start,
};

/* Kept as: the set "names" (every name, score 0, so it is in name order) and the
 * string "greeting:<name>" (the greeting's JSON), both inside "tern:p:greet:". */
static void on_remembered(tern_ctx *ctx, const json_t *reply, const char *error, void *data)
{
    (void)reply;
    (void)data;
    if (error != NULL)
        tern_task_fail(ctx, "RedisError", "%s", error);
    else
        tern_task_done(ctx, NULL);
}

static void remember_start(tern_ctx *ctx, const json_t *args)
{
    const char *name = json_string_value(json_object_get(args, "name"));
    char *text = json_dumps(args, JSON_COMPACT | JSON_SORT_KEYS);
    const char *keys[] = {"names", "greeting:"};
    const char *argv[] = {name, text};
    int rc = tern_redis_eval(ctx,
                             "redis.call('ZADD', KEYS[1], 0, ARGV[1])\n"
                             "redis.call('SET', KEYS[2] .. ARGV[1], ARGV[2])\n"
                             "return 1",
                             2, keys, 2, argv, on_remembered, NULL);
    free(text);
    if (rc != 0)
        tern_task_fail(ctx, "RedisError", "Redis is not available (%d)", rc);
}

static const tern_task_def remember_def = {
    .size = sizeof(tern_task_def),
    .name = "remember",
    .summary = "keeps args.greeting for args.name, read back by GET /greet/greetings",
    .args_schema = "{\"required\": [\"name\", \"greeting\"], \"properties\": {\"name\": "
                   "{\"type\": \"string\"}, \"greeting\": {\"type\": \"string\"}}, "
                   "\"additional\": false}",
    .start = remember_start,
};

static const tern_task_def *const tasks[] = {&hello_def, &remember_def, NULL};

/* GET /greet/greetings[?limit=N&marker=NAME]: the greetings in name order. A page ends
 * after `limit` of them; the name of its last is the marker of the next. */
static const char *const list_keys[] = {"names", "greeting:", NULL};
static const tern_view_def list_view = {
    .size = sizeof(tern_view_def),
    .path = "/greet/greetings",
    .summary = "The greetings greet.remember kept, by name.",
    .keys = list_keys,
    .script =
        "local limit, marker = tonumber(ARGV[1]), ARGV[3]\n"
        "local from = marker ~= '' and '(' .. marker or '-'\n"
        "local names = redis.call('ZRANGEBYLEX', KEYS[1], from, '+', 'LIMIT', 0, limit + 1)\n"
        "local out = {}\n"
        "for i = 1, math.min(#names, limit) do\n"
        "  out[i] = cjson.decode(redis.call('GET', KEYS[2] .. names[i]))\n"
        "end\n"
        "local next = #names > limit and names[limit] or false\n"
        "return {#out == 0 and '[]' or cjson.encode(out), next, redis.call('ZCARD', KEYS[1])}\n",
};

/* GET /greet/greetings/:name: one greeting, or 404 (the script answers false). */
static const char *const item_keys[] = {"greeting:", NULL};
static const tern_view_def item_view = {
    .size = sizeof(tern_view_def),
    .path = "/greet/greetings/:name",
    .summary = "The greeting kept for one name.",
    .keys = item_keys,
    .script = "return redis.call('GET', KEYS[1] .. cjson.decode(ARGV[4]).name)\n",
};

static const tern_view_def *const views[] = {&list_view, &item_view, NULL};

static const tern_plugin greet_plugin = {
    .magic = TERN_PLUGIN_MAGIC,
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
    .size = sizeof(tern_plugin),
    .name = "greet",
    .version = "1.0.0",
    .tasks = tasks,
    .views = views,
};

TERN_PLUGIN(greet_plugin)
