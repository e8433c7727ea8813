/*
 * workflow_ops.h -- every operation on workflows: storing and reading one, listing,
 * replacing (PUT) and deleting. Each answers through a job_ops_cb exactly once, with
 * the errors of job_ops.h.
 *
 * Versions are immutable: "name@version" always means one definition, because jobs,
 * logs and operators refer to it. So a PUT that changes a definition must give it a
 * new version, which is stored next to the old one under a new uuid and becomes the
 * name's latest; the same definition again is a no-op; a different definition under
 * the same version is refused (TERN_EEXIST). A DELETE removes one version; jobs keep
 * the frozen copy they were created with.
 */
#ifndef TERN_WORKFLOW_OPS_H
#define TERN_WORKFLOW_OPS_H

#include <stddef.h>

#include <jansson.h>

#include "ops/job_ops.h"
#include "store/store.h"

/* Validates and stores a workflow definition (borrowed), then installs the schedules
 * it declares (schedule_ops_install). Result: {"uuid", "name", "version", "status":
 * "created"|"unchanged", "workflow": the stored document, and "schedules" as installed
 * when it declares some}. The same name and version with a different definition is TERN_EEXIST, as
 * is a "uuid" in the definition that already names another version. */
void workflow_ops_put(job_ops_t *ops, const json_t *definition, job_ops_cb cb, void *data);

/* Reads a workflow by uuid, "name@version" or name (latest). Result: the document. */
void workflow_ops_get(store_t *store, const char *ref, job_ops_cb cb, void *data);

#define WORKFLOW_LIST_LIMIT_DEFAULT 100
#define WORKFLOW_LIST_LIMIT_MAX     1000

typedef struct workflow_list_req {
    size_t limit;        /* 0: the default; more than the maximum: the maximum */
    const char *marker;  /* from a previous page, or NULL */
    const char *name;    /* only this name, or NULL */
    const char *version; /* only this version, or NULL */
} workflow_list_req_t;

/* Lists stored versions, newest first. Result: {"workflows": [doc, ...],
 * "next_marker": string or null} (paging as in job_list.h). */
void workflow_ops_list(store_t *store, const workflow_list_req_t *req, job_ops_cb cb, void *data);

/* Replaces the workflow `ref` (a uuid, "name@version" or name) with `definition`
 * (borrowed). The definition's name and version default to the stored ones; another
 * name, or a "uuid" other than the stored one, is TERN_EINVAL. Result: as
 * workflow_ops_put ("status" "created" for a new version, "unchanged"). Unknown
 * `ref`: TERN_ENOENT. */
void workflow_ops_replace(job_ops_t *ops, const char *ref, const json_t *definition, job_ops_cb cb,
                          void *data);

/* Deletes the version `ref` (a uuid or "name@version"). Result: {"uuid", "name",
 * "version"} of what was deleted. Unknown `ref`: TERN_ENOENT. */
void workflow_ops_delete(store_t *store, const char *ref, job_ops_cb cb, void *data);

#endif /* TERN_WORKFLOW_OPS_H */
