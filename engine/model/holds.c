/*
 * holds.c -- expanded, sorted resource ticket lines; see holds.h.
 */
#include "model/holds.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

typedef struct line {
    char *resource;
    uint32_t capacity;
} line_t;

static int line_cmp(const void *a, const void *b)
{
    return strcmp(((const line_t *)a)->resource, ((const line_t *)b)->resource);
}

char *holds_expand(const wf_hold_t *holds, size_t n, const template_scope_t *scope, char *err,
                   size_t errlen)
{
    line_t *lines = xcalloc(n ? n : 1, sizeof *lines);
    size_t total = 1;
    char *out = NULL;
    for (size_t i = 0; i < n; i++) {
        char path[32];
        snprintf(path, sizeof path, "holds[%zu]", i);
        lines[i].resource = template_expand_string(holds[i].resource, path, scope, err, errlen);
        if (lines[i].resource == NULL)
            goto Done;
        if (strchr(lines[i].resource, '\n') != NULL) {
            err_set(err, errlen, TERN_EINVAL, "%s: a resource name cannot contain a newline", path);
            goto Done;
        }
        lines[i].capacity = holds[i].capacity;
        total += strlen(lines[i].resource) + 16;
    }
    qsort(lines, n, sizeof *lines, line_cmp);
    out = xmalloc(total);
    out[0] = '\0';
    for (size_t i = 0, len = 0; i < n; i++)
        len += (size_t)snprintf(out + len, total - len, "%u %s\n", lines[i].capacity,
                                lines[i].resource);
Done:
    for (size_t i = 0; i < n; i++)
        free(lines[i].resource);
    free(lines);
    return out;
}
