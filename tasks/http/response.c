/*
 * response.c -- the answer to http.request: the result (the body parsed when the
 * answer says it is JSON, else text made valid UTF-8), or the error code that tells
 * whether a retry can help, with a message quoting the start of the body.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"

#include "lib/utf8.h"

#define EXCERPT_BYTES 200

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

void on_response(tern_ctx *ctx, const tern_http_res *res, void *data)
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
