/*
 * dc_api.h -- what the datacenter's commands (`tern server|vm|nic|network`) share: reading
 * the dc plugin's views (GET /servers, /vms, /nics, /networks, /images, ...), finding a
 * record by uuid or by name, and creating the jobs of the datacenter's workflows with
 * VMAPI's target ("/start-<vm_uuid>").
 *
 * Nothing here knows more of a record than the field a name is matched against; the
 * commands choose their columns. Every json_t * returned through an out parameter is a
 * new reference the caller owns.
 */
#ifndef TERN_CLI_DC_API_H
#define TERN_CLI_DC_API_H

#include <getopt.h>
#include <stdbool.h>

#include <jansson.h>

#include "cli.h"
#include "output.h"

/* Who owns what the CLI creates unless --owner or $TERN_OWNER_UUID says otherwise. */
#define DC_DEFAULT_OWNER "00000000-0000-0000-0000-000000000000"

/* The owner a command acts for: `given` (its --owner) when not NULL, else
 * $TERN_OWNER_UUID when set and not empty, else DC_DEFAULT_OWNER (borrowed). */
const char *dc_owner(const char *given);

/* CLI_OK unless `given` (its --owner) is NULL and $TERN_OWNER_UUID is set to something
 * that is not a uuid: then a usage error naming the variable and its value. */
cli_status_t dc_owner_check(cli_t *cli, const char *given);

/* GETs every page of the view `path` ("/vms") with `query` ("state=running", escaped,
 * or NULL) into *rows (NULL unless CLI_OK). */
cli_status_t dc_list(cli_t *cli, const char *path, const char *query, json_t **rows);

/* The option callback of a command that takes no option. */
cli_status_t dc_no_options(cli_t *cli, void *data, int c, const char *arg);

/* A list command with no option and no argument: every page of the view `path`, as a
 * table of `columns`. */
cli_status_t dc_list_command(cli_t *cli, int argc, char **argv, const char *path,
                             const output_column_t *columns);

/* A command with no option and one argument, described by `what` in its usage
 * ("SERVER (its uuid or hostname)"): *arg is argv's (borrowed) unless it fails. */
cli_status_t dc_one_argument(cli_t *cli, int argc, char **argv, const char *what, const char **arg);

/* Exactly `nargs` arguments from argv[first] on, described by names[i] in the usage
 * error when missing: args[i] is argv[first + i] (borrowed) unless it fails. */
cli_status_t dc_arguments(cli_t *cli, int argc, char **argv, int first, const char *const *names,
                          int nargs, char **args);

/* GETs one record, `collection` ("/vms") + "/" + `uuid` (escaped here), into *obj. */
cli_status_t dc_get(cli_t *cli, const char *collection, const char *uuid, json_t **obj);

/* Finds the one record of `collection` that `ref` names: its uuid (read directly, or
 * looked up in the list when the collection has no view of one record, as /networks,
 * /images and /packages), or the value of `name_field` ("hostname", "alias", "name")
 * among all of them. None, or several with that name, is an error naming `what`
 * ("server") and `ref`. */
cli_status_t dc_find(cli_t *cli, const char *collection, const char *name_field, const char *what,
                     const char *ref, json_t **obj);

/* Like dc_find, but only the record's uuid (copied into uuid). */
cli_status_t dc_find_uuid(cli_t *cli, const char *collection, const char *name_field,
                          const char *what, const char *ref, char uuid[37]);

/* "k=v" (escaped) appended to *query ("&" between), *query malloc'd or NULL. */
void dc_query_add(cli_t *cli, char **query, const char *key, const char *value);

/* Creates a job of `workflow` with target `target` and `params` (borrowed), printing
 * nothing: *job is the API's answer (a new reference; NULL unless CLI_OK), which has
 * the job's "uuid". A refusal (the admission check's included) is the API's error. */
cli_status_t dc_create_job(cli_t *cli, const char *workflow, const char *target,
                           const json_t *params, json_t **job);

/* Creates a job of `workflow` with target `target` and `params` (borrowed). Then, with
 * `watch`, follows it to its end (the exit status says how it ended); otherwise prints
 * `what` and the job's uuid ("Creating instance web0 (UUID): job UUID"), or with -j/-o
 * the job as the API answered. */
cli_status_t dc_submit(cli_t *cli, const char *workflow, const char *target, const json_t *params,
                       bool watch, const char *what);

/* The one instance `ref` names: its uuid, or its alias (among those not destroyed).
 * None, or several with that alias, is an error naming `ref`. */
cli_status_t dc_find_vm(cli_t *cli, const char *ref, json_t **vm);

/* What kind of record a job is on, for dc_submit_record: its kind in messages
 * ("instance", "an instance"), the field that names it ("alias") and the param its uuid
 * goes in ("vm_uuid"). */
typedef struct dc_record_kind {
    const char *kind;
    const char *a_kind;
    const char *name_field;
    const char *uuid_param;
} dc_record_kind_t;

/* A job of `workflow` on the record `rec` (borrowed): target "/<action>-<uuid>", params
 * `params` (borrowed; may be NULL) with kind->uuid_param set to its uuid, and "<doing>
 * <kind> <name> (<uuid>)" printed as dc_submit does. */
cli_status_t dc_submit_record(cli_t *cli, const json_t *rec, const dc_record_kind_t *kind,
                              const char *workflow, const char *action, const json_t *params,
                              bool watch, const char *doing);

/* A job of `workflow` on the instance `vm` (its record, borrowed): target
 * "/<action>-<vm_uuid>", params `params` (borrowed; may be NULL) with "vm_uuid" set,
 * and "<doing> instance <alias> (<uuid>)" printed as dc_submit does. */
cli_status_t dc_submit_vm(cli_t *cli, const json_t *vm, const char *workflow, const char *action,
                          const json_t *params, bool watch, const char *doing);

/* Waits, printing nothing, until job `uuid` ends (Ctrl-C stops the waiting, never the
 * job). CLI_OK when it succeeded; CLI_FAILED with the job's error in cli->err when it
 * failed or was canceled. */
cli_status_t dc_wait_job(cli_t *cli, const char *uuid);

/* The option callback of a command whose only option is -w/--watch (`data` is a bool *),
 * and its long options. */
cli_status_t dc_watch_option(cli_t *cli, void *data, int c, const char *arg);
extern const struct option dc_watch_long[];

/* A verb with verbs of its own (`tern vm disk add`): the first argument names one of
 * `verbs` (ended by a NULL name), which runs with argv[0] its name. No verb, or -h,
 * prints the command's help. */
typedef struct dc_subverb {
    const char *name;
    cli_status_t (*run)(cli_t *cli, int argc, char **argv);
} dc_subverb_t;

cli_status_t dc_run_subverb(cli_t *cli, int argc, char **argv, const dc_subverb_t *verbs);

/* The columns of an instance's disks, sizes in MiB: ID PCI_SLOT SIZE BOOT SNAPSHOT_SIZE
 * (`vm disks`), and those with IMAGE and PATH (`vm get`). */
extern const output_column_t dc_disk_columns[];
extern const output_column_t dc_disk_columns_wide[];

/* The columns of an instance's snapshots: NAME CREATED. */
extern const output_column_t dc_snapshot_columns[];

/* The disks of `vm` (borrowed) in a new array, ordered by PCI slot. */
json_t *dc_disks_by_slot(const json_t *vm);

/* A short form of a uuid for tables: its first 8 characters, as `triton` shows them. */
void dc_cell_shortid(const json_t *row, char *buf, size_t n);

#endif /* TERN_CLI_DC_API_H */
