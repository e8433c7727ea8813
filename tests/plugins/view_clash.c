/*
 * view_clash.c -- a test plugin that is wrong on purpose once views_good is loaded:
 * its view "/things/list" overlaps views_good's "/things/:id".
 */
#include "view_plugin.h"

static const tern_view_def list_view = {
    .size = sizeof(tern_view_def),
    .path = "/things/list",
    .script = VIEW_SCRIPT,
};

static const tern_view_def *const views[] = {&list_view, NULL};

VIEW_PLUGIN("view_clash", views)
