/*
 * attempts.c -- the attempts' kept data (attempts.h). The list owns each entry and
 * its data until attempts_end or attempts_free.
 */
#include "attempts.h"

#include <stdlib.h>

typedef struct attempt {
    tern_ctx *ctx;
    void *data;
    void (*data_free)(void *);
    struct attempt *next;
} attempt_t;

struct attempts {
    attempt_t *head;
};

attempts_t *attempts_new(void)
{
    return calloc(1, sizeof(attempts_t));
}

void attempts_free(attempts_t *a)
{
    if (a == NULL)
        return;
    while (a->head != NULL) {
        attempt_t *e = a->head;
        a->head = e->next;
        if (e->data_free != NULL)
            e->data_free(e->data);
        free(e);
    }
    free(a);
}

void attempts_add(attempts_t *a, tern_ctx *ctx, void *data, void (*data_free)(void *))
{
    attempt_t *e = malloc(sizeof *e);
    if (e == NULL)
        abort();
    *e = (attempt_t){.ctx = ctx, .data = data, .data_free = data_free, .next = a->head};
    a->head = e;
}

void attempts_end(attempts_t *a, tern_ctx *ctx)
{
    for (attempt_t **p = &a->head; *p != NULL; p = &(*p)->next) {
        if ((*p)->ctx == ctx) {
            attempt_t *e = *p;
            *p = e->next;
            if (e->data_free != NULL)
                e->data_free(e->data);
            free(e);
            return;
        }
    }
}
