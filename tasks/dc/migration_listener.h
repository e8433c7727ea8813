/*
 * migration_listener.h -- the agent's end of a migration's block transfer: the
 * listener a source's dc.migration_send connects to (tasks/dc/sync/), started by the
 * dc plugin's init on an agent whose configuration has "migration_listen" and stopped
 * at fini. dc.migration_recv_open answers its address.
 *
 * Errors are -1 with a message in err; the listener is owned by whoever started it.
 */
#ifndef DC_MIGRATION_LISTENER_H
#define DC_MIGRATION_LISTENER_H

#include <stddef.h>

typedef struct migration_listener migration_listener_t;

/* The fault of a "migration_listen" value ("HOST:PORT", HOST a numeric IPv4 address,
 * PORT 0 to 65535, 0 taking a free one), or NULL when it is good. The fault is a
 * literal. */
const char *migration_listen_fault(const char *addr);

/* Listens on `addr` for transfers into instances under `data_root`. 0 with *out set, or
 * -1 with err naming the address and the reason. */
int migration_listener_start(const char *addr, const char *data_root, migration_listener_t **out,
                             char *err, size_t errlen);

/* "HOST:PORT" as bound (the port the system gave when 0 was asked): owned by l. */
const char *migration_listener_addr(const migration_listener_t *l);

/* Stops listening and waits for the transfers in flight to end. NULL is nothing. */
void migration_listener_stop(migration_listener_t *l);

#endif
