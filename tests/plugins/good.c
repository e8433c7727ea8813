/*
 * good.c -- a valid test plugin for test_plugin_loader.c: two tasks, one with an
 * args_schema and fatal codes, an init that keeps a counter as its state and a fini
 * that frees it.
 */
#include <stdlib.h>

#include <tern/task.h>

static void echo_start(tern_ctx *ctx, const json_t *args)
{
    tern_task_done(ctx, json_deep_copy(args));
}

static void noop_start(tern_ctx *ctx, const json_t *args)
{
    (void)args;
    tern_task_done(ctx, NULL);
}

static const char *const echo_fatal[] = {"BadMessage", "Forbidden", NULL};

static const tern_task_def echo_task = {
    .size = sizeof(tern_task_def),
    .name = "echo",
    .summary = "Returns its arguments.",
    .args_schema = "{\"required\": [\"msg\"], \"properties\": {\"msg\": {\"type\": \"string\"},"
                   " \"n\": {\"type\": [\"integer\", \"null\"]}}, \"additional\": false}",
    .fatal_codes = echo_fatal,
    .start = echo_start,
};

static const tern_task_def noop_task = {
    .size = sizeof(tern_task_def),
    .name = "noop",
    .summary = "Does nothing.",
    .start = noop_start,
};

static const tern_task_def *const tasks[] = {&echo_task, &noop_task, NULL};

static int good_init(const tern_host *host, const json_t *config, void **state, char *err,
                     size_t errlen)
{
    (void)host;
    (void)err;
    (void)errlen;
    int *n = malloc(sizeof *n);
    if (n == NULL)
        return -1;
    *n = (int)json_integer_value(json_object_get(config, "n"));
    *state = n;
    return 0;
}

static void good_fini(void *state)
{
    free(state);
}

static const tern_plugin plugin = {
    .magic = TERN_PLUGIN_MAGIC,
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
    .size = sizeof(tern_plugin),
    .name = "good",
    .version = "1.2.3",
    .init = good_init,
    .fini = good_fini,
    .tasks = tasks,
};

TERN_PLUGIN(plugin)
