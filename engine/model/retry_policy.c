/*
 * retry_policy.c -- retry policies: parsing a step's "retry" value and computing the delay
 * before each retry.
 *
 * This file owns the rules of a retry policy (which keys exist, their ranges, their
 * defaults) and the delay arithmetic. It does not schedule anything: the runner asks
 * retry_policy_next_delay() for a number and decides how to wait. Delays are computed in
 * floating point only for the exponential kind, where the nominal delay is compared
 * with the cap before it is converted, so a huge attempt number or factor saturates at
 * max_ms instead of overflowing.
 */
#include "model/retry_policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/describe.h"
#include "base/error.h"

#define DEFAULT_INITIAL_MS 1000u
#define DEFAULT_MAX_MS     60000u
#define DEFAULT_FACTOR     2.0

void retry_policy_default(retry_policy_t *p)
{
    p->max_attempts = 1;
    p->kind = BACKOFF_EXPONENTIAL;
    p->initial_ms = DEFAULT_INITIAL_MS;
    p->max_ms = DEFAULT_MAX_MS;
    p->factor = DEFAULT_FACTOR;
    p->jitter = true;
}

/* Reads an integer in [lo, hi] from v; messages name path.key and the bad value. */
static int get_uint(const json_t *v, const char *path, const char *key, uint32_t lo, uint32_t hi,
                    uint32_t *out, char *err, size_t errlen)
{
    char buf[64];
    if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)lo) {
        if (lo == 1)
            return err_set(err, errlen, TERN_EINVAL, "%s.%s: expected a positive integer, got %s",
                           path, key, describe_json(v, buf, sizeof buf));
        return err_set(err, errlen, TERN_EINVAL,
                       "%s.%s: expected an integer of at least %u, got %s", path, key, lo,
                       describe_json(v, buf, sizeof buf));
    }
    if (json_integer_value(v) > (json_int_t)hi)
        return err_set(err, errlen, TERN_EINVAL, "%s.%s: expected at most %u, got %s", path, key,
                       hi, describe_json(v, buf, sizeof buf));
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

static int parse_kind(const json_t *v, const char *path, backoff_kind_t *kind, char *err,
                      size_t errlen)
{
    static const struct {
        const char *name;
        backoff_kind_t kind;
    } kinds[] = {
        {"constant", BACKOFF_CONSTANT},
        {"linear", BACKOFF_LINEAR},
        {"exponential", BACKOFF_EXPONENTIAL},
    };
    const char *s = json_string_value(v);
    for (size_t i = 0; s != NULL && i < TERN_ARRAY_SIZE(kinds); i++) {
        if (strcmp(s, kinds[i].name) == 0) {
            *kind = kinds[i].kind;
            return 0;
        }
    }
    char buf[64];
    return err_set(err, errlen, TERN_EINVAL,
                   "%s.backoff: expected \"constant\", \"linear\" or \"exponential\", got %s", path,
                   describe_json(v, buf, sizeof buf));
}

static int parse_object(const json_t *v, const char *path, retry_policy_t *p, char *err,
                        size_t errlen)
{
    const char *key;
    const json_t *val;
    char buf[64];
    bool have_max = false;
    int rc;

    json_object_foreach((json_t *)v, key, val)
    {
        if (strcmp(key, "max_attempts") == 0) {
            rc = get_uint(val, path, key, 1, RETRY_MAX_ATTEMPTS, &p->max_attempts, err, errlen);
        } else if (strcmp(key, "backoff") == 0) {
            rc = parse_kind(val, path, &p->kind, err, errlen);
        } else if (strcmp(key, "initial_ms") == 0) {
            rc = get_uint(val, path, key, 1, RETRY_MAX_DELAY_MS, &p->initial_ms, err, errlen);
        } else if (strcmp(key, "max_ms") == 0) {
            rc = get_uint(val, path, key, 1, RETRY_MAX_DELAY_MS, &p->max_ms, err, errlen);
            have_max = true;
        } else if (strcmp(key, "factor") == 0) {
            if (!json_is_number(val) || !(json_number_value(val) > 1.0))
                return err_set(err, errlen, TERN_EINVAL,
                               "%s.factor: expected a number greater than 1, got %s", path,
                               describe_json(val, buf, sizeof buf));
            p->factor = json_number_value(val);
            rc = 0;
        } else if (strcmp(key, "jitter") == 0) {
            if (!json_is_boolean(val))
                return err_set(err, errlen, TERN_EINVAL,
                               "%s.jitter: expected true or false, got %s", path,
                               describe_json(val, buf, sizeof buf));
            p->jitter = json_is_true(val);
            rc = 0;
        } else {
            return err_set(err, errlen, TERN_EINVAL,
                           "%s.%s: unknown key (a retry policy has max_attempts, backoff, "
                           "initial_ms, max_ms, factor and jitter)",
                           path, key);
        }
        if (rc != 0)
            return rc;
    }

    /* A long first delay with no cap given raises the cap rather than being cut by a
     * default the operator never wrote; an explicit cap below it is a contradiction. */
    if (!have_max && p->max_ms < p->initial_ms)
        p->max_ms = p->initial_ms;
    if (p->max_ms < p->initial_ms)
        return err_set(err, errlen, TERN_EINVAL, "%s.max_ms: %u is less than initial_ms (%u)", path,
                       p->max_ms, p->initial_ms);
    return 0;
}

/* On failure *p is left as it was. In a policy object without "max_ms", an initial_ms
 * above the default cap raises the cap to initial_ms; an explicit max_ms below
 * initial_ms is refused. */
int retry_policy_parse(const json_t *v, const char *path, retry_policy_t *p, char *err,
                       size_t errlen)
{
    retry_policy_t tmp;
    char buf[64];
    int rc;

    retry_policy_default(&tmp);
    if (v == NULL)
        return err_set(err, errlen, TERN_EINVAL, "%s: missing", path);
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        if (n < 1 || n > RETRY_MAX_ATTEMPTS)
            return err_set(err, errlen, TERN_EINVAL,
                           "%s: expected a number of attempts from 1 to %d (1 = no retry), "
                           "got %s",
                           path, RETRY_MAX_ATTEMPTS, describe_json(v, buf, sizeof buf));
        tmp.max_attempts = (uint32_t)n;
    } else if (json_is_object(v)) {
        rc = parse_object(v, path, &tmp, err, errlen);
        if (rc != 0)
            return rc;
    } else {
        return err_set(err, errlen, TERN_EINVAL,
                       "%s: expected a number of attempts or a policy object, got %s", path,
                       describe_json(v, buf, sizeof buf));
    }
    *p = tmp;
    return 0;
}

/* b^e by squaring: O(log e) steps for any attempt number, and no libm. Overflow
 * gives infinity, which the caller compares with the cap. */
static double power(double b, uint64_t e)
{
    double r = 1.0;
    while (e != 0) {
        if (e & 1u)
            r *= b;
        b *= b;
        e >>= 1;
    }
    return r;
}

/* failed_attempt 0 is read as 1. With jitter the delay is at least ceil(d / 2), so a
 * delay of 1 ms stays 1 ms. */
uint64_t retry_policy_next_delay(const retry_policy_t *p, uint32_t failed_attempt, uint64_t rnd)
{
    uint64_t cap = p->max_ms < RETRY_MAX_DELAY_MS ? p->max_ms : RETRY_MAX_DELAY_MS;
    uint64_t n = failed_attempt > 0 ? failed_attempt : 1;
    uint64_t d;

    switch (p->kind) {
    case BACKOFF_LINEAR:
        /* initial_ms < 2^32 and n < 2^32: the product fits in 64 bits. */
        d = (uint64_t)p->initial_ms * n;
        break;
    case BACKOFF_EXPONENTIAL: {
        double x = (double)p->initial_ms * power(p->factor, n - 1);
        /* Infinity and NaN take the cap; a negative value (a hand-made policy with a
         * negative factor) is no delay rather than an undefined conversion. */
        if (!(x < (double)cap))
            d = cap;
        else
            d = x > 0.0 ? (uint64_t)x : 0;
        break;
    }
    case BACKOFF_CONSTANT:
    default:
        d = p->initial_ms;
        break;
    }
    if (p->initial_ms == 0)
        d = 0; /* only a hand-made policy; avoids 0 * infinity above */
    if (d > cap)
        d = cap;
    if (p->jitter && d > 0) {
        uint64_t lo = (d + 1) / 2; /* never sooner than half the nominal delay */
        d = lo + rnd % (d - lo + 1);
    }
    return d;
}
