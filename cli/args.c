/*
 * args.c -- option parsing for commands: getopt_long over the command's options merged
 * with the global ones; see args.h. It owns no state beyond one parse.
 */
#include "args.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"

enum { OPT_URL = 0x1000 };

const char args_global_short[] = "jo:Hh";

const struct option args_global_long[] = {
    {"url", required_argument, NULL, OPT_URL}, {"json", no_argument, NULL, 'j'},
    {"output", required_argument, NULL, 'o'},  {"no-header", no_argument, NULL, 'H'},
    {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
};

cli_status_t args_set_url(cli_t *cli, const char *url)
{
    size_t n = strlen(url);
    while (n > 0 && url[n - 1] == '/')
        n--;
    if (n == 0)
        return cli_usage(cli, "--url: empty");
    if (n >= sizeof cli->url)
        return cli_usage(cli, "--url: longer than %zu characters", sizeof cli->url - 1);
    if (strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0)
        return cli_usage(cli, "--url \"%s\": expected http://HOST:PORT or https://HOST:PORT", url);
    memcpy(cli->url, url, n);
    cli->url[n] = '\0';
    return CLI_OK;
}

bool args_global(cli_t *cli, int c, const char *arg, bool *help)
{
    switch (c) {
    case 'j':
        cli->out.json = true;
        return true;
    case 'o':
        cli->out.columns = arg;
        return true;
    case 'H':
        cli->out.no_header = true;
        return true;
    case 'h':
        *help = true;
        return true;
    case OPT_URL:
        /* A bad URL is reported by args_parse through cli->err. */
        if (args_set_url(cli, arg) != CLI_OK)
            cli->err.usage = true;
        return true;
    default:
        return false;
    }
}

cli_status_t args_uint(cli_t *cli, const char *what, const char *s, unsigned long max,
                       unsigned long *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (s[0] < '0' || s[0] > '9' || *end != '\0' || errno != 0 || v > max)
        return cli_usage(cli, "%s \"%s\": expected an integer from 0 to %lu", what, s, max);
    *out = v;
    return CLI_OK;
}

/* Names the option getopt stopped at, as the user typed it. */
static void option_name(char **argv, int c, char *buf, size_t n)
{
    if (c != 0)
        snprintf(buf, n, "-%c", c);
    else
        snprintf(buf, n, "%s", argv[optind - 1]);
}

bool args_parse(cli_t *cli, int argc, char **argv, const char *shortopts,
                const struct option *longopts, args_opt_fn on_opt, void *data, int *first,
                cli_status_t *status)
{
    size_t n_own = 0, n_global = 0;
    while (longopts != NULL && longopts[n_own].name != NULL)
        n_own++;
    while (args_global_long[n_global].name != NULL)
        n_global++;
    struct option *all = xcalloc(n_own + n_global + 1, sizeof *all);
    if (n_own > 0)
        memcpy(all, longopts, n_own * sizeof *all);
    memcpy(all + n_own, args_global_long, (n_global + 1) * sizeof *all);
    /* A leading ':' makes getopt tell a missing argument (':') from an unknown
     * option ('?'). */
    char *shorts = xasprintf(":%s%s", shortopts, args_global_short);

    bool go_on = true;
    bool help = false;
    *status = CLI_OK;
    optind = 0; /* glibc: start a fresh scan (argv may differ from the last one) */
    opterr = 0;
    int c;
    while (go_on && (c = getopt_long(argc, argv, shorts, all, NULL)) != -1) {
        char name[128];
        if (c == '?') {
            option_name(argv, optopt, name, sizeof name);
            *status = cli_usage(cli, "unknown option %s", name);
            go_on = false;
        } else if (c == ':') {
            option_name(argv, optopt, name, sizeof name);
            *status = cli_usage(cli, "option %s needs a value", name);
            go_on = false;
        } else if (args_global(cli, c, optarg, &help)) {
            if (cli->err.usage) {
                *status = CLI_USAGE;
                go_on = false;
            }
        } else if (on_opt != NULL) {
            cli_status_t st = on_opt(cli, data, c, optarg);
            if (st != CLI_OK) {
                *status = st;
                go_on = false;
            }
        }
    }
    *first = optind;
    free(shorts);
    free(all);
    if (go_on && help) {
        cli_command_help(cli->command, stdout);
        *status = CLI_OK;
        go_on = false;
    }
    return go_on;
}
