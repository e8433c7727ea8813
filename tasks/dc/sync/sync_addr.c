/*
 * sync_addr.c -- "HOST:PORT" into an IPv4 socket address (sync_addr.h).
 */
#include "sync_addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sync_addr_parse(const char *addr, struct sockaddr_in *out, char *err, size_t errlen)
{
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    char host[64];
    if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof host) {
        snprintf(err, errlen, "address \"%s\": expected HOST:PORT", addr ? addr : "(null)");
        return -EINVAL;
    }
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    char *end;
    errno = 0;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (!colon[1] || *end || errno || port > 65535) {
        snprintf(err, errlen, "address \"%s\": port is not 0..65535", addr);
        return -EINVAL;
    }
    memset(out, 0, sizeof *out);
    out->sin_family = AF_INET;
    out->sin_port = htons((uint16_t)port);
    if (!strcmp(host, "localhost"))
        snprintf(host, sizeof host, "127.0.0.1");
    if (inet_pton(AF_INET, host, &out->sin_addr) != 1) {
        snprintf(err, errlen, "address \"%s\": \"%s\" is not an IPv4 address", addr, host);
        return -EINVAL;
    }
    return 0;
}
