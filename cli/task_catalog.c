/*
 * task_catalog.c -- GET /tasks as a task checker for workflow_parse; see
 * task_catalog.h. The messages are those of plugin_registry_check_task
 * (plugin_loader.c), so local and server validation read the same.
 */
#include "task_catalog.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "model/args_schema.h"

typedef struct entry {
    char *name;            /* "family.entry" */
    args_schema_t *schema; /* or NULL */
} entry_t;

struct task_catalog {
    entry_t *tasks;
    size_t n_tasks;
    char **plugins;
    size_t n_plugins;
};

task_catalog_t *task_catalog_new(const json_t *answer)
{
    task_catalog_t *cat = xcalloc(1, sizeof *cat);
    size_t i, j;
    const json_t *plugin, *task;
    json_array_foreach(answer, i, plugin)
    {
        const char *pname = json_string_value(json_object_get(plugin, "name"));
        if (pname != NULL) {
            cat->plugins = xrealloc(cat->plugins, (cat->n_plugins + 1) * sizeof *cat->plugins);
            cat->plugins[cat->n_plugins++] = xstrdup(pname);
        }
        json_array_foreach(json_object_get(plugin, "tasks"), j, task)
        {
            const char *tname = json_string_value(json_object_get(task, "name"));
            if (tname == NULL)
                continue;
            entry_t e = {.name = xstrdup(tname)};
            const json_t *schema = json_object_get(task, "args_schema");
            if (json_is_object(schema)) {
                char *text = json_dumps(schema, JSON_COMPACT);
                char what[300], err[512];
                snprintf(what, sizeof what, "task \"%s\"", tname);
                if (text == NULL ||
                    args_schema_compile(text, what, &e.schema, err, sizeof err) != 0)
                    e.schema = NULL;
                free(text);
            }
            cat->tasks = xrealloc(cat->tasks, (cat->n_tasks + 1) * sizeof *cat->tasks);
            cat->tasks[cat->n_tasks++] = e;
        }
    }
    return cat;
}

void task_catalog_free(task_catalog_t *cat)
{
    if (cat == NULL)
        return;
    for (size_t i = 0; i < cat->n_tasks; i++) {
        free(cat->tasks[i].name);
        args_schema_free(cat->tasks[i].schema);
    }
    for (size_t i = 0; i < cat->n_plugins; i++)
        free(cat->plugins[i]);
    free(cat->tasks);
    free(cat->plugins);
    free(cat);
}

static bool has_plugin(const task_catalog_t *cat, const char *name, size_t len)
{
    for (size_t i = 0; i < cat->n_plugins; i++)
        if (strlen(cat->plugins[i]) == len && memcmp(cat->plugins[i], name, len) == 0)
            return true;
    return false;
}

int task_catalog_check(void *data, const char *task, const json_t *args, const char *path,
                       char *err, size_t errlen)
{
    const task_catalog_t *cat = data;
    const entry_t *e = NULL;
    for (size_t i = 0; task != NULL && i < cat->n_tasks && e == NULL; i++)
        if (strcmp(cat->tasks[i].name, task) == 0)
            e = &cat->tasks[i];
    if (e == NULL) {
        const char *dot = task != NULL ? strchr(task, '.') : NULL;
        if (task == NULL)
            return err_set(err, errlen, TERN_ENOENT, "%s.task: missing", path);
        if (dot == NULL)
            return err_set(err, errlen, TERN_ENOENT,
                           "%s.task: unknown task \"%s\" (expected \"family.entry\")", path, task);
        if (!has_plugin(cat, task, (size_t)(dot - task)))
            return err_set(err, errlen, TERN_ENOENT,
                           "%s.task: unknown task \"%s\" (no plugin \"%.*s\" loaded)", path, task,
                           (int)(dot - task), task);
        return err_set(err, errlen, TERN_ENOENT, "%s.task: unknown task \"%s\"", path, task);
    }
    if (args != NULL && !json_is_object(args))
        return err_set(err, errlen, TERN_EINVAL, "%s.args: expected object, got %s", path,
                       json_is_array(args) ? "array" : "a scalar");
    if (e->schema == NULL)
        return 0;
    char apath[512];
    snprintf(apath, sizeof apath, "%s.args", path);
    return args_schema_check(e->schema, args, apath, 0, err, errlen);
}
