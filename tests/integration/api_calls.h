/*
 * api_calls.h -- calls of ternd's HTTP API through an http_sync client, and what the
 * integration tests expect of the answers: a status, or an error in the restify
 * shape ({"code": ..., "message": ...}).
 *
 * Each function fails the running cmocka test (fail_msg) when the expectation does
 * not hold, naming what was expected and what came, body included.
 */
#ifndef TERN_ITEST_API_CALLS_H
#define TERN_ITEST_API_CALLS_H

#include <stdint.h>

#include "harness.h"
#include "http_sync.h"

/* Sends `method` `path` with `body` (NULL: none) on `h`; fails the test on a transport
 * error (which includes no answer within http_sync's 15 s). Fills *out (the caller
 * disposes it). Returns how long the answer took in ms. */
uint64_t itest_api_call(http_sync_t *h, http_sync_resp_t *out, const char *method, const char *path,
                        const char *body);

/* Asserts the answer's status. */
void itest_expect_status(const http_sync_resp_t *r, long status);
/* Asserts an error answer: status, restify code, and a message naming `needle` (NULL:
 * any message). */
void itest_expect_error(const http_sync_resp_t *r, long status, const char *code,
                        const char *needle);

/* Creates a job through POST /jobs with `body`; anything but 201 fails the test. The
 * job's uuid goes to uuid. */
void itest_api_create_ok(http_sync_t *h, const char *body, char uuid[40]);
/* Cancels the job through POST /jobs/<uuid>/cancel (anything but 200 fails the test),
 * then waits on client `c` (at most 10 s) until it has finished. */
void itest_api_cancel_ok(http_sync_t *h, itest_client_t *c, const char *uuid);

#endif /* TERN_ITEST_API_CALLS_H */
