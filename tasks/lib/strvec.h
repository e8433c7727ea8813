/*
 * strvec.h -- a NULL-terminated vector of strings (an argv or an envp) whose elements
 * are each either borrowed or owned, so a vector can mix literals, strings of a
 * json_t that outlives it and strings built for it.
 *
 * Zero-initialise a task_strv_t ({0}) and it is an empty vector; v is NULL until the
 * first push, then always NULL-terminated. task_strv_free frees the owned elements
 * and the arrays, never the borrowed strings.
 */
#ifndef TASK_STRVEC_H
#define TASK_STRVEC_H

#include <stddef.h>

typedef struct task_strv {
    const char **v; /* the vector: n strings, then NULL */
    char **owned;   /* parallel: what to free (NULL for a borrowed element) */
    size_t n, cap;
} task_strv_t;

/* Appends `owned` when it is not NULL (the vector takes it), else `borrowed` (which
 * must outlive the vector). Returns 0, or -1 when out of memory; then the vector is
 * unchanged and `owned` still belongs to the caller. */
int task_strv_push(task_strv_t *s, const char *borrowed, char *owned);

/* Frees the owned elements and the arrays; the vector must not be used after. */
void task_strv_free(task_strv_t *s);

#endif
