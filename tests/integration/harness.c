/*
 * harness.c -- processes, client and side channel for the integration tests; see
 * harness.h. Failures of the harness itself fail the running cmocka test.
 */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "base/alloc.h"
#include "events/events.h"
#include "ops/workflow_ops.h"

void itest_pause_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- directories -------------------------------------------------------------- */

void itest_dir_make(itest_dir_t *d)
{
    snprintf(d->path, sizeof d->path, "/tmp/tern-itest.XXXXXX");
    if (mkdtemp(d->path) == NULL)
        fail_msg("mkdtemp: %s", strerror(errno));
}

void itest_dir_remove(itest_dir_t *d)
{
    if (d->path[0] == '\0')
        return;
    pid_t pid = fork();
    if (pid == 0) {
        execlp("rm", "rm", "-rf", d->path, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    d->path[0] = '\0';
}

/* ---- redis-server ------------------------------------------------------------- */

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        fail_msg("cannot find a free port: %s", strerror(errno));
    close(fd);
    return ntohs(a.sin_port);
}

static bool redis_answers(int port)
{
    struct timeval tv = {0, 200000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    bool ok = false;
    if (c != NULL && !c->err) {
        redisReply *r = redisCommand(c, "PING");
        ok = r != NULL && r->type == REDIS_REPLY_STATUS;
        if (r != NULL)
            freeReplyObject(r);
    }
    if (c != NULL)
        redisFree(c);
    return ok;
}

static pid_t spawn_redis(itest_redis_t *r)
{
    char port[16], log[300];
    snprintf(port, sizeof port, "%d", r->port);
    snprintf(log, sizeof log, "%s/redis.log", r->dir);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1", "--dir",
               r->dir, "--appendonly", "yes", "--appendfsync", "always", "--save", "",
               "--daemonize", "no", "--logfile", log, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static bool wait_redis(itest_redis_t *r, unsigned ms)
{
    for (unsigned waited = 0; waited < ms; waited += 20) {
        if (redis_answers(r->port))
            return true;
        int st;
        if (waitpid(r->pid, &st, WNOHANG) == r->pid) {
            r->pid = 0;
            return false;
        }
        itest_pause_ms(20);
    }
    return false;
}

void itest_redis_start(itest_redis_t *r, const char *dir)
{
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    for (int tries = 0; tries < 5; tries++) {
        r->port = free_port();
        r->pid = spawn_redis(r);
        if (wait_redis(r, 10000)) {
            snprintf(r->url, sizeof r->url, "redis://127.0.0.1:%d", r->port);
            return;
        }
        if (r->pid > 0)
            itest_redis_stop(r, SIGKILL);
    }
    fail_msg("redis-server did not start (see %s/redis.log)", dir);
}

void itest_redis_stop(itest_redis_t *r, int sig)
{
    if (r->pid <= 0)
        return;
    kill(r->pid, sig);
    int st;
    waitpid(r->pid, &st, 0);
    r->pid = 0;
}

void itest_redis_restart(itest_redis_t *r)
{
    r->pid = spawn_redis(r);
    if (!wait_redis(r, 10000))
        fail_msg("redis-server did not restart on port %d", r->port);
}

static redisReply *redis_vcommand(const itest_redis_t *r, const char *fmt, va_list ap)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", r->port, tv);
    if (c == NULL || c->err) {
        if (c != NULL)
            redisFree(c);
        return NULL;
    }
    redisReply *reply = redisvCommand(c, fmt, ap);
    redisFree(c);
    return reply;
}

static redisReply *redis_command(const itest_redis_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *reply = redis_vcommand(r, fmt, ap);
    va_end(ap);
    return reply;
}

long long itest_redis_int(const itest_redis_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *reply = redis_vcommand(r, fmt, ap);
    va_end(ap);
    long long v = -1;
    if (reply != NULL && reply->type == REDIS_REPLY_INTEGER)
        v = reply->integer;
    else if (reply != NULL && reply->type == REDIS_REPLY_STRING)
        v = atoll(reply->str);
    if (reply != NULL)
        freeReplyObject(reply);
    return v;
}

long long itest_jobs_indexed(const itest_redis_t *r)
{
    static const char *const executions[] = {"queued",    "running", "waiting", "retried",
                                             "succeeded", "failed",  "canceled"};
    long long n = 0;
    for (size_t i = 0; i < sizeof executions / sizeof executions[0]; i++) {
        long long k = itest_redis_int(r, "ZCARD tern:jobs:%s", executions[i]);
        if (k < 0)
            return -1;
        n += k;
    }
    return n;
}

long long itest_job_hashes(const itest_redis_t *r)
{
    redisReply *keys = redis_command(r, "KEYS tern:job:*");
    if (keys == NULL || keys->type != REDIS_REPLY_ARRAY) {
        if (keys != NULL)
            freeReplyObject(keys);
        return -1;
    }
    long long n = 0;
    for (size_t i = 0; i < keys->elements; i++)
        n += keys->element[i]->len == strlen("tern:job:") + 36;
    freeReplyObject(keys);
    return n;
}

char *itest_redis_str(const itest_redis_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *reply = redis_vcommand(r, fmt, ap);
    va_end(ap);
    char *s = NULL;
    if (reply != NULL && (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS))
        s = xstrndup(reply->str, reply->len);
    if (reply != NULL)
        freeReplyObject(reply);
    return s;
}

/* ---- ternd -------------------------------------------------------------------- */

/* Copies into a new file renamed over `to`: a process of the same runner id may still
 * run with the old file mapped (a restart while the old process is stopped), and
 * rewriting that file in place would crash it with SIGBUS. */
static void copy_file(const char *from, const char *to)
{
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.new", to);
    int in = open(from, O_RDONLY);
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    if (in < 0 || out < 0)
        fail_msg("copy %s -> %s: %s", from, tmp, strerror(errno));
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n)
            fail_msg("copy %s: short write", tmp);
    close(in);
    close(out);
    if (rename(tmp, to) != 0)
        fail_msg("rename %s -> %s: %s", tmp, to, strerror(errno));
}

static const char *env_path(const char *name)
{
    const char *v = getenv(name);
    if (v == NULL)
        fail_msg("%s is not set (run the test through meson)", name);
    return v;
}

/* A plugin directory with the build's plugins and itest, copied (the loader refuses
 * symbolic links that lead out of the directory). */
static void make_plugin_dir(itest_ternd_t *t, const itest_dir_t *dir)
{
    snprintf(t->plugin_dir, sizeof t->plugin_dir, "%s/plugins-%s", dir->path, t->id);
    mkdir(t->plugin_dir, 0700);
    const char *tasks = env_path("TERN_TASKS");
    DIR *d = opendir(tasks);
    if (d == NULL)
        fail_msg("cannot open %s", tasks);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len > 3 && strcmp(de->d_name + len - 3, ".so") == 0) {
            char from[600], to[600];
            snprintf(from, sizeof from, "%s/%s", tasks, de->d_name);
            snprintf(to, sizeof to, "%s/%s", t->plugin_dir, de->d_name);
            copy_file(from, to);
        }
    }
    closedir(d);
    char to[600];
    snprintf(to, sizeof to, "%s/itest.so", t->plugin_dir);
    copy_file(env_path("TERN_ITEST"), to);
}

bool itest_ternd_log_has_both(const itest_ternd_t *t, const char *a, const char *b)
{
    FILE *f = fopen(t->log, "r");
    if (f == NULL)
        return false;
    char line[8192];
    bool found = false;
    while (!found && fgets(line, sizeof line, f) != NULL)
        found = strstr(line, a) != NULL && (b == NULL || strstr(line, b) != NULL);
    fclose(f);
    return found;
}

bool itest_ternd_log_has(const itest_ternd_t *t, const char *needle)
{
    return itest_ternd_log_has_both(t, needle, NULL);
}

/* The "ready" line carries the API's port (0 when the api role is off). */
static void read_api_port(itest_ternd_t *t)
{
    FILE *f = fopen(t->log, "r");
    char line[8192];
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        const char *p = strstr(line, "\"api_port\":");
        if (p != NULL && strstr(line, "ready to serve") != NULL)
            t->api_port = atoi(p + strlen("\"api_port\":"));
    }
    if (f != NULL)
        fclose(f);
}

void itest_ternd_start(itest_ternd_t *t, const itest_redis_t *r, const itest_dir_t *dir,
                       const char *id, const char *const *extra)
{
    memset(t, 0, sizeof *t);
    snprintf(t->id, sizeof t->id, "%s", id);
    snprintf(t->log, sizeof t->log, "%s/ternd-%s.log", dir->path, id);
    make_plugin_dir(t, dir);
    const char *argv[64];
    size_t n = 0;
    argv[n++] = env_path("TERN_BIN");
    argv[n++] = "--redis";
    argv[n++] = r->url;
    argv[n++] = "--plugin-dir";
    argv[n++] = t->plugin_dir;
    argv[n++] = "--runner-id";
    argv[n++] = id;
    argv[n++] = "--lease-ms";
    argv[n++] = "1000";
    argv[n++] = "--heartbeat-ms";
    argv[n++] = "200";
    argv[n++] = "--shutdown-grace-ms";
    argv[n++] = "5000";
    argv[n++] = "--log-level";
    argv[n++] = "debug";
    argv[n++] = "--listen"; /* the API on a free loopback port, read back below */
    argv[n++] = "127.0.0.1:0";
    for (size_t i = 0; extra != NULL && extra[i] != NULL && n < 62; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(t->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    t->pid = pid;
    for (unsigned waited = 0; waited < 15000; waited += 20) {
        if (itest_ternd_log_has(t, "ready to serve")) {
            read_api_port(t);
            return;
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            t->pid = 0;
            fail_msg("ternd %s exited before it was ready (log %s)", id, t->log);
        }
        itest_pause_ms(20);
    }
    fail_msg("ternd %s not ready after 15 s (log %s)", id, t->log);
}

/* A sanitizer build reports into the process's log; a report fails the test. */
static void check_sanitizer_reports(const itest_ternd_t *t)
{
    static const char *const marks[] = {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                                        "runtime error:"};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (itest_ternd_log_has(t, marks[i]))
            fail_msg("ternd %s: sanitizer report in %s", t->id, t->log);
}

int itest_ternd_signal(itest_ternd_t *t, int sig, unsigned wait_ms)
{
    if (t->pid <= 0)
        return -1;
    kill(t->pid, sig);
    if (wait_ms == 0)
        return -1;
    for (unsigned waited = 0; waited <= wait_ms; waited += 10) {
        int st;
        if (waitpid(t->pid, &st, WNOHANG) == t->pid) {
            t->pid = 0;
            check_sanitizer_reports(t);
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        itest_pause_ms(10);
    }
    kill(t->pid, SIGKILL);
    int st;
    waitpid(t->pid, &st, 0);
    t->pid = 0;
    fail_msg("ternd %s did not exit within %u ms of signal %d", t->id, wait_ms, sig);
    return -1;
}

/* ---- client ------------------------------------------------------------------- */

typedef struct waiter {
    bool done;
    bool timed_out;
    uv_timer_t timer;
} waiter_t;

static void on_wait_timeout(uv_timer_t *t)
{
    waiter_t *w = t->data;
    w->timed_out = true;
}

bool itest_client_run_until(itest_client_t *c, bool *done, unsigned ms)
{
    waiter_t w = {0};
    uv_timer_init(&c->loop, &w.timer);
    w.timer.data = &w;
    /* The loop's clock stands still while the loop does not run: after a test spent
     * seconds elsewhere (HTTP calls), a bound counted from it would have passed already. */
    uv_update_time(&c->loop);
    uv_timer_start(&w.timer, on_wait_timeout, ms, 0);
    while (!*done && !w.timed_out)
        uv_run(&c->loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&w.timer, NULL);
    uv_run(&c->loop, UV_RUN_NOWAIT);
    return *done;
}

static void on_client_store(store_t *s, bool up, void *data)
{
    (void)s;
    bool *flag = data;
    *flag = up;
}

static bool client_up;

void itest_client_open(itest_client_t *c, const itest_redis_t *r)
{
    memset(c, 0, sizeof *c);
    uv_loop_init(&c->loop);
    char err[256];
    if (redis_addr_parse(r->url, &c->addr, err, sizeof err) != 0)
        fail_msg("%s", err);
    client_up = false;
    store_opts_t so = {
        .addr = &c->addr, .name = "itest-client", .on_state = on_client_store, .data = &client_up};
    c->store = store_new(&c->loop, &so);
    job_ops_opts_t jo = {.store = c->store, .loop = &c->loop};
    c->ops = job_ops_new(&jo);
    if (!itest_client_run_until(c, &client_up, 10000))
        fail_msg("client: Redis at %s not reachable", r->url);
}

void itest_client_close(itest_client_t *c)
{
    job_ops_close(c->ops);
    job_ops_free(c->ops);
    store_free(c->store);
    for (int i = 0; i < 100 && uv_run(&c->loop, UV_RUN_NOWAIT) != 0; i++)
        itest_pause_ms(5);
    assert_int_equal(uv_loop_close(&c->loop), 0);
    redis_addr_dispose(&c->addr);
}

void itest_client_wait_state(itest_client_t *c, bool up, unsigned timeout_ms)
{
    for (unsigned waited = 0; waited < timeout_ms; waited += 20) {
        if (store_is_up(c->store) == up)
            return;
        bool never = false;
        itest_client_run_until(c, &never, 20);
    }
    fail_msg("the client's store was not %s within %u ms", up ? "up" : "down", timeout_ms);
}

void itest_on_answer(void *data, int status, const json_t *result, const char *message)
{
    itest_answer_t *o = data;
    o->done = true;
    o->status = status;
    o->result = result != NULL ? json_deep_copy(result) : NULL;
    snprintf(o->msg, sizeof o->msg, "%s", message != NULL ? message : "");
}

int itest_answer_wait(itest_client_t *c, itest_answer_t *o, json_t **result, char *msg,
                      size_t msglen)
{
    if (!itest_client_run_until(c, &o->done, 10000))
        fail_msg("no answer from the store within 10 s");
    if (msg != NULL)
        snprintf(msg, msglen, "%s", o->msg);
    if (result != NULL)
        *result = o->result;
    else
        json_decref(o->result);
    return o->status;
}

static json_t *parse_or_fail(const char *text)
{
    if (text == NULL)
        return NULL;
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);
    if (v == NULL)
        fail_msg("test JSON does not parse: %s: %s", e.text, text);
    return v;
}

int itest_workflow_put(itest_client_t *c, const char *json_text, json_t **result, char *msg,
                       size_t msglen)
{
    itest_answer_t o = {0};
    json_t *doc = parse_or_fail(json_text);
    workflow_ops_put(c->ops, doc, itest_on_answer, &o);
    json_decref(doc);
    return itest_answer_wait(c, &o, result, msg, msglen);
}

void itest_workflow_put_ok(itest_client_t *c, const char *json_text)
{
    char msg[1024];
    if (itest_workflow_put(c, json_text, NULL, msg, sizeof msg) != 0)
        fail_msg("workflow refused: %s", msg);
}

int itest_job_create(itest_client_t *c, const char *workflow, const char *params_json,
                     const char *target, uint64_t exec_after_ms, const char *locks, char uuid[40],
                     char *msg, size_t msglen)
{
    itest_answer_t o = {0};
    json_t *params = parse_or_fail(params_json);
    job_create_req_t req = {.workflow = workflow,
                            .params = params,
                            .target = target,
                            .exec_after_ms = exec_after_ms,
                            .locks = locks};
    job_ops_create(c->ops, &req, itest_on_answer, &o);
    json_decref(params);
    json_t *res = NULL;
    int rc = itest_answer_wait(c, &o, &res, msg, msglen);
    if (uuid != NULL)
        snprintf(uuid, 40, "%s", rc == 0 ? json_string_value(json_object_get(res, "uuid")) : "");
    json_decref(res);
    return rc;
}

void itest_job_create_ok(itest_client_t *c, const char *workflow, const char *params_json,
                         char uuid[40])
{
    char msg[1024];
    if (itest_job_create(c, workflow, params_json, NULL, 0, NULL, uuid, msg, sizeof msg) != 0)
        fail_msg("job create refused: %s", msg);
}

json_t *itest_wait_finished_ok(itest_client_t *c, const char *uuid, unsigned timeout_ms)
{
    json_t *job = itest_wait_finished(c, uuid, timeout_ms);
    if (job == NULL) {
        json_t *now = itest_job_get(c, uuid);
        const char *ex = now != NULL ? itest_execution(now) : "(gone)";
        fail_msg("job %s did not finish within %u ms (it is %s)", uuid, timeout_ms, ex);
    }
    return job;
}

json_t *itest_job_get(itest_client_t *c, const char *uuid)
{
    itest_answer_t o = {0};
    job_ops_get(c->ops, uuid, itest_on_answer, &o);
    json_t *res = NULL;
    char msg[1024];
    if (itest_answer_wait(c, &o, &res, msg, sizeof msg) != 0)
        fail_msg("job %s: %s", uuid, msg);
    return res;
}

int itest_job_cancel(itest_client_t *c, const char *uuid, char *msg, size_t msglen)
{
    itest_answer_t o = {0};
    job_ops_cancel(c->ops, uuid, "itest", itest_on_answer, &o);
    return itest_answer_wait(c, &o, NULL, msg, msglen);
}

int itest_job_resume(itest_client_t *c, const char *uuid, const char *result_json,
                     const char *error_json, char *msg, size_t msglen)
{
    itest_answer_t o = {0};
    json_t *res = parse_or_fail(result_json), *err = parse_or_fail(error_json);
    job_ops_resume(c->ops, uuid, res, err, "itest", itest_on_answer, &o);
    json_decref(res);
    json_decref(err);
    return itest_answer_wait(c, &o, NULL, msg, msglen);
}

int itest_job_redrive(itest_client_t *c, const char *uuid, const char *from_step,
                      const char *params_json, char *msg, size_t msglen)
{
    itest_answer_t o = {0};
    json_t *params = parse_or_fail(params_json);
    job_ops_redrive(c->ops, uuid, from_step, params, "itest", itest_on_answer, &o);
    json_decref(params);
    return itest_answer_wait(c, &o, NULL, msg, msglen);
}

/* ---- events ------------------------------------------------------------------- */

typedef struct event_wait {
    const char *type;
    const char *status;
    long long index;
    int nth;
    int seen;
    json_t *found;
    bool done;
} event_wait_t;

static bool on_event(void *data, const char *id, const json_t *ev)
{
    (void)id;
    event_wait_t *w = data;
    const char *type = json_string_value(json_object_get(ev, "type"));
    const char *status = json_string_value(json_object_get(ev, "status"));
    const char *phase = json_string_value(json_object_get(ev, "phase"));
    if (type == NULL || strcmp(type, w->type) != 0)
        return true;
    if (w->status != NULL && (status == NULL || strcmp(status, w->status) != 0))
        return true;
    if (w->index >= 0 && (phase == NULL || strcmp(phase, "chain") != 0 ||
                          json_integer_value(json_object_get(ev, "index")) != w->index))
        return true;
    if (++w->seen < w->nth)
        return true;
    w->found = json_deep_copy(ev);
    w->done = true;
    return false;
}

/* Starts the job's own stream if it has none (a job whose record tells its whole story
 * has none: see job_ops_events_open), as every watcher does before reading it. */
static void events_open(itest_client_t *c, const char *uuid)
{
    itest_answer_t a = {0};
    job_ops_events_open(c->ops, uuid, itest_on_answer, &a);
    itest_answer_wait(c, &a, NULL, NULL, 0);
}

json_t *itest_wait_event_nth(itest_client_t *c, const char *uuid, const char *type,
                             const char *status, long long index, int nth, unsigned timeout_ms)
{
    event_wait_t w = {.type = type, .status = status, .index = index, .nth = nth};
    events_open(c, uuid);
    events_follow_t *f = events_follow(&c->loop, &c->addr, uuid, "0", on_event, &w);
    if (!itest_client_run_until(c, &w.done, timeout_ms)) {
        events_follow_stop(f);
        return NULL;
    }
    return w.found;
}

json_t *itest_wait_event(itest_client_t *c, const char *uuid, const char *type, const char *status,
                         unsigned timeout_ms)
{
    return itest_wait_event_nth(c, uuid, type, status, -1, 1, timeout_ms);
}

json_t *itest_wait_event_ok(itest_client_t *c, const char *uuid, const char *type,
                            unsigned timeout_ms)
{
    json_t *ev = itest_wait_event(c, uuid, type, NULL, timeout_ms);
    if (ev == NULL)
        fail_msg("job %s: no \"%s\" event within %u ms", uuid, type, timeout_ms);
    return ev;
}

json_t *itest_wait_finished(itest_client_t *c, const char *uuid, unsigned timeout_ms)
{
    json_t *ev = itest_wait_event(c, uuid, "finished", NULL, timeout_ms);
    if (ev == NULL)
        return NULL;
    json_decref(ev);
    return itest_job_get(c, uuid);
}

json_t *itest_events(itest_client_t *c, const char *uuid)
{
    events_open(c, uuid);
    struct timeval tv = {2, 0};
    redisContext *rc = c->addr.path != NULL
                           ? redisConnectUnixWithTimeout(c->addr.path, tv)
                           : redisConnectWithTimeout(c->addr.host, c->addr.port, tv);
    json_t *out = json_array();
    if (rc == NULL || rc->err) {
        if (rc != NULL)
            redisFree(rc);
        return out;
    }
    redisReply *r = redisCommand(rc, "XRANGE tern:job:%s:events - +", uuid);
    for (size_t i = 0; r != NULL && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        redisReply *fields = r->element[i]->element[1];
        for (size_t k = 0; k + 1 < fields->elements; k += 2) {
            json_t *ev =
                json_loadb(fields->element[k + 1]->str, fields->element[k + 1]->len, 0, NULL);
            if (ev != NULL)
                json_array_append_new(out, ev);
        }
    }
    if (r != NULL)
        freeReplyObject(r);
    redisFree(rc);
    return out;
}

/* ---- files, memory and fleets ------------------------------------------------- */

void itest_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        fail_msg("%s: %s", path, strerror(errno));
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

long itest_file_size(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

long itest_peak_rss_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "VmHWM:", 6) == 0)
            kb = atol(line + 6);
    if (f != NULL)
        fclose(f);
    return kb;
}

char itest_proc_state(pid_t pid, pid_t *ppid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return '\0';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "pid (comm) state ppid ...": comm may hold spaces, so parse after the last ')'. */
    char *close = strrchr(buf, ')');
    char state = '\0';
    int parent = 0;
    if (close == NULL || sscanf(close + 1, " %c %d", &state, &parent) != 2)
        return '\0';
    if (ppid != NULL)
        *ppid = (pid_t)parent;
    return state;
}

itest_ternd_t *itest_fleet_start(itest_fleet_t *f, const itest_redis_t *r, const itest_dir_t *dir,
                                 const char *id, const char *queue, const char *const *more)
{
    if (f->n == ITEST_FLEET_MAX)
        fail_msg("too many runners in one test");
    itest_ternd_t *t = &f->runners[f->n++];
    const char *extra[16] = {"--queues", queue};
    size_t n = 2;
    for (size_t i = 0; more != NULL && more[i] != NULL && n < 15; i++)
        extra[n++] = more[i];
    extra[n] = NULL;
    itest_ternd_start(t, r, dir, id, extra);
    return t;
}

void itest_fleet_stop(itest_fleet_t *f, unsigned wait_ms)
{
    for (size_t i = 0; i < f->n; i++) {
        if (f->runners[i].pid > 0) {
            kill(f->runners[i].pid, SIGCONT);
            itest_ternd_signal(&f->runners[i], SIGTERM, wait_ms);
        }
    }
    f->n = 0;
}

/* ---- side channel and small helpers ------------------------------------------- */

int itest_side_count(const char *file, const char *what, const char *key_prefix)
{
    FILE *f = fopen(file, "r");
    if (f == NULL)
        return 0;
    char line[1024], w[32], key[512];
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (sscanf(line, "%31s %511s", w, key) != 2 || strcmp(w, what) != 0)
            continue;
        if (key_prefix == NULL || strncmp(key, key_prefix, strlen(key_prefix)) == 0)
            n++;
    }
    fclose(f);
    return n;
}

int itest_side_count_exact(const char *file, const char *what, const char *key)
{
    FILE *f = fopen(file, "r");
    if (f == NULL)
        return 0;
    char line[1024], w[32], k[512];
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "%31s %511s", w, k) == 2 && strcmp(w, what) == 0 && strcmp(k, key) == 0)
            n++;
    fclose(f);
    return n;
}

int itest_side_starts(const char *file, const char *uuid, int phase, int idx)
{
    char key[96];
    snprintf(key, sizeof key, "%.39s/%d/%d", uuid, phase, idx);
    return itest_side_count_exact(file, "start", key);
}

int itest_side_lines(const char *file, const char *what, const char *key, itest_side_line_t *out,
                     int max)
{
    FILE *f = fopen(file, "r");
    if (f == NULL)
        return 0;
    char line[1024], w[32], k[512], job[64];
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        itest_side_line_t l = {0};
        if (sscanf(line, "%31s %511s %u %63s %lld %ld", w, k, &l.attempt, job, &l.time_ms,
                   &l.pid) != 6 ||
            strcmp(w, what) != 0 || strcmp(k, key) != 0)
            continue;
        if (n < max)
            out[n] = l;
        n++;
    }
    fclose(f);
    return n;
}

void itest_side_wait(const char *file, const char *what, const char *key_prefix, int n,
                     unsigned timeout_ms)
{
    for (unsigned waited = 0; waited <= timeout_ms; waited += 10) {
        if (itest_side_count(file, what, key_prefix) >= n)
            return;
        itest_pause_ms(10);
    }
    fail_msg("side channel %s: fewer than %d \"%s %s\" lines after %u ms", file, n, what,
             key_prefix != NULL ? key_prefix : "*", timeout_ms);
}

int itest_count_events(const json_t *events, const char *type, const char *status)
{
    size_t i;
    json_t *ev;
    int n = 0;
    json_array_foreach((json_t *)events, i, ev)
    {
        const char *t = json_string_value(json_object_get(ev, "type"));
        const char *s = json_string_value(json_object_get(ev, "status"));
        if (t != NULL && strcmp(t, type) == 0 &&
            (status == NULL || (s != NULL && strcmp(s, status) == 0)))
            n++;
    }
    return n;
}

const char *itest_execution(const json_t *job)
{
    const char *s = json_string_value(json_object_get(job, "execution"));
    return s != NULL ? s : "(none)";
}

const char *itest_str_of(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s != NULL ? s : "(none)";
}

const char *itest_error_code_of(const json_t *holder)
{
    return itest_str_of(json_object_get(holder, "error"), "code");
}

double itest_metric_sample(const char *page, const char *series)
{
    char needle[512];
    snprintf(needle, sizeof needle, "\n%s ", series);
    const char *p = page != NULL ? strstr(page, needle) : NULL;
    return p != NULL ? atof(p + strlen(needle)) : -1;
}

const char *itest_fmt(const char *fmt, ...)
{
    static char buf[16384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}
