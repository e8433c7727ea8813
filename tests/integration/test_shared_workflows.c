/*
 * test_shared_workflows.c -- one cache of parsed workflow versions
 * (model/workflow_cache.h) shared by job creates and a runner in one process, as ternd
 * shares it when it serves the API and runs jobs: a version is parsed once for both,
 * whether its job starts at once on the runner (direct start) or is claimed from its
 * queue; with a cache each, each parses it once. A real redis-server; the job
 * operations and the runner run in this process, on the client's loop.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model/workflow_cache.h"
#include "plugins/plugin_loader.h"
#include "run/runner.h"
#include "run/task_ctx.h"

static itest_dir_t dir;
static itest_redis_t redis;
static itest_client_t client;
static plugin_registry_t *plugins;

static int group_setup(void **state)
{
    (void)state;
    itest_dir_make(&dir);
    itest_redis_start(&redis, dir.path);
    itest_client_open(&client, &redis);
    char err[512];
    const char *tasks = getenv("TERN_TASKS");
    plugins = plugin_registry_new(tasks != NULL ? tasks : ".", task_ctx_host(), err, sizeof err);
    if (plugins == NULL)
        fail_msg("%s", err);
    assert_int_equal(plugin_registry_load_all(plugins, NULL), 0);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    plugin_registry_free(plugins);
    itest_client_close(&client);
    itest_redis_stop(&redis, SIGTERM);
    itest_dir_remove(&dir);
    return 0;
}

/* Job operations and a runner on the client's loop, given these caches (NULL: each
 * makes its own), the runner a local one of the operations (direct start). */
typedef struct node {
    job_ops_t *ops;
    runner_t *runner;
    bool stopped;
} node_t;

static bool local_reserve(void *data, const char *queue)
{
    return runner_direct_reserve(data, queue);
}

static void local_start(void *data, const char *uuid, const store_args_t *fields, const char *doc,
                        size_t doc_len, long long server_now)
{
    runner_direct_start(data, uuid, fields, doc, doc_len, server_now);
}

static void local_release(void *data, bool lost)
{
    runner_direct_release(data, lost);
}

static void node_start(node_t *n, const char *id, workflow_cache_t *for_ops,
                       workflow_cache_t *for_runner)
{
    memset(n, 0, sizeof *n);
    job_ops_opts_t jo = {.store = client.store, .loop = &client.loop, .workflows = for_ops};
    n->ops = job_ops_new(&jo);
    static const char *const queues[] = {"default"};
    runner_opts_t ro = {
        .id = id, .queues = queues, .n_queues = 1, .plugins = plugins, .workflows = for_runner};
    n->runner = runner_new(&client.loop, client.store, &ro);
    job_ops_local_runner_t lr = {.id = id,
                                 .reserve = local_reserve,
                                 .start = local_start,
                                 .release = local_release,
                                 .data = n->runner};
    job_ops_set_local_runner(n->ops, &lr);
}

static void on_stopped(void *data)
{
    node_t *n = data;
    n->stopped = true;
}

static void node_stop(node_t *n)
{
    job_ops_set_local_runner(n->ops, NULL);
    runner_stop(n->runner, 2000, on_stopped, n);
    if (!itest_client_run_until(&client, &n->stopped, 10000))
        fail_msg("the runner did not stop within 10 s");
    job_ops_close(n->ops);
    job_ops_free(n->ops);
}

/* Creates a job of `workflow` through the node's operations and waits for its end. */
static void run_job(node_t *n, const char *workflow)
{
    job_create_req_t req = {.workflow = workflow};
    itest_answer_t a = {0};
    job_ops_create(n->ops, &req, itest_on_answer, &a);
    json_t *job = NULL;
    char msg[1024];
    if (itest_answer_wait(&client, &a, &job, msg, sizeof msg) != 0)
        fail_msg("create %s: %s", workflow, msg);
    char uuid[40];
    snprintf(uuid, sizeof uuid, "%s", json_string_value(json_object_get(job, "uuid")));
    json_decref(job);
    job = itest_wait_finished_ok(&client, uuid, 10000);
    assert_string_equal(itest_execution(job), "succeeded");
    json_decref(job);
}

static void test_one_parse_for_creates_and_runner(void **state)
{
    (void)state;
    itest_workflow_put_ok(&client, "{\"name\": \"shared\", \"version\": \"1\", "
                                   "\"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}]}");
    workflow_cache_t *shared = workflow_cache_new(0);
    node_t n;
    node_start(&n, "shared-1", shared, shared);
    /* Started at once on the runner: the create parsed the version, the runner got it. */
    run_job(&n, "shared");
    assert_int_equal(workflow_cache_count(shared), 1);
    assert_int_equal(workflow_cache_parses(shared), 1);
    /* Claimed from the queue: the runner finds it by the job's workflow uuid. */
    job_ops_set_local_runner(n.ops, NULL);
    run_job(&n, "shared@1");
    run_job(&n, "shared");
    assert_int_equal(workflow_cache_count(shared), 1);
    assert_int_equal(workflow_cache_parses(shared), 1);
    node_stop(&n);
    /* Nobody holds it now; it stays for the next job of the version. */
    assert_int_equal(workflow_cache_idle(shared), 1);
    workflow_cache_free(shared);
}

static void test_a_cache_each_parses_each(void **state)
{
    (void)state;
    itest_workflow_put_ok(&client, "{\"name\": \"apart\", \"version\": \"1\", "
                                   "\"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}]}");
    workflow_cache_t *for_ops = workflow_cache_new(0), *for_runner = workflow_cache_new(0);
    node_t n;
    node_start(&n, "apart-1", for_ops, for_runner);
    run_job(&n, "apart");
    job_ops_set_local_runner(n.ops, NULL);
    run_job(&n, "apart");
    assert_int_equal(workflow_cache_count(for_ops), 1);
    assert_int_equal(workflow_cache_count(for_runner), 1);
    assert_int_equal(workflow_cache_parses(for_ops), 1);
    assert_int_equal(workflow_cache_parses(for_runner), 1);
    node_stop(&n);
    workflow_cache_free(for_ops);
    workflow_cache_free(for_runner);

    /* And with none given, each makes its own (and frees it). */
    node_start(&n, "apart-2", NULL, NULL);
    run_job(&n, "apart");
    node_stop(&n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_parse_for_creates_and_runner),
        cmocka_unit_test(test_a_cache_each_parses_each),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
