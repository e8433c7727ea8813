/*
 * missing_symbol.c -- a test plugin that is wrong on purpose: it calls a function that no library
 * defines, so dlopen(RTLD_NOW) fails.
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

/* Defined nowhere: the link of a shared module allows it, RTLD_NOW does not. */
extern int tern_test_undefined_function(void);

static int missing_symbol_init(const tern_host *host, const json_t *config, void **state, char *err,
                               size_t errlen)
{
    (void)host;
    (void)config;
    (void)state;
    (void)err;
    (void)errlen;
    return tern_test_undefined_function();
}

static const tern_plugin plugin = {
    .magic = TERN_PLUGIN_MAGIC,
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
    .size = sizeof(tern_plugin),
    .name = "missing_symbol",
    .version = "0.0.1",
    .init = missing_symbol_init,
    .tasks = tasks,
};

TERN_PLUGIN(plugin)
