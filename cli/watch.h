/*
 * watch.h -- following a job until it finishes: `tern job watch` and the --watch of
 * create, resume, retry and cancel.
 *
 * The job's events come from GET /jobs/:uuid/events as server-sent events (their ids
 * let a dropped stream be resumed exactly where it stopped, with ?from=<id>); the
 * server replays the job's history first, so a watch started late still draws every
 * step, and ends the answer after the job's last "finished" event. A "finished" event
 * followed by more events belongs to a run that was retried afterwards. When the API
 * has no event stream (404 or 405 on the route), the job is polled every 500 ms
 * instead and its steps are drawn from its results; that is said once on stderr.
 *
 * Ctrl-C stops the watching, never the job.
 */
#ifndef TERN_CLI_WATCH_H
#define TERN_CLI_WATCH_H

#include <stdbool.h>

#include "cli.h"

/* Follows job `uuid`, drawing it with watch_view (or, with -j, printing each event as
 * a JSON line). Returns CLI_OK when the job succeeded, CLI_FAILED when it failed or was
 * canceled, CLI_INTERRUPTED on Ctrl-C, or the error status of a request that failed
 * (cli->err filled). `poll` skips the event stream (for proxies that buffer it). */
cli_status_t watch_job(cli_t *cli, const char *uuid, bool poll);

#endif /* TERN_CLI_WATCH_H */
