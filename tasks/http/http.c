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
 * left at shutdown (calls.c). http.h lists the family's files, one concept each; this
 * one holds the descriptor.
 */
#include <tern/task.h>

#include "http.h"

static const char *const fatal_codes[] = {"HttpClientError",      "HttpUnexpectedStatus",
                                          "HttpResponseTooLarge", "NetworkNotAllowed",
                                          "InvalidArgument",      NULL};

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
