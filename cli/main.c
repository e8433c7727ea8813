/*
 * main.c -- `tern`: the environment, the global options before the noun, finding the
 * command, Ctrl-C, and the exit status. The only place the CLI exits.
 */
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "client.h"

#ifndef TERN_VERSION
#define TERN_VERSION "0"
#endif

#define DEFAULT_URL "http://127.0.0.1:8080"

static const cli_command_t *const tables[] = {
    cmd_workflow_commands,
    cmd_job_commands,
    cmd_schedule_commands,
    cmd_status_commands,
    cmd_get_commands,
    cmd_server_commands,
    cmd_vm_commands,
    cmd_disk_commands,
    cmd_snapshot_commands,
    cmd_nic_commands,
    cmd_network_commands,
    cmd_volume_commands,
    cmd_volume_snapshot_commands,
    cmd_migration_commands,
};

static void on_sigint(int sig)
{
    (void)sig;
    client_interrupt(); /* async-signal-safe: sets a flag the requests check */
}

static void global_help(FILE *out)
{
    fprintf(out, "Usage: tern [--url URL] [-j] [-o COLS] [-H] <noun> <verb> [ARGS]...\n\n"
                 "The command-line client of ternd's HTTP API.\n\nCommands:\n");
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const cli_command_t *c = tables[t]; c->noun != NULL; c++) {
            char name[64];
            snprintf(name, sizeof name, "%s%s%s", c->noun, c->verb ? " " : "",
                     c->verb ? c->verb : "");
            fprintf(out, "  %-21s %s\n", name, c->summary);
        }
    fprintf(out, "\nGlobal options (before the noun or anywhere after it):\n"
                 "  --url URL         the API (default: $TERN_URL, else " DEFAULT_URL ")\n"
                 "  -j, --json        print the API's JSON instead of a table\n"
                 "  -o, --output COLS the columns to print, comma separated: column names or\n"
                 "                    JSON paths (-o uuid,execution,params.vm_uuid)\n"
                 "  -H, --no-header   no header line in tables\n"
                 "  -h, --help        help; `tern <noun> <verb> --help` for a command\n"
                 "  --version         print the version\n"
                 "\nEnvironment:\n"
                 "  TERN_URL          the API's URL\n"
                 "  TERN_TOKEN        sent as \"Authorization: Bearer <token>\". A token of\n"
                 "                    scope submit may create, list, watch, cancel, resume and\n"
                 "                    retry jobs and read workflows, tasks and schedules;\n"
                 "                    loading or deleting workflows, changing schedules,\n"
                 "                    stats and runners need an operator token (ternd's\n"
                 "                    --api-token-file gives each its scope)\n"
                 "  TERN_CACERT       PEM file of the certificates to trust for https (else\n"
                 "                    the system's)\n"
                 "  NO_COLOR          no colours (they are used only on a terminal anyway)\n"
                 "\nExit status:\n"
                 "  0    success; for `job watch` and --watch: the job succeeded\n"
                 "  1    the job failed or was canceled (watch); a file is invalid (validate)\n"
                 "  2    usage error: bad command line, unreadable file, bad -p or -f value\n"
                 "  3    the API answered with an error (4xx/5xx), printed as\n"
                 "       \"tern: <code>: <message>\"\n"
                 "  4    the API cannot be reached (refused, timed out, not ternd)\n"
                 "  130  interrupted by Ctrl-C (a watched job goes on)\n");
}

static void noun_help(const char *noun, FILE *out)
{
    fprintf(out, "Usage: tern %s <verb> [ARGS]...\n\nVerbs:\n", noun);
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const cli_command_t *c = tables[t]; c->noun != NULL; c++)
            if (strcmp(c->noun, noun) == 0 && c->verb != NULL)
                fprintf(out, "  %-14s %s\n", c->verb, c->summary);
    fprintf(out, "\n`tern %s <verb> --help` describes a verb.\n", noun);
}

/* The command for noun (and verb, when the noun has verbs); *has_verbs tells whether
 * the noun exists with verbs. */
static const cli_command_t *find(const char *noun, const char *verb, bool *known_noun,
                                 bool *has_verbs)
{
    *known_noun = *has_verbs = false;
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const cli_command_t *c = tables[t]; c->noun != NULL; c++) {
            if (strcmp(c->noun, noun) != 0)
                continue;
            *known_noun = true;
            if (c->verb == NULL)
                return c;
            *has_verbs = true;
            if (verb != NULL && strcmp(c->verb, verb) == 0)
                return c;
        }
    return NULL;
}

int main(int argc, char **argv)
{
    cli_t cli = {0};
    const char *env_url = getenv("TERN_URL");
    snprintf(cli.url, sizeof cli.url, "%s",
             env_url != NULL && env_url[0] != '\0' ? env_url : DEFAULT_URL);
    size_t n = strlen(cli.url);
    while (n > 0 && cli.url[n - 1] == '/')
        cli.url[--n] = '\0';
    cli.token = getenv("TERN_TOKEN");
    cli.ca_file = getenv("TERN_CACERT");

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND; /* a second Ctrl-C kills at once; no SA_RESTART */
    sigaction(SIGINT, &sa, NULL);

    /* Global options before the noun ("+": stop at the first argument). */
    enum { OPT_VERSION = 0x2000 };
    struct option longopts[16];
    size_t k = 0;
    for (; args_global_long[k].name != NULL && k + 2 < sizeof longopts / sizeof longopts[0]; k++)
        longopts[k] = args_global_long[k];
    longopts[k++] = (struct option){"version", no_argument, NULL, OPT_VERSION};
    longopts[k] = (struct option){NULL, 0, NULL, 0};
    char shorts[32];
    snprintf(shorts, sizeof shorts, "+:%s", args_global_short);
    bool help = false, version = false;
    cli_status_t st = CLI_OK;
    opterr = 0;
    int c;
    while (st == CLI_OK && (c = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
        if (c == OPT_VERSION)
            version = true;
        else if (c == '?')
            st = cli_usage(&cli, "unknown option %s", argv[optind - 1]);
        else if (c == ':')
            st = cli_usage(&cli, "option %s needs a value", argv[optind - 1]);
        else if (args_global(&cli, c, optarg, &help) && cli.err.usage)
            st = CLI_USAGE;
    }
    const cli_command_t *cmd = NULL;
    int at = optind;
    char cmdname[64] = "";
    if (st == CLI_OK && version) {
        printf("tern %s\n", TERN_VERSION);
    } else if (st == CLI_OK && (help || at >= argc)) {
        global_help(help ? stdout : stderr);
        st = help ? CLI_OK : CLI_USAGE;
    } else if (st == CLI_OK) {
        const char *noun = argv[at];
        const char *verb = at + 1 < argc ? argv[at + 1] : NULL;
        bool known, has_verbs;
        cmd = find(noun, verb, &known, &has_verbs);
        if (!known) {
            st = cli_usage(&cli, "unknown command \"%s\"", noun);
        } else if (cmd == NULL) {
            bool asked = verb != NULL && (strcmp(verb, "-h") == 0 || strcmp(verb, "--help") == 0);
            noun_help(noun, asked ? stdout : stderr);
            cli.cmd = noun; /* "Try 'tern job --help'." */
            if (!asked)
                st = verb == NULL ? cli_usage(&cli, "missing verb")
                                  : cli_usage(&cli, "unknown verb \"%s\"", verb);
        } else {
            snprintf(cmdname, sizeof cmdname, "%s%s%s", cmd->noun, cmd->verb ? " " : "",
                     cmd->verb ? cmd->verb : "");
            cli.cmd = cmdname;
            cli.command = cmd;
            int skip = cmd->verb != NULL ? at + 1 : at;
            st = cmd->run(&cli, argc - skip, argv + skip);
        }
    }
    if (st == CLI_INTERRUPTED && cli.err.message[0] == '\0')
        cli_fail(&cli, st, NULL, "interrupted");
    if (st != CLI_OK)
        cli_error_print(&cli);
    client_free(cli.client);
    return (int)st;
}
