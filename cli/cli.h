/*
 * cli.h -- `tern`, the command-line client of ternd's HTTP API: what every command file
 * shares.
 *
 * The client is a plain libcurl program: one blocking request at a time (client.h), a
 * long-lived streaming request for `tern job watch` (watch.c). It never talks to Redis
 * and links nothing of the engine but its pure validation code (workflow.c and its
 * helpers), which `tern workflow validate` runs locally.
 *
 * Commands are "noun verb" pairs (`tern job create`), each a cli_command_t in the table
 * of its noun's file (cmd_workflow.c, cmd_job.c, cmd_schedule.c, cmd_status.c; the datacenter's in
 * cmd_server.c, cmd_vm.c, cmd_disk.c, cmd_snapshot.c, cmd_nic.c and cmd_network.c, over
 * dc_api.c; its volumes' in cmd_volume.c and cmd_volume_snapshot.c, over volume_api.c). A
 * command parses its own options with cli_options() (args.c), which also accepts the global ones
 * anywhere on the line, does its work and returns a cli_status_t, which main() returns as the
 * exit status. Nothing but main() exits.
 *
 * Errors are values: a failing command fills cli->err and returns the status; main
 * prints the message once, as "tern: <code>: <message>" for an API error. A command
 * that handles several items (several files) may print errors as it goes with
 * cli_error_print().
 */
#ifndef TERN_CLI_H
#define TERN_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "output.h"

/* Exit statuses scripts can rely on (also in `tern --help` and docs/CLI.md). */
typedef enum cli_status {
    CLI_OK = 0,            /* success; for watch: the job succeeded */
    CLI_FAILED = 1,        /* the job failed or was canceled (watch); a file is invalid
                              (workflow validate) */
    CLI_USAGE = 2,         /* bad command line, unreadable file, bad -p/-f value */
    CLI_API = 3,           /* the API answered with an error (4xx/5xx) */
    CLI_UNREACHABLE = 4,   /* no answer from the API: refused, timed out, not HTTP */
    CLI_INTERRUPTED = 130, /* Ctrl-C (128 + SIGINT); a watched job goes on */
} cli_status_t;

/* What went wrong, printed by main(). `code` is the API's error code
 * ("ResourceNotFound") or empty for the CLI's own errors. */
typedef struct cli_error {
    char code[64];
    char message[1024];
    bool usage; /* also print "Try 'tern <cmd> --help'." */
} cli_error_t;

typedef struct client client_t;

typedef struct cli {
    char url[512];                     /* --url, TERN_URL or the default, without a trailing '/' */
    const char *token;                 /* TERN_TOKEN (borrowed from the environment) or NULL */
    const char *ca_file;               /* TERN_CACERT (borrowed from the environment) or NULL */
    output_opts_t out;                 /* -j, -o, -H */
    client_t *client;                  /* made by cli_client() on first use; freed by main */
    const char *cmd;                   /* "job create", for messages and help */
    const struct cli_command *command; /* the command running, for its help */
    cli_error_t err;
} cli_t;

/* One command: `tern <noun> <verb> ...`, or `tern <noun> ...` when verb is NULL. `run`
 * gets argv with argv[0] the verb (or the noun) and returns the exit status. */
typedef struct cli_command {
    const char *noun;
    const char *verb;
    cli_status_t (*run)(cli_t *cli, int argc, char **argv);
    const char *usage;   /* "job create WORKFLOW [-p KEY=VALUE]... [options]" */
    const char *summary; /* one line for `tern --help` */
    const char *help;    /* the options and what the command prints */
} cli_command_t;

/* The command tables, each ended by an entry whose noun is NULL. */
extern const cli_command_t cmd_workflow_commands[];
extern const cli_command_t cmd_job_commands[];
extern const cli_command_t cmd_status_commands[];
extern const cli_command_t cmd_get_commands[];
extern const cli_command_t cmd_schedule_commands[];
extern const cli_command_t cmd_server_commands[];
extern const cli_command_t cmd_vm_commands[];
extern const cli_command_t cmd_disk_commands[];
extern const cli_command_t cmd_snapshot_commands[];
extern const cli_command_t cmd_nic_commands[];
extern const cli_command_t cmd_network_commands[];
extern const cli_command_t cmd_volume_commands[];
extern const cli_command_t cmd_volume_snapshot_commands[];
extern const cli_command_t cmd_migration_commands[];

/* The API client for cli->url and cli->token, made on first use (borrowed). */
client_t *cli_client(cli_t *cli);

/* Records an error for main to print and returns `status`. */
cli_status_t cli_fail(cli_t *cli, cli_status_t status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Records a usage error ("missing WORKFLOW") and returns CLI_USAGE. */
cli_status_t cli_usage(cli_t *cli, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints cli->err to stderr now (if set) and clears it. */
void cli_error_print(cli_t *cli);

/* Prints the help of a command to `out`. */
void cli_command_help(const cli_command_t *c, FILE *out);

#define CLI_FILE_MAX (16u * 1024u * 1024u) /* bytes read from a file at most */
#define CLI_PAGE_MAX 1000ul                /* items asked for per page of a list */

/* Reads a whole file ("-": standard input) into *buf (malloc'd, NUL-terminated; caller
 * frees) and *len. Returns 0, or -1 with "FILE: reason" in err. */
int cli_read_file(const char *path, char **buf, size_t *len, char *err, size_t errlen);

/* GETs a paged list: `path` ("/jobs") with `query` ("execution=failed", already
 * escaped, or NULL), following x-tern-next-marker from `marker` (or the start) until
 * `limit` items (0: all) or the end. On CLI_OK, *rows is a new array and *next_marker
 * the marker of what is left (malloc'd) or NULL; otherwise cli->err is filled. */
cli_status_t cli_get_list(cli_t *cli, const char *path, const char *query, unsigned long limit,
                          const char *marker, json_t **rows, char **next_marker);

#endif /* TERN_CLI_H */
