/*
 * dup_task.c -- a test plugin that is wrong on purpose: two tasks are both named "run".
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
    .start = run_start,
};

static const tern_task_def other_task = {
    .size = sizeof(tern_task_def),
    .name = "other",
    .start = run_start,
};

static const tern_task_def run_again_task = {
    .size = sizeof(tern_task_def),
    .name = "run",
    .start = run_start,
};

static const tern_task_def *const tasks[] = {&run_task, &other_task, &run_again_task, NULL};

static const tern_plugin plugin = {
    .magic = TERN_PLUGIN_MAGIC,
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
    .size = sizeof(tern_plugin),
    .name = "dup_task",
    .version = "0.0.1",
    .tasks = tasks,
};

TERN_PLUGIN(plugin)
