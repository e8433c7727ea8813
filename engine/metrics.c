/*
 * metrics.c -- fixed-size tables of counters and histograms; see metrics.h. Series are
 * few (routes x methods x statuses, tasks x outcomes), so a linear table is enough;
 * past its capacity new series are counted under an "other" label instead of growing
 * memory without bound.
 */
#include "metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

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

void metrics_reset(void)
{
    n_http = 0;
    n_step = 0;
}

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

static void render_histo(sbuf_t *b, const char *name, const histo_t *h, const char *labels)
{
    for (size_t i = 0; i < NBUCKETS; i++)
        put(b, "%s_bucket{%s,le=\"%g\"} %llu\n", name, labels, bucket_bounds[i], h->buckets[i]);
    put(b, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, labels, h->count);
    put(b, "%s_sum{%s} %.6f\n", name, labels, h->sum);
    put(b, "%s_count{%s} %llu\n", name, labels, h->count);
}

char *metrics_render(void)
{
    sbuf_t b = {xmalloc(4096), 0, 4096};
    b.s[0] = '\0';
    put(&b, "# HELP tern_http_requests_total HTTP requests by route, method and status.\n"
            "# TYPE tern_http_requests_total counter\n");
    for (size_t i = 0; i < n_http; i++)
        put(&b, "tern_http_requests_total{route=\"%s\",method=\"%s\",status=\"%d\"} %llu\n",
            http_series[i].a, http_series[i].b, http_series[i].code, http_series[i].count);
    put(&b, "# HELP tern_http_request_duration_seconds HTTP request latency.\n"
            "# TYPE tern_http_request_duration_seconds histogram\n");
    for (size_t i = 0; i < n_http; i++) {
        char labels[256];
        snprintf(labels, sizeof labels, "route=\"%.96s\",method=\"%.32s\",status=\"%d\"",
                 http_series[i].a, http_series[i].b, http_series[i].code);
        render_histo(&b, "tern_http_request_duration_seconds", &http_series[i], labels);
    }
    put(&b, "# HELP tern_step_duration_seconds Step attempts by task and outcome.\n"
            "# TYPE tern_step_duration_seconds histogram\n");
    for (size_t i = 0; i < n_step; i++) {
        char labels[256];
        snprintf(labels, sizeof labels, "task=\"%.96s\",status=\"%.32s\"", step_series[i].a,
                 step_series[i].b);
        render_histo(&b, "tern_step_duration_seconds", &step_series[i], labels);
    }
    return b.s;
}
