/*
 * http_blast.h -- the load client of the benchmarks: a fixed number of HTTP/1.1
 * requests to ternd's API on 127.0.0.1 over keep-alive connections (HTTP_BLAST_CONNS
 * unless the run asks for another number), one request in flight on each (no
 * pipelining), all on one thread with epoll.
 *
 * Why not libcurl: the suite runs on a 2-core machine where the client, ternd and Redis
 * share the cores, so every microsecond the client spends is taken from the server it
 * measures. curl multi cost 50 to 85 us of CPU per request there; this client, 16 to
 * 25: a send and a read per request, parsing only what it must (the status, the length
 * of the body and whether the connection stays open), one buffer per connection
 * allocated once, and a short pause when few answers are ready (GATHER_US in
 * http_blast.c) so that a wake-up serves several of them.
 *
 * What it does not do: TLS, redirects, other hosts, Expect/100-continue, and bodies
 * sent with Transfer-Encoding (ternd gives every answer a Content-Length, see
 * engine/http/http_api.c send_body): such an answer counts as bad with a message saying so.
 * An answer without a length is read until the server closes. Answer bodies are read
 * and thrown away.
 */
#ifndef TERN_BENCH_HTTP_BLAST_H
#define TERN_BENCH_HTTP_BLAST_H

#include <stdatomic.h>
#include <stdbool.h>

#define HTTP_BLAST_CONNS     64   /* connections, and so requests in flight, by default */
#define HTTP_BLAST_CONNS_MAX 1024 /* the most a run may ask for */

/* One run. The caller fills the first group of fields (the rest zeroed, e.g. by a
 * designated initializer) and owns the struct; `body` and `uuids` are borrowed until
 * http_blast_run returns. While it runs, other threads may read `ok` and `bad`; the
 * other results are written by the run's thread and are for after it returns. */
typedef struct http_blast {
    int port;          /* ternd's API on 127.0.0.1 */
    bool post;         /* POST /jobs with `body`, else GET /jobs/<uuid> */
    const char *body;  /* the POST body (JSON), NUL-terminated */
    char (*uuids)[40]; /* for GET: read round robin */
    int n_uuids;
    int n;          /* requests in all */
    int conns;      /* connections (0: HTTP_BLAST_CONNS; at most HTTP_BLAST_CONNS_MAX) */
    double limit_s; /* the bound of the whole run, seconds */

    /* Each of the n requests ends in exactly one of the two counters, so that when the
     * run returns ok + bad == n: ok for a 2xx answer, bad for any other status, a
     * transport error, a malformed answer, no answer within 30 s, or no answer when
     * limit_s was reached (the requests never sent then included). */
    atomic_int ok, bad;
    double t_start, t_end; /* CLOCK_MONOTONIC seconds: the run's first and last moment */
    double cpu_s;          /* the CPU time (user + system) of the thread over the run */
    char err[256];         /* the first failure in words ("" if none), e.g.
                              "POST /jobs: HTTP 400: {...}" */
} http_blast_t;

/* Runs all of the requests of `arg`, an http_blast_t *, and returns NULL; usable as a
 * pthread's body. Never exits the process: every failure is counted in `bad`, the
 * first one described in `err`. Returns within about limit_s + 0.1 s. */
void *http_blast_run(void *arg);

#endif
