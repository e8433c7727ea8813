/*
 * core.c -- the "core" task family: the small building blocks every workflow can use.
 *
 *   core.noop       {}                                  -> {}
 *   core.sleep      {"ms": N}                           -> {"slept_ms": N}
 *   core.fail       {"code": "X", "message": "..."}     -> fails with that code
 *   core.set_state  {"values": {"k": v, ...}}           -> the values, also set in the
 *                                                          job's state
 *   core.log        {"msg": "...", "level": "info"}     -> {"msg": "..."}
 *
 * The plugin holds no state of its own and no handle: the sleep timer comes from the
 * host, which stops it if the attempt is cancelled, so no cancel hook is needed.
 * Arguments are checked again at run time (templates are only checked after
 * expansion); bad ones fail with InvalidArgument, the one code that is never retried.
 */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include <tern/task.h>

static const char *const fatal_codes[] = {"InvalidArgument", NULL};

/* ---- core.noop ------------------------------------------------------------------------ */

static void noop_start(tern_ctx *ctx, const json_t *args)
{
    (void)args;
    tern_task_done(ctx, json_object());
}

static const tern_task_def noop_task = {
    .size = sizeof(tern_task_def),
    .name = "noop",
    .summary = "Does nothing and succeeds with an empty result.",
    .args_schema = "{\"required\": [], \"properties\": {}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = noop_start,
};

/* ---- core.sleep ----------------------------------------------------------------------- */

/* The longest sleep: one day (in ms). A sleep holds a runner slot all along and starts
 * over when its runner dies, so a longer pause belongs in exec_after or a re-queue,
 * which hold no slot; a day still covers waiting out a maintenance window. */
#define SLEEP_MAX_MS      86400000
#define SLEEP_MAX_MS_TEXT "86400000"

static void on_sleep_over(tern_ctx *ctx, void *data)
{
    json_int_t ms = (json_int_t)(uintptr_t)data;
    tern_task_done(ctx, json_pack("{s:I}", "slept_ms", ms));
}

static void sleep_start(tern_ctx *ctx, const json_t *args)
{
    json_t *ms = json_object_get(args, "ms");
    if (!json_is_integer(ms) || json_integer_value(ms) < 0 ||
        json_integer_value(ms) > SLEEP_MAX_MS) {
        tern_task_fail(ctx, "InvalidArgument", "core.sleep: \"ms\" must be an integer from 0 to %d",
                       SLEEP_MAX_MS);
        return;
    }
    json_int_t n = json_integer_value(ms);
    int id = tern_timer_start(ctx, (uint64_t)n, on_sleep_over, (void *)(uintptr_t)n);
    if (id < 0)
        tern_task_fail(ctx, "TimerError", "core.sleep: cannot start a timer (%d)", id);
}

static const tern_task_def sleep_task = {
    .size = sizeof(tern_task_def),
    .name = "sleep",
    .summary = "Waits for \"ms\" milliseconds, then succeeds.",
    .args_schema = "{\"required\": [\"ms\"], \"properties\": {\"ms\": {\"type\": \"integer\","
                   " \"minimum\": 0, \"maximum\": " SLEEP_MAX_MS_TEXT "}}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = sleep_start,
};

/* ---- core.fail ------------------------------------------------------------------------ */

static void fail_start(tern_ctx *ctx, const json_t *args)
{
    json_t *code = json_object_get(args, "code");
    json_t *message = json_object_get(args, "message");
    if ((code != NULL && !json_is_string(code)) || (message != NULL && !json_is_string(message))) {
        tern_task_fail(ctx, "InvalidArgument", "core.fail: \"code\" and \"message\" are strings");
        return;
    }
    const char *c = code != NULL ? json_string_value(code) : "";
    tern_task_fail(ctx, c[0] != '\0' ? c : "TaskFailed", "%s",
                   message != NULL ? json_string_value(message) : "core.fail was asked to fail");
}

static const tern_task_def fail_task = {
    .size = sizeof(tern_task_def),
    .name = "fail",
    .summary = "Fails with the given error code and message.",
    .args_schema = "{\"required\": [], \"properties\": {\"code\": {\"type\": \"string\"},"
                   " \"message\": {\"type\": \"string\"}}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = fail_start,
};

/* ---- core.set_state ------------------------------------------------------------------- */

static void set_state_start(tern_ctx *ctx, const json_t *args)
{
    json_t *values = json_object_get(args, "values");
    if (!json_is_object(values)) {
        tern_task_fail(ctx, "InvalidArgument", "core.set_state: \"values\" must be an object");
        return;
    }
    const char *key;
    json_t *value;
    json_object_foreach(values, key, value)
    {
        /* tern_state_set steals its value: hand it a copy that outlives the args. */
        if (tern_state_set(ctx, key, json_deep_copy(value)) != 0) {
            tern_task_fail(ctx, "InvalidArgument",
                           "core.set_state: state key \"%.140s\" is not [A-Za-z0-9_.-]{1,128}",
                           key);
            return;
        }
    }
    tern_task_done(ctx, json_deep_copy(values));
}

static const tern_task_def set_state_task = {
    .size = sizeof(tern_task_def),
    .name = "set_state",
    .summary = "Sets values in the job's state (${state.<key>} in later steps).",
    .args_schema = "{\"required\": [\"values\"], \"properties\": {\"values\": {\"type\":"
                   " \"object\"}}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = set_state_start,
};

/* ---- core.log ------------------------------------------------------------------------- */

static int level_from_name(const char *name)
{
    static const struct {
        const char *name;
        int level;
    } levels[] = {
        {"trace", TERN_LOG_TRACE}, {"debug", TERN_LOG_DEBUG}, {"info", TERN_LOG_INFO},
        {"warn", TERN_LOG_WARN},   {"error", TERN_LOG_ERROR}, {"fatal", TERN_LOG_FATAL},
    };
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        if (strcasecmp(name, levels[i].name) == 0)
            return levels[i].level;
    }
    return -1;
}

static void log_start(tern_ctx *ctx, const json_t *args)
{
    json_t *msg = json_object_get(args, "msg");
    json_t *level = json_object_get(args, "level");
    if (!json_is_string(msg)) {
        tern_task_fail(ctx, "InvalidArgument", "core.log: \"msg\" must be a string");
        return;
    }
    int lvl = TERN_LOG_INFO;
    if (level != NULL) {
        lvl = json_is_string(level) ? level_from_name(json_string_value(level)) : -1;
        if (lvl < 0) {
            tern_task_fail(ctx, "InvalidArgument",
                           "core.log: \"level\" must be one of trace, debug, info, warn, error,"
                           " fatal");
            return;
        }
    }
    tern_log(ctx, lvl, "%s", json_string_value(msg));
    tern_task_done(ctx, json_pack("{s:O}", "msg", msg));
}

static const tern_task_def log_task = {
    .size = sizeof(tern_task_def),
    .name = "log",
    .summary = "Writes \"msg\" to the engine's log at \"level\" (default info).",
    .args_schema = "{\"required\": [\"msg\"], \"properties\": {\"msg\": {\"type\": \"string\"},"
                   " \"level\": {\"type\": \"string\"}}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = log_start,
};

/* ---- the plugin ----------------------------------------------------------------------- */

static const tern_task_def *const core_tasks[] = {
    &noop_task, &sleep_task, &fail_task, &set_state_task, &log_task, NULL,
};

static const tern_plugin core_plugin = {
    .magic = TERN_PLUGIN_MAGIC,
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
    .size = sizeof(tern_plugin),
    .name = "core",
    .version = "1.0.0",
    .tasks = core_tasks,
};

TERN_PLUGIN(core_plugin)
