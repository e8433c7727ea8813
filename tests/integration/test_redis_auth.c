/*
 * test_redis_auth.c -- ternd against a Redis whose default user is off and whose only
 * user is an ACL user with a password: ternd connects with
 * redis://tern:<password>@127.0.0.1:PORT and runs a job; with a wrong password it keeps
 * retrying and says why in its log; and neither --help, --version, a refused flag nor
 * any log line ever shows the password.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "base/alloc.h"
#include "world.h"

/* Distinctive, so that finding it in a log cannot be a coincidence. */
#define PASSWORD       "Sup3rSecretPw-41"
#define WRONG_PASSWORD "Wr0ngSecretPw-17"

static itest_world_t W;

/* A command on a fresh connection authenticated as tern; true when Redis answered
 * without an error. */
static bool as_tern(const char *cmd)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", W.redis.port, tv);
    if (c == NULL || c->err) {
        if (c != NULL)
            redisFree(c);
        return false;
    }
    redisReply *a = redisCommand(c, "AUTH tern %s", PASSWORD);
    bool ok = a != NULL && a->type != REDIS_REPLY_ERROR;
    if (a != NULL)
        freeReplyObject(a);
    if (ok) {
        redisReply *r = redisCommand(c, cmd);
        ok = r != NULL && r->type != REDIS_REPLY_ERROR;
        if (r != NULL)
            freeReplyObject(r);
    }
    redisFree(c);
    return ok;
}

static int group_setup(void **state)
{
    (void)state;
    itest_world_start_redis(&W);
    char *ok = itest_redis_str(&W.redis, "ACL SETUSER tern on >%s ~* &* +@all", PASSWORD);
    assert_non_null(ok);
    free(ok);
    ok = itest_redis_str(&W.redis, "ACL SETUSER default off");
    assert_non_null(ok);
    free(ok);
    /* Anonymous access is refused now; the ACL user gets in. */
    assert_int_equal(itest_redis_int(&W.redis, "DBSIZE"), -1);
    assert_true(as_tern("PING"));
    snprintf(W.redis.url, sizeof W.redis.url, "redis://tern:%s@127.0.0.1:%d", PASSWORD,
             W.redis.port);
    itest_world_start_ternd(&W, "auth1", NULL, NULL);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    itest_world_stop(&W, 10000);
    return 0;
}

/* Occurrences of `needle` in the file. */
static int file_count(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL)
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* Runs ternd with `args` (NULL-terminated, after the binary), stdout and stderr to
 * `out`; returns the PID without waiting. */
static pid_t spawn_ternd(const char *const *args, const char *out)
{
    const char *argv[32];
    size_t n = 0;
    argv[n++] = getenv("TERN_BIN");
    for (size_t i = 0; args[i] != NULL && n < 31; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    assert_non_null(argv[0]);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    assert_true(pid > 0);
    return pid;
}

/* Waits (at most `ms`) for the process to exit; returns its exit status, or -1 after
 * killing it when it did not exit in time. */
static int wait_exit(pid_t pid, unsigned ms)
{
    for (unsigned waited = 0; waited <= ms; waited += 20) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        itest_pause_ms(20);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

static void test_acl_user_runs_a_job(void **state)
{
    (void)state;
    itest_workflow_put_ok(&W.client,
                          "{\"name\": \"hello\", \"chain\": [{\"name\": \"a\", \"task\": "
                          "\"core.log\", \"args\": {\"msg\": \"hi\"}}]}");
    char uuid[40], msg[1024];
    if (itest_job_create(&W.client, "hello", NULL, NULL, 0, NULL, uuid, msg, sizeof msg) != 0)
        fail_msg("job create refused: %s", msg);
    json_t *job = itest_wait_finished(&W.client, uuid, 20000);
    assert_non_null(job);
    assert_string_equal(itest_execution(job), "succeeded");
    json_decref(job);
    /* The runner's connections are the ACL user's. */
    char *who = itest_redis_str(&W.redis, "PING");
    assert_null(who); /* anonymous: refused */
    assert_true(itest_ternd_log_has(&W.ternd, "ready to serve"));
    assert_false(itest_ternd_log_has(&W.ternd, PASSWORD));
}

static void test_wrong_password_retries_without_logging_it(void **state)
{
    (void)state;
    char url[160], log[320];
    snprintf(url, sizeof url, "redis://tern:%s@127.0.0.1:%d", WRONG_PASSWORD, W.redis.port);
    snprintf(log, sizeof log, "%s/ternd-wrong.log", W.dir.path);
    const char *args[] = {
        "--redis",     url,           "--runner-id", "wrong",        "--listen",
        "127.0.0.1:0", "--log-level", "debug",       "--plugin-dir", W.ternd.plugin_dir,
        NULL};
    pid_t pid = spawn_ternd(args, log);
    /* It keeps trying: at least three refusals, each logged with Redis's reason. */
    const char *line = "handshake refused: WRONGPASS";
    for (unsigned waited = 0; waited <= 20000 && file_count(log, line) < 3; waited += 20) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            fail_msg("ternd with a wrong password exited (log %s)", log);
        itest_pause_ms(20);
    }
    int refusals = file_count(log, line);
    print_message("%d refusals logged\n", refusals);
    assert_true(refusals >= 3);
    assert_int_equal(file_count(log, "ready to serve"), 0);
    kill(pid, SIGTERM);
    assert_true(wait_exit(pid, 15000) >= 0);
    assert_int_equal(file_count(log, WRONG_PASSWORD), 0);
    assert_int_equal(file_count(log, PASSWORD), 0);
}

static void test_help_version_and_errors_hide_the_password(void **state)
{
    (void)state;
    char url[160], bad[160], out[320];
    snprintf(url, sizeof url, "redis://tern:%s@127.0.0.1:%d", PASSWORD, W.redis.port);
    snprintf(bad, sizeof bad, "redis://tern:%s@127.0.0.1:notaport", PASSWORD);
    snprintf(out, sizeof out, "%s/ternd-out.txt", W.dir.path);
    const char *help[] = {"--redis", url, "--help", NULL};
    const char *version[] = {"--redis", url, "--version", NULL};
    const char *badport[] = {"--redis", bad, NULL};
    const char *badflag[] = {"--redis", url, "--concurrency", "x", NULL};
    struct {
        const char *const *args;
        int status;
        const char *shows;
    } runs[] = {
        {help, 0, "usage: ternd"},
        {version, 0, "ternd"},
        {badport, -1, "redis"},
        {badflag, -1, "--concurrency"},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(runs); i++) {
        pid_t pid = spawn_ternd(runs[i].args, out);
        int st = wait_exit(pid, 10000);
        if (runs[i].status >= 0)
            assert_int_equal(st, runs[i].status);
        else
            assert_true(st > 0 && st < 128);
        assert_true(file_count(out, runs[i].shows) > 0);
        if (file_count(out, PASSWORD) != 0)
            fail_msg("run %zu of ternd printed the password (see %s)", i, out);
    }
    /* Nothing the running ternd logged shows it either. */
    assert_false(itest_ternd_log_has(&W.ternd, PASSWORD));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acl_user_runs_a_job),
        cmocka_unit_test(test_wrong_password_retries_without_logging_it),
        cmocka_unit_test(test_help_version_and_errors_hide_the_password),
    };
    return cmocka_run_group_tests_name("redis_auth", tests, group_setup, group_teardown);
}
