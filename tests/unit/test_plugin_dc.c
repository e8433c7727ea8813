/*
 * test_plugin_dc.c -- the built dc plugin: its configuration's refusals at init (each
 * naming the setting), and dc.agent_info through tests/support/task_harness.c on an
 * agent (its server and data root) and elsewhere (NotAnAgent); the inventory's tasks
 * refusing bad arguments without Redis. Arguments: the built
 * dc.so and the source root (examples/lab/datacenter.json is the description).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "task_harness.h"

#define CN1 "4d16fdf2-c04f-41fb-b197-1c8335405d01"

static const char *plugin_path;
static char dc_file[PATH_MAX];
static char lab_dir[PATH_MAX];

/* The dc section for the example description in lab_dir, with `extra` (JSON object
 * text) merged in. A new reference. */
static json_t *config(const char *extra)
{
    json_t *c = json_pack("{s:s, s:s}", "datacenter", dc_file, "lab_dir", lab_dir);
    json_t *more = task_harness_json(extra);
    json_object_update(c, more);
    json_decref(more);
    return c;
}

/* Calls the plugin's init with `conf` and expects a refusal holding `want`. */
static void expect_refused(json_t *conf, const char *want)
{
    void *dl = NULL;
    const tern_plugin *p = task_harness_plugin_open(plugin_path, &dl);
    void *state = NULL;
    char err[2048] = "";
    int rc = p->init(NULL, conf, &state, err, sizeof err);
    if (rc == 0)
        fail_msg("init accepted %s", json_dumps(conf, 0));
    if (strstr(err, want) == NULL)
        fail_msg("init refused with \"%s\", expected it to hold \"%s\"", err, want);
    json_decref(conf);
    dlclose(dl);
}

static void test_config_refusals(void **state)
{
    (void)state;
    expect_refused(json_pack("{s:s}", "datacentre", "x"), "datacentre: unknown setting");
    expect_refused(json_pack("{s:i}", "datacenter", 1), "datacenter: expected a non-empty string");
    expect_refused(json_pack("{s:s}", "datacenter", dc_file), "lab_dir: required");
    expect_refused(json_pack("{s:s}", "server_uuid", CN1), "server_uuid: an agent needs");
    expect_refused(config("{\"data_root\": \"/x\"}"), "data_root: only an agent");
    expect_refused(config("{\"server_uuid\": \"00000000-0000-4000-8000-000000000000\", "
                          "\"data_root\": \"servers/cn1\"}"),
                   "server_uuid: 00000000-0000-4000-8000-000000000000 is not a server of");
    /* Another server's root: an agent touches its own server's root only. */
    expect_refused(config("{\"server_uuid\": \"" CN1 "\", \"data_root\": \"servers/cn2\"}"),
                   "data_root: servers/cn2 is not the data root of server " CN1);
    /* workload_bin: an agent's, an executable named by its absolute path. */
    expect_refused(config("{\"workload_bin\": \"/bin/true\"}"), "workload_bin: only an agent");
    expect_refused(config("{\"server_uuid\": \"" CN1 "\", \"data_root\": \"servers/cn1\", "
                          "\"workload_bin\": \"tern-workload\"}"),
                   "workload_bin: tern-workload is not an executable file given by its absolute");
    expect_refused(config("{\"server_uuid\": \"" CN1 "\", \"data_root\": \"servers/cn1\", "
                          "\"workload_bin\": \"/nonexistent/tern-workload\"}"),
                   "workload_bin: /nonexistent/tern-workload is not an executable");
    /* migration_listen: an agent's, a numeric IPv4 address and a port. */
    expect_refused(config("{\"migration_listen\": \"127.0.0.1:7000\"}"),
                   "migration_listen: only an agent");
    expect_refused(config("{\"server_uuid\": \"" CN1 "\", \"data_root\": \"servers/cn1\", "
                          "\"migration_listen\": \"localhost:7000\"}"),
                   "migration_listen: localhost:7000: the host is not a numeric IPv4 address");
    expect_refused(config("{\"server_uuid\": \"" CN1 "\", \"data_root\": \"servers/cn1\", "
                          "\"migration_listen\": \"127.0.0.1:70000\"}"),
                   "migration_listen: 127.0.0.1:70000: the port is not a number");
    expect_refused(config("{\"server_uuid\": \"" CN1 "\", \"data_root\": \"servers/cn1\", "
                          "\"migration_listen\": \"127.0.0.1\"}"),
                   "migration_listen: 127.0.0.1: expected HOST:PORT");
    /* A port another socket holds: the agent does not start without its listener. */
    int busy = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t salen = sizeof sa;
    assert_int_equal(bind(busy, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(busy, 1), 0);
    assert_int_equal(getsockname(busy, (struct sockaddr *)&sa, &salen), 0);
    char busy_conf[256];
    snprintf(busy_conf, sizeof busy_conf,
             "{\"server_uuid\": \"" CN1 "\", \"data_root\": \"servers/cn1\", "
             "\"migration_listen\": \"127.0.0.1:%u\"}",
             (unsigned)ntohs(sa.sin_port));
    expect_refused(config(busy_conf), "migration_listen: cannot listen on 127.0.0.1:");
    close(busy);
    /* A description with faults refuses the plugin with each of them. */
    json_t *c = json_pack("{s:s, s:s}", "datacenter", "/nonexistent/dc.json", "lab_dir", lab_dir);
    expect_refused(c, "datacenter /nonexistent/dc.json: /nonexistent/dc.json:");
    char bad[PATH_MAX + 16];
    snprintf(bad, sizeof bad, "%s/bad.json", lab_dir);
    FILE *f = fopen(bad, "w");
    assert_non_null(f);
    fputs("{\"servers\": [], \"networks\": [], \"packages\": [], \"images\": [], \"x\": 1}", f);
    fclose(f);
    c = json_pack("{s:s, s:s}", "datacenter", bad, "lab_dir", lab_dir);
    expect_refused(
        c, "x: unknown field (expected one of servers, networks, packages, images, settings); "
           "servers: a datacenter needs at least one server");
    unlink(bad);
}

static void test_agent_info(void **state)
{
    (void)state;
    json_t *conf = config("{\"server_uuid\": \"" CN1 "\", \"data_root\": \"servers/cn1\"}");
    task_harness_t *h = task_harness_new(plugin_path, conf);
    json_t *args = json_object();
    harness_run_t r;
    assert_int_equal(task_harness_run(h, "agent_info", args, NULL, NULL, 5000, 0, &r), 0);
    assert_true(r.finished);
    if (r.outcome.kind != TASK_DONE)
        fail_msg("agent_info failed: %s", r.outcome.message ? r.outcome.message : "?");
    char root[PATH_MAX + 32];
    snprintf(root, sizeof root, "%s/servers/cn1", lab_dir);
    assert_string_equal(json_string_value(json_object_get(r.outcome.result, "server_uuid")), CN1);
    assert_string_equal(json_string_value(json_object_get(r.outcome.result, "hostname")), "cn1");
    assert_string_equal(json_string_value(json_object_get(r.outcome.result, "rack")), "r1");
    assert_string_equal(json_string_value(json_object_get(r.outcome.result, "data_root")), root);
    harness_run_dispose(&r);
    task_harness_free(h);
    json_decref(conf);

    /* The control ternd (no server) and a ternd with no dc section at all. */
    conf = config("{}");
    h = task_harness_new(plugin_path, conf);
    assert_int_equal(task_harness_run(h, "agent_info", args, NULL, NULL, 5000, 0, &r), 0);
    harness_run_assert_failed(&r, "NotAnAgent", "not a server's agent");
    harness_run_dispose(&r);
    task_harness_free(h);
    json_decref(conf);
    h = task_harness_new(plugin_path, NULL);
    assert_int_equal(task_harness_run(h, "agent_info", args, NULL, NULL, 5000, 0, &r), 0);
    harness_run_assert_failed(&r, "NotAnAgent", "not a server's agent");
    harness_run_dispose(&r);
    task_harness_free(h);
    json_decref(args);
}

/* The inventory's tasks refuse what they can tell without Redis, before calling it,
 * and name a runner without Redis, or without a description to load. (Their scripts
 * run against a real redis-server in tests/integration/test_dc_inventory.py and
 * test_dc_lab.py.) */
static void test_inventory_without_redis(void **state)
{
    (void)state;
    task_harness_t *h = task_harness_new(plugin_path, NULL);
    harness_run_t r;
    json_t *args = json_object();
    assert_int_equal(task_harness_run(h, "inventory_load", args, NULL, NULL, 5000, 0, &r), 0);
    harness_run_assert_failed(&r, "NoDescription", "names no \"datacenter\"");
    harness_run_dispose(&r);
    json_decref(args);

    args = task_harness_json("{\"vm_uuid\": \"" CN1 "\", \"state\": \"paused\"}");
    assert_int_equal(task_harness_run(h, "vm_set_state", args, NULL, NULL, 5000, 0, &r), 0);
    harness_run_assert_failed(&r, "InvalidArgument", "state: expected \"running\" or");
    harness_run_dispose(&r);
    json_decref(args);

    args = task_harness_json("{\"vm_uuid\": \"" CN1 "\", \"final_state\": \"gone\"}");
    assert_int_equal(task_harness_run(h, "release", args, NULL, NULL, 5000, 0, &r), 0);
    harness_run_assert_failed(&r, "InvalidArgument", "final_state: expected");
    harness_run_dispose(&r);
    json_decref(args);

    args = task_harness_json("{\"vm_uuid\": \"" CN1 "\", \"final_state\": \"failed\"}");
    assert_int_equal(task_harness_run(h, "release", args, NULL, NULL, 5000, 0, &r), 0);
    harness_run_assert_failed(&r, "RedisUnavailable", "Redis is not reachable");
    harness_run_dispose(&r);
    json_decref(args);
    task_harness_free(h);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s DC_PLUGIN SOURCE_ROOT\n", argv[0]);
        return 2;
    }
    plugin_path = argv[1];
    snprintf(dc_file, sizeof dc_file, "%s/examples/lab/datacenter.json", argv[2]);
    char tmpl[] = "/tmp/test_plugin_dc.XXXXXX";
    if (mkdtemp(tmpl) == NULL)
        return 1;
    snprintf(lab_dir, sizeof lab_dir, "%s", tmpl);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_refusals),
        cmocka_unit_test(test_agent_info),
        cmocka_unit_test(test_inventory_without_redis),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    rmdir(lab_dir);
    return rc;
}
