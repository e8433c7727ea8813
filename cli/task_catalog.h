/*
 * task_catalog.h -- the tasks an API has loaded, as GET /tasks lists them, for
 * `tern workflow validate`: it checks a definition with the engine's own parser
 * (workflow.c) and this catalog in place of the server's plugin registry, so a file
 * that validates is one POST /workflows accepts, with the same messages
 * ("chain[1].task: unknown task \"core.lgo\"", "chain[0].args.ms: expected integer,
 * got string").
 */
#ifndef TERN_CLI_TASK_CATALOG_H
#define TERN_CLI_TASK_CATALOG_H

#include <stddef.h>

#include <jansson.h>

typedef struct task_catalog task_catalog_t;

/* Builds the catalog from the answer of GET /tasks (borrowed: [{"name": plugin,
 * "tasks": [{"name": "family.entry", "args_schema": {...} | null}, ...]}, ...]). A
 * schema the CLI cannot compile is skipped (the server checked it when it loaded the
 * plugin). Never returns NULL. */
task_catalog_t *task_catalog_new(const json_t *answer);
void task_catalog_free(task_catalog_t *cat);

/* A workflow_task_check_fn: the task must be in the catalog and `args` must fit its
 * schema. `data` is the catalog. Returns 0, or TERN_ENOENT/TERN_EINVAL with the path of
 * the fault in err. */
int task_catalog_check(void *data, const char *task, const json_t *args, const char *path,
                       char *err, size_t errlen);

#endif /* TERN_CLI_TASK_CATALOG_H */
