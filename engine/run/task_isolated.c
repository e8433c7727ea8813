/*
 * task_isolated.c -- isolated attempts: the runner's side (spawn the helper, read its
 * outcome) and the helper's side (task_helper_main). See task_isolated.h.
 *
 * Ownership: a task_isolated_t owns its child process object and a copy of the sink;
 * it is freed right after the outcome is delivered, or by cancel.
 */
#include "run/task_isolated.h"

#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/log.h"
#include "plugins/plugin_loader.h"
#include "run/child_process.h"

#define HELPER_OUTPUT_MAX  (8u * 1024u * 1024u) /* bytes of stdout kept: the outcome */
#define HELPER_REQUEST_MAX (16u * 1024u * 1024u)

struct task_isolated {
    child_process_t *child;
    task_sink_t sink;
    uint64_t started_mono;
    char task[160];
};

static void outcome_failed(task_outcome_t *o, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void outcome_failed(task_outcome_t *o, const char *code, const char *fmt, ...)
{
    o->kind = TASK_FAILED;
    o->code = xstrdup(code);
    va_list ap;
    va_start(ap, fmt);
    char *m = NULL;
    if (vasprintf(&m, fmt, ap) < 0)
        m = NULL;
    va_end(ap);
    o->message = m != NULL ? m : xstrdup(code);
}

/* Parses the helper's last stdout line into an outcome. */
static void outcome_from_line(task_outcome_t *o, const char *text)
{
    json_error_t jerr;
    json_t *doc = json_loads(text, 0, &jerr);
    json_t *out = json_object_get(doc, "outcome");
    const char *kind = json_string_value(json_object_get(out, "kind"));
    if (kind == NULL) {
        outcome_failed(o, "TaskCrashed", "the helper process wrote no outcome");
        json_decref(doc);
        return;
    }
    json_t *sc = json_object_get(out, "state_changes");
    o->state_changes = json_is_object(sc) ? json_incref(sc) : NULL;
    if (strcmp(kind, "done") == 0) {
        o->kind = TASK_DONE;
        json_t *res = json_object_get(out, "result");
        o->result = json_incref(res != NULL ? res : json_null());
    } else if (strcmp(kind, "failed") == 0) {
        const char *code = json_string_value(json_object_get(out, "code"));
        const char *msg = json_string_value(json_object_get(out, "message"));
        o->kind = TASK_FAILED;
        o->code = xstrdup(code != NULL ? code : "Error");
        o->message = xstrdup(msg != NULL ? msg : "");
        o->refuse_status = (int)json_integer_value(json_object_get(out, "refuse_status"));
    } else if (strcmp(kind, "wait") == 0 || strcmp(kind, "requeue") == 0) {
        o->kind = kind[0] == 'w' ? TASK_WAIT : TASK_REQUEUE;
        json_t *info = json_object_get(out, "info");
        o->info = info != NULL ? json_incref(info) : NULL;
        o->delay_ms = (uint64_t)json_integer_value(json_object_get(out, "delay_ms"));
    } else {
        outcome_failed(o, "TaskCrashed", "the helper process wrote an unknown outcome \"%s\"",
                       kind);
    }
    json_decref(doc);
}

static void on_helper_exit(void *data, const tern_spawn_res *res)
{
    task_isolated_t *t = data;
    task_outcome_t o;
    memset(&o, 0, sizeof o);
    const char *last = NULL;
    if (res->stdout_tail != NULL && res->stdout_len > 0) {
        /* The outcome is the last complete line. */
        const char *end = res->stdout_tail + res->stdout_len;
        while (end > res->stdout_tail && end[-1] == '\n')
            end--;
        const char *p = end;
        while (p > res->stdout_tail && p[-1] != '\n')
            p--;
        if (p < end)
            last = p;
    }
    if (res->error != NULL) {
        outcome_failed(&o, "IsolationUnavailable", "cannot run the helper: %s", res->error);
    } else if (res->term_signal != 0) {
        /* Operators read "SIGSEGV" faster than a number that differs between
         * architectures, so the message names the signal as well. */
        const char *abbrev = sigabbrev_np(res->term_signal);
        outcome_failed(&o, "TaskCrashed",
                       "task %s crashed: helper killed by signal %d (SIG%s); stderr: %s", t->task,
                       res->term_signal, abbrev ? abbrev : "?",
                       res->stderr_tail ? res->stderr_tail : "");
    } else if (last == NULL) {
        outcome_failed(&o, "TaskCrashed",
                       "task %s: helper exited with status %lld and no outcome; "
                       "stderr: %s",
                       t->task, (long long)res->exit_status,
                       res->stderr_tail ? res->stderr_tail : "");
    } else {
        outcome_from_line(&o, last);
    }
    o.elapsed_ms = clock_mono_ms() - t->started_mono;
    task_sink_t sink = t->sink;
    free(t);
    sink.on_outcome(sink.owner, &o);
}

/* A line of the helper's stdout as it comes: progress reports are passed on while the
 * task runs (the outcome, its last line, is read at exit). */
static void on_helper_line(void *data, const char *line, size_t len)
{
    task_isolated_t *t = data;
    if (t->sink.on_progress == NULL || len < 12 || strncmp(line, "{\"progress\"", 11) != 0)
        return;
    json_t *doc = json_loadb(line, len, 0, NULL);
    json_t *p = json_object_get(doc, "progress");
    if (p != NULL)
        t->sink.on_progress(t->sink.owner, json_incref(p)); /* steals */
    json_decref(doc);
}

task_isolated_t *task_isolated_start(const task_isolated_opts_t *opts, const json_t *args,
                                     char *err, size_t errlen)
{
    const task_ctx_opts_t *c = opts->ctx;
    json_t *req = json_pack(
        "{s:s, s:O, s:{s:s, s:s?, s:O, s:O}, s:s, s:i, s:s, s:s?, s:s?, s:O?}", "task",
        c->task_name, "args", args, "job", "uuid", c->job_uuid, "target", c->job_target, "params",
        c->params ? c->params : json_null(), "state", c->state ? c->state : json_null(), "step",
        c->step_name, "attempt", (int)c->attempt, "key", c->idempotency_key, "plugin_dir",
        opts->plugin_dir, "redis", opts->redis_url, "plugin_config", opts->plugin_config);
    if (req == NULL) {
        err_set(err, errlen, TERN_EINVAL, "cannot build the helper request");
        return NULL;
    }
    /* The helper checks that this process is still its parent (see task_helper_main). */
    json_object_set_new(req, "runner_pid", json_integer((json_int_t)getpid()));
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    task_isolated_t *t = xcalloc(1, sizeof *t);
    t->sink = c->sink;
    t->started_mono = clock_mono_ms();
    snprintf(t->task, sizeof t->task, "%s", c->task_name);
    const char *argv[] = {opts->helper_exe, "--task-helper", NULL};
    tern_spawn_opts so = {
        .size = sizeof so,
        .argv = argv,
        .tail_bytes = HELPER_OUTPUT_MAX,
        .stdin_data = text,
        .stdin_len = strlen(text),
    };
    t->child = child_process_spawn(opts->loop, &so, on_helper_exit, t, err, errlen);
    free(text);
    if (t->child == NULL) {
        free(t);
        return NULL;
    }
    child_process_on_stdout_line(t->child, on_helper_line, t);
    return t;
}

void task_isolated_cancel(task_isolated_t *t)
{
    if (t == NULL)
        return;
    child_process_cancel(t->child);
    free(t);
}

/* ---- the helper process ------------------------------------------------------- */

typedef struct helper_state {
    bool finished;
    json_t *line;
} helper_state_t;

/* Progress goes to the runner as a line of its own, at once (task_ctx has already
 * coalesced reports to at most one per 200 ms). */
static void on_helper_progress(void *owner, json_t *progress /* stolen */)
{
    (void)owner;
    json_t *line = json_pack("{s:o}", "progress", progress);
    char *s = json_dumps(line, JSON_COMPACT);
    json_decref(line);
    if (s != NULL) {
        printf("%s\n", s);
        fflush(stdout);
        free(s);
    }
}

static void on_helper_outcome(void *owner, task_outcome_t *o)
{
    helper_state_t *h = owner;
    static const char *const kinds[] = {"done", "failed", "wait", "requeue"};
    json_t *out = json_pack("{s:s}", "kind", kinds[o->kind]);
    if (o->kind == TASK_DONE)
        json_object_set(out, "result", o->result ? o->result : json_null());
    if (o->kind == TASK_FAILED) {
        json_object_set_new(out, "code", json_string(o->code ? o->code : "Error"));
        json_object_set_new(out, "message", json_string(o->message ? o->message : ""));
        if (o->refuse_status != 0)
            json_object_set_new(out, "refuse_status", json_integer(o->refuse_status));
    }
    if (o->info != NULL)
        json_object_set(out, "info", o->info);
    if (o->kind == TASK_REQUEUE)
        json_object_set_new(out, "delay_ms", json_integer((json_int_t)o->delay_ms));
    if (o->state_changes != NULL)
        json_object_set(out, "state_changes", o->state_changes);
    h->line = json_pack("{s:o}", "outcome", out);
    h->finished = true;
    task_outcome_dispose(o);
}

static char *read_all_stdin(size_t *len)
{
    size_t cap = 65536, n = 0;
    char *buf = xmalloc(cap);
    for (;;) {
        if (n == cap) {
            if (cap >= HELPER_REQUEST_MAX) {
                free(buf);
                return NULL;
            }
            cap *= 2;
            buf = xrealloc(buf, cap);
        }
        ssize_t r = read(0, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    *len = n;
    return buf;
}

static int helper_fail(const char *code, const char *msg)
{
    json_t *line =
        json_pack("{s:{s:s, s:s, s:s}}", "outcome", "kind", "failed", "code", code, "message", msg);
    char *s = json_dumps(line, JSON_COMPACT);
    printf("%s\n", s);
    fflush(stdout);
    free(s);
    json_decref(line);
    return 0;
}

int task_helper_main(const char *default_plugin_dir)
{
    /* The attempt belongs to the runner that started it. When that runner dies (kill
     * -9, out of memory), its job is re-queued and the step runs again elsewhere; a
     * helper left running would do the same work at the same time, unseen. So the
     * kernel kills the helper with its parent. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    size_t len = 0;
    char *buf = read_all_stdin(&len);
    if (buf == NULL)
        return helper_fail("InvalidArgument", "helper request too large");
    json_error_t jerr;
    json_t *req = json_loadb(buf, len, 0, &jerr);
    free(buf);
    if (req == NULL)
        return helper_fail("InvalidArgument", "helper request is not JSON");
    const char *task = json_string_value(json_object_get(req, "task"));
    const char *dir = json_string_value(json_object_get(req, "plugin_dir"));
    const json_t *job = json_object_get(req, "job");
    if (task == NULL || strchr(task, '.') == NULL || !json_is_object(job)) {
        json_decref(req);
        return helper_fail("InvalidArgument", "helper request lacks task or job");
    }
    /* The runner may have died before the death signal was armed: then nobody waits
     * for this attempt any more, and it must not start. */
    json_int_t runner_pid = json_integer_value(json_object_get(req, "runner_pid"));
    if (runner_pid > 0 && getppid() != (pid_t)runner_pid) {
        json_decref(req);
        return 1;
    }
    char family[64];
    snprintf(family, sizeof family, "%.*s", (int)(strchr(task, '.') - task), task);
    char err[1024];
    plugin_registry_t *reg = plugin_registry_new(dir != NULL ? dir : default_plugin_dir,
                                                 task_ctx_host(), err, sizeof err);
    if (reg == NULL) {
        json_decref(req);
        return helper_fail("UnknownTask", err);
    }
    char file[80];
    snprintf(file, sizeof file, "%s.so", family);
    if (plugin_registry_load(reg, file, json_object_get(req, "plugin_config"), err, sizeof err) !=
        0) {
        plugin_registry_free(reg);
        json_decref(req);
        return helper_fail("UnknownTask", err);
    }
    const plugin_t *plugin = NULL;
    const tern_task_def *def = plugin_registry_find(reg, task, &plugin);
    if (def == NULL) {
        plugin_registry_free(reg);
        json_decref(req);
        return helper_fail("UnknownTask", "task not found in its plugin");
    }
    uv_loop_t loop;
    uv_loop_init(&loop);
    http_client_t *http = http_client_new(&loop);
    helper_state_t hs = {0};
    task_ctx_opts_t o = {
        .loop = &loop,
        .def = def,
        .plugin_name = plugin->name,
        .plugin_state = plugin->state,
        .task_name = task,
        .job_uuid = json_string_value(json_object_get(job, "uuid")),
        .job_target = json_string_value(json_object_get(job, "target")),
        .params = json_object_get(job, "params"),
        .state = json_object_get(job, "state"),
        .step_name = json_string_value(json_object_get(req, "step")),
        .attempt = (uint32_t)json_integer_value(json_object_get(req, "attempt")),
        .idempotency_key = json_string_value(json_object_get(req, "key")),
        .http = http,
        .allow = plugin->allow_networks,
        .sink = {.on_outcome = on_helper_outcome, .on_progress = on_helper_progress, .owner = &hs},
    };
    if (o.job_uuid == NULL)
        o.job_uuid = "";
    if (o.step_name == NULL)
        o.step_name = "";
    if (o.idempotency_key == NULL)
        o.idempotency_key = "";
    task_ctx_start(&o, json_object_get(req, "args"));
    while (!hs.finished && uv_run(&loop, UV_RUN_ONCE) != 0) {
    }
    http_client_free(http);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    int rc = 1;
    if (hs.line != NULL) {
        char *s = json_dumps(hs.line, JSON_COMPACT);
        printf("%s\n", s);
        fflush(stdout);
        free(s);
        json_decref(hs.line);
        rc = 0;
    }
    plugin_registry_free(reg);
    json_decref(req);
    return rc;
}
