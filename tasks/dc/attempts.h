/*
 * attempts.h -- what an attempt of an agent task keeps between its callbacks (timers,
 * a child), found again by its context: a cancelled attempt gets no more callbacks, so
 * its cancel hook frees what it kept. Touched on the loop only, so no lock.
 */
#ifndef DC_ATTEMPTS_H
#define DC_ATTEMPTS_H

#include <tern/task.h>

typedef struct attempts attempts_t;

attempts_t *attempts_new(void);

/* Frees the list and what is left in it (at fini). */
void attempts_free(attempts_t *a);

/* Keeps `data` for ctx (freed with data_free). */
void attempts_add(attempts_t *a, tern_ctx *ctx, void *data, void (*data_free)(void *));

/* Frees what ctx kept, if anything: after the attempt reported, or from its cancel
 * hook. */
void attempts_end(attempts_t *a, tern_ctx *ctx);

#endif
