/*
 * migration_listener.c -- the migration listener of an agent: the address checked,
 * the transfer's listener (sync_listener.h) started and stopped. Only the calls into
 * the transfer live here, so the rest of the plugin knows an address and nothing of
 * the wire.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "migration_listener.h"
#include "sync_listener.h"

struct migration_listener {
    sync_listener_t *sync;
    char addr[64];     /* the address listened on, its port chosen */
    char log_addr[64]; /* the address as configured: the listener's lines name it; never
                          written while its threads run */
};

const char *migration_listen_fault(const char *addr)
{
    const char *colon = addr != NULL ? strrchr(addr, ':') : NULL;
    if (colon == NULL || colon == addr || (size_t)(colon - addr) >= INET_ADDRSTRLEN)
        return "expected HOST:PORT, HOST a numeric IPv4 address (127.0.0.1)";
    char host[INET_ADDRSTRLEN];
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    struct in_addr in;
    if (inet_pton(AF_INET, host, &in) != 1)
        return "the host is not a numeric IPv4 address (127.0.0.1)";
    const char *p = colon + 1;
    if (*p == '\0' || strlen(p) > 5 || strspn(p, "0123456789") != strlen(p) || atoi(p) > 65535)
        return "the port is not a number from 0 to 65535";
    return NULL;
}

/* The listener's lines (a sender refused for its proof, a pass that failed or ended),
 * from its threads, where no task context exists to log through: one JSON line each,
 * in the shape of ternd's own, written to standard error (the agent's log) with one
 * write, so lines of several threads never interleave. */
static void listener_log(void *data, int level, const char *msg)
{
    const char *addr = data;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[80];
    snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    json_t *line = json_pack("{s:s, s:s, s:i, s:s, s:s, s:s}", "name", "ternd", "component",
                             "dc.migration_listener", "level", level, "time", when, "listen", addr,
                             "msg", msg != NULL ? msg : "");
    char *text = line != NULL ? json_dumps(line, JSON_COMPACT) : NULL;
    json_decref(line);
    if (text == NULL)
        return;
    size_t len = strlen(text);
    char *buf = malloc(len + 2);
    if (buf != NULL) {
        memcpy(buf, text, len);
        buf[len] = '\n';
        if (write(STDERR_FILENO, buf, len + 1) < 0) {
            /* A log line that cannot be written has nowhere else to go. */
        }
        free(buf);
    }
    free(text);
}

int migration_listener_start(const char *addr, const char *data_root, migration_listener_t **out,
                             char *err, size_t errlen)
{
    *out = NULL;
    const char *fault = migration_listen_fault(addr);
    if (fault != NULL) {
        snprintf(err, errlen, "%s: %s", addr != NULL ? addr : "(none)", fault);
        return -1;
    }
    migration_listener_t *l = calloc(1, sizeof *l);
    if (l == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    char why[512] = "";
    snprintf(l->log_addr, sizeof l->log_addr, "%s", addr);
    if (sync_listener_start_logged(addr, data_root, listener_log, l->log_addr, &l->sync, why,
                                   sizeof why) != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", addr, why);
        free(l);
        return -1;
    }
    const char *colon = strrchr(addr, ':');
    snprintf(l->addr, sizeof l->addr, "%.*s:%u", (int)(colon - addr), addr,
             sync_listener_port(l->sync));
    *out = l;
    return 0;
}

const char *migration_listener_addr(const migration_listener_t *l)
{
    return l->addr;
}

void migration_listener_stop(migration_listener_t *l)
{
    if (l == NULL)
        return;
    sync_listener_stop(l->sync);
    free(l);
}
