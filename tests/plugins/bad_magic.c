/*
 * bad_magic.c -- a test plugin that is wrong on purpose: its magic word is not TERN_PLUGIN_MAGIC.
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
    .summary = "Does nothing.",
    .start = run_start,
};

static const tern_task_def *const tasks[] = {&run_task, NULL};

static const tern_plugin plugin = {
    .magic = 0x12345678u,
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
    .size = sizeof(tern_plugin),
    .name = "bad_magic",
    .version = "0.0.1",
    .tasks = tasks,
};

TERN_PLUGIN(plugin)
