/*
 * holds.c -- expanded, sorted resource ticket lines; see holds.h.
 */
#include "model/holds.h"

#include <stdbool.h>
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

/* A templated capacity, expanded: 0 and *capacity, or an error naming the hold, the
 * template and what it gave. Only plain decimal digits count: "2.0", "+2", " 2" and
 * "true" are refused, not guessed at. */
static int capacity_expand(const char *tmpl, const char *path, const template_scope_t *scope,
                           uint32_t *capacity, char *err, size_t errlen)
{
    char cpath[48];
    snprintf(cpath, sizeof cpath, "%s.capacity", path);
    char *v = template_expand_string(tmpl, cpath, scope, err, errlen);
    if (v == NULL)
        return TERN_EINVAL;
    unsigned long long x = 0;
    size_t len = strlen(v);
    bool ok = len > 0 && len <= 7;
    for (size_t i = 0; ok && i < len; i++) {
        ok = v[i] >= '0' && v[i] <= '9';
        x = x * 10 + (unsigned long long)(v[i] - '0');
    }
    int rc = 0;
    if (!ok || x < 1 || x > WORKFLOW_HOLD_CAPACITY_MAX)
        rc = err_set(err, errlen, TERN_EREFUSED,
                     "%s: \"%s\" gave \"%.64s\", expected an integer from 1 to %d", cpath, tmpl, v,
                     WORKFLOW_HOLD_CAPACITY_MAX);
    else
        *capacity = (uint32_t)x;
    free(v);
    return rc;
}

int holds_expand(const wf_hold_t *holds, size_t n, const template_scope_t *scope, char **out,
                 char *err, size_t errlen)
{
    line_t *lines = xcalloc(n ? n : 1, sizeof *lines);
    size_t total = 1;
    int rc = 0;
    *out = NULL;
    for (size_t i = 0; i < n; i++) {
        char path[32];
        snprintf(path, sizeof path, "holds[%zu]", i);
        lines[i].resource = template_expand_string(holds[i].resource, path, scope, err, errlen);
        if (lines[i].resource == NULL) {
            rc = TERN_EINVAL;
            goto Done;
        }
        if (strchr(lines[i].resource, '\n') != NULL) {
            rc = err_set(err, errlen, TERN_EINVAL, "%s: a resource name cannot contain a newline",
                         path);
            goto Done;
        }
        lines[i].capacity = holds[i].capacity;
        if (holds[i].capacity_template != NULL &&
            (rc = capacity_expand(holds[i].capacity_template, path, scope, &lines[i].capacity, err,
                                  errlen)) != 0)
            goto Done;
        total += strlen(lines[i].resource) + 16;
    }
    qsort(lines, n, sizeof *lines, line_cmp);
    char *text = xmalloc(total);
    text[0] = '\0';
    for (size_t i = 0, len = 0; i < n; i++)
        len += (size_t)snprintf(text + len, total - len, "%u %s\n", lines[i].capacity,
                                lines[i].resource);
    *out = text;
Done:
    for (size_t i = 0; i < n; i++)
        free(lines[i].resource);
    free(lines);
    return rc;
}
