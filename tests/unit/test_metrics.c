/*
 * test_metrics.c -- the Prometheus text of GET /metrics: process-local counters and
 * histograms, the gauges read from Redis, label escaping, and that every line is valid
 * text format 0.0.4 (a scraper rejects the whole page for one bad line).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/metrics.h"

static int reset(void **state)
{
    (void)state;
    metrics_reset();
    return 0;
}

static void assert_has(const char *text, const char *line)
{
    if (strstr(text, line) == NULL)
        fail_msg("missing from the page: %s", line);
}

/* Every line is "# HELP name text", "# TYPE name kind" or "name{labels} value", each
 * family is typed once, and samples follow their TYPE line. */
static void assert_valid_text(const char *text)
{
    char types[128][96];
    size_t ntypes = 0;
    const char *p = text;
    int lineno = 0;
    while (*p) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl); /* the page ends with a newline */
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(nl - p), p);
        lineno++;
        if (strncmp(line, "# TYPE ", 7) == 0) {
            char name[96], kind[32];
            assert_int_equal(sscanf(line + 7, "%95s %31s", name, kind), 2);
            for (size_t i = 0; i < ntypes; i++)
                if (strcmp(types[i], name) == 0)
                    fail_msg("line %d: %s typed twice", lineno, name);
            assert_true(strcmp(kind, "counter") == 0 || strcmp(kind, "gauge") == 0 ||
                        strcmp(kind, "histogram") == 0);
            snprintf(types[ntypes++], sizeof types[0], "%s", name);
        } else if (strncmp(line, "# HELP ", 7) == 0) {
            assert_true(strlen(line) > 8);
        } else {
            /* name[{labels}] value */
            size_t i = 0;
            while (isalnum((unsigned char)line[i]) || line[i] == '_' || line[i] == ':')
                i++;
            if (i == 0)
                fail_msg("line %d: no metric name: %s", lineno, line);
            char name[96];
            snprintf(name, sizeof name, "%.*s", (int)i, line);
            bool typed = false;
            for (size_t t = 0; t < ntypes && !typed; t++) {
                size_t n = strlen(types[t]);
                typed = strncmp(name, types[t], n) == 0 &&
                        (name[n] == '\0' || strcmp(name + n, "_bucket") == 0 ||
                         strcmp(name + n, "_sum") == 0 || strcmp(name + n, "_count") == 0);
            }
            if (!typed)
                fail_msg("line %d: %s has no TYPE before it", lineno, name);
            if (line[i] == '{') {
                /* label="value" pairs; a quote inside a value is escaped */
                i++;
                while (line[i] != '}') {
                    while (isalnum((unsigned char)line[i]) || line[i] == '_')
                        i++;
                    if (line[i] != '=' || line[i + 1] != '"')
                        fail_msg("line %d: bad label: %s", lineno, line);
                    i += 2;
                    while (line[i] != '"') {
                        if (line[i] == '\0')
                            fail_msg("line %d: unterminated label: %s", lineno, line);
                        i += line[i] == '\\' ? 2 : 1;
                    }
                    i++;
                    if (line[i] == ',')
                        i++;
                    else if (line[i] != '}')
                        fail_msg("line %d: bad label list: %s", lineno, line);
                }
                i++;
            }
            if (line[i] != ' ')
                fail_msg("line %d: no value: %s", lineno, line);
            char *end;
            strtod(line + i + 1, &end);
            if (end == line + i + 1 || *end != '\0')
                fail_msg("line %d: value is not a number: %s", lineno, line);
        }
        p = nl + 1;
    }
}

static void test_http_and_steps(void **state)
{
    (void)state;
    metrics_http_observe("/jobs/:uuid", "GET", 200, 0.003);
    metrics_http_observe("/jobs/:uuid", "GET", 200, 0.2);
    metrics_http_observe("/jobs", "POST", 409, 0.0005);
    metrics_step_observe("core.sleep", "succeeded", 1.5);
    metrics_step_observe("core.fail", "failed", 0.002);
    metrics_retry_observe("core.fail");
    metrics_retry_observe("core.fail");
    char *text = metrics_render();
    assert_has(text,
               "tern_http_requests_total{route=\"/jobs/:uuid\",method=\"GET\",status=\"200\"} 2\n");
    assert_has(text,
               "tern_http_requests_total{route=\"/jobs\",method=\"POST\",status=\"409\"} 1\n");
    /* Buckets are cumulative: 0.003 is above 0.001 and within 0.005. */
    assert_has(text,
               "tern_http_request_duration_seconds_bucket{route=\"/jobs/:uuid\",method=\"GET\","
               "status=\"200\",le=\"0.001\"} 0\n");
    assert_has(text,
               "tern_http_request_duration_seconds_bucket{route=\"/jobs/:uuid\",method=\"GET\","
               "status=\"200\",le=\"0.005\"} 1\n");
    assert_has(text,
               "tern_http_request_duration_seconds_bucket{route=\"/jobs/:uuid\",method=\"GET\","
               "status=\"200\",le=\"+Inf\"} 2\n");
    assert_has(text,
               "tern_step_duration_seconds_count{task=\"core.sleep\",status=\"succeeded\"} 1\n");
    assert_has(
        text,
        "tern_step_duration_seconds_sum{task=\"core.sleep\",status=\"succeeded\"} 1.500000\n");
    assert_has(text, "tern_step_duration_seconds_bucket{task=\"core.sleep\",status=\"succeeded\","
                     "le=\"1\"} 0\n");
    assert_has(text, "tern_step_duration_seconds_bucket{task=\"core.sleep\",status=\"succeeded\","
                     "le=\"2.5\"} 1\n");
    assert_has(text, "tern_step_retries_total{task=\"core.fail\"} 2\n");
    assert_valid_text(text);
    free(text);
}

static void test_postbacks_and_streams(void **state)
{
    (void)state;
    metrics_postback_observe("delivered");
    metrics_postback_observe("failed");
    metrics_postback_observe("failed");
    metrics_postback_observe("gave_up");
    metrics_postback_observe("nonsense"); /* not a series: ignored */
    metrics_streams_add(1);
    metrics_streams_add(1);
    metrics_streams_add(-1);
    assert_int_equal(metrics_streams_open(), 1);
    char *text = metrics_render();
    assert_has(text, "tern_postback_attempts_total{outcome=\"delivered\"} 1\n");
    assert_has(text, "tern_postback_attempts_total{outcome=\"failed\"} 2\n");
    assert_has(text, "tern_postback_attempts_total{outcome=\"gave_up\"} 1\n");
    assert_has(text, "tern_event_streams_open 1\n");
    assert_null(strstr(text, "nonsense"));
    assert_valid_text(text);
    free(text);
}

static void test_labels_escaped(void **state)
{
    (void)state;
    metrics_step_observe("odd\"task\\with\nnewline", "failed", 0.01);
    char *text = metrics_render();
    assert_has(text, "task=\"odd\\\"task\\\\with\\nnewline\"");
    assert_valid_text(text);
    free(text);
}

static void test_full_page_with_redis_gauges(void **state)
{
    (void)state;
    json_t *store = json_pack("{s:{s:i, s:i, s:i}, s:i, s:i, s:{s:i, s:i}, s:i, s:i, s:i, s:i}",
                              "jobs", "queued", 3, "running", 2, "succeeded", 40, "jobs_total", 45,
                              "delayed", 4, "queues", "default", 3, "long\"runs", 0, "runners", 2,
                              "in_flight", 2, "postbacks_pending", 5, "postbacks_in_flight", 1);
    metrics_http_observe("/metrics", "GET", 200, 0.001);
    char *text = metrics_render_full(store, true, 250);
    assert_has(text, "tern_redis_up 1\n");
    assert_has(text, "tern_redis_rtt_seconds 0.000250\n");
    assert_has(text, "tern_jobs{execution=\"queued\"} 3\n");
    assert_has(text, "tern_jobs{execution=\"succeeded\"} 40\n");
    assert_has(text, "tern_jobs_stored 45\n");
    assert_has(text, "tern_queue_depth{queue=\"default\"} 3\n");
    assert_has(text, "tern_queue_depth{queue=\"long\\\"runs\"} 0\n");
    assert_has(text, "tern_jobs_delayed 4\n");
    assert_has(text, "tern_jobs_in_flight 2\n");
    assert_has(text, "tern_runners 2\n");
    assert_has(text, "tern_postbacks_pending 5\n");
    assert_has(text, "tern_postbacks_in_flight 1\n");
    /* The process's own metrics follow. */
    assert_has(text,
               "tern_http_requests_total{route=\"/metrics\",method=\"GET\",status=\"200\"} 1\n");
    assert_valid_text(text);
    free(text);
    json_decref(store);
}

static void test_full_page_without_redis(void **state)
{
    (void)state;
    char *text = metrics_render_full(NULL, false, 0);
    assert_has(text, "tern_redis_up 0\n");
    /* No made-up zeros for what could not be read. */
    assert_null(strstr(text, "tern_jobs{"));
    assert_null(strstr(text, "tern_queue_depth"));
    assert_has(text, "tern_event_streams_open 0\n");
    assert_valid_text(text);
    free(text);
}

static void test_many_series_fold_into_other(void **state)
{
    (void)state;
    char task[64];
    for (int i = 0; i < 300; i++) {
        snprintf(task, sizeof task, "fam.task%d", i);
        metrics_step_observe(task, "succeeded", 0.001);
    }
    char *text = metrics_render();
    assert_has(text,
               "tern_step_duration_seconds_count{task=\"fam.task0\",status=\"succeeded\"} 1\n");
    /* Past the table's capacity, new series are counted under "other". */
    assert_has(text, "task=\"other\",status=\"other\"");
    assert_null(strstr(text, "fam.task299\""));
    assert_valid_text(text);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_http_and_steps, reset),
        cmocka_unit_test_setup(test_postbacks_and_streams, reset),
        cmocka_unit_test_setup(test_labels_escaped, reset),
        cmocka_unit_test_setup(test_full_page_with_redis_gauges, reset),
        cmocka_unit_test_setup(test_full_page_without_redis, reset),
        cmocka_unit_test_setup(test_many_series_fold_into_other, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL) == 0 ? 0 : 1;
}
