/*
 * dup_view_param.c -- a test plugin that is wrong on purpose: its view accepts the
 * query parameter "id", which is also the name of a parameter of its path.
 */
#include "view_plugin.h"

static const char *const params[] = {"state", "id", NULL};

static const tern_view_def item_view = {
    .size = sizeof(tern_view_def),
    .path = "/dup_view_param/:id",
    .params = params,
    .script = VIEW_SCRIPT,
};

static const tern_view_def *const views[] = {&item_view, NULL};

VIEW_PLUGIN("dup_view_param", views)
