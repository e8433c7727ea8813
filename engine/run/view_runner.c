/*
 * view_runner.c -- plugins' view scripts on a connection of their own, each bounded in
 * time; see view_runner.h.
 *
 * Ownership: one view_call per script sent, freed once both its Redis reply has come
 * (or the connection dropped: a NULL reply) and its timer is closed. The caller is
 * answered exactly once, by whichever comes first: the reply or the timer. The runner
 * is freed once every call is.
 */
#include "run/view_runner.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/log.h"
#include "redis/redis_conn.h"

/* The views connection's watchdog: well past a script Redis kills at its busy-reply
 * threshold, so that the connection is dropped only when Redis itself went silent. */
#define VIEW_CONN_TIMEOUT_MS 30000

struct view_runner {
    uv_loop_t *loop;
    redis_conn_t *conn;   /* EVAL_RO of the views */
    redis_conn_t *killer; /* SCRIPT KILL after a view's bound */
    uint32_t timeout_ms;
    size_t calls;      /* view_call records alive */
    bool kill_pending; /* a SCRIPT KILL not answered yet: one at a time */
    bool closing;
    bool freeing; /* inside view_runner_free: callbacks must not free the runner */
};

typedef struct view_call {
    view_runner_t *vr;
    uv_timer_t timer;
    view_runner_cb cb;
    void *data;
    bool answered; /* cb ran */
    bool replied;  /* Redis's reply (or the drop) came */
} view_call_t;

/* Frees the runner once it is closing and nothing can reach it any more. */
static void runner_release(view_runner_t *vr)
{
    if (vr->closing && !vr->freeing && vr->calls == 0 && !vr->kill_pending)
        free(vr);
}

static void on_call_timer_closed(uv_handle_t *h)
{
    view_call_t *c = h->data;
    view_runner_t *vr = c->vr;
    free(c);
    vr->calls--;
    runner_release(vr);
}

static void on_kill_reply(redis_conn_t *conn, redisReply *reply, void *data)
{
    (void)conn;
    view_runner_t *vr = data;
    vr->kill_pending = false;
    if (reply != NULL && reply->type == REDIS_REPLY_STATUS)
        log_msg(TERN_LOG_WARN, "views", NULL,
                "a view's script ran past its bound of %u ms and Redis's busy-reply-threshold: "
                "killed",
                (unsigned)vr->timeout_ms);
    else if (reply != NULL && reply->type == REDIS_REPLY_ERROR &&
             strncmp(reply->str, "NOTBUSY", 7) != 0)
        /* An ACL that does not allow SCRIPT KILL, say: the script then runs to its end. */
        log_msg(TERN_LOG_WARN, "views", NULL, "SCRIPT KILL after a view's bound failed: %s",
                reply->str);
    runner_release(vr);
}

/* Sends SCRIPT KILL unless one is on its way; see view_runner.h for what it can kill. */
static void kill_script(view_runner_t *vr)
{
    if (vr->kill_pending || vr->closing)
        return;
    if (redis_conn_commandf(vr->killer, on_kill_reply, vr, "SCRIPT KILL") == 0)
        vr->kill_pending = true;
}

static void on_call_timeout(uv_timer_t *t)
{
    view_call_t *c = t->data;
    c->answered = true;
    char why[96];
    snprintf(why, sizeof why, "the script did not answer within %u ms",
             (unsigned)c->vr->timeout_ms);
    c->cb(c->data, TERN_ETIMEDOUT, NULL, why);
    kill_script(c->vr);
}

static void on_view_reply(redis_conn_t *conn, redisReply *reply, void *data)
{
    (void)conn;
    view_call_t *c = data;
    c->replied = true;
    uv_timer_stop(&c->timer);
    if (!c->answered) {
        c->answered = true;
        if (reply == NULL)
            c->cb(c->data, TERN_EIO, NULL, "connection to Redis lost before the answer");
        else if (reply->type == REDIS_REPLY_ERROR)
            c->cb(c->data, TERN_EINVAL, NULL, reply->str);
        else
            c->cb(c->data, 0, reply, NULL);
    }
    uv_close((uv_handle_t *)&c->timer, on_call_timer_closed);
}

/* See view_runner.h. */
view_runner_t *view_runner_new(uv_loop_t *loop, const redis_addr_t *addr, uint32_t timeout_ms)
{
    view_runner_t *vr = xcalloc(1, sizeof *vr);
    vr->loop = loop;
    vr->timeout_ms = timeout_ms != 0 ? timeout_ms : VIEW_RUNNER_TIMEOUT_MS_DEFAULT;
    redis_conn_opts_t co = {
        .addr = addr, .name = "views", .command_timeout_ms = VIEW_CONN_TIMEOUT_MS};
    vr->conn = redis_conn_new(loop, &co);
    redis_conn_opts_t ko = {
        .addr = addr, .name = "views-kill", .command_timeout_ms = VIEW_CONN_TIMEOUT_MS};
    vr->killer = redis_conn_new(loop, &ko);
    return vr;
}

/* See view_runner.h. */
int view_runner_eval(view_runner_t *vr, const char *plugin, const char *script, size_t nkeys,
                     const char *const *keys, size_t nargs, const char *const *args,
                     view_runner_cb cb, void *data)
{
    if (vr->closing)
        return TERN_ENOTCONN;
    size_t argc = 3 + nkeys + nargs;
    const char **argv = xcalloc(argc, sizeof *argv);
    size_t *argvlen = xcalloc(argc, sizeof *argvlen);
    char **spaced = xcalloc(nkeys + 1, sizeof *spaced);
    char nk[24];
    snprintf(nk, sizeof nk, "%zu", nkeys);
    argv[0] = "EVAL_RO";
    argv[1] = script;
    argv[2] = nk;
    for (size_t i = 0; i < nkeys; i++) {
        spaced[i] = xasprintf("tern:p:%s:%s", plugin, keys[i] != NULL ? keys[i] : "");
        argv[3 + i] = spaced[i];
    }
    for (size_t i = 0; i < nargs; i++)
        argv[3 + nkeys + i] = args[i];
    for (size_t i = 0; i < argc; i++)
        argvlen[i] = strlen(argv[i]);

    view_call_t *c = xcalloc(1, sizeof *c);
    c->vr = vr;
    c->cb = cb;
    c->data = data;
    int rc = redis_conn_command(vr->conn, on_view_reply, c, (int)argc, argv, argvlen);
    for (size_t i = 0; i < nkeys; i++)
        free(spaced[i]);
    free(spaced);
    free(argv);
    free(argvlen);
    if (rc != 0) {
        free(c);
        return TERN_ENOTCONN;
    }
    vr->calls++;
    uv_timer_init(vr->loop, &c->timer);
    c->timer.data = c;
    uv_timer_start(&c->timer, on_call_timeout, vr->timeout_ms, 0);
    return 0;
}

/* See view_runner.h. */
void view_runner_free(view_runner_t *vr)
{
    if (vr == NULL || vr->closing)
        return;
    vr->closing = true;
    vr->freeing = true;
    /* Calls in flight get their NULL replies inside these (see redis_conn.h). */
    redis_conn_free(vr->conn);
    redis_conn_free(vr->killer);
    vr->freeing = false;
    runner_release(vr);
}
