/*
 * init_fails.c -- a test plugin that is wrong on purpose: its init returns an error with a message.
 */
#include <stdio.h>

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

static int init_fails_init(const tern_host *host, const json_t *config, void **state, char *err,
                           size_t errlen)
{
    (void)host;
    (void)config;
    (void)state;
    snprintf(err, errlen, "cannot reach the inventory at %s", "/nonexistent/dc.json");
    return -1;
}

static const tern_plugin plugin = {
    .magic = TERN_PLUGIN_MAGIC,
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
    .size = sizeof(tern_plugin),
    .name = "init_fails",
    .version = "0.0.1",
    .init = init_fails_init,
    .tasks = tasks,
};

TERN_PLUGIN(plugin)
