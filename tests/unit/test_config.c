/*
 * test_config.c -- engine/ternd/config.c: defaults, the file, flags over the file, and the
 * exact message an operator gets for each mistake.
 *
 * Configuration files are written into a private mkdtemp directory made by the group
 * setup and removed by its teardown.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/error.h"
#include "ternd/config.h"

#define PLUGIN_DIR "/usr/lib/tern/tasks"

typedef struct fixture {
    char dir[64];
    char path[128]; /* <dir>/tern.json */
} fixture_t;

static int group_setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    if (f == NULL)
        return -1;
    snprintf(f->dir, sizeof f->dir, "/tmp/tern-test-config-XXXXXX");
    if (mkdtemp(f->dir) == NULL)
        return -1;
    snprintf(f->path, sizeof f->path, "%s/tern.json", f->dir);
    *state = f;
    return 0;
}

static int group_teardown(void **state)
{
    fixture_t *f = *state;
    unlink(f->path);
    rmdir(f->dir);
    free(f);
    return 0;
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    assert_int_equal(fclose(fp), 0);
}

/* Runs config_load on a NULL-terminated argument list (argv[0] is added). */
#define LOAD(c, err, ...)                                                                          \
    load_args((c), (err), sizeof(err), (const char *[]){"ternd", __VA_ARGS__, NULL})

static int load_args(ternd_config_t *c, char *err, size_t errlen, const char **args)
{
    int argc = 0;
    while (args[argc] != NULL)
        argc++;
    err[0] = '\0';
    return config_load(c, argc, (char **)args, PLUGIN_DIR, err, errlen);
}

/* Expects the arguments to be refused with exactly `expect`. */
static void expect_refused(const char *expect, const char **args)
{
    ternd_config_t c;
    char err[1024];
    int rc = load_args(&c, err, sizeof err, args);
    if (rc != TERN_EINVAL)
        fail_msg("expected TERN_EINVAL, got %d (%s)", rc, err);
    assert_string_equal(err, expect);
    /* A refused load leaves nothing behind. */
    assert_null(c.listen);
    assert_null(c.queues);
    assert_null(c.plugins);
}

#define REFUSED(expect, ...) expect_refused((expect), (const char *[]){"ternd", __VA_ARGS__, NULL})

static void test_defaults(void **state)
{
    (void)state;
    ternd_config_t c;
    char err[256] = "";
    char *argv[] = {"ternd", NULL};
    assert_int_equal(config_load(&c, 1, argv, PLUGIN_DIR, err, sizeof err), 0);
    assert_int_equal(c.roles, CONFIG_ROLE_BOTH);
    assert_string_equal(c.listen, "127.0.0.1:8080");
    assert_null(c.redis_url);
    assert_string_equal(c.data_dir, "./tern-data");
    assert_string_equal(c.plugin_dir, PLUGIN_DIR);
    assert_null(c.workflows_dir);
    assert_int_equal(c.concurrency, 1000);
    assert_int_equal(c.n_queues, 1);
    assert_string_equal(c.queues[0], "default");
    assert_null(c.queues[1]);
    assert_int_equal(c.lease_ms, 10000);
    assert_int_equal(c.heartbeat_ms, 2000);
    assert_int_equal(c.shutdown_grace_ms, 30000);
    assert_int_equal(c.log_level, 30);
    assert_string_equal(c.redis_server, "redis-server");
    assert_int_equal(c.redis_health_timeout_ms, 2000);
    assert_int_equal(c.redis_command_timeout_ms, 5000);
    assert_int_equal(c.admission_timeout_ms, 2000);
    assert_int_equal(c.event_stream_max, 1000);
    assert_int_equal(c.global_event_stream_max, 100000);
    assert_int_equal(c.max_params_bytes, 262144);
    assert_int_equal(c.max_lock_instructions, 500000);
    assert_int_equal(c.retention_days, 30);
    assert_int_equal(c.retention_ms, 0);
    assert_true(config_retention_ms(&c) == 30ULL * 24 * 3600 * 1000);
    assert_true(json_is_object(c.plugins));
    assert_int_equal(json_object_size(c.plugins), 0);
    assert_null(c.postback_allow_networks); /* any address */
    assert_null(c.config_file);

    char host[256] = "", expect[300];
    gethostname(host, sizeof host - 1);
    snprintf(expect, sizeof expect, "%s-%ld", host, (long)getpid());
    assert_string_equal(c.runner_id, expect);
    config_dispose(&c);
    config_dispose(&c); /* safe twice */
}

static void test_flags_both_spellings(void **state)
{
    (void)state;
    ternd_config_t c;
    char err[256];
    assert_int_equal(LOAD(&c, err, "--role", "runner", "--listen=0.0.0.0:9090",
                          "--redis=redis://:pw@10.0.0.7:6380/2", "--data-dir", "/var/lib/tern",
                          "--plugin-dir=/opt/tasks", "--workflows", "/etc/tern/workflows",
                          "--concurrency=50", "--runner-id", "cn7-runner.a",
                          "--queues=long,default", "--lease-ms", "5000", "--heartbeat-ms=500",
                          "--shutdown-grace-ms", "0", "--log-level=debug", "--redis-server",
                          "/usr/local/bin/redis-server"),
                     0);
    assert_int_equal(c.roles, CONFIG_ROLE_RUNNER);
    assert_string_equal(c.listen, "0.0.0.0:9090");
    assert_string_equal(c.redis_url, "redis://:pw@10.0.0.7:6380/2");
    assert_string_equal(c.data_dir, "/var/lib/tern");
    assert_string_equal(c.plugin_dir, "/opt/tasks");
    assert_string_equal(c.workflows_dir, "/etc/tern/workflows");
    assert_int_equal(c.concurrency, 50);
    assert_string_equal(c.runner_id, "cn7-runner.a");
    assert_int_equal(c.n_queues, 2);
    assert_string_equal(c.queues[0], "long");
    assert_string_equal(c.queues[1], "default");
    assert_null(c.queues[2]);
    assert_int_equal(c.lease_ms, 5000);
    assert_int_equal(c.heartbeat_ms, 500);
    assert_int_equal(c.shutdown_grace_ms, 0);
    assert_int_equal(c.log_level, 20);
    assert_string_equal(c.redis_server, "/usr/local/bin/redis-server");
    config_dispose(&c);

    assert_int_equal(LOAD(&c, err, "--role", "api", "--log-level", "50", "--listen", "[::1]:8080",
                          "--redis", "unix:///run/redis.sock?db=1"),
                     0);
    assert_int_equal(c.roles, CONFIG_ROLE_API);
    assert_int_equal(c.log_level, 50);
    assert_string_equal(c.listen, "[::1]:8080");
    config_dispose(&c);

    /* A later flag wins over an earlier one. */
    assert_int_equal(LOAD(&c, err, "--concurrency", "5", "--concurrency=6"), 0);
    assert_int_equal(c.concurrency, 6);
    config_dispose(&c);
}

static void test_file_then_flags(void **state)
{
    fixture_t *f = *state;
    write_file(f->path, "{\n"
                        "  \"role\": \"api\",\n"
                        "  \"listen\": \"127.0.0.1:7000\",\n"
                        "  \"redis\": \"redis://10.0.0.1\",\n"
                        "  \"data_dir\": \"/srv/tern\",\n"
                        "  \"workflows\": \"/srv/wf\",\n"
                        "  \"concurrency\": 77,\n"
                        "  \"queues\": [\"a\", \"b-2\", \"c_3\"],\n"
                        "  \"lease_ms\": 20000,\n"
                        "  \"heartbeat_ms\": 3000,\n"
                        "  \"shutdown_grace_ms\": 1000,\n"
                        "  \"log_level\": 40,\n"
                        "  \"redis_server\": \"/opt/redis/bin/redis-server\",\n"
                        "  \"event_stream_max\": 50,\n"
                        "  \"global_event_stream_max\": 5000,\n"
                        "  \"max_params_bytes\": 1024,\n"
                        "  \"max_lock_instructions\": 10000,\n"
                        "  \"runner_id\": \"from-file\",\n"
                        "  \"postback_allow_networks\": [\"10.0.0.0/8\", \"::1\"],\n"
                        "  \"plugins\": {\"vm\": {\"inventory\": \"/etc/dc.json\"}, \"net\": {}}\n"
                        "}\n");
    ternd_config_t c;
    char err[256];
    /* Flags before and after --config both win over the file. */
    assert_int_equal(LOAD(&c, err, "--concurrency", "9", "--config", f->path, "--queues", "z",
                          "--redis", "unix:///tmp/r.sock"),
                     0);
    assert_string_equal(c.config_file, f->path);
    assert_int_equal(c.roles, CONFIG_ROLE_API);
    assert_string_equal(c.listen, "127.0.0.1:7000");
    assert_string_equal(c.redis_url, "unix:///tmp/r.sock");
    assert_string_equal(c.data_dir, "/srv/tern");
    assert_string_equal(c.workflows_dir, "/srv/wf");
    assert_int_equal(c.concurrency, 9);
    assert_int_equal(c.n_queues, 1);
    assert_string_equal(c.queues[0], "z");
    assert_int_equal(c.lease_ms, 20000);
    assert_int_equal(c.heartbeat_ms, 3000);
    assert_int_equal(c.shutdown_grace_ms, 1000);
    assert_int_equal(c.log_level, 40);
    assert_string_equal(c.redis_server, "/opt/redis/bin/redis-server");
    assert_int_equal(c.event_stream_max, 50);
    assert_int_equal(c.global_event_stream_max, 5000);
    assert_int_equal(c.max_params_bytes, 1024);
    assert_int_equal(c.max_lock_instructions, 10000);
    assert_string_equal(c.runner_id, "from-file");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(c.plugins, "vm"), "inventory")),
        "/etc/dc.json");
    assert_true(json_is_object(json_object_get(c.plugins, "net")));
    assert_non_null(c.postback_allow_networks);
    assert_string_equal(net_allow_setting(c.postback_allow_networks), "postback_allow_networks");
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x0a010203)};
    assert_true(net_allow_permits(c.postback_allow_networks, (struct sockaddr *)&in));
    in.sin_addr.s_addr = htonl(0x7f000001);
    assert_false(net_allow_permits(c.postback_allow_networks, (struct sockaddr *)&in));
    config_dispose(&c);

    /* Without flags the file's values stand; null keeps the embedded default. */
    write_file(f->path, "{\"redis\": null, \"workflows\": null, \"queues\": [\"x\"], "
                        "\"log_level\": \"error\"}");
    /* Of two --config flags the later one is read. */
    assert_int_equal(LOAD(&c, err, "--config=/nonexistent.json", "--config", f->path), 0);
    assert_null(c.redis_url);
    assert_null(c.workflows_dir);
    assert_string_equal(c.queues[0], "x");
    assert_int_equal(c.log_level, 50);
    config_dispose(&c);
}

static void test_queues_parsing(void **state)
{
    (void)state;
    ternd_config_t c;
    char err[256];
    assert_int_equal(LOAD(&c, err, "--queues", "default"), 0);
    assert_int_equal(c.n_queues, 1);
    config_dispose(&c);

    char longest[80] = "--queues=";
    memset(longest + 9, 'q', 64);
    assert_int_equal(LOAD(&c, err, longest), 0);
    assert_int_equal(strlen(c.queues[0]), 64);
    config_dispose(&c);

    assert_int_equal(LOAD(&c, err, "--queues", "a,b,c,d-1,e_2,0"), 0);
    assert_int_equal(c.n_queues, 6);
    assert_string_equal(c.queues[5], "0");
    assert_null(c.queues[6]);
    config_dispose(&c);

    REFUSED("--queues: empty queue name (expected NAME[,NAME...])", "--queues", "a,,b");
    REFUSED("--queues: empty queue name (expected NAME[,NAME...])", "--queues", "a,");
    REFUSED("--queues: empty queue name (expected NAME[,NAME...])", "--queues=");
    REFUSED("--queues: bad queue name \"Big\" (expected [a-z0-9_:.-], 1-64 characters)", "--queues",
            "ok,Big");
    REFUSED("--queues: bad queue name \"a b\" (expected [a-z0-9_:.-], 1-64 characters)", "--queues",
            "a b");
    longest[9 + 64] = 'q';
    longest[9 + 65] = '\0';
    char expect[200];
    snprintf(expect, sizeof expect,
             "--queues: bad queue name \"%s\" (expected [a-z0-9_:.-], 1-64 characters)",
             longest + 9);
    REFUSED(expect, longest);
    REFUSED("--queues: queue \"a\" is listed twice", "--queues", "a,b,a");
}

static void test_flag_errors(void **state)
{
    (void)state;
    REFUSED("--concurrency: expected a positive integer, got \"x\"", "--concurrency", "x");
    REFUSED("--concurrency: expected a positive integer, got \"-3\"", "--concurrency=-3");
    REFUSED("--concurrency: expected a positive integer, got \"\"", "--concurrency=");
    REFUSED("--concurrency: must be between 1 and 1000000, got 0", "--concurrency", "0");
    REFUSED("--concurrency: must be between 1 and 1000000, got 99999999999999999999999",
            "--concurrency", "99999999999999999999999");
    REFUSED("--shutdown-grace-ms: expected a non-negative integer, got \"1.5\"",
            "--shutdown-grace-ms", "1.5");
    REFUSED("--lease-ms: must be between 100 and 3600000, got 50", "--lease-ms", "50");
    REFUSED("--role: expected api, runner or both, got \"worker\"", "--role", "worker");
    REFUSED("--listen: expected HOST:PORT (port 0-65535, IPv6 as [::1]:PORT), got \"8080\"",
            "--listen", "8080");
    REFUSED("--listen: expected HOST:PORT (port 0-65535, IPv6 as [::1]:PORT), got \"h:70000\"",
            "--listen", "h:70000");
    REFUSED("--listen: expected HOST:PORT (port 0-65535, IPv6 as [::1]:PORT), got \"::1:80\"",
            "--listen", "::1:80");
    REFUSED("--redis: redis address \"redis://u:***@h:0\": port must be 1-65535", "--redis",
            "redis://u:secret@h:0");
    REFUSED("--log-level: expected trace, debug, info, warn, error, fatal or 10, 20, 30, 40, "
            "50, 60, got \"loud\"",
            "--log-level", "loud");
    REFUSED("--runner-id: expected [A-Za-z0-9._:@-], 1-128 characters, got \"a b\"", "--runner-id",
            "a b");
    REFUSED("--data-dir: expected a non-empty path", "--data-dir=");
    REFUSED("unknown flag \"--rol\" (see --help)", "--rol", "api");
    REFUSED("unknown flag \"--event-stream-max\" (see --help)", "--event-stream-max=5");
    REFUSED("--listen: missing value", "--listen");
    REFUSED("--listen: missing value", "--listen", "--role", "api");
    REFUSED("--help takes no value", "--help=yes");
    REFUSED("unexpected argument \"api\" (flags start with --; see --help)", "api");
    REFUSED("unexpected argument \"-r\" (flags start with --; see --help)", "-r");
    REFUSED("heartbeat_ms (2000) must be less than lease_ms (1000), or a live runner would lose "
            "its jobs between heartbeats",
            "--lease-ms", "1000");
    REFUSED("redis_health_timeout_ms (6000) must not exceed redis_command_timeout_ms (5000): "
            "calls are dropped only after Redis is reported down",
            "--redis-health-timeout-ms", "6000");
    REFUSED("--redis-command-timeout-ms: must be between 100 and 3600000, got 50",
            "--redis-command-timeout-ms", "50");
    REFUSED("--admission-timeout-ms: must be between 10 and 60000, got 60001",
            "--admission-timeout-ms", "60001");
}

/* Writes `text` as the config file and expects it refused with `expect` (in which
 * "%s" stands for the file's path). */
static void file_refused(fixture_t *f, const char *text, const char *expect_fmt)
{
    write_file(f->path, text);
    char expect[1024];
    snprintf(expect, sizeof expect, expect_fmt, f->path);
    expect_refused(expect, (const char *[]){"ternd", "--config", f->path, NULL});
}

static void test_file_errors(void **state)
{
    fixture_t *f = *state;
    file_refused(f, "{\"rol\": \"api\"}", "config %s: unknown key \"rol\"");
    file_refused(f, "{\"concurrency\": \"10\"}",
                 "config %s: key \"concurrency\": expected an integer, got a string \"10\"");
    file_refused(f, "{\"concurrency\": 2.5}",
                 "config %s: key \"concurrency\": expected an integer, got a real number 2.5");
    file_refused(f, "{\"concurrency\": -1}",
                 "config %s: key \"concurrency\": must be between 1 and 1000000, got -1");
    file_refused(f, "{\"max_params_bytes\": 0}",
                 "config %s: key \"max_params_bytes\": must be between 1 and 536870912, got 0");
    /* Below one lock of the largest size, no lock could ever be created. */
    file_refused(f, "{\"max_lock_instructions\": 100}",
                 "config %s: key \"max_lock_instructions\": must be between 2500 and 100000000, "
                 "got 100");
    file_refused(f, "{\"listen\": 8080}",
                 "config %s: key \"listen\": expected a string, got an integer 8080");
    file_refused(f, "{\"data_dir\": null}",
                 "config %s: key \"data_dir\": expected a string, got null");
    file_refused(f, "{\"role\": \"master\"}",
                 "config %s: key \"role\": expected api, runner or both, got \"master\"");
    file_refused(f, "{\"redis\": true}",
                 "config %s: key \"redis\": expected a string or null, got a boolean true");
    file_refused(f, "{\"redis\": \"redis://h:70000\"}",
                 "config %s: key \"redis\": redis address \"redis://h:70000\": port must be "
                 "1-65535");
    file_refused(f, "{\"queues\": \"a\"}",
                 "config %s: key \"queues\": expected an array of queue names, got a string "
                 "\"a\"");
    file_refused(f, "{\"queues\": []}",
                 "config %s: key \"queues\": expected at least one queue "
                 "name");
    file_refused(f, "{\"queues\": [\"a\", 1]}",
                 "config %s: key \"queues\"[1]: expected a string, got an integer 1");
    file_refused(f, "{\"queues\": [\"a\", \"B\"]}",
                 "config %s: key \"queues\"[1]: bad queue name \"B\" (expected [a-z0-9_:.-], "
                 "1-64 characters)");
    file_refused(f, "{\"log_level\": 35}",
                 "config %s: key \"log_level\": expected trace, debug, info, warn, error, fatal "
                 "or 10, 20, 30, 40, 50, 60, got \"35\"");
    file_refused(f, "{\"plugins\": []}",
                 "config %s: key \"plugins\": expected an object, got an array []");
    file_refused(f, "{\"plugins\": {\"vm\": 1}}",
                 "config %s: key \"plugins\".vm: expected an object, got an integer 1");
    file_refused(f, "{\"plugins\": {\"Vm\": {}}}",
                 "config %s: key \"plugins\".Vm: bad plugin name (expected [a-z][a-z0-9_]*)");
    file_refused(f, "{\"postback_allow_networks\": [\"10.0.0.0/8\", \"10.0.0/8\"]}",
                 "config %s: key \"postback_allow_networks\"[1]: \"10.0.0/8\": not a network "
                 "(expected ADDRESS/PREFIX such as 10.0.0.0/8 or fd00::/8)");
    file_refused(f, "{\"postback_allow_networks\": \"10.0.0.0/8\"}",
                 "config %s: key \"postback_allow_networks\": expected an array of networks "
                 "such as [\"10.0.0.0/8\", \"fd00::/8\"] (or null: any address)");
    file_refused(f, "{\"plugins\": {\"http\": {\"allow_networks\": [\"::1/129\"]}}}",
                 "config %s: key \"plugins\".http.allow_networks[0]: \"::1/129\": prefix 129 is "
                 "longer than 128 (expected ADDRESS/PREFIX such as 10.0.0.0/8 or fd00::/8)");
    file_refused(f, "[1, 2]", "config %s: expected a JSON object at the top, got an array");
    file_refused(f, "{\"role\": \"api\",\n \"role\": \"runner\"}",
                 "config %s: line 2, column 7: duplicate object key near '\"role\"'");
    file_refused(f, "{\"role\": \"api\",\n \"listen\": [1, 2,, 3]}",
                 "config %s: line 2, column 18: unexpected token near ','");
    file_refused(f, "", "config %s: line 1, column 0: '[' or '{' expected near end of file");
}

static void test_file_unreadable(void **state)
{
    fixture_t *f = *state;
    ternd_config_t c;
    char err[512], expect[512];
    assert_int_equal(LOAD(&c, err, "--config", "/nonexistent/tern.json"), TERN_ENOENT);
    assert_string_equal(err, "config /nonexistent/tern.json: cannot open: No such file or "
                             "directory");
    assert_int_equal(LOAD(&c, err, "--config", f->dir), TERN_EINVAL);
    snprintf(expect, sizeof expect, "config %s: not a regular file", f->dir);
    assert_string_equal(err, expect);
    REFUSED("--config: expected a non-empty path", "--config=");
}

static void test_file_too_big(void **state)
{
    fixture_t *f = *state;
    /* A valid JSON document just over 1 MiB: {"plugins": {"vm": {"pad": "xxx..."}}} */
    size_t size = 1024 * 1024 + 1;
    char *text = malloc(size + 1);
    const char *head = "{\"plugins\": {\"vm\": {\"pad\": \"";
    const char *tail = "\"}}}";
    memset(text, 'x', size);
    memcpy(text, head, strlen(head));
    memcpy(text + size - strlen(tail), tail, strlen(tail));
    text[size] = '\0';
    write_file(f->path, text);
    ternd_config_t c;
    char err[1024], expect[1024];
    int rc = LOAD(&c, err, "--config", f->path);
    assert_int_equal(rc, TERN_E2BIG);
    snprintf(expect, sizeof expect, "config %s: larger than 1 MiB", f->path);
    assert_string_equal(err, expect);

    /* One byte less is accepted. */
    text[size - strlen(tail) - 1] = '\0';
    strcat(text, tail);
    write_file(f->path, text);
    assert_int_equal(LOAD(&c, err, "--config", f->path), 0);
    config_dispose(&c);
    free(text);
}

/* Runs config_load with stdout sent to a file; returns what was printed. */
static char *capture_stdout(int *rc, const char **args)
{
    char path[] = "/tmp/tern-test-stdout-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    ternd_config_t c;
    char err[256];
    *rc = load_args(&c, err, sizeof err, args);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    off_t len = lseek(fd, 0, SEEK_END);
    char *out = calloc(1, (size_t)len + 1);
    assert_int_equal(pread(fd, out, (size_t)len, 0), len);
    close(fd);
    unlink(path);
    /* Nothing to dispose after --help or --version. */
    assert_null(c.listen);
    return out;
}

static void test_retention(void **state)
{
    (void)state;
    ternd_config_t c;
    char err[1024];
    assert_int_equal(LOAD(&c, err, "--retention-days", "7"), 0);
    assert_int_equal(c.retention_days, 7);
    assert_true(config_retention_ms(&c) == 7ULL * 24 * 3600 * 1000);
    config_dispose(&c);
    /* 0 keeps finished jobs forever. */
    assert_int_equal(LOAD(&c, err, "--retention-days", "0"), 0);
    assert_true(config_retention_ms(&c) == 0);
    /* The test setting in ms wins over the days. */
    c.retention_ms = 1500;
    assert_true(config_retention_ms(&c) == 1500);
    config_dispose(&c);
    assert_int_equal(LOAD(&c, err, "--retention-days", "36501"), TERN_EINVAL);
    assert_non_null(strstr(err, "--retention-days"));
}

/* The API's names and connection limits, from flags and from the file. */
static void test_api_front_door(void **state)
{
    fixture_t *f = *state;
    ternd_config_t c;
    char err[1024];
    assert_int_equal(LOAD(&c, err, "--allowed-hosts", "tern.example,API.example.org",
                          "--allowed-origins", "http://ui.example:3000", "--max-connections", "50"),
                     0);
    assert_string_equal(c.allowed_hosts[0], "tern.example");
    assert_string_equal(c.allowed_hosts[1], "API.example.org");
    assert_null(c.allowed_hosts[2]);
    assert_string_equal(c.allowed_origins[0], "http://ui.example:3000");
    assert_int_equal(c.max_connections, 50);
    assert_int_equal(c.header_timeout_ms, 10000);
    assert_int_equal(c.idle_timeout_ms, 60000);
    config_dispose(&c);

    write_file(f->path, "{\"allowed_hosts\": [\"a.example\"], \"allowed_origins\": [],"
                        " \"header_timeout_ms\": 500, \"body_timeout_ms\": 600,"
                        " \"idle_timeout_ms\": 700, \"io_timeout_ms\": 800,"
                        " \"fd_reserve\": 64, \"max_connections\": 9}");
    assert_int_equal(LOAD(&c, err, "--config", f->path), 0);
    assert_string_equal(c.allowed_hosts[0], "a.example");
    assert_null(c.allowed_origins);
    assert_int_equal(c.header_timeout_ms, 500);
    assert_int_equal(c.body_timeout_ms, 600);
    assert_int_equal(c.idle_timeout_ms, 700);
    assert_int_equal(c.io_timeout_ms, 800);
    assert_int_equal(c.fd_reserve, 64);
    assert_int_equal(c.max_connections, 9);
    config_dispose(&c);

    REFUSED("--allowed-hosts: allowed host \"a b\": expected a DNS name (letters, digits, '-', "
            "'.'; no port)",
            "--allowed-hosts", "ok.example,a b");
    REFUSED("--allowed-origins: allowed origin \"ui.example\": expected http://HOST[:PORT] or "
            "https://HOST[:PORT]",
            "--allowed-origins", "ui.example");
    REFUSED("--max-connections: must be between 1 and 1000000, got 0", "--max-connections", "0");
}

static void test_help_and_version(void **state)
{
    (void)state;
    int rc;
    char *out = capture_stdout(&rc, (const char *[]){"ternd", "--help", NULL});
    assert_int_equal(rc, 1);
    assert_string_equal(out, config_usage());
    assert_true(strncmp(out, "usage: ternd ", 13) == 0);
    /* Every flag of ternd's command line (docs/OPERATIONS.md) is in the usage text. */
    const char *flags[] = {"--config",    "--role",       "--listen",       "--redis",
                           "--data-dir",  "--plugin-dir", "--workflows",    "--concurrency",
                           "--runner-id", "--queues",     "--lease-ms",     "--heartbeat-ms",
                           "--log-level", "--version",    "--redis-server", "--shutdown-grace-ms"};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(flags); i++)
        if (strstr(out, flags[i]) == NULL)
            fail_msg("usage lacks %s", flags[i]);
    free(out);

    /* --help wins even after other (valid) flags; -h is the same. */
    out = capture_stdout(&rc, (const char *[]){"ternd", "--role", "api", "-h", NULL});
    assert_int_equal(rc, 1);
    assert_string_equal(out, config_usage());
    free(out);

    out = capture_stdout(&rc, (const char *[]){"ternd", "--version", NULL});
    assert_int_equal(rc, 1);
    assert_string_equal(out, "ternd " TERN_VERSION "\n");
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),        cmocka_unit_test(test_flags_both_spellings),
        cmocka_unit_test(test_file_then_flags), cmocka_unit_test(test_queues_parsing),
        cmocka_unit_test(test_flag_errors),     cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_file_unreadable), cmocka_unit_test(test_file_too_big),
        cmocka_unit_test(test_retention),       cmocka_unit_test(test_help_and_version),
        cmocka_unit_test(test_api_front_door),
    };
    int failures = cmocka_run_group_tests_name("config", tests, group_setup, group_teardown);
    return failures == 0 ? 0 : 1;
}
