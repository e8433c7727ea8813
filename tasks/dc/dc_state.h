/*
 * dc_state.h -- what the dc plugin's init builds (dc.c) and its tasks read: the
 * datacenter description and, on an agent, its server. Read-only once loaded, so
 * tasks share it without locks.
 */
#ifndef DC_STATE_H
#define DC_STATE_H

#include "datacenter.h"

typedef struct dc_state {
    datacenter_t *dc;          /* NULL when no description was configured */
    const dc_server_t *server; /* this agent's server (in dc), or NULL */
} dc_state_t;

#endif
