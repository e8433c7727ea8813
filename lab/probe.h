/*
 * probe.h -- asking a lab's servers whether they are up, without a client library:
 * a PING to Redis on its unix socket, and a request to ternd's API on loopback. Each call
 * blocks at most its timeout.
 */
#ifndef LAB_PROBE_H
#define LAB_PROBE_H

#include <stddef.h>

/* true when the Redis at the unix socket `path` answers PING with PONG. */
int probe_redis_ping(const char *path, unsigned timeout_ms);

/* GET http://127.0.0.1:port<path> (HTTP/1.0, with "Authorization: Bearer <token>"
 * when token is not NULL). Returns the status (0 when no answer came) and the body,
 * malloc'd and NUL-terminated, in *body (NULL when no answer). */
int probe_http_get(unsigned port, const char *path, const char *token, unsigned timeout_ms,
                   char **body);

/* probe_http_get with another method and, when json is not NULL, that JSON text as
 * the request's body. */
int probe_http_send(unsigned port, const char *method, const char *path, const char *json,
                    const char *token, unsigned timeout_ms, char **body);

#endif
