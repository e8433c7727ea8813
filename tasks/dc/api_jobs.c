/*
 * api_jobs.c -- jobs a control task asks of the control's own API (api_jobs.h): the
 * volume jobs of a provision (provision_volumes.c) and a scheduled migration's
 * migrate-switch job (migration_schedule.c).
 */
#include "api_jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dc_state.h"

/* What an attempt keeps between its requests (attempts.h). */
typedef struct api_jobs {
    json_t *posts;       /* [{"uuid", "workflow", "target", "params"}] (owned) */
    size_t next;         /* the post being answered */
    json_t *result;      /* the step's result once all are answered (owned) */
    char *refused;       /* the body of the refusal a GET checks (owned) */
    long refused_status; /* its status */
    uint64_t requeue_ms; /* > 0: after the posts, run the step again after this */
    api_job_codes_t codes;
} api_jobs_t;

static void api_jobs_free(void *data)
{
    api_jobs_t *j = data;
    json_decref(j->posts);
    json_decref(j->result);
    free(j->refused);
    free(j);
}

static void post_next(tern_ctx *ctx, api_jobs_t *j);

static const char *post_field(const api_jobs_t *j, const char *key)
{
    return json_string_value(json_object_get(json_array_get(j->posts, j->next), key));
}

/* The attempt's outcome reported, what it kept is freed. */
static void jobs_finish(tern_ctx *ctx, api_jobs_t *j)
{
    const dc_state_t *s = tern_plugin_state(ctx);
    json_t *result = j->result;
    uint64_t requeue_ms = j->requeue_ms;
    j->result = NULL;
    attempts_end(s->attempts, ctx); /* frees j */
    if (requeue_ms > 0)
        tern_task_requeue(ctx, requeue_ms, result);
    else
        tern_task_done(ctx, result);
}

/* Fails the attempt with `code`: "<step>: <what> of <workflow> job <uuid>: <status>
 * <body>". */
static void jobs_fail(tern_ctx *ctx, api_jobs_t *j, const char *code, const char *what, long status,
                      const char *body)
{
    const dc_state_t *s = tern_plugin_state(ctx);
    const char *workflow = post_field(j, "workflow"), *uuid = post_field(j, "uuid");
    tern_task_fail(ctx, code, "%s: %s of %s job %s: %ld %.2000s", tern_step_name(ctx), what,
                   workflow != NULL ? workflow : "?", uuid != NULL ? uuid : "?", status,
                   body != NULL ? body : "");
    attempts_end(s->attempts, ctx); /* frees j */
}

void api_headers(const dc_state_t *s, char *auth, size_t authlen, const char *headers[3])
{
    size_t n = 0;
    headers[n++] = "Content-Type: application/json";
    if (s->api_token != NULL) {
        snprintf(auth, authlen, "Authorization: Bearer %s", s->api_token);
        headers[n++] = auth;
    }
    headers[n] = NULL;
}

/* The GET after a refusal: the job of this uuid with this target is the one asked for,
 * made by an earlier attempt (perhaps under a workflow version since replaced). */
static void on_job_read(tern_ctx *ctx, const tern_http_res *res, void *data)
{
    api_jobs_t *j = data;
    json_t *job = res->status == 200 ? json_loads(res->body, 0, NULL) : NULL;
    const char *target = json_string_value(json_object_get(job, "target"));
    const char *want = post_field(j, "target");
    bool same = target != NULL && want != NULL && strcmp(target, want) == 0;
    json_decref(job);
    if (!same) {
        jobs_fail(ctx, j, j->codes.refused, "POST /jobs", j->refused_status, j->refused);
        return;
    }
    free(j->refused);
    j->refused = NULL;
    j->next++;
    post_next(ctx, j);
}

static void on_job_posted(tern_ctx *ctx, const tern_http_res *res, void *data)
{
    api_jobs_t *j = data;
    const dc_state_t *s = tern_plugin_state(ctx);
    if (res->status == 200 || res->status == 201) {
        j->next++;
        post_next(ctx, j);
        return;
    }
    if (res->status == 0) {
        jobs_fail(ctx, j, j->codes.unavailable, "no answer to POST /jobs", 0, res->error);
        return;
    }
    if (res->status >= 500) {
        jobs_fail(ctx, j, j->codes.unavailable, "POST /jobs", res->status, res->body);
        return;
    }
    size_t len = res->body_len + 1;
    j->refused = malloc(len);
    if (j->refused == NULL) /* exhausted memory: the one failure the house lets abort */
        abort();
    snprintf(j->refused, len, "%s", res->body != NULL ? res->body : "");
    j->refused_status = res->status;
    char url[1024], auth[1024];
    const char *headers[3];
    api_headers(s, auth, sizeof auth, headers);
    snprintf(url, sizeof url, "%s/jobs/%s", s->api_url, post_field(j, "uuid"));
    tern_http_req req = {.size = sizeof req,
                         .method = "GET",
                         .url = url,
                         .headers = headers,
                         .timeout_ms = API_REQUEST_MS};
    if (tern_http_request(ctx, &req, on_job_read, j) != 0)
        jobs_fail(ctx, j, j->codes.unavailable, "GET /jobs/:uuid cannot be sent", 0, "");
}

static void post_next(tern_ctx *ctx, api_jobs_t *j)
{
    const dc_state_t *s = tern_plugin_state(ctx);
    if (j->next >= json_array_size(j->posts)) {
        jobs_finish(ctx, j);
        return;
    }
    char *body = json_dumps(json_array_get(j->posts, j->next), JSON_COMPACT);
    if (body == NULL) /* exhausted memory (each post is an object) */
        abort();
    char url[1024], auth[1024];
    const char *headers[3];
    api_headers(s, auth, sizeof auth, headers);
    snprintf(url, sizeof url, "%s/jobs", s->api_url);
    tern_http_req req = {.size = sizeof req,
                         .method = "POST",
                         .url = url,
                         .headers = headers,
                         .body = body,
                         .body_len = strlen(body),
                         .timeout_ms = API_REQUEST_MS};
    int rc = tern_http_request(ctx, &req, on_job_posted, j);
    free(body);
    if (rc != 0)
        jobs_fail(ctx, j, j->codes.unavailable, "POST /jobs cannot be sent", 0, "");
}

json_t *api_jobs_post(tern_ctx *ctx, json_t *posts, json_t *result, uint64_t requeue_ms,
                      const api_job_codes_t *codes)
{
    const dc_state_t *s = tern_plugin_state(ctx);
    if (json_array_size(posts) == 0) {
        json_decref(posts);
        if (requeue_ms > 0) {
            tern_task_requeue(ctx, requeue_ms, result);
            return NULL;
        }
        return result;
    }
    if (s == NULL || s->api_url == NULL) {
        const char *workflow =
            json_string_value(json_object_get(json_array_get(posts, 0), "workflow"));
        tern_task_fail(ctx, "NoApiUrl",
                       "%s: this runner's dc configuration has no \"api_url\", the API the %s "
                       "job is asked of",
                       tern_step_name(ctx), workflow != NULL ? workflow : "?");
        json_decref(posts);
        json_decref(result);
        return NULL;
    }
    api_jobs_t *j = calloc(1, sizeof *j);
    if (j == NULL)
        abort();
    *j = (api_jobs_t){.posts = posts, .result = result, .requeue_ms = requeue_ms, .codes = *codes};
    attempts_add(s->attempts, ctx, j, api_jobs_free);
    post_next(ctx, j);
    return NULL;
}
