/*
 * main.c -- ternd: reads the configuration, starts the embedded Redis when no address
 * is given, loads plugins and workflows, runs the runner (and, with the api role, the
 * parts of the API that exist), and shuts down in order on SIGTERM/SIGINT.
 *
 * Flags handled here rather than in config.c because they are modes of this program,
 * not settings of a deployment:
 *   --task-helper           run one isolated task attempt (stdin/stdout; internal)
 *   --run WORKFLOW          submit one job of WORKFLOW, print each step as it ends,
 *                           print the job's outcome and results, then exit with 0 when
 *                           it succeeded and 1 otherwise
 *   --params JSON           params of the --run job ({} by default)
 *   --target TARGET         target of the --run job
 */
#include <assert.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/log.h"
#include "events/events.h"
#include "http/http_api.h"
#include "http/http_guard.h"
#include "model/workflow_cache.h"
#include "ops/job_ops.h"
#include "ops/schedule_fire.h"
#include "ops/workflow_ops.h"
#include "plugins/plugin_loader.h"
#include "redis/redis_addr.h"
#include "redis/redis_embedded.h"
#include "run/admission.h"
#include "run/http_client.h"
#include "run/plugin_redis.h"
#include "run/postback.h"
#include "run/runner.h"
#include "run/task_ctx.h"
#include "run/task_isolated.h"
#include "store/store.h"
#include "ternd/config.h"

#ifndef TERN_PLUGIN_DIR
#define TERN_PLUGIN_DIR "/usr/local/lib/tern/tasks"
#endif

typedef struct ternd {
    uv_loop_t *loop;
    ternd_config_t cfg;
    redis_embedded_t embedded;
    redis_addr_t addr;
    char *redis_url; /* the URL children (isolated helpers) connect to */
    plugin_registry_t *plugins;
    http_client_t *http;
    store_t *store;
    job_ops_t *ops;
    admission_t *admission;        /* runs the admission checks of the creates made here */
    task_redis_ops_t plugin_redis; /* tern_redis_eval of admission checks */
    runner_t *runner;
    /* Parsed workflow versions, shared by the API's creates and the runner: a version a
     * create parsed is the one its job runs on, without parsing it again. */
    workflow_cache_t *workflows;
    postback_t *postback;       /* every role delivers post-backs */
    schedule_fire_t *schedules; /* the API role fires recurring schedules */
    int stops_pending;          /* runner, post-back deliverer and schedule firer still stopping */
    http_api_t *api;
    http_guard_t guard;   /* the API's tokens and accepted names */
    char *env_token;      /* $TERN_API_TOKEN as ternd found it (wiped from the environment) */
    uv_timer_t api_drain; /* h2o needs the loop for a moment after its shutdown */
    uv_signal_t sigterm, sigint;
    bool ready;
    bool stopping;
    int exit_code;
    /* workflows loading */
    size_t wf_pending;
    int wf_errors;
    /* --run */
    const char *run_workflow;
    const char *run_params;
    const char *run_target;
    char run_uuid[40];
    events_follow_t *follow;
    uint64_t run_started_ms;
} ternd_t;

static void shutdown_begin(ternd_t *t, int exit_code);

/* ---- the plugin directory next to the binary ---------------------------------- */

/* A build tree keeps plugins in build/tasks next to build/engine/ternd; an install
 * uses TERN_PLUGIN_DIR. */
static char *default_plugin_dir(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash != NULL) {
            *slash = '\0';
            char *candidate = xasprintf("%s/../tasks", exe);
            struct stat st;
            char real[PATH_MAX];
            if (stat(candidate, &st) == 0 && S_ISDIR(st.st_mode) &&
                realpath(candidate, real) != NULL) {
                free(candidate);
                return xstrdup(real);
            }
            free(candidate);
        }
    }
    return xstrdup(TERN_PLUGIN_DIR);
}

static char *self_exe(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return NULL;
    exe[n] = '\0';
    return xstrdup(exe);
}

/* ---- --run: one job, printed as it goes --------------------------------------- */

static void print_results(ternd_t *t, const json_t *job)
{
    (void)t;
    const char *lists[] = {"chain_results", "onerror_results", "oncancel_results"};
    for (size_t l = 0; l < 3; l++) {
        json_t *res = json_object_get(job, lists[l]);
        if (json_array_size(res) == 0)
            continue;
        printf("%s:\n", lists[l]);
        size_t i;
        json_t *e;
        json_array_foreach(res, i, e)
        {
            json_t *err = json_object_get(e, "error");
            char *what = json_dumps(json_is_null(err) ? json_object_get(e, "result") : err,
                                    JSON_COMPACT | JSON_ENCODE_ANY);
            printf("  %s %-12s %-16s attempts %lld  %s %s\n", json_is_null(err) ? "ok  " : "FAIL",
                   json_string_value(json_object_get(e, "name")),
                   json_string_value(json_object_get(e, "task")),
                   (long long)json_integer_value(json_object_get(e, "attempts")),
                   json_is_null(err) ? "result" : "error", what ? what : "null");
            free(what);
        }
    }
    json_t *state = json_object_get(job, "state");
    if (json_object_size(state) > 0) {
        char *s = json_dumps(state, JSON_COMPACT);
        printf("state: %s\n", s);
        free(s);
    }
}

static void on_run_job_read(void *data, int status, const json_t *job, const char *message)
{
    ternd_t *t = data;
    if (status != 0) {
        fprintf(stderr, "ternd: cannot read job %s: %s\n", t->run_uuid, message);
        shutdown_begin(t, 1);
        return;
    }
    const char *ex = json_string_value(json_object_get(job, "execution"));
    print_results(t, job);
    json_t *err = json_object_get(job, "error");
    printf("job %s %s in %.3f s%s%s\n", t->run_uuid, ex,
           (double)(clock_wall_ms() - t->run_started_ms) / 1000.0, json_is_object(err) ? ": " : "",
           json_is_object(err) ? json_string_value(json_object_get(err, "message")) : "");
    fflush(stdout);
    shutdown_begin(t, ex != NULL && strcmp(ex, "succeeded") == 0 ? 0 : 1);
}

static bool on_run_event(void *data, const char *id, const json_t *ev)
{
    (void)id;
    ternd_t *t = data;
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (type == NULL)
        return true;
    if (strcmp(type, "step") == 0) {
        const char *status = json_string_value(json_object_get(ev, "status"));
        json_t *err = json_object_get(ev, "error");
        printf("  %-9s %-8s %-12s %-16s %5lld ms%s%s\n", status,
               json_string_value(json_object_get(ev, "phase")),
               json_string_value(json_object_get(ev, "name")),
               json_string_value(json_object_get(ev, "task")),
               (long long)json_integer_value(json_object_get(ev, "duration_ms")), err ? "  " : "",
               err ? json_string_value(json_object_get(err, "message")) : "");
    } else if (strcmp(type, "finished") == 0) {
        t->follow = NULL; /* returning false frees it */
        job_ops_get(t->ops, t->run_uuid, on_run_job_read, t);
        return false;
    } else if (strcmp(type, "progress") != 0) {
        printf("  %s\n", type);
    }
    fflush(stdout);
    return true;
}

static void on_run_opened(void *data, int status, const json_t *res, const char *message)
{
    (void)res;
    ternd_t *t = data;
    if (status != 0) {
        fprintf(stderr, "ternd: cannot follow job %s: %s\n", t->run_uuid, message);
        shutdown_begin(t, 1);
        return;
    }
    t->follow = events_follow(t->loop, &t->addr, t->run_uuid, "0", on_run_event, t);
}

static void on_run_created(void *data, int status, const json_t *res, const char *message)
{
    ternd_t *t = data;
    if (status != 0) {
        /* A refusal by an admission check comes with the check's code. */
        const char *code = json_string_value(json_object_get(res, "code"));
        fprintf(stderr, "ternd: cannot create a job of %s: %s%s%s\n", t->run_workflow,
                code != NULL ? code : "", code != NULL ? ": " : "", message);
        shutdown_begin(t, 1);
        return;
    }
    snprintf(t->run_uuid, sizeof t->run_uuid, "%s",
             json_string_value(json_object_get(res, "uuid")));
    printf("job %s: workflow %s %s queued\n", t->run_uuid,
           json_string_value(json_object_get(res, "name")),
           json_string_value(json_object_get(res, "version")));
    fflush(stdout);
    /* The job's story is followed in its own stream, which a new job gets on demand. */
    job_ops_events_open(t->ops, t->run_uuid, on_run_opened, t);
}

static void run_start(ternd_t *t)
{
    json_error_t jerr;
    json_t *params = json_loads(t->run_params != NULL ? t->run_params : "{}", 0, &jerr);
    if (params == NULL) {
        fprintf(stderr, "ternd: --params: not JSON: %s (column %d)\n", jerr.text, jerr.column);
        shutdown_begin(t, 2);
        return;
    }
    t->run_started_ms = clock_wall_ms();
    job_create_req_t req = {
        .workflow = t->run_workflow,
        .params = params,
        .target = t->run_target,
    };
    job_ops_create(t->ops, &req, on_run_created, t);
    json_decref(params);
}

/* ---- workflows directory ------------------------------------------------------ */

static void on_ready(ternd_t *t)
{
    if (t->ready)
        return;
    t->ready = true;
    char *redacted = redis_addr_redacted(&t->addr);
    json_t *f = json_pack(
        "{s:s, s:s, s:s, s:I, s:i}", "role",
        t->cfg.roles == CONFIG_ROLE_BOTH ? "both"
                                         : (t->cfg.roles & CONFIG_ROLE_API ? "api" : "runner"),
        "runner_id", t->cfg.runner_id, "redis", redacted, "concurrency",
        (json_int_t)t->cfg.concurrency, "api_port", t->api != NULL ? http_api_port(t->api) : 0);
    log_msg(TERN_LOG_INFO, "ternd", f, "ready to serve and to claim");
    json_decref(f);
    free(redacted);
    if (t->run_workflow != NULL)
        run_start(t);
}

static void on_workflow_loaded(void *data, int status, const json_t *res, const char *message)
{
    ternd_t *t = data;
    if (status != 0) {
        log_msg(TERN_LOG_ERROR, "workflows", NULL, "%s", message);
        t->wf_errors++;
    } else {
        json_t *f =
            json_pack("{s:O, s:O, s:O}", "workflow", json_object_get(res, "name"), "version",
                      json_object_get(res, "version"), "uuid", json_object_get(res, "uuid"));
        log_msg(TERN_LOG_INFO, "workflows", f, "workflow %s",
                json_string_value(json_object_get(res, "status")));
        json_decref(f);
    }
    if (--t->wf_pending == 0)
        on_ready(t);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Stores every *.json of the workflows directory; ready once all are answered. A file
 * that does not parse is logged with its path and the fault, and skipped. */
static void load_workflows(ternd_t *t)
{
    if (t->cfg.workflows_dir == NULL) {
        on_ready(t);
        return;
    }
    DIR *d = opendir(t->cfg.workflows_dir);
    if (d == NULL) {
        log_msg(TERN_LOG_ERROR, "workflows", NULL, "cannot open workflows directory %s: %s",
                t->cfg.workflows_dir, strerror(errno));
        on_ready(t);
        return;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len > 5 && strcmp(de->d_name + len - 5, ".json") == 0) {
            names = xrealloc(names, (n + 1) * sizeof *names);
            names[n++] = xstrdup(de->d_name);
        }
    }
    closedir(d);
    qsort(names, n, sizeof *names, name_cmp);
    t->wf_pending = 1; /* held until every file is sent */
    for (size_t i = 0; i < n; i++) {
        char *path = xasprintf("%s/%s", t->cfg.workflows_dir, names[i]);
        json_error_t jerr;
        json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
        if (doc == NULL) {
            log_msg(TERN_LOG_ERROR, "workflows", NULL, "%s: line %d, column %d: %s", path,
                    jerr.line, jerr.column, jerr.text);
            t->wf_errors++;
        } else {
            t->wf_pending++;
            workflow_ops_put(t->ops, doc, on_workflow_loaded, t);
            json_decref(doc);
        }
        free(path);
        free(names[i]);
    }
    free(names);
    if (--t->wf_pending == 0)
        on_ready(t);
}

/* ---- store state -------------------------------------------------------------- */

static void on_store_state(store_t *s, bool up, void *data)
{
    (void)s;
    ternd_t *t = data;
    if (up)
        log_msg(TERN_LOG_INFO, "store", NULL, "Redis is up; scripts loaded");
    else
        log_msg(TERN_LOG_WARN, "store", NULL, "Redis is unreachable; retrying");
    if (t->runner != NULL)
        runner_store_state(t->runner, up);
    if (t->postback != NULL)
        postback_store_state(t->postback, up);
    if (t->schedules != NULL)
        schedule_fire_store_state(t->schedules, up);
    if (up && !t->ready && t->wf_pending == 0)
        load_workflows(t);
}

/* ---- shutdown ----------------------------------------------------------------- */

static void on_closed_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void on_api_drained(uv_timer_t *timer)
{
    ternd_t *t = timer->data;
    uv_close((uv_handle_t *)&t->api_drain, NULL);
    /* h2o's context keeps the loop alive; main disposes it once uv_run returns. */
    uv_stop(t->loop);
}

static void finish_shutdown(ternd_t *t)
{
    if (t->api != NULL) {
        http_api_shutdown(t->api);
        uv_timer_init(t->loop, &t->api_drain);
        t->api_drain.data = t;
        uv_timer_start(&t->api_drain, on_api_drained, 1100, 0);
    }
    if (t->follow != NULL) {
        events_follow_stop(t->follow);
        t->follow = NULL;
    }
    job_ops_close(t->ops); /* the creates still checking locks are answered */
    store_free(t->store);
    t->store = NULL;
    http_client_free(t->http);
    t->http = NULL;
    uv_close((uv_handle_t *)&t->sigterm, NULL);
    uv_close((uv_handle_t *)&t->sigint, NULL);
}

/* The store and the HTTP client go once both the runner and the post-back deliverer
 * (which use them to the end) have stopped. */
static void on_part_stopped(void *data)
{
    ternd_t *t = data;
    if (--t->stops_pending == 0)
        finish_shutdown(t);
}

/* The runner as job_ops sees it (job_ops_local_runner_t). */
static bool local_reserve(void *data, const char *queue)
{
    return runner_direct_reserve(data, queue);
}

static void local_start(void *data, const char *uuid, const store_args_t *fields, const char *doc,
                        size_t doc_len, long long server_now)
{
    runner_direct_start(data, uuid, fields, doc, doc_len, server_now);
}

static void local_release(void *data, bool lost)
{
    runner_direct_release(data, lost);
}

/* The admission checks as job_ops sees them (job_ops_admission_t): a run and the
 * create's callback, which the run's answer is handed to. */
typedef struct admission_call {
    admission_run_t *run;
    job_ops_admitted_cb done;
    void *op;
} admission_call_t;

static void on_admission_verdict(void *data, const admission_verdict_t *v)
{
    admission_call_t call = *(admission_call_t *)data;
    free(data);
    call.done(call.op, v->status, v->code, v->message, v->results);
}

static void *admission_start(void *data, const workflow_t *wf, const char *uuid, const char *target,
                             const json_t *params, job_ops_admitted_cb done, void *op)
{
    admission_call_t *call = xcalloc(1, sizeof *call);
    call->done = done;
    call->op = op;
    call->run = admission_run_start(data, wf, uuid, target, params, on_admission_verdict, call);
    return call;
}

static void admission_cancel(void *data, void *run)
{
    (void)data;
    admission_call_t *call = run;
    admission_run_cancel(call->run);
    free(call);
}

static void on_runner_stopped(void *data)
{
    ternd_t *t = data;
    job_ops_set_local_runner(t->ops, NULL);
    t->runner = NULL;
    on_part_stopped(t);
}

static void on_postback_stopped(void *data)
{
    ternd_t *t = data;
    t->postback = NULL;
    on_part_stopped(t);
}

static void on_schedules_stopped(void *data)
{
    ternd_t *t = data;
    t->schedules = NULL;
    on_part_stopped(t);
}

static void shutdown_begin(ternd_t *t, int exit_code)
{
    if (t->stopping)
        return;
    t->stopping = true;
    t->exit_code = exit_code;
    log_msg(TERN_LOG_INFO, "ternd", NULL, "shutting down");
    if (t->api != NULL)
        http_api_shutdown(t->api);
    t->stops_pending = 1;
    if (t->postback != NULL) {
        t->stops_pending++;
        postback_stop(t->postback, on_postback_stopped, t);
    }
    if (t->schedules != NULL) {
        t->stops_pending++;
        schedule_fire_stop(t->schedules, on_schedules_stopped, t);
    }
    if (t->runner != NULL)
        runner_stop(t->runner, t->cfg.shutdown_grace_ms, on_runner_stopped, t);
    else
        on_part_stopped(t);
}

static void on_signal(uv_signal_t *h, int signum)
{
    ternd_t *t = h->data;
    if (t->stopping && signum == SIGINT) {
        log_msg(TERN_LOG_WARN, "ternd", NULL, "second interrupt: stopping at once");
        uv_stop(t->loop);
        return;
    }
    shutdown_begin(t, t->run_workflow != NULL ? 130 : 0);
}

/* ---- start-up helpers ---------------------------------------------------------- */

#define TOKEN_FILE_MAX (64 * 1024) /* bytes */

/* Overwrites and frees a secret. */
static void secret_free(char *s)
{
    if (s == NULL)
        return;
    volatile char *p = s;
    for (size_t i = 0; p[i] != '\0'; i++)
        p[i] = '\0';
    free(s);
}

/* Takes $TERN_API_TOKEN out of the environment, so no child (exec steps, isolated
 * helpers, the embedded redis-server) inherits it. unsetenv alone is not enough:
 * /proc/PID/environ shows the block the process started with, so the original bytes
 * are overwritten too. Returns the value (malloc'd) or NULL. */
static char *take_env_token(void)
{
    static const char name[] = "TERN_API_TOKEN=";
    char *first = NULL;
    char *found[16];
    size_t n = 0;
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        if (strncmp(*e, name, sizeof name - 1) != 0)
            continue;
        if (first == NULL)
            first = xstrdup(*e + sizeof name - 1);
        if (n < TERN_ARRAY_SIZE(found))
            found[n++] = *e;
    }
    if (first == NULL)
        return NULL;
    if (unsetenv("TERN_API_TOKEN") != 0)
        fprintf(stderr, "ternd: cannot remove TERN_API_TOKEN from the environment: %s\n",
                strerror(errno));
    for (size_t i = 0; i < n; i++) {
        volatile char *p = found[i];
        for (size_t k = 0; p[k] != '\0'; k++)
            p[k] = '\0';
    }
    return first;
}

/* Reads the API's tokens into t->guard: from --api-token-file (several tokens with
 * scopes, see http_guard.h), else from $TERN_API_TOKEN (one operator token). Never
 * from a flag: a flag is visible to every user of the machine in the process list. */
static int load_api_tokens(ternd_t *t, char *err, size_t errlen)
{
    const char *path = t->cfg.api_token_file;
    char why[512];
    if (path != NULL) {
        FILE *f = fopen(path, "re");
        if (f == NULL)
            return err_set(err, errlen, TERN_EINVAL, "--api-token-file %s: %s", path,
                           strerror(errno));
        char *buf = xmalloc(TOKEN_FILE_MAX + 1);
        size_t n = fread(buf, 1, TOKEN_FILE_MAX + 1, f);
        bool failed = ferror(f) != 0;
        fclose(f);
        int rc = 0;
        if (failed)
            rc = err_set(err, errlen, TERN_EIO, "--api-token-file %s: read failed", path);
        else if (n > TOKEN_FILE_MAX)
            rc = err_set(err, errlen, TERN_E2BIG, "--api-token-file %s: larger than %d KiB", path,
                         TOKEN_FILE_MAX / 1024);
        else if (http_guard_tokens_parse(&t->guard, buf, n, why, sizeof why) != 0)
            rc = err_set(err, errlen, TERN_EINVAL, "--api-token-file %s: %s", path, why);
        volatile char *p = buf;
        for (size_t i = 0; i < n && i <= TOKEN_FILE_MAX; i++)
            p[i] = '\0';
        free(buf);
        return rc;
    }
    if (t->env_token != NULL && t->env_token[0] != '\0' &&
        http_guard_add_token(&t->guard, t->env_token, strlen(t->env_token), HTTP_SCOPE_OPERATOR,
                             why, sizeof why) != 0)
        return err_set(err, errlen, TERN_EINVAL, "TERN_API_TOKEN: %s", why);
    return 0;
}

/* The names and origins the API accepts besides IP literals and localhost. */
static int load_api_names(ternd_t *t, char *err, size_t errlen)
{
    for (size_t i = 0; t->cfg.allowed_hosts != NULL && t->cfg.allowed_hosts[i] != NULL; i++)
        if (http_guard_allow_host(&t->guard, t->cfg.allowed_hosts[i], err, errlen) != 0)
            return TERN_EINVAL;
    for (size_t i = 0; t->cfg.allowed_origins != NULL && t->cfg.allowed_origins[i] != NULL; i++)
        if (http_guard_allow_origin(&t->guard, t->cfg.allowed_origins[i], err, errlen) != 0)
            return TERN_EINVAL;
    return 0;
}

/* A start that failed after the store and HTTP client were made (before the runner
 * and the signal handlers): close them and stop Redis. */
static int fail_start(ternd_t *t)
{
    job_ops_close(t->ops);
    store_free(t->store);
    http_client_free(t->http);
    uv_run(t->loop, UV_RUN_DEFAULT);
    uv_walk(t->loop, on_closed_walk, NULL);
    uv_run(t->loop, UV_RUN_DEFAULT);
    uv_loop_close(t->loop);
    job_ops_free(t->ops);
    workflow_cache_free(t->workflows);
    plugin_registry_free(t->plugins);
    redis_embedded_stop(&t->embedded, 10000);
    redis_addr_dispose(&t->addr);
    free(t->redis_url);
    http_guard_dispose(&t->guard);
    secret_free(t->env_token);
    config_dispose(&t->cfg);
    return 1;
}

/* ---- main --------------------------------------------------------------------- */

/* Every API connection, an open event stream included, costs a file descriptor; the
 * usual soft limit of 1024 would cap a ternd at about a thousand watchers while the
 * hard limit allows far more, so the soft limit is raised to the hard one. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* Removes the main-only flags (see the top of this file) from argv. */
static int take_main_flags(ternd_t *t, int *argc, char **argv)
{
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char **slot = NULL;
        if (strcmp(argv[i], "--run") == 0)
            slot = &t->run_workflow;
        else if (strcmp(argv[i], "--params") == 0)
            slot = &t->run_params;
        else if (strcmp(argv[i], "--target") == 0)
            slot = &t->run_target;
        if (slot != NULL) {
            if (i + 1 >= *argc) {
                fprintf(stderr, "ternd: %s: missing value\n", argv[i]);
                return -1;
            }
            *slot = argv[++i];
            continue;
        }
        argv[out++] = argv[i];
    }
    *argc = out;
    argv[out] = NULL;
    return 0;
}

int main(int argc, char **argv)
{
    /* First of all, before any child can be started. */
    char *env_token = take_env_token();
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();
    char *plugin_dir = default_plugin_dir();
    if (argc >= 2 && strcmp(argv[1], "--task-helper") == 0) {
        secret_free(env_token);
        log_init("ternd-helper", TERN_LOG_INFO, 2);
        int rc = task_helper_main(plugin_dir);
        free(plugin_dir);
        return rc;
    }
    log_init("ternd", TERN_LOG_INFO, 2);
    static ternd_t t;
    t.env_token = env_token;
    http_guard_init(&t.guard);
    if (take_main_flags(&t, &argc, argv) != 0) {
        free(plugin_dir);
        secret_free(t.env_token);
        return 2;
    }
    char err[1024];
    int rc = config_load(&t.cfg, argc, argv, plugin_dir, err, sizeof err);
    free(plugin_dir);
    if (rc == 1) {
        config_dispose(&t.cfg);
        secret_free(t.env_token);
        return 0;
    }
    if (rc != 0) {
        fprintf(stderr, "ternd: %s\n%s", err, config_usage());
        config_dispose(&t.cfg);
        secret_free(t.env_token);
        return 2;
    }
    log_init("ternd", t.cfg.log_level, 2);

    if (t.cfg.redis_url == NULL) {
        rc = redis_embedded_start(t.cfg.data_dir, t.cfg.redis_server, 15000, &t.embedded, err,
                                  sizeof err);
        if (rc != 0) {
            log_msg(TERN_LOG_FATAL, "ternd", NULL, "%s", err);
            config_dispose(&t.cfg);
            secret_free(t.env_token);
            return 1;
        }
        t.redis_url = redis_addr_unix_url(t.embedded.socket_path);
        log_msg(TERN_LOG_INFO, "ternd", NULL, "embedded Redis started (pid %d, socket %s)",
                (int)t.embedded.pid, t.embedded.socket_path);
    } else {
        t.redis_url = xstrdup(t.cfg.redis_url);
    }
    if (redis_addr_parse(t.redis_url, &t.addr, err, sizeof err) != 0) {
        log_msg(TERN_LOG_FATAL, "ternd", NULL, "%s", err);
        redis_embedded_stop(&t.embedded, 10000);
        config_dispose(&t.cfg);
        secret_free(t.env_token);
        free(t.redis_url);
        return 1;
    }

    t.loop = uv_default_loop();
    t.plugins = plugin_registry_new(t.cfg.plugin_dir, task_ctx_host(), err, sizeof err);
    if (t.plugins == NULL) {
        log_msg(TERN_LOG_FATAL, "ternd", NULL, "%s", err);
        redis_embedded_stop(&t.embedded, 10000);
        redis_addr_dispose(&t.addr);
        config_dispose(&t.cfg);
        secret_free(t.env_token);
        free(t.redis_url);
        return 1;
    }
    /* No plugin's view may overlap a route of the API: the registry refuses such a
     * plugin, naming the route. */
    const char *routes[128];
    size_t n_routes = http_api_route_patterns(routes, TERN_ARRAY_SIZE(routes));
    assert(n_routes <= TERN_ARRAY_SIZE(routes));
    for (size_t i = 0; i < n_routes; i++)
        plugin_registry_reserve(t.plugins, routes[i]);
    int refused = plugin_registry_load_all(t.plugins, t.cfg.plugins);
    if (refused > 0)
        log_msg(TERN_LOG_WARN, "plugins", NULL, "%d plugins refused (see above)", refused);
    t.http = http_client_new(t.loop);

    store_opts_t so = {
        .addr = &t.addr,
        .name = t.cfg.runner_id,
        .event_max_job = t.cfg.event_stream_max,
        .event_max_global = t.cfg.global_event_stream_max,
        .retention_ms = config_retention_ms(&t.cfg),
        .success_events_ms = (uint64_t)t.cfg.success_events_s * 1000,
        .health_timeout_ms = t.cfg.redis_health_timeout_ms,
        .command_timeout_ms = t.cfg.redis_command_timeout_ms,
        .on_state = on_store_state,
        .data = &t,
    };
    t.store = store_new(t.loop, &so);
    t.workflows = workflow_cache_new(0);
    job_ops_opts_t jo = {.store = t.store,
                         .plugins = t.plugins,
                         .max_params_bytes = t.cfg.max_params_bytes,
                         .loop = t.loop,
                         .max_lock_instructions = t.cfg.max_lock_instructions,
                         .workflows = t.workflows};
    t.ops = job_ops_new(&jo);
    if (t.cfg.roles & CONFIG_ROLE_API) {
        if (load_api_tokens(&t, err, sizeof err) != 0 || load_api_names(&t, err, sizeof err) != 0) {
            log_msg(TERN_LOG_FATAL, "ternd", NULL, "%s", err);
            return fail_start(&t);
        }
        secret_free(t.env_token); /* the guard keeps its own copy */
        t.env_token = NULL;
        /* With a token in memory, no other process of this user may read it through
         * /proc/PID/mem or environ or attach a debugger (exec steps run as this user).
         * It also stops core dumps. /proc/PID/status and stat stay readable. */
        if (t.guard.n_tokens > 0 && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
            log_msg(TERN_LOG_WARN, "ternd", NULL, "prctl(PR_SET_DUMPABLE, 0) failed: %s",
                    strerror(errno));
        uint32_t reserve = t.cfg.fd_reserve;
        if (reserve == 0)
            reserve = 256 + ((t.cfg.roles & CONFIG_ROLE_RUNNER) ? 3 * t.cfg.concurrency : 0);
        http_api_opts_t ao = {
            .loop = t.loop,
            .listen = t.cfg.listen,
            .store = t.store,
            .ops = t.ops,
            .plugins = t.plugins,
            .addr = &t.addr,
            .guard = &t.guard,
            .tls_cert = t.cfg.tls_cert,
            .tls_key = t.cfg.tls_key,
            .max_body_bytes = t.cfg.max_body_bytes,
            .stream_heartbeat_ms = t.cfg.event_heartbeat_ms,
            .list_max_bytes = t.cfg.list_max_bytes,
            .view_timeout_ms = t.cfg.view_timeout_ms,
            .conns =
                {
                    .max_connections = t.cfg.max_connections,
                    .fd_reserve = reserve,
                    .header_timeout_ms = t.cfg.header_timeout_ms,
                    .body_timeout_ms = t.cfg.body_timeout_ms,
                    .idle_timeout_ms = t.cfg.idle_timeout_ms,
                    .io_timeout_ms = t.cfg.io_timeout_ms,
                },
        };
        if (http_api_start(&ao, &t.api, err, sizeof err) != 0) {
            log_msg(TERN_LOG_FATAL, "ternd", NULL, "%s", err);
            return fail_start(&t);
        }
    }

    char *exe = self_exe();
    /* Admission checks run where creates are made: in every role (ternd --run creates
     * too). */
    plugin_redis_ops(t.store, &t.plugin_redis);
    admission_opts_t adm = {
        .loop = t.loop,
        .plugins = t.plugins,
        .http = t.http,
        .redis = &t.plugin_redis,
        .helper_exe = exe,
        .plugin_dir = t.cfg.plugin_dir,
        .redis_url = t.redis_url,
        .default_timeout_ms = t.cfg.admission_timeout_ms,
    };
    t.admission = admission_new(&adm);
    job_ops_admission_t ja = {
        .start = admission_start, .cancel = admission_cancel, .data = t.admission};
    job_ops_set_admission(t.ops, &ja);
    if (t.cfg.roles & CONFIG_ROLE_RUNNER) {
        runner_opts_t ro = {
            .id = t.cfg.runner_id,
            .queues = (const char *const *)t.cfg.queues,
            .n_queues = t.cfg.n_queues,
            .concurrency = t.cfg.concurrency,
            .lease_ms = t.cfg.lease_ms,
            .heartbeat_ms = t.cfg.heartbeat_ms,
            .plugins = t.plugins,
            .http = t.http,
            .helper_exe = exe,
            .plugin_dir = t.cfg.plugin_dir,
            .redis_url = t.redis_url,
            .workflows = t.workflows,
        };
        t.runner = runner_new(t.loop, t.store, &ro);
    }
    if (t.runner != NULL && t.cfg.direct_start) {
        /* The API's creates may start jobs on this runner at once (direct start). */
        job_ops_local_runner_t lr = {.id = t.cfg.runner_id,
                                     .reserve = local_reserve,
                                     .start = local_start,
                                     .release = local_release,
                                     .data = t.runner};
        job_ops_set_local_runner(t.ops, &lr);
    }
    free(exe);
    postback_opts_t po = {
        .id = t.cfg.runner_id,
        .initial_ms = t.cfg.postback_initial_ms,
        .max_ms = t.cfg.postback_max_ms,
        .max_attempts = t.cfg.postback_max_attempts,
        .timeout_ms = t.cfg.postback_timeout_ms,
        .allow_networks = t.cfg.postback_allow_networks,
    };
    t.postback = postback_new(t.loop, t.store, t.http, &po);
    if (store_is_up(t.store))
        postback_store_state(t.postback, true);
    if (t.cfg.roles & CONFIG_ROLE_API) {
        /* Any API process fires schedules; Redis gives each tick to one of them. Their
         * jobs are made through job_ops, so they may start on this runner at once. */
        t.schedules = schedule_fire_new(t.loop, t.ops, t.store, t.cfg.runner_id);
        if (store_is_up(t.store))
            schedule_fire_store_state(t.schedules, true);
    }

    uv_signal_init(t.loop, &t.sigterm);
    uv_signal_init(t.loop, &t.sigint);
    t.sigterm.data = t.sigint.data = &t;
    uv_signal_start(&t.sigterm, on_signal, SIGTERM);
    uv_signal_start(&t.sigint, on_signal, SIGINT);

    uv_run(t.loop, UV_RUN_DEFAULT);
    job_ops_close(t.ops); /* done unless a second interrupt stopped the loop early */
    http_api_dispose(t.api);
    t.api = NULL;

    /* Whatever is still open (a second Ctrl-C stopped the loop early) is closed now. */
    uv_walk(t.loop, on_closed_walk, NULL);
    uv_run(t.loop, UV_RUN_DEFAULT);
    uv_loop_close(t.loop);
    job_ops_free(t.ops);
    admission_free(t.admission);      /* its runs were answered or cancelled by job_ops_close */
    workflow_cache_free(t.workflows); /* after its users: the runner is gone too */
    plugin_registry_free(t.plugins);
    redis_embedded_stop(&t.embedded, 10000);
    redis_addr_dispose(&t.addr);
    free(t.redis_url);
    config_dispose(&t.cfg);
    http_guard_dispose(&t.guard);
    secret_free(t.env_token);
    log_msg(TERN_LOG_INFO, "ternd", NULL, "stopped");
    return t.exit_code;
}
