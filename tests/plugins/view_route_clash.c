/*
 * view_route_clash.c -- a test plugin that is wrong on purpose: its view "/jobs/:id"
 * overlaps the engine's route "/jobs/:uuid" (reserved by the test, as ternd reserves
 * every route of the API).
 */
#include "view_plugin.h"

static const tern_view_def jobs_view = {
    .size = sizeof(tern_view_def),
    .path = "/jobs/:id",
    .script = VIEW_SCRIPT,
};

static const tern_view_def *const views[] = {&jobs_view, NULL};

VIEW_PLUGIN("view_route_clash", views)
