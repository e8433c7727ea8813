/*
 * store_check.c -- a valid ABI 1.1 test plugin whose task has a store-time check hook:
 * it refuses a step whose "mode" is "forbidden", naming the argument, and counts its
 * calls in the plugin state so that a test can see the hook ran with init's state.
 */
#include <string.h>

#include <tern/task.h>

static int calls;

static int plugin_init(const tern_host *host, const json_t *config, void **state, char *err,
                       size_t errlen)
{
    (void)host;
    (void)config;
    (void)err;
    (void)errlen;
    *state = &calls;
    return 0;
}

static int run_check(void *state, const json_t *args, char *err, size_t errlen)
{
    ++*(int *)state;
    const char *mode = json_string_value(json_object_get(args, "mode"));
    if (mode != NULL && strcmp(mode, "forbidden") == 0) {
        snprintf(err, errlen, "mode: \"forbidden\" is not allowed here");
        return -1;
    }
    return 0;
}

static void run_start(tern_ctx *ctx, const json_t *args)
{
    (void)args;
    tern_task_done(ctx, NULL);
}

static const tern_task_def run_task = {
    .size = sizeof(tern_task_def),
    .name = "run",
    .args_schema = "{\"properties\": {\"mode\": {\"type\": \"string\"}}}",
    .start = run_start,
    .check = run_check,
};

static const tern_task_def *const tasks[] = {&run_task, NULL};

static const tern_plugin plugin = {
    .magic = TERN_PLUGIN_MAGIC,
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
    .size = sizeof(tern_plugin),
    .name = "store_check",
    .version = "0.0.1",
    .init = plugin_init,
    .tasks = tasks,
};

TERN_PLUGIN(plugin)
