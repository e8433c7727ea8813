/*
 * tern/task.h -- the plugin ABI of tern, the only header a task plugin includes.
 *
 * A plugin is a shared object named <name>.so in the engine's plugin directory. It
 * exports exactly one symbol, tern_plugin_entry(), which returns a constant
 * descriptor: a magic word, the ABI version it was built against, its name and
 * version, init/fini hooks and a NULL-terminated table of tasks. The engine reaches
 * the plugin only through that descriptor, and the plugin reaches the engine only
 * through the host table (tern_host) that every context carries as its first field,
 * so a plugin links against no engine symbol and the same plugin runs inside
 * `ternd` or inside an isolated helper process unchanged.
 *
 * Versioning. TERN_ABI_MAJOR changes on any incompatible change; the loader refuses
 * a plugin whose major differs. TERN_ABI_MINOR grows when fields or host functions
 * are appended; the loader refuses a plugin built against a newer minor than the
 * engine's. Every struct that can grow starts with its own `size`, so the engine
 * reads each table with the size the plugin compiled.
 *
 * Ownership of json_t values (jansson), the one rule: parameters are borrowed
 * unless the function's comment says it steals them; return values are borrowed
 * (valid until the owner named in the comment changes) unless the comment says
 * "new reference". Keep a borrowed value past a callback only after json_incref.
 *
 * Lifetime of a context. A tern_ctx is created for one attempt of one step and is
 * valid from the call to start() until the task reports its outcome with exactly one
 * of tern_task_done(), tern_task_fail(), tern_task_refuse(), tern_task_wait() or
 * tern_task_requeue().
 * When the engine cancels an attempt (timeout, job cancel, shutdown) it calls the
 * task's cancel hook if it has one and stops every resource the task obtained from
 * the host (timers, HTTP requests, children, Redis calls); the context then stays
 * valid until the cancel hook has returned and those resources are closed. A task
 * that keeps libuv handles of its own must have a cancel hook that stops them and
 * must not touch the context after the hook returns. A second report, or a report
 * after cancel, is logged by the engine and ignored.
 *
 * Admission checks (ABI 1.2). A workflow may list tasks that run when a job is created,
 * before anything is stored (docs/WORKFLOWS.md, "Admission checks"). Such an attempt
 * has the job's uuid, target and params but no state and no step of a chain; it ends
 * with tern_task_done() (the job may be created; the result is kept for its steps),
 * tern_task_fail() or tern_task_refuse() (the job is refused with the task's code and
 * message). tern_task_wait() and tern_task_requeue() have no meaning there: the create
 * is answered 503 naming the misuse.
 */
#ifndef TERN_TASK_H
#define TERN_TASK_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TERN_PLUGIN_MAGIC 0x7465726eu /* "tern" */
#define TERN_ABI_MAJOR    1           /* bump on any incompatible change */
#define TERN_ABI_MINOR    3           /* bump on append-only additions */

/* Bunyan's numeric levels, so Triton's log tools read the engine's output. */
enum tern_log_level {
    TERN_LOG_TRACE = 10,
    TERN_LOG_DEBUG = 20,
    TERN_LOG_INFO = 30,
    TERN_LOG_WARN = 40,
    TERN_LOG_ERROR = 50,
    TERN_LOG_FATAL = 60,
};

typedef struct tern_ctx tern_ctx;   /* opaque, one per attempt of one step */
typedef struct tern_host tern_host; /* engine services, reached through a ctx */

/** Flags of a task definition. */
enum tern_task_flags {
    /** Always run this task in an isolated helper process, whatever the step says. */
    TERN_TASK_ISOLATED = 1u << 0,
};

/** One task of a plugin. Read by the engine with the size the plugin compiled. */
typedef struct tern_task_def {
    uint32_t size;       /**< sizeof(tern_task_def) as the plugin saw it */
    uint32_t flags;      /**< enum tern_task_flags */
    const char *name;    /**< entry name without the family: "sleep", [a-z][a-z0-9_]* */
    const char *summary; /**< one line, shown by GET /tasks */
    /** Optional JSON text describing the arguments, checked when a workflow is loaded:
     *  {"required": ["url"], "properties": {"url": {"type": "string"}, ...},
     *   "additional": false}. Types: string, integer, number, boolean, object, array,
     *  any. A value that is a template is checked only after expansion, at run time.
     *
     *  A property may say "interpolation": "parts" (ABI 1.1) when the task hands its text
     *  to an interpreter (a shell, SQL). Every string inside that argument, at any depth,
     *  then reaches start() not as interpolated text but as an object
     *    {"strings": ["echo hello ", ""], "values": ["x; id"]}
     *  of the literal pieces as written (n + 1 strings, "$${" already unescaped) and the
     *  n values of its templates (JSON values, a string staying a string), so that the
     *  task can pass each value out of band (positional parameters, SQL placeholders)
     *  and no value is ever read as code. A string without templates arrives as
     *  {"strings": [text], "values": []}. The type check after expansion skips such an
     *  argument: start() checks its shape. */
    const char *args_schema;
    /** NULL-terminated error codes that end retries at once (NULL for none). */
    const char *const *fatal_codes;
    /** Starts one attempt. Returns at once; the outcome is reported later through the
     *  context. `args` is the step's expanded arguments, borrowed for this call only. */
    void (*start)(tern_ctx *ctx, const json_t *args);
    /** Optional. Asks a running attempt to stop (timeout, job cancel, shutdown). The
     *  task stops its own handles before returning; its later report is ignored. */
    void (*cancel)(tern_ctx *ctx);
    /** Optional (ABI 1.1). Checks a step's arguments when a workflow is stored (POST
     *  /workflows, --workflows), after args_schema passed, so that a step the plugin's
     *  configuration forbids is refused before any job runs it. `args` is the step's
     *  arguments as written (templates unexpanded; borrowed for the call), `state` what
     *  init produced. Returns 0, or non-zero with "<path below args>: <message>" in err
     *  ("shell: ...", "argv[0]: ..."); the engine prefixes the step's path. The same
     *  rules must be enforced again in start(): the configuration may change after a
     *  workflow was stored. */
    int (*check)(void *state, const json_t *args, char *err, size_t errlen);
} tern_task_def;

/**
 * One read view of a plugin (ABI 1.2): a GET route of the HTTP API that answers with
 * what a Lua script reads from the plugin's own Redis namespace, so that what a plugin
 * records while its tasks run (instances, volumes, leases) can be read by any client
 * without a job. Read by the engine with the size the plugin compiled.
 *
 * The script runs with EVAL_RO (read-only: a write command fails the request) in the
 * plugin's namespace, as tern_redis_eval runs a task's scripts:
 *   KEYS    the view's `keys`, each as "tern:p:<plugin>:<key>" (a key may be a prefix,
 *           "vm:", that the script completes with a value it read or was given);
 *   ARGV[1] the page's limit (1 to 1000; 100 when the caller gave none);
 *   ARGV[2] the offset (0 when none);
 *   ARGV[3] the marker the caller gave back from a previous page, or "";
 *   ARGV[4] a JSON object of the path's parameters and of the accepted query
 *           parameters the caller gave, every value a string (cjson.decode(ARGV[4])).
 * It returns the answer as JSON text, or an array {json_text, next_marker, count}
 * whose second element (printable ASCII up to 512 bytes, or false on the last page) is
 * sent as the x-tern-next-marker header and whose third (an integer, optional) as x-count, as
 * GET /jobs pages. A false or nil answer is 404 ResourceNotFound (nothing at that
 * path); an error reply "REFUSED <status> <Code> <message>" (status 400 to 499, Code
 * of letters: `return redis.error_reply('REFUSED 409 InvalidArgument name: ...')`) is
 * that refusal, for a parameter the script finds wrong or a record it must not show;
 * any other Lua error, or text that is not JSON, 500 ViewScriptError naming the view.
 * Mind cjson: an empty Lua table encodes as "{}", so an empty list is returned "[]".
 */
/**
 * A streaming view (ABI 1.3: flag TERN_VIEW_STREAM). Its script runs as any view's
 * (the same KEYS, ARGV and refusals) and answers JSON text
 *   {"lines": [objects], "follow": "<key>" or null, "after": "<stream id>"}
 * The engine answers 200 application/x-ndjson, chunked: each of `lines` as one line,
 * then, when `follow` names a Redis stream in the plugin's namespace ("tern:p:<plugin>:"
 * is put in front, as for keys), the field `e` (one JSON object's text) of every entry
 * of that stream after the id `after` ("0" for its start), one line each, as they are
 * appended. The response ends with its final chunk after the first line (of `lines` or
 * of the stream) whose "type" is "end", after `lines` when `follow` is null, or when
 * the server shuts down; a client may leave at any time. So the script reads a record's
 * history and the stream's last id in one atomic call, and the engine goes on from
 * there: nothing is lost or repeated between the two. An idle response gets an empty
 * line every heartbeat interval (15 s by default), which clients skip.
 */
#define TERN_VIEW_STREAM 0x1u

typedef struct tern_view_def {
    uint32_t size;  /**< sizeof(tern_view_def) as the plugin saw it */
    uint32_t flags; /**< 0, or TERN_VIEW_STREAM (ABI 1.3); other bits are refused */
    /** "/vms" or "/vms/:uuid": segments of [A-Za-z0-9_.-] or ":name" ([a-z][a-z0-9_]*,
     *  at most 4), no trailing slash. It must not overlap an engine route or another
     *  plugin's view: "/jobs/:x" and "/jobs/stats" both overlap "/jobs/:uuid". */
    const char *path;
    const char *summary; /**< one line, shown by GET /views */
    /** NULL-terminated names of the query parameters the view accepts ([a-z][a-z0-9_]*,
     *  not those of its path, not limit, offset or marker, which every view takes), or
     *  NULL for none. Any other query parameter is refused (409 InvalidArgument). */
    const char *const *params;
    /** NULL-terminated key names handed to the script as KEYS, or NULL for none. */
    const char *const *keys;
    /** The Lua script that answers (required). */
    const char *script;
} tern_view_def;

/** The descriptor a plugin returns from tern_plugin_entry(). */
typedef struct tern_plugin {
    uint32_t magic;      /**< TERN_PLUGIN_MAGIC */
    uint16_t abi_major;  /**< TERN_ABI_MAJOR at build time */
    uint16_t abi_minor;  /**< TERN_ABI_MINOR at build time */
    uint32_t size;       /**< sizeof(tern_plugin) at build time */
    const char *name;    /**< must equal the file stem; [a-z][a-z0-9_]* */
    const char *version; /**< the plugin's own version string */
    /** Optional. Called once after every check passed. `config` is the plugin's
     *  section of the engine configuration (borrowed; may be NULL). Whatever is put in
     *  *state is handed back by tern_plugin_state(). Returns 0, or non-zero with a
     *  message in err, in which case the plugin is refused and fini is not called. */
    int (*init)(const tern_host *host, const json_t *config, void **state, char *err,
                size_t errlen);
    /** Optional. Called once at engine shutdown with the state init produced. */
    void (*fini)(void *state);
    /** NULL-terminated array of pointers, so each definition's size field can differ. */
    const tern_task_def *const *tasks;
    /** ABI 1.2, optional: NULL-terminated array of pointers to read views, or NULL. */
    const tern_view_def *const *views;
} tern_plugin;

/** The one exported symbol. A function, not data: dlsym is specified for functions. */
#define TERN_PLUGIN(desc)                                                                          \
    __attribute__((visibility("default"))) const tern_plugin *tern_plugin_entry(void);             \
    __attribute__((visibility("default"))) const tern_plugin *tern_plugin_entry(void)              \
    {                                                                                              \
        return &(desc);                                                                            \
    }

/* ---- services of the host ------------------------------------------------------- */

/** An outbound HTTP request, run on the loop by libcurl. All fields are borrowed for
 *  the duration of the tern_http_request() call; the engine copies what it keeps. */
typedef struct tern_http_req {
    uint32_t size;              /**< sizeof(tern_http_req) */
    const char *method;         /**< "GET", "POST", ...; NULL means GET */
    const char *url;            /**< http:// or https:// */
    const char *const *headers; /**< "Name: value" strings, NULL-terminated, or NULL */
    const char *body;           /**< request body or NULL */
    size_t body_len;            /**< bytes of body */
    uint64_t timeout_ms;        /**< whole transfer; 0 means 30000 */
    size_t max_response_bytes;  /**< 0 means 8 MiB; a larger answer fails the request */
} tern_http_req;

/** The outcome of an HTTP request. Valid only during the callback. */
typedef struct tern_http_res {
    long status;              /**< HTTP status, or 0 when no response was received */
    const char *error;        /**< NULL, or why no response came (connect refused, ...;
                                   "network not allowed: ..." when the plugin's
                                   allow_networks excludes every address: final) */
    const char *body;         /**< response body, NUL-terminated; "" when empty */
    size_t body_len;          /**< bytes of body */
    const char *content_type; /**< Content-Type of the answer or NULL */
    uint64_t elapsed_ms;      /**< time from start to the last byte */
} tern_http_res;

typedef void (*tern_http_cb)(tern_ctx *ctx, const tern_http_res *res, void *data);

/** A child process. Borrowed for the duration of the tern_spawn() call. */
typedef struct tern_spawn_opts {
    uint32_t size;           /**< sizeof(tern_spawn_opts) */
    const char *const *argv; /**< argv[0] is the program, looked up in PATH; NULL-ended */
    const char *const *env;  /**< "K=V" NULL-terminated, or NULL to inherit */
    const char *cwd;         /**< or NULL */
    uint64_t timeout_ms;     /**< 0: none; past it the child gets SIGTERM, then SIGKILL */
    size_t tail_bytes;       /**< bytes of stdout/stderr kept; 0 means 4096 */
    const char *stdin_data;  /**< written to the child's stdin, then closed; or NULL */
    size_t stdin_len;
    uint32_t flags; /**< ABI 1.1: enum tern_spawn_flags */
    uint32_t uid;   /**< ABI 1.1: with TERN_SPAWN_SET_IDS, the child's user id */
    uint32_t gid;   /**< ABI 1.1: with TERN_SPAWN_SET_IDS, the child's group id */
} tern_spawn_opts;

/** Flags of tern_spawn_opts. */
enum tern_spawn_flags {
    /** Run the child as uid/gid with no supplementary groups (the engine must be root,
     *  or already be that user; otherwise the child does not start). */
    TERN_SPAWN_SET_IDS = 1u << 0,
};

/** How a child ended. Valid only during the callback. */
typedef struct tern_spawn_res {
    int64_t exit_status;     /**< exit code, or -1 when killed by a signal */
    int term_signal;         /**< the signal that ended it, or 0 */
    int timed_out;           /**< 1 when the engine killed it for its timeout */
    const char *error;       /**< NULL, or why it could not start */
    const char *stdout_tail; /**< last tail_bytes of stdout, NUL-terminated */
    size_t stdout_len;
    const char *stderr_tail; /**< last tail_bytes of stderr, NUL-terminated */
    size_t stderr_len;
    uint64_t elapsed_ms;
} tern_spawn_res;

typedef void (*tern_spawn_cb)(tern_ctx *ctx, const tern_spawn_res *res, void *data);
typedef void (*tern_timer_cb)(tern_ctx *ctx, void *data);
typedef void (*tern_work_fn)(void *data); /* runs on the libuv thread pool: no ctx use */
typedef void (*tern_after_work_cb)(tern_ctx *ctx, void *data, int status);
/** Reply of a Redis script. `reply` is a new reference owned by the engine and freed
 *  after the callback; `error` is NULL or the Redis error text. */
typedef void (*tern_redis_cb)(tern_ctx *ctx, const json_t *reply, const char *error, void *data);

/**
 * The host table. Appended to only; `size` tells how much of it this engine has.
 * Plugins call these through the inline wrappers below, never directly.
 */
struct tern_host {
    uint32_t size;
    uint16_t abi_major, abi_minor;

    void (*task_done)(tern_ctx *ctx, json_t *result);
    void (*task_fail)(tern_ctx *ctx, const char *code, const char *fmt, va_list ap);
    void (*task_wait)(tern_ctx *ctx, json_t *info);
    void (*task_requeue)(tern_ctx *ctx, uint64_t delay_ms, json_t *info);

    uv_loop_t *(*loop)(tern_ctx *ctx);
    void *(*plugin_state)(tern_ctx *ctx);
    const char *(*job_uuid)(tern_ctx *ctx);
    const char *(*job_target)(tern_ctx *ctx);
    const json_t *(*job_params)(tern_ctx *ctx);
    const char *(*step_name)(tern_ctx *ctx);
    uint32_t (*step_attempt)(tern_ctx *ctx);
    const char *(*idempotency_key)(tern_ctx *ctx);

    const json_t *(*state_get)(tern_ctx *ctx, const char *key);
    int (*state_set)(tern_ctx *ctx, const char *key, json_t *value);
    void (*progress)(tern_ctx *ctx, json_t *progress);
    void (*log)(tern_ctx *ctx, int level, const char *fmt, va_list ap);

    int (*http_request)(tern_ctx *ctx, const tern_http_req *req, tern_http_cb cb, void *data);
    int (*spawn)(tern_ctx *ctx, const tern_spawn_opts *opts, tern_spawn_cb cb, void *data);
    int (*work)(tern_ctx *ctx, tern_work_fn work, tern_after_work_cb after, void *data);
    int (*timer_start)(tern_ctx *ctx, uint64_t delay_ms, tern_timer_cb cb, void *data);
    int (*timer_stop)(tern_ctx *ctx, int timer_id);
    int (*redis_eval)(tern_ctx *ctx, const char *script, size_t nkeys, const char *const *keys,
                      size_t nargs, const char *const *args, tern_redis_cb cb, void *data);

    /* ABI 1.2 */
    void (*task_refuse)(tern_ctx *ctx, int http_status, const char *code, const char *fmt,
                        va_list ap);
};

/** Every context starts with this header; the wrappers below rely on it. */
struct tern_ctx_head {
    const tern_host *host;
    uint32_t magic; /* TERN_PLUGIN_MAGIC while the context is valid */
};

#define TERN_HOST_(ctx) (((const struct tern_ctx_head *)(const void *)(ctx))->host)

/* ---- reporting the outcome: exactly one per attempt --------------------------- */

/** Ends the attempt successfully. Steals `result` (any JSON value, or NULL for none);
 *  it becomes the step's result in the job's chain_results. */
static inline void tern_task_done(tern_ctx *ctx, json_t *result)
{
    TERN_HOST_(ctx)->task_done(ctx, result);
}

/** Ends the attempt with an error. `code` is a short CamelCase word (copied) such as
 *  "InsufficientSpace"; the message is formatted printf-style. Whether the step is
 *  retried depends on the step's retry policy and the task's fatal_codes. */
__attribute__((format(printf, 3, 4))) static inline void
tern_task_fail(tern_ctx *ctx, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    TERN_HOST_(ctx)->task_fail(ctx, code, fmt, ap);
    va_end(ap);
}

/** Ends the attempt with a refusal (ABI 1.2): in an admission check, the job is not
 *  created and its POST /jobs is answered with `http_status` and {"code": code,
 *  "message": ...}. The engine takes 403, 404, 409 and 422, and answers 422 for any other
 *  value. In a step of a chain it is tern_task_fail(ctx, code, ...): `http_status` is
 *  not used. `code` is copied; the message is formatted printf-style. On an engine
 *  older than 1.2 (which loads no plugin built for it) it would be tern_task_fail. */
__attribute__((format(printf, 4, 5))) static inline void
tern_task_refuse(tern_ctx *ctx, int http_status, const char *code, const char *fmt, ...)
{
    const tern_host *host = TERN_HOST_(ctx);
    va_list ap;
    va_start(ap, fmt);
    if (host->size >= offsetof(tern_host, task_refuse) + sizeof host->task_refuse)
        host->task_refuse(ctx, http_status, code, fmt, ap);
    else
        host->task_fail(ctx, code, fmt, ap);
    va_end(ap);
}

/** Parks the job in the `waiting` execution until an operator or another system
 *  resumes it (POST /jobs/:uuid/resume) with a result or an error, which then becomes
 *  this step's outcome. The job holds no runner slot while it waits. Steals `info`
 *  (shown on the job; may be NULL). */
static inline void tern_task_wait(tern_ctx *ctx, json_t *info)
{
    TERN_HOST_(ctx)->task_wait(ctx, info);
}

/** Gives the runner slot back and runs this step again after `delay_ms`, with the same
 *  idempotency key: how a task polls long external work. Not counted as a failed
 *  attempt. Steals `info` (may be NULL). */
static inline void tern_task_requeue(tern_ctx *ctx, uint64_t delay_ms, json_t *info)
{
    TERN_HOST_(ctx)->task_requeue(ctx, delay_ms, info);
}

/* ---- what the context knows --------------------------------------------------- */

/** The loop the task runs on. Handles a task opens itself need a cancel hook. */
static inline uv_loop_t *tern_loop(tern_ctx *ctx)
{
    return TERN_HOST_(ctx)->loop(ctx);
}

/** What the plugin's init put in *state. */
static inline void *tern_plugin_state(tern_ctx *ctx)
{
    return TERN_HOST_(ctx)->plugin_state(ctx);
}

/** The job's uuid; valid while ctx is. */
static inline const char *tern_job_uuid(tern_ctx *ctx)
{
    return TERN_HOST_(ctx)->job_uuid(ctx);
}

/** The job's target or NULL; valid while ctx is. */
static inline const char *tern_job_target(tern_ctx *ctx)
{
    return TERN_HOST_(ctx)->job_target(ctx);
}

/** The job's params object; borrowed, valid while ctx is. */
static inline const json_t *tern_job_params(tern_ctx *ctx)
{
    return TERN_HOST_(ctx)->job_params(ctx);
}

/** The step's name ("resize", or "resize.fallback" for a fallback). */
static inline const char *tern_step_name(tern_ctx *ctx)
{
    return TERN_HOST_(ctx)->step_name(ctx);
}

/** 1 for the first attempt of the step, 2 for the first retry, ... */
static inline uint32_t tern_step_attempt(tern_ctx *ctx)
{
    return TERN_HOST_(ctx)->step_attempt(ctx);
}

/** A key that is the same for every attempt of this step of this job, on any runner,
 *  after any restart: "<job uuid>/<phase>/<step index>". Use it to make side effects
 *  idempotent. Valid while ctx is. */
static inline const char *tern_idempotency_key(tern_ctx *ctx)
{
    return TERN_HOST_(ctx)->idempotency_key(ctx);
}

/* ---- job-scoped state ---------------------------------------------------------- */

/** A value of the job's state (what earlier steps set), or NULL. Borrowed, valid until
 *  the next tern_state_set of the same key or the end of the attempt. */
static inline const json_t *tern_state_get(tern_ctx *ctx, const char *key)
{
    return TERN_HOST_(ctx)->state_get(ctx, key);
}

/** Sets a value of the job's state. Steals `value`. The change is committed together
 *  with this attempt's outcome, in the same Redis round trip. Returns 0, or -1 when
 *  the key is not [A-Za-z0-9_.-]{1,128} (the value is freed all the same). */
static inline int tern_state_set(tern_ctx *ctx, const char *key, json_t *value)
{
    return TERN_HOST_(ctx)->state_set(ctx, key, value);
}

/** Reports progress. Steals `progress`, an object with any of: "percent" (0-100),
 *  "bytes", "total_bytes", "rate" (bytes/s), "eta_s", "message". Appended to the
 *  job's event stream; reports closer than 200 ms apart are coalesced. */
static inline void tern_progress(tern_ctx *ctx, json_t *progress)
{
    TERN_HOST_(ctx)->progress(ctx, progress);
}

/** Logs a line with the job, step and attempt as fields. */
__attribute__((format(printf, 3, 4))) static inline void tern_log(tern_ctx *ctx, int level,
                                                                  const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    TERN_HOST_(ctx)->log(ctx, level, fmt, ap);
    va_end(ap);
}

/* ---- asynchronous services, stopped by the engine if the attempt is cancelled ---- */

/** Starts an HTTP request on the loop. `cb` runs exactly once unless the attempt is
 *  cancelled first. Returns 0, or a negative errno-style code (nothing started). */
static inline int tern_http_request(tern_ctx *ctx, const tern_http_req *req, tern_http_cb cb,
                                    void *data)
{
    return TERN_HOST_(ctx)->http_request(ctx, req, cb, data);
}

/** Starts a child process (never through a shell). `cb` runs exactly once when it has
 *  ended, unless the attempt is cancelled first (the child is then killed). Returns 0,
 *  or a negative errno-style code. */
static inline int tern_spawn(tern_ctx *ctx, const tern_spawn_opts *opts, tern_spawn_cb cb,
                             void *data)
{
    return TERN_HOST_(ctx)->spawn(ctx, opts, cb, data);
}

/** Runs `work(data)` on the libuv thread pool, then `after(ctx, data, status)` on the
 *  loop. After a cancel, `after` is not called, so `work` must not need it to free
 *  `data`: free it in the cancel hook or keep it in plugin state. */
static inline int tern_work(tern_ctx *ctx, tern_work_fn work, tern_after_work_cb after, void *data)
{
    return TERN_HOST_(ctx)->work(ctx, work, after, data);
}

/** Starts a one-shot timer. Returns its id (>= 0) for tern_timer_stop, or < 0. */
static inline int tern_timer_start(tern_ctx *ctx, uint64_t delay_ms, tern_timer_cb cb, void *data)
{
    return TERN_HOST_(ctx)->timer_start(ctx, delay_ms, cb, data);
}

/** Stops a timer before it fires. Returns 0, or < 0 if no such timer is pending. */
static inline int tern_timer_stop(tern_ctx *ctx, int timer_id)
{
    return TERN_HOST_(ctx)->timer_stop(ctx, timer_id);
}

/** Runs a Lua script in Redis. Every key is put inside the plugin's own namespace
 *  ("tern:p:<plugin>:<key>") before it reaches Redis. The reply is converted to JSON
 *  (strings, integers, arrays, null). Returns 0, or < 0 when not connected. */
static inline int tern_redis_eval(tern_ctx *ctx, const char *script, size_t nkeys,
                                  const char *const *keys, size_t nargs, const char *const *args,
                                  tern_redis_cb cb, void *data)
{
    return TERN_HOST_(ctx)->redis_eval(ctx, script, nkeys, keys, nargs, args, cb, data);
}

#ifdef __cplusplus
}
#endif

#endif /* TERN_TASK_H */
