/*
 * fuzz_job_request.c -- libFuzzer target for the body of POST /jobs: the input is
 * decoded as the API decodes bodies and read with job_request_parse.
 */
#include <stdint.h>
#include <stdlib.h>

#include "base/error.h"
#include "model/job_request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    json_t *body = NULL;
    if (size > 0) {
        body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
        if (body == NULL || !json_is_object(body)) {
            json_decref(body);
            return 0; /* The API answers 400 before the route sees such a body. */
        }
    }
    char err[1024];
    err[0] = '\0';
    job_create_req_t req;
    int rc = job_request_parse(body, &req, err, sizeof err);
    if (rc == 0) {
        /* Success yields a workflow and a params object. */
        if (req.workflow == NULL || !json_is_object(req.params))
            abort();
        json_decref((json_t *)req.params);
    } else if (rc != TERN_EINVAL || err[0] == '\0' || req.params != NULL) {
        abort();
    }
    json_decref(body);
    return 0;
}
