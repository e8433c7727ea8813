/*
 * abi_1_1.c -- a valid test plugin built as ABI 1.1 saw its descriptor: its size ends
 * before `views`. The bytes that follow in memory hold a view that would be refused
 * (its path is malformed), so a loader that read past the size would be caught.
 */
#include <stddef.h>

#include "view_plugin.h"

static const tern_view_def never_view = {
    .size = sizeof(tern_view_def),
    .path = "not a path",
    .script = VIEW_SCRIPT,
};

static const tern_view_def *const views[] = {&never_view, NULL};

static const tern_plugin plugin = {
    .magic = TERN_PLUGIN_MAGIC,
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = 1,
    .size = (uint32_t)(offsetof(tern_plugin, tasks) + sizeof(void *)),
    .name = "abi_1_1",
    .version = "0.0.1",
    .tasks = view_plugin_tasks,
    .views = views,
};

TERN_PLUGIN(plugin)
