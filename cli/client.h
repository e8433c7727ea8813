/*
 * client.h -- the CLI's HTTP client of the API: one blocking request at a time over
 * libcurl's easy interface, with the connection kept alive between requests, and a
 * streaming request that hands each line of the answer to a callback (the event stream
 * of `tern job watch`).
 *
 * Every request sends "Accept: application/json" (or the given type for streams), the
 * bearer token when there is one, and a JSON body with "Content-Type:
 * application/json". Outcomes map onto the CLI's exit statuses:
 *   CLI_OK           a 2xx answer;
 *   CLI_API          any other answer; err holds the API's {"code", "message"}, or
 *                    "HTTP <status>" and the start of the body when it is not JSON;
 *   CLI_UNREACHABLE  no usable answer: connection refused, DNS, TLS, timeout (10 s to
 *                    connect, 60 s for a whole request), a 2xx body that is not JSON;
 *   CLI_INTERRUPTED  client_interrupt() was called (the SIGINT handler does).
 */
#ifndef TERN_CLI_CLIENT_H
#define TERN_CLI_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "cli.h"

typedef struct client_reply {
    long status;  /* HTTP status, 0 when there was no answer */
    json_t *json; /* the body decoded, or NULL when empty or not JSON (owned) */
    char *body;   /* the raw body, NUL-terminated, or NULL (owned) */
    size_t len;
    char *next_marker; /* the x-tern-next-marker header, or NULL (owned) */
} client_reply_t;

/* A client of `base_url` ("http://127.0.0.1:8080", no trailing '/'); `token` may be
 * NULL; `ca_file` (PEM certificates to trust for https, e.g. a self-signed server's),
 * NULL for the system's. All are copied. Never returns NULL. */
client_t *client_new(const char *base_url, const char *token, const char *ca_file);
void client_free(client_t *c);

/* Sends `method` `path` ("/jobs?limit=10": already escaped, see client_escape) with
 * `body` (borrowed, NULL for none). Fills *reply (dispose it whatever the status) and,
 * unless CLI_OK, *err. See above for the statuses. */
cli_status_t client_call(client_t *c, const char *method, const char *path, const json_t *body,
                         client_reply_t *reply, cli_error_t *err);

void client_reply_dispose(client_reply_t *r);

/* `s` percent-encoded for a path segment or query value (malloc'd; caller frees). */
char *client_escape(client_t *c, const char *s);

/* Called for each line of a streamed answer, without its "\n" or "\r\n" (borrowed for
 * the call). Returns false to end the stream. */
typedef bool (*client_line_fn)(void *data, const char *line, size_t len);

/* Called about once a second, and after every chunk, while a stream is open (for
 * redrawing a clock). Returns false to end the stream. */
typedef bool (*client_tick_fn)(void *data);

/* GETs `path` with "Accept: `accept`" and no overall time limit, handing each line of a
 * 2xx answer to on_line. A stream that stays silent for 120 s is dropped (as
 * CLI_UNREACHABLE), so a dead peer is noticed. Returns CLI_OK when the server ended the
 * answer or a callback ended the stream; otherwise as client_call, with the HTTP
 * status in *status (0 without an answer) so that the caller can tell a missing route
 * (404, 405) from the rest. */
cli_status_t client_stream(client_t *c, const char *path, const char *accept,
                           client_line_fn on_line, client_tick_fn on_tick, void *data, long *status,
                           cli_error_t *err);

/* Asks every request in progress, and the next ones, to stop with CLI_INTERRUPTED.
 * Async-signal-safe: this is what the SIGINT handler calls. */
void client_interrupt(void);

/* True after client_interrupt(). */
bool client_interrupted(void);

#endif /* TERN_CLI_CLIENT_H */
