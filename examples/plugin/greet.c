/*
 * greet.c -- an out-of-tree tern plugin: one task, greet.hello, that answers after a
 * timer with a greeting built from its arguments and the job's target. It shows the
 * whole contract of include/tern/task.h: the descriptor, an argument schema, a
 * non-retryable code, an asynchronous start, a cancel hook that needs nothing because
 * host timers are stopped by the engine, and job state.
 */
#include <stdio.h>

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

static const tern_task_def *const tasks[] = {&hello_def, NULL};

static const tern_plugin greet_plugin = {
    .magic = TERN_PLUGIN_MAGIC,
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
    .size = sizeof(tern_plugin),
    .name = "greet",
    .version = "1.0.0",
    .tasks = tasks,
};

TERN_PLUGIN(greet_plugin)
