/*
 * sync_listener.h -- the target agent's side of a migration's block transfer: a thread
 * accepting on the agent's migration_listen address, one thread per connection (at
 * most SYNC_LISTENER_MAX_CONNS at once; one more is told so and closed). A connection
 * first proves it holds the secret of the migration session the target agent opened
 * for the instance (sync_auth.h); a failed proof is logged, one line naming the peer
 * and the migration, and the connection closed before any file is touched.
 *
 * What an authenticated pass may touch, under <data_root>/<vm uuid>/ only:
 *   disks/disk<N>.img     written at offsets, punched, truncated, made, removed
 *   vm.json               the source's, keeping the target's do_not_inventory,
 *                         autoboot, nics and migration_target (temp file + rename)
 *   .migration/manifest   what the disks hold (sync_manifest.h)
 *   .migration/lock       flock'ed by the one pass of an instance at a time (a second
 *                         one is refused)
 *   export/, snapshots/   a storage instance's trees (sync_tree_xfer.h), through
 *                         .migration/tree.part and .migration/tree.link
 * and an image pass (sync_image.h) <data_root>/images/<image uuid>.img, nothing else
 * outside the instance.
 *
 * Thread-safe; no loop, no task context: the agent starts it at init and stops it at
 * fini (sync_listener_stop ends every connection and joins every thread).
 */
#ifndef DC_SYNC_LISTENER_H
#define DC_SYNC_LISTENER_H

#include <stddef.h>
#include <stdint.h>

#define SYNC_LISTENER_MAX_CONNS 16

typedef struct sync_listener sync_listener_t;

/* Log levels of the lines a listener writes (bunyan's numbers). */
enum { SYNC_LOG_INFO = 30, SYNC_LOG_WARN = 40, SYNC_LOG_ERROR = 50 };

/* Where a listener's log lines go: called from its threads, at any time until
 * sync_listener_stop returns; must be thread-safe. msg is borrowed for the call. */
typedef void (*sync_log_fn)(void *data, int level, const char *msg);

/* Starts listening on listen_addr ("HOST:PORT", PORT 0: any free one) for instances
 * under data_root. 0 and *out, or a negative errno with err naming the address. The
 * same as sync_listener_start_logged with no log function: lines are dropped. */
int sync_listener_start(const char *listen_addr, const char *data_root, sync_listener_t **out,
                        char *err, size_t errlen);

/* sync_listener_start with a log function (and its data) for refusals, failures and
 * passes done. */
int sync_listener_start_logged(const char *listen_addr, const char *data_root, sync_log_fn log,
                               void *log_data, sync_listener_t **out, char *err, size_t errlen);

/* The port it listens on (the one chosen when the address said 0). */
unsigned sync_listener_port(const sync_listener_t *l);

/* How many connections it refused for their proof since it started. */
uint64_t sync_listener_refusals(const sync_listener_t *l);

/* Stops accepting, ends every connection (what each made durable stays), joins its
 * threads and frees l. NULL is ignored. */
void sync_listener_stop(sync_listener_t *l); /* joins its threads */

#endif
