/*
 * job_list.h -- GET /jobs: pages of jobs, newest first by creation time, optionally
 * of one execution and filtered on params (node-workflow's `?execution=` and
 * `?key=value`). Each page is one Redis round trip (job_list.lua) that returns every
 * job's full view, so a listing shows exactly what GET /jobs/:uuid would.
 */
#ifndef TERN_JOB_LIST_H
#define TERN_JOB_LIST_H

#include <stddef.h>

#include <jansson.h>

#include "ops/job_ops.h"
#include "store/store.h"

#define JOB_LIST_LIMIT_DEFAULT 100
#define JOB_LIST_LIMIT_MAX     1000
/* The default bound of a page's size (the bytes of its jobs as stored, about their
 * JSON): big enough for 1000 ordinary jobs, small enough that a page of jobs with big
 * params is answered in tens of ms instead of holding Redis and the loop for seconds. */
#define JOB_LIST_MAX_BYTES_DEFAULT (4u * 1024 * 1024)

typedef struct job_list_req {
    const char *execution; /* one of job_executions, or NULL for every job */
    size_t limit;          /* 1..JOB_LIST_LIMIT_MAX; 0 means the default */
    const char *marker;    /* from a previous page's next_marker, or NULL */
    size_t offset;         /* matching jobs to skip first (node-workflow); at most
                              LIST_PAGE_OFFSET_MAX */
    const json_t *filters; /* object: params key -> string value, or NULL; borrowed */
    size_t max_bytes;      /* a page ends once its jobs pass this size (always one job at
                              least); 0 means JOB_LIST_MAX_BYTES_DEFAULT */
} job_list_req_t;

/* Reads one page: at most `limit` jobs, fewer when they pass `max_bytes`. Result:
 * {"jobs": [view, ...], "next_marker": string or null,
 * "total": how many jobs the listing has in all (every job, or that execution's), or
 * null when params filters apply (counting them would mean reading every job)}.
 * A next_marker means there may be more; a filtered page can hold fewer than `limit`
 * jobs (or none) and still have one, because one call examines at most
 * LIST_PAGE_BUDGET jobs. Bad input (an unknown execution, a marker that is not one,
 * a filter value that is not a string) is TERN_EINVAL naming the parameter. */
void job_list(store_t *store, const job_list_req_t *req, job_ops_cb cb, void *data);

#endif /* TERN_JOB_LIST_H */
