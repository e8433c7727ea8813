/*
 * job_fields.h -- a job's stored fields, looked up by name, wherever they came from: a
 * store reply (HGETALL's flat [name, value, ...] array) or the field/value pairs a create
 * sent (a job just created, or started at once, is shown and run from what was sent,
 * without Redis sending it back).
 */
#ifndef TERN_JOB_FIELDS_H
#define TERN_JOB_FIELDS_H

#include <stddef.h>

#include <hiredis/hiredis.h>

#include "store/store.h"

typedef struct job_fields {
    const redisReply *reply;  /* borrowed; NULL: use args */
    const store_args_t *args; /* borrowed; names at even positions */
} job_fields_t;

/* The value of field `name` (borrowed; *len set when len is not NULL), or NULL. */
const char *job_fields_get(const job_fields_t *f, const char *name, size_t *len);

#endif /* TERN_JOB_FIELDS_H */
