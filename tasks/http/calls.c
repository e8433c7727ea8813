/*
 * calls.c -- the requests in flight. Each has an http_call_t on the list in the
 * plugin state (init allocates it, fini frees it with whatever is left). The answer's
 * callback frees its call; when an attempt is cancelled that callback never runs, so
 * the cancel hook finds the call of its context and frees it.
 */
#include <stdio.h>
#include <stdlib.h>

#include "http.h"

void call_free(http_call_t *c)
{
    free(c->method);
    free(c->url);
    free(c);
}

void call_unlink(http_state_t *st, http_call_t *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        st->calls = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

void request_cancel(tern_ctx *ctx)
{
    http_state_t *st = tern_plugin_state(ctx);
    for (http_call_t *c = st != NULL ? st->calls : NULL; c != NULL; c = c->next) {
        if (c->ctx == ctx) {
            call_unlink(st, c);
            call_free(c);
            return;
        }
    }
}

int http_init(const tern_host *host, const json_t *config, void **state, char *err, size_t errlen)
{
    (void)host;
    (void)config;
    http_state_t *st = calloc(1, sizeof *st);
    if (st == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    *state = st;
    return 0;
}

void http_fini(void *state)
{
    http_state_t *st = state;
    if (st == NULL)
        return;
    while (st->calls != NULL) {
        http_call_t *c = st->calls;
        call_unlink(st, c);
        call_free(c);
    }
    free(st);
}
