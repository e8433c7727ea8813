/* TEMPORARY stand-in of the block transfer's listener API (tasks/dc/sync/sync_listener.h).
 * Remove this directory when tasks/dc/sync/ is in the tree. */
#ifndef DC_SYNC_LISTENER_H
#define DC_SYNC_LISTENER_H

#include <stddef.h>

typedef struct sync_listener sync_listener_t;
int sync_listener_start(const char *listen_addr, const char *data_root, sync_listener_t **out,
                        char *err, size_t errlen);
unsigned sync_listener_port(const sync_listener_t *l);
void sync_listener_stop(sync_listener_t *l);

#endif
