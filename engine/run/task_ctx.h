/*
 * task_ctx.h -- the tern_ctx object: one attempt of one step, and the host table
 * (include/tern/task.h) that plugins call through it.
 *
 * The context knows nothing of Redis queues or job state machines. Whoever starts an
 * attempt (the runner, the isolated helper process, a test) hands in a sink; the
 * context delivers exactly one outcome to it, plus any number of progress reports.
 * That is what lets the same plugin run in ternd, in a helper process and in tests.
 *
 * Resources a task obtains through the host (timers, HTTP requests, children,
 * thread-pool work, Redis calls) are tracked by the context. When the attempt ends
 * (outcome delivered) or is cancelled, the context stops the ones still pending, so
 * their callbacks never reach a finished attempt, and frees itself once every
 * handle is closed, never synchronously inside a call from the task.
 */
#ifndef TERN_TASK_CTX_H
#define TERN_TASK_CTX_H

#include <stdint.h>

#include <jansson.h>
#include <tern/task.h>
#include <uv.h>

#include "run/http_client.h"

typedef enum task_outcome_kind {
    TASK_DONE,    /* result */
    TASK_FAILED,  /* code, message */
    TASK_WAIT,    /* info */
    TASK_REQUEUE, /* delay_ms, info */
} task_outcome_kind_t;

/* What an attempt ended with. The receiver of on_outcome owns every pointer in it
 * (json_decref / free), including state_changes. */
typedef struct task_outcome {
    task_outcome_kind_t kind;
    json_t *result;        /* TASK_DONE: the result (json null when the task gave none) */
    char *code;            /* TASK_FAILED: "TaskTimeout", "InsufficientSpace", ... */
    char *message;         /* TASK_FAILED */
    int refuse_status;     /* TASK_FAILED by tern_task_refuse: the HTTP status of the
                            * refusal, 403, 404, 409 or 422; 0 for tern_task_fail and the
                            * engine's failures */
    json_t *info;          /* TASK_WAIT/TASK_REQUEUE: may be NULL */
    uint64_t delay_ms;     /* TASK_REQUEUE */
    json_t *state_changes; /* object of keys set with tern_state_set, or NULL */
    uint64_t elapsed_ms;   /* from start() to the report */
} task_outcome_t;

/* Frees everything an outcome holds (not the struct itself). */
void task_outcome_dispose(task_outcome_t *o);

/* Redis access for tern_redis_eval, supplied by the runner (NULL: not available, the
 * call fails with -ENOTCONN). Keys arrive already namespaced. The implementation calls
 * `done(req, reply, error)` exactly once unless cancelled with `cancel(req)`. */
typedef struct task_redis_call task_redis_call_t;
typedef void (*task_redis_done_fn)(task_redis_call_t *call, const json_t *reply, const char *error);
typedef struct task_redis_ops {
    /* Returns an opaque handle for cancel, or NULL when Redis is not reachable. */
    void *(*eval)(void *data, const char *script, size_t nkeys, const char *const *keys,
                  size_t nargs, const char *const *args, task_redis_done_fn done,
                  task_redis_call_t *call);
    void (*cancel)(void *data, void *handle);
    void *data;
} task_redis_ops_t;

typedef struct task_sink {
    /* Called once per attempt, never from inside start() itself (deferred to the next
     * loop iteration), never after task_ctx_cancel(). Takes ownership of *outcome's
     * members; the struct itself is the caller's. */
    void (*on_outcome)(void *owner, task_outcome_t *outcome);
    /* Optional. Steals `progress` (coalesced: at most one per 200 ms, the last kept). */
    void (*on_progress)(void *owner, json_t *progress);
    void *owner;
    /* Optional. Called once, from a close callback, when the context has been freed
     * after its outcome or a cancel (every handle closed, thread-pool work returned):
     * what lets an owner wait for its attempts to be gone before closing the loop. */
    void (*on_closed)(void *owner);
} task_sink_t;

typedef struct task_ctx_opts {
    uv_loop_t *loop;
    const tern_task_def *def;      /* the task; must outlive the context */
    const char *plugin_name;       /* "core" (for logs and the Redis namespace) */
    void *plugin_state;            /* what the plugin's init produced */
    const char *task_name;         /* "core.sleep" */
    const char *job_uuid;          /* copied */
    const char *job_target;        /* copied; may be NULL */
    const json_t *params;          /* borrowed; increfed for the context's life */
    const json_t *state;           /* the job's state object, borrowed; increfed */
    const char *step_name;         /* copied */
    uint32_t attempt;              /* 1-based */
    const char *idempotency_key;   /* copied */
    http_client_t *http;           /* may be NULL: tern_http_request then fails */
    const net_allow_t *allow;      /* the plugin's allow_networks (must outlive the
                                      context), or NULL: any address */
    const task_redis_ops_t *redis; /* may be NULL */
    task_sink_t sink;
} task_ctx_opts_t;

/* Creates a context and calls the task's start(ctx, args). `args` is borrowed for the
 * call. Returns the context; its outcome reaches opts->sink later. */
tern_ctx *task_ctx_start(const task_ctx_opts_t *opts, const json_t *args);

/* Cancels an attempt that has not delivered its outcome: calls the task's cancel hook
 * (if any), stops every host resource, and frees the context once they are closed.
 * No outcome is delivered afterwards; the caller records what it wants (TaskTimeout,
 * canceled). The caller must not use ctx after this call. */
void task_ctx_cancel(tern_ctx *ctx);

/* The host table every context points to (also handed to plugins' init). */
const tern_host *task_ctx_host(void);

#endif /* TERN_TASK_CTX_H */
