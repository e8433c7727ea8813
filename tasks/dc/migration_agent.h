/*
 * migration_agent.h -- what the agent's migration tasks share (migration_target.c,
 * migration_instance.c, migration_send.c, migration_verify.c): their arguments' ids
 * and the instance's migration directory
 *
 *   <data_root>/<vm_uuid>/.migration/              0700, the transfer's own
 *   <data_root>/<vm_uuid>/.migration/session.json  0600 {migration_uuid, secret}: what
 *                                                  the listener checks a sender against
 *
 * Nothing is owned past a call.
 */
#ifndef DC_MIGRATION_AGENT_H
#define DC_MIGRATION_AGENT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "instance_dir.h"
#include "inventory_script.h"

/* Reads the lowercase UUIDs `name` (required) of args into *out (borrowed). NULL, or
 * msg naming the argument. */
const char *migration_arg_uuid(const json_t *args, const char *name, const char **out, char *msg,
                               size_t msglen);

/* Whether the switch these args belong to resumes one that already swapped the VM
 * (optional integer arg "switch_step", the record's when the switch job started, >= 5):
 * a failed switch finished forward, whose final pass, verify and receiving side are done
 * and must not run again over a target that may already run. 1 swapped, 0 not (absent
 * or null is 0), or -1 with msg naming the argument. */
int migration_arg_swapped(const json_t *args, char *msg, size_t msglen);

/* <instance dir>/.migration into out (PATH_MAX). */
void migration_dir(const instance_paths_t *p, char *out);

/* Removes <instance dir>/.migration and all in it, never following a symlink. Absent
 * is done. 0, or -errno with err naming the file. */
int migration_dir_remove(const instance_paths_t *p, char *err, size_t errlen);

/* The migration an instance is the target of (vm.json "migration_target", borrowed
 * from vm), or NULL. A promoted target keeps it (an abort after the swap removes the
 * instance by it) while it is visible, where it is only history: see
 * migration_hidden_target_of. */
const char *migration_target_of(const json_t *vm);

/* The migration a hidden (do_not_inventory) instance is the target of, or NULL: the
 * one that owns it. A visible instance belongs to nobody's migration. */
const char *migration_hidden_target_of(const json_t *vm);

/* Asks the control for migration `mig`'s secret (migration_secret.lua: no job's args or
 * results carry it); `cb` gets the answer. 0, or -1 when the call could not be sent
 * (cb is then never called). */
int migration_secret_ask(tern_ctx *ctx, const char *mig, dc_script_answer_fn cb, void *data);

#endif
