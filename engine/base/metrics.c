/*
 * metrics.c -- fixed-size tables of counters and histograms; see metrics.h. Series are
 * few (routes x methods x statuses, tasks x outcomes), so a linear table is enough;
 * past its capacity new series are counted under an "other" label instead of growing
 * memory without bound.
 *
 * Label values are escaped as the text format asks (backslash, double quote and
 * newline), because task names and queue names come from operators' documents.
 */
#include "base/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

#define MAX_SERIES 256
#define NBUCKETS   12

static const double bucket_bounds[NBUCKETS] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1,
                                               0.25,  0.5,   1.0,  2.5,   10.0, 60.0};

typedef struct histo {
    char a[96], b[32];
    int code;
    unsigned long long buckets[NBUCKETS];
    unsigned long long count;
    double sum;
} histo_t;

static histo_t http_series[MAX_SERIES];
static size_t n_http;
static histo_t step_series[MAX_SERIES];
static size_t n_step;
static histo_t retry_series[MAX_SERIES]; /* only `count` is used */
static size_t n_retry;

static const char *const postback_outcomes[] = {"delivered", "failed", "gave_up"};
static unsigned long long postback_counts[3];
static long streams_open;

static histo_t *series(histo_t *table, size_t *n, const char *a, const char *b, int code)
{
    for (size_t i = 0; i < *n; i++)
        if (table[i].code == code && strcmp(table[i].a, a) == 0 && strcmp(table[i].b, b) == 0)
            return &table[i];
    if (*n == MAX_SERIES) {
        /* Full: fold into the last series, renamed "other". */
        histo_t *h = &table[MAX_SERIES - 1];
        snprintf(h->a, sizeof h->a, "other");
        snprintf(h->b, sizeof h->b, "other");
        h->code = 0;
        return h;
    }
    histo_t *h = &table[(*n)++];
    memset(h, 0, sizeof *h);
    snprintf(h->a, sizeof h->a, "%s", a);
    snprintf(h->b, sizeof h->b, "%s", b);
    h->code = code;
    return h;
}

static void observe(histo_t *h, double seconds)
{
    for (size_t i = 0; i < NBUCKETS; i++)
        if (seconds <= bucket_bounds[i])
            h->buckets[i]++;
    h->count++;
    h->sum += seconds;
}

void metrics_http_observe(const char *route, const char *method, int status, double seconds)
{
    observe(series(http_series, &n_http, route, method, status), seconds);
}

void metrics_step_observe(const char *task, const char *status, double seconds)
{
    observe(series(step_series, &n_step, task, status, 0), seconds);
}

void metrics_retry_observe(const char *task)
{
    series(retry_series, &n_retry, task, "", 0)->count++;
}

void metrics_postback_observe(const char *outcome)
{
    for (size_t i = 0; i < TERN_ARRAY_SIZE(postback_outcomes); i++)
        if (strcmp(outcome, postback_outcomes[i]) == 0)
            postback_counts[i]++;
}

void metrics_streams_add(int delta)
{
    streams_open += delta;
}

long metrics_streams_open(void)
{
    return streams_open;
}

void metrics_reset(void)
{
    n_http = 0;
    n_step = 0;
    n_retry = 0;
    memset(postback_counts, 0, sizeof postback_counts);
    streams_open = 0;
}

/* ---- text ---------------------------------------------------------------------- */

typedef struct sbuf {
    char *s;
    size_t len, cap;
} sbuf_t;

static void put(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(sbuf_t *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        b->cap = b->cap * 2 + (size_t)(n > 0 ? n : 64);
        b->s = xrealloc(b->s, b->cap);
    }
}

/* Writes `v` escaped for a label value into out (cut to fit, never mid-escape). */
static void esc(const char *v, char *out, size_t cap)
{
    size_t k = 0;
    for (const char *p = v; *p != '\0' && k + 3 < cap; p++) {
        if (*p == '\\' || *p == '"') {
            out[k++] = '\\';
            out[k++] = *p;
        } else if (*p == '\n') {
            out[k++] = '\\';
            out[k++] = 'n';
        } else {
            out[k++] = *p;
        }
    }
    out[k] = '\0';
}

static void family(sbuf_t *b, const char *name, const char *type, const char *help)
{
    put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void render_histo(sbuf_t *b, const char *name, const histo_t *h, const char *labels)
{
    for (size_t i = 0; i < NBUCKETS; i++)
        put(b, "%s_bucket{%s,le=\"%g\"} %llu\n", name, labels, bucket_bounds[i], h->buckets[i]);
    put(b, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, labels, h->count);
    put(b, "%s_sum{%s} %.6f\n", name, labels, h->sum);
    put(b, "%s_count{%s} %llu\n", name, labels, h->count);
}

static void render_local(sbuf_t *b)
{
    char a[200], m[70], labels[320];
    family(b, "tern_http_requests_total", "counter", "HTTP requests by route, method and status.");
    for (size_t i = 0; i < n_http; i++) {
        esc(http_series[i].a, a, sizeof a);
        esc(http_series[i].b, m, sizeof m);
        put(b, "tern_http_requests_total{route=\"%s\",method=\"%s\",status=\"%d\"} %llu\n", a, m,
            http_series[i].code, http_series[i].count);
    }
    family(b, "tern_http_request_duration_seconds", "histogram",
           "HTTP request latency (time to the answer's headers for event streams).");
    for (size_t i = 0; i < n_http; i++) {
        esc(http_series[i].a, a, sizeof a);
        esc(http_series[i].b, m, sizeof m);
        snprintf(labels, sizeof labels, "route=\"%s\",method=\"%s\",status=\"%d\"", a, m,
                 http_series[i].code);
        render_histo(b, "tern_http_request_duration_seconds", &http_series[i], labels);
    }
    family(b, "tern_step_duration_seconds", "histogram",
           "Step attempts run by this process, by task and outcome.");
    for (size_t i = 0; i < n_step; i++) {
        esc(step_series[i].a, a, sizeof a);
        esc(step_series[i].b, m, sizeof m);
        snprintf(labels, sizeof labels, "task=\"%s\",status=\"%s\"", a, m);
        render_histo(b, "tern_step_duration_seconds", &step_series[i], labels);
    }
    family(b, "tern_step_retries_total", "counter",
           "Failed step attempts that this process scheduled to run again, by task.");
    for (size_t i = 0; i < n_retry; i++) {
        esc(retry_series[i].a, a, sizeof a);
        put(b, "tern_step_retries_total{task=\"%s\"} %llu\n", a, retry_series[i].count);
    }
    family(b, "tern_postback_attempts_total", "counter",
           "Post-back deliveries attempted by this process, by outcome.");
    for (size_t i = 0; i < TERN_ARRAY_SIZE(postback_outcomes); i++)
        put(b, "tern_postback_attempts_total{outcome=\"%s\"} %llu\n", postback_outcomes[i],
            postback_counts[i]);
    family(b, "tern_event_streams_open", "gauge",
           "GET /jobs/:uuid/events responses this process is streaming.");
    put(b, "tern_event_streams_open %ld\n", streams_open);
}

char *metrics_render(void)
{
    sbuf_t b = {xmalloc(4096), 0, 4096};
    b.s[0] = '\0';
    render_local(&b);
    return b.s;
}

/* One gauge from a member of `store` holding an integer; nothing when it is absent. */
static void gauge(sbuf_t *b, const json_t *store, const char *member, const char *name,
                  const char *help)
{
    json_t *v = json_object_get(store, member);
    if (!json_is_integer(v))
        return;
    family(b, name, "gauge", help);
    put(b, "%s %" JSON_INTEGER_FORMAT "\n", name, json_integer_value(v));
}

/* A labelled gauge from an object member {"label value": n, ...}. */
static void gauge_map(sbuf_t *b, const json_t *store, const char *member, const char *name,
                      const char *label, const char *help)
{
    json_t *map = json_object_get(store, member);
    if (!json_is_object(map))
        return;
    family(b, name, "gauge", help);
    const char *key;
    json_t *v;
    char k[200];
    json_object_foreach(map, key, v)
    {
        esc(key, k, sizeof k);
        put(b, "%s{%s=\"%s\"} %" JSON_INTEGER_FORMAT "\n", name, label, k, json_integer_value(v));
    }
}

char *metrics_render_full(const json_t *store, bool redis_up, uint64_t rtt_us)
{
    sbuf_t b = {xmalloc(8192), 0, 8192};
    b.s[0] = '\0';
    family(&b, "tern_redis_up", "gauge", "Whether this process's connection to Redis is up.");
    put(&b, "tern_redis_up %d\n", redis_up ? 1 : 0);
    family(&b, "tern_redis_rtt_seconds", "gauge",
           "Round-trip time of the last Redis reply on this process's store connection.");
    put(&b, "tern_redis_rtt_seconds %.6f\n", (double)rtt_us / 1e6);
    if (store != NULL) {
        gauge_map(&b, store, "jobs", "tern_jobs", "execution", "Jobs by execution.");
        gauge(&b, store, "jobs_total", "tern_jobs_stored", "Jobs stored, in any execution.");
        gauge_map(&b, store, "queues", "tern_queue_depth", "queue",
                  "Jobs waiting in each queue for a runner.");
        gauge(&b, store, "delayed", "tern_jobs_delayed",
              "Jobs waiting for a due time (exec_after, backoff, re-queue).");
        gauge(&b, store, "in_flight", "tern_jobs_in_flight",
              "Jobs held by live runners (sum of their last heartbeat).");
        gauge(&b, store, "runners", "tern_runners", "Runners whose lease is alive.");
        gauge(&b, store, "postbacks_pending", "tern_postbacks_pending",
              "Post-back deliveries waiting for their due time.");
        gauge(&b, store, "postbacks_in_flight", "tern_postbacks_in_flight",
              "Post-back deliveries claimed by a process and not answered yet.");
    }
    render_local(&b);
    return b.s;
}
