/*
 * plugin_loader.h -- loads task plugins with dlopen and keeps the table of tasks.
 *
 * A plugin is <dir>/<name>.so. The loader, in order, refuses with one message naming
 * the file and the expected and actual values:
 *   name not [a-z][a-z0-9_]* (from the file stem), realpath outside the plugin
 *   directory, dlopen(RTLD_NOW|RTLD_LOCAL) failure (a missing symbol fails here),
 *   no tern_plugin_entry symbol, NULL descriptor, bad magic, ABI major different,
 *   ABI minor newer than the engine's, descriptor size too small, name different
 *   from the file stem, name already loaded, a task with a bad size, name or start,
 *   a duplicate task name, an args_schema that is not valid JSON, a view (ABI 1.2)
 *   with a bad size, path, script or query parameter, or whose path overlaps a
 *   reserved engine route or a view already loaded, init() failing; and before any
 *   of that, a malformed "allow_networks" in its configuration.
 * Only then are the tasks registered. Plugins are never dlclose'd while the engine
 * runs: in-flight steps, timers and curl callbacks may still point into their code.
 * No path ever comes from the API: only names found in the configured directory.
 */
#ifndef TERN_PLUGIN_LOADER_H
#define TERN_PLUGIN_LOADER_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>
#include <tern/task.h>

#include "base/net_allow.h"
#include "model/template.h"

typedef struct plugin {
    char *name; /* file stem, equals desc->name */
    char *path; /* realpath of the .so */
    const tern_plugin *desc;
    void *state; /* from init */
    void *dl;    /* dlopen handle, kept open */
    /* From the configuration's "allow_networks" (an array of CIDR blocks; the plugin's
     * init sees the member too): the networks its tern_http_request calls may connect
     * to. NULL: any. Owned. */
    net_allow_t *allow_networks;
    /* The configuration init got (a reference), or NULL: handed to the isolated helper,
     * which loads the plugin again. */
    json_t *config;
} plugin_t;

typedef struct plugin_registry plugin_registry_t;

/* Bounds of a view's path, the same as the HTTP API's for its routes. */
#define PLUGIN_VIEW_MAX_PARAMS 4   /* ":name" segments */
#define PLUGIN_VIEW_PATH_MAX   200 /* bytes */
#define PLUGIN_VIEW_MAX_KEYS   16

/* A read view of a loaded plugin, as the registry keeps it. */
typedef struct plugin_view {
    const tern_view_def *def; /* read in place, with the size the plugin compiled */
    const plugin_t *plugin;
    char *path_params[PLUGIN_VIEW_MAX_PARAMS]; /* the names of its ":name" segments */
    size_t n_path_params;
} plugin_view_t;

/* `dir` is the plugin directory (made absolute with realpath); `host` is handed to
 * each plugin's init. Returns NULL with a message if dir does not exist. */
plugin_registry_t *plugin_registry_new(const char *dir, const tern_host *host, char *err,
                                       size_t errlen);

/* Reserves an engine route's pattern ("/jobs/:uuid", copied) before plugins load: a
 * view whose path overlaps it (plugin_view_paths_overlap) is refused. The registry sits
 * below the HTTP layer, so ternd hands it the API's routes. */
void plugin_registry_reserve(plugin_registry_t *reg, const char *pattern);

/* What is wrong with a view's path as the loader sees it ("it ends with \"/\""), or
 * NULL when it is a good one. Static text. */
const char *plugin_view_path_fault(const char *path);

/* True when some request path matches both patterns ("/a/:x" and "/a/b"). */
bool plugin_view_paths_overlap(const char *a, const char *b);

/* Loads <dir>/<file_name> (e.g. "core.so"). `config` is the plugin's configuration
 * section (borrowed, may be NULL). Returns 0, or a negative code with the refusal in
 * err, e.g. plugin "/usr/lib/tern/tasks/vm.so": ABI 2.0, engine provides 1.0. */
int plugin_registry_load(plugin_registry_t *reg, const char *file_name, const json_t *config,
                         char *err, size_t errlen);

/* Loads every *.so of the directory in name order. `configs` maps plugin name to its
 * configuration (borrowed, may be NULL). Each refusal is logged as an error and counted;
 * returns the number of refusals (0 when all loaded). */
int plugin_registry_load_all(plugin_registry_t *reg, const json_t *configs);

/* Finds "family.entry". Returns the definition (borrowed, valid for the registry's
 * life) and the plugin in *plugin_out when not NULL; NULL when unknown. */
const tern_task_def *plugin_registry_find(const plugin_registry_t *reg, const char *task,
                                          const plugin_t **plugin_out);

/* Checks `args` against the task's args_schema (templates pass: they are checked after
 * expansion), then asks the task's check hook, if it has one (ABI 1.1), whether its
 * plugin's configuration allows the step. Returns 0, TERN_ENOENT ("unknown task") or
 * TERN_EINVAL with a message about `path` ("chain[0].args.shell: ..."). Suitable as a
 * workflow_task_check_fn with reg as data. */
int plugin_registry_check_task(void *reg, const char *task, const json_t *args, const char *path,
                               char *err, size_t errlen);

/* The same check for arguments after template expansion (what the runner calls before
 * start): every value is type-checked, a string containing "${" included. The schema
 * was compiled when the plugin loaded, so this costs a lookup and a walk of `args`. */
int plugin_registry_check_expanded(const plugin_registry_t *reg, const char *task,
                                   const json_t *args, const char *path, char *err, size_t errlen);

/* Expands the templates of a step's `args` (borrowed) for `task`: as template_expand
 * does, except that an argument whose schema property says "interpolation": "parts"
 * is expanded with template_expand_parts. `path` is the args' path in messages
 * ("chain[0].args"). Returns a new reference, or NULL with a message in err. */
json_t *plugin_registry_expand_args(const plugin_registry_t *reg, const char *task,
                                    const json_t *args, const char *path,
                                    const template_scope_t *scope, char *err, size_t errlen);

/* True when `code` is one of the task's fatal_codes. */
int plugin_task_code_is_fatal(const tern_task_def *def, const char *code);

/* [{"name": "core", "version": "1.0.0", "tasks": [{"name": "core.sleep",
 *   "summary": "...", "args_schema": {...}|null, "fatal_codes": [...]}, ...]}, ...]
 * New reference. */
json_t *plugin_registry_describe(const plugin_registry_t *reg);

/* The views of every loaded plugin, in load order: their number, and the i-th
 * (borrowed, valid for the registry's life; NULL past the end). */
size_t plugin_registry_view_count(const plugin_registry_t *reg);
const plugin_view_t *plugin_registry_view(const plugin_registry_t *reg, size_t i);

/* True when view `v` answers a stream of lines (TERN_VIEW_STREAM). */
bool plugin_view_streams(const plugin_view_t *v);

/* GET /views: [{"plugin": "greet", "path": "/greetings/:name", "summary": "...",
 * "path_params": ["name"], "params": ["since"], "stream": false}, ...]. New reference. */
json_t *plugin_registry_describe_views(const plugin_registry_t *reg);

/* Calls every plugin's fini and frees the registry; shared objects stay mapped. */
void plugin_registry_free(plugin_registry_t *reg);

#endif /* TERN_PLUGIN_LOADER_H */
