/*
 * views_good.c -- a valid test plugin with two views: a list with a query parameter
 * and an item by a path parameter, which streams (ABI 1.3). view_clash.c overlaps the
 * second.
 */
#include "view_plugin.h"

static const char *const list_params[] = {"kind", NULL};
static const char *const list_keys[] = {"things", NULL};

static const tern_view_def list_view = {
    .size = sizeof(tern_view_def),
    .path = "/things",
    .summary = "Lists the things.",
    .params = list_params,
    .keys = list_keys,
    .script = VIEW_SCRIPT,
};

static const tern_view_def item_view = {
    .size = sizeof(tern_view_def),
    .flags = TERN_VIEW_STREAM,
    .path = "/things/:id",
    .summary = "One thing.",
    .script = "return '{}'",
};

static const tern_view_def *const views[] = {&list_view, &item_view, NULL};

VIEW_PLUGIN("views_good", views)
