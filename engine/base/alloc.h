/*
 * alloc.h -- allocation that aborts with a message on out-of-memory and never returns
 * NULL: exhausted memory is the one failure the engine does not carry as a value
 * (error.h).
 */
#ifndef TERN_ALLOC_H
#define TERN_ALLOC_H

#include <stddef.h>

#define TERN_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t n);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* Returns a malloc'd formatted string (caller frees). */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* TERN_ALLOC_H */
