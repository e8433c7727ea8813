/*
 * task_harness.c -- runs one task of a built plugin to its outcome through the real
 * task context. See task_harness.h.
 *
 * The harness owns a private loop, an HTTP client on it, the dlopen handle of the
 * plugin and whatever the plugin's init produced (handed back to fini). Each run owns
 * a `run_t` on the stack: the sink the context reports to, and the two timers that
 * bound the run and cancel it on request (kept in the harness and reused). A run
 * returns only after the context has told the sink it is closed, so no callback of
 * one run can reach the next.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "task_harness.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/ident.h"
#include "loop_util.h"
#include "run/http_client.h"

#define CLOSE_BOUND_MS 10000

struct task_harness {
    uv_loop_t loop;
    void *dl;
    const tern_plugin *plugin;
    void *state; /* from the plugin's init */
    bool initialised;
    http_client_t *http;
    net_allow_t *allow; /* the configuration's allow_networks, as the loader reads it */
    uv_timer_t bound;   /* ends a run that takes too long */
    uv_timer_t cancel;  /* cancels a run on request */
    int timers_open;
};

typedef struct run {
    harness_run_t *out;
    tern_ctx *ctx;
    bool outcome; /* the sink got the outcome */
    bool closed;  /* the context is gone */
    bool timed_out;
    bool cancelled;
    uint64_t started_ms;
} run_t;

/* ---- the sink ------------------------------------------------------------------------ */

static void on_outcome(void *owner, task_outcome_t *o)
{
    run_t *run = owner;
    run->outcome = true;
    run->out->finished = true;
    run->out->outcome = *o; /* the members are ours now */
    run->out->elapsed_ms = clock_mono_ms() - run->started_ms;
}

static void on_progress(void *owner, json_t *progress)
{
    run_t *run = owner;
    json_array_append_new(run->out->progress, progress);
}

static void on_closed(void *owner)
{
    run_t *run = owner;
    run->closed = true;
    run->ctx = NULL;
}

static void on_bound_passed(uv_timer_t *t)
{
    run_t *run = t->data;
    if (run->outcome || run->closed || run->cancelled)
        return;
    run->timed_out = true;
    task_ctx_cancel(run->ctx);
}

static void on_cancel_due(uv_timer_t *t)
{
    run_t *run = t->data;
    if (run->outcome || run->closed || run->timed_out)
        return;
    run->cancelled = true;
    task_ctx_cancel(run->ctx);
}

/* ---- public -------------------------------------------------------------------------- */

/* See task_harness.h. */
const tern_plugin *task_harness_plugin_open(const char *plugin_path, void **dl)
{
    *dl = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);
    if (*dl == NULL)
        fail_msg("plugin \"%s\": dlopen: %s", plugin_path, dlerror());
    void *sym = dlsym(*dl, "tern_plugin_entry");
    if (sym == NULL)
        fail_msg("plugin \"%s\": no tern_plugin_entry symbol", plugin_path);
    const tern_plugin *(*entry)(void);
    memcpy(&entry, &sym, sizeof entry);
    const tern_plugin *p = entry();
    if (p == NULL)
        fail_msg("plugin \"%s\": tern_plugin_entry returned NULL", plugin_path);
    return p;
}

/* See task_harness.h. */
task_harness_t *task_harness_new(const char *plugin_path, const json_t *plugin_config)
{
    task_harness_t *h = xcalloc(1, sizeof *h);
    const tern_plugin *p = task_harness_plugin_open(plugin_path, &h->dl);
    if (p->magic != TERN_PLUGIN_MAGIC)
        fail_msg("plugin \"%s\": magic 0x%08x, expected 0x%08x", plugin_path, p->magic,
                 TERN_PLUGIN_MAGIC);
    if (p->abi_major != TERN_ABI_MAJOR || p->abi_minor > TERN_ABI_MINOR)
        fail_msg("plugin \"%s\": ABI %u.%u, engine provides %d.%d", plugin_path, p->abi_major,
                 p->abi_minor, TERN_ABI_MAJOR, TERN_ABI_MINOR);
    if (p->name == NULL || p->tasks == NULL)
        fail_msg("plugin \"%s\": no name or no task table", plugin_path);
    h->plugin = p;
    char setting[96], aerr[512];
    snprintf(setting, sizeof setting, "plugins.%s.allow_networks", p->name);
    if (net_allow_parse(json_object_get(plugin_config, "allow_networks"), setting, &h->allow, aerr,
                        sizeof aerr) != 0)
        fail_msg("plugin \"%s\": %s", plugin_path, aerr);

    if (p->init != NULL) {
        char err[512] = "";
        if (p->init(task_ctx_host(), plugin_config, &h->state, err, sizeof err) != 0)
            fail_msg("plugin \"%s\": init failed: %s", plugin_path, err);
    }
    h->initialised = true;

    if (uv_loop_init(&h->loop) != 0)
        fail_msg("uv_loop_init failed");
    h->http = http_client_new(&h->loop);
    uv_timer_init(&h->loop, &h->bound);
    uv_timer_init(&h->loop, &h->cancel);
    h->timers_open = 2;
    return h;
}

/* See task_harness.h. */
uv_loop_t *task_harness_loop(task_harness_t *h)
{
    return &h->loop;
}

static const tern_task_def *find_task(const tern_plugin *p, const char *entry)
{
    size_t plen = strlen(p->name);
    if (strncmp(entry, p->name, plen) == 0 && entry[plen] == '.')
        entry += plen + 1; /* "core.sleep" is accepted as well as "sleep" */
    for (const tern_task_def *const *t = p->tasks; *t != NULL; t++) {
        if ((*t)->name != NULL && strcmp((*t)->name, entry) == 0)
            return *t;
    }
    return NULL;
}

/* See task_harness.h. */
int task_harness_run(task_harness_t *h, const char *entry, const json_t *args, const json_t *params,
                     const json_t *state, uint64_t bound_ms, uint64_t cancel_after_ms,
                     harness_run_t *out)
{
    memset(out, 0, sizeof *out);
    out->progress = json_array();
    const tern_task_def *def = find_task(h->plugin, entry);
    if (def == NULL)
        return -ENOENT;

    char uuid[37];
    uuid_v4(uuid);
    char task_name[256], idem[128];
    snprintf(task_name, sizeof task_name, "%s.%s", h->plugin->name, def->name);
    snprintf(idem, sizeof idem, "%s/chain/0", uuid);

    run_t run = {.out = out, .started_ms = clock_mono_ms()};
    uv_update_time(&h->loop); /* the bounds count from now, not from the last iteration */
    h->bound.data = &run;
    h->cancel.data = &run;
    uv_timer_start(&h->bound, on_bound_passed, bound_ms, 0);
    if (cancel_after_ms > 0)
        uv_timer_start(&h->cancel, on_cancel_due, cancel_after_ms, 0);

    task_ctx_opts_t opts = {
        .loop = &h->loop,
        .def = def,
        .plugin_name = h->plugin->name,
        .plugin_state = h->state,
        .task_name = task_name,
        .job_uuid = uuid,
        .params = params,
        .state = state,
        .step_name = def->name,
        .attempt = 1,
        .idempotency_key = idem,
        .http = h->http,
        .allow = h->allow,
        .redis = NULL,
        .sink = {.on_outcome = on_outcome,
                 .on_progress = on_progress,
                 .on_closed = on_closed,
                 .owner = &run},
    };
    json_t *no_args = args == NULL ? json_object() : NULL;
    run.ctx = task_ctx_start(&opts, args != NULL ? args : no_args);
    json_decref(no_args);

    while (!run.closed) {
        if (uv_run(&h->loop, UV_RUN_ONCE) == 0 && !run.closed) {
            /* Nothing left that could finish the attempt: a bug of the context. */
            fail_msg("task %s: the loop ran dry before the context closed", task_name);
        }
    }
    uv_timer_stop(&h->bound);
    uv_timer_stop(&h->cancel);
    h->bound.data = NULL;
    h->cancel.data = NULL;
    if (!out->finished)
        out->elapsed_ms = clock_mono_ms() - run.started_ms;

    if (out->finished)
        return 0;
    return run.timed_out ? -ETIMEDOUT : -ECANCELED;
}

/* See task_harness.h. */
void harness_run_dispose(harness_run_t *r)
{
    if (r == NULL)
        return;
    if (r->finished)
        task_outcome_dispose(&r->outcome);
    json_decref(r->progress);
    memset(r, 0, sizeof *r);
}

static void on_harness_timer_closed(uv_handle_t *h)
{
    task_harness_t *th = h->data;
    th->timers_open--;
}

/* See task_harness.h. */
void task_harness_free(task_harness_t *h)
{
    if (h == NULL)
        return;
    if (h->initialised && h->plugin->fini != NULL)
        h->plugin->fini(h->state);
    http_client_free(h->http);
    h->bound.data = h;
    h->cancel.data = h;
    uv_close((uv_handle_t *)&h->bound, on_harness_timer_closed);
    uv_close((uv_handle_t *)&h->cancel, on_harness_timer_closed);
    int rc = loop_close_bounded(&h->loop, CLOSE_BOUND_MS);
    int open = h->timers_open;
    dlclose(h->dl);
    net_allow_free(h->allow);
    free(h);
    assert_int_equal(open, 0);
    assert_int_equal(rc, 0);
}

/* See task_harness.h. */
void harness_run_assert_failed(const harness_run_t *r, const char *code, const char *message_part)
{
    assert_true(r->finished);
    assert_int_equal(r->outcome.kind, TASK_FAILED);
    if (strcmp(r->outcome.code, code) != 0)
        fail_msg("code %s (%s), expected %s", r->outcome.code, r->outcome.message, code);
    if (strstr(r->outcome.message, message_part) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", r->outcome.message, message_part);
}

/* See task_harness.h. */
harness_run_t task_harness_run_text(task_harness_t *h, const char *entry, const char *args_text,
                                    uint64_t bound_ms)
{
    json_t *args = task_harness_json(args_text);
    harness_run_t r;
    assert_int_equal(task_harness_run(h, entry, args, NULL, NULL, bound_ms, 0, &r), 0);
    assert_true(r.finished);
    json_decref(args);
    return r;
}

/* See task_harness.h. */
json_t *task_harness_run_ok(task_harness_t *h, const char *entry, const char *args_text,
                            uint64_t bound_ms)
{
    harness_run_t r = task_harness_run_text(h, entry, args_text, bound_ms);
    if (r.outcome.kind != TASK_DONE)
        fail_msg("%s %s failed: %s %s", entry, args_text, r.outcome.code ? r.outcome.code : "?",
                 r.outcome.message ? r.outcome.message : "?");
    json_t *result = json_incref(r.outcome.result);
    harness_run_dispose(&r);
    return result;
}

/* See task_harness.h. */
void task_harness_run_fails(task_harness_t *h, const char *entry, const char *args_text,
                            uint64_t bound_ms, const char *code, const char *message_part)
{
    harness_run_t r = task_harness_run_text(h, entry, args_text, bound_ms);
    harness_run_assert_failed(&r, code, message_part);
    harness_run_dispose(&r);
}

/* See task_harness.h. */
json_t *task_harness_json(const char *text)
{
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
    if (v == NULL)
        fail_msg("bad test JSON %s: %s", text, jerr.text);
    return v;
}
