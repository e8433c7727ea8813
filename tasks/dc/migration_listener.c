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

#include "migration_listener.h"
#include "sync_listener.h"

struct migration_listener {
    sync_listener_t *sync;
    char addr[64];
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
    if (sync_listener_start(addr, data_root, &l->sync, why, sizeof why) != 0) {
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
