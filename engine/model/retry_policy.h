/*
 * retry_policy.h -- retry policies of steps and the delay before each retry.
 *
 * A step's "retry" is either a count (node-workflow: the total number of attempts,
 * 1 = no retry) or a policy object:
 *   {"max_attempts": 5, "backoff": "exponential"|"linear"|"constant",
 *    "initial_ms": 200, "max_ms": 10000, "factor": 2.0, "jitter": true}
 * Missing fields take the defaults below. Jitter is "full jitter" over the upper half:
 * the delay is uniform in [d/2, d], so retries of many jobs that failed together
 * spread out while none retries sooner than half the nominal delay.
 */
#ifndef TERN_RETRY_POLICY_H
#define TERN_RETRY_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

typedef enum backoff_kind {
    BACKOFF_CONSTANT,
    BACKOFF_LINEAR,      /* initial_ms * n */
    BACKOFF_EXPONENTIAL, /* initial_ms * factor^(n-1) */
} backoff_kind_t;

typedef struct retry_policy {
    uint32_t max_attempts; /* total attempts, >= 1; default 1 */
    backoff_kind_t kind;   /* default exponential */
    uint32_t initial_ms;   /* default 1000 */
    uint32_t max_ms;       /* cap of one delay; default 60000 */
    double factor;         /* exponential growth, > 1; default 2.0 */
    bool jitter;           /* default true */
} retry_policy_t;

#define RETRY_MAX_ATTEMPTS 1000
#define RETRY_MAX_DELAY_MS (24u * 3600u * 1000u)

/* Fills *p with the defaults (one attempt, exponential 1 s .. 60 s, jitter). */
void retry_policy_default(retry_policy_t *p);

/* Parses a step's "retry" value (a count or a policy object) into *p. `path` is the
 * JSON path of the value for messages ("chain[1].retry"). Returns 0, or TERN_EINVAL
 * with "chain[1].retry.initial_ms: expected a positive integer, got -5" in err. */
int retry_policy_parse(const json_t *v, const char *path, retry_policy_t *p, char *err,
                       size_t errlen);

/* Delay in ms before the attempt that follows failed attempt number `failed_attempt`
 * (1 = the first attempt failed). `rnd` is a uniformly random 64-bit value, used only
 * when the policy has jitter; tests pass fixed values. Never exceeds max_ms. */
uint64_t retry_policy_next_delay(const retry_policy_t *p, uint32_t failed_attempt, uint64_t rnd);

#endif /* TERN_RETRY_POLICY_H */
