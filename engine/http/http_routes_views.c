/*
 * http_routes_views.c -- the read views of plugins (ABI 1.2, tern_view_def in
 * include/tern/task.h): GET /views lists them, and each is served as a GET route of
 * its own path, after every engine route (the loader refused views that overlap one).
 *
 *   GET /views             200 [{"plugin", "path", "summary", "path_params", "params"}]
 *   GET <a view's path>    200 what its script answered; ?limit= ?offset= ?marker= as
 *                          GET /jobs (next page in x-tern-next-marker, x-count), and
 *                          the view's own query parameters; any other is 409
 *                          InvalidArgument naming it. 404 when the script answered
 *                          nothing; the status and code of a script's refusal
 *                          ("REFUSED <4xx> <Code> <message>"); 500 ViewScriptError naming the view
 * when it failed or answered something that is not JSON; 503 ViewTimeout when it did not answer
 * within view_timeout_ms; 503 ServiceUnavailable while Redis is unreachable.
 *
 * Scripts run in view_runner.c (engine/run/), on a connection of their own, with
 * EVAL_RO; view_runner.h says how a script past its bound is killed. A streaming view
 * (TERN_VIEW_STREAM) is refused, found nothing or failed the same way; its answer then
 * goes to http_view_stream.c, which streams its lines and the stream it follows.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "http/http_request.h"
#include "http/http_route.h"
#include "ops/job_list.h"
#include "ops/list_page.h"
#include "run/view_runner.h"

/* ---- GET /views --------------------------------------------------------------- */

static void get_views(api_req_t *r)
{
    json_t *body = plugin_registry_describe_views(api_plugins(r));
    api_reply_json(r, 200, body);
    json_decref(body);
}

const api_route_t http_routes_views[] = {
    {"GET", "/views", get_views},
    {NULL, NULL, NULL},
};

/* ---- finding a view ----------------------------------------------------------- */

/* The loader bounds a view's path parameters; matching must have room for them all. */
_Static_assert(PLUGIN_VIEW_MAX_PARAMS <= API_MAX_PARAMS, "a view's parameters fit an api_req_t");

/* See http_request.h. */
const plugin_view_t *http_view_find(const plugin_registry_t *reg, const char *path, api_req_t *r)
{
    size_t n = reg != NULL ? plugin_registry_view_count(reg) : 0;
    for (size_t i = 0; i < n; i++) {
        const plugin_view_t *v = plugin_registry_view(reg, i);
        if (api_route_match(v->def->path, path, r))
            return v;
    }
    return NULL;
}

/* ---- serving one ------------------------------------------------------------- */

typedef struct view_call {
    api_req_t *r;
    const plugin_view_t *view; /* the registry's, valid while ternd runs */
} view_call_t;

static bool view_takes(const plugin_view_t *v, const char *name)
{
    static const char *const paging[] = {"limit", "offset", "marker"};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(paging); i++)
        if (strcmp(paging[i], name) == 0)
            return true;
    for (size_t i = 0; v->def->params != NULL && v->def->params[i] != NULL; i++)
        if (strcmp(v->def->params[i], name) == 0)
            return true;
    return false;
}

/* "kind, since, limit, offset, marker" into buf. */
static void view_params_text(const plugin_view_t *v, char *buf, size_t n)
{
    buf[0] = '\0';
    size_t len = 0;
    for (size_t i = 0; v->def->params != NULL && v->def->params[i] != NULL && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s, ", v->def->params[i]);
    if (len < n)
        snprintf(buf + len, n - len, "limit, offset, marker");
}

static void reply_script_error(api_req_t *r, const plugin_view_t *v, const char *fmt, const char *s)
{
    char why[512];
    snprintf(why, sizeof why, fmt, s);
    api_reply_error(r, 500, "ViewScriptError", "view \"%s\" of plugin \"%s\": %s", v->def->path,
                    v->plugin->name, why);
}

/* True when `len` bytes of text the script answered are JSON; else answers 500: a
 * client must never get a 200 it cannot parse. */
static bool view_text_ok(api_req_t *r, const plugin_view_t *v, const char *text, size_t len)
{
    json_error_t jerr;
    json_t *doc = json_loadb(text, len, JSON_DECODE_ANY, &jerr);
    if (doc == NULL) {
        char why[256];
        snprintf(why, sizeof why, "line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
        reply_script_error(r, v, "the script answered text that is not JSON (%s)", why);
        return false;
    }
    json_decref(doc);
    return true;
}

/* A marker goes into a header: printable ASCII only, and not more than a page's worth
 * of a header line. */
#define VIEW_MARKER_MAX 512

static bool marker_ok(const redisReply *m)
{
    if (m->len == 0 || m->len > VIEW_MARKER_MAX)
        return false;
    for (size_t i = 0; i < m->len; i++)
        if (m->str[i] < 0x20 || m->str[i] > 0x7e)
            return false;
    return true;
}

/* A script's refusal of the request (include/tern/task.h): the error reply
 * "REFUSED <status 400-499> <Code> <message>". Answers it and returns true; false for
 * any other error, which is the script's failure. */
static bool view_refused(api_req_t *r, const char *errmsg)
{
    static const char prefix[] = "REFUSED ";
    if (errmsg == NULL || strncmp(errmsg, prefix, sizeof prefix - 1) != 0)
        return false;
    const char *p = errmsg + sizeof prefix - 1;
    if (p[0] != '4' || p[1] < '0' || p[1] > '9' || p[2] < '0' || p[2] > '9' || p[3] != ' ')
        return false;
    int http_status = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
    const char *code = p + 4;
    size_t code_len = 0;
    while ((code[code_len] >= 'A' && code[code_len] <= 'Z') ||
           (code[code_len] >= 'a' && code[code_len] <= 'z'))
        code_len++;
    if (code_len == 0 || code_len > 64 || code[code_len] != ' ')
        return false;
    char code_s[65];
    memcpy(code_s, code, code_len);
    code_s[code_len] = '\0';
    api_reply_error(r, http_status, code_s, "%.1024s", code + code_len + 1);
    return true;
}

static void on_view_reply(void *data, int status, const redisReply *reply, const char *errmsg)
{
    view_call_t *vc = data;
    api_req_t *r = vc->r;
    const plugin_view_t *v = vc->view;
    free(vc);
    if (status == TERN_EINVAL && view_refused(r, errmsg))
        return;
    if (status == TERN_EINVAL) {
        reply_script_error(r, v, "the script failed: %s", errmsg != NULL ? errmsg : "");
        return;
    }
    if (status == TERN_ETIMEDOUT) {
        api_reply_error(r, 503, "ViewTimeout", "view \"%s\" of plugin \"%s\": %s", v->def->path,
                        v->plugin->name, errmsg != NULL ? errmsg : "no answer in time");
        return;
    }
    if (status != 0) {
        api_reply_error(r, 503, "ServiceUnavailable", "view \"%s\" of plugin \"%s\": %s",
                        v->def->path, v->plugin->name, errmsg != NULL ? errmsg : "Redis error");
        return;
    }
    if (reply->type == REDIS_REPLY_NIL) {
        api_reply_error(r, 404, "ResourceNotFound",
                        "%s does not exist (view \"%s\" of plugin \"%s\" found nothing)", r->path,
                        v->def->path, v->plugin->name);
        return;
    }
    if (plugin_view_streams(v)) {
        if (reply->type == REDIS_REPLY_STRING)
            http_view_stream_start(r, v, reply->str, reply->len);
        else
            reply_script_error(r, v, "%s",
                               "a streaming view's script answers JSON text {\"lines\", "
                               "\"follow\", \"after\"}");
        return;
    }
    if (reply->type == REDIS_REPLY_STRING) {
        if (view_text_ok(r, v, reply->str, reply->len))
            api_reply_json_text(r, 200, reply->str, reply->len);
        return;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 1 || reply->elements > 3 ||
        reply->element[0]->type != REDIS_REPLY_STRING ||
        (reply->elements >= 2 && reply->element[1]->type != REDIS_REPLY_STRING &&
         reply->element[1]->type != REDIS_REPLY_NIL) ||
        (reply->elements == 3 && reply->element[2]->type != REDIS_REPLY_INTEGER)) {
        reply_script_error(r, v, "%s",
                           "the script answered neither JSON text nor {json_text, next_marker "
                           "or false, count}");
        return;
    }
    const redisReply *text = reply->element[0];
    const redisReply *marker = reply->elements >= 2 && reply->element[1]->type == REDIS_REPLY_STRING
                                   ? reply->element[1]
                                   : NULL;
    if (marker != NULL && !marker_ok(marker)) {
        reply_script_error(r, v, "%s",
                           "the script answered a next marker that is empty, longer than "
                           "512 bytes or not printable ASCII");
        return;
    }
    if (!view_text_ok(r, v, text->str, text->len))
        return;
    if (marker != NULL) {
        char *m = xstrndup(marker->str, marker->len);
        api_add_header(r, "x-tern-next-marker", m);
        free(m);
    }
    if (reply->elements == 3) {
        char count[24];
        snprintf(count, sizeof count, "%lld", reply->element[2]->integer);
        api_add_header(r, "x-count", count);
    }
    api_reply_json_text(r, 200, text->str, text->len);
}

/* See http_request.h. */
void http_view_serve(api_req_t *r, const plugin_view_t *v)
{
    char err[256];
    json_t *given = api_query_all(r);
    const char *name;
    json_t *value;
    json_object_foreach(given, name, value)
    {
        if (!view_takes(v, name)) {
            char takes[256];
            view_params_text(v, takes, sizeof takes);
            api_reply_error(r, 409, "InvalidArgument",
                            "%.64s: view \"%s\" of plugin \"%s\" takes no such query parameter "
                            "(it takes %s)",
                            name, v->def->path, v->plugin->name, takes);
            json_decref(given);
            return;
        }
    }
    uint64_t limit, offset;
    int rc =
        api_query_uint(r, "limit", JOB_LIST_LIMIT_DEFAULT, UINT32_MAX, &limit, err, sizeof err);
    if (rc == 0)
        rc = api_query_uint(r, "offset", 0, LIST_PAGE_OFFSET_MAX, &offset, err, sizeof err);
    if (rc == 0 && limit == 0)
        rc = err_set(err, sizeof err, TERN_EINVAL, "limit: expected at least 1");
    if (rc != 0) {
        api_reply_error(r, 409, "InvalidArgument", "%s", err);
        json_decref(given);
        return;
    }
    if (limit > JOB_LIST_LIMIT_MAX)
        limit = JOB_LIST_LIMIT_MAX; /* as GET /jobs: more is taken as the most */
    const char *marker = json_string_value(json_object_get(given, "marker"));
    /* The script's parameters: those of the path, then the view's own query ones. */
    json_t *params = json_object();
    for (size_t i = 0; i < v->n_path_params && i < r->n_params; i++)
        json_object_set_new(params, v->path_params[i], json_string(r->params[i]));
    for (size_t i = 0; v->def->params != NULL && v->def->params[i] != NULL; i++) {
        json_t *q = json_object_get(given, v->def->params[i]);
        if (q != NULL)
            json_object_set(params, v->def->params[i], q);
    }
    char limit_s[24], offset_s[24];
    snprintf(limit_s, sizeof limit_s, "%llu", (unsigned long long)limit);
    snprintf(offset_s, sizeof offset_s, "%llu", (unsigned long long)offset);
    char *params_s = json_dumps(params, JSON_COMPACT);
    const char *args[] = {limit_s, offset_s, marker != NULL ? marker : "", params_s};
    size_t nkeys = 0;
    while (v->def->keys != NULL && v->def->keys[nkeys] != NULL)
        nkeys++;
    view_call_t *vc = xcalloc(1, sizeof *vc);
    vc->r = r;
    vc->view = v;
    view_runner_t *runner = api_view_runner(r);
    rc = runner == NULL
             ? TERN_ENOTCONN
             : view_runner_eval(runner, v->plugin->name, v->def->script, nkeys, v->def->keys,
                                TERN_ARRAY_SIZE(args), args, on_view_reply, vc);
    free(params_s);
    json_decref(params);
    json_decref(given);
    if (rc != 0) {
        free(vc);
        api_reply_error(r, 503, "ServiceUnavailable",
                        "view \"%s\" of plugin \"%s\": Redis is not reachable", v->def->path,
                        v->plugin->name);
    }
}
