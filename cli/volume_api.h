/*
 * volume_api.h -- what the `tern volume` commands share: their options, the owner they
 * act for, finding the volume a VOL names, and creating the jobs of the volume
 * workflows.
 *
 * Every volume command acts for one owner: --owner, else $TERN_OWNER_UUID, else the
 * nil uuid (as `tern vm create`). A VOL is resolved among that owner's volumes
 * (volume_ref.h); a job is created with the target "/<workflow>-<volume_uuid>" and the
 * params "volume_uuid" and "owner_uuid" set, which the volume workflows' admission
 * checks require. Every json_t * returned through an out parameter is a new reference
 * the caller owns.
 */
#ifndef TERN_CLI_VOLUME_API_H
#define TERN_CLI_VOLUME_API_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "cli.h"
#include "output.h"

/* The options of every volume command; each command's long options say which it
 * takes. */
typedef struct volume_opts {
    const char *owner;     /* --owner (a uuid), or NULL */
    const char *name;      /* create -n NAME */
    const char *size;      /* create -s SIZE as given, or NULL */
    uint64_t size_mib;     /* and what it says (volume_size.h), checked as it is read */
    const char *state;     /* list --state */
    const char *name_glob; /* list --name */
    json_t *networks;      /* create -N NETWORK..., the words given (ours) */
    json_t *tags;          /* create --tag K=V..., an object (ours) */
    bool watch, force;
} volume_opts_t;

/* The long options' values for the volume commands (short ones are their letters). */
enum {
    VOLUME_OPT_OWNER = 0x4200,
    VOLUME_OPT_TAG,
    VOLUME_OPT_STATE,
    VOLUME_OPT_NAME_GLOB,
};

/* The options of a command that takes only --owner, and of one that starts a job on a
 * volume (--owner, -w/--watch). */
extern const struct option volume_owner_long[];
extern const struct option volume_job_long[];

void volume_opts_dispose(volume_opts_t *o);

/* Parses a volume command's options (`shortopts`, `longopts`) and exactly `nargs`
 * arguments, named in names[] for "missing ..." ("VOL (its name, uuid or uuid
 * prefix)"), into args[] (borrowed from argv). */
cli_status_t volume_parse(cli_t *cli, int argc, char **argv, const char *shortopts,
                          const struct option *longopts, const char *const *names, int nargs,
                          volume_opts_t *o, char **args);

/* The owner the command acts for (borrowed from o, the environment or a constant). */
const char *volume_owner(const volume_opts_t *o);

/* The volume `ref` names among `owner`'s: by uuid (GET /volumes/:uuid?owner_uuid=),
 * else by name or uuid prefix among GET /volumes?owner_uuid=. None is VolumeNotFound,
 * several AmbiguousName (exit 3), each naming ref. */
cli_status_t volume_find(cli_t *cli, const char *owner, const char *ref, json_t **vol);

/* A job of `workflow` on the volume `vol` (its record, borrowed): target
 * "/<workflow>-<uuid>", params `params` (borrowed; may be NULL) with "volume_uuid" and
 * "owner_uuid" set; "<doing> volume <name> (<uuid>)" printed as dc_submit does, or the
 * job followed to its end with `watch`. */
cli_status_t volume_submit(cli_t *cli, const json_t *vol, const char *owner, const char *workflow,
                           const json_t *params, bool watch, const char *doing);

/* The column of a volume's size in GiB ("10G"), for tables. */
/* volume_submit with the one param {key: value} (both borrowed). */
cli_status_t volume_submit_param(cli_t *cli, const json_t *vol, const char *owner,
                                 const char *workflow, const char *key, const char *value,
                                 bool watch, const char *doing);

void volume_cell_size(const json_t *row, char *buf, size_t n);

#endif /* TERN_CLI_VOLUME_API_H */
