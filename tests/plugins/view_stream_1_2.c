/*
 * view_stream_1_2.c -- a test plugin that is wrong on purpose: it says it was built
 * against ABI 1.2, which had no view flags, yet flags its view TERN_VIEW_STREAM.
 */
#include "view_plugin.h"

static const tern_view_def stream_view = {
    .size = sizeof(tern_view_def),
    .flags = TERN_VIEW_STREAM,
    .path = "/view_stream_1_2",
    .script = VIEW_SCRIPT,
};

static const tern_view_def *const views[] = {&stream_view, NULL};

static const tern_plugin desc = {
    .magic = TERN_PLUGIN_MAGIC,
    .abi_major = 1,
    .abi_minor = 2,
    .size = sizeof(tern_plugin),
    .name = "view_stream_1_2",
    .version = "0.0.1",
    .tasks = view_plugin_tasks,
    .views = views,
};

TERN_PLUGIN(desc)
