/*
 * no_tasks.c -- a test plugin that is wrong on purpose: its task table is NULL.
 */
#include <tern/task.h>

static const tern_plugin plugin = {
    .magic = TERN_PLUGIN_MAGIC,
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
    .size = sizeof(tern_plugin),
    .name = "no_tasks",
    .version = "0.0.1",
    .tasks = NULL,
};

TERN_PLUGIN(plugin)
