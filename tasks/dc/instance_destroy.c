/*
 * instance_destroy.c -- dc.instance_destroy, on a server's agent: stops the instance's
 * workload (instance_power.h), then removes <data_root>/<vm_uuid> and everything in it,
 * never following a symlink and only after checking that the directory is the data
 * root's own (instance_dir.h). The removal runs on the thread pool under the
 * directory's key, so it waits for a create of the same instance still winding down.
 * An instance that is not there is done: a destroy run again after it finished, or
 * the onerror of a provision that never made one.
 *
 *   {"vm_uuid"} -> {"destroyed": bool (false: nothing was there), "pid": stopped or null}
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dc_state.h"
#include "file_work.h"
#include "instance_dir.h"
#include "instance_power.h"
#include "lib/args.h"

typedef struct destroy_arg {
    char root[PATH_MAX];
    char dir[PATH_MAX];
    pid_t pid;
} destroy_arg_t;

static int destroy_work(void *data, const atomic_bool *stop, char *err, size_t errlen)
{
    (void)stop; /* removal is short and leaves no half-made file: it runs to its end */
    destroy_arg_t *a = data;
    return instance_tree_remove(a->root, a->dir, err, errlen);
}

static void destroy_done(tern_ctx *ctx, void *data, int rc, const char *err)
{
    const destroy_arg_t *a = data;
    if (rc != 0) {
        tern_task_fail(ctx, "InstanceDestroyFailed", "dc.instance_destroy: %s", err);
        return;
    }
    tern_task_done(ctx, json_pack("{s:b, s:o}", "destroyed", 1, "pid",
                                  a->pid > 0 ? json_integer(a->pid) : json_null()));
}

static void destroy_stopped(tern_ctx *ctx, const instance_paths_t *p, pid_t pid, void *data)
{
    (void)data;
    const dc_state_t *s = tern_plugin_state(ctx);
    destroy_arg_t *a = calloc(1, sizeof *a);
    if (a == NULL)
        abort();
    snprintf(a->root, sizeof a->root, "%s", s->server->data_root);
    snprintf(a->dir, sizeof a->dir, "%s", p->dir);
    a->pid = pid;
    int rc = file_job_start(ctx, s->files, p->dir, destroy_work, a, free, destroy_done);
    if (rc != 0)
        tern_task_fail(ctx, "InstanceDestroyFailed",
                       "dc.instance_destroy: cannot queue the removal of %s: %s", p->dir,
                       strerror(-rc));
}

static void destroy_start(tern_ctx *ctx, const json_t *args)
{
    const char *task = "dc.instance_destroy";
    const dc_state_t *s = dc_agent_state(ctx, task);
    if (s == NULL)
        return;
    char msg[1024];
    const char *vm_uuid = NULL;
    const char *bad = task_args_string(args, "vm_uuid", &vm_uuid, NULL, msg, sizeof msg);
    if (bad != NULL || vm_uuid == NULL) {
        tern_task_fail(ctx, "InvalidArgument", "%s: %s", task,
                       bad != NULL ? bad : "vm_uuid: required");
        return;
    }
    instance_paths_t p;
    int rc = instance_paths(s->server->data_root, vm_uuid, &p, msg, sizeof msg);
    if (rc != 0) {
        tern_task_fail(ctx, rc == -EPERM ? "PathOutsideDataRoot" : "InvalidArgument", "%s: %s",
                       task, msg);
        return;
    }
    struct stat st;
    if (lstat(p.dir, &st) != 0 && errno == ENOENT) {
        tern_task_done(ctx, json_pack("{s:b, s:n}", "destroyed", 0, "pid"));
        return;
    }
    instance_stop_workload(ctx, task, &p, destroy_stopped, NULL);
}

const tern_task_def dc_instance_destroy_task = {
    .size = sizeof(tern_task_def),
    .name = "instance_destroy",
    .summary = "Stops the instance's workload and removes its directory (inside the data "
               "root only); absent is done.",
    .args_schema = "{\"required\": [\"vm_uuid\"], \"properties\": {\"vm_uuid\": {\"type\": "
                   "\"string\"}}, \"additional\": false}",
    .fatal_codes = dc_fatal_codes,
    .start = destroy_start,
    .cancel = dc_agent_cancel,
};
