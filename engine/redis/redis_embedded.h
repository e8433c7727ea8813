/*
 * redis_embedded.h -- the embedded default: when no Redis address is configured,
 * ternd starts a private redis-server child listening only on a unix socket inside
 * its data directory (no TCP port), with append-only persistence in that directory,
 * and stops it when ternd exits. A second ternd on the same data directory finds the
 * socket answering and fails with a message instead of starting a second server,
 * because two owners would stop each other's Redis.
 */
#ifndef TERN_REDIS_EMBEDDED_H
#define TERN_REDIS_EMBEDDED_H

#include <stddef.h>
#include <sys/types.h>

typedef struct redis_embedded {
    pid_t pid;
    char *dir;         /* data directory (absolute) */
    char *socket_path; /* <dir>/redis.sock */
} redis_embedded_t;

/* Creates `data_dir` if needed, starts `redis_server` (a path or a name looked up in
 * PATH) and waits, at most timeout_ms, until it answers PING on its socket. Returns 0
 * and fills *r, or a negative code with "embedded redis: redis-server not found in
 * PATH (install the redis-server package or pass --redis)" or the tail of its log in
 * err. Blocking: call before the loop runs. */
int redis_embedded_start(const char *data_dir, const char *redis_server, unsigned timeout_ms,
                         redis_embedded_t *r, char *err, size_t errlen);

/* Stops the server: SIGTERM (it flushes the append-only file), waits at most
 * timeout_ms, then SIGKILL. Frees r's strings. Safe on a zeroed struct. */
void redis_embedded_stop(redis_embedded_t *r, unsigned timeout_ms);

#endif /* TERN_REDIS_EMBEDDED_H */
