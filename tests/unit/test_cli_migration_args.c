/*
 * test_cli_migration_args.c -- what `tern migration ACTION VM` refuses before any
 * request: --at (not ISO 8601, no zone, not in the future), --limit-mbps (0, -1, abc),
 * --affinity, bad uuids, unknown actions. The parsers (cli/migration_args.c) are
 * checked directly; then the built `tern` (its path is the argument) runs each bad
 * command line against a loopback listener, which must see no connection at all while
 * the command exits 2 naming the fault.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/ident.h"
#include "migration_args.h"

static const char *tern_path;

#define NOW_MS 1795236448000ull /* 2026-11-21T04:47:28Z */

static void at_ok(const char *s, const char *want)
{
    char iso[32], err[256] = "";
    if (!migration_parse_at(s, NOW_MS, iso, sizeof iso, err, sizeof err))
        fail_msg("--at %s refused: %s", s, err);
    assert_string_equal(iso, want);
}

static void at_refused(const char *s, const char *want)
{
    char iso[32] = "", err[256] = "";
    if (migration_parse_at(s, NOW_MS, iso, sizeof iso, err, sizeof err))
        fail_msg("--at %s accepted as %s", s, iso);
    if (strstr(err, want) == NULL || strstr(err, s) == NULL)
        fail_msg("--at %s: \"%s\" lacks \"%s\" or the value", s, err, want);
}

static void test_at(void **state)
{
    (void)state;
    at_ok("2026-11-21T05:00:00Z", "2026-11-21T05:00:00Z");
    at_ok("2026-11-21T04:47:28.500Z", "2026-11-21T04:47:29Z"); /* rounded up: in the future */
    at_ok("2026-11-21T06:00:00+01:00", "2026-11-21T05:00:00Z");
    at_ok("+10m", "2026-11-21T04:57:28Z");
    at_ok("+1d", "2026-11-22T04:47:28Z");
    at_refused("2026-11-21T04:47:28Z", "not in the future");
    at_refused("2026-11-21T04:47:27Z", "not in the future");
    at_refused("2020-01-01T00:00:00Z", "not in the future");
    at_refused("2026-11-21T05:00:00", "give the zone");
    at_refused("tomorrow", "expected an ISO 8601 time in UTC");
    at_refused("2026-13-01T00:00:00Z", "expected an ISO 8601");
    at_refused("2026-02-31T00:00:00Z", "expected an ISO 8601");
    at_refused("", "expected an ISO 8601");
    at_refused("+0m", "expected a time from now");
    at_refused("+-5m", "expected a time from now");
    at_refused("+10y", "expected a time from now");
}

static void limit_refused(const char *s, const char *want)
{
    double v = 7;
    char err[256] = "";
    if (migration_parse_limit(s, &v, err, sizeof err))
        fail_msg("--limit-mbps %s accepted as %g", s, v);
    assert_true(v == 7);
    if (strstr(err, want) == NULL)
        fail_msg("--limit-mbps %s: \"%s\" lacks \"%s\"", s, err, want);
}

static void test_limit(void **state)
{
    (void)state;
    double v;
    char err[256];
    assert_true(migration_parse_limit("500", &v, err, sizeof err));
    assert_true(v == 500);
    assert_true(migration_parse_limit("80.5", &v, err, sizeof err));
    assert_true(v == 80.5);
    assert_true(migration_parse_limit("0.1", &v, err, sizeof err));
    limit_refused("0", "must be more than 0");
    limit_refused("0.0", "must be more than 0");
    limit_refused("-1", "expected a positive number");
    limit_refused("abc", "expected a positive number");
    limit_refused("", "expected a positive number");
    limit_refused("10mbps", "expected a positive number");
    limit_refused("nan", "expected a positive number");
    limit_refused("inf", "expected a positive number");
    limit_refused(" 5", "expected a positive number");
    limit_refused("1e400", "expected a positive number");
    limit_refused("2000000", "at most 1000000");
}

static void test_affinity(void **state)
{
    (void)state;
    json_t *a = json_object();
    char err[256] = "";
    assert_true(migration_parse_affinity("far=web0,near=11111111-2222-4333-8444-555555555555", a,
                                         err, sizeof err));
    assert_true(migration_parse_affinity("far=db1,rack=same", a, err, sizeof err));
    char *text = json_dumps(a, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(text, "{\"far\":[\"web0\",\"db1\"],\"near\":[\"11111111-2222-4333-8444-"
                              "555555555555\"],\"rack\":\"same\"}");
    free(text);
    static const char *const bad[][2] = {
        {"", "expected far=VM"},
        {"far", "is not a rule"},
        {"close=web0", "is not a rule"},
        {"far=", "names nothing"},
        {"rack=left", "expected same or other"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        if (migration_parse_affinity(bad[i][0], a, err, sizeof err))
            fail_msg("--affinity \"%s\" accepted", bad[i][0]);
        if (strstr(err, bad[i][1]) == NULL)
            fail_msg("--affinity \"%s\": \"%s\" lacks \"%s\"", bad[i][0], err, bad[i][1]);
    }
    json_decref(a);
}

static void test_actions_and_uuids(void **state)
{
    (void)state;
    static const char *const known[] = {"begin", "automatic", "schedule", "sync",     "switch",
                                        "pause", "abort",     "rollback", "finalize", "estimate"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        const migration_action_t *a = migration_action_find(known[i]);
        assert_non_null(a);
        assert_string_equal(a->name, known[i]);
    }
    assert_null(migration_action_find("migrate"));
    assert_null(migration_action_find("Begin"));
    assert_null(migration_action_find(""));
    assert_null(migration_action_find(NULL));
    assert_true(migration_action_find("schedule")->takes & MIGRATION_TAKES_AT);
    assert_false(migration_action_find("begin")->takes & MIGRATION_TAKES_AT);
    assert_true(migration_action_find("automatic")->new_migration);
    assert_false(migration_action_find("sync")->new_migration);

    assert_true(uuid_valid("11111111-2222-4333-8444-555555555555"));
    assert_true(uuid_valid("ABCDEF01-2222-4333-8444-555555555555"));
    assert_false(uuid_valid("11111111-2222-4333-8444-55555555555"));
    assert_false(uuid_valid("11111111-2222-4333-8444-5555555555555"));
    assert_false(uuid_valid("11111111x2222-4333-8444-555555555555"));
    assert_false(uuid_valid("g1111111-2222-4333-8444-555555555555"));
    assert_false(uuid_valid(""));
    assert_false(uuid_valid(NULL));
}

/* ---- the built client ----------------------------------------------------------- */

/* Runs tern with `args` (NULL-terminated) and TERN_URL at `port`; returns its exit
 * status, with its stderr in err. Bounded: killed after 10 s. */
static int run_tern(unsigned port, const char *owner_env, const char *const *args, char *err,
                    size_t errlen)
{
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(pipefd[1], STDERR_FILENO);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDOUT_FILENO);
        close(pipefd[0]);
        char url[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%u", port);
        setenv("TERN_URL", url, 1);
        if (owner_env != NULL)
            setenv("TERN_OWNER_UUID", owner_env, 1);
        else
            unsetenv("TERN_OWNER_UUID");
        const char *argv[16] = {tern_path, "migration"};
        size_t n = 2;
        for (; args[n - 2] != NULL && n < 15; n++)
            argv[n] = args[n - 2];
        argv[n] = NULL;
        execv(tern_path, (char *const *)argv);
        _exit(127);
    }
    close(pipefd[1]);
    size_t got = 0;
    struct pollfd pfd = {.fd = pipefd[0], .events = POLLIN};
    for (int i = 0; i < 100; i++) {
        if (poll(&pfd, 1, 100) > 0) {
            ssize_t r = read(pipefd[0], err + got, errlen - 1 - got);
            if (r <= 0)
                break;
            got += (size_t)r;
        }
    }
    err[got] = '\0';
    close(pipefd[0]);
    int status = 0;
    for (int i = 0; i < 100 && waitpid(pid, &status, WNOHANG) == 0; i++) {
        struct timespec ts = {0, 100000000L};
        nanosleep(&ts, NULL);
    }
    if (waitpid(pid, &status, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fail_msg("tern did not exit within 10 s");
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_refused_before_any_request(void **state)
{
    (void)state;
    int srv = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    assert_true(srv >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(srv, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(srv, 8), 0);
    socklen_t sl = sizeof sa;
    assert_int_equal(getsockname(srv, (struct sockaddr *)&sa, &sl), 0);
    unsigned port = ntohs(sa.sin_port);

    static const struct {
        const char *owner_env;
        const char *args[8];
        const char *message;
    } cases[] = {
        {NULL, {"schedule", "web0", "--at", "2020-01-01T00:00:00Z"}, "not in the future"},
        {NULL, {"schedule", "web0", "--at", "next tuesday"}, "expected an ISO 8601"},
        {NULL, {"schedule", "web0", "--at", "2030-01-01T00:00:00"}, "give the zone"},
        {NULL, {"schedule", "web0"}, "missing --at"},
        {NULL, {"begin", "web0", "--at", "+10m"}, "--at is an option of schedule only"},
        {NULL, {"begin", "web0", "--limit-mbps", "0"}, "must be more than 0"},
        {NULL, {"automatic", "web0", "--limit-mbps", "-1"}, "expected a positive number"},
        {NULL, {"sync", "web0", "--limit-mbps", "abc"}, "expected a positive number"},
        {NULL, {"pause", "web0", "--limit-mbps", "10"}, "--limit-mbps is not an option of pause"},
        {NULL, {"sync", "web0", "--target", "cn2"}, "--target is not an option of sync"},
        {NULL, {"begin", "web0", "--affinity", "close=db"}, "is not a rule"},
        {NULL,
         {"begin", "web0", "--owner", "not-a-uuid"},
         "--owner \"not-a-uuid\": expected a uuid"},
        {"nope", {"begin", "web0"}, "TERN_OWNER_UUID \"nope\": expected a uuid"},
        {NULL, {"begin", "bad uuid!"}, "expected a uuid or an instance's alias"},
        {NULL, {"get", "11111111-2222-4333-8444-55555555555x/"}, "expected a uuid or"},
        {NULL, {"watch", "-x"}, "unknown option"},
        {NULL, {"list", "--state", "done"}, "--state \"done\": expected scheduled"},
        {NULL, {"estimate", "web0", "-w"}, "estimate always waits"},
        {NULL, {"begin"}, "missing VM"},
        {NULL, {"begin", "a", "b"}, "unexpected argument \"b\""},
        {NULL, {"migrate", "web0"}, "unknown verb \"migrate\""},
        {NULL, {"Begin", "web0"}, "unknown verb \"Begin\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[4096];
        int rc = run_tern(port, cases[i].owner_env, cases[i].args, err, sizeof err);
        if (rc != 2 || strstr(err, cases[i].message) == NULL)
            fail_msg("case %zu (%s %s): exit %d, stderr:\n%s\nwanted exit 2 and \"%s\"", i,
                     cases[i].args[0], cases[i].args[1] ? cases[i].args[1] : "", rc, err,
                     cases[i].message);
        int c = accept(srv, NULL, NULL);
        if (c >= 0)
            fail_msg("case %zu (%s): tern connected to the API", i, cases[i].args[0]);
        assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
    }

    /* The same listener does see a command that passes the checks: the test can fail. */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char url[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%u", port);
        setenv("TERN_URL", url, 1);
        unsetenv("TERN_OWNER_UUID");
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        execl(tern_path, tern_path, "migration", "get", "web0", (char *)NULL);
        _exit(127);
    }
    struct pollfd pfd = {.fd = srv, .events = POLLIN};
    assert_int_equal(poll(&pfd, 1, 10000), 1); /* a connection came */
    int c = accept(srv, NULL, NULL);
    assert_true(c >= 0);
    close(c); /* closed without an answer: tern cannot reach the API, exit 4 */
    int status = 0;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 4);
    close(srv);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH_OF_TERN\n", argv[0]);
        return 2;
    }
    tern_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_at),
        cmocka_unit_test(test_limit),
        cmocka_unit_test(test_affinity),
        cmocka_unit_test(test_actions_and_uuids),
        cmocka_unit_test(test_refused_before_any_request),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
