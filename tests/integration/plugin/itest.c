/*
 * itest.c -- a plugin for the integration tests. Every task appends a line to a side
 * channel file given in its arguments when it starts ("start <key> <attempt> <job>
 * <wall-clock ms> <pid>") and, for
 * some, when something else happens ("cancel <key>"), so a test can count how many
 * times each step really ran, on any runner, across crashes. Lines are written with one
 * write(2) on an O_APPEND descriptor, so concurrent runners never interleave them.
 *
 * Tasks (all take "file": the side channel path):
 *   itest.record  {"ms"}            record, sleep ms (cancel hook records "cancel")
 *   itest.flaky   {"fail_times", "code"}  fail the first fail_times attempts of the
 *                                    step (counted in the file), then succeed
 *   itest.fatal   {}                 fail with FatalThing, listed as non-retryable
 *   itest.check   {"ok"}             fail with NotOk unless ok is true
 *   itest.wait    {"ms"}             ask the job to wait for a resume (after ms, if given)
 *   itest.poll    {"times", "delay_ms"}  re-queue until polled `times` times
 *   itest.crash   {}                 segfault (for isolated steps)
 *   itest.hang    {}                 never report
 *   itest.twice   {}                 report done twice
 *   itest.counter {"key"}            INCR the key in the plugin's Redis namespace
 *   itest.progress {"total", "reports", "every_ms"}  reports progress of a copy of
 *                                    `total` bytes `reports` times, then succeeds
 *
 * For admission checks (ABI 1.2):
 *   itest.admit_ok {...}             record, then done with {"args": its args, "job":
 *                                    the job's uuid, "target": its target or null}
 *   itest.admit_refuse {"status", "code", "message"}  record, then tern_task_refuse
 *   itest.admit_hang {}              record, start a 60 s timer that would record
 *                                    "fired" and never report (cancel hook: "cancel")
 *   itest.admit_crash {}             record, then abort() (for isolated checks)
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tern/task.h>

static void record(const json_t *args, const char *what, tern_ctx *ctx)
{
    const char *file = json_string_value(json_object_get(args, "file"));
    if (file == NULL)
        return;
    /* The wall-clock time (ms) and the process, so a test can tell when and where a
     * step started. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    long long ms = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    char line[512];
    int n = snprintf(line, sizeof line, "%s %s %u %s %lld %ld\n", what, tern_idempotency_key(ctx),
                     tern_step_attempt(ctx), tern_job_uuid(ctx), ms, (long)getpid());
    int fd = open(file, O_WRONLY | O_APPEND | O_CREAT, 0600);
    if (fd < 0)
        return;
    if (write(fd, line, (size_t)n) != n)
        tern_log(ctx, TERN_LOG_WARN, "side channel write to %s was short", file);
    close(fd);
}

/* Counts lines starting with "<what> <key> " in the side channel. */
static int count(const json_t *args, const char *what, tern_ctx *ctx)
{
    const char *file = json_string_value(json_object_get(args, "file"));
    FILE *f = file != NULL ? fopen(file, "r") : NULL;
    if (f == NULL)
        return 0;
    char prefix[300], line[512];
    snprintf(prefix, sizeof prefix, "%s %s ", what, tern_idempotency_key(ctx));
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, prefix, strlen(prefix)) == 0)
            n++;
    fclose(f);
    return n;
}

static void on_record_timer(tern_ctx *ctx, void *data)
{
    (void)data;
    tern_task_done(ctx, json_pack("{s:b}", "recorded", 1));
}

static void record_start(tern_ctx *ctx, const json_t *args)
{
    record(args, "start", ctx);
    json_int_t ms = json_integer_value(json_object_get(args, "ms"));
    /* Keep the file name where the cancel hook can find it. */
    tern_state_set(ctx, "itest_last_file", json_incref(json_object_get(args, "file")));
    tern_timer_start(ctx, (uint64_t)ms, on_record_timer, NULL);
}

static void record_cancel(tern_ctx *ctx)
{
    const json_t *f = tern_state_get(ctx, "itest_last_file");
    json_t *args = json_pack("{s:O}", "file", f ? f : json_null());
    record(args, "cancel", ctx);
    json_decref(args);
}

static void flaky_start(tern_ctx *ctx, const json_t *args)
{
    record(args, "start", ctx);
    int failed = count(args, "start", ctx) - 1;
    json_int_t fail_times = json_integer_value(json_object_get(args, "fail_times"));
    const char *code = json_string_value(json_object_get(args, "code"));
    if (failed < fail_times) {
        tern_task_fail(ctx, code ? code : "Flaky", "failure %d of %lld", failed + 1,
                       (long long)fail_times);
        return;
    }
    tern_task_done(ctx, json_pack("{s:i}", "attempts", failed + 1));
}

static void fatal_start(tern_ctx *ctx, const json_t *args)
{
    record(args, "start", ctx);
    tern_task_fail(ctx, "FatalThing", "this cannot work, do not retry");
}

static void check_start(tern_ctx *ctx, const json_t *args)
{
    record(args, "start", ctx);
    if (json_is_true(json_object_get(args, "ok")))
        tern_task_done(ctx, json_pack("{s:b}", "ok", 1));
    else
        tern_task_fail(ctx, "NotOk", "ok is not true");
}

static void on_wait_timer(tern_ctx *ctx, void *data)
{
    (void)data;
    tern_task_wait(ctx, json_pack("{s:s}", "waiting_for", "an operator"));
}

static void wait_start(tern_ctx *ctx, const json_t *args)
{
    record(args, "start", ctx);
    json_int_t ms = json_integer_value(json_object_get(args, "ms"));
    if (ms > 0) {
        tern_timer_start(ctx, (uint64_t)ms, on_wait_timer, NULL);
        return;
    }
    tern_task_wait(ctx, json_pack("{s:s}", "waiting_for", "an operator"));
}

static void poll_start(tern_ctx *ctx, const json_t *args)
{
    record(args, "start", ctx);
    int polls = count(args, "start", ctx);
    json_int_t times = json_integer_value(json_object_get(args, "times"));
    if (polls <= times) {
        tern_task_requeue(ctx, (uint64_t)json_integer_value(json_object_get(args, "delay_ms")),
                          json_pack("{s:i}", "poll", polls));
        return;
    }
    tern_task_done(ctx, json_pack("{s:i}", "polls", polls));
}

static void crash_start(tern_ctx *ctx, const json_t *args)
{
    record(args, "start", ctx);
    raise(SIGSEGV);
}

static void hang_start(tern_ctx *ctx, const json_t *args)
{
    record(args, "start", ctx);
}

static void twice_start(tern_ctx *ctx, const json_t *args)
{
    record(args, "start", ctx);
    tern_task_done(ctx, json_pack("{s:i}", "report", 1));
    tern_task_done(ctx, json_pack("{s:i}", "report", 2));
}

static void on_counter(tern_ctx *ctx, const json_t *reply, const char *error, void *data)
{
    (void)data;
    if (error != NULL) {
        tern_task_fail(ctx, "RedisError", "%s", error);
        return;
    }
    tern_task_done(ctx, json_pack("{s:O}", "value", reply));
}

static void counter_start(tern_ctx *ctx, const json_t *args)
{
    const char *key = json_string_value(json_object_get(args, "key"));
    const char *keys[] = {key != NULL ? key : "counter"};
    int rc = tern_redis_eval(ctx, "return redis.call('INCR', KEYS[1])", 1, keys, 0, NULL,
                             on_counter, NULL);
    if (rc != 0)
        tern_task_fail(ctx, "RedisError", "tern_redis_eval refused: %d", rc);
}

typedef struct progress_state {
    json_int_t total, done;
    json_int_t reports, sent;
    json_int_t every_ms;
    uint64_t started_ms;
} progress_state_t;

static void on_progress_tick(tern_ctx *ctx, void *data)
{
    progress_state_t *st = data;
    st->sent++;
    st->done = st->total * st->sent / st->reports;
    double elapsed_s = (double)(st->sent * st->every_ms) / 1000.0;
    double rate = elapsed_s > 0 ? (double)st->done / elapsed_s : 0;
    double eta = rate > 0 ? (double)(st->total - st->done) / rate : 0;
    tern_progress(ctx, json_pack("{s:f, s:I, s:I, s:f, s:f, s:s}", "percent",
                                 100.0 * (double)st->done / (double)st->total, "bytes", st->done,
                                 "total_bytes", st->total, "rate", rate, "eta_s", eta, "message",
                                 "copying"));
    if (st->sent >= st->reports) {
        json_int_t total = st->total;
        free(st);
        tern_task_done(ctx, json_pack("{s:I}", "copied", total));
        return;
    }
    if (tern_timer_start(ctx, (uint64_t)st->every_ms, on_progress_tick, st) < 0) {
        free(st);
        tern_task_fail(ctx, "TimerError", "cannot start a timer");
    }
}

static void progress_start(tern_ctx *ctx, const json_t *args)
{
    record(args, "start", ctx);
    progress_state_t *st = calloc(1, sizeof *st);
    st->total = json_integer_value(json_object_get(args, "total"));
    st->reports = json_integer_value(json_object_get(args, "reports"));
    st->every_ms = json_integer_value(json_object_get(args, "every_ms"));
    if (st->total <= 0 || st->reports <= 0 || st->every_ms <= 0) {
        free(st);
        tern_task_fail(ctx, "FatalThing", "total, reports and every_ms must be positive");
        return;
    }
    /* Test task: a cancel leaks this small record, which the test process outlives. */
    if (tern_timer_start(ctx, (uint64_t)st->every_ms, on_progress_tick, st) < 0) {
        free(st);
        tern_task_fail(ctx, "TimerError", "cannot start a timer");
    }
}

/* Records args (an object with a string "id") as a note in the plugin's namespace, for
 * the read views below: its JSON text at "note:<id>", its id in the set "notes". */
static void note_start(tern_ctx *ctx, const json_t *args)
{
    const char *id = json_string_value(json_object_get(args, "id"));
    if (id == NULL) {
        tern_task_fail(ctx, "FatalThing", "args.id: a string is required");
        return;
    }
    char *text = json_dumps(args, JSON_COMPACT | JSON_SORT_KEYS);
    const char *keys[] = {"notes", "note:"};
    const char *argv[] = {id, text};
    int rc = tern_redis_eval(ctx,
                             "redis.call('ZADD', KEYS[1], 0, ARGV[1]) "
                             "redis.call('SET', KEYS[2] .. ARGV[1], ARGV[2]) "
                             "return redis.call('ZCARD', KEYS[1])",
                             2, keys, 2, argv, on_counter, NULL);
    free(text);
    if (rc != 0)
        tern_task_fail(ctx, "RedisError", "tern_redis_eval refused: %d", rc);
}

static void admit_ok_start(tern_ctx *ctx, const json_t *args)
{
    record(args, "start", ctx);
    const char *target = tern_job_target(ctx);
    tern_task_done(ctx, json_pack("{s:O, s:s, s:s?}", "args", args, "job", tern_job_uuid(ctx),
                                  "target", target));
}

static void admit_refuse_start(tern_ctx *ctx, const json_t *args)
{
    record(args, "start", ctx);
    const char *code = json_string_value(json_object_get(args, "code"));
    const char *message = json_string_value(json_object_get(args, "message"));
    tern_task_refuse(ctx, (int)json_integer_value(json_object_get(args, "status")),
                     code != NULL ? code : "Refused", "%s", message != NULL ? message : "refused");
}

/* Records `what` in the side channel kept in state by admit_hang_start. */
static void admit_hang_record(tern_ctx *ctx, const char *what)
{
    const json_t *f = tern_state_get(ctx, "itest_last_file");
    json_t *args = json_pack("{s:O}", "file", f ? f : json_null());
    record(args, what, ctx);
    json_decref(args);
}

static void on_admit_hang_timer(tern_ctx *ctx, void *data)
{
    (void)data;
    admit_hang_record(ctx, "fired");
}

static void admit_hang_start(tern_ctx *ctx, const json_t *args)
{
    record(args, "start", ctx);
    tern_state_set(ctx, "itest_last_file", json_incref(json_object_get(args, "file")));
    tern_timer_start(ctx, 60000, on_admit_hang_timer, NULL);
}

static void admit_hang_cancel(tern_ctx *ctx)
{
    admit_hang_record(ctx, "cancel");
}

static void admit_crash_start(tern_ctx *ctx, const json_t *args)
{
    record(args, "start", ctx);
    abort();
}

static const char *const fatal_codes[] = {"FatalThing", NULL};

#define TASK(n, fn, cancel_fn)                                                                     \
    static const tern_task_def n##_def = {                                                         \
        .size = sizeof(tern_task_def),                                                             \
        .name = #n,                                                                                \
        .summary = "integration test task " #n,                                                    \
        .fatal_codes = fatal_codes,                                                                \
        .start = fn,                                                                               \
        .cancel = cancel_fn,                                                                       \
    }

TASK(record, record_start, record_cancel);
TASK(flaky, flaky_start, NULL);
TASK(fatal, fatal_start, NULL);
TASK(check, check_start, NULL);
TASK(wait, wait_start, NULL);
TASK(poll, poll_start, NULL);
TASK(crash, crash_start, NULL);
TASK(hang, hang_start, NULL);
TASK(twice, twice_start, NULL);
TASK(counter, counter_start, NULL);
TASK(progress, progress_start, NULL);
TASK(note, note_start, NULL);

TASK(admit_ok, admit_ok_start, NULL);
TASK(admit_refuse, admit_refuse_start, NULL);
TASK(admit_hang, admit_hang_start, admit_hang_cancel);
TASK(admit_crash, admit_crash_start, NULL);

static const tern_task_def *const tasks[] = {
    &record_def,   &flaky_def,        &fatal_def,      &check_def,       &wait_def,     &poll_def,
    &crash_def,    &hang_def,         &twice_def,      &counter_def,     &progress_def, &note_def,
    &admit_ok_def, &admit_refuse_def, &admit_hang_def, &admit_crash_def, NULL};

/* ---- read views over the notes ------------------------------------------------- */

/* Notes in id order, filtered on ?kind=, paged by ?limit= and ?marker= (the last id of
 * the page before) or ?offset=; x-count without a filter. */
static const char *const notes_params[] = {"kind", NULL};
static const char *const notes_keys[] = {"notes", "note:", NULL};
static const tern_view_def notes_view = {
    .size = sizeof(tern_view_def),
    .path = "/itest/notes",
    .summary = "The notes itest.note recorded, in id order.",
    .params = notes_params,
    .keys = notes_keys,
    .script = "local limit, offset, marker = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]\n"
              "local p = cjson.decode(ARGV[4])\n"
              "local ids = redis.call('ZRANGEBYLEX', KEYS[1], marker ~= '' and '(' .. marker "
              "or '-', '+')\n"
              "local out, n, last, skipped = {}, 0, nil, 0\n"
              "local count = p.kind == nil and redis.call('ZCARD', KEYS[1]) or nil\n"
              "for _, id in ipairs(ids) do\n"
              "  local text = redis.call('GET', KEYS[2] .. id)\n"
              "  local note = text and cjson.decode(text)\n"
              "  if note and (p.kind == nil or note.kind == p.kind) then\n"
              "    if skipped < offset then skipped = skipped + 1\n"
              "    elseif n == limit then return {cjson.encode(out), last, count}\n"
              "    else n = n + 1; out[n] = note; last = id end\n"
              "  end\n"
              "end\n"
              "return {n == 0 and '[]' or cjson.encode(out), false, count}\n",
};

/* One note by its id; 404 when there is none. */
static const char *const note_keys[] = {"note:", NULL};
static const tern_view_def note_view = {
    .size = sizeof(tern_view_def),
    .path = "/itest/notes/:id",
    .summary = "One note.",
    .keys = note_keys,
    .script = "local p = cjson.decode(ARGV[4])\n"
              "return redis.call('GET', KEYS[1] .. p.id)\n",
};

/* A script that fails, one that tries to write and one that answers what is not JSON. */
static const tern_view_def broken_view = {
    .size = sizeof(tern_view_def),
    .path = "/itest/broken",
    .script = "return redis.call('NOSUCHCOMMAND')",
};
static const char *const write_keys[] = {"notes", NULL};
static const tern_view_def write_view = {
    .size = sizeof(tern_view_def),
    .path = "/itest/write",
    .keys = write_keys,
    .script = "redis.call('DEL', KEYS[1]) return '[]'",
};
static const tern_view_def bad_marker_view = {
    .size = sizeof(tern_view_def),
    .path = "/itest/bad_marker",
    .script = "return {'[]', 'n1\\r\\nx-injected: 1'}",
};
static const tern_view_def not_json_view = {
    .size = sizeof(tern_view_def),
    .path = "/itest/not_json",
    .script = "return 'not json'",
};

/* Refuses with the status and code ?as= names ("409 InvalidArgument"), as a view
 * refuses a parameter it finds wrong; an error that only looks like a refusal (a status
 * outside 4xx, no code) is the script's failure. */
static const char *const refuse_params[] = {"as", NULL};
static const tern_view_def refuse_view = {
    .size = sizeof(tern_view_def),
    .path = "/itest/refuse",
    .params = refuse_params,
    .script = "local as = cjson.decode(ARGV[4]).as or '409 InvalidArgument'\n"
              "return redis.error_reply('REFUSED ' .. as .. ' kind: not one of a, b')\n",
};

/* Spins for ?ms= milliseconds of Redis's clock, then answers: a view longer than the
 * store's command timeout. */
static const char *const slow_params[] = {"ms", NULL};
static const tern_view_def slow_view = {
    .size = sizeof(tern_view_def),
    .path = "/itest/slow",
    .params = slow_params,
    .script = "local ms = tonumber(cjson.decode(ARGV[4]).ms or '0')\n"
              "local function now() local t = redis.call('TIME') "
              "return t[1] * 1000 + math.floor(t[2] / 1000) end\n"
              "local t0 = now()\n"
              "while now() - t0 < ms do end\n"
              "return '{\"slept\": true}'\n",
};

/* A streaming view (ABI 1.3) over a feed the test writes: the JSON texts of the list
 * "feed:<name>:history" as its lines, then the stream "feed:<name>" after its last
 * entry as of the script's call. ?follow=no answers follow null; ?refuse=1 refuses
 * 409. The lines are joined as text: cjson would encode no lines as {}. */
static const char *const feed_params[] = {"follow", "refuse", NULL};
static const char *const feed_keys[] = {"feed:", NULL};
static const tern_view_def feed_view = {
    .size = sizeof(tern_view_def),
    .flags = TERN_VIEW_STREAM,
    .path = "/itest/feeds/:name",
    .summary = "A feed's history, then its stream as it grows.",
    .params = feed_params,
    .keys = feed_keys,
    .script = "local p = cjson.decode(ARGV[4])\n"
              "if p.refuse then\n"
              "  return redis.error_reply('REFUSED 409 InvalidArgument refuse: asked to')\n"
              "end\n"
              "local key = KEYS[1] .. p.name\n"
              "local lines = redis.call('LRANGE', key .. ':history', 0, -1)\n"
              "local last = redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)\n"
              "local after = last[1] and last[1][1] or '0'\n"
              "local follow = p.follow == 'no' and 'null' or cjson.encode('feed:' .. p.name)\n"
              "return '{\"lines\":[' .. table.concat(lines, ',') .. '],\"follow\":' .. follow\n"
              "  .. ',\"after\":\"' .. after .. '\"}'\n",
};

/* A streaming view whose answer is wrong: a line that is no object. */
static const tern_view_def bad_feed_view = {
    .size = sizeof(tern_view_def),
    .flags = TERN_VIEW_STREAM,
    .path = "/itest/bad_feed",
    .script = "return '{\"lines\": [1], \"follow\": null}'",
};

static const tern_view_def *const views[] = {
    &notes_view, &note_view,       &broken_view, &write_view, &not_json_view,
    &slow_view,  &bad_marker_view, &refuse_view, &feed_view,  &bad_feed_view,
    NULL};

static const tern_plugin itest_plugin = {
    .magic = TERN_PLUGIN_MAGIC,
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
    .size = sizeof(tern_plugin),
    .name = "itest",
    .version = "1.0.0",
    .tasks = tasks,
    .views = views,
};

TERN_PLUGIN(itest_plugin)
