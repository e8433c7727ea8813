/*
 * view_plugin.h -- what the view test plugins share: one task that does nothing and
 * the descriptor of a plugin named `name` whose views are the NULL-terminated array
 * `views_array`, so each plugin file holds only the views it is about.
 */
#ifndef TERN_TEST_VIEW_PLUGIN_H
#define TERN_TEST_VIEW_PLUGIN_H

#include <tern/task.h>

static void view_plugin_noop(tern_ctx *ctx, const json_t *args)
{
    (void)args;
    tern_task_done(ctx, NULL);
}

static const tern_task_def view_plugin_noop_def = {
    .size = sizeof(tern_task_def),
    .name = "noop",
    .start = view_plugin_noop,
};

static const tern_task_def *const view_plugin_tasks[] = {&view_plugin_noop_def, NULL};

#define VIEW_SCRIPT "return '[]'"

#define VIEW_PLUGIN(plugin_name, views_array)                                                      \
    static const tern_plugin view_plugin_desc = {                                                  \
        .magic = TERN_PLUGIN_MAGIC,                                                                \
        .abi_major = TERN_ABI_MAJOR,                                                               \
        .abi_minor = TERN_ABI_MINOR,                                                               \
        .size = sizeof(tern_plugin),                                                               \
        .name = plugin_name,                                                                       \
        .version = "0.0.1",                                                                        \
        .tasks = view_plugin_tasks,                                                                \
        .views = views_array,                                                                      \
    };                                                                                             \
    TERN_PLUGIN(view_plugin_desc)

#endif
