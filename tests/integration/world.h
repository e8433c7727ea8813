/*
 * world.h -- the worlds the integration test groups run against, each started by a
 * group_setup (or a setup) and stopped by the matching teardown:
 *
 *   itest_world_t        a private directory, a redis-server, one ternd (runner and
 *                        API) and a client: most groups;
 *   itest_fleet_world_t  a private directory, a redis-server and a client, and the
 *                        runners the current test starts (a fleet): groups that kill,
 *                        stop and restart runners.
 *
 * A world's stop ends, by PID, every process its start began (see harness.h).
 */
#ifndef TERN_ITEST_WORLD_H
#define TERN_ITEST_WORLD_H

#include "harness.h"

/* The world most test groups run against: a private directory, a redis-server, one
 * ternd (runner and API) and a client. */
typedef struct itest_world {
    itest_dir_t dir;
    itest_redis_t redis;
    itest_ternd_t ternd;
    itest_client_t client;
    char side[320];   /* the itest plugin's side channel file: <dir>/side */
    char config[320]; /* <dir>/ternd.json when the group gave a config, else "" */
    char base[64];    /* the HTTP API: "http://127.0.0.1:<port>" */
} itest_world_t;

/* For a group_setup: makes the directory, starts redis-server, then ternd `id` with
 * `config_json` (when not NULL) written to w->config and given as --config ahead of
 * the NULL-terminated `extra` flags (may be NULL), and opens the client. */
void itest_world_start(itest_world_t *w, const char *id, const char *config_json,
                       const char *const *extra);
/* The two halves of itest_world_start, for a group that prepares redis-server or the
 * directory (an ACL user, a token file) before ternd starts: the directory and
 * redis-server; then ternd, the client and the side channel's path. */
void itest_world_start_redis(itest_world_t *w);
void itest_world_start_ternd(itest_world_t *w, const char *id, const char *config_json,
                             const char *const *extra);
/* Starts `t`, a ternd with the API role only, with id `id` against the world's
 * redis-server and directory, and the NULL-terminated `flags` (may be NULL). The
 * caller stops it. */
void itest_world_start_api_only(itest_world_t *w, itest_ternd_t *t, const char *id,
                                const char *const *flags);
/* For a group_teardown: closes the client, stops ternd with SIGTERM (failing the test
 * unless it exits within `ternd_exit_ms`) and redis-server, and removes the directory. */
void itest_world_stop(itest_world_t *w, unsigned ternd_exit_ms);

/* A world whose runners each test starts, in w->fleet (itest_fleet_start with
 * &w->redis and &w->dir); a test's teardown stops them with itest_fleet_stop. */
typedef struct itest_fleet_world {
    itest_dir_t dir;
    itest_redis_t redis;
    itest_client_t client;
    itest_fleet_t fleet; /* the runners of the current test */
    char side[320];      /* the itest plugin's side channel file: <dir>/side */
} itest_fleet_world_t;

/* Zeroes *w, makes the directory, starts redis-server and opens the client. */
void itest_fleet_world_start(itest_fleet_world_t *w);
/* Stops the runners still in the fleet (waiting at most `runner_exit_ms` for each),
 * closes the client, stops redis-server and removes the directory. */
void itest_fleet_world_stop(itest_fleet_world_t *w, unsigned runner_exit_ms);
/* The path of a side channel of the test's own, "<dir>/side-<name>", into out: counts
 * never mix across the tests of a group. */
void itest_fleet_world_side_path(const itest_fleet_world_t *w, char *out, size_t len,
                                 const char *name);

#endif /* TERN_ITEST_WORLD_H */
