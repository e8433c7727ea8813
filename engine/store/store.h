/*
 * store.h -- everything tern keeps in Redis, and the only code that talks to it about
 * jobs and workflows.
 *
 * Key schema (prefix "tern:"; one Redis, replicated with Sentinel; scripts compute
 * key names, so this is not meant for Redis Cluster):
 *
 *   wf:<uuid>               hash  doc, canon (without uuid), name, version, created_at
 *   wf:index                hash  "<name>@<version>" -> workflow uuid
 *   wf:latest               hash  name -> uuid of the version stored last
 *   wf:all                  zset  workflow uuids by creation time
 *   wfdoc:<uuid>            string  the frozen document of workflow <uuid>, shared by its
 *                                 jobs; written with the version, kept after it is
 *                                 deleted (a uuid names one document for good)
 *   job:<uuid>              hash  the job (fields below)
 *   job:<uuid>:res:<phase>  list  result entries of chain (0), onerror (1), oncancel (2)
 *   job:<uuid>:state        hash  job-scoped state: key -> JSON value text
 *   job:<uuid>:history      list  operator actions (cancel, resume, retry), JSON
 *   job:<uuid>:info         list  node-workflow's job info: entries POSTed to
 *                                 /jobs/:uuid/info (JSON), append-only, bounded
 *   job:<uuid>:held         set   resources the job holds
 *   job:<uuid>:postbacks    list  post-back attempts {url, attempt, time, status|error,
 *                                 delivered, ...} (JSON), the last 200
 *   job:<uuid>:events       stream  the job's events, capped (field "e": JSON); only once
 *                                 the job needs one (see STREAMS in lua/lib/events.lua)
 *   events                  stream  every job's events, capped (about N events: an entry
 *                                 holds one, field "e", or many, field "a")
 *   events:avg              string  moving average of events per entry of `events`
 *                                 (how many entries the cap in events means)
 *   jobs:<execution>        zset  jobs in that execution by creation time; each job is in
 *                                 one, so listing every job merges them (job_list.lua;
 *                                 a separate index of every job cost each job a ZADD)
 *   q:<queue>               list  ready job uuids; new work LPUSHed, runners pop RIGHT
 *   r:<runner>:jobs         list  jobs a runner has claimed (the reliable-queue list)
 *   runners                 zset  runner id -> lease expiry (ms, server clock)
 *   runner:<id>             hash  info (JSON), seen
 *   delayed                 zset  job uuid -> due time (exec_after, backoff, re-queue)
 *   deadlines               zset  job uuid -> workflow deadline, while no runner holds it
 *   queue_waits             zset  job uuid -> when its wait in a step's queue ends (the step's
 *                                 timeout after the hop: lib/queues.lua hop, tick.lua)
 *   unique                  hash  hash of (workflow, target, params) -> unfinished job
 *   locks                   hash  job uuid -> regex over targets, while the job runs
 *   locks:version           string  bumped on every change of locks
 *   locks:sizes             hash  job uuid -> the size of its compiled lock (instructions)
 *   locks:size              string  their sum, checked against max_lock_instructions
 *   hold:<res>:h / :w / :cap  set of holders / FIFO of waiters / capacity per waiter
 *   wake                    channel  a delayed job became the earliest (runners re-arm)
 *   control                 channel  "cancel <uuid>" for the runner running it
 *   queues                  set   every queue name a job was created in or hopped to
 *                                 (GET /metrics)
 *   postbacks               zset  "<job uuid>/<url index>" -> due time of its next
 *                                 post-back attempt (filled by finish() in lib/finish.lua)
 *   postbacks:lease         zset  deliveries claimed by a ternd -> lease expiry
 *   postbacks:wake          channel  a post-back became due at <ms> (deliverers re-arm)
 *   expiring                zset  finished job uuid -> when its keys are deleted (ms):
 *                                 tick.lua deletes them and takes the job out of
 *                                 jobs:<execution> (the keys have no expiry of their own,
 *                                 but a succeeded job's event stream)
 *   sched:<uuid>            hash  a recurring schedule: doc (its definition, JSON),
 *                                 created_at, anchor (ms: intervals tick at anchor + k *
 *                                 every), next_run (its tick, ms), last_run, last_job,
 *                                 paused, fired, skipped, failed, last_error, lease (ms,
 *                                 while a process fires the tick), key
 *   sched:all               zset  schedule uuids by creation time
 *   sched:due               zset  unpaused schedule uuid -> next_run, or the expiry of the
 *                                 lease of the process firing it
 *   sched:names             hash  "<workflow>/<schedule name>" -> uuid (schedules a
 *                                 workflow declares, installed again in place)
 *   sched:wake              channel  a schedule became the earliest due at <ms> (firers
 *                                 re-arm)
 *   p:<plugin>:*            plugins' own keys (tern_redis_eval)
 *
 * Job fields (job:<uuid>), one per line (a long list goes on below its column):
 *
 *   field          type        written by                          read by
 *   uuid           text        none since layout 2 (in the key)    view (job_snapshot adds it)
 *   name           text        job_create (job_create.c)           lib/events, lib/holds,
 *                                                                  postback_claim, view
 *   version        text        job_create (job_create.c)           view
 *   workflow_uuid  text        job_create (job_create.c)           lib/events, lib/snapshot,
 *                                                                  job_claim, job_create,
 *                                                                  job_create.c, runner, view
 *   params         JSON        job_create (job_create.c),          job_claim, job_create,
 *                              job_redrive                         job_create.c, job_list,
 *                                                                  postback_claim, runner, view
 *   target         text        job_create (job_create.c)           lib/holds, job_claim,
 *                                                                  job_create, job_create.c,
 *                                                                  job_redrive, runner, view
 *   queue          text        job_create (absent: default)        lib/queues, job_cancel, tick,
 *                                                                  view
 *   execution      text        lib/finish, lib/queues, job_claim,  lib/events, lib/finish,
 *                              job_create, step_commit             lib/queues, job_cancel,
 *                                                                  job_claim, job_create,
 *                                                                  job_redrive, job_resume,
 *                                                                  postback_claim,
 *                                                                  schedule_claim, step_commit,
 *                                                                  tick, view
 *   created_at     integer ms  job_create                          lib/events, lib/finish,
 *                                                                  lib/queues, job_claim,
 *                                                                  step_commit, view
 *   exec_after     integer ms  job_create                          view
 *   started_at     integer ms  job_claim, job_create               lib/events, job_cancel,
 *                                                                  job_claim, view
 *   started_by     text        job_claim, job_create               lib/events
 *   finished_at    integer ms  lib/finish; job_redrive deletes     lib/events, postback_claim, view
 *   timeout_ms     count (ms)  job_create (job_create.c)           job_claim, view
 *   deadline       integer ms  job_claim, job_create; job_redrive  lib/finish, lib/layout,
 *                              deletes                             lib/queues, job_claim,
 *                                                                  step_commit, runner
 *   runner         text        lib/finish, job_claim, job_create,  lib/finish, job_claim,
 *                              job_redrive, step_begin,            step_begin, step_commit, tick,
 *                              step_commit, tick                   view
 *   fence          count       lib/finish, job_claim, job_create,  job_claim, step_begin,
 *                              tick                                step_commit
 *   phase          count (0-2) job_cancel, job_redrive,            job_cancel, job_claim,
 *                              step_commit                         step_begin, step_commit, tick,
 *                                                                  runner, view
 *   idx            count       job_cancel, job_redrive,            job_claim, step_begin,
 *                              step_commit                         step_commit, tick, runner, view
 *   attempt        count       job_cancel, job_redrive,            job_claim, runner, view
 *                              step_commit
 *   polls          count       job_redrive, step_commit            lib/layout, step_commit
 *   retried        count       tick                                view
 *   error          JSON        lib/finish, step_commit;            job_claim, postback_claim,
 *                              job_redrive deletes                 runner, view
 *   failed_at      text        lib/finish, step_commit;            none by name (whole-hash reads)
 *                              job_redrive deletes
 *   holds          text lines  job_create (job_create.c)           lib/holds, job_claim
 *   hold_events    text lines  job_create (job_create.c)           lib/holds
 *   step_holds     text lines  step_begin; lib/holds deletes       lib/holds, lib/layout,
 *                                                                  step_commit
 *   blocked_on     text        lib/holds, step_begin               lib/finish, lib/holds,
 *                                                                  lib/layout, step_commit, tick,
 *                                                                  view
 *   inflight       text        step_begin; lib/finish,             lib/finish, lib/layout,
 *                              job_redrive, step_commit delete     job_claim, step_commit, tick
 *   cancel         flag        job_cancel; lib/finish,             lib/finish, job_cancel,
 *                              job_redrive delete                  job_claim, step_begin,
 *                                                                  step_commit, runner, view
 *   timed_out      flag        tick; job_redrive deletes           job_claim, tick, runner
 *   resume         JSON        job_resume; lib/finish,             lib/finish, lib/layout,
 *                              job_cancel, job_redrive,            job_claim, step_commit, runner
 *                              step_commit delete
 *   wait_info      JSON        step_commit; job_cancel,            view
 *                              job_redrive, job_resume delete
 *   requeue_info   JSON        step_commit                         none by name (whole-hash reads)
 *   unique         text        job_create, job_redrive             lib/finish, lib/layout,
 *                                                                  step_commit
 *   locks          text        job_create                          lib/finish, lib/layout,
 *                                                                  job_redrive, step_commit
 *   locks_size     count       job_create                          job_redrive
 *   has_oncancel   flag        job_create (job_create.c)           job_cancel
 *   post_back_urls JSON        job_create (job_create.c)           lib/finish, lib/layout,
 *                                                                  postback_claim, step_commit,
 *                                                                  view
 *   admission      JSON        job_create (job_create.c)           job_claim, runner, view
 *   pb_attempt:<i> count       postback_done; lib/finish deletes   postback_claim
 *   pb_fence:<i>   count       postback_claim                      postback_done
 *   step_queue     text        step_commit; job_cancel,            lib/layout, lib/queues,
 *                              job_redrive, tick delete            job_claim, step_commit, tick,
 *                                                                  runner, view
 *   queue_timeout  text        tick; job_redrive, step_commit      lib/layout, job_claim,
 *                              delete                              step_commit, runner
 *   fallback_error JSON        step_commit; job_redrive,           lib/layout, job_claim,
 *                              step_commit delete                  step_commit, runner
 *   hopped         flag        step_commit; job_claim,             job_claim
 *                              job_redrive delete
 *   lv             count       job_create                          none (for a later layout)
 *   xk             flag        lib/holds, job_cancel,              lib/events, lib/finish,
 *                              job_info_add, job_redrive,          lib/layout, lib/snapshot,
 *                              job_resume, postback_done,          step_commit
 *                              step_commit
 *   es             flag        lib/events                          lib/layout, job_claim,
 *                                                                  step_commit
 *   rf             flag        lib/events, lib/holds, job_cancel,  step_commit
 *                              job_claim, job_create,
 *                              job_info_add, job_redrive,
 *                              job_resume, postback_done,
 *                              step_begin, step_commit, tick
 *
 * Notes on the table above:
 * - Writers and readers are script stems of engine/store/lua/, and its libraries as lib/<stem>
 *   (a helper counts as its library); "(job_create.c)": sent by job_create.c, stored by
 *   job_create; "runner": runner.c (job_adopt, from job_claim's answer); "view": job_view.c
 *   (GET /jobs and every answer with a job). A reader of a whole hash (job_get, job_list,
 *   job_events_open) is not listed. tests/unit/test_job_fields_table.c fails on a field the
 *   code uses that is not here, a field here that no code uses, and a script or C file using
 *   a field that its line does not list.
 * - workflow_uuid: its document is wfdoc:<uuid>, which job_claim and lib/snapshot answer
 *   with (job_view.c and runner.c take the document from their answers; runner.c reads
 *   the field itself only from a direct start's fields).
 * - admission: the results of the workflow's admission checks, {"<check>": {"result"}}.
 *   job_create.c also reads workflow_uuid, params and target of a job whose uuid a create
 *   of a workflow with checks names, before running them (on_repeat_read).
 * - started_by: the runner of the first start. holds: job-level, "<capacity> <resource>"
 *   lines, expanded at creation. hold_events: the plugin streams told of the job's waits
 *   for tickets, one Redis key a line, expanded at creation. inflight, failed_at:
 *   "<phase>:<idx>" (inflight: an irreversible step in flight). resume: the outcome
 *   given to a waiting job.
 * - fence: claim counter: a runner's writes carry the fence it claimed with, so a runner
 *   that lost its lease cannot write; bumped also when a claim is revoked (the job
 *   re-queued or failed with StepInterrupted). idx: the cursor (the step to run next);
 *   attempt: failed attempts of that step; retried: times re-queued after a runner died.
 * - step_queue: the queue of the step at the cursor when that step names one (none: the
 *   workflow's queue), where the job waits or runs and goes back to when queued again
 *   (job_queue in lua/lib/queues.lua); written by the commit that moves the cursor there.
 *   queue_timeout: the step queue the job waited in past the step's timeout (tick.lua took
 *   it out): the runner that claims it fails the step with TaskTimeout. fallback_error: the
 *   step's error when its fallback is to run on the step's queue (a `move` commit). hopped:
 *   the job was queued by a hop; the claim that takes it tells no second start.
 * - post_back_urls: JSON array of http(s) URLs given at creation, to be told when the job
 *   ends; pb_attempt:<i> and pb_fence:<i>: attempts made and claims taken of the post-back
 *   to URL i (one field per URL).
 * - lv: the layout the job was stored in (see LAYOUT in lua/lib/layout.lua). Jobs stored by
 *   an earlier layout are not read (they must be drained or deleted before an upgrade), so
 *   no script reads lv: it is written so that a later layout can tell this one's jobs apart.
 *   fence, phase, idx and attempt are not stored while 0: a missing one reads as 0.
 *   locks_size: the size counted for the job in locks:size (the cap on lock patterns).
 * - xk: set once the job has a key beyond its hash, res:0 and events: its end then looks
 *   for holds, and reads of it read those keys (see has_extra_keys in lib/layout.lua); its
 *   retention deletes every key of a job either way (JOB_KEY_SUFFIXES). es: set when
 *   the job's own event stream starts: a job without it has none (see stream_seen). rf:
 *   set, never cleared, once the job may have one of RARE_FIELDS, so step_commit asks for
 *   those only then (see RARE_FIELDS in lib/layout.lua).
 *
 * Every multi-key change is one Lua script (engine/store/lua/), loaded with SCRIPT LOAD on
 * each connect and called with EVALSHA (EVAL when Redis answers NOSCRIPT); creates and
 * step commits made in one turn of the loop share one call (see store_eval). Every
 * state-changing script is safe to repeat after a lost reply: creates are keyed by
 * uuid, step commits by (fence, cursor).
 */
#ifndef TERN_STORE_H
#define TERN_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <uv.h>

#include "redis/redis_addr.h"
#include "redis/redis_conn.h"

typedef struct store store_t;

/* Status of a store call: 0, TERN_ENOTCONN (not sent: Redis unreachable), TERN_EIO
 * (connection lost before the answer: it may or may not have happened), or
 * TERN_EINVAL (Redis answered with an error; errmsg says which). `reply` is valid only
 * during the callback and is NULL unless status is 0. */
typedef void (*store_reply_cb)(void *data, int status, const redisReply *reply, const char *errmsg);

/* Reported when the store becomes usable (connected, scripts loaded) or not. */
typedef void (*store_state_cb)(store_t *s, bool up, void *data);

typedef struct store_opts {
    const redis_addr_t *addr;
    const char *name;            /* connection name prefix: "runner-1" */
    uint32_t event_max_job;      /* events kept per job */
    uint32_t event_max_global;   /* events kept in the global stream */
    uint64_t retention_ms;       /* finished jobs expire after this; 0 keeps them */
    uint64_t success_events_ms;  /* a succeeded job's event stream expires after this (0:
                                  * with the job) */
    uint32_t health_timeout_ms;  /* the store counts as down while its oldest call has
                                  * waited longer (0: 2000); see redis_conn.h */
    uint32_t command_timeout_ms; /* calls still unanswered after this fail with TERN_EIO
                                  * and the connection is made again (0: 5000) */
    store_state_cb on_state;     /* may be NULL */
    void *data;
} store_opts_t;

#define STORE_HEALTH_TIMEOUT_MS  2000
#define STORE_COMMAND_TIMEOUT_MS 5000

/* The scripts of engine/store/lua/, by file stem. */
typedef enum store_script {
    SCRIPT_EVENT_ADD,
    SCRIPT_JOB_CANCEL,
    SCRIPT_JOB_CLAIM,
    SCRIPT_JOB_CREATE,
    SCRIPT_JOB_EVENTS_OPEN,
    SCRIPT_JOB_GET,
    SCRIPT_JOB_INFO_ADD,
    SCRIPT_JOB_INFO_GET,
    SCRIPT_JOB_LIST,
    SCRIPT_JOB_REDRIVE,
    SCRIPT_JOB_RESUME,
    SCRIPT_JOB_STATS,
    SCRIPT_METRICS_READ,
    SCRIPT_POSTBACK_CLAIM,
    SCRIPT_POSTBACK_DONE,
    SCRIPT_RUNNERS_READ,
    SCRIPT_SCHEDULE_ADVANCE,
    SCRIPT_SCHEDULE_CLAIM,
    SCRIPT_SCHEDULE_DELETE,
    SCRIPT_SCHEDULE_PAUSE,
    SCRIPT_SCHEDULE_PUT,
    SCRIPT_SCHEDULE_READ,
    SCRIPT_STEP_BEGIN,
    SCRIPT_STEP_COMMIT,
    SCRIPT_TICK,
    SCRIPT_WORKFLOW_DELETE,
    SCRIPT_WORKFLOW_GET,
    SCRIPT_WORKFLOW_LIST,
    SCRIPT_WORKFLOW_PUT,
    SCRIPT_COUNT
} store_script_t;

/* A growable argument vector for Redis commands. Owns copies of what is pushed. */
typedef struct store_args {
    size_t n, cap;
    char **v;
    size_t *len;
} store_args_t;

void store_args_init(store_args_t *a);
void store_args_push(store_args_t *a, const char *s);
void store_args_pushb(store_args_t *a, const char *buf, size_t len);
void store_args_pushf(store_args_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void store_args_push_u64(store_args_t *a, uint64_t v);
/* Pushes the compact JSON text of v (borrowed); "" when v is NULL. */
void store_args_push_json(store_args_t *a, const json_t *v);
void store_args_dispose(store_args_t *a);

/* Creates the store and starts connecting. Never returns NULL. */
store_t *store_new(uv_loop_t *loop, const store_opts_t *opts);

/* Closes the connection (callbacks of calls sent get TERN_EIO, of calls not sent yet
 * TERN_ENOTCONN) and frees the store once its handles are closed. */
void store_free(store_t *s);

/* True when the store is usable: connected, scripts loaded, and Redis answering (no
 * call has waited longer than the health timeout). */
bool store_is_up(const store_t *s);

/* The Redis address (borrowed), for connections of other kinds (blocking, pub/sub). */
const redis_addr_t *store_addr(const store_t *s);

/* Runs script `id` with the script arguments in `args` (copied; the store prepends
 * the event caps, the retention and the events' time after a success). `cb` runs exactly once
 * unless the call returns non-zero, in which case it does not run at all (TERN_ENOTCONN). The
 * scripts marked "-- batched" (job_create, step_commit) are not sent at once: the call waits for
 * the next turn of the loop and goes to Redis in one script call with every other call of that
 * script made meanwhile (up to STORE_BATCH_MAX), so that many jobs share one round trip and one
 * script run; `cb` gets this call's own element of the answer (an item's Lua error as TERN_EINVAL),
 * or TERN_ENOTCONN when the batch could not be sent. */
int store_eval(store_t *s, store_script_t id, const store_args_t *args, store_reply_cb cb,
               void *data);

/* store_eval taking the arguments instead of copying them: their strings move into
 * the call and *args is left empty (and may be disposed of or reused). For callers
 * that dispose of the arguments right after the call (store_op_send). */
int store_eval_move(store_t *s, store_script_t id, store_args_t *args, store_reply_cb cb,
                    void *data);

/* Most calls of one batched script sent in one script call. */
#define STORE_BATCH_MAX 128
/* Calls of one batched script that are sent at once, without waiting for the end of the
 * loop's turn (see flush_early in store.c). */
#define STORE_FLUSH_EARLY 16

/* Sends a plain command (argv copied). Same callback contract as store_eval; `cb` may
 * be NULL when nobody needs the answer. */
int store_command(store_t *s, const store_args_t *args, store_reply_cb cb, void *data);

/* Appends an event (JSON text) the job's record does not tell to the job's stream
 * (started if need be) and the global one, capped, without waiting for the answer
 * (progress reports). Returns 0 or TERN_ENOTCONN. */
int store_event_append(store_t *s, const char *uuid, const char *json_text);

/* Round-trip time of the last reply in microseconds (for metrics). */
uint64_t store_last_rtt_us(const store_t *s);

/* ---- helpers to read replies --------------------------------------------------- */

/* The element `i` of an array reply, or NULL. */
const redisReply *store_reply_at(const redisReply *r, size_t i);
/* True when r is a string/status reply equal to s. */
bool store_reply_is(const redisReply *r, const char *s);
/* Integer value of an integer reply or of a decimal string reply; `def` otherwise. */
long long store_reply_int(const redisReply *r, long long def);
/* A new JSON object from a flat [k1, v1, k2, v2, ...] array reply (values as strings). */
json_t *store_reply_hash(const redisReply *r);
/* Looks up field `name` in a flat array reply; borrowed string or NULL. */
const char *store_reply_hash_get(const redisReply *r, const char *name, size_t *len);

#endif /* TERN_STORE_H */
