/*
 * request.c -- http.request's start: the arguments read into a call and the
 * request built from them ("Name: value" header lines, the body as JSON or text)
 * and handed to the host, which copies what it keeps; this file frees its copies
 * before it returns.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p != NULL)
        memcpy(p, s, n);
    return p;
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

/* ---- start ----------------------------------------------------------------------------- */

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

void request_start(tern_ctx *ctx, const json_t *args)
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
