/*
 * test_proc_check.c -- pid files' processes as /proc shows them (tasks/dc/proc_check.h):
 * alive, and gone only once no thread of the process runs any more. The case that
 * matters is a process whose main thread has exited while another thread still runs
 * (what a kill -9 leaves while a thread finishes a system call): not alive, yet not
 * gone, since it still holds its descriptors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc_check.h"

#define WAIT_MS 5000 /* the bound on every wait for a child's state */

static char self_comm[32];

static int setup(void **state)
{
    (void)state;
    FILE *f = fopen("/proc/self/comm", "r");
    if (f == NULL || fgets(self_comm, sizeof self_comm, f) == NULL)
        return -1;
    fclose(f);
    self_comm[strcspn(self_comm, "\n")] = '\0';
    return 0;
}

/* The state letter of pid's main thread, or 0 when /proc has no such pid. */
static char state_of(pid_t pid)
{
    char path[64], buf[512] = "";
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    char *got = fgets(buf, sizeof buf, f);
    fclose(f);
    char *close_paren = got != NULL ? strrchr(buf, ')') : NULL;
    return close_paren != NULL ? close_paren[2] : 0;
}

static void wait_state(pid_t pid, char want)
{
    struct timespec tick = {0, 2 * 1000 * 1000};
    for (int waited = 0; state_of(pid) != want; waited += 2) {
        if (waited >= WAIT_MS)
            fail_msg("pid %ld: state %c, not %c, after %d ms", (long)pid, state_of(pid), want,
                     WAIT_MS);
        nanosleep(&tick, NULL);
    }
}

static void test_self(void **state)
{
    (void)state;
    assert_true(dc_proc_alive(getpid(), self_comm));
    assert_false(dc_proc_gone(getpid(), self_comm));
    /* The pid running another program: a reused pid, taken for gone. */
    assert_false(dc_proc_alive(getpid(), "no-such-comm"));
    assert_true(dc_proc_gone(getpid(), "no-such-comm"));
    assert_true(dc_proc_gone(0, self_comm));
}

static int pipe_fd[2];

static void *block_on_pipe(void *arg)
{
    (void)arg;
    char c;
    while (read(pipe_fd[0], &c, 1) < 0 && errno == EINTR)
        ;
    return NULL;
}

static void test_main_thread_exited_other_runs(void **state)
{
    (void)state;
    assert_int_equal(pipe(pipe_fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pipe_fd[1]);
        pthread_t t;
        if (pthread_create(&t, NULL, block_on_pipe, NULL) != 0)
            _exit(2);
        pthread_exit(NULL); /* the process lives on in t until the pipe closes */
    }
    close(pipe_fd[0]);
    wait_state(pid, 'Z');
    assert_false(dc_proc_alive(pid, self_comm));
    assert_false(dc_proc_gone(pid, self_comm));

    close(pipe_fd[1]); /* t's read ends: the last thread returns, the process exits */
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(dc_proc_gone(pid, self_comm));
}

static void test_zombie_not_reaped_is_gone(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(0);
    wait_state(pid, 'Z');
    assert_false(dc_proc_alive(pid, self_comm));
    assert_true(dc_proc_gone(pid, self_comm));
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(dc_proc_gone(pid, self_comm));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_self),
        cmocka_unit_test(test_main_thread_exited_other_runs),
        cmocka_unit_test(test_zombie_not_reaped_is_gone),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
