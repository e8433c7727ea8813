/*
 * harness.h -- what the integration tests share: a real redis-server on a free
 * loopback port, real ternd processes, a client (the engine's own store and job_ops
 * on a private loop) and the side channel the itest plugin writes.
 *
 * Everything a test starts it stops by PID. Every wait is bounded and waits on the
 * event itself (a job's "finished" event, a log line, a process exit), never on a
 * fixed sleep. Paths of the built binaries come from the environment set by meson:
 * TERN_BIN (ternd), TERN_TASKS (the build's plugin directory), TERN_ITEST (itest.so).
 *
 * Built on it: world.h, the worlds a test group runs against (directory, redis-server,
 * ternd or a fleet of runners, client), and api_calls.h, calls of the HTTP API and what
 * the tests expect of the answers.
 */
#ifndef TERN_ITEST_HARNESS_H
#define TERN_ITEST_HARNESS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <sys/types.h>

#include <cmocka.h>
#include <jansson.h>
#include <uv.h>

#include "ops/job_ops.h"
#include "redis/redis_addr.h"
#include "store/store.h"

/* A private directory for one test (removed by itest_dir_remove). */
typedef struct itest_dir {
    char path[256];
} itest_dir_t;

void itest_dir_make(itest_dir_t *d);
void itest_dir_remove(itest_dir_t *d);

typedef struct itest_redis {
    pid_t pid;
    int port;
    char dir[256];
    char url[128];
} itest_redis_t;

/* Starts redis-server on 127.0.0.1 and a free port, append-only with fsync on every
 * write, data in `dir`. Waits (at most 10 s) until it answers PING. */
void itest_redis_start(itest_redis_t *r, const char *dir);
/* Stops it with `sig` (SIGTERM or SIGKILL) and reaps it. */
void itest_redis_stop(itest_redis_t *r, int sig);
/* Starts it again on the same port and directory (after itest_redis_stop). */
void itest_redis_restart(itest_redis_t *r);
/* Runs a command on a fresh synchronous connection; returns the reply's integer, or
 * -1. For INFO-style checks. */
long long itest_redis_int(const itest_redis_t *r, const char *fmt, ...);
/* The number of jobs in the per-execution indexes (tern:jobs:<execution>): every job
 * stored and not yet expired is in exactly one. */
long long itest_jobs_indexed(const itest_redis_t *r);
/* The number of jobs stored: keys tern:job:<uuid> (KEYS: for small test databases). */
long long itest_job_hashes(const itest_redis_t *r);
/* Returns the reply of a command as a malloc'd string (or NULL). */
char *itest_redis_str(const itest_redis_t *r, const char *fmt, ...);

typedef struct itest_ternd {
    pid_t pid;
    char id[64];
    char log[400];
    char plugin_dir[400];
    int api_port; /* the HTTP API's port (listening on 127.0.0.1) */
} itest_ternd_t;

/* Starts ternd as runner (and api) with id `id` against `r`, with the build's plugins
 * plus itest, a 1 s lease and 200 ms heartbeat (overridable: later flags win), and the
 * NULL-terminated `extra` flags. Waits (at most 15 s) for its "ready" log line. */
void itest_ternd_start(itest_ternd_t *t, const itest_redis_t *r, const itest_dir_t *dir,
                       const char *id, const char *const *extra);
/* Sends `sig`; when `wait_ms` > 0 waits for the exit and returns the exit status (or
 * 128+signal), else returns -1 without waiting. */
int itest_ternd_signal(itest_ternd_t *t, int sig, unsigned wait_ms);
/* True when the process's log holds `needle`. */
bool itest_ternd_log_has(const itest_ternd_t *t, const char *needle);
/* True when one line of the process's log holds both needles. */
bool itest_ternd_log_has_both(const itest_ternd_t *t, const char *a, const char *b);

/* The peak resident set (VmHWM) of process `pid` in kB, or -1 when unknown. */
long itest_peak_rss_kb(pid_t pid);
/* The state letter of process `pid` in /proc ('R', 'S', 'T', 'Z', ...), its parent's
 * pid into *ppid when ppid is not NULL; '\0' when the process is gone or unreadable. */
char itest_proc_state(pid_t pid, pid_t *ppid);

/* The runners one test starts (at most ITEST_FLEET_MAX), kept so that its teardown
 * stops, by PID, those a failed assertion left running. Zeroed means empty. */
#define ITEST_FLEET_MAX 4
typedef struct itest_fleet {
    itest_ternd_t runners[ITEST_FLEET_MAX];
    size_t n;
} itest_fleet_t;

/* Starts runner `id` serving `queue`, with the NULL-terminated extra flags `more`
 * (may be NULL), and adds it to the fleet; a full fleet fails the test. */
itest_ternd_t *itest_fleet_start(itest_fleet_t *f, const itest_redis_t *r, const itest_dir_t *dir,
                                 const char *id, const char *queue, const char *const *more);
/* Stops the fleet's runners still running (SIGCONT first: a test may have stopped
 * one), waiting at most wait_ms for each, and empties the fleet. */
void itest_fleet_stop(itest_fleet_t *f, unsigned wait_ms);

/* A client on a private loop: the same store and job operations the API uses. */
typedef struct itest_client {
    uv_loop_t loop;
    redis_addr_t addr;
    store_t *store;
    job_ops_t *ops;
} itest_client_t;

void itest_client_open(itest_client_t *c, const itest_redis_t *r);
void itest_client_close(itest_client_t *c);
/* Runs the client's loop until *done or `ms` pass; returns *done. */
bool itest_client_run_until(itest_client_t *c, bool *done, unsigned ms);
/* Runs the client's loop until its store is up (or down), or fails the test after
 * timeout_ms. The client notices a lost connection only while its loop runs, as any
 * process on a loop does. */
void itest_client_wait_state(itest_client_t *c, bool up, unsigned timeout_ms);

/* The answer of one job_ops call made with itest_on_answer and &answer (zeroed). */
typedef struct itest_answer {
    bool done;
    int status;
    json_t *result; /* a copy (owned), or NULL */
    char msg[1024];
} itest_answer_t;

/* A job_ops_cb that fills the itest_answer_t given as data. */
void itest_on_answer(void *data, int status, const json_t *result, const char *message);
/* Runs the client's loop until the answer came (at most 10 s, else the test fails) and
 * returns its status; the result goes to *result (new reference) when result is not
 * NULL, the message to msg when msg is not NULL. */
int itest_answer_wait(itest_client_t *c, itest_answer_t *answer, json_t **result, char *msg,
                      size_t msglen);

/* Synchronous wrappers: each runs the client's loop until the answer (bounded). They
 * return the status and fill *result (new reference, may be NULL) and msg. */
int itest_workflow_put(itest_client_t *c, const char *json_text, json_t **result, char *msg,
                       size_t msglen);
/* Stores a workflow that must be accepted: a refusal fails the test with
 * "workflow refused: <message>". */
void itest_workflow_put_ok(itest_client_t *c, const char *json_text);
/* Creates a job; params_json may be NULL. Returns the status; the uuid goes to uuid. */
int itest_job_create(itest_client_t *c, const char *workflow, const char *params_json,
                     const char *target, uint64_t exec_after_ms, const char *locks, char uuid[40],
                     char *msg, size_t msglen);
/* Creates a job (params_json may be NULL) or fails the test with the refusal. */
void itest_job_create_ok(itest_client_t *c, const char *workflow, const char *params_json,
                         char uuid[40]);
/* Waits for the job's end and returns it (new reference), or fails the test after
 * timeout_ms, naming the execution the job is in then. */
json_t *itest_wait_finished_ok(itest_client_t *c, const char *uuid, unsigned timeout_ms);
json_t *itest_job_get(itest_client_t *c, const char *uuid);
int itest_job_cancel(itest_client_t *c, const char *uuid, char *msg, size_t msglen);
int itest_job_resume(itest_client_t *c, const char *uuid, const char *result_json,
                     const char *error_json, char *msg, size_t msglen);
int itest_job_redrive(itest_client_t *c, const char *uuid, const char *from_step,
                      const char *params_json, char *msg, size_t msglen);

/* Follows the job's events from its start until an event of `type` ("finished",
 * "waiting", "running", "step", ...) and, when `status` is not NULL, with that
 * "status" field; at most timeout_ms. Returns the event (new reference) or NULL. */
json_t *itest_wait_event(itest_client_t *c, const char *uuid, const char *type, const char *status,
                         unsigned timeout_ms);
/* The same for the `nth` such event (1: the first) that, when `index` >= 0, is also
 * about chain step `index` ("phase" "chain", "index"): a redriven job's stream still
 * holds the events of its first run. */
json_t *itest_wait_event_nth(itest_client_t *c, const char *uuid, const char *type,
                             const char *status, long long index, int nth, unsigned timeout_ms);
/* The job's first event of `type` (new reference), or fails the test after
 * timeout_ms. */
json_t *itest_wait_event_ok(itest_client_t *c, const char *uuid, const char *type,
                            unsigned timeout_ms);
/* Waits for the job's "finished" event and returns the job (new reference), or NULL
 * after timeout_ms. */
json_t *itest_wait_finished(itest_client_t *c, const char *uuid, unsigned timeout_ms);
/* All events of the job so far (new reference, array). */
json_t *itest_events(itest_client_t *c, const char *uuid);

/* The side channel: lines "<what> <key> <attempt> <job>". Counts lines of `what`
 * ("start", "cancel") whose key starts with `key_prefix` (e.g. "<uuid>/0/3"); NULL
 * counts all lines of `what`. */
int itest_side_count(const char *file, const char *what, const char *key_prefix);
/* Lines of `what` whose key is exactly `key` ("<uuid>/0/1", not its fallback). */
int itest_side_count_exact(const char *file, const char *what, const char *key);
/* Start lines of exactly "<uuid>/<phase>/<idx>" (phase 0: chain; not its fallback). */
int itest_side_starts(const char *file, const char *uuid, int phase, int idx);
/* One line of the side channel: when (wall-clock ms) and in which process. */
typedef struct itest_side_line {
    long long time_ms;
    long pid;
    unsigned attempt;
} itest_side_line_t;
/* The lines of `what` whose key is exactly `key`, in order, at most `max` of them into
 * `out`; returns how many there are (possibly more than max). */
int itest_side_lines(const char *file, const char *what, const char *key, itest_side_line_t *out,
                     int max);
/* Waits until the side channel holds at least `n` lines of `what` with `key_prefix`
 * (NULL: any key), or fails the test after timeout_ms. The side channel is a file the
 * tasks write when they start, so this waits on the start itself. */
void itest_side_wait(const char *file, const char *what, const char *key_prefix, int n,
                     unsigned timeout_ms);

/* How many events of `events` (an array) have `type` and, when `status` is not NULL,
 * that "status" field. */
int itest_count_events(const json_t *events, const char *type, const char *status);

/* The execution of a job view ("succeeded", ...). */
const char *itest_execution(const json_t *job);
/* The string member `key` of object `o` (borrowed from o), or "(none)" when o is NULL
 * or the member is absent or not a string. */
const char *itest_str_of(const json_t *o, const char *key);
/* The "code" of the "error" object of `holder` (a job, a chain result), or "(none)". */
const char *itest_error_code_of(const json_t *holder);

/* The value of sample `series` (a name with its labels, as the page spells it) in a
 * Prometheus text page, or -1 when page is NULL or has no such line. */
double itest_metric_sample(const char *page, const char *series);

/* Writes `text` to `path` (created or truncated), or fails the test. */
void itest_write_file(const char *path, const char *text);
/* The size of the file in bytes; 0 when it does not exist. */
long itest_file_size(const char *path);

/* Formats into a static buffer (one at a time): for building workflow JSON. */
const char *itest_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Sleeps `ms` milliseconds; only for polling something that has no event. */
void itest_pause_ms(unsigned ms);

#endif /* TERN_ITEST_HARNESS_H */
