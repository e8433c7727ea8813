/*
 * job_fields.c -- see job_fields.h.
 */
#include "store/job_fields.h"

#include <string.h>

const char *job_fields_get(const job_fields_t *f, const char *name, size_t *len)
{
    if (f->reply != NULL)
        return store_reply_hash_get(f->reply, name, len);
    for (size_t i = 0; f->args != NULL && i + 1 < f->args->n; i += 2) {
        /* The first byte first: most names differ there (a view looks up ~30). */
        if (f->args->v[i][0] == name[0] && strcmp(f->args->v[i], name) == 0) {
            if (len != NULL)
                *len = f->args->len[i + 1];
            return f->args->v[i + 1];
        }
    }
    return NULL;
}
