/*
 * http.c -- the "http" task family: one HTTP request per step, through the host's
 * HTTP client (libcurl on the engine's loop; the plugin itself links no HTTP code).
 *
 *   http.request {"method": "POST", "url": "https://...", "headers": {"X-A": "b"},
 *                 "body": <any JSON, sent as application/json> | "body_text": "...",
 *                 "expect": [200, 201], "timeout_ms": 30000,
 *                 "max_response_bytes": 8388608}
 *   -> {"status": 201, "headers": {"content-type": "application/json"},
 *       "body": <parsed JSON when the answer says it is JSON, else text>,
 *       "elapsed_ms": 12}
 *
 * Without "expect" any 2xx is success. Error codes, and whether a retry can help:
 *   HttpConnectError      no answer: refused, reset, DNS, TLS              retried
 *   HttpTimeout           no complete answer within timeout_ms, or 408     retried
 *   HttpServerError       5xx                                              retried
 *   HttpTooManyRequests   429                                              retried
 *   HttpClientError       other 4xx                                        fatal
 *   HttpUnexpectedStatus  1xx/2xx/3xx not in "expect" (redirects are not
 *                         followed)                                        fatal
 *   HttpResponseTooLarge  the answer exceeds max_response_bytes            fatal
 *   NetworkNotAllowed     every address of the URL's host is outside the
 *                         plugin's allow_networks                          fatal
 *   InvalidArgument       bad arguments                                    fatal
 * Messages name the method, the URL, the status and the start of the body.
 *
 * Configuration ({"plugins": {"http": {...}}}): "allow_networks", an array of CIDR
 * blocks ["10.0.0.0/8", "fd00::/8"], limits the addresses requests may connect to,
 * checked by the engine after DNS (engine/base/net_allow.h). Without it any address ternd's
 * host can reach is allowed, loopback and link-local (169.254.169.254) included.
 *
 * Ownership: each request in flight has an `http_call_t` (method, URL and expected
 * statuses, for the answer's callback) on a list in the plugin state. The callback
 * frees it; if the attempt is cancelled the callback never runs, so the cancel hook
 * finds the call of that context on the list and frees it, and fini frees whatever is
 * left at shutdown.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <tern/task.h>

#include "lib/utf8.h"

#define EXCERPT_BYTES 200
#define MAX_EXPECT    32

typedef struct http_call {
    struct http_call *prev, *next;
    tern_ctx *ctx;
    char *method;
    char *url;
    int expect[MAX_EXPECT];
    size_t nexpect; /* 0: any 2xx */
} http_call_t;

typedef struct http_state {
    http_call_t *calls; /* in flight */
} http_state_t;

static const char *const fatal_codes[] = {"HttpClientError",      "HttpUnexpectedStatus",
                                          "HttpResponseTooLarge", "NetworkNotAllowed",
                                          "InvalidArgument",      NULL};

/* ---- small helpers --------------------------------------------------------------------- */

static void call_free(http_call_t *c)
{
    free(c->method);
    free(c->url);
    free(c);
}

static void call_unlink(http_state_t *st, http_call_t *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        st->calls = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p != NULL)
        memcpy(p, s, n);
    return p;
}

/* The first EXCERPT_BYTES of a body on one line, cut on a character boundary. Returns
 * a malloc'd C string. */
static char *excerpt(const char *body, size_t len)
{
    size_t n = len;
    if (n > EXCERPT_BYTES) {
        n = EXCERPT_BYTES;
        while (n > 0 && ((unsigned char)body[n] & 0xc0) == 0x80)
            n--;
    }
    json_t *t = task_utf8_to_json(body, n, true);
    const char *s = json_string_value(t);
    char *out = malloc((s ? strlen(s) : 0) + 4);
    if (out != NULL)
        sprintf(out, "%s%s", s ? s : "", n < len ? "..." : "");
    json_decref(t);
    return out;
}

static bool is_json_type(const char *ct)
{
    if (ct == NULL)
        return false;
    size_t n = strcspn(ct, ";");
    while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    if (n == 16 && strncasecmp(ct, "application/json", 16) == 0)
        return true;
    for (size_t i = 0; i + 5 <= n; i++) {
        if (strncasecmp(ct + i, "+json", 5) == 0 && i + 5 == n)
            return true;
    }
    return false;
}

static bool header_name_ok(const char *s)
{
    if (*s == '\0')
        return false;
    for (; *s; s++) {
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              strchr("!#$%&'*+-.^_`|~", *s) != NULL))
            return false;
    }
    return true;
}

static bool status_expected(const http_call_t *c, long status)
{
    if (c->nexpect == 0)
        return status >= 200 && status < 300;
    for (size_t i = 0; i < c->nexpect; i++) {
        if (c->expect[i] == status)
            return true;
    }
    return false;
}

/* ---- the answer ------------------------------------------------------------------------ */

static void fail_status(tern_ctx *ctx, const http_call_t *c, const tern_http_res *res)
{
    const char *code;
    long st = res->status;
    if (st >= 500)
        code = "HttpServerError";
    else if (st == 429)
        code = "HttpTooManyRequests";
    else if (st == 408)
        code = "HttpTimeout";
    else if (st >= 400)
        code = "HttpClientError";
    else
        code = "HttpUnexpectedStatus";
    char *ex = excerpt(res->body, res->body_len);
    if (strcmp(code, "HttpUnexpectedStatus") == 0 && c->nexpect > 0) {
        tern_task_fail(ctx, code, "%s %s: HTTP %ld, expected %d%s: %s", c->method, c->url, st,
                       c->expect[0], c->nexpect > 1 ? " or another listed status" : "",
                       ex ? ex : "");
    } else {
        tern_task_fail(ctx, code, "%s %s: HTTP %ld: %s", c->method, c->url, st, ex ? ex : "");
    }
    free(ex);
}

static json_t *response_body(const tern_http_res *res)
{
    if (is_json_type(res->content_type) && res->body_len > 0) {
        json_t *doc = json_loadb(res->body, res->body_len, JSON_DECODE_ANY, NULL);
        if (doc != NULL)
            return doc;
    }
    return task_utf8_to_json(res->body, res->body_len, false);
}

static void on_response(tern_ctx *ctx, const tern_http_res *res, void *data)
{
    http_call_t *c = data;
    http_state_t *st = tern_plugin_state(ctx);
    call_unlink(st, c);

    if (res->error != NULL) {
        const char *code = "HttpConnectError";
        if (strncmp(res->error, "response larger than", 20) == 0)
            code = "HttpResponseTooLarge";
        else if (strncmp(res->error, "timed out after", 15) == 0)
            code = "HttpTimeout";
        else if (strncmp(res->error, "network not allowed:", 20) == 0)
            code = "NetworkNotAllowed";
        tern_task_fail(ctx, code, "%s %s: %s", c->method, c->url, res->error);
    } else if (!status_expected(c, res->status)) {
        fail_status(ctx, c, res);
    } else {
        json_t *result = json_pack("{s:I, s:o, s:I}", "status", (json_int_t)res->status, "body",
                                   response_body(res), "elapsed_ms", (json_int_t)res->elapsed_ms);
        if (result != NULL && res->content_type != NULL)
            json_object_set_new(result, "headers",
                                json_pack("{s:s}", "content-type", res->content_type));
        if (result == NULL)
            tern_task_fail(ctx, "HttpBadResponse", "%s %s: cannot represent the answer", c->method,
                           c->url);
        else
            tern_task_done(ctx, result);
    }
    call_free(c);
}

/* ---- start and cancel ------------------------------------------------------------------- */

/* Reads the arguments into `c` and the request. Returns NULL, or a message (static or
 * in msg) naming the fault. */
static const char *read_args(const json_t *args, http_call_t *c, const json_t **headers,
                             const json_t **body, const json_t **body_text, json_int_t *timeout_ms,
                             json_int_t *max_bytes, char *msg, size_t msglen)
{
    json_t *url = json_object_get(args, "url");
    json_t *method = json_object_get(args, "method");
    json_t *expect = json_object_get(args, "expect");
    json_t *timeout = json_object_get(args, "timeout_ms");
    json_t *max = json_object_get(args, "max_response_bytes");
    *headers = json_object_get(args, "headers");
    *body = json_object_get(args, "body");
    *body_text = json_object_get(args, "body_text");

    if (!json_is_string(url))
        return "\"url\" must be a string";
    const char *u = json_string_value(url);
    if (strncasecmp(u, "http://", 7) != 0 && strncasecmp(u, "https://", 8) != 0) {
        snprintf(msg, msglen, "\"url\" must start with http:// or https://, got \"%.200s\"", u);
        return msg;
    }
    if (method != NULL && (!json_is_string(method) || json_string_length(method) == 0))
        return "\"method\" must be a non-empty string";
    if (*body != NULL && *body_text != NULL)
        return "\"body\" and \"body_text\" cannot both be given";
    if (*body_text != NULL && !json_is_string(*body_text))
        return "\"body_text\" must be a string";
    if (*headers != NULL && !json_is_object(*headers))
        return "\"headers\" must be an object of strings";
    const char *name;
    json_t *value;
    json_object_foreach((json_t *)*headers, name, value)
    {
        if (!header_name_ok(name)) {
            snprintf(msg, msglen, "header name \"%.100s\" is not an HTTP token", name);
            return msg;
        }
        if (!json_is_string(value) || strpbrk(json_string_value(value), "\r\n") != NULL ||
            strlen(json_string_value(value)) != json_string_length(value)) {
            snprintf(msg, msglen, "header \"%.100s\" must be a one-line string", name);
            return msg;
        }
    }
    if (expect != NULL) {
        if (!json_is_array(expect) || json_array_size(expect) == 0 ||
            json_array_size(expect) > MAX_EXPECT)
            return "\"expect\" must be an array of 1 to 32 HTTP statuses";
        size_t i;
        json_t *v;
        json_array_foreach(expect, i, v)
        {
            if (!json_is_integer(v) || json_integer_value(v) < 100 || json_integer_value(v) > 599)
                return "\"expect\" must hold integers from 100 to 599";
            c->expect[c->nexpect++] = (int)json_integer_value(v);
        }
    }
    *timeout_ms = 0;
    if (timeout != NULL) {
        if (!json_is_integer(timeout) || json_integer_value(timeout) <= 0)
            return "\"timeout_ms\" must be a positive integer";
        *timeout_ms = json_integer_value(timeout);
    }
    *max_bytes = 0;
    if (max != NULL) {
        if (!json_is_integer(max) || json_integer_value(max) <= 0)
            return "\"max_response_bytes\" must be a positive integer";
        *max_bytes = json_integer_value(max);
    }
    const char *m = method != NULL                          ? json_string_value(method)
                    : (*body != NULL || *body_text != NULL) ? "POST"
                                                            : "GET";
    c->method = dup_str(m);
    for (char *p = c->method; p != NULL && *p; p++) {
        if (*p >= 'a' && *p <= 'z')
            *p = (char)(*p - 'a' + 'A');
    }
    c->url = dup_str(u);
    return NULL;
}

static bool has_header(const json_t *headers, const char *name)
{
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)headers, key, value)
    {
        if (strcasecmp(key, name) == 0)
            return true;
    }
    return false;
}

static void request_start(tern_ctx *ctx, const json_t *args)
{
    http_state_t *st = tern_plugin_state(ctx);
    http_call_t *c = calloc(1, sizeof *c);
    if (c == NULL || st == NULL) {
        free(c);
        tern_task_fail(ctx, "HttpConnectError", "http.request: out of memory");
        return;
    }
    c->ctx = ctx;

    const json_t *headers, *body, *body_text;
    json_int_t timeout_ms, max_bytes;
    char msg[320];
    const char *bad =
        read_args(args, c, &headers, &body, &body_text, &timeout_ms, &max_bytes, msg, sizeof msg);
    if (bad == NULL && (c->method == NULL || c->url == NULL))
        bad = "out of memory";
    if (bad != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "http.request: %s", bad);
        call_free(c);
        return;
    }

    /* "Name: value" lines, plus a Content-Type for a body unless the caller set one. */
    size_t nh = json_object_size(headers);
    char **lines = calloc(nh + 2, sizeof *lines);
    if (lines == NULL) {
        tern_task_fail(ctx, "HttpConnectError", "http.request: out of memory");
        call_free(c);
        return;
    }
    size_t k = 0;
    const char *name;
    json_t *value;
    json_object_foreach((json_t *)headers, name, value)
    {
        size_t len = strlen(name) + json_string_length(value) + 3;
        lines[k] = malloc(len);
        if (lines[k] != NULL)
            snprintf(lines[k++], len, "%s: %s", name, json_string_value(value));
    }
    char *payload = NULL;
    size_t payload_len = 0;
    if (body != NULL) {
        payload = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
        payload_len = payload != NULL ? strlen(payload) : 0;
        if (!has_header(headers, "Content-Type"))
            lines[k++] = dup_str("Content-Type: application/json");
    } else if (body_text != NULL) {
        payload_len = json_string_length(body_text);
        payload = malloc(payload_len + 1);
        if (payload != NULL)
            memcpy(payload, json_string_value(body_text), payload_len + 1);
        if (!has_header(headers, "Content-Type"))
            lines[k++] = dup_str("Content-Type: text/plain; charset=utf-8");
    }

    tern_http_req req = {
        .size = sizeof req,
        .method = c->method,
        .url = c->url,
        .headers = (const char *const *)lines,
        .body = payload,
        .body_len = payload_len,
        .timeout_ms = (uint64_t)timeout_ms,
        .max_response_bytes = (size_t)max_bytes,
    };
    int rc = (body != NULL || body_text != NULL) && payload == NULL
                 ? -ENOMEM
                 : tern_http_request(ctx, &req, on_response, c);
    /* The host copied everything it keeps. */
    for (size_t i = 0; i < k; i++)
        free(lines[i]);
    free(lines);
    free(payload);

    if (rc < 0) {
        tern_task_fail(ctx, rc == -EINVAL ? "InvalidArgument" : "HttpConnectError",
                       "%s %s: the request could not be started: %s", c->method, c->url,
                       strerror(-rc));
        call_free(c);
        return;
    }
    c->next = st->calls;
    if (st->calls != NULL)
        st->calls->prev = c;
    st->calls = c;
}

static void request_cancel(tern_ctx *ctx)
{
    http_state_t *st = tern_plugin_state(ctx);
    for (http_call_t *c = st != NULL ? st->calls : NULL; c != NULL; c = c->next) {
        if (c->ctx == ctx) {
            call_unlink(st, c);
            call_free(c);
            return;
        }
    }
}

static const tern_task_def request_task = {
    .size = sizeof(tern_task_def),
    .name = "request",
    .summary = "Makes one HTTP request and returns its status, content type and body.",
    .args_schema =
        "{\"required\": [\"url\"], \"additional\": false, \"properties\": {"
        "\"method\": {\"type\": \"string\", \"description\": \"default GET, or POST with a body\"},"
        "\"url\": {\"type\": \"string\", \"description\": \"http:// or https://\"},"
        "\"headers\": {\"type\": \"object\", \"description\": \"name: value\"},"
        "\"body\": {\"type\": \"any\", \"description\": \"sent as application/json\"},"
        "\"body_text\": {\"type\": \"string\", \"description\": \"sent as it is\"},"
        "\"expect\": {\"type\": \"array\", \"description\": \"statuses meaning success;"
        " default any 2xx\"},"
        "\"timeout_ms\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 31536000000,"
        " \"description\": \"whole request; default 30000; at most a year, as a step\"},"
        "\"max_response_bytes\": {\"type\": \"integer\", \"minimum\": 1,"
        " \"description\": \"default 8 MiB\"}}}",
    .fatal_codes = fatal_codes,
    .start = request_start,
    .cancel = request_cancel,
};

/* ---- the plugin ------------------------------------------------------------------------ */

static int http_init(const tern_host *host, const json_t *config, void **state, char *err,
                     size_t errlen)
{
    (void)host;
    (void)config;
    http_state_t *st = calloc(1, sizeof *st);
    if (st == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    *state = st;
    return 0;
}

static void http_fini(void *state)
{
    http_state_t *st = state;
    if (st == NULL)
        return;
    while (st->calls != NULL) {
        http_call_t *c = st->calls;
        call_unlink(st, c);
        call_free(c);
    }
    free(st);
}

static const tern_task_def *const http_tasks[] = {&request_task, NULL};

static const tern_plugin http_plugin = {
    .magic = TERN_PLUGIN_MAGIC,
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
    .size = sizeof(tern_plugin),
    .name = "http",
    .version = "1.0.0",
    .init = http_init,
    .fini = http_fini,
    .tasks = http_tasks,
};

TERN_PLUGIN(http_plugin)
