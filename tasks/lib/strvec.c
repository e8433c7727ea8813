/*
 * strvec.c -- NULL-terminated string vectors with borrowed and owned elements. Owns
 * the arrays and the elements pushed as owned; see strvec.h.
 */
#include <stdlib.h>

#include "strvec.h"

int task_strv_push(task_strv_t *s, const char *borrowed, char *owned)
{
    if (s->n + 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        const char **v = realloc(s->v, cap * sizeof *v);
        if (v == NULL)
            return -1;
        s->v = v;
        char **o = realloc(s->owned, cap * sizeof *o);
        if (o == NULL)
            return -1;
        s->owned = o;
        s->cap = cap;
    }
    s->v[s->n] = owned != NULL ? owned : borrowed;
    s->owned[s->n] = owned;
    s->n++;
    s->v[s->n] = NULL;
    return 0;
}

void task_strv_free(task_strv_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->owned[i]);
    free(s->owned);
    free(s->v);
}
