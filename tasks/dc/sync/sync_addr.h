/*
 * sync_addr.h -- the "HOST:PORT" addresses of migration listeners (an IPv4 address,
 * or "localhost"; PORT 0..65535, 0 for a listener: any free port).
 */
#ifndef DC_SYNC_ADDR_H
#define DC_SYNC_ADDR_H

#include <netinet/in.h>
#include <stddef.h>

/* 0 and *out, or -EINVAL with err naming the address and what is wrong. */
int sync_addr_parse(const char *addr, struct sockaddr_in *out, char *err, size_t errlen);

#endif
