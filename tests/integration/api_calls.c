/*
 * api_calls.c -- calls of the HTTP API and expectations of their answers; see
 * api_calls.h.
 */
#include "api_calls.h"

#include <stdio.h>
#include <string.h>

#include "base/clock.h"

uint64_t itest_api_call(http_sync_t *h, http_sync_resp_t *out, const char *method, const char *path,
                        const char *body)
{
    uint64_t t0 = clock_wall_ms();
    int rc = http_sync_do(h, method, path, body, body != NULL ? strlen(body) : 0, NULL, out);
    if (rc != 0)
        fail_msg("%s %s: transport error: %s", method, path, out->error);
    return clock_wall_ms() - t0;
}

void itest_expect_status(const http_sync_resp_t *r, long status)
{
    if (r->status != status)
        fail_msg("expected %ld, got %ld: %s", status, r->status, r->body);
}

void itest_expect_error(const http_sync_resp_t *r, long status, const char *code,
                        const char *needle)
{
    if (r->status != status)
        fail_msg("expected %ld %s, got %ld: %s", status, code, r->status, r->body);
    assert_non_null(r->json);
    assert_string_equal(itest_str_of(r->json, "code"), code);
    if (needle != NULL && strstr(itest_str_of(r->json, "message"), needle) == NULL)
        fail_msg("message \"%s\" does not name \"%s\"", itest_str_of(r->json, "message"), needle);
}

void itest_api_create_ok(http_sync_t *h, const char *body, char uuid[40])
{
    http_sync_resp_t r;
    itest_api_call(h, &r, "POST", "/jobs", body);
    if (r.status != 201)
        fail_msg("create refused (%ld): %s", r.status, r.body);
    snprintf(uuid, 40, "%s", itest_str_of(r.json, "uuid"));
    http_sync_resp_dispose(&r);
}

void itest_api_cancel_ok(http_sync_t *h, itest_client_t *c, const char *uuid)
{
    http_sync_resp_t r;
    itest_api_call(h, &r, "POST", itest_fmt("/jobs/%s/cancel", uuid), NULL);
    if (r.status != 200)
        fail_msg("cancel %s (%ld): %s", uuid, r.status, r.body);
    http_sync_resp_dispose(&r);
    json_decref(itest_wait_finished_ok(c, uuid, 10000));
}
