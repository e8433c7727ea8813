/*
 * abi_1_0.c -- a valid test plugin built as ABI 1.0 saw a task definition: its size
 * ends before the check hook. The bytes that follow in memory hold a hook that would
 * refuse every step, so a loader that read past the size would be caught.
 */
#include <stddef.h>

#include <tern/task.h>

static int refuse_all(void *state, const json_t *args, char *err, size_t errlen)
{
    (void)state;
    (void)args;
    snprintf(err, errlen, "refused by a hook the plugin never declared");
    return -1;
}

static void run_start(tern_ctx *ctx, const json_t *args)
{
    (void)args;
    tern_task_done(ctx, NULL);
}

static const tern_task_def run_task = {
    .size = (uint32_t)(offsetof(tern_task_def, cancel) + sizeof(void *)),
    .name = "run",
    .start = run_start,
    .check = refuse_all,
};

static const tern_task_def *const tasks[] = {&run_task, NULL};

static const tern_plugin plugin = {
    .magic = TERN_PLUGIN_MAGIC,
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = 0,
    .size = sizeof(tern_plugin),
    .name = "abi_1_0",
    .version = "0.0.1",
    .tasks = tasks,
};

TERN_PLUGIN(plugin)
