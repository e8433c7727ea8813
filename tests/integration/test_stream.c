/*
 * test_stream.c -- GET /jobs/:uuid/events on a real ternd, read by real HTTP/1.1
 * clients (libcurl's multi interface driven from the test thread): a job's history
 * then its live events, as ND-JSON and as server-sent events; the stream ends with the
 * job; resuming with Last-Event-ID or ?from=; 404 for unknown jobs; fifty clients that
 * vanish mid-stream are noticed and freed (the server's stream count, read from
 * /metrics, returns to 0); and a shutting-down ternd ends its streams with a final
 * chunk. The same for plugins' streaming views (TERN_VIEW_STREAM), through the itest
 * plugin's view /itest/feeds/:name over a stream the test appends to: its lines, then
 * the stream's new entries, to the end line; watchers side by side, one leaving early;
 * a view that follows nothing; a refusal.
 *
 * ternd runs with a 200 ms stream heartbeat (config "event_heartbeat_ms"), so a
 * vanished client is noticed within a few hundred milliseconds instead of 15 s.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "events/events.h"
#include "http_sync.h"
#include "model/job_history.h"
#include "world.h"

static itest_world_t W;

/* ---- a streaming HTTP client ---------------------------------------------------- */

/* One streamed response. */
typedef struct stream {
    CURL *easy;
    struct curl_slist *headers;
    char *body; /* everything received so far, NUL-terminated */
    size_t len, cap;
    bool done;
    CURLcode result;
    long status;
    char ctype[128];
} stream_t;

static size_t on_bytes(char *p, size_t size, size_t n, void *data)
{
    stream_t *s = data;
    size_t k = size * n;
    if (s->len + k + 1 > s->cap) {
        s->cap = (s->len + k + 1) * 2;
        s->body = xrealloc(s->body, s->cap);
    }
    memcpy(s->body + s->len, p, k);
    s->len += k;
    s->body[s->len] = '\0';
    return k;
}

/* Starts GET `path` on the multi handle with the NULL-terminated extra headers. */
static void stream_open(CURLM *m, stream_t *s, const char *path, const char *const *headers)
{
    memset(s, 0, sizeof *s);
    s->body = xcalloc(1, 1);
    s->cap = 1;
    char url[512];
    snprintf(url, sizeof url, "%s%s", W.base, path);
    s->easy = curl_easy_init();
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i++)
        s->headers = curl_slist_append(s->headers, headers[i]);
    curl_easy_setopt(s->easy, CURLOPT_URL, url);
    curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, s->headers);
    curl_easy_setopt(s->easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, on_bytes);
    curl_easy_setopt(s->easy, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(s->easy, CURLOPT_PRIVATE, s);
    curl_easy_setopt(s->easy, CURLOPT_NOSIGNAL, 1L);
    /* A fresh connection per stream, closed for real when the stream is dropped. */
    curl_easy_setopt(s->easy, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(s->easy, CURLOPT_FRESH_CONNECT, 1L);
    curl_multi_add_handle(m, s->easy);
}

/* Drops the stream: its connection is closed as a vanished client's would be. */
static void stream_close(CURLM *m, stream_t *s)
{
    if (s->easy != NULL) {
        curl_multi_remove_handle(m, s->easy);
        curl_easy_cleanup(s->easy);
        s->easy = NULL;
    }
    curl_slist_free_all(s->headers);
    s->headers = NULL;
    free(s->body);
    s->body = NULL;
}

typedef bool (*stream_cond_fn)(void *arg);

/* Drives the multi handle until cond(arg) holds (NULL: until every transfer is done)
 * or `ms` have passed. Returns whether the condition held. */
static bool multi_run(CURLM *m, stream_cond_fn cond, void *arg, unsigned ms)
{
    uint64_t end = clock_mono_ms() + ms;
    for (;;) {
        int running = 0;
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            stream_t *s = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
            s->done = true;
            s->result = msg->data.result;
        }
        if (cond != NULL ? cond(arg) : running == 0)
            return true;
        if (clock_mono_ms() >= end)
            return false;
        int fds;
        curl_multi_poll(m, NULL, 0, 20, &fds);
    }
}

static void stream_info(stream_t *s)
{
    curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &s->status);
    char *ct = NULL;
    curl_easy_getinfo(s->easy, CURLINFO_CONTENT_TYPE, &ct);
    snprintf(s->ctype, sizeof s->ctype, "%s", ct != NULL ? ct : "");
}

/* Opens one stream and reads it to its end (at most ms). */
static void stream_whole(stream_t *s, const char *path, const char *const *headers, unsigned ms)
{
    CURLM *m = curl_multi_init();
    stream_open(m, s, path, headers);
    if (!multi_run(m, NULL, NULL, ms))
        fail_msg("GET %s did not end within %u ms; received so far:\n%s", path, ms, s->body);
    stream_info(s);
    /* The caller keeps the body (and frees it); the rest goes now. */
    curl_multi_remove_handle(m, s->easy);
    curl_easy_cleanup(s->easy);
    s->easy = NULL;
    curl_slist_free_all(s->headers);
    s->headers = NULL;
    curl_multi_cleanup(m);
}

/* ---- parsing ------------------------------------------------------------------- */

/* ND-JSON: one event per non-empty line (empty lines are keep-alives). */
static json_t *parse_ndjson(const char *body)
{
    json_t *out = json_array();
    const char *p = body;
    while (*p) {
        const char *nl = strchr(p, '\n');
        if (nl == NULL)
            fail_msg("ND-JSON: last line has no newline: %s", p);
        if (nl > p) {
            json_error_t e;
            json_t *v = json_loadb(p, (size_t)(nl - p), 0, &e);
            if (v == NULL)
                fail_msg("ND-JSON: a line is not JSON (%s): %.*s", e.text, (int)(nl - p), p);
            json_array_append_new(out, v);
        }
        p = nl + 1;
    }
    return out;
}

/* SSE: [{"id": "...", "event": {...}}, ...]; comments (": ...") are skipped. */
static json_t *parse_sse(const char *body)
{
    json_t *out = json_array();
    const char *p = body;
    while (*p) {
        const char *end = strstr(p, "\n\n");
        if (end == NULL)
            fail_msg("SSE: unterminated block: %s", p);
        char *block = xstrndup(p, (size_t)(end - p));
        char *id = NULL;
        json_t *ev = NULL;
        for (char *line = strtok(block, "\n"); line != NULL; line = strtok(NULL, "\n")) {
            if (strncmp(line, "id: ", 4) == 0) {
                id = line + 4;
            } else if (strncmp(line, "data: ", 6) == 0) {
                ev = json_loads(line + 6, 0, NULL);
                if (ev == NULL)
                    fail_msg("SSE: data is not JSON: %s", line);
            } else if (line[0] != ':') {
                fail_msg("SSE: unexpected line: %s", line);
            }
        }
        if (ev != NULL) {
            if (id == NULL)
                fail_msg("SSE: an event without an id");
            json_array_append_new(out, json_pack("{s:s, s:o}", "id", id, "event", ev));
        }
        free(block);
        p = end + 2;
    }
    return out;
}

static const char *type_of(const json_t *ev)
{
    const char *t = json_string_value(json_object_get(ev, "type"));
    return t != NULL ? t : "(none)";
}

/* ---- world --------------------------------------------------------------------- */

static const char *const STEPS_WF =
    "{\"name\": \"stream-steps\", \"version\": \"1.0.0\", \"chain\": ["
    " {\"name\": \"a\", \"task\": \"core.log\", \"args\": {\"msg\": \"a\"}},"
    " {\"name\": \"b\", \"task\": \"core.sleep\", \"args\": {\"ms\": 400}},"
    " {\"name\": \"c\", \"task\": \"core.log\", \"args\": {\"msg\": \"c\"}},"
    " {\"name\": \"d\", \"task\": \"core.sleep\", \"args\": {\"ms\": 400}}]}";

static const char *const FAILS_WF =
    "{\"name\": \"stream-fails\", \"version\": \"1.0.0\", \"chain\": ["
    " {\"name\": \"boom\", \"task\": \"core.fail\", \"args\": {\"code\": \"Boom\"}}]}";

static const char *const SLOW_WF =
    "{\"name\": \"stream-slow\", \"version\": \"1.0.0\", \"chain\": ["
    " {\"name\": \"wait\", \"task\": \"core.sleep\", \"args\": {\"ms\": 60000}}]}";

static int group_setup(void **state)
{
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    itest_world_start(&W, "s1", "{\"event_heartbeat_ms\": 200}", NULL);
    char msg[1024];
    if (itest_workflow_put(&W.client, STEPS_WF, NULL, msg, sizeof msg) != 0 ||
        itest_workflow_put(&W.client, FAILS_WF, NULL, msg, sizeof msg) != 0 ||
        itest_workflow_put(&W.client, SLOW_WF, NULL, msg, sizeof msg) != 0)
        fail_msg("workflow refused: %s", msg);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    itest_world_stop(&W, 15000);
    curl_global_cleanup();
    return 0;
}

static void create(const char *workflow, char uuid[40])
{
    char msg[1024];
    if (itest_job_create(&W.client, workflow, NULL, NULL, 0, NULL, uuid, msg, sizeof msg) != 0)
        fail_msg("job of %s refused: %s", workflow, msg);
}

/* The value of a sample line "name value" in a /metrics page, or -1. */
static long metric(const char *name)
{
    http_sync_t h;
    http_sync_open(&h, W.base);
    http_sync_resp_t r;
    http_sync_do(&h, "GET", "/metrics", NULL, 0, NULL, &r);
    long v = (long)itest_metric_sample(r.body, name);
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
    return v;
}

/* Polls /metrics (every 50 ms, at most ms) until `name` has value `want`; returns the
 * time it took, or fails. */
static unsigned wait_metric(const char *name, long want, unsigned ms)
{
    uint64_t start = clock_mono_ms();
    long v = -1;
    while (clock_mono_ms() - start <= ms) {
        if ((v = metric(name)) == want)
            return (unsigned)(clock_mono_ms() - start);
        itest_pause_ms(50);
    }
    fail_msg("%s stayed at %ld, expected %ld within %u ms", name, v, want, ms);
    return 0;
}

/* ---- tests --------------------------------------------------------------------- */

typedef struct line_wait {
    stream_t *s;
    size_t lines;
} line_wait_t;

static bool has_lines(void *arg)
{
    line_wait_t *w = arg;
    size_t n = 0;
    for (const char *p = w->s->body; (p = strchr(p, '\n')) != NULL; p++)
        n++;
    return n >= w->lines || w->s->done;
}

/* The stream starts with the job's history and goes on live until "finished", then
 * the response ends; what it carried is exactly the job's stored stream. */
static void test_ndjson_history_then_live(void **state)
{
    (void)state;
    char uuid[40];
    create("stream-steps", uuid);
    char path[128];
    snprintf(path, sizeof path, "/jobs/%s/events", uuid);
    CURLM *m = curl_multi_init();
    stream_t s;
    stream_open(m, &s, path, NULL);
    line_wait_t w = {&s, 1};
    assert_true(multi_run(m, has_lines, &w, 5000));
    /* The first event arrived while the job still had most of a second to run. */
    json_t *job = itest_job_get(&W.client, uuid);
    assert_string_not_equal(itest_execution(job), "succeeded");
    json_decref(job);
    assert_true(multi_run(m, NULL, NULL, 10000));
    stream_info(&s);
    assert_int_equal(s.result, CURLE_OK); /* ended by its final chunk, not cut */
    assert_int_equal(s.status, 200);
    assert_string_equal(s.ctype, "application/x-ndjson");
    json_t *events = parse_ndjson(s.body);
    json_t *stored = itest_events(&W.client, uuid);
    assert_int_equal(json_array_size(events), json_array_size(stored));
    assert_true(json_equal(events, stored));
    assert_string_equal(type_of(json_array_get(events, 0)), "created");
    json_t *last = json_array_get(events, json_array_size(events) - 1);
    assert_string_equal(type_of(last), "finished");
    assert_string_equal(json_string_value(json_object_get(last, "execution")), "succeeded");
    size_t i;
    json_t *ev;
    int steps = 0;
    json_array_foreach(events, i, ev)
    {
        assert_string_equal(json_string_value(json_object_get(ev, "job")), uuid);
        steps += strcmp(type_of(ev), "step") == 0;
    }
    assert_int_equal(steps, 4);
    json_decref(events);
    json_decref(stored);
    curl_multi_remove_handle(m, s.easy);
    stream_close(m, &s);
    curl_multi_cleanup(m);
}

/* SSE: "id:" and "data:" per event, ids increasing; resuming with Last-Event-ID or
 * ?from= gives exactly the events after that id; resuming after the last event ends at
 * once. */
static void test_sse_and_resume(void **state)
{
    (void)state;
    char uuid[40];
    create("stream-steps", uuid);
    char path[160];
    snprintf(path, sizeof path, "/jobs/%s/events", uuid);
    const char *sse[] = {"Accept: text/event-stream", NULL};
    stream_t s;
    stream_whole(&s, path, sse, 15000);
    assert_int_equal(s.result, CURLE_OK);
    assert_string_equal(s.ctype, "text/event-stream");
    json_t *all = parse_sse(s.body);
    size_t n = json_array_size(all);
    assert_true(n >= 7); /* created, running, 4 steps, finished, at least */
    for (size_t i = 1; i < n; i++) {
        const char *a = json_string_value(json_object_get(json_array_get(all, i - 1), "id"));
        const char *b = json_string_value(json_object_get(json_array_get(all, i), "id"));
        unsigned long long ams = strtoull(a, NULL, 10), bms = strtoull(b, NULL, 10);
        unsigned long long aseq = strtoull(strchr(a, '-') + 1, NULL, 10);
        unsigned long long bseq = strtoull(strchr(b, '-') + 1, NULL, 10);
        assert_true(bms > ams || (bms == ams && bseq > aseq));
    }
    json_t *last = json_object_get(json_array_get(all, n - 1), "event");
    assert_string_equal(type_of(last), "finished");
    free(s.body);

    /* Last-Event-ID: what a reconnecting EventSource sends. */
    const char *third = json_string_value(json_object_get(json_array_get(all, 2), "id"));
    char hdr[96];
    snprintf(hdr, sizeof hdr, "Last-Event-ID: %s", third);
    const char *resume[] = {"Accept: text/event-stream", hdr, NULL};
    stream_whole(&s, path, resume, 10000);
    assert_int_equal(s.result, CURLE_OK);
    json_t *rest = parse_sse(s.body);
    assert_int_equal(json_array_size(rest), n - 3);
    for (size_t i = 0; i < n - 3; i++)
        assert_true(json_equal(json_array_get(rest, i), json_array_get(all, i + 3)));
    json_decref(rest);
    free(s.body);

    /* ?from= in the URL does the same, in ND-JSON too. */
    char from[200];
    snprintf(from, sizeof from, "%s?from=%s", path, third);
    stream_whole(&s, from, NULL, 10000);
    json_t *nd = parse_ndjson(s.body);
    assert_int_equal(json_array_size(nd), n - 3);
    assert_true(
        json_equal(json_array_get(nd, 0), json_object_get(json_array_get(all, 3), "event")));
    json_decref(nd);
    free(s.body);

    /* Resuming after the final event: nothing follows, and the stream says so by
     * ending rather than idling. */
    const char *last_id = json_string_value(json_object_get(json_array_get(all, n - 1), "id"));
    snprintf(hdr, sizeof hdr, "Last-Event-ID: %s", last_id);
    stream_whole(&s, path, resume, 5000);
    assert_int_equal(s.result, CURLE_OK);
    json_t *none = parse_sse(s.body);
    assert_int_equal(json_array_size(none), 0);
    json_decref(none);
    free(s.body);
    json_decref(all);
}

/* A job that succeeded keeps its event stream a while only (success_events_s, 60 s
 * here); after that its events are told from its record: the same story (created,
 * running, each step with its name and task, finished), marked "from_record", and
 * resumable by id like a stream. */
/* The whole event stream of a finished job, as server-sent events. */
static json_t *sse_events(const char *uuid)
{
    char path[160];
    snprintf(path, sizeof path, "/jobs/%s/events", uuid);
    const char *sse[] = {"Accept: text/event-stream", NULL};
    stream_t s;
    stream_whole(&s, path, sse, 10000);
    assert_int_equal(s.result, CURLE_OK);
    assert_int_equal(s.status, 200);
    json_t *told = parse_sse(s.body);
    free(s.body);
    return told;
}

static void test_history_from_the_record(void **state)
{
    (void)state;
    char uuid[40];
    create("stream-steps", uuid);
    json_t *job = itest_wait_finished(&W.client, uuid, 15000);
    assert_non_null(job);
    json_decref(job);
    long long ttl = itest_redis_int(&W.redis, "PTTL tern:job:%s:events", uuid);
    assert_true(ttl > 0 && ttl <= 60000);
    json_t *stored = itest_events(&W.client, uuid);
    /* What the expiry does, without waiting a minute for it. */
    assert_int_equal(itest_redis_int(&W.redis, "DEL tern:job:%s:events", uuid), 1);
    /* Info posted afterwards (not in the record) starts the stream again, with the story
     * the record tells first. */
    char info_path[128];
    snprintf(info_path, sizeof info_path, "/jobs/%s/info", uuid);
    http_sync_t hc;
    http_sync_open(&hc, W.base);
    http_sync_resp_t resp;
    const char *info = "{\"progress\": 100}";
    http_sync_do(&hc, "POST", info_path, info, strlen(info), NULL, &resp);
    assert_true(resp.status >= 200 && resp.status < 300);
    http_sync_resp_dispose(&resp);
    http_sync_close(&hc);
    assert_int_equal(itest_redis_int(&W.redis, "EXISTS tern:job:%s:events", uuid), 1);

    json_t *told = sse_events(uuid);
    /* The stored stream had exactly these events: created, running, 4 steps, finished;
     * then came the info. */
    assert_int_equal(json_array_size(told), json_array_size(stored) + 1);
    assert_string_equal(
        type_of(json_object_get(json_array_get(told, json_array_size(stored)), "event")), "info");
    for (size_t i = 0; i < json_array_size(stored); i++) {
        json_t *a = json_array_get(stored, i);
        json_t *b = json_object_get(json_array_get(told, i), "event");
        assert_string_equal(type_of(b), type_of(a));
        assert_true(json_is_true(json_object_get(b, "from_record")));
        assert_string_equal(json_string_value(json_object_get(b, "job")), uuid);
        static const char *const same[] = {"name", "task", "index", "status", "execution"};
        for (size_t k = 0; k < TERN_ARRAY_SIZE(same); k++) {
            json_t *x = json_object_get(a, same[k]), *y = json_object_get(b, same[k]);
            if (x != NULL || y != NULL)
                assert_true(json_equal(x, y));
        }
    }
    /* Resuming after the third event gives the rest. */
    const char *third = json_string_value(json_object_get(json_array_get(told, 2), "id"));
    char hdr[96];
    snprintf(hdr, sizeof hdr, "Last-Event-ID: %s", third);
    const char *resume[] = {"Accept: text/event-stream", hdr, NULL};
    char path[160];
    snprintf(path, sizeof path, "/jobs/%s/events", uuid);
    stream_t s;
    stream_whole(&s, path, resume, 10000);
    json_t *rest = parse_sse(s.body);
    free(s.body);
    assert_int_equal(json_array_size(rest), json_array_size(told) - 3);
    assert_true(json_equal(json_array_get(rest, 0), json_array_get(told, 3)));
    json_decref(rest);
    json_decref(told);
    json_decref(stored);

    /* A job that failed keeps its stream as long as the job itself. */
    char failed[40];
    char msg[1024];
    if (itest_job_create(&W.client, "stream-fails", NULL, NULL, 0, NULL, failed, msg, sizeof msg) !=
        0)
        fail_msg("job refused: %s", msg);
    job = itest_wait_finished(&W.client, failed, 15000);
    assert_string_equal(itest_execution(job), "failed");
    json_decref(job);
    long long kept = itest_redis_int(&W.redis, "PTTL tern:job:%s:events", failed);
    long long job_ttl = itest_redis_int(&W.redis, "PTTL tern:job:%s", failed);
    assert_true(kept == job_ttl || kept > 60000 || kept == -1);
}

/* Waits for a job's "finished" event in the global stream, which (unlike a wait on the
 * job's own stream) starts no stream for the job. */
typedef struct global_wait {
    const char *uuid;
    bool done;
} global_wait_t;

static bool on_global(void *data, const char *id, const json_t *ev)
{
    (void)id;
    global_wait_t *w = data;
    if (strcmp(type_of(ev), "finished") == 0 &&
        strcmp(json_string_value(json_object_get(ev, "job")), w->uuid) == 0) {
        w->done = true;
        return false;
    }
    return true;
}

static void wait_finished_unwatched(const char *uuid)
{
    global_wait_t w = {.uuid = uuid};
    events_follow_t *f = events_follow(&W.client.loop, &W.client.addr, NULL, "0", on_global, &w);
    /* on_global's false stops the follower when it found the event. */
    if (!itest_client_run_until(&W.client, &w.done, 15000)) {
        events_follow_stop(f);
        fail_msg("job %s did not finish within 15 s", uuid);
    }
}

static void test_streams_start_on_demand(void **state)
{
    (void)state;
    char msg[1024];
    const char *quick = "{\"name\": \"stream-quick\", \"chain\": ["
                        " {\"name\": \"a\", \"task\": \"core.log\", \"args\": {\"msg\": \"a\"}},"
                        " {\"name\": \"b\", \"task\": \"core.log\", \"args\": {\"msg\": \"b\"}}]}";
    const char *flaky =
        itest_fmt("{\"name\": \"stream-flaky\", \"chain\": [{\"name\": \"f\", "
                  "\"task\": \"itest.flaky\", \"retry\": {\"max_attempts\": 3, "
                  "\"backoff\": \"constant\", \"initial_ms\": 10, \"jitter\": false}, "
                  "\"args\": {\"file\": \"%s\", \"fail_times\": 1}}]}",
                  W.side);
    if (itest_workflow_put(&W.client, quick, NULL, msg, sizeof msg) != 0 ||
        itest_workflow_put(&W.client, flaky, NULL, msg, sizeof msg) != 0)
        fail_msg("workflow refused: %s", msg);

    /* A job whose record tells its whole story gets no stream of its own. */
    char uuid[40];
    create("stream-quick", uuid);
    wait_finished_unwatched(uuid);
    assert_int_equal(itest_redis_int(&W.redis, "EXISTS tern:job:%s:events", uuid), 0);
    /* Its watcher is told the same story, with the ids job_history.c gives the record's
     * events (the ids a reader told from the record resumes from). */
    json_t *job = itest_job_get(&W.client, uuid);
    json_t *want = job_history_from_view(job);
    json_decref(job);
    json_t *told = sse_events(uuid);
    assert_int_equal(json_array_size(told), 5); /* created, running, a, b, finished */
    assert_int_equal(json_array_size(told), json_array_size(want));
    for (size_t i = 0; i < json_array_size(told); i++) {
        json_t *t = json_array_get(told, i), *w = json_array_get(want, i);
        assert_string_equal(json_string_value(json_object_get(t, "id")),
                            json_string_value(json_object_get(w, "id")));
        json_t *te = json_object_get(t, "event"), *we = json_object_get(w, "event");
        assert_string_equal(type_of(te), type_of(we));
        assert_true(json_is_true(json_object_get(te, "from_record")));
        assert_true(json_equal(json_object_get(te, "time"), json_object_get(we, "time")));
    }
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(told, 1), "event"), "runner")),
                        "s1");
    json_decref(want);
    json_decref(told);
    /* Reading started the stream; it expires as a success's events do. */
    long long ttl = itest_redis_int(&W.redis, "PTTL tern:job:%s:events", uuid);
    assert_true(ttl > 0 && ttl <= 60000);

    /* A retry is not in the record: the stream starts then, with the story so far from
     * the record, and goes on with the events as they happen. */
    char retried[40];
    create("stream-flaky", retried);
    wait_finished_unwatched(retried);
    assert_int_equal(itest_redis_int(&W.redis, "EXISTS tern:job:%s:events", retried), 1);
    json_t *ev = itest_events(&W.client, retried);
    /* The retry waits on the runner (its delay is short): no second "running". */
    static const char *const types[] = {"created", "running", "step", "step", "finished"};
    assert_int_equal(json_array_size(ev), TERN_ARRAY_SIZE(types));
    for (size_t i = 0; i < TERN_ARRAY_SIZE(types); i++)
        assert_string_equal(type_of(json_array_get(ev, i)), types[i]);
    assert_true(json_is_true(json_object_get(json_array_get(ev, 0), "from_record")));
    assert_true(json_is_true(json_object_get(json_array_get(ev, 1), "from_record")));
    assert_string_equal(json_string_value(json_object_get(json_array_get(ev, 2), "status")),
                        "retry");
    assert_null(json_object_get(json_array_get(ev, 2), "from_record"));
    assert_string_equal(json_string_value(json_object_get(json_array_get(ev, 3), "status")),
                        "succeeded");
    json_decref(ev);
}

static void test_unknown_job_and_bad_ids(void **state)
{
    (void)state;
    http_sync_t h;
    http_sync_open(&h, W.base);
    http_sync_resp_t r;
    http_sync_do(&h, "GET", "/jobs/00000000-0000-4000-8000-000000000000/events", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 404);
    assert_string_equal(json_string_value(json_object_get(r.json, "code")), "ResourceNotFound");
    http_sync_resp_dispose(&r);
    http_sync_do(&h, "GET", "/jobs/not-a-uuid/events", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 404);
    http_sync_resp_dispose(&r);
    char uuid[40], path[160];
    create("stream-steps", uuid);
    snprintf(path, sizeof path, "/jobs/%s/events?from=yesterday", uuid);
    http_sync_do(&h, "GET", path, NULL, 0, NULL, &r);
    assert_int_equal(r.status, 409);
    assert_string_equal(json_string_value(json_object_get(r.json, "code")), "InvalidArgument");
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
    json_t *job = itest_wait_finished(&W.client, uuid, 10000);
    assert_non_null(job);
    json_decref(job);
}

typedef struct all_wait {
    stream_t *s;
    size_t n;
} all_wait_t;

static bool all_have_bytes(void *arg)
{
    all_wait_t *w = arg;
    for (size_t i = 0; i < w->n; i++)
        if (w->s[i].len == 0)
            return false;
    return true;
}

/* Fifty clients open a stream of a running job and vanish. Over HTTP/1.1 only a write
 * tells the server; the heartbeat makes one, so every stream is freed soon after. */
static void test_vanished_clients_are_freed(void **state)
{
    (void)state;
    enum { N = 50 };
    char uuid[40], path[128];
    create("stream-slow", uuid);
    snprintf(path, sizeof path, "/jobs/%s/events", uuid);
    json_t *running = itest_wait_event(&W.client, uuid, "running", NULL, 10000);
    assert_non_null(running);
    json_decref(running);
    CURLM *m = curl_multi_init();
    static stream_t s[N];
    for (size_t i = 0; i < N; i++)
        stream_open(m, &s[i], path, NULL);
    all_wait_t w = {s, N};
    assert_true(multi_run(m, all_have_bytes, &w, 10000));
    assert_int_equal(metric("tern_event_streams_open"), N);
    for (size_t i = 0; i < N; i++)
        stream_close(m, &s[i]);
    curl_multi_cleanup(m);
    unsigned took = wait_metric("tern_event_streams_open", 0, 10000);
    print_message("    %d vanished clients freed %u ms after they left (heartbeat 200 ms)\n", N,
                  took);
    /* The server is not stuck: a new stream still gets the history at once. */
    m = curl_multi_init();
    stream_t again;
    stream_open(m, &again, path, NULL);
    line_wait_t lw = {&again, 2};
    assert_true(multi_run(m, has_lines, &lw, 5000));
    curl_multi_remove_handle(m, again.easy);
    stream_close(m, &again);
    curl_multi_cleanup(m);
    char msg[256];
    assert_int_equal(itest_job_cancel(&W.client, uuid, msg, sizeof msg), 0);
    json_t *job = itest_wait_finished(&W.client, uuid, 10000);
    assert_non_null(job);
    json_decref(job);
    wait_metric("tern_event_streams_open", 0, 5000);
}

/* ---- streaming views (TERN_VIEW_STREAM) ----------------------------------------- */

/* The non-empty lines of an ND-JSON body (empty lines are keep-alives), each parsed. */
static size_t ndjson_lines(const char *body)
{
    size_t n = 0;
    for (const char *p = body; *p != '\0';) {
        const char *nl = strchr(p, '\n');
        if (nl == NULL)
            break;
        n += nl > p;
        p = nl + 1;
    }
    return n;
}

static bool has_ndjson_lines(void *arg)
{
    line_wait_t *w = arg;
    return ndjson_lines(w->s->body) >= w->lines || w->s->done;
}

/* Drives `m` until stream `s` has `n` lines; fails the test after 5 s. */
static void wait_lines(CURLM *m, stream_t *s, size_t n)
{
    line_wait_t lw = {s, n};
    if (!multi_run(m, has_ndjson_lines, &lw, 5000) || ndjson_lines(s->body) < n)
        fail_msg("a feed's stream has %zu lines after 5 s, expected %zu:\n%s",
                 ndjson_lines(s->body), n, s->body);
}

/* "n" of each line of an ND-JSON body, "h1,h2,1,end". */
static const char *feed_of(const char *body)
{
    static char out[512];
    out[0] = '\0';
    json_t *lines = parse_ndjson(body);
    size_t i;
    json_t *l;
    json_array_foreach(lines, i, l)
    {
        const json_t *n = json_object_get(l, "n");
        char one[64];
        if (json_is_integer(n))
            snprintf(one, sizeof one, "%lld", (long long)json_integer_value(n));
        else
            snprintf(one, sizeof one, "%s", json_is_string(n) ? json_string_value(n) : type_of(l));
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", i > 0 ? "," : "", one);
    }
    json_decref(lines);
    return out;
}

static void feed_add(const char *feed, const char *json)
{
    char *id = itest_redis_str(&W.redis, "XADD tern:p:itest:feed:%s * e %s", feed, json);
    assert_non_null(id);
    free(id);
}

/* History lines first, then what is appended, until the end line; several watchers
 * each get every line from the moment they came; one that leaves early disturbs no
 * other; entries appended before a watcher's script ran are its history's business,
 * not sent twice. */
static void test_view_stream_history_live_end(void **state)
{
    (void)state;
    const char *feed = "f1";
    itest_redis_int(&W.redis, "RPUSH tern:p:itest:feed:%s:history %s %s", feed,
                    "{\"type\":\"progress\",\"n\":\"h1\"}", "{\"type\":\"progress\",\"n\":\"h2\"}");
    feed_add(feed, "{\"type\":\"progress\",\"n\":0}"); /* before: told by the history */
    long streams0 = metric("tern_event_streams_open");
    CURLM *m = curl_multi_init();
    stream_t a, b, c;
    stream_open(m, &a, "/itest/feeds/f1", NULL);
    wait_lines(m, &a, 2);
    stream_info(&a);
    assert_int_equal(a.status, 200);
    assert_string_equal(a.ctype, "application/x-ndjson");
    feed_add(feed, "{\"type\":\"progress\",\"n\":1}");
    wait_lines(m, &a, 3);
    stream_open(m, &b, "/itest/feeds/f1", NULL);
    stream_open(m, &c, "/itest/feeds/f1", NULL);
    wait_lines(m, &b, 2);
    wait_lines(m, &c, 2);
    feed_add(feed, "{\"type\":\"progress\",\"n\":2}");
    wait_lines(m, &b, 3);
    wait_lines(m, &c, 3);
    assert_int_equal(metric("tern_event_streams_open"), streams0 + 3);
    /* c leaves; a and b go on. */
    stream_close(m, &c);
    feed_add(feed, "{\"type\":\"progress\",\"n\":3}");
    wait_lines(m, &a, 5);
    wait_lines(m, &b, 4);
    feed_add(feed, "{\"type\":\"end\",\"n\":\"end\",\"state\":\"successful\"}");
    assert_true(multi_run(m, NULL, NULL, 5000));
    assert_true(a.done && b.done);
    assert_int_equal(a.result, CURLE_OK);
    assert_int_equal(b.result, CURLE_OK);
    assert_string_equal(feed_of(a.body), "h1,h2,1,2,3,end");
    assert_string_equal(feed_of(b.body), "h1,h2,2,3,end");
    feed_add(feed, "{\"type\":\"progress\",\"n\":4}"); /* after the end: nobody's */
    stream_close(m, &a);
    stream_close(m, &b);
    curl_multi_cleanup(m);
    wait_metric("tern_event_streams_open", streams0, 5000);
}

/* A script that answers follow null: its lines, then the final chunk. An end line among
 * the lines ends the response there too. A refusal of the script is answered as any
 * view's. */
static void test_view_stream_without_follow_and_refused(void **state)
{
    (void)state;
    itest_redis_int(&W.redis, "RPUSH tern:p:itest:feed:f2:history %s %s",
                    "{\"type\":\"progress\",\"n\":\"h1\"}", "{\"type\":\"progress\",\"n\":\"h2\"}");
    stream_t s;
    stream_whole(&s, "/itest/feeds/f2?follow=no", NULL, 5000);
    assert_int_equal(s.status, 200);
    assert_int_equal(s.result, CURLE_OK);
    assert_string_equal(feed_of(s.body), "h1,h2");
    free(s.body);

    itest_redis_int(&W.redis, "RPUSH tern:p:itest:feed:f3:history %s %s",
                    "{\"type\":\"end\",\"n\":\"h1\"}", "{\"type\":\"progress\",\"n\":\"h2\"}");
    stream_whole(&s, "/itest/feeds/f3", NULL, 5000);
    assert_int_equal(s.status, 200);
    assert_string_equal(feed_of(s.body), "h1");
    free(s.body);

    /* An empty feed followed: the response starts (headers, a keep-alive) at once. */
    CURLM *m = curl_multi_init();
    stream_t e;
    stream_open(m, &e, "/itest/feeds/f4", NULL);
    all_wait_t w = {&e, 1};
    assert_true(multi_run(m, all_have_bytes, &w, 5000));
    /* An entry that is no JSON object is not sent: a client parses every line. */
    feed_add("f4", "not-json");
    feed_add("f4", "[1,2]");
    feed_add("f4", "{\"type\":\"end\",\"n\":\"only\"}");
    assert_true(multi_run(m, NULL, NULL, 5000));
    assert_string_equal(feed_of(e.body), "only");
    stream_close(m, &e);
    curl_multi_cleanup(m);

    http_sync_t h;
    http_sync_open(&h, W.base);
    http_sync_resp_t r;
    http_sync_do(&h, "GET", "/itest/feeds/f2?refuse=1", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 409);
    assert_string_equal(json_string_value(json_object_get(r.json, "code")), "InvalidArgument");
    assert_string_equal(json_string_value(json_object_get(r.json, "message")), "refuse: asked to");
    http_sync_resp_dispose(&r);
    http_sync_do(&h, "GET", "/itest/feeds/f2?nosuch=1", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 409);
    http_sync_resp_dispose(&r);
    /* A wrong answer of the script is the script's failure, before anything streams. */
    http_sync_do(&h, "GET", "/itest/bad_feed", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 500);
    assert_string_equal(json_string_value(json_object_get(r.json, "code")), "ViewScriptError");
    assert_string_equal(json_string_value(json_object_get(r.json, "message")),
                        "view \"/itest/bad_feed\" of plugin \"itest\": the streaming view's "
                        "answer is wrong: lines: expected an array of objects, one of them is "
                        "not an object");
    http_sync_resp_dispose(&r);
    /* GET /views says which views stream. */
    http_sync_do(&h, "GET", "/views", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    size_t i;
    json_t *v;
    int streaming = 0;
    json_array_foreach(r.json, i, v)
    {
        const char *plugin = json_string_value(json_object_get(v, "plugin"));
        if (strcmp(plugin, "itest") == 0 && json_is_true(json_object_get(v, "stream")))
            streaming++;
    }
    assert_int_equal(streaming, 2); /* /itest/feeds/:name and /itest/bad_feed */
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
}

/* The event hub announces a followed stream's entries itself: on a ternd whose
 * heartbeat (the watchers' safety read) is a minute, a new key joins the hub's blocking
 * XREAD at once (it is unblocked and sent again), and each entry reaches the watcher
 * well within the XREAD's own 5 s bound. */
static void test_view_stream_follows_without_heartbeat(void **state)
{
    (void)state;
    char config[400];
    snprintf(config, sizeof config, "%s/slow-heartbeat.json", W.dir.path);
    FILE *f = fopen(config, "w");
    assert_non_null(f);
    fputs("{\"event_heartbeat_ms\": 60000}\n", f);
    assert_int_equal(fclose(f), 0);
    itest_ternd_t api;
    const char *extra[] = {"--config", config, "--role", "api", NULL};
    itest_ternd_start(&api, &W.redis, &W.dir, "s-hb", extra);
    char base[64];
    snprintf(base, sizeof base, "%s", W.base);
    snprintf(W.base, sizeof W.base, "http://127.0.0.1:%d", api.api_port);
    CURLM *m = curl_multi_init();
    stream_t s;
    stream_open(m, &s, "/itest/feeds/f5", NULL);
    all_wait_t w = {&s, 1};
    assert_true(multi_run(m, all_have_bytes, &w, 5000));
    for (int i = 1; i <= 3; i++) {
        uint64_t t0 = clock_mono_ms();
        feed_add("f5", itest_fmt("{\"type\":\"progress\",\"n\":%d}", i));
        line_wait_t lw = {&s, (size_t)i};
        assert_true(multi_run(m, has_ndjson_lines, &lw, 2000));
        assert_int_equal(ndjson_lines(s.body), i);
        print_message("    entry %d reached the watcher in %llu ms\n", i,
                      (unsigned long long)(clock_mono_ms() - t0));
    }
    feed_add("f5", "{\"type\":\"end\"}");
    assert_true(multi_run(m, NULL, NULL, 2000));
    assert_string_equal(feed_of(s.body), "1,2,3,end");
    stream_close(m, &s);
    curl_multi_cleanup(m);
    snprintf(W.base, sizeof W.base, "%s", base);
    itest_ternd_signal(&api, SIGTERM, 0);
    assert_int_equal(itest_ternd_signal(&api, 0, 10000), 0);
}

/* SIGTERM ends every open stream with its final chunk: clients see a complete
 * response (and an EventSource would reconnect elsewhere with Last-Event-ID). */
static void test_shutdown_ends_streams(void **state)
{
    (void)state;
    char uuid[40], path[128];
    create("stream-slow", uuid);
    snprintf(path, sizeof path, "/jobs/%s/events", uuid);
    /* A second ternd, API only, whose shutdown does not wait for a runner. */
    itest_ternd_t api;
    const char *extra[] = {"--config", W.config, "--role", "api", NULL};
    itest_ternd_start(&api, &W.redis, &W.dir, "s-api", extra);
    char base[64];
    snprintf(base, sizeof base, "%s", W.base);
    snprintf(W.base, sizeof W.base, "http://127.0.0.1:%d", api.api_port);
    CURLM *m = curl_multi_init();
    stream_t s[3];
    const char *sse[] = {"Accept: text/event-stream", NULL};
    stream_open(m, &s[0], path, sse);
    stream_open(m, &s[1], path, NULL);
    stream_open(m, &s[2], "/itest/feeds/f9", NULL); /* a streaming view following a feed */
    all_wait_t w = {s, 3};
    assert_true(multi_run(m, all_have_bytes, &w, 10000));
    snprintf(W.base, sizeof W.base, "%s", base);
    uint64_t t0 = clock_mono_ms();
    itest_ternd_signal(&api, SIGTERM, 0);
    assert_true(multi_run(m, NULL, NULL, 5000));
    unsigned took = (unsigned)(clock_mono_ms() - t0);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(s[i].result, CURLE_OK);
        stream_info(&s[i]);
        assert_int_equal(s[i].status, 200);
        curl_multi_remove_handle(m, s[i].easy);
        stream_close(m, &s[i]);
    }
    curl_multi_cleanup(m);
    assert_true(took < 2000);
    /* Signal 0 only waits: ternd has already restored SIGTERM's default action. */
    assert_int_equal(itest_ternd_signal(&api, 0, 10000), 0);
    char msg[256];
    assert_int_equal(itest_job_cancel(&W.client, uuid, msg, sizeof msg), 0);
    json_t *job = itest_wait_finished(&W.client, uuid, 10000);
    assert_non_null(job);
    json_decref(job);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ndjson_history_then_live),
        cmocka_unit_test(test_sse_and_resume),
        cmocka_unit_test(test_history_from_the_record),
        cmocka_unit_test(test_streams_start_on_demand),
        cmocka_unit_test(test_unknown_job_and_bad_ids),
        cmocka_unit_test(test_vanished_clients_are_freed),
        cmocka_unit_test(test_view_stream_history_live_end),
        cmocka_unit_test(test_view_stream_without_follow_and_refused),
        cmocka_unit_test(test_view_stream_follows_without_heartbeat),
        cmocka_unit_test(test_shutdown_ends_streams),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown) == 0 ? 0 : 1;
}
