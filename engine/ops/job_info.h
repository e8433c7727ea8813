/*
 * job_info.h -- node-workflow's job info: an append-only list of JSON objects that
 * programs working for a job (a task's remote end, an operator's script) post to
 * tell how it goes, and that anyone can read back (GET/POST /jobs/:uuid/info). Each
 * append is also an "info" event on the job's stream. The list is bounded so a chatty
 * client cannot fill Redis.
 */
#ifndef TERN_JOB_INFO_H
#define TERN_JOB_INFO_H

#include <jansson.h>

#include "ops/job_ops.h"
#include "store/store.h"

#define JOB_INFO_MAX_ENTRIES 1000        /* per job */
#define JOB_INFO_MAX_BYTES   (64 * 1024) /* per entry, as compact JSON */

/* Appends `entry` (borrowed object). Result: {"entries": count after the append}.
 * TERN_ENOENT for an unknown job, TERN_EINVAL for an entry that is not an object,
 * TERN_E2BIG for an entry over JOB_INFO_MAX_BYTES, TERN_EBUSY when the list is full. */
void job_info_add(store_t *store, const char *uuid, const json_t *entry, job_ops_cb cb, void *data);

/* Reads the list, oldest entry first. Result: an array. TERN_ENOENT for an unknown
 * job. */
void job_info_get(store_t *store, const char *uuid, job_ops_cb cb, void *data);

#endif /* TERN_JOB_INFO_H */
