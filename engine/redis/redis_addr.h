/*
 * redis_addr.h -- where Redis is: redis://[user:pass@]HOST:PORT[/DB] or
 * unix:///PATH[?db=N] (user and password also as unix://user:pass@/PATH).
 */
#ifndef TERN_REDIS_ADDR_H
#define TERN_REDIS_ADDR_H

#include <stddef.h>

typedef struct redis_addr {
    char *host;     /* NULL for a unix socket; an IP address or a name */
    int port;       /* default 6379 */
    char *path;     /* unix socket path, or NULL */
    char *user;     /* ACL user name or NULL */
    char *password; /* or NULL; never logged */
    int db;         /* default 0 */
} redis_addr_t;

/* Parses `url` into *a (zeroed first). Returns 0, or TERN_EINVAL with
 * "redis address \"redis://h:99999\": port must be 1-65535" in err. */
int redis_addr_parse(const char *url, redis_addr_t *a, char *err, size_t errlen);

/* Frees the strings of *a. */
void redis_addr_dispose(redis_addr_t *a);

/* The URL of the unix socket at `path` (absolute), percent-encoded so that any path
 * reads back as itself ("/srv/my data/redis.sock" is unix:///srv/my%20data/redis.sock).
 * Malloc'd, caller frees. */
char *redis_addr_unix_url(const char *path);

/* The address as a URL with the password replaced by "***"; malloc'd, caller frees. */
char *redis_addr_redacted(const redis_addr_t *a);

#endif /* TERN_REDIS_ADDR_H */
