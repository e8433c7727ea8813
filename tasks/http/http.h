/*
 * http.h -- what the files of the http family share: a request in flight and the
 * plugin state that lists them, and the functions one file calls in another. Not
 * installed and not part of any ABI: only tern_plugin_entry leaves http.so.
 *
 *   http.c      the descriptor: http.request, its argument schema and fatal codes
 *   calls.c     the requests in flight: init, fini and cancel, and freeing a call
 *   request.c   the arguments read and the request built and started
 *   response.c  the answer: a result, or the error code that says if a retry helps
 */
#ifndef TASKS_HTTP_H
#define TASKS_HTTP_H

#include <stddef.h>

#include <tern/task.h>

#define MAX_EXPECT 32

typedef struct http_call {
    struct http_call *prev, *next;
    tern_ctx *ctx;
    char *method;
    char *url;
    int expect[MAX_EXPECT];
    size_t nexpect; /* 0: any 2xx */
} http_call_t;

typedef struct http_state {
    http_call_t *calls; /* in flight */
} http_state_t;

/* ---- calls.c --------------------------------------------------------------------- */

/* The plugin's init and fini: init allocates the http_state_t every attempt reads
 * through tern_plugin_state; fini frees it and every call still on its list. */
int http_init(const tern_host *host, const json_t *config, void **state, char *err, size_t errlen);
void http_fini(void *state);

/* Frees a call and its strings; it must be off the list. */
void call_free(http_call_t *c);

/* Takes c off st's list of calls in flight. */
void call_unlink(http_state_t *st, http_call_t *c);

/* http.request's cancel hook: frees the call of ctx, whose answer will not come. */
void request_cancel(tern_ctx *ctx);

/* ---- request.c ------------------------------------------------------------------- */

/* http.request's start(): reads the arguments, starts the request through the host
 * and puts its call on the list; the outcome is reported by on_response. */
void request_start(tern_ctx *ctx, const json_t *args);

/* ---- response.c ------------------------------------------------------------------ */

/* The host's callback with the answer to the call `data`: reports the outcome,
 * unlinks the call and frees it. */
void on_response(tern_ctx *ctx, const tern_http_res *res, void *data);

#endif
