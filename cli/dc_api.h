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

#include <stdbool.h>

#include <jansson.h>

#include "cli.h"
#include "output.h"

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

/* GETs one record, `collection` ("/vms") + "/" + `uuid` (escaped here), into *obj. */
cli_status_t dc_get(cli_t *cli, const char *collection, const char *uuid, json_t **obj);

/* Finds the one record of `collection` that `ref` names: its uuid (read directly), or
 * the value of `name_field` ("hostname", "alias", "name") among all of them. None, or
 * several with that name, is an error naming `what` ("server") and `ref`. */
cli_status_t dc_find(cli_t *cli, const char *collection, const char *name_field, const char *what,
                     const char *ref, json_t **obj);

/* Like dc_find, but only the record's uuid (copied into uuid). */
cli_status_t dc_find_uuid(cli_t *cli, const char *collection, const char *name_field,
                          const char *what, const char *ref, char uuid[37]);

/* "k=v" (escaped) appended to *query ("&" between), *query malloc'd or NULL. */
void dc_query_add(cli_t *cli, char **query, const char *key, const char *value);

/* Creates a job of `workflow` with target `target` and `params` (borrowed). Then, with
 * `watch`, follows it to its end (the exit status says how it ended); otherwise prints
 * `what` and the job's uuid ("Creating instance web0 (UUID): job UUID"), or with -j/-o
 * the job as the API answered. */
cli_status_t dc_submit(cli_t *cli, const char *workflow, const char *target, const json_t *params,
                       bool watch, const char *what);

/* A short form of a uuid for tables: its first 8 characters, as `triton` shows them. */
void dc_cell_shortid(const json_t *row, char *buf, size_t n);

#endif /* TERN_CLI_DC_API_H */
