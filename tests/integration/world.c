/*
 * world.c -- the worlds of the integration test groups; see world.h.
 */
#include "world.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

/* ---- one ternd ---------------------------------------------------------------- */

void itest_world_start(itest_world_t *w, const char *id, const char *config_json,
                       const char *const *extra)
{
    itest_world_start_redis(w);
    itest_world_start_ternd(w, id, config_json, extra);
}

void itest_world_start_redis(itest_world_t *w)
{
    itest_dir_make(&w->dir);
    itest_redis_start(&w->redis, w->dir.path);
}

void itest_world_start_ternd(itest_world_t *w, const char *id, const char *config_json,
                             const char *const *extra)
{
    const char *argv[32];
    size_t n = 0;
    w->config[0] = '\0';
    if (config_json != NULL) {
        snprintf(w->config, sizeof w->config, "%s/ternd.json", w->dir.path);
        itest_write_file(w->config, config_json);
        argv[n++] = "--config";
        argv[n++] = w->config;
    }
    for (size_t i = 0; extra != NULL && extra[i] != NULL && n < 31; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    itest_ternd_start(&w->ternd, &w->redis, &w->dir, id, argv);
    snprintf(w->base, sizeof w->base, "http://127.0.0.1:%d", w->ternd.api_port);
    itest_client_open(&w->client, &w->redis);
    snprintf(w->side, sizeof w->side, "%s/side", w->dir.path);
}

void itest_world_stop(itest_world_t *w, unsigned ternd_exit_ms)
{
    itest_client_close(&w->client);
    itest_ternd_signal(&w->ternd, SIGTERM, ternd_exit_ms);
    itest_redis_stop(&w->redis, SIGTERM);
    itest_dir_remove(&w->dir);
}

void itest_world_start_api_only(itest_world_t *w, itest_ternd_t *t, const char *id,
                                const char *const *flags)
{
    const char *extra[24];
    size_t n = 0;
    extra[n++] = "--role";
    extra[n++] = "api";
    for (size_t i = 0; flags != NULL && flags[i] != NULL && n < 22; i++)
        extra[n++] = flags[i];
    extra[n] = NULL;
    itest_ternd_start(t, &w->redis, &w->dir, id, extra);
}

/* ---- a fleet of runners ------------------------------------------------------- */

void itest_fleet_world_start(itest_fleet_world_t *w)
{
    memset(w, 0, sizeof *w);
    itest_dir_make(&w->dir);
    itest_redis_start(&w->redis, w->dir.path);
    itest_client_open(&w->client, &w->redis);
    snprintf(w->side, sizeof w->side, "%s/side", w->dir.path);
}

void itest_fleet_world_stop(itest_fleet_world_t *w, unsigned runner_exit_ms)
{
    itest_fleet_stop(&w->fleet, runner_exit_ms); /* SIGCONT first, then SIGTERM, by PID */
    itest_client_close(&w->client);
    itest_redis_stop(&w->redis, SIGTERM);
    itest_dir_remove(&w->dir);
}

void itest_fleet_world_side_path(const itest_fleet_world_t *w, char *out, size_t len,
                                 const char *name)
{
    snprintf(out, len, "%s/side-%s", w->dir.path, name);
}
