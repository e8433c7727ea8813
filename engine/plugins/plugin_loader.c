/*
 * plugin_loader.c -- the plugin registry: which plugins are loaded, from where, and
 * the table of their tasks ("family.entry" -> definition, plugin, compiled schema).
 *
 * It owns the registry, one record per loaded plugin (names, paths, the state init
 * produced) and the compiled args schemas. It never owns the code: shared objects of
 * plugins whose init succeeded stay mapped until the process exits (see
 * plugin_loader.h for why), and the descriptors and task definitions are read in
 * place, with the sizes the plugin compiled. A refused plugin is dlclose'd when the
 * refusal comes before init; after a failed init it stays mapped, since init may have
 * left hooks (atexit, thread keys) pointing into it.
 *
 * Every refusal produces one message that names the file and the expected and actual
 * values; plugin_registry_load_all() logs each one (component "plugins").
 */
#include "plugins/plugin_loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/log.h"
#include "base/net_allow.h"
#include "model/args_schema.h"
#include "model/template.h"

/* The smallest descriptor and task definition this engine understands: those of ABI
 * 1.0. Later minors only append fields, so these never change within major 1. */
#define PLUGIN_MIN_SIZE ((uint32_t)(offsetof(tern_plugin, tasks) + sizeof(void *)))
#define TASK_MIN_SIZE   ((uint32_t)(offsetof(tern_task_def, cancel) + sizeof(void *)))

/* True when a task definition compiled with t->size bytes has the field `member`: a
 * plugin built against an older minor simply does not have the later hooks. */
#define TASK_HAS(t, member) ((t)->size >= offsetof(tern_task_def, member) + sizeof((t)->member))

/* Views are new in ABI 1.2: a view definition has 1.2's size at least, and a descriptor
 * has its `views` member only when its size reaches it (1.0 and 1.1 plugins do not). */
#define VIEW_MIN_SIZE     ((uint32_t)(offsetof(tern_view_def, script) + sizeof(void *)))
#define DESC_HAS_VIEWS(d) ((d)->size >= offsetof(tern_plugin, views) + sizeof((d)->views))

#define NAME_RULE "[a-z][a-z0-9_]*"

#define STRINGIFY_(x) #x
#define STRINGIFY(x)  STRINGIFY_(x)

typedef struct task_entry {
    char *full_name; /* "family.entry" */
    const tern_task_def *def;
    const plugin_t *plugin;
    args_schema_t *schema; /* NULL when the task has no args_schema */
} task_entry_t;

struct plugin_registry {
    char *dir; /* realpath of the plugin directory */
    const tern_host *host;
    plugin_t **plugins; /* sorted by name */
    size_t n_plugins;
    task_entry_t *tasks; /* sorted by full_name */
    size_t n_tasks;
    plugin_view_t *views; /* in load order */
    size_t n_views;
    char **reserved; /* the engine's route patterns no view may overlap (owned) */
    size_t n_reserved;
};

/* ---- names --------------------------------------------------------------------- */

static bool name_is_valid(const char *s)
{
    if (s == NULL || !(*s >= 'a' && *s <= 'z'))
        return false;
    for (s++; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return false;
    return true;
}

static int cmp_task_entry(const void *a, const void *b)
{
    return strcmp(((const task_entry_t *)a)->full_name, ((const task_entry_t *)b)->full_name);
}

static int cmp_plugin_ptr(const void *a, const void *b)
{
    return strcmp((*(plugin_t *const *)a)->name, (*(plugin_t *const *)b)->name);
}

static const plugin_t *find_plugin(const plugin_registry_t *reg, const char *name, size_t len)
{
    for (size_t i = 0; i < reg->n_plugins; i++) {
        const plugin_t *p = reg->plugins[i];
        if (strlen(p->name) == len && memcmp(p->name, name, len) == 0)
            return p;
    }
    return NULL;
}

static const task_entry_t *find_task(const plugin_registry_t *reg, const char *task)
{
    if (reg->n_tasks == 0 || task == NULL)
        return NULL;
    task_entry_t key = {.full_name = (char *)task};
    return bsearch(&key, reg->tasks, reg->n_tasks, sizeof *reg->tasks, cmp_task_entry);
}

/* ---- views -------------------------------------------------------------------- */

/* The length of the path segment at s (up to '/' or the end). */
static size_t seg_len(const char *s)
{
    const char *e = strchr(s, '/');
    return e != NULL ? (size_t)(e - s) : strlen(s);
}

/* True when some request path matches both patterns: as many segments, and at every
 * position the same literal or a parameter on either side (the engine routes first,
 * so a view overlapping a route would be unreachable, or would shadow it). */
bool plugin_view_paths_overlap(const char *a, const char *b)
{
    while (*a == '/' && *b == '/') {
        a++;
        b++;
        size_t la = seg_len(a), lb = seg_len(b);
        if (*a != ':' && *b != ':' && (la != lb || memcmp(a, b, la) != 0))
            return false;
        a += la;
        b += lb;
    }
    return *a == '\0' && *b == '\0';
}

/* Checks a view's path: "/seg/:name/...". Fills names[] with its parameters' names
 * (pointing into path, lengths in lens[]) and *n. Returns NULL, or what is wrong. */
static const char *view_path_fault(const char *path, const char *names[PLUGIN_VIEW_MAX_PARAMS],
                                   size_t lens[PLUGIN_VIEW_MAX_PARAMS], size_t *n)
{
    *n = 0;
    if (path == NULL)
        return "path is NULL";
    if (path[0] != '/')
        return "it does not start with \"/\"";
    if (strlen(path) > PLUGIN_VIEW_PATH_MAX)
        return "it is longer than " STRINGIFY(PLUGIN_VIEW_PATH_MAX) " bytes";
    if (path[1] == '\0')
        return "\"/\" is not a view";
    for (const char *s = path; *s == '/';) {
        s++;
        size_t len = seg_len(s);
        if (len == 0)
            return s[0] == '\0' ? "it ends with \"/\"" : "it has an empty segment";
        if (s[0] == ':') {
            if (len == 1)
                return "a parameter has no name";
            if (!(s[1] >= 'a' && s[1] <= 'z'))
                return "a parameter's name does not match " NAME_RULE;
            for (size_t i = 2; i < len; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
                    return "a parameter's name does not match " NAME_RULE;
            if (*n == PLUGIN_VIEW_MAX_PARAMS)
                return "it has more than " STRINGIFY(PLUGIN_VIEW_MAX_PARAMS) " parameters";
            names[*n] = s + 1;
            lens[*n] = len - 1;
            ++*n;
        } else {
            for (size_t i = 0; i < len; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
                      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '.' || s[i] == '-'))
                    return "a segment has a character outside [A-Za-z0-9_.-]";
        }
        s += len;
    }
    return NULL;
}

/* See plugin_loader.h. */
const char *plugin_view_path_fault(const char *path)
{
    const char *names[PLUGIN_VIEW_MAX_PARAMS];
    size_t lens[PLUGIN_VIEW_MAX_PARAMS], n;
    return view_path_fault(path, names, lens, &n);
}

/* The paging parameters every view takes (GET /jobs' names). */
static const char *const paging_params[] = {"limit", "offset", "marker"};

/* Checks the views of descriptor d against each other, the engine's routes and the
 * views already loaded. On success *views_out is a new array of *n_out entries (their
 * plugin not yet set). */
static int check_views(const plugin_registry_t *reg, const char *shown, const tern_plugin *d,
                       plugin_view_t **views_out, size_t *n_out, char *err, size_t errlen)
{
    *views_out = NULL;
    *n_out = 0;
    if (!DESC_HAS_VIEWS(d) || d->views == NULL)
        return 0;
    size_t count = 0;
    while (d->views[count] != NULL)
        count++;
    plugin_view_t *views = xcalloc(count + 1, sizeof *views);
    int rc = 0;
    for (size_t i = 0; i < count; i++) {
        const tern_view_def *v = d->views[i];
        const char *names[PLUGIN_VIEW_MAX_PARAMS];
        size_t lens[PLUGIN_VIEW_MAX_PARAMS], n_names;
        if (v->size < VIEW_MIN_SIZE) {
            rc = err_set(err, errlen, TERN_EINVAL,
                         "plugin \"%s\": views[%zu]: size %u, engine needs at least %u", shown, i,
                         (unsigned)v->size, (unsigned)VIEW_MIN_SIZE);
            goto Error;
        }
        if (v->size > sizeof(tern_view_def)) {
            rc = err_set(err, errlen, TERN_EINVAL,
                         "plugin \"%s\": views[%zu]: size %u, larger than the %zu bytes of the "
                         "engine's ABI %d.%d view definition",
                         shown, i, (unsigned)v->size, sizeof(tern_view_def), TERN_ABI_MAJOR,
                         TERN_ABI_MINOR);
            goto Error;
        }
        const char *fault = view_path_fault(v->path, names, lens, &n_names);
        if (fault != NULL) {
            rc = err_set(err, errlen, TERN_EINVAL, "plugin \"%s\": view \"%s\": bad path: %s",
                         shown, v->path != NULL ? v->path : "(null)", fault);
            goto Error;
        }
        /* A flag this engine does not know would be served as something the plugin did
         * not mean; and a plugin built before 1.3 had no flags to give. */
        if ((v->flags & ~(uint32_t)TERN_VIEW_STREAM) != 0 || (v->flags != 0 && d->abi_minor < 3)) {
            rc = err_set(err, errlen, TERN_EINVAL,
                         "plugin \"%s\": view \"%s\": flags 0x%x, engine knows 0x%x "
                         "(TERN_VIEW_STREAM, ABI 1.3; the plugin is ABI %u.%u)",
                         shown, v->path, (unsigned)v->flags, (unsigned)TERN_VIEW_STREAM,
                         (unsigned)d->abi_major, (unsigned)d->abi_minor);
            goto Error;
        }
        if (v->script == NULL || v->script[0] == '\0') {
            rc = err_set(err, errlen, TERN_EINVAL, "plugin \"%s\": view \"%s\": script is %s",
                         shown, v->path, v->script == NULL ? "NULL" : "empty");
            goto Error;
        }
        for (size_t a = 0; a < n_names; a++)
            for (size_t b = 0; b < a; b++)
                if (lens[a] == lens[b] && memcmp(names[a], names[b], lens[a]) == 0) {
                    rc = err_set(err, errlen, TERN_EINVAL,
                                 "plugin \"%s\": view \"%s\": path parameter \"%.*s\" is "
                                 "named twice",
                                 shown, v->path, (int)lens[a], names[a]);
                    goto Error;
                }
        for (size_t a = 0; v->params != NULL && v->params[a] != NULL; a++) {
            const char *q = v->params[a];
            if (!name_is_valid(q)) {
                rc = err_set(err, errlen, TERN_EINVAL,
                             "plugin \"%s\": view \"%s\": params[%zu]: name \"%s\" does not "
                             "match " NAME_RULE,
                             shown, v->path, a, q);
                goto Error;
            }
            const char *twice = NULL;
            for (size_t b = 0; b < a && twice == NULL; b++)
                if (strcmp(v->params[b], q) == 0)
                    twice = "is named twice";
            for (size_t b = 0; b < n_names && twice == NULL; b++)
                if (strlen(q) == lens[b] && memcmp(q, names[b], lens[b]) == 0)
                    twice = "is also a parameter of the path";
            for (size_t b = 0; b < TERN_ARRAY_SIZE(paging_params) && twice == NULL; b++)
                if (strcmp(q, paging_params[b]) == 0)
                    twice = "is a paging parameter every view takes";
            if (twice != NULL) {
                rc = err_set(err, errlen, TERN_EINVAL,
                             "plugin \"%s\": view \"%s\": query parameter \"%s\" %s", shown,
                             v->path, q, twice);
                goto Error;
            }
        }
        for (size_t a = 0; v->keys != NULL && v->keys[a] != NULL; a++) {
            if (a == PLUGIN_VIEW_MAX_KEYS) {
                rc = err_set(err, errlen, TERN_EINVAL,
                             "plugin \"%s\": view \"%s\": more than %d keys", shown, v->path,
                             PLUGIN_VIEW_MAX_KEYS);
                goto Error;
            }
        }
        for (size_t r = 0; r < reg->n_reserved; r++)
            if (plugin_view_paths_overlap(v->path, reg->reserved[r])) {
                rc = err_set(err, errlen, TERN_EEXIST,
                             "plugin \"%s\": view \"%s\" overlaps the engine's route \"%s\"", shown,
                             v->path, reg->reserved[r]);
                goto Error;
            }
        for (size_t j = 0; j < reg->n_views; j++)
            if (plugin_view_paths_overlap(v->path, reg->views[j].def->path)) {
                rc = err_set(err, errlen, TERN_EEXIST,
                             "plugin \"%s\": view \"%s\" overlaps view \"%s\" of plugin "
                             "\"%s\"",
                             shown, v->path, reg->views[j].def->path, reg->views[j].plugin->name);
                goto Error;
            }
        for (size_t j = 0; j < i; j++)
            if (plugin_view_paths_overlap(v->path, views[j].def->path)) {
                rc = err_set(err, errlen, TERN_EEXIST,
                             "plugin \"%s\": view \"%s\" overlaps its own view \"%s\" "
                             "(views[%zu])",
                             shown, v->path, views[j].def->path, j);
                goto Error;
            }
        views[i].def = v;
        views[i].n_path_params = n_names;
        for (size_t a = 0; a < n_names; a++)
            views[i].path_params[a] = xstrndup(names[a], lens[a]);
    }
    *views_out = views;
    *n_out = count;
    return 0;

Error:
    for (size_t i = 0; i < count; i++)
        for (size_t a = 0; a < views[i].n_path_params; a++)
            free(views[i].path_params[a]);
    free(views);
    return rc;
}

static void views_free(plugin_view_t *views, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t a = 0; a < views[i].n_path_params; a++)
            free(views[i].path_params[a]);
    free(views);
}

/* See plugin_loader.h. */
void plugin_registry_reserve(plugin_registry_t *reg, const char *pattern)
{
    reg->reserved = xrealloc(reg->reserved, (reg->n_reserved + 1) * sizeof *reg->reserved);
    reg->reserved[reg->n_reserved++] = xstrdup(pattern);
}

/* See plugin_loader.h. */
size_t plugin_registry_view_count(const plugin_registry_t *reg)
{
    return reg->n_views;
}

/* See plugin_loader.h. */
const plugin_view_t *plugin_registry_view(const plugin_registry_t *reg, size_t i)
{
    return i < reg->n_views ? &reg->views[i] : NULL;
}

/* See plugin_loader.h. */
/* See plugin_loader.h. */
bool plugin_view_streams(const plugin_view_t *v)
{
    return (v->def->flags & TERN_VIEW_STREAM) != 0;
}

json_t *plugin_registry_describe_views(const plugin_registry_t *reg)
{
    json_t *out = json_array();
    for (size_t i = 0; i < reg->n_views; i++) {
        const plugin_view_t *v = &reg->views[i];
        json_t *path_params = json_array(), *params = json_array();
        for (size_t a = 0; a < v->n_path_params; a++)
            json_array_append_new(path_params, json_string(v->path_params[a]));
        for (size_t a = 0; v->def->params != NULL && v->def->params[a] != NULL; a++)
            json_array_append_new(params, json_string(v->def->params[a]));
        json_array_append_new(out, json_pack("{s:s, s:s, s:s?, s:o, s:o, s:b}", "plugin",
                                             v->plugin->name, "path", v->def->path, "summary",
                                             v->def->summary, "path_params", path_params, "params",
                                             params, "stream", plugin_view_streams(v)));
    }
    return out;
}

/* ---- registry ------------------------------------------------------------------ */

/* See plugin_loader.h. */
plugin_registry_t *plugin_registry_new(const char *dir, const tern_host *host, char *err,
                                       size_t errlen)
{
    char *real = realpath(dir, NULL);
    if (real == NULL) {
        err_set(err, errlen, -errno, "plugin directory \"%s\": %s", dir, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) {
        err_set(err, errlen, TERN_EINVAL, "plugin directory \"%s\": not a directory", dir);
        free(real);
        return NULL;
    }
    plugin_registry_t *reg = xcalloc(1, sizeof *reg);
    reg->dir = real;
    reg->host = host;
    return reg;
}

/* Everything up to, but not including, init: the checks of plugin_loader.h in order.
 * On success *desc_out is the descriptor and *dl_out the open handle; on failure the
 * handle is closed and err says why. `shown` is the path as named in messages. */
static int check_plugin(plugin_registry_t *reg, const char *shown, const char *real,
                        const char *stem, void **dl_out, const tern_plugin **desc_out,
                        task_entry_t **tasks_out, size_t *n_tasks_out, plugin_view_t **views_out,
                        size_t *n_views_out, char *err, size_t errlen)
{
    int rc = 0;
    task_entry_t *tasks = NULL;
    size_t n_tasks = 0;

    dlerror();
    void *dl = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (dl == NULL) {
        const char *why = dlerror();
        return err_set(err, errlen, TERN_EINVAL, "plugin \"%s\": dlopen failed: %s", shown,
                       why != NULL ? why : "unknown error");
    }

    /* dlsym returns an object pointer; POSIX guarantees it converts to a function
     * pointer. The union keeps -Wpedantic quiet about the cast. */
    union {
        void *obj;
        const tern_plugin *(*fn)(void);
    } entry;
    dlerror();
    entry.obj = dlsym(dl, "tern_plugin_entry");
    if (entry.obj == NULL) {
        rc = err_set(err, errlen, TERN_EINVAL,
                     "plugin \"%s\": no tern_plugin_entry symbol (not a tern plugin, or "
                     "built without TERN_PLUGIN)",
                     shown);
        goto Error;
    }
    const tern_plugin *d = entry.fn();
    if (d == NULL) {
        rc = err_set(err, errlen, TERN_EINVAL, "plugin \"%s\": tern_plugin_entry() returned NULL",
                     shown);
        goto Error;
    }
    if (d->magic != TERN_PLUGIN_MAGIC) {
        rc = err_set(err, errlen, TERN_EINVAL, "plugin \"%s\": bad magic 0x%08x, expected 0x%08x",
                     shown, (unsigned)d->magic, (unsigned)TERN_PLUGIN_MAGIC);
        goto Error;
    }
    if (d->abi_major != TERN_ABI_MAJOR) {
        rc = err_set(err, errlen, TERN_EINVAL, "plugin \"%s\": ABI major %u, engine provides %d.%d",
                     shown, (unsigned)d->abi_major, TERN_ABI_MAJOR, TERN_ABI_MINOR);
        goto Error;
    }
    if (d->abi_minor > TERN_ABI_MINOR) {
        rc = err_set(
            err, errlen, TERN_EINVAL, "plugin \"%s\": ABI %u.%u is newer than the engine's %d.%d",
            shown, (unsigned)d->abi_major, (unsigned)d->abi_minor, TERN_ABI_MAJOR, TERN_ABI_MINOR);
        goto Error;
    }
    if (d->size < PLUGIN_MIN_SIZE) {
        rc = err_set(err, errlen, TERN_EINVAL,
                     "plugin \"%s\": descriptor size %u, engine needs at least %u", shown,
                     (unsigned)d->size, (unsigned)PLUGIN_MIN_SIZE);
        goto Error;
    }
    if (d->name == NULL) {
        rc =
            err_set(err, errlen, TERN_EINVAL,
                    "plugin \"%s\": name is NULL, expected \"%s\" from the file name", shown, stem);
        goto Error;
    }
    if (strcmp(d->name, stem) != 0) {
        rc = err_set(err, errlen, TERN_EINVAL,
                     "plugin \"%s\": name \"%s\" differs from the file name \"%s\"", shown, d->name,
                     stem);
        goto Error;
    }
    const plugin_t *other = find_plugin(reg, stem, strlen(stem));
    if (other != NULL) {
        rc = err_set(err, errlen, TERN_EEXIST,
                     "plugin \"%s\": a plugin named \"%s\" is already loaded from \"%s\"", shown,
                     stem, other->path);
        goto Error;
    }
    if (d->tasks == NULL) {
        rc = err_set(err, errlen, TERN_EINVAL, "plugin \"%s\": task table is NULL", shown);
        goto Error;
    }

    size_t count = 0;
    while (d->tasks[count] != NULL)
        count++;
    tasks = xcalloc(count + 1, sizeof *tasks);
    for (size_t i = 0; i < count; i++) {
        const tern_task_def *t = d->tasks[i];
        if (t->size < TASK_MIN_SIZE) {
            rc = err_set(err, errlen, TERN_EINVAL,
                         "plugin \"%s\": tasks[%zu]: size %u, engine needs at least %u", shown, i,
                         (unsigned)t->size, (unsigned)TASK_MIN_SIZE);
            goto Error;
        }
        if (t->name == NULL) {
            rc = err_set(err, errlen, TERN_EINVAL, "plugin \"%s\": tasks[%zu]: name is NULL", shown,
                         i);
            goto Error;
        }
        if (!name_is_valid(t->name)) {
            rc = err_set(err, errlen, TERN_EINVAL,
                         "plugin \"%s\": tasks[%zu]: name \"%s\" does not match " NAME_RULE, shown,
                         i, t->name);
            goto Error;
        }
        if (t->start == NULL) {
            rc = err_set(err, errlen, TERN_EINVAL, "plugin \"%s\": task \"%s.%s\": start is NULL",
                         shown, stem, t->name);
            goto Error;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(d->tasks[j]->name, t->name) == 0) {
                rc = err_set(err, errlen, TERN_EINVAL,
                             "plugin \"%s\": task \"%s.%s\" is defined twice (tasks[%zu] "
                             "and tasks[%zu])",
                             shown, stem, t->name, j, i);
                goto Error;
            }
        }
        task_entry_t *e = &tasks[n_tasks++];
        e->full_name = xasprintf("%s.%s", stem, t->name);
        e->def = t;
    }
    for (size_t i = 0; i < n_tasks; i++) {
        const tern_task_def *t = tasks[i].def;
        if (t->args_schema == NULL)
            continue;
        char what[PATH_MAX + 256];
        snprintf(what, sizeof what, "plugin \"%s\": task \"%s\"", shown, tasks[i].full_name);
        rc = args_schema_compile(t->args_schema, what, &tasks[i].schema, err, errlen);
        if (rc != 0)
            goto Error;
    }
    rc = check_views(reg, shown, d, views_out, n_views_out, err, errlen);
    if (rc != 0)
        goto Error;

    *dl_out = dl;
    *desc_out = d;
    *tasks_out = tasks;
    *n_tasks_out = n_tasks;
    return 0;

Error:
    for (size_t i = 0; i < n_tasks; i++) {
        free(tasks[i].full_name);
        args_schema_free(tasks[i].schema);
    }
    free(tasks);
    dlclose(dl);
    return rc;
}

/* See plugin_loader.h. */
int plugin_registry_load(plugin_registry_t *reg, const char *file_name, const json_t *config,
                         char *err, size_t errlen)
{
    char shown[PATH_MAX + 64];
    snprintf(shown, sizeof shown, "%s/%s", reg->dir, file_name);

    size_t len = strlen(file_name);
    if (strchr(file_name, '/') != NULL || len <= 3 || strcmp(file_name + len - 3, ".so") != 0)
        return err_set(err, errlen, TERN_EINVAL,
                       "plugin \"%s\": expected a file name of the form <name>.so", shown);
    char *stem = xstrndup(file_name, len - 3);
    char *real = NULL;
    void *dl = NULL;
    const tern_plugin *desc = NULL;
    task_entry_t *tasks = NULL;
    size_t n_tasks = 0;
    plugin_view_t *views = NULL;
    size_t n_views = 0;
    net_allow_t *allow = NULL;
    int rc;

    if (!name_is_valid(stem)) {
        rc = err_set(err, errlen, TERN_EINVAL,
                     "plugin \"%s\": name \"%s\" does not match " NAME_RULE, shown, stem);
        goto Out;
    }
    real = realpath(shown, NULL);
    if (real == NULL) {
        rc = err_set(err, errlen, -errno, "plugin \"%s\": %s", shown, strerror(errno));
        goto Out;
    }
    size_t dlen = strlen(reg->dir);
    if (strncmp(real, reg->dir, dlen) != 0 || real[dlen] != '/') {
        rc = err_set(err, errlen, TERN_EPERM,
                     "plugin \"%s\": resolves to \"%s\", outside the plugin directory \"%s\"",
                     shown, real, reg->dir);
        goto Out;
    }
    /* The configuration's member for the engine, read before any code of the plugin
     * runs: the networks its tern_http_request calls may reach. */
    char setting[96], aerr[512];
    snprintf(setting, sizeof setting, "plugins.%s.allow_networks", stem);
    if (net_allow_parse(json_object_get(config, "allow_networks"), setting, &allow, aerr,
                        sizeof aerr) != 0) {
        rc = err_set(err, errlen, TERN_EINVAL, "plugin \"%s\": %s", shown, aerr);
        goto Out;
    }
    rc = check_plugin(reg, shown, real, stem, &dl, &desc, &tasks, &n_tasks, &views, &n_views, err,
                      errlen);
    if (rc != 0)
        goto Out;

    void *state = NULL;
    if (desc->init != NULL) {
        char ierr[512] = "";
        int irc = desc->init(reg->host, config, &state, ierr, sizeof ierr);
        ierr[sizeof ierr - 1] = '\0';
        if (irc != 0) {
            if (ierr[0] != '\0')
                rc = err_set(err, errlen, TERN_EINVAL, "plugin \"%s\": init failed: %s", shown,
                             ierr);
            else
                rc = err_set(err, errlen, TERN_EINVAL,
                             "plugin \"%s\": init failed with %d and no message", shown, irc);
            for (size_t i = 0; i < n_tasks; i++) {
                free(tasks[i].full_name);
                args_schema_free(tasks[i].schema);
            }
            free(tasks);
            views_free(views, n_views);
            goto Out; /* stays mapped: see the top of the file */
        }
    }

    plugin_t *p = xcalloc(1, sizeof *p);
    p->name = stem;
    p->path = real;
    p->desc = desc;
    p->state = state;
    p->dl = dl;
    p->allow_networks = allow;
    p->config = config != NULL ? json_incref((json_t *)config) : NULL;
    stem = NULL;
    real = NULL;
    allow = NULL;

    reg->plugins = xrealloc(reg->plugins, (reg->n_plugins + 1) * sizeof *reg->plugins);
    reg->plugins[reg->n_plugins++] = p;
    qsort(reg->plugins, reg->n_plugins, sizeof *reg->plugins, cmp_plugin_ptr);

    reg->tasks = xrealloc(reg->tasks, (reg->n_tasks + n_tasks) * sizeof *reg->tasks);
    for (size_t i = 0; i < n_tasks; i++) {
        tasks[i].plugin = p;
        reg->tasks[reg->n_tasks++] = tasks[i];
    }
    free(tasks);
    qsort(reg->tasks, reg->n_tasks, sizeof *reg->tasks, cmp_task_entry);

    reg->views = xrealloc(reg->views, (reg->n_views + n_views + 1) * sizeof *reg->views);
    for (size_t i = 0; i < n_views; i++) {
        views[i].plugin = p;
        reg->views[reg->n_views++] = views[i];
    }
    free(views);
    rc = 0;

Out:
    free(stem);
    free(real);
    net_allow_free(allow);
    return rc;
}

static int has_so_suffix(const struct dirent *d)
{
    size_t len = strlen(d->d_name);
    return d->d_name[0] != '.' && len > 3 && strcmp(d->d_name + len - 3, ".so") == 0;
}

/* See plugin_loader.h. */
int plugin_registry_load_all(plugin_registry_t *reg, const json_t *configs)
{
    struct dirent **names = NULL;
    int n = scandir(reg->dir, &names, has_so_suffix, alphasort);
    if (n < 0) {
        log_msg(TERN_LOG_ERROR, "plugins", NULL, "plugin directory \"%s\": %s", reg->dir,
                strerror(errno));
        return 1;
    }
    int refused = 0;
    for (int i = 0; i < n; i++) {
        const char *file = names[i]->d_name;
        size_t len = strlen(file);
        char stem[256];
        snprintf(stem, sizeof stem, "%.*s", (int)(len - 3), file);
        const json_t *config = json_object_get(configs, stem);
        char err[PATH_MAX + 512];
        if (plugin_registry_load(reg, file, config, err, sizeof err) != 0) {
            json_t *fields = json_pack("{s:s}", "file", file);
            log_msg(TERN_LOG_ERROR, "plugins", fields, "%s", err);
            json_decref(fields);
            refused++;
            continue;
        }
        const plugin_t *p = find_plugin(reg, stem, strlen(stem));
        size_t count = 0;
        while (p->desc->tasks[count] != NULL)
            count++;
        size_t views = 0;
        for (size_t v = 0; v < reg->n_views; v++)
            views += reg->views[v].plugin == p;
        char views_text[32] = "";
        if (views > 0)
            snprintf(views_text, sizeof views_text, ", %zu %s", views,
                     views == 1 ? "view" : "views");
        json_t *fields = json_pack("{s:s}", "plugin", p->name);
        log_msg(TERN_LOG_INFO, "plugins", fields, "loaded plugin \"%s\" %s from \"%s\" (%zu %s%s)",
                p->name, p->desc->version != NULL ? p->desc->version : "(no version)", p->path,
                count, count == 1 ? "task" : "tasks", views_text);
        json_decref(fields);
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return refused;
}

/* ---- lookups ------------------------------------------------------------------- */

/* See plugin_loader.h. */
const tern_task_def *plugin_registry_find(const plugin_registry_t *reg, const char *task,
                                          const plugin_t **plugin_out)
{
    const task_entry_t *e = find_task(reg, task);
    if (plugin_out != NULL)
        *plugin_out = e != NULL ? e->plugin : NULL;
    return e != NULL ? e->def : NULL;
}

/* Resolves the task for a check, or explains why it is unknown. */
static const task_entry_t *resolve_for_check(const plugin_registry_t *reg, const char *task,
                                             const char *path, int *rc, char *err, size_t errlen)
{
    const task_entry_t *e = find_task(reg, task);
    if (e != NULL)
        return e;
    const char *dot = task != NULL ? strchr(task, '.') : NULL;
    if (task == NULL)
        *rc = err_set(err, errlen, TERN_ENOENT, "%s.task: missing", path);
    else if (dot == NULL)
        *rc = err_set(err, errlen, TERN_ENOENT,
                      "%s.task: unknown task \"%s\" (expected \"family.entry\")", path, task);
    else if (find_plugin(reg, task, (size_t)(dot - task)) == NULL)
        *rc = err_set(err, errlen, TERN_ENOENT,
                      "%s.task: unknown task \"%s\" (no plugin \"%.*s\" loaded)", path, task,
                      (int)(dot - task), task);
    else
        *rc = err_set(err, errlen, TERN_ENOENT, "%s.task: unknown task \"%s\"", path, task);
    return NULL;
}

static int check_args(const task_entry_t *e, const json_t *args, const char *path, unsigned flags,
                      char *err, size_t errlen)
{
    if (args != NULL && !json_is_object(args))
        return err_set(err, errlen, TERN_EINVAL, "%s.args: expected object, got %s", path,
                       json_is_array(args) ? "array" : "a scalar");
    if (e->schema == NULL)
        return 0;
    char apath[512];
    snprintf(apath, sizeof apath, "%s.args", path);
    return args_schema_check(e->schema, args, apath, flags, err, errlen);
}

/* See plugin_loader.h. */
int plugin_registry_check_task(void *data, const char *task, const json_t *args, const char *path,
                               char *err, size_t errlen)
{
    const plugin_registry_t *reg = data;
    int rc = 0;
    const task_entry_t *e = resolve_for_check(reg, task, path, &rc, err, errlen);
    if (e == NULL)
        return rc;
    rc = check_args(e, args, path, 0, err, errlen);
    if (rc != 0 || !TASK_HAS(e->def, check) || e->def->check == NULL)
        return rc;
    char why[512] = "";
    if (e->def->check(e->plugin->state, args, why, sizeof why) == 0)
        return 0;
    why[sizeof why - 1] = '\0';
    return err_set(err, errlen, TERN_EINVAL, "%s.args%s%s", path, why[0] != '\0' ? "." : "",
                   why[0] != '\0' ? why : ": refused by the plugin, with no message");
}

/* See plugin_loader.h. */
json_t *plugin_registry_expand_args(const plugin_registry_t *reg, const char *task,
                                    const json_t *args, const char *path,
                                    const template_scope_t *scope, char *err, size_t errlen)
{
    const task_entry_t *e = find_task(reg, task);
    if (e == NULL || e->schema == NULL || !json_is_object(args))
        return template_expand(args, path, scope, err, errlen);
    json_t *out = json_object();
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)args, key, v)
    {
        char kpath[512];
        snprintf(kpath, sizeof kpath, "%s.%s", path, key);
        json_t *x = args_schema_prop_is_parts(e->schema, key)
                        ? template_expand_parts(v, kpath, scope, err, errlen)
                        : template_expand(v, kpath, scope, err, errlen);
        if (x == NULL) {
            json_decref(out);
            return NULL;
        }
        json_object_set_new_nocheck(out, key, x);
    }
    return out;
}

/* See plugin_loader.h. */
int plugin_registry_check_expanded(const plugin_registry_t *reg, const char *task,
                                   const json_t *args, const char *path, char *err, size_t errlen)
{
    int rc = 0;
    const task_entry_t *e = resolve_for_check(reg, task, path, &rc, err, errlen);
    if (e == NULL)
        return rc;
    return check_args(e, args, path, ARGS_SCHEMA_EXPANDED, err, errlen);
}

/* See plugin_loader.h. */
int plugin_task_code_is_fatal(const tern_task_def *def, const char *code)
{
    if (def == NULL || code == NULL || def->fatal_codes == NULL)
        return 0;
    for (const char *const *c = def->fatal_codes; *c != NULL; c++)
        if (strcmp(*c, code) == 0)
            return 1;
    return 0;
}

/* See plugin_loader.h. */
json_t *plugin_registry_describe(const plugin_registry_t *reg)
{
    json_t *out = json_array();
    for (size_t i = 0; i < reg->n_plugins; i++) {
        const plugin_t *p = reg->plugins[i];
        json_t *tasks = json_array();
        for (size_t j = 0; p->desc->tasks[j] != NULL; j++) {
            const tern_task_def *t = p->desc->tasks[j];
            char *full = xasprintf("%s.%s", p->name, t->name);
            const task_entry_t *e = find_task(reg, full);
            json_t *fatal = json_array();
            for (const char *const *c = t->fatal_codes; c != NULL && *c != NULL; c++)
                json_array_append_new(fatal, json_string(*c));
            json_t *schema = e != NULL && e->schema != NULL
                                 ? json_deep_copy(args_schema_doc_get(e->schema))
                                 : json_null();
            json_array_append_new(tasks, json_pack("{s:s, s:s?, s:o, s:o}", "name", full, "summary",
                                                   t->summary, "args_schema", schema, "fatal_codes",
                                                   fatal));
            free(full);
        }
        json_array_append_new(out, json_pack("{s:s, s:s?, s:o}", "name", p->name, "version",
                                             p->desc->version, "tasks", tasks));
    }
    return out;
}

/* See plugin_loader.h. */
void plugin_registry_free(plugin_registry_t *reg)
{
    if (reg == NULL)
        return;
    for (size_t i = reg->n_plugins; i-- > 0;) {
        plugin_t *p = reg->plugins[i];
        if (p->desc->fini != NULL)
            p->desc->fini(p->state);
        free(p->name);
        free(p->path);
        net_allow_free(p->allow_networks);
        json_decref(p->config);
        free(p);
    }
    for (size_t i = 0; i < reg->n_tasks; i++) {
        free(reg->tasks[i].full_name);
        args_schema_free(reg->tasks[i].schema);
    }
    free(reg->tasks);
    views_free(reg->views, reg->n_views);
    for (size_t i = 0; i < reg->n_reserved; i++)
        free(reg->reserved[i]);
    free(reg->reserved);
    free(reg->plugins);
    free(reg->dir);
    free(reg);
}
