/*
 * bad_view_path.c -- a test plugin that is wrong on purpose: its second view's path
 * has an empty segment.
 */
#include "view_plugin.h"

static const tern_view_def ok_view = {
    .size = sizeof(tern_view_def),
    .path = "/bad_view_path",
    .script = VIEW_SCRIPT,
};

static const tern_view_def bad_view = {
    .size = sizeof(tern_view_def),
    .path = "/bad_view_path//items",
    .script = VIEW_SCRIPT,
};

static const tern_view_def *const views[] = {&ok_view, &bad_view, NULL};

VIEW_PLUGIN("bad_view_path", views)
