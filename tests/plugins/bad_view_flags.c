/*
 * bad_view_flags.c -- a test plugin that is wrong on purpose: its view sets a flag bit
 * the engine does not know.
 */
#include "view_plugin.h"

static const tern_view_def odd_view = {
    .size = sizeof(tern_view_def),
    .flags = 0x6,
    .path = "/bad_view_flags",
    .script = VIEW_SCRIPT,
};

static const tern_view_def *const views[] = {&odd_view, NULL};

VIEW_PLUGIN("bad_view_flags", views)
