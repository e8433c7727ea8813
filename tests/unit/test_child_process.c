/*
 * test_child_process.c -- child processes on the loop: output tails, exit codes and
 * signals, timeouts (SIGTERM, then SIGKILL), stdin, env and cwd, spawn errors, and a
 * cancel that never calls back. Every test runs a private loop, waits with a bound and
 * ends with uv_loop_close() == 0.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "loop_util.h"
#include "run/child_process.h"

#define BOUND_MS 10000

/* What the callback saw, copied out of the tern_spawn_res. */
typedef struct outcome {
    bool done;
    int calls;
    int64_t exit_status;
    int term_signal;
    int timed_out;
    char *out;
    size_t out_len;
    char *err;
    size_t err_len;
    uint64_t elapsed_ms;
} outcome_t;

static void on_child_done(void *data, const tern_spawn_res *res)
{
    outcome_t *o = data;
    o->calls++;
    o->done = true;
    o->exit_status = res->exit_status;
    o->term_signal = res->term_signal;
    o->timed_out = res->timed_out;
    assert_int_equal(res->stdout_tail[res->stdout_len], '\0');
    assert_int_equal(res->stderr_tail[res->stderr_len], '\0');
    o->out = xmalloc(res->stdout_len + 1);
    memcpy(o->out, res->stdout_tail, res->stdout_len + 1);
    o->out_len = res->stdout_len;
    o->err = xmalloc(res->stderr_len + 1);
    memcpy(o->err, res->stderr_tail, res->stderr_len + 1);
    o->err_len = res->stderr_len;
    o->elapsed_ms = res->elapsed_ms;
}

static void outcome_dispose(outcome_t *o)
{
    free(o->out);
    free(o->err);
}

/* Spawns, waits for the callback with a bound, closes the loop. */
static void run_child(const tern_spawn_opts *opts, outcome_t *o)
{
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    char err[256] = "";
    memset(o, 0, sizeof *o);
    child_process_t *cp = child_process_spawn(&loop, opts, on_child_done, o, err, sizeof err);
    if (cp == NULL)
        fail_msg("spawn failed: %s", err);
    assert_int_equal(loop_run_until_flag(&loop, &o->done, BOUND_MS), 0);
    assert_int_equal(loop_close_bounded(&loop, BOUND_MS), 0);
    assert_int_equal(o->calls, 1);
}

#define OPTS(...) ((tern_spawn_opts){.size = sizeof(tern_spawn_opts), __VA_ARGS__})

static void test_echo_to_stdout(void **state)
{
    (void)state;
    const char *argv[] = {"echo", "hello", "world", NULL};
    outcome_t o;
    run_child(&OPTS(.argv = argv), &o);
    assert_int_equal(o.exit_status, 0);
    assert_int_equal(o.term_signal, 0);
    assert_int_equal(o.timed_out, 0);
    assert_string_equal(o.out, "hello world\n");
    assert_int_equal(o.out_len, 12);
    assert_string_equal(o.err, "");
    assert_true(o.elapsed_ms < BOUND_MS);
    outcome_dispose(&o);
}

/* Lines delivered as they come: "|"-joined, and how many. */
typedef struct lines_seen {
    char text[256];
    int n;
} lines_seen_t;

static void on_line(void *data, const char *line, size_t len)
{
    lines_seen_t *l = data;
    size_t used = strlen(l->text);
    snprintf(l->text + used, sizeof l->text - used, "%s%.*s", l->n ? "|" : "", (int)len, line);
    l->n++;
}

/* stdout line by line: complete lines only (an unterminated last one is not a line),
 * empty lines too, a line longer than CHILD_LINE_MAX skipped whole; the tail keeps
 * everything as before. */
static void test_stdout_lines(void **state)
{
    (void)state;
    const char *argv[] = {"sh", "-c",
                          "printf 'a\\n\\nbb\\n'; head -c 1100000 /dev/zero | tr '\\0' x; "
                          "printf '\\nafter\\nccc'",
                          NULL};
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    outcome_t o;
    memset(&o, 0, sizeof o);
    lines_seen_t seen = {0};
    char err[256] = "";
    tern_spawn_opts opts = OPTS(.argv = argv);
    child_process_t *cp = child_process_spawn(&loop, &opts, on_child_done, &o, err, sizeof err);
    if (cp == NULL)
        fail_msg("spawn failed: %s", err);
    child_process_on_stdout_line(cp, on_line, &seen);
    assert_int_equal(loop_run_until_flag(&loop, &o.done, BOUND_MS), 0);
    assert_int_equal(loop_close_bounded(&loop, BOUND_MS), 0);
    assert_int_equal(seen.n, 4);
    assert_string_equal(seen.text, "a||bb|after");
    assert_int_equal(o.exit_status, 0);
    assert_true(o.out_len >= 10 && strcmp(o.out + o.out_len - 10, "\nafter\nccc") == 0);
    outcome_dispose(&o);
}

static void test_both_streams(void **state)
{
    (void)state;
    const char *argv[] = {"sh", "-c", "echo out; echo err >&2; echo more", NULL};
    outcome_t o;
    run_child(&OPTS(.argv = argv), &o);
    assert_int_equal(o.exit_status, 0);
    assert_string_equal(o.out, "out\nmore\n");
    assert_string_equal(o.err, "err\n");
    outcome_dispose(&o);
}

/* The text `seq 1 n` prints. */
static char *seq_text(int n, size_t *len)
{
    size_t cap = (size_t)n * 8 + 1, used = 0;
    char *s = xmalloc(cap);
    for (int i = 1; i <= n; i++)
        used += (size_t)snprintf(s + used, cap - used, "%d\n", i);
    *len = used;
    return s;
}

static void test_tail_keeps_last_bytes(void **state)
{
    (void)state;
    size_t full_len;
    char *full = seq_text(100000, &full_len); /* 588895 bytes: many reads */

    static const size_t tails[] = {1, 100, 4095, 65536, 70000};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(tails); i++) {
        const char *argv[] = {"sh", "-c", "seq 1 100000 >&2; echo short", NULL};
        outcome_t o;
        run_child(&OPTS(.argv = argv, .tail_bytes = tails[i]), &o);
        assert_int_equal(o.exit_status, 0);
        assert_int_equal(o.err_len, tails[i]);
        assert_memory_equal(o.err, full + full_len - tails[i], tails[i]);
        /* stdout is shorter than most tails: all of it, or its last bytes. */
        size_t want = tails[i] < 6 ? tails[i] : 6;
        assert_int_equal(o.out_len, want);
        assert_string_equal(o.out, "short\n" + 6 - want);
        outcome_dispose(&o);
    }

    /* Exactly the tail's size, and the default of 4096. */
    const char *argv[] = {"seq", "1", "100000", NULL};
    outcome_t o;
    run_child(&OPTS(.argv = argv, .tail_bytes = full_len), &o);
    assert_int_equal(o.out_len, full_len);
    assert_memory_equal(o.out, full, full_len);
    outcome_dispose(&o);
    run_child(&OPTS(.argv = argv), &o);
    assert_int_equal(o.out_len, 4096);
    assert_memory_equal(o.out, full + full_len - 4096, 4096);
    outcome_dispose(&o);
    free(full);
}

static void test_exit_code(void **state)
{
    (void)state;
    const char *argv[] = {"sh", "-c", "echo failing >&2; exit 3", NULL};
    outcome_t o;
    run_child(&OPTS(.argv = argv), &o);
    assert_int_equal(o.exit_status, 3);
    assert_int_equal(o.term_signal, 0);
    assert_string_equal(o.err, "failing\n");
    outcome_dispose(&o);

    const char *f[] = {"false", NULL};
    run_child(&OPTS(.argv = f), &o);
    assert_int_equal(o.exit_status, 1);
    outcome_dispose(&o);
}

static void test_killed_by_signal(void **state)
{
    (void)state;
    const char *argv[] = {"sh", "-c", "kill -KILL $$", NULL};
    outcome_t o;
    run_child(&OPTS(.argv = argv), &o);
    assert_int_equal(o.exit_status, -1);
    assert_int_equal(o.term_signal, SIGKILL);
    assert_int_equal(o.timed_out, 0);
    outcome_dispose(&o);
}

static void test_timeout_terminates(void **state)
{
    (void)state;
    /* sh waits for sleep here (it is not the last command, so no exec): SIGTERM goes
     * to the whole process group, or sleep would hold stdout open for 30 s. */
    const char *argv[] = {"sh", "-c", "echo begun; sleep 30; echo never", NULL};
    outcome_t o;
    run_child(&OPTS(.argv = argv, .timeout_ms = 200), &o);
    assert_int_equal(o.timed_out, 1);
    assert_int_equal(o.exit_status, -1);
    assert_int_equal(o.term_signal, SIGTERM);
    assert_string_equal(o.out, "begun\n");
    /* libuv arms timers on the kernel's coarse monotonic clock (a few ms a tick), while
     * elapsed_ms is measured on the fine one: allow one tick below the timeout. */
    assert_in_range(o.elapsed_ms, 200 - 10, 1900);
    outcome_dispose(&o);
}

static void test_timeout_kills_when_term_ignored(void **state)
{
    (void)state;
    const char *argv[] = {"sh", "-c", "trap '' TERM; echo ready; sleep 30", NULL};
    outcome_t o;
    run_child(&OPTS(.argv = argv, .timeout_ms = 100), &o);
    assert_int_equal(o.timed_out, 1);
    assert_int_equal(o.term_signal, SIGKILL);
    assert_in_range(o.elapsed_ms, 2000, 5000); /* SIGKILL 2 s after SIGTERM */
    outcome_dispose(&o);
}

static void test_no_timeout_when_fast(void **state)
{
    (void)state;
    const char *argv[] = {"true", NULL};
    outcome_t o;
    run_child(&OPTS(.argv = argv, .timeout_ms = 5000), &o);
    assert_int_equal(o.timed_out, 0);
    assert_int_equal(o.exit_status, 0);
    outcome_dispose(&o);
}

static void test_stdin_passthrough(void **state)
{
    (void)state;
    const char *argv[] = {"cat", NULL};
    static const char data[] = "line one\n\0binary\xff";
    outcome_t o;
    run_child(&OPTS(.argv = argv, .stdin_data = data, .stdin_len = sizeof data - 1), &o);
    assert_int_equal(o.exit_status, 0);
    assert_int_equal(o.out_len, sizeof data - 1);
    assert_memory_equal(o.out, data, sizeof data - 1);
    outcome_dispose(&o);

    /* Empty stdin: cat sees EOF at once. */
    run_child(&OPTS(.argv = argv, .stdin_data = "", .stdin_len = 0), &o);
    assert_int_equal(o.exit_status, 0);
    assert_int_equal(o.out_len, 0);
    outcome_dispose(&o);

    /* More than a pipe holds: written in pieces while cat drains it. */
    size_t big_len = 4u << 20;
    char *big = xmalloc(big_len);
    for (size_t i = 0; i < big_len; i++)
        big[i] = (char)('a' + i % 26);
    run_child(&OPTS(.argv = argv, .stdin_data = big, .stdin_len = big_len, .tail_bytes = 26), &o);
    assert_int_equal(o.exit_status, 0);
    assert_int_equal(o.out_len, 26);
    assert_memory_equal(o.out, big + big_len - 26, 26);
    outcome_dispose(&o);
    free(big);
}

static void test_stdin_not_read(void **state)
{
    (void)state;
    /* The child exits without reading 1 MiB of stdin: the write fails with EPIPE,
     * which must be neither fatal nor reported. */
    const char *argv[] = {"true", NULL};
    size_t len = 1u << 20;
    char *data = xcalloc(1, len);
    outcome_t o;
    run_child(&OPTS(.argv = argv, .stdin_data = data, .stdin_len = len), &o);
    assert_int_equal(o.exit_status, 0);
    outcome_dispose(&o);
    free(data);
}

static void test_no_stdin_is_dev_null(void **state)
{
    (void)state;
    const char *argv[] = {"cat", NULL};
    outcome_t o;
    run_child(&OPTS(.argv = argv), &o);
    assert_int_equal(o.exit_status, 0);
    assert_int_equal(o.out_len, 0);
    outcome_dispose(&o);
}

static void test_env_and_cwd(void **state)
{
    (void)state;
    char dir[] = "/tmp/tern-cp-XXXXXX";
    assert_non_null(mkdtemp(dir));

    const char *argv[] = {"sh", "-c", "echo \"$FOO\"; pwd; echo \"${HOME:-unset}\"", NULL};
    const char *env[] = {"FOO=bar baz", "PATH=/usr/bin:/bin", NULL};
    outcome_t o;
    run_child(&OPTS(.argv = argv, .env = env, .cwd = dir), &o);
    assert_int_equal(o.exit_status, 0);
    char want[128];
    snprintf(want, sizeof want, "bar baz\n%s\nunset\n", dir);
    assert_string_equal(o.out, want);
    outcome_dispose(&o);

    /* Exactly the environment given, nothing inherited. */
    const char *env_argv[] = {"env", NULL};
    const char *env2[] = {"A=1", "B=two", NULL};
    run_child(&OPTS(.argv = env_argv, .env = env2), &o);
    assert_string_equal(o.out, "A=1\nB=two\n");
    outcome_dispose(&o);

    /* NULL env inherits. */
    setenv("TERN_TEST_INHERITED", "yes", 1);
    const char *inh[] = {"sh", "-c", "echo $TERN_TEST_INHERITED", NULL};
    run_child(&OPTS(.argv = inh), &o);
    assert_string_equal(o.out, "yes\n");
    outcome_dispose(&o);
    unsetenv("TERN_TEST_INHERITED");

    assert_int_equal(rmdir(dir), 0);
}

/* Spawns expecting a refusal; returns the message (static buffer). */
static const char *spawn_err(const tern_spawn_opts *opts)
{
    static char err[256];
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    err[0] = '\0';
    outcome_t o = {0};
    child_process_t *cp = child_process_spawn(&loop, opts, on_child_done, &o, err, sizeof err);
    assert_null(cp);
    assert_int_equal(loop_close_bounded(&loop, BOUND_MS), 0);
    assert_int_equal(o.calls, 0);
    return err;
}

static void test_spawn_errors(void **state)
{
    (void)state;
    const char *nope[] = {"/bin/nope", NULL};
    assert_string_equal(spawn_err(&OPTS(.argv = nope)),
                        "spawn \"/bin/nope\": no such file or directory");

    const char *nope_path[] = {"tern-no-such-program", "x", NULL};
    assert_string_equal(spawn_err(&OPTS(.argv = nope_path)),
                        "spawn \"tern-no-such-program\": no such file or directory");

    char dir[] = "/tmp/tern-cp-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char file[64];
    snprintf(file, sizeof file, "%s/not-executable", dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("#!/bin/sh\necho hi\n", f);
    fclose(f);
    assert_int_equal(chmod(file, 0644), 0);
    const char *noexec[] = {file, NULL};
    char want[128];
    snprintf(want, sizeof want, "spawn \"%s\": permission denied", file);
    /* No x bit at all: refused even to root. */
    assert_string_equal(spawn_err(&OPTS(.argv = noexec)), want);

    const char *ok[] = {"true", NULL};
    snprintf(want, sizeof want, "spawn \"true\": cwd \"%s/gone\": no such file or directory", dir);
    char gone[64];
    snprintf(gone, sizeof gone, "%s/gone", dir);
    assert_string_equal(spawn_err(&OPTS(.argv = ok, .cwd = gone)), want);

    const char *empty[] = {NULL};
    assert_string_equal(spawn_err(&OPTS(.argv = empty)), "spawn: empty argv");
    assert_string_equal(spawn_err(&OPTS(.argv = NULL)), "spawn: empty argv");

    assert_int_equal(unlink(file), 0);
    assert_int_equal(rmdir(dir), 0);
}

static void test_cancel_means_no_callback(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    const char *argv[] = {"sh", "-c", "echo started; sleep 30", NULL};
    outcome_t o = {0};
    char err[256];
    child_process_t *cp =
        child_process_spawn(&loop, &OPTS(.argv = argv), on_child_done, &o, err, sizeof err);
    assert_non_null(cp);
    /* Let it run a little: one loop turn that has something to do. */
    uv_run(&loop, UV_RUN_NOWAIT);
    uint64_t t0 = clock_mono_ms();
    child_process_cancel(cp);
    /* The loop ends once the child has been reaped and every handle is closed. */
    assert_int_equal(loop_close_bounded(&loop, BOUND_MS), 0);
    assert_true(clock_mono_ms() - t0 < 1900); /* SIGTERM sufficed: no SIGKILL wait */
    assert_int_equal(o.calls, 0);
}

static void on_poll_tick(uv_timer_t *t)
{
    (void)t; /* only wakes the loop so that the condition is looked at again */
}

static bool file_exists(void *path)
{
    return access(path, F_OK) == 0;
}

static void test_cancel_kills_stubborn_child(void **state)
{
    (void)state;
    char dir[] = "/tmp/tern-cp-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char ready[64], script[160];
    snprintf(ready, sizeof ready, "%s/ready", dir);
    snprintf(script, sizeof script, "trap '' TERM; : > %s; sleep 30", ready);

    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    const char *argv[] = {"sh", "-c", script, NULL};
    outcome_t o = {0};
    char err[256];
    child_process_t *cp =
        child_process_spawn(&loop, &OPTS(.argv = argv), on_child_done, &o, err, sizeof err);
    assert_non_null(cp);
    /* Wait (bounded) until the trap is in place, or SIGTERM might land before it. */
    uv_timer_t poll;
    uv_timer_init(&loop, &poll);
    uv_timer_start(&poll, on_poll_tick, 10, 10);
    assert_int_equal(loop_run_until(&loop, file_exists, ready, BOUND_MS), 0);
    uv_close((uv_handle_t *)&poll, NULL);

    uint64_t t0 = clock_mono_ms();
    child_process_cancel(cp);
    assert_int_equal(loop_close_bounded(&loop, BOUND_MS), 0);
    uint64_t took = clock_mono_ms() - t0;
    assert_in_range(took, 1900, 5000); /* SIGKILL came 2 s after SIGTERM */
    assert_int_equal(o.calls, 0);
    assert_int_equal(unlink(ready), 0);
    assert_int_equal(rmdir(dir), 0);
}

static void test_grandchild_holding_pipe(void **state)
{
    (void)state;
    /* The shell exits at once but leaves a process holding stdout for 3 s: the result
     * is reported after the drain grace (2 s), with what was read so far. */
    const char *argv[] = {"sh", "-c", "(sleep 3) & echo started", NULL};
    outcome_t o;
    run_child(&OPTS(.argv = argv), &o);
    assert_int_equal(o.exit_status, 0);
    assert_string_equal(o.out, "started\n");
    assert_in_range(o.elapsed_ms, 1900, 2900);
    outcome_dispose(&o);
}

static void test_many_children_at_once(void **state)
{
    (void)state;
    enum { N = 32 };
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    static outcome_t outs[N];
    char args[N][16];
    for (int i = 0; i < N; i++) {
        memset(&outs[i], 0, sizeof outs[i]);
        snprintf(args[i], sizeof args[i], "child %d", i);
        const char *argv[] = {"echo", args[i], NULL};
        char err[256];
        assert_non_null(child_process_spawn(&loop, &OPTS(.argv = argv), on_child_done, &outs[i],
                                            err, sizeof err));
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(loop_run_until_flag(&loop, &outs[i].done, BOUND_MS), 0);
    assert_int_equal(loop_close_bounded(&loop, BOUND_MS), 0);
    for (int i = 0; i < N; i++) {
        char want[32];
        snprintf(want, sizeof want, "child %d\n", i);
        assert_string_equal(outs[i].out, want);
        assert_int_equal(outs[i].calls, 1);
        outcome_dispose(&outs[i]);
    }
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as ternd does at start-up */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_echo_to_stdout),
        cmocka_unit_test(test_stdout_lines),
        cmocka_unit_test(test_both_streams),
        cmocka_unit_test(test_tail_keeps_last_bytes),
        cmocka_unit_test(test_exit_code),
        cmocka_unit_test(test_killed_by_signal),
        cmocka_unit_test(test_timeout_terminates),
        cmocka_unit_test(test_timeout_kills_when_term_ignored),
        cmocka_unit_test(test_no_timeout_when_fast),
        cmocka_unit_test(test_stdin_passthrough),
        cmocka_unit_test(test_stdin_not_read),
        cmocka_unit_test(test_no_stdin_is_dev_null),
        cmocka_unit_test(test_env_and_cwd),
        cmocka_unit_test(test_spawn_errors),
        cmocka_unit_test(test_cancel_means_no_callback),
        cmocka_unit_test(test_cancel_kills_stubborn_child),
        cmocka_unit_test(test_grandchild_holding_pipe),
        cmocka_unit_test(test_many_children_at_once),
    };
    int failures = cmocka_run_group_tests_name("child_process", tests, NULL, NULL);
    return failures == 0 ? 0 : 1;
}
