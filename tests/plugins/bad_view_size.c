/*
 * bad_view_size.c -- a test plugin that is wrong on purpose: its view definition's
 * size is smaller than any ABI's.
 */
#include "view_plugin.h"

static const tern_view_def small_view = {
    .size = 8,
    .path = "/bad_view_size",
    .script = VIEW_SCRIPT,
};

static const tern_view_def *const views[] = {&small_view, NULL};

VIEW_PLUGIN("bad_view_size", views)
