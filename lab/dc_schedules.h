/*
 * dc_schedules.h -- the datacenter's recurring work that tern-lab sets up through the
 * control's API (docs/LAB.md "Schedules and the start reconcile"):
 *
 *   net-reconcile@<hostname>   workflow net-reconcile, every net_reconcile_every_s
 *   share-watch@<hostname>     workflow volume-share-watch, every share_watch_every_s
 *
 * one of each per server, params {server_uuid}, target /<workflow>-<server_uuid>,
 * overlap skip; and, at each agent's start, one net-reconcile job due after a delay
 * drawn in net_reconcile_start_delay_s (start_delay.h).
 *
 * Each function says what it did or why it failed on stdout/stderr and returns 0 or -1.
 */
#ifndef LAB_DC_SCHEDULES_H
#define LAB_DC_SCHEDULES_H

#include "datacenter.h"
#include "start_delay.h"

/* The API of a lab's control: its port on 127.0.0.1 and the token (NULL: none). */
typedef struct lab_api {
    unsigned port;
    const char *token;
} lab_api_t;

/* Installs the schedules of every server of dc, by name: one of that name with the
 * same definition is kept; one with another (an interval changed in the description)
 * is deleted and made again, as are copies of one name. A schedule whose workflow is
 * not stored is not made (said on stdout): the schedules of volume-share-watch wait
 * for a control that has it. */
int dc_schedules_install(const lab_api_t *api, const datacenter_t *dc);

/* Creates server's start reconcile: a net-reconcile job whose exec_after is now plus a
 * delay drawn from `rand` in dc's net_reconcile_start_delay_s. A job of that server
 * already waiting (409 Conflict) is kept. */
int dc_start_reconcile(const lab_api_t *api, const datacenter_t *dc, const dc_server_t *server,
                       start_delay_rand_fn rand, void *rand_arg);

#endif
