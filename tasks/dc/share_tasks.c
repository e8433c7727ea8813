/*
 * share_tasks.c -- the control-plane tasks of the share states (docs/VOLUMES.md "Share
 * states"), each one Lua script (tasks/dc/lua/):
 *
 *   dc.share_watch_check  admission of volume-share-watch: params {server_uuid} only,
 *                         a server of the inventory, target /volume-share-watch-<server>
 *   dc.share_states       {server_uuid, probe} -> {restart, remount} (the step `apply`),
 *                         {server_uuid, started, remounted} -> {running, remounted}
 *                         (the step `settle`): share_states.lua
 *
 * dc.share_states is given the time now with milliseconds ("now"), which every time it
 * writes (share_probed_at, error_since, remount_requested_at, remounted_at) is: two
 * ticks within one second stay ordered; and the description's share_watch_every_s
 * ("every_s"), which it keeps for the views (share_state_shown).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dc_state.h"
#include "dc_tasks.h"
#include "inventory_script.h"
#include "lua_scripts.h"

/* Retrying does not help these: the request must change first. */
static const char *const fatal_codes[] = {"InvalidArgument", "ResourceNotFound", NULL};

static void now_iso_ms(char *out, size_t outlen)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char secs[32];
    strftime(secs, sizeof secs, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, outlen, "%s.%03ldZ", secs, ts.tv_nsec / 1000000L);
}

static void share_states_start(tern_ctx *ctx, const json_t *args)
{
    json_t *fields = json_deep_copy(args);
    if (fields == NULL) {
        tern_task_fail(ctx, "OutOfMemory", "%s: out of memory", tern_step_name(ctx));
        return;
    }
    char now[48];
    now_iso_ms(now, sizeof now);
    json_object_set_new(fields, "now", json_string(now));
    /* The watch's period, which the views need to tell a stale probe (the settings
     * are the description's, which only the plugin reads). */
    const dc_state_t *s = tern_plugin_state(ctx);
    if (s != NULL && s->dc != NULL)
        json_object_set_new(fields, "every_s",
                            json_integer((json_int_t)s->dc->set.share_watch_every_s));
    dc_script_run(ctx, dc_lua_share_states, fields, false, NULL);
    json_decref(fields);
}

static void share_watch_check_start(tern_ctx *ctx, const json_t *args)
{
    json_t *fields = json_deep_copy(args);
    if (fields == NULL) {
        tern_task_fail(ctx, "OutOfMemory", "%s: out of memory", tern_step_name(ctx));
        return;
    }
    if (json_object_get(fields, "target") == NULL) {
        const char *target = tern_job_target(ctx);
        json_object_set_new(fields, "target", target != NULL ? json_string(target) : json_null());
    }
    dc_script_run(ctx, dc_lua_share_watch_check, fields, true, NULL);
    json_decref(fields);
}

/* Values are checked by the scripts, which name the JSON path of a bad one. */
#define ANY_T "{\"type\": \"any\"}"

const tern_task_def dc_share_states_task = {
    .size = sizeof(tern_task_def),
    .name = "share_states",
    .summary = "A server's probe applied to its volumes' share states (answers the shares to "
               "restart and consumers to remount), or what a restart started recorded.",
    .args_schema = "{\"required\": [\"server_uuid\"], \"properties\": {\"server_uuid\": " ANY_T
                   ", \"probe\": " ANY_T ", \"started\": " ANY_T ", \"remounted\": " ANY_T
                   "}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = share_states_start,
};

const tern_task_def dc_share_watch_check_task = {
    .size = sizeof(tern_task_def),
    .name = "share_watch_check",
    .summary = "Admission of volume-share-watch: its one param server_uuid, a known server, "
               "and the target.",
    .args_schema = "{\"required\": [\"params\"], \"properties\": {\"params\": " ANY_T
                   ", \"target\": {\"type\": \"string\"}}, \"additional\": false}",
    .fatal_codes = fatal_codes,
    .start = share_watch_check_start,
};
