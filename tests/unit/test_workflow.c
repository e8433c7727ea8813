/*
 * test_workflow.c -- unit tests of engine/model/workflow.c: the keys of a definition and
 * their rules, step names and their uniqueness, template roots per part of a workflow,
 * the task check callback, limits, the normalized document and the model borrowed from
 * it, text syntax errors, and every shipped file in workflows/ (whose directory is the
 * first argument of this program).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "model/template.h"
#include "model/workflow.h"
#include "plugins/plugin_loader.h"

static const char *workflows_dir; /* argv[1] */
static const char *plugins_dir;   /* argv[2]: the built plugins */

/* ---- a fake task registry ------------------------------------------------------- */

static const char *const known_tasks[] = {
    "core.log",          "core.noop",   "core.sleep",       "core.fail",         "core.set_state",
    "disk.check_resize", "disk.resize", "disk.verify_size", "disk.update_quota", NULL,
};

/* Records the paths the parser asked about, in order. */
typedef struct calls {
    char paths[64][64];
    char tasks[64][64];
    size_t n;
} calls_t;

static int check_task(void *data, const char *task, const json_t *args, const char *path, char *err,
                      size_t errlen)
{
    calls_t *c = data;
    assert_non_null(args);
    if (c != NULL && c->n < 64) {
        snprintf(c->paths[c->n], sizeof c->paths[0], "%s", path);
        snprintf(c->tasks[c->n], sizeof c->tasks[0], "%s", task);
        c->n++;
    }
    for (size_t i = 0; known_tasks[i] != NULL; i++)
        if (strcmp(task, known_tasks[i]) == 0)
            return 0;
    return err_set(err, errlen, TERN_ENOENT, "%s.task: unknown task \"%s\"", path, task);
}

/* Parses text with the fake registry; returns the code and fills *wf or err. */
static int parse(const char *text, workflow_t **wf, char *err, size_t errlen)
{
    return workflow_parse_text(text, strlen(text), check_task, NULL, wf, err, errlen);
}

static workflow_t *parse_ok(const char *text)
{
    workflow_t *wf = NULL;
    char err[512] = "";
    int rc = parse(text, &wf, err, sizeof err);
    if (rc != 0)
        fail_msg("refused (%d): %s\n%s", rc, err, text);
    assert_non_null(wf);
    return wf;
}

/* Asserts that text is refused with code and exactly msg. */
static void refused_code(const char *text, int code, const char *msg)
{
    workflow_t *wf = (workflow_t *)1;
    char err[512] = "";
    int rc = parse(text, &wf, err, sizeof err);
    if (rc != code || strcmp(err, msg) != 0)
        fail_msg("got %d \"%s\"\nwant %d \"%s\"\nfor %s", rc, err, code, msg, text);
    assert_null(wf);
}

static void refused(const char *text, const char *msg)
{
    refused_code(text, TERN_EINVAL, msg);
}

/* Builds a workflow around one chain step given as JSON text. */
static char *with_step(const char *step)
{
    return xasprintf("{\"name\": \"w\", \"chain\": [%s]}", step);
}

static void step_refused(const char *step, const char *msg)
{
    char *text = with_step(step);
    refused(text, msg);
    free(text);
}

#define MINIMAL "{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}]}"

static const char disk_resize[] =
    "{\n"
    "  \"name\": \"disk-resize\", \"version\": \"1.0.0\", \"timeout\": 600,\n"
    "  \"holds\": [\"vm:${params.vm_uuid}\"],\n"
    "  \"chain\": [\n"
    "    { \"name\": \"check\", \"task\": \"disk.check_resize\", \"timeout\": 10,\n"
    "      \"args\": { \"vm_uuid\": \"${params.vm_uuid}\", \"disk_id\": \"${params.disk_id}\",\n"
    "                \"size\": \"${params.size}\",\n"
    "                \"dangerous_allow_shrink\": \"${params.dangerous_allow_shrink:-false}\" } },\n"
    "    { \"name\": \"resize\", \"task\": \"disk.resize\", \"timeout\": 120,\n"
    "      \"retry\": { \"max_attempts\": 5, \"backoff\": \"exponential\", \"initial_ms\": 200,\n"
    "                 \"max_ms\": 10000, \"jitter\": true },\n"
    "      \"args\": { \"vm_uuid\": \"${params.vm_uuid}\", \"disk_id\": \"${params.disk_id}\",\n"
    "                \"size\": \"${steps.check.result.size}\" },\n"
    "      \"fallback\": { \"task\": \"disk.verify_size\",\n"
    "                    \"args\": { \"vm_uuid\": \"${params.vm_uuid}\",\n"
    "                              \"size\": \"${steps.check.result.size}\" } } },\n"
    "    { \"name\": \"account\", \"task\": \"disk.update_quota\",\n"
    "      \"args\": { \"vm_uuid\": \"${params.vm_uuid}\" } }\n"
    "  ],\n"
    "  \"onerror\": [\n"
    "    { \"name\": \"report\", \"task\": \"core.log\",\n"
    "      \"args\": { \"msg\": \"resize of ${params.disk_id} failed: ${error.message}\" } }\n"
    "  ]\n"
    "}\n";

/* ---- the model and the normalized document -------------------------------------- */

static void test_minimal_defaults(void **state)
{
    (void)state;
    workflow_t *wf = parse_ok(MINIMAL);
    assert_string_equal(wf->name, "w");
    assert_string_equal(wf->version, "1.0.0");
    assert_string_equal(wf->queue, "default");
    assert_int_equal(wf->timeout_ms, 0);
    assert_int_equal(wf->n_holds, 0);
    assert_int_equal(wf->n_steps[WF_CHAIN], 1);
    assert_int_equal(wf->n_steps[WF_ONERROR], 0);
    assert_int_equal(wf->n_steps[WF_ONCANCEL], 0);

    const wf_step_t *s = workflow_step_get(wf, WF_CHAIN, 0);
    assert_non_null(s);
    assert_string_equal(s->name, "a");
    assert_string_equal(s->task, "core.noop");
    assert_true(json_is_object(s->args) && json_object_size(s->args) == 0);
    assert_int_equal(s->timeout_ms, 0);
    assert_int_equal(s->retry.max_attempts, 1);
    assert_true(s->idempotent);
    assert_false(s->isolate);
    assert_int_equal(s->n_holds, 0);
    assert_null(s->fallback);

    json_t *want =
        json_loads("{\"name\": \"w\", \"version\": \"1.0.0\", \"queue\": \"default\","
                   " \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\", \"args\": {},"
                   " \"idempotent\": true, \"isolate\": false}]}",
                   0, NULL);
    assert_true(json_equal(wf->doc, want));
    json_decref(want);
    workflow_free(wf);
}

static void test_step_get_and_phase_names(void **state)
{
    (void)state;
    workflow_t *wf =
        parse_ok("{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"},"
                 " {\"name\": \"b\", \"task\": \"core.noop\"}],"
                 " \"onerror\": [{\"name\": \"e\", \"task\": \"core.log\"}],"
                 " \"oncancel\": [{\"name\": \"c\", \"task\": \"core.log\"}]}");
    assert_string_equal(workflow_step_get(wf, WF_CHAIN, 1)->name, "b");
    assert_null(workflow_step_get(wf, WF_CHAIN, 2));
    assert_string_equal(workflow_step_get(wf, WF_ONERROR, 0)->name, "e");
    assert_null(workflow_step_get(wf, WF_ONERROR, 1));
    assert_string_equal(workflow_step_get(wf, WF_ONCANCEL, 0)->name, "c");
    assert_null(workflow_step_get(wf, (wf_phase_t)3, 0));
    assert_string_equal(workflow_phase_name(WF_CHAIN), "chain");
    assert_string_equal(workflow_phase_name(WF_ONERROR), "onerror");
    assert_string_equal(workflow_phase_name(WF_ONCANCEL), "oncancel");
    workflow_free(wf);
    workflow_free(NULL);
}

static void test_design_example(void **state)
{
    (void)state;
    workflow_t *wf = parse_ok(disk_resize);
    assert_string_equal(wf->name, "disk-resize");
    assert_int_equal(wf->timeout_ms, 600000);
    assert_int_equal(wf->n_holds, 1);
    assert_string_equal(wf->holds[0].resource, "vm:${params.vm_uuid}");
    assert_int_equal(wf->holds[0].capacity, 1);
    assert_int_equal(wf->n_steps[WF_CHAIN], 3);
    assert_int_equal(wf->n_steps[WF_ONERROR], 1);

    const wf_step_t *r = workflow_step_get(wf, WF_CHAIN, 1);
    assert_int_equal(r->timeout_ms, 120000);
    assert_int_equal(r->retry.max_attempts, 5);
    assert_int_equal(r->retry.kind, BACKOFF_EXPONENTIAL);
    assert_int_equal(r->retry.initial_ms, 200);
    assert_int_equal(r->retry.max_ms, 10000);
    assert_true(r->retry.factor == 2.0);
    assert_true(r->retry.jitter);
    assert_string_equal(json_string_value(json_object_get(r->args, "size")),
                        "${steps.check.result.size}");

    const wf_step_t *fb = r->fallback;
    assert_non_null(fb);
    assert_string_equal(fb->name, "resize.fallback");
    assert_string_equal(fb->task, "disk.verify_size");
    assert_int_equal(fb->timeout_ms, 120000); /* the step's, when it has none */
    assert_int_equal(fb->retry.max_attempts, 1);
    assert_true(fb->idempotent);
    assert_null(fb->fallback);

    /* The retry policy is spelled out in the normalized document. */
    json_t *nretry = json_object_get(json_array_get(json_object_get(wf->doc, "chain"), 1), "retry");
    json_t *want = json_loads("{\"max_attempts\": 5, \"backoff\": \"exponential\","
                              " \"initial_ms\": 200, \"max_ms\": 10000, \"factor\": 2.0,"
                              " \"jitter\": true}",
                              0, NULL);
    assert_true(json_equal(nretry, want));
    json_decref(want);
    json_t *nfb = json_object_get(json_array_get(json_object_get(wf->doc, "chain"), 1), "fallback");
    assert_string_equal(json_string_value(json_object_get(nfb, "name")), "resize.fallback");
    assert_int_equal(json_integer_value(json_object_get(nfb, "timeout")), 120);
    workflow_free(wf);
}

/* A retry count becomes a policy object in the normalized document. */
static void test_retry_count_normalized(void **state)
{
    (void)state;
    char *text = with_step("{\"name\": \"a\", \"task\": \"core.noop\", \"retry\": 3}");
    workflow_t *wf = parse_ok(text);
    free(text);
    assert_int_equal(wf->steps[WF_CHAIN][0].retry.max_attempts, 3);
    json_t *nretry = json_object_get(json_array_get(json_object_get(wf->doc, "chain"), 0), "retry");
    json_t *want = json_loads("{\"max_attempts\": 3, \"backoff\": \"exponential\","
                              " \"initial_ms\": 1000, \"max_ms\": 60000, \"factor\": 2.0,"
                              " \"jitter\": true}",
                              0, NULL);
    assert_true(json_equal(nretry, want));
    json_decref(want);
    workflow_free(wf);
}

/* Parsing the normalized document again gives the same document. */
static void test_normalized_reparses(void **state)
{
    (void)state;
    workflow_t *wf = parse_ok(disk_resize), *again = NULL;
    char err[512] = "";
    assert_int_equal(workflow_parse(wf->doc, check_task, NULL, &again, err, sizeof err), 0);
    assert_true(json_equal(wf->doc, again->doc));
    assert_string_equal(again->steps[WF_CHAIN][1].fallback->name, "resize.fallback");
    workflow_free(again);
    workflow_free(wf);
}

/* The model's strings and args are borrowed from wf->doc, a deep copy of the input. */
static void test_doc_is_a_deep_copy(void **state)
{
    (void)state;
    json_t *in = json_loads(disk_resize, 0, NULL);
    workflow_t *wf = NULL;
    char err[512] = "";
    assert_int_equal(workflow_parse(in, NULL, NULL, &wf, err, sizeof err), 0);

    json_t *chain = json_object_get(wf->doc, "chain");
    json_t *s1 = json_array_get(chain, 1);
    assert_ptr_equal(wf->name, json_string_value(json_object_get(wf->doc, "name")));
    assert_ptr_equal(wf->version, json_string_value(json_object_get(wf->doc, "version")));
    assert_ptr_equal(wf->queue, json_string_value(json_object_get(wf->doc, "queue")));
    assert_ptr_equal(wf->steps[WF_CHAIN][1].name, json_string_value(json_object_get(s1, "name")));
    assert_ptr_equal(wf->steps[WF_CHAIN][1].task, json_string_value(json_object_get(s1, "task")));
    assert_ptr_equal(wf->steps[WF_CHAIN][1].args, json_object_get(s1, "args"));
    assert_ptr_equal(wf->steps[WF_CHAIN][1].fallback->task,
                     json_string_value(json_object_get(json_object_get(s1, "fallback"), "task")));
    assert_ptr_equal(wf->holds[0].resource,
                     json_string_value(json_array_get(json_object_get(wf->doc, "holds"), 0)));

    /* Changing or dropping the input changes nothing in the workflow. */
    json_t *in_chain = json_object_get(in, "chain");
    json_string_set(json_object_get(json_array_get(in_chain, 1), "name"), "changed");
    json_object_set_new(json_object_get(json_array_get(in_chain, 0), "args"), "x", json_integer(1));
    json_decref(in);
    assert_string_equal(wf->steps[WF_CHAIN][1].name, "resize");
    assert_null(json_object_get(wf->steps[WF_CHAIN][0].args, "x"));
    workflow_free(wf);
}

/* ---- workflow keys -------------------------------------------------------------- */

static void test_workflow_name(void **state)
{
    (void)state;
    refused("{\"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}]}",
            "name: missing; a workflow needs a name");
    refused("{\"name\": 5, \"chain\": []}", "name: expected a string, got 5");
    refused("{\"name\": \"\", \"chain\": []}",
            "name: expected a workflow name (a letter or digit, then up to 127 letters, digits, "
            "'_', '.' or '-'), got \"\"");
    refused("{\"name\": \"-x\", \"chain\": []}",
            "name: expected a workflow name (a letter or digit, then up to 127 letters, digits, "
            "'_', '.' or '-'), got \"-x\"");
    refused("{\"name\": \"a b\", \"chain\": []}",
            "name: expected a workflow name (a letter or digit, then up to 127 letters, digits, "
            "'_', '.' or '-'), got \"a b\"");

    char name[200], *text;
    memset(name, 'n', 128);
    name[128] = '\0';
    text = xasprintf("{\"name\": \"%s\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}]}",
                     name);
    workflow_t *wf = parse_ok(text);
    assert_int_equal(strlen(wf->name), 128);
    workflow_free(wf);
    free(text);
    name[128] = 'n';
    name[129] = '\0';
    text = xasprintf("{\"name\": \"%s\", \"chain\": []}", name);
    workflow_t *none = NULL;
    char err[512];
    assert_int_equal(parse(text, &none, err, sizeof err), TERN_EINVAL);
    assert_non_null(strstr(err, "name: expected a workflow name"));
    free(text);

    wf = parse_ok("{\"name\": \"Vm.Provision_2-x\", \"chain\": [{\"name\": \"a\", \"task\": "
                  "\"core.noop\"}]}");
    assert_string_equal(wf->name, "Vm.Provision_2-x");
    workflow_free(wf);
}

static void test_workflow_version_uuid_description(void **state)
{
    (void)state;
    workflow_t *wf = parse_ok(
        "{\"name\": \"w\", \"version\": \"2.0.0-rc.1+build5\", \"uuid\":"
        " \"0B4CBD7E-5a0e-4c4b-9f53-7c1a6de7a0f1\", \"description\": \"d\","
        " \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\", \"description\": \"step d\"}]}");
    assert_string_equal(wf->version, "2.0.0-rc.1+build5");
    assert_string_equal(json_string_value(json_object_get(wf->doc, "uuid")),
                        "0B4CBD7E-5a0e-4c4b-9f53-7c1a6de7a0f1");
    assert_string_equal(json_string_value(json_object_get(wf->doc, "description")), "d");
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(wf->doc, "chain"), 0), "description")),
                        "step d");
    workflow_free(wf);

    refused("{\"name\": \"w\", \"version\": \"1 0\", \"chain\": []}",
            "version: expected 1 to 64 letters, digits, '.', '+' or '-', got \"1 0\"");
    refused("{\"name\": \"w\", \"version\": \"\", \"chain\": []}",
            "version: expected 1 to 64 letters, digits, '.', '+' or '-', got \"\"");
    refused("{\"name\": \"w\", \"version\": 1, \"chain\": []}",
            "version: expected a string, got 1");
    refused("{\"name\": \"w\", \"version\": "
            "\"12345678901234567890123456789012345678901234567890123456789012345\", \"chain\": []}",
            "version: expected 1 to 64 letters, digits, '.', '+' or '-', got "
            "\"1234567890123456789012345678901234567890...\"");
    refused("{\"name\": \"w\", \"uuid\": \"not-a-uuid\", \"chain\": []}",
            "uuid: expected a UUID, got \"not-a-uuid\"");
    refused("{\"name\": \"w\", \"uuid\": 7, \"chain\": []}", "uuid: expected a string, got 7");
    refused("{\"name\": \"w\", \"description\": [], \"chain\": []}",
            "description: expected a string, got an array");
    step_refused("{\"name\": \"a\", \"task\": \"core.noop\", \"description\": false}",
                 "chain[0].description: expected a string, got false");
}

/* A step's queue: a literal name or a template, kept in the normalized document, shared
 * with its fallback; refused with its JSON path when it is no queue name or names what
 * the step cannot see. */
static void test_step_queue(void **state)
{
    (void)state;
    workflow_t *wf =
        parse_ok("{\"name\": \"w\", \"queue\": \"main\", \"chain\": ["
                 "{\"name\": \"a\", \"task\": \"core.noop\"},"
                 "{\"name\": \"b\", \"task\": \"core.noop\", \"queue\": \"server:${state.server}\","
                 " \"fallback\": {\"task\": \"core.noop\"}},"
                 "{\"name\": \"c\", \"task\": \"core.noop\", \"queue\": \"gpu\"}],"
                 " \"onerror\": [{\"name\": \"e\", \"task\": \"core.noop\","
                 " \"queue\": \"${steps.a.result.q}\"}]}");
    assert_null(wf->steps[WF_CHAIN][0].queue);
    assert_string_equal(wf->steps[WF_CHAIN][1].queue, "server:${state.server}");
    assert_ptr_equal(wf->steps[WF_CHAIN][1].fallback->queue, wf->steps[WF_CHAIN][1].queue);
    assert_string_equal(wf->steps[WF_CHAIN][2].queue, "gpu");
    assert_string_equal(wf->steps[WF_ONERROR][0].queue, "${steps.a.result.q}");
    json_t *b = json_array_get(json_object_get(wf->doc, "chain"), 1);
    assert_string_equal(json_string_value(json_object_get(b, "queue")), "server:${state.server}");
    workflow_free(wf);

    step_refused("{\"name\": \"a\", \"task\": \"core.noop\", \"queue\": \"GPU\"}",
                 "chain[0].queue: expected 1 to 64 of a-z, 0-9, '_', '-', ':' or '.', got \"GPU\"");
    step_refused("{\"name\": \"a\", \"task\": \"core.noop\", \"queue\": \"\"}",
                 "chain[0].queue: expected 1 to 64 of a-z, 0-9, '_', '-', ':' or '.', got \"\"");
    step_refused("{\"name\": \"a\", \"task\": \"core.noop\", \"queue\": 7}",
                 "chain[0].queue: expected a string, got 7");
    refused("{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"},"
            " {\"name\": \"b\", \"task\": \"core.noop\", \"queue\": \"q a\"}]}",
            "chain[1].queue: expected 1 to 64 of a-z, 0-9, '_', '-', ':' or '.', got \"q a\"");
    workflow_t *out = NULL;
    char err[512] = "";
    assert_int_equal(parse("{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": "
                           "\"core.noop\", \"queue\": \"${steps.b.result.q}\"},"
                           " {\"name\": \"b\", \"task\": \"core.noop\"}]}",
                           &out, err, sizeof err),
                     TERN_EINVAL);
    assert_non_null(strstr(err, "chain[0].queue"));
    assert_int_equal(parse("{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": "
                           "\"core.noop\", \"queue\": \"q-${error.code}\"}]}",
                           &out, err, sizeof err),
                     TERN_EINVAL);
    assert_non_null(strstr(err, "chain[0].queue"));
    assert_int_equal(parse("{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": "
                           "\"core.noop\", \"queue\": \"q-${params.x\"}]}",
                           &out, err, sizeof err),
                     TERN_EINVAL);
    assert_non_null(strstr(err, "chain[0].queue"));
    assert_null(out);
    /* A queue may name what an admission check found (where the instance lives), as
     * a step's args and holds may; a check the workflow does not have is refused. */
    workflow_t *adm = parse_ok("{\"name\": \"w\", \"admission\": [{\"name\": \"route\", "
                               "\"task\": \"core.noop\"}], \"chain\": [{\"name\": \"a\", "
                               "\"task\": \"core.noop\", \"queue\": "
                               "\"server:${admission.route.result.server_uuid}\"}]}");
    workflow_free(adm);
    refused("{\"name\": \"w\", \"admission\": [{\"name\": \"route\", \"task\": \"core.noop\"}], "
            "\"chain\": [{\"name\": \"a\", \"task\": \"core.noop\", \"queue\": "
            "\"server:${admission.nope.result.server_uuid}\"}]}",
            "chain[0].queue: ${admission.nope.result.server_uuid} names admission check "
            "\"nope\", which does not run before this");
}

static void test_workflow_timeout_queue(void **state)
{
    (void)state;
    workflow_t *wf = parse_ok("{\"name\": \"w\", \"timeout\": 0.5, \"queue\": \"long-jobs_2\","
                              " \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\","
                              " \"timeout\": 30}]}");
    assert_int_equal(wf->timeout_ms, 500);
    assert_string_equal(wf->queue, "long-jobs_2");
    assert_int_equal(wf->steps[WF_CHAIN][0].timeout_ms, 30000);
    assert_true(json_is_real(json_object_get(wf->doc, "timeout")));
    workflow_free(wf);

    refused("{\"name\": \"w\", \"timeout\": 0, \"chain\": []}",
            "timeout: expected a number of seconds greater than 0, got 0");
    refused("{\"name\": \"w\", \"timeout\": -1.5, \"chain\": []}",
            "timeout: expected a number of seconds greater than 0, got -1.5");
    refused("{\"name\": \"w\", \"timeout\": \"60\", \"chain\": []}",
            "timeout: expected a number of seconds greater than 0, got \"60\"");
    refused("{\"name\": \"w\", \"timeout\": 1e12, \"chain\": []}",
            "timeout: at most 31536000 seconds (365 days), got 1000000000000.0");
    step_refused("{\"name\": \"a\", \"task\": \"core.noop\", \"timeout\": null}",
                 "chain[0].timeout: expected a number of seconds greater than 0, got null");
    refused("{\"name\": \"w\", \"queue\": \"Fast\", \"chain\": []}",
            "queue: expected 1 to 64 of a-z, 0-9, '_', '-', ':' or '.', got \"Fast\"");
    refused("{\"name\": \"w\", \"queue\": \"\", \"chain\": []}",
            "queue: expected 1 to 64 of a-z, 0-9, '_', '-', ':' or '.', got \"\"");
    refused("{\"name\": \"w\", \"queue\": null, \"chain\": []}",
            "queue: expected a string, got null");
}

/* retry_from names a step of the chain; it is kept in the document. */
static void test_retry_from(void **state)
{
    (void)state;
    workflow_t *wf = parse_ok("{\"name\": \"w\", \"retry_from\": \"b\", \"chain\": ["
                              "{\"name\": \"a\", \"task\": \"core.noop\"},"
                              "{\"name\": \"b\", \"task\": \"core.noop\"}]}");
    assert_string_equal(wf->retry_from, "b");
    assert_string_equal(json_string_value(json_object_get(wf->doc, "retry_from")), "b");
    workflow_free(wf);
    wf = parse_ok("{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}]}");
    assert_null(wf->retry_from);
    assert_null(json_object_get(wf->doc, "retry_from"));
    workflow_free(wf);

    refused(
        "{\"name\": \"w\", \"retry_from\": \"z\", \"chain\": [{\"name\": \"a\","
        " \"task\": \"core.noop\"}], \"onerror\": [{\"name\": \"z\", \"task\": \"core.noop\"}]}",
        "retry_from: \"z\" is not the name of a step of the chain");
    refused("{\"name\": \"w\", \"retry_from\": 1, \"chain\": [{\"name\": \"a\", \"task\": "
            "\"core.noop\"}]}",
            "retry_from: expected a string, got 1");
}

/* A workflow's schedules: checked with their paths, kept normalized without the
 * workflow they imply, names unique. */
static void test_schedules(void **state)
{
    (void)state;
#define WITH_SCHEDULES(s)                                                                          \
    "{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}], \"schedules\": " s \
    "}"
    workflow_t *wf = parse_ok(WITH_SCHEDULES("[{\"name\": \"nightly\", \"cron\": \"0 3 * * *\", "
                                             "\"time_zone\": \"Europe/Paris\"}]"));
    char *text = json_dumps(json_object_get(wf->doc, "schedules"), JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(text, "[{\"cron\":\"0 3 * * *\",\"name\":\"nightly\",\"overlap\":\"skip\","
                              "\"params\":{},\"time_zone\":\"Europe/Paris\"}]");
    free(text);
    workflow_free(wf);
    refused(WITH_SCHEDULES("{}"), "schedules: expected an array, got an object");
    refused(WITH_SCHEDULES("[{\"name\": \"a\", \"cron\": \"0 25 * * *\"}]"),
            "schedules[0].cron: hour \"25\": 25 is out of range 0-23");
    refused(WITH_SCHEDULES("[{\"name\": \"a\", \"every\": \"1s\"}, {\"name\": \"a\", \"every\": "
                           "\"2s\"}]"),
            "schedules[1].name: \"a\" is the name of schedules[0] too");
    refused(WITH_SCHEDULES("[{\"every\": \"1s\"}]"),
            "schedules[0].name: required (it keeps the schedule one when the workflow is loaded "
            "again)");
#undef WITH_SCHEDULES
}

static void test_unknown_keys(void **state)
{
    (void)state;
    refused(
        "{\"name\": \"w\", \"chains\": [], \"chain\": []}",
        "chains: unknown key; a workflow has name, version, uuid, description, timeout, "
        "queue, holds, hold_events, admission, chain, onerror, oncancel, schedules and retry_from");
    step_refused("{\"name\": \"a\", \"task\": \"core.noop\", \"retries\": 3}",
                 "chain[0].retries: unknown key; a step has name, task, args, timeout, retry, "
                 "fallback, idempotent, isolate, holds, queue and description");
    step_refused("{\"name\": \"a\", \"task\": \"core.noop\","
                 " \"fallback\": {\"task\": \"core.log\", \"retry\": 2}}",
                 "chain[0].fallback.retry: unknown key; a fallback has task, args and timeout");
    step_refused("{\"name\": \"a\", \"task\": \"core.noop\", \"holds\": [{\"resource\": \"r\","
                 " \"count\": 2}]}",
                 "chain[0].holds[0].count: unknown key; a hold has resource and capacity");
}

static void test_body_refused(void **state)
{
    (void)state;
    step_refused("{\"name\": \"a\", \"body\": \"function (job, cb) { cb(); }\"}",
                 "chain[0].body: code in workflow definitions is not supported; name a task of "
                 "a loaded plugin (\"family.entry\")");
    step_refused("{\"name\": \"a\", \"task\": \"core.noop\","
                 " \"fallback\": {\"body\": \"function (err, job, cb) { cb(); }\"}}",
                 "chain[0].fallback.body: code in workflow definitions is not supported; name a "
                 "task of a loaded plugin (\"family.entry\")");
    step_refused("{\"name\": \"a\", \"task\": \"core.noop\","
                 " \"fallback\": \"function (err, job, cb) { cb(); }\"}",
                 "chain[0].fallback: code in workflow definitions is not supported; a fallback "
                 "is an object {\"task\": \"family.entry\", \"args\": {...}, \"timeout\": "
                 "seconds}");
    /* "body" at the top of a workflow is just an unknown key. */
    refused(
        "{\"name\": \"w\", \"body\": 1, \"chain\": []}",
        "body: unknown key; a workflow has name, version, uuid, description, timeout, "
        "queue, holds, hold_events, admission, chain, onerror, oncancel, schedules and retry_from");
}

/* ---- chains ---------------------------------------------------------------------- */

static void test_chains(void **state)
{
    (void)state;
    refused("{\"name\": \"w\"}", "chain: missing; a workflow needs a chain of steps");
    refused("{\"name\": \"w\", \"chain\": {}}", "chain: expected an array of steps, got an object");
    refused("{\"name\": \"w\", \"chain\": []}", "chain: empty; a workflow needs at least one step");
    refused("{\"name\": \"w\", \"chain\": [\"core.noop\"]}",
            "chain[0]: expected a step object, got \"core.noop\"");
    refused("{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}],"
            " \"onerror\": {}}",
            "onerror: expected an array of steps, got an object");
    refused("{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}],"
            " \"oncancel\": null}",
            "oncancel: expected an array of steps, got null");
    refused("{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}],"
            " \"oncancel\": [{\"name\": \"b\", \"task\": \"core.noop\"}, 5]}",
            "oncancel[1]: expected a step object, got 5");

    /* Empty onerror and oncancel are kept as written. */
    workflow_t *wf = parse_ok("{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\":"
                              " \"core.noop\"}], \"onerror\": [], \"oncancel\": []}");
    assert_int_equal(wf->n_steps[WF_ONERROR], 0);
    assert_int_equal(wf->n_steps[WF_ONCANCEL], 0);
    assert_true(json_is_array(json_object_get(wf->doc, "onerror")));
    assert_true(json_is_array(json_object_get(wf->doc, "oncancel")));
    workflow_free(wf);
}

/* Builds a workflow whose `key` chain has n noop steps. */
static char *with_n_steps(const char *key, size_t n)
{
    size_t cap = 64 + n * 48;
    char *text = xmalloc(cap);
    size_t len = (size_t)snprintf(text, cap, "{\"name\": \"w\", %s\"%s\": [",
                                  strcmp(key, "chain") != 0
                                      ? "\"chain\": [{\"name\": \"x\", \"task\": \"core.noop\"}], "
                                      : "",
                                  key);
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len,
                                "%s{\"name\": \"s%zu\", \"task\": \"core.noop\"}", i ? "," : "", i);
    snprintf(text + len, cap - len, "]}");
    return text;
}

static void test_step_limit(void **state)
{
    (void)state;
    char *text = with_n_steps("chain", WORKFLOW_MAX_STEPS);
    workflow_t *wf = parse_ok(text);
    assert_int_equal(wf->n_steps[WF_CHAIN], WORKFLOW_MAX_STEPS);
    workflow_free(wf);
    free(text);

    text = with_n_steps("chain", WORKFLOW_MAX_STEPS + 1);
    refused_code(text, TERN_E2BIG,
                 "chain: 1001 steps, over the limit of 1000 (WORKFLOW_MAX_STEPS)");
    free(text);
    text = with_n_steps("onerror", WORKFLOW_MAX_STEPS + 1);
    refused_code(text, TERN_E2BIG,
                 "onerror: 1001 steps, over the limit of 1000 (WORKFLOW_MAX_STEPS)");
    free(text);
}

static void test_text_limits_and_syntax(void **state)
{
    (void)state;
    workflow_t *wf = (workflow_t *)1;
    char err[512] = "";
    size_t big = WORKFLOW_MAX_BYTES + 1;
    char *text = xmalloc(big);
    memset(text, ' ', big);
    assert_int_equal(workflow_parse_text(text, big, NULL, NULL, &wf, err, sizeof err), TERN_E2BIG);
    assert_string_equal(err, "workflow: 1048577 bytes, over the limit of 1048576 bytes "
                             "(WORKFLOW_MAX_BYTES)");
    assert_null(wf);
    free(text);

    refused("{\"name\": \"w\",\n \"chain\": [1, 2,, 3]}",
            "line 2, column 17: unexpected token near ','");
    refused("{\"name\": \"w\", \"name\": \"v\", \"chain\": []}",
            "line 1, column 20: duplicate object key near '\"name\"'");
    refused("[1]", "workflow: expected an object, got an array");
    refused("", "line 1, column 0: '[' or '{' expected near end of file");

    /* Text need not be NUL-terminated. */
    char buf[sizeof MINIMAL + 8];
    memcpy(buf, MINIMAL, sizeof MINIMAL - 1);
    memcpy(buf + sizeof MINIMAL - 1, "garbage", 7);
    assert_int_equal(workflow_parse_text(buf, sizeof MINIMAL - 1, NULL, NULL, &wf, err, sizeof err),
                     0);
    workflow_free(wf);
    assert_int_equal(workflow_parse(NULL, NULL, NULL, &wf, err, sizeof err), TERN_EINVAL);
    assert_null(wf);
}

/* ---- steps ---------------------------------------------------------------------- */

static void test_step_names(void **state)
{
    (void)state;
    step_refused("{\"task\": \"core.noop\"}", "chain[0].name: missing; every step needs a name");
    step_refused("{\"name\": 1, \"task\": \"core.noop\"}",
                 "chain[0].name: expected a string, got 1");
    step_refused("{\"name\": \"a.b\", \"task\": \"core.noop\"}",
                 "chain[0].name: expected a step name (a letter or digit, then up to 127 "
                 "letters, digits, '_' or '-'; '.' is kept for \"<step>.fallback\"), got \"a.b\"");
    step_refused("{\"name\": \"_a\", \"task\": \"core.noop\"}",
                 "chain[0].name: expected a step name (a letter or digit, then up to 127 "
                 "letters, digits, '_' or '-'), got \"_a\"");
    refused("{\"name\": \"w\", \"chain\": [{\"name\": \"resize\", \"task\": \"core.noop\"},"
            " {\"name\": \"b\", \"task\": \"core.noop\"},"
            " {\"name\": \"resize\", \"task\": \"core.noop\"}]}",
            "chain[2].name: duplicate step name \"resize\" (first at chain[0])");
    refused("{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}],"
            " \"onerror\": [{\"name\": \"a\", \"task\": \"core.log\"}]}",
            "onerror[0].name: duplicate step name \"a\" (first at chain[0])");
    refused("{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}],"
            " \"onerror\": [{\"name\": \"e\", \"task\": \"core.log\"}],"
            " \"oncancel\": [{\"name\": \"c\", \"task\": \"core.log\"},"
            " {\"name\": \"e\", \"task\": \"core.log\"}]}",
            "oncancel[1].name: duplicate step name \"e\" (first at onerror[0])");
}

static void test_step_task(void **state)
{
    (void)state;
    step_refused("{\"name\": \"a\"}",
                 "chain[0].task: missing; name a task of a loaded plugin (\"family.entry\")");
    step_refused("{\"name\": \"a\", \"task\": [\"core.noop\"]}",
                 "chain[0].task: expected a string, got an array");
    static const char *const bad[] = {"core",       "core.",       ".noop",
                                      "Core.noop",  "core.Noop",   "1core.noop",
                                      "core.no-op", "core.noop.x", "core.noop "};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(bad); i++) {
        char step[128], msg[256];
        snprintf(step, sizeof step, "{\"name\": \"a\", \"task\": \"%s\"}", bad[i]);
        snprintf(msg, sizeof msg,
                 "chain[0].task: expected \"family.entry\" (each [a-z][a-z0-9_]*), got \"%s\"",
                 bad[i]);
        step_refused(step, msg);
    }
    /* The registry's refusal comes back as it is, with its code. */
    refused_code("{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}],"
                 " \"onerror\": [{\"name\": \"e\", \"task\": \"core.lgo\"}]}",
                 TERN_ENOENT, "onerror[0].task: unknown task \"core.lgo\"");
    refused_code("{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\","
                 " \"fallback\": {\"task\": \"core.nope\"}}]}",
                 TERN_ENOENT, "chain[0].fallback.task: unknown task \"core.nope\"");

    /* Without a checker any well-formed name passes. */
    workflow_t *wf = NULL;
    char err[512] = "";
    const char *text = "{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"x9.y_z\"}]}";
    assert_int_equal(workflow_parse_text(text, strlen(text), NULL, NULL, &wf, err, sizeof err), 0);
    workflow_free(wf);
}

/* A checker that refuses without writing a message still yields one. */
static int silent_refusal(void *data, const char *task, const json_t *args, const char *path,
                          char *err, size_t errlen)
{
    (void)data, (void)task, (void)args, (void)path, (void)err, (void)errlen;
    return 1;
}

static void test_check_called_for_every_task(void **state)
{
    (void)state;
    calls_t calls = {0};
    workflow_t *wf = NULL;
    char err[512] = "";
    assert_int_equal(workflow_parse_text(disk_resize, strlen(disk_resize), check_task, &calls, &wf,
                                         err, sizeof err),
                     0);
    /* The checker is given the step's path, as plugin_registry_check_task expects. */
    static const char *const want_paths[] = {"chain[0]", "chain[1]", "chain[1].fallback",
                                             "chain[2]", "onerror[0]"};
    static const char *const want_tasks[] = {"disk.check_resize", "disk.resize", "disk.verify_size",
                                             "disk.update_quota", "core.log"};
    size_t seen[TERN_ARRAY_SIZE(want_paths)] = {0};
    assert_int_equal(calls.n, TERN_ARRAY_SIZE(want_paths));
    for (size_t i = 0; i < calls.n; i++)
        for (size_t j = 0; j < TERN_ARRAY_SIZE(want_paths); j++)
            if (strcmp(calls.paths[i], want_paths[j]) == 0) {
                assert_string_equal(calls.tasks[i], want_tasks[j]);
                seen[j]++;
            }
    for (size_t j = 0; j < TERN_ARRAY_SIZE(want_paths); j++)
        assert_int_equal(seen[j], 1);
    workflow_free(wf);

    assert_int_equal(
        workflow_parse_text(MINIMAL, strlen(MINIMAL), silent_refusal, NULL, &wf, err, sizeof err),
        TERN_EINVAL);
    assert_string_equal(err, "chain[0].task: task \"core.noop\" refused");
}

static void test_step_args(void **state)
{
    (void)state;
    char *text = with_step("{\"name\": \"a\", \"task\": \"core.noop\", \"args\": [1, \"x\"]}");
    workflow_t *wf = parse_ok(text);
    free(text);
    assert_true(json_is_array(wf->steps[WF_CHAIN][0].args));
    workflow_free(wf);
    text = with_step("{\"name\": \"a\", \"task\": \"core.noop\", \"args\": null}");
    wf = parse_ok(text);
    free(text);
    assert_true(json_is_null(wf->steps[WF_CHAIN][0].args));
    workflow_free(wf);
    step_refused("{\"name\": \"a\", \"task\": \"core.noop\", \"args\": {\"x\": [\"${params.}\"]}}",
                 "chain[0].args.x[0]: ${params.} has an empty key in its name");
}

static void test_step_flags(void **state)
{
    (void)state;
    char *text = with_step("{\"name\": \"a\", \"task\": \"core.noop\", \"idempotent\": false,"
                           " \"isolate\": true, \"fallback\": {\"task\": \"core.log\"}}");
    workflow_t *wf = parse_ok(text);
    free(text);
    const wf_step_t *s = &wf->steps[WF_CHAIN][0];
    assert_false(s->idempotent);
    assert_true(s->isolate);
    assert_true(s->fallback->isolate);
    assert_true(s->fallback->idempotent);
    assert_int_equal(s->fallback->timeout_ms, 0);
    json_t *n = json_array_get(json_object_get(wf->doc, "chain"), 0);
    assert_true(json_is_false(json_object_get(n, "idempotent")));
    assert_true(json_is_true(json_object_get(n, "isolate")));
    workflow_free(wf);
    step_refused("{\"name\": \"a\", \"task\": \"core.noop\", \"idempotent\": \"no\"}",
                 "chain[0].idempotent: expected true or false, got \"no\"");
    step_refused("{\"name\": \"a\", \"task\": \"core.noop\", \"isolate\": 1}",
                 "chain[0].isolate: expected true or false, got 1");
}

static void test_step_retry(void **state)
{
    (void)state;
    refused("{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"},"
            " {\"name\": \"b\", \"task\": \"core.noop\", \"retry\": {\"initial_ms\": -5}}]}",
            "chain[1].retry.initial_ms: expected a positive integer, got -5");
    step_refused("{\"name\": \"a\", \"task\": \"core.noop\", \"retry\": \"3\"}",
                 "chain[0].retry: expected a number of attempts or a policy object, got \"3\"");
    step_refused("{\"name\": \"a\", \"task\": \"core.noop\", \"retry\": {\"mode\": 1}}",
                 "chain[0].retry.mode: unknown key (a retry policy has max_attempts, backoff, "
                 "initial_ms, max_ms, factor and jitter)");
}

static void test_fallback(void **state)
{
    (void)state;
    char *text = with_step("{\"name\": \"a\", \"task\": \"core.noop\", \"timeout\": 9,"
                           " \"fallback\": {\"task\": \"core.log\", \"timeout\": 2,"
                           " \"args\": {\"msg\": \"${error.code}\"}}}");
    workflow_t *wf = parse_ok(text);
    free(text);
    const wf_step_t *fb = wf->steps[WF_CHAIN][0].fallback;
    assert_string_equal(fb->name, "a.fallback");
    assert_int_equal(fb->timeout_ms, 2000);
    assert_string_equal(json_string_value(json_object_get(fb->args, "msg")), "${error.code}");
    workflow_free(wf);

    /* A name is accepted only when it is the one the normalized document carries. */
    text = with_step("{\"name\": \"a\", \"task\": \"core.noop\","
                     " \"fallback\": {\"name\": \"a.fallback\", \"task\": \"core.log\"}}");
    wf = parse_ok(text);
    free(text);
    workflow_free(wf);
    step_refused("{\"name\": \"a\", \"task\": \"core.noop\","
                 " \"fallback\": {\"name\": \"other\", \"task\": \"core.log\"}}",
                 "chain[0].fallback.name: a fallback is named after its step (\"a.fallback\"), "
                 "got \"other\"");
    step_refused("{\"name\": \"a\", \"task\": \"core.noop\", \"fallback\": {}}",
                 "chain[0].fallback.task: missing; name a task of a loaded plugin "
                 "(\"family.entry\")");
    step_refused("{\"name\": \"a\", \"task\": \"core.noop\", \"fallback\": [1]}",
                 "chain[0].fallback: expected an object {\"task\", \"args\", \"timeout\"}, got an "
                 "array");
    step_refused("{\"name\": \"a\", \"task\": \"core.noop\","
                 " \"fallback\": {\"task\": \"core.log\", \"timeout\": -1}}",
                 "chain[0].fallback.timeout: expected a number of seconds greater than 0, got -1");
}

/* ---- template roots -------------------------------------------------------------- */

static void test_template_roots(void **state)
{
    (void)state;
    /* Earlier steps, params, state and job are fine in the chain. */
    workflow_t *wf = parse_ok(
        "{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"},"
        " {\"name\": \"b\", \"task\": \"core.noop\", \"args\": {\"x\": \"${steps.a.result.x}"
        " ${params.p} ${state.s} ${job.uuid} ${job.target}\"}}],"
        " \"onerror\": [{\"name\": \"e1\", \"task\": \"core.log\", \"args\": {\"m\":"
        " \"${error.message} ${steps.b.result} ${steps.a.error.code}\"}},"
        " {\"name\": \"e2\", \"task\": \"core.log\", \"args\": {\"m\": \"${steps.e1.result}\"}}],"
        " \"oncancel\": [{\"name\": \"c1\", \"task\": \"core.log\", \"args\": {\"m\":"
        " \"${steps.b.result} ${error.code}\"}}]}");
    workflow_free(wf);

    refused(
        "{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\","
        " \"args\": {\"x\": \"${steps.b.result}\"}}, {\"name\": \"b\", \"task\": \"core.noop\"}]}",
        "chain[0].args.x: ${steps.b.result} names step \"b\", which does not run before "
        "this step");
    refused("{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\","
            " \"args\": {\"x\": \"${steps.a.result}\"}}]}",
            "chain[0].args.x: ${steps.a.result} names step \"a\", which does not run before "
            "this step");
    step_refused(
        "{\"name\": \"a\", \"task\": \"core.noop\", \"args\": {\"m\": \"${error.code}\"}}",
        "chain[0].args.m: ${error.code} uses error, which is not available here "
        "(available: params, state, job, steps, admission); error.* exists only in the args of "
        "onerror, oncancel and fallback steps");
    refused("{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}],"
            " \"onerror\": [{\"name\": \"e1\", \"task\": \"core.log\", \"args\": "
            "\"${steps.e2.result}\"},"
            " {\"name\": \"e2\", \"task\": \"core.log\"}]}",
            "onerror[0].args: ${steps.e2.result} names step \"e2\", which does not run before "
            "this step");
    refused("{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}],"
            " \"onerror\": [{\"name\": \"e1\", \"task\": \"core.log\"}],"
            " \"oncancel\": [{\"name\": \"c1\", \"task\": \"core.log\", \"args\": "
            "\"${steps.e1.result}\"}]}",
            "oncancel[0].args: ${steps.e1.result} names step \"e1\", which does not run before "
            "this step");
    /* A fallback sees the error and the steps before its own step, not its own step. */
    refused("{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"},"
            " {\"name\": \"b\", \"task\": \"core.noop\", \"fallback\": {\"task\": \"core.log\","
            " \"args\": [\"${error.message} ${steps.a.result}\", \"${steps.b.result}\"]}}]}",
            "chain[1].fallback.args[1]: ${steps.b.result} names step \"b\", which does not run "
            "before this step");
}

/* ---- holds ---------------------------------------------------------------------- */

static void test_holds(void **state)
{
    (void)state;
    workflow_t *wf = parse_ok(
        "{\"name\": \"w\", \"holds\": [\"vm:${params.vm}\", {\"resource\":"
        " \"migrations:${params.server}\", \"capacity\": 5}, {\"resource\": \"j:${job.target}\"}],"
        " \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}, {\"name\": \"b\", \"task\":"
        " \"core.noop\", \"holds\": [\"disk:${steps.a.result.disk} ${state.x}\"]}]}");
    assert_int_equal(wf->n_holds, 3);
    assert_string_equal(wf->holds[0].resource, "vm:${params.vm}");
    assert_int_equal(wf->holds[0].capacity, 1);
    assert_string_equal(wf->holds[1].resource, "migrations:${params.server}");
    assert_int_equal(wf->holds[1].capacity, 5);
    assert_int_equal(wf->holds[2].capacity, 1);
    assert_int_equal(wf->steps[WF_CHAIN][1].n_holds, 1);
    assert_string_equal(wf->steps[WF_CHAIN][1].holds[0].resource,
                        "disk:${steps.a.result.disk} ${state.x}");
    /* An object without capacity gets capacity 1 in the normalized document. */
    json_t *h2 = json_array_get(json_object_get(wf->doc, "holds"), 2);
    assert_int_equal(json_integer_value(json_object_get(h2, "capacity")), 1);
    workflow_free(wf);

    /* A capacity the job's inputs give, kept as its template in the model and the
     * normalized document; a step's may name earlier results as its resource may. */
    wf = parse_ok("{\"name\": \"w\", \"holds\": [{\"resource\": \"slot:${params.s}\","
                  " \"capacity\": \"${params.slots}\"}], \"chain\": [{\"name\": \"a\", \"task\":"
                  " \"core.noop\"}, {\"name\": \"b\", \"task\": \"core.noop\", \"holds\":"
                  " [{\"resource\": \"d\", \"capacity\": \"${steps.a.result.n}\"}]}]}");
    assert_string_equal(wf->holds[0].capacity_template, "${params.slots}");
    assert_string_equal(wf->steps[WF_CHAIN][1].holds[0].capacity_template, "${steps.a.result.n}");
    assert_null(wf->steps[WF_CHAIN][0].holds);
    h2 = json_array_get(json_object_get(wf->doc, "holds"), 0);
    assert_string_equal(json_string_value(json_object_get(h2, "capacity")), "${params.slots}");
    workflow_free(wf);

    refused("{\"name\": \"w\", \"holds\": \"vm\", \"chain\": []}",
            "holds: expected an array of resource names, got \"vm\"");
    refused("{\"name\": \"w\", \"holds\": [3], \"chain\": []}",
            "holds[0]: expected a resource name or {\"resource\": name, \"capacity\": n}, got 3");
    refused("{\"name\": \"w\", \"holds\": [\"\"], \"chain\": []}",
            "holds[0]: expected a resource name, got \"\"");
    refused("{\"name\": \"w\", \"holds\": [{\"capacity\": 2}], \"chain\": []}",
            "holds[0].resource: missing; a hold names a resource");
    refused("{\"name\": \"w\", \"holds\": [{\"resource\": 1}], \"chain\": []}",
            "holds[0].resource: expected a string, got 1");
    refused("{\"name\": \"w\", \"holds\": [{\"resource\": \"r\", \"capacity\": 0}], \"chain\": []}",
            "holds[0].capacity: expected an integer from 1 to 1000000, got 0");
    refused("{\"name\": \"w\", \"holds\": [{\"resource\": \"r\", \"capacity\": \"5\"}],"
            " \"chain\": []}",
            "holds[0].capacity: expected an integer from 1 to 1000000 or a template of one, "
            "got \"5\"");
    /* A templated capacity is checked as the resource's template is. */
    refused("{\"name\": \"w\", \"holds\": [{\"resource\": \"r\", \"capacity\": \"${params.n\"}],"
            " \"chain\": []}",
            "holds[0].capacity: ${params.n has no closing \"}\" (write \"$${\" for a literal "
            "\"${\")");
    refused("{\"name\": \"w\", \"holds\": [{\"resource\": \"r\", \"capacity\": \"${state.n}\"}],"
            " \"chain\": []}",
            "holds[0].capacity: ${state.n} uses state, which is not available here (available: "
            "params, job, admission)");
    refused("{\"name\": \"w\", \"holds\": [{\"resource\": \"r\", \"capacity\":"
            " \"${admission.quota.result.n}\"}], \"chain\": []}",
            "holds[0].capacity: ${admission.quota.result.n} names admission check \"quota\", "
            "which does not run before this");
    refused("{\"name\": \"w\", \"holds\": [{\"resource\": \"r\", \"capacity\": 2.5}],"
            " \"chain\": []}",
            "holds[0].capacity: expected an integer from 1 to 1000000, got 2.5");
    refused("{\"name\": \"w\", \"holds\": [\"vm:${state.vm}\"], \"chain\": []}",
            "holds[0]: ${state.vm} uses state, which is not available here (available: params, "
            "job, admission)");
    refused("{\"name\": \"w\", \"holds\": [{\"resource\": \"vm:${steps.a.result}\"}],"
            " \"chain\": []}",
            "holds[0].resource: ${steps.a.result} uses steps, which is not available here "
            "(available: params, job, admission)");
    refused("{\"name\": \"w\", \"holds\": [\"r:${params.a}\", \"x\", \"r:${params.a}\"],"
            " \"chain\": []}",
            "holds[2]: duplicate hold \"r:${params.a}\" (first at holds[0])");
    step_refused(
        "{\"name\": \"a\", \"task\": \"core.noop\", \"holds\": [\"${error.code}\"]}",
        "chain[0].holds[0]: ${error.code} uses error, which is not available here "
        "(available: params, state, job, steps, admission); error.* exists only in the args of "
        "onerror, oncancel and fallback steps");
    refused("{\"name\": \"w\", \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}],"
            " \"onerror\": [{\"name\": \"e\", \"task\": \"core.noop\", \"holds\":"
            " [\"${error.code}\"]}]}",
            "onerror[0].holds[0]: ${error.code} uses error, which is not available here "
            "(available: params, state, job, steps, admission); error.* exists only in the args of "
            "onerror, oncancel and fallback steps");
}

/* ---- admission checks ---------------------------------------------------------- */

/* A workflow with the admission list `checks` (JSON text) and one chain step. */
static char *with_admission(const char *checks, const char *step_args)
{
    return xasprintf("{\"name\": \"w\", \"admission\": %s, \"chain\": [{\"name\": \"a\", "
                     "\"task\": \"core.noop\", \"args\": %s}]}",
                     checks, step_args);
}

static void admission_refused(const char *checks, const char *step_args, const char *msg)
{
    char *text = with_admission(checks, step_args);
    refused(text, msg);
    free(text);
}

static void test_admission(void **state)
{
    (void)state;
    calls_t calls = {0};
    workflow_t *wf = NULL;
    char err[512] = "";
    char *text = with_admission(
        "[{\"name\": \"package\", \"task\": \"core.noop\", \"args\": {\"p\": \"${params.pkg}\", "
        "\"t\": \"${job.target}\", \"u\": \"${job.uuid}\"}, \"timeout\": 0.5},"
        " {\"name\": \"quota\", \"task\": \"core.log\", \"isolate\": true,"
        "  \"args\": {\"ram\": \"${admission.package.result.ram}\"}}]",
        "{\"m\": \"${admission.quota.result}\", \"p\": \"${admission.package.result.x.0}\"}");
    assert_int_equal(
        workflow_parse_text(text, strlen(text), check_task, &calls, &wf, err, sizeof err), 0);
    free(text);
    assert_int_equal(wf->n_admission, 2);
    assert_string_equal(wf->admission[0].name, "package");
    assert_string_equal(wf->admission[0].task, "core.noop");
    assert_int_equal(wf->admission[0].timeout_ms, 500);
    assert_false(wf->admission[0].isolate);
    assert_string_equal(json_string_value(json_object_get(wf->admission[0].args, "p")),
                        "${params.pkg}");
    assert_string_equal(wf->admission[1].name, "quota");
    assert_int_equal(wf->admission[1].timeout_ms, 0); /* the engine's default */
    assert_true(wf->admission[1].isolate);
    /* The task checker is asked about each check, with its path, before the steps. */
    assert_true(calls.n >= 3);
    assert_string_equal(calls.paths[0], "admission[0]");
    assert_string_equal(calls.paths[1], "admission[1]");
    assert_string_equal(calls.paths[2], "chain[0]");
    /* The normalized document keeps the checks, and parses again to the same. */
    const json_t *norm = json_object_get(wf->doc, "admission");
    assert_int_equal(json_array_size(norm), 2);
    assert_true(json_is_false(json_object_get(json_array_get(norm, 0), "isolate")));
    workflow_t *again = NULL;
    assert_int_equal(workflow_parse(wf->doc, check_task, NULL, &again, err, sizeof err), 0);
    assert_true(json_equal(again->doc, wf->doc));
    assert_int_equal(again->n_admission, 2);
    workflow_free(again);
    workflow_free(wf);

    /* No admission: no checks, and none in the document. */
    wf = parse_ok(MINIMAL);
    assert_int_equal(wf->n_admission, 0);
    assert_null(json_object_get(wf->doc, "admission"));
    workflow_free(wf);
    /* An empty list is no checks. */
    char *empty = with_admission("[]", "{}");
    wf = parse_ok(empty);
    free(empty);
    assert_int_equal(wf->n_admission, 0);
    workflow_free(wf);
}

static void test_admission_refused(void **state)
{
    (void)state;
    admission_refused("{}", "{}", "admission: expected an array of checks, got an object");
    admission_refused("[1]", "{}",
                      "admission[0]: expected a check {\"name\", \"task\", \"args\", \"timeout\"}, "
                      "got 1");
    admission_refused("[{\"name\": \"a\", \"task\": \"core.noop\", \"retry\": 3}]", "{}",
                      "admission[0].retry: unknown key; an admission check has name, task, args, "
                      "timeout, isolate and description");
    admission_refused("[{\"task\": \"core.noop\"}]", "{}",
                      "admission[0].name: missing; every admission check needs a name");
    admission_refused("[{\"name\": \"a.b\", \"task\": \"core.noop\"}]", "{}",
                      "admission[0].name: expected a check name (a letter or digit, then up to "
                      "127 letters, digits, '_' or '-'), got \"a.b\"");
    admission_refused("[{\"name\": \"a\", \"task\": \"core.noop\"},"
                      " {\"name\": \"a\", \"task\": \"core.log\"}]",
                      "{}",
                      "admission[1].name: duplicate admission check name \"a\" (first at "
                      "admission[0])");
    admission_refused("[{\"name\": \"a\"}]", "{}",
                      "admission[0].task: missing; name a task of a loaded plugin "
                      "(\"family.entry\")");
    refused_code("{\"name\": \"w\", \"admission\": [{\"name\": \"a\", \"task\": \"core.noop\"},"
                 " {\"name\": \"b\", \"task\": \"x.y\"}],"
                 " \"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}]}",
                 TERN_ENOENT, "admission[1].task: unknown task \"x.y\"");
    /* Timeouts: seconds, more than 0, at most a minute. */
    admission_refused("[{\"name\": \"a\", \"task\": \"core.noop\", \"timeout\": 0}]", "{}",
                      "admission[0].timeout: expected a number of seconds greater than 0 and at "
                      "most 60 (a check holds its create's answer), got 0");
    admission_refused("[{\"name\": \"a\", \"task\": \"core.noop\", \"timeout\": 61}]", "{}",
                      "admission[0].timeout: expected a number of seconds greater than 0 and at "
                      "most 60 (a check holds its create's answer), got 61");
    admission_refused("[{\"name\": \"a\", \"task\": \"core.noop\", \"timeout\": \"2\"}]", "{}",
                      "admission[0].timeout: expected a number of seconds greater than 0 and at "
                      "most 60 (a check holds its create's answer), got \"2\"");
    admission_refused("[{\"name\": \"a\", \"task\": \"core.noop\", \"isolate\": 1}]", "{}",
                      "admission[0].isolate: expected true or false, got 1");
    /* Templates: params, job and the checks before; no steps, state or error. */
    admission_refused("[{\"name\": \"a\", \"task\": \"core.noop\", \"args\": {\"x\": "
                      "\"${steps.a.result}\"}}]",
                      "{}",
                      "admission[0].args.x: ${steps.a.result} uses steps, which is not available "
                      "here (available: params, job, admission)");
    admission_refused("[{\"name\": \"a\", \"task\": \"core.noop\", \"args\": {\"x\": "
                      "\"${state.s}\"}}]",
                      "{}",
                      "admission[0].args.x: ${state.s} uses state, which is not available here "
                      "(available: params, job, admission)");
    admission_refused("[{\"name\": \"a\", \"task\": \"core.noop\", \"args\": {\"x\": "
                      "\"${admission.b.result}\"}}, {\"name\": \"b\", \"task\": \"core.noop\"}]",
                      "{}",
                      "admission[0].args.x: ${admission.b.result} names admission check \"b\", "
                      "which does not run before this");
    admission_refused("[{\"name\": \"a\", \"task\": \"core.noop\", \"args\": {\"x\": "
                      "\"${admission.a.result}\"}}]",
                      "{}",
                      "admission[0].args.x: ${admission.a.result} names admission check \"a\", "
                      "which does not run before this");
    admission_refused("[{\"name\": \"a\", \"task\": \"core.noop\"}]",
                      "{\"x\": \"${admission.a.error}\"}",
                      "chain[0].args.x: ${admission.a.error} must name admission.<check>.result, "
                      "with an optional path below");
    admission_refused("[{\"name\": \"a\", \"task\": \"core.noop\"}]",
                      "{\"x\": \"${admission.nope.result}\"}",
                      "chain[0].args.x: ${admission.nope.result} names admission check \"nope\", "
                      "which does not run before this");
    /* A workflow without checks names none. */
    step_refused("{\"name\": \"a\", \"task\": \"core.noop\", \"args\": {\"x\": "
                 "\"${admission.a.result}\"}}",
                 "chain[0].args.x: ${admission.a.result} names admission check \"a\", which "
                 "does not run before this");
    /* The limit on checks. */
    char *many = xstrdup("[");
    for (int i = 0; i <= WORKFLOW_MAX_ADMISSION; i++) {
        char *next = xasprintf("%s%s{\"name\": \"c%d\", \"task\": \"core.noop\"}", many,
                               i > 0 ? ", " : "", i);
        free(many);
        many = next;
    }
    char *closed = xasprintf("%s]", many);
    free(many);
    char *text = with_admission(closed, "{}");
    free(closed);
    refused_code(text, TERN_E2BIG,
                 "admission: 17 checks, over the limit of 16 (WORKFLOW_MAX_ADMISSION)");
    free(text);
}

static void test_holds_limit(void **state)
{
    (void)state;
    char holds[2048] = "";
    size_t len = 0;
    for (int i = 0; i < WORKFLOW_MAX_HOLDS + 1; i++)
        len += (size_t)snprintf(holds + len, sizeof holds - len, "%s\"r%d\"", i ? "," : "", i);
    char *text = xasprintf("{\"name\": \"w\", \"holds\": [%s], \"chain\": []}", holds);
    refused_code(text, TERN_E2BIG, "holds: 33 holds, over the limit of 32 (WORKFLOW_MAX_HOLDS)");
    free(text);
    char *step = xasprintf("{\"name\": \"a\", \"task\": \"core.noop\", \"holds\": [%s]}", holds);
    text = with_step(step);
    refused_code(text, TERN_E2BIG,
                 "chain[0].holds: 33 holds, over the limit of 32 (WORKFLOW_MAX_HOLDS)");
    free(text);
    free(step);

    /* Exactly the limit is fine. */
    holds[strlen(holds) - strlen(",\"r32\"")] = '\0';
    text = xasprintf("{\"name\": \"w\", \"holds\": [%s], \"chain\": [{\"name\": \"a\", \"task\":"
                     " \"core.noop\"}]}",
                     holds);
    workflow_t *wf = parse_ok(text);
    assert_int_equal(wf->n_holds, WORKFLOW_MAX_HOLDS);
    workflow_free(wf);
    free(text);
}

/* ---- the shipped workflows ------------------------------------------------------ */

/* Accepts only the tasks of the core plugin, with the arguments they take. */
static int check_core_task(void *data, const char *task, const json_t *args, const char *path,
                           char *err, size_t errlen)
{
    (void)data;
    const char *need = NULL;
    if (strcmp(task, "core.noop") == 0)
        return 0;
    if (strcmp(task, "core.sleep") == 0)
        need = "ms";
    else if (strcmp(task, "core.fail") == 0)
        need = "code";
    else if (strcmp(task, "core.set_state") == 0)
        need = "values";
    else if (strcmp(task, "core.log") == 0)
        need = "msg";
    else
        return err_set(err, errlen, TERN_ENOENT, "%s: not a core task: \"%s\"", path, task);
    if (json_object_get(args, need) == NULL)
        return err_set(err, errlen, TERN_EINVAL, "%s: %s needs args.%s", path, task, need);
    return 0;
}

/* Parses a file of the workflows directory with the given task check. */
static workflow_t *load_shipped_with(const char *file, workflow_task_check_fn check)
{
    char *path = xasprintf("%s/%s", workflows_dir, file);
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        fail_msg("cannot open %s", path);
    char *buf = xmalloc(WORKFLOW_MAX_BYTES + 1);
    size_t n = fread(buf, 1, WORKFLOW_MAX_BYTES + 1, fp);
    fclose(fp);
    workflow_t *wf = NULL;
    char err[512] = "";
    int rc = workflow_parse_text(buf, n, check, NULL, &wf, err, sizeof err);
    free(buf);
    if (rc != 0)
        fail_msg("%s: %s", path, err);
    free(path);
    return wf;
}

/* The demo and benchmark workflows run with the core plugin alone. */
static workflow_t *load_shipped(const char *file)
{
    return load_shipped_with(file, check_core_task);
}

/* Every file ships valid; tasks of other plugins are checked by the tests of those
 * plugins, so here any well-formed "family.entry" is accepted. */
static void test_shipped_workflows_all_parse(void **state)
{
    (void)state;
    assert_non_null(workflows_dir);
    DIR *d = opendir(workflows_dir);
    if (d == NULL)
        fail_msg("cannot open the workflows directory %s", workflows_dir);
    size_t count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        workflow_t *wf = load_shipped_with(e->d_name, NULL);
        assert_true(wf->n_steps[WF_CHAIN] > 0);
        workflow_free(wf);
        count++;
    }
    closedir(d);
    assert_true(count >= 4);
}

static void test_shipped_hello(void **state)
{
    (void)state;
    workflow_t *wf = load_shipped("hello.json");
    assert_int_equal(wf->n_steps[WF_CHAIN], 4);
    assert_int_equal(wf->n_steps[WF_ONERROR], 1);
    assert_string_equal(wf->steps[WF_CHAIN][2].task, "core.sleep");
    assert_int_equal(json_integer_value(json_object_get(wf->steps[WF_CHAIN][2].args, "ms")), 200);

    /* The greeting falls back to "world" and takes params.who when given. */
    char err[256] = "";
    template_scope_t sc = {0};
    json_t *got = template_expand(wf->steps[WF_CHAIN][0].args, "args", &sc, err, sizeof err);
    assert_non_null(got);
    assert_string_equal(json_string_value(json_object_get(got, "msg")), "hello, world");
    json_decref(got);
    json_t *params = json_pack("{s:s}", "who", "ops");
    sc.params = params;
    got = template_expand(wf->steps[WF_CHAIN][0].args, "args", &sc, err, sizeof err);
    assert_string_equal(json_string_value(json_object_get(got, "msg")), "hello, ops");
    json_decref(got);

    /* The report reads the state and a previous step. */
    json_t *st = json_pack("{s:s}", "greeted", "ops");
    json_t *steps = json_pack("{s:{s:{s:i}}}", "pause", "result", "slept_ms", 200);
    json_t *job = json_pack("{s:s, s:s}", "uuid", "u-1", "workflow", "hello");
    sc.state = st;
    sc.steps = steps;
    sc.job = job;
    got = template_expand(wf->steps[WF_CHAIN][3].args, "args", &sc, err, sizeof err);
    if (got == NULL)
        fail_msg("%s", err);
    assert_string_equal(json_string_value(json_object_get(got, "msg")),
                        "greeted ops (job u-1), then slept 200 ms");
    json_decref(got);
    json_decref(job);
    json_decref(steps);
    json_decref(st);
    json_decref(params);
    workflow_free(wf);
}

static void test_shipped_retry_demo(void **state)
{
    (void)state;
    workflow_t *wf = load_shipped("retry-demo.json");
    const wf_step_t *s = &wf->steps[WF_CHAIN][0];
    assert_string_equal(s->task, "core.fail");
    assert_true(s->retry.max_attempts > 1);
    assert_non_null(s->fallback);
    assert_string_equal(s->fallback->task, "core.log");
    workflow_free(wf);
}

static void test_shipped_noops(void **state)
{
    (void)state;
    workflow_t *wf = load_shipped("noop-1.json");
    assert_int_equal(wf->n_steps[WF_CHAIN], 1);
    assert_string_equal(wf->steps[WF_CHAIN][0].task, "core.noop");
    workflow_free(wf);
    wf = load_shipped("noop-10.json");
    assert_int_equal(wf->n_steps[WF_CHAIN], 10);
    for (size_t i = 0; i < 10; i++)
        assert_string_equal(wf->steps[WF_CHAIN][i].task, "core.noop");
    workflow_free(wf);
}

/* ---- the shipped plugins' argument ranges ------------------------------------------- */

/* The core plugin's init does not call the host. */
static const tern_host empty_host = {
    .size = sizeof(tern_host),
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
};

/* Parses a one-step workflow of `task` with `args` (JSON text) against the real
 * plugins; returns the code and the message in err. */
static int parse_with_plugins(plugin_registry_t *reg, const char *task, const char *args, char *err,
                              size_t errlen)
{
    char *text = xasprintf("{\"name\": \"w\", \"chain\": [{\"name\": \"s\", \"task\": \"%s\","
                           " \"args\": %s}]}",
                           task, args);
    workflow_t *wf = NULL;
    err[0] = '\0';
    int rc =
        workflow_parse_text(text, strlen(text), plugin_registry_check_task, reg, &wf, err, errlen);
    workflow_free(wf);
    free(text);
    return rc;
}

/* A literal out of its task's range is refused when the workflow is stored, with the
 * argument's path; a template is left to the runner's check after expansion. */
static void test_core_argument_ranges(void **state)
{
    (void)state;
    assert_non_null(plugins_dir);
    char err[512];
    plugin_registry_t *reg = plugin_registry_new(plugins_dir, &empty_host, err, sizeof err);
    if (reg == NULL)
        fail_msg("%s", err);
    const char *const plugins[] = {"core.so", "http.so", "exec.so"};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(plugins); i++)
        if (plugin_registry_load(reg, plugins[i], NULL, err, sizeof err) != 0)
            fail_msg("%s", err);

    assert_int_equal(parse_with_plugins(reg, "core.sleep", "{\"ms\": -1}", err, sizeof err),
                     TERN_EINVAL);
    assert_string_equal(err, "chain[0].args.ms: expected an integer from 0 to 86400000, got -1");
    assert_int_equal(
        parse_with_plugins(reg, "core.sleep", "{\"ms\": 4611686018427387904}", err, sizeof err),
        TERN_EINVAL);
    assert_string_equal(err, "chain[0].args.ms: expected an integer from 0 to 86400000, got "
                             "4611686018427387904");
    assert_int_equal(parse_with_plugins(reg, "core.sleep", "{\"ms\": 86400000}", err, sizeof err),
                     0);
    assert_int_equal(
        parse_with_plugins(reg, "core.sleep", "{\"ms\": \"${params.ms}\"}", err, sizeof err), 0);
    assert_int_equal(parse_with_plugins(reg, "http.request",
                                        "{\"url\": \"http://x/\", \"timeout_ms\": 0}", err,
                                        sizeof err),
                     TERN_EINVAL);
    assert_string_equal(err, "chain[0].args.timeout_ms: expected an integer from 1 to "
                             "31536000000, got 0");
    assert_int_equal(parse_with_plugins(reg, "exec.run",
                                        "{\"argv\": [\"true\"], \"tail_bytes\": 1048577}", err,
                                        sizeof err),
                     TERN_EINVAL);
    assert_string_equal(err, "chain[0].args.tail_bytes: expected an integer from 0 to 1048576, got "
                             "1048577");

    /* After expansion the runner refuses what the template became. */
    json_t *args = json_pack("{s:i}", "ms", -1);
    assert_int_equal(
        plugin_registry_check_expanded(reg, "core.sleep", args, "chain[0]", err, sizeof err),
        TERN_EINVAL);
    assert_string_equal(err, "chain[0].args.ms: expected an integer from 0 to 86400000, got -1");
    json_decref(args);
    plugin_registry_free(reg);
}

int main(int argc, char **argv)
{
    workflows_dir = argc > 1 ? argv[1] : NULL;
    plugins_dir = argc > 2 ? argv[2] : NULL;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minimal_defaults),
        cmocka_unit_test(test_step_get_and_phase_names),
        cmocka_unit_test(test_design_example),
        cmocka_unit_test(test_retry_count_normalized),
        cmocka_unit_test(test_normalized_reparses),
        cmocka_unit_test(test_doc_is_a_deep_copy),
        cmocka_unit_test(test_workflow_name),
        cmocka_unit_test(test_workflow_version_uuid_description),
        cmocka_unit_test(test_workflow_timeout_queue),
        cmocka_unit_test(test_step_queue),
        cmocka_unit_test(test_retry_from),
        cmocka_unit_test(test_unknown_keys),
        cmocka_unit_test(test_schedules),
        cmocka_unit_test(test_body_refused),
        cmocka_unit_test(test_chains),
        cmocka_unit_test(test_step_limit),
        cmocka_unit_test(test_text_limits_and_syntax),
        cmocka_unit_test(test_step_names),
        cmocka_unit_test(test_step_task),
        cmocka_unit_test(test_check_called_for_every_task),
        cmocka_unit_test(test_step_args),
        cmocka_unit_test(test_step_flags),
        cmocka_unit_test(test_step_retry),
        cmocka_unit_test(test_fallback),
        cmocka_unit_test(test_template_roots),
        cmocka_unit_test(test_holds),
        cmocka_unit_test(test_holds_limit),
        cmocka_unit_test(test_admission),
        cmocka_unit_test(test_admission_refused),
        cmocka_unit_test(test_shipped_workflows_all_parse),
        cmocka_unit_test(test_shipped_hello),
        cmocka_unit_test(test_shipped_retry_demo),
        cmocka_unit_test(test_shipped_noops),
        cmocka_unit_test(test_core_argument_ranges),
    };
    int failures = cmocka_run_group_tests_name("workflow", tests, NULL, NULL);
    return failures == 0 ? 0 : 1;
}
