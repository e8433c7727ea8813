/*
 * bad_range.c -- a test plugin that is wrong on purpose: its task's args_schema
 * gives "ms" a minimum above its maximum.
 */
#include <tern/task.h>

static void run_start(tern_ctx *ctx, const json_t *args)
{
    (void)args;
    tern_task_done(ctx, NULL);
}

static const tern_task_def run_task = {
    .size = sizeof(tern_task_def),
    .name = "run",
    .args_schema =
        "{\"properties\": {\"ms\": {\"type\": \"integer\", \"minimum\": 10, \"maximum\": 5}}}",
    .start = run_start,
};

static const tern_task_def *const tasks[] = {&run_task, NULL};

static const tern_plugin plugin = {
    .magic = TERN_PLUGIN_MAGIC,
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
    .size = sizeof(tern_plugin),
    .name = "bad_range",
    .version = "0.0.1",
    .tasks = tasks,
};

TERN_PLUGIN(plugin)
