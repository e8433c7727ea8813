/*
 * args.h -- the options of one command: its own plus the global ones, anywhere on the
 * line.
 *
 * Global options, accepted before the noun and by every command:
 *   --url URL          the API (default: TERN_URL, else http://127.0.0.1:8080)
 *   -j, --json         print the API's JSON instead of a table
 *   -o, --output COLS  choose the columns (comma separated names or JSON paths)
 *   -H, --no-header    no header line in tables
 *   -h, --help         print the command's help and exit 0
 */
#ifndef TERN_CLI_ARGS_H
#define TERN_CLI_ARGS_H

#include <getopt.h>
#include <stdbool.h>

#include "cli.h"

/* Called for each of the command's own options: `c` is getopt's value (the short
 * letter, or the `val` of a long option) and `arg` its argument or NULL. Returns
 * CLI_OK or a usage error made with cli_usage(). */
typedef cli_status_t (*args_opt_fn)(cli_t *cli, void *data, int c, const char *arg);

/* Parses argv (argv[0] is the verb) with the command's short options `shortopts`
 * (getopt syntax, may be "") and long options `longopts` (ended by a zero entry, may be
 * NULL), plus the global ones. Positional arguments end up in argv[*first..argc-1]
 * (getopt moves them to the end; "--" ends the options).
 *
 * Returns true when the command should go on. Returns false with *status set when it
 * should stop: CLI_OK after printing its help, CLI_USAGE for a bad option, or what
 * on_opt returned. */
bool args_parse(cli_t *cli, int argc, char **argv, const char *shortopts,
                const struct option *longopts, args_opt_fn on_opt, void *data, int *first,
                cli_status_t *status);

/* Handles one global option `c` (see above) with its argument. Returns true when `c`
 * was one; *help is set for -h/--help. For main(), which reads the global options that
 * come before the noun. */
bool args_global(cli_t *cli, int c, const char *arg, bool *help);

/* The getopt strings of the global options, for main(). */
extern const char args_global_short[];
extern const struct option args_global_long[];

/* Sets cli->url from `url`, dropping trailing slashes. Returns CLI_OK, or a usage error
 * when it is empty, too long or not http:// or https://. */
cli_status_t args_set_url(cli_t *cli, const char *url);

/* Parses a non-negative decimal integer option value into *out (at most `max`).
 * Returns CLI_OK or a usage error naming `what`. */
cli_status_t args_uint(cli_t *cli, const char *what, const char *s, unsigned long max,
                       unsigned long *out);

#endif /* TERN_CLI_ARGS_H */
