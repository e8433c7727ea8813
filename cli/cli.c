/*
 * cli.c -- what the command files share: errors, help, the client, files, paged
 * lists. See cli.h.
 */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "client.h"

client_t *cli_client(cli_t *cli)
{
    if (cli->client == NULL)
        cli->client = client_new(cli->url, cli->token, cli->ca_file);
    return cli->client;
}

cli_status_t cli_fail(cli_t *cli, cli_status_t status, const char *code, const char *fmt, ...)
{
    snprintf(cli->err.code, sizeof cli->err.code, "%s", code != NULL ? code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cli->err.message, sizeof cli->err.message, fmt, ap);
    va_end(ap);
    cli->err.usage = false;
    return status;
}

cli_status_t cli_usage(cli_t *cli, const char *fmt, ...)
{
    cli->err.code[0] = '\0';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cli->err.message, sizeof cli->err.message, fmt, ap);
    va_end(ap);
    cli->err.usage = true;
    return CLI_USAGE;
}

/* What to do about the API's refusals of who is asking. */
static const struct {
    const char *code;
    const char *hint;
} refusal_hints[] = {
    {"InvalidCredentials", "Set TERN_TOKEN to a token from ternd's --api-token-file."},
    {"NotAuthorized", "Set TERN_TOKEN to a token of the scope named above (ternd's "
                      "--api-token-file gives each token its scope: submit or operator)."},
    {"MisdirectedRequest", "Give --url ternd's IP address or localhost, or add the name to "
                           "ternd's --allowed-hosts."},
};

void cli_error_print(cli_t *cli)
{
    if (cli->err.message[0] == '\0' && cli->err.code[0] == '\0')
        return;
    if (cli->err.code[0] != '\0') {
        fprintf(stderr, "tern: %s: %s\n", cli->err.code, cli->err.message);
        for (size_t i = 0; i < sizeof refusal_hints / sizeof refusal_hints[0]; i++)
            if (strcmp(cli->err.code, refusal_hints[i].code) == 0)
                fprintf(stderr, "%s\n", refusal_hints[i].hint);
    } else if (cli->err.usage && cli->cmd != NULL)
        fprintf(stderr, "tern: %s: %s\n", cli->cmd, cli->err.message);
    else
        fprintf(stderr, "tern: %s\n", cli->err.message);
    if (cli->err.usage)
        fprintf(stderr, "Try 'tern %s%s--help'.\n", cli->cmd != NULL ? cli->cmd : "",
                cli->cmd != NULL ? " " : "");
    memset(&cli->err, 0, sizeof cli->err);
}

void cli_command_help(const cli_command_t *c, FILE *out)
{
    if (c == NULL)
        return;
    fprintf(out, "Usage: tern %s\n\n%s\n", c->usage, c->summary);
    if (c->help != NULL && c->help[0] != '\0')
        fprintf(out, "\n%s", c->help);
    fprintf(out, "\nGlobal options: --url URL, -j/--json, -o/--output COLS, -H/--no-header, "
                 "-h/--help (see tern --help).\n");
}

/* ---- files --------------------------------------------------------------------- */

int cli_read_file(const char *path, char **buf, size_t *len, char *err, size_t errlen)
{
    bool is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (f == NULL)
        return err_set(err, errlen, -1, "%s: %s", path, strerror(errno));
    size_t cap = 65536, n = 0;
    char *b = xmalloc(cap + 1);
    size_t got;
    while ((got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            if (cap >= CLI_FILE_MAX) {
                free(b);
                if (!is_stdin)
                    fclose(f);
                return err_set(err, errlen, -1, "%s: larger than %u MiB", path, CLI_FILE_MAX >> 20);
            }
            cap *= 2;
            b = xrealloc(b, cap + 1);
        }
    }
    bool failed = ferror(f) != 0;
    int saved = errno;
    if (!is_stdin)
        fclose(f);
    if (failed) {
        free(b);
        return err_set(err, errlen, -1, "%s: %s", path, strerror(saved));
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return 0;
}

/* ---- paged lists --------------------------------------------------------------- */

cli_status_t cli_get_list(cli_t *cli, const char *path, const char *query, unsigned long limit,
                          const char *marker, json_t **rows, char **next_marker)
{
    client_t *c = cli_client(cli);
    json_t *all = json_array();
    char *mark = marker != NULL ? xstrdup(marker) : NULL;
    cli_status_t st = CLI_OK;
    *next_marker = NULL;
    while (limit == 0 || json_array_size(all) < limit) {
        unsigned long want = limit == 0 ? CLI_PAGE_MAX : limit - json_array_size(all);
        if (want > CLI_PAGE_MAX)
            want = CLI_PAGE_MAX;
        char *m = mark != NULL ? client_escape(c, mark) : NULL;
        char *url =
            xasprintf("%s?limit=%lu%s%s%s%s", path, want, query != NULL ? "&" : "",
                      query != NULL ? query : "", m != NULL ? "&marker=" : "", m != NULL ? m : "");
        free(m);
        client_reply_t reply;
        st = client_call(c, "GET", url, NULL, &reply, &cli->err);
        free(url);
        if (st == CLI_OK && !json_is_array(reply.json))
            st = cli_fail(cli, CLI_UNREACHABLE, NULL, "GET %s: expected a JSON array", path);
        if (st != CLI_OK) {
            client_reply_dispose(&reply);
            break;
        }
        json_array_extend(all, reply.json);
        free(mark);
        mark = reply.next_marker;
        reply.next_marker = NULL;
        size_t got = json_array_size(reply.json);
        client_reply_dispose(&reply);
        if (mark == NULL || got == 0)
            break;
    }
    if (st != CLI_OK) {
        json_decref(all);
        free(mark);
        return st;
    }
    *rows = all;
    *next_marker = mark;
    return CLI_OK;
}
