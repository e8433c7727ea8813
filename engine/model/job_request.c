/*
 * job_request.c -- the body of POST /jobs read into a job_create_req_t. See
 * job_request.h.
 */
#include "model/job_request.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/iso8601.h"

/* Reads an optional string member; fails naming it when it has another type. */
static int body_string(const json_t *body, const char *key, const char *what, const char **out,
                       char *err, size_t errlen)
{
    json_t *v = json_object_get(body, key);
    *out = NULL;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return err_set(err, errlen, TERN_EINVAL, "%s: expected %s", key, what);
    *out = json_string_value(v);
    return 0;
}

/* True when the text starts with a year of five or more digits ("10000-01-01",
 * "+10000-01-01"): a date ISO 8601 can write, but after the latest tern accepts. */
static bool iso_year_past_9999(const char *s)
{
    size_t n = 0;
    if (*s == '+')
        s++;
    while (s[n] >= '0' && s[n] <= '9')
        n++;
    return n > 4 && s[n] == '-';
}

/* exec_after: an ISO 8601 date (node-workflow) or milliseconds since the epoch, at
 * most ISO8601_MAX_MS: a later time would not read back as the text that was sent. */
static int body_exec_after(const json_t *body, uint64_t *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(body, "exec_after");
    *out = 0;
    if (v == NULL || json_is_null(v))
        return 0;
    bool read = false, too_late = false;
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        read = true;
    } else if (json_is_string(v)) {
        read = iso8601_parse_ms(json_string_value(v), out) == 0;
        /* "9999-12-31T23:00:00-05:00" reads, and is in the year 10000 in UTC. */
        too_late = !read && iso_year_past_9999(json_string_value(v));
    }
    if (read && *out <= ISO8601_MAX_MS)
        return 0;
    *out = 0;
    too_late = too_late || read;
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    int rc;
    if (too_late)
        rc = err_set(err, errlen, TERN_EINVAL,
                     "exec_after: %.80s is after 9999-12-31T23:59:59.999Z, the latest time "
                     "accepted (in milliseconds since the epoch: 253402300799999)",
                     text != NULL ? text : "?");
    else
        rc = err_set(err, errlen, TERN_EINVAL,
                     "exec_after: expected an ISO 8601 date such as \"2026-11-21T04:47:28Z\" "
                     "(or milliseconds since the epoch), got %.80s",
                     text != NULL ? text : "?");
    free(text);
    return rc;
}

/* node-workflow's mapping of a job body: its own members are taken as they are and
 * every other top-level member becomes a param. tern also takes a `params` object,
 * to which those members are added; a member given both ways with different values
 * is refused rather than one silently winning. Returns a new reference, or NULL with
 * the message in err: the body's own `params` object when nothing is added to it (not
 * to be changed; most bodies), else a new object. */
static json_t *body_params(const json_t *body, char *err, size_t errlen)
{
    static const char *const members[] = {"workflow", "target", "exec_after",     "locks",
                                          "params",   "uuid",   "post_back_urls", "num_attempts"};
    json_t *given = json_object_get(body, "params");
    if (given != NULL && !json_is_null(given) && !json_is_object(given)) {
        err_set(err, errlen, TERN_EINVAL, "params: expected an object");
        return NULL;
    }
    json_t *params = json_is_object(given) ? json_incref(given) : json_object();
    bool own = !json_is_object(given); /* params is a new object, ours to change */
    const char *key;
    json_t *value;
    /* json_object_foreach takes a non-const object; the loop only reads it. */
    json_t *members_of = (json_t *)body;
    json_object_foreach(members_of, key, value)
    {
        bool member = false;
        for (size_t i = 0; i < TERN_ARRAY_SIZE(members) && !member; i++)
            member = strcmp(key, members[i]) == 0;
        if (member)
            continue;
        json_t *old = json_object_get(params, key);
        if (old != NULL && !json_equal(old, value)) {
            err_set(err, errlen, TERN_EINVAL,
                    "%s: given both in params and at the top level, with different values", key);
            json_decref(params);
            return NULL;
        }
        if (!own) {
            /* The body's object is left as it is: members are added to a copy. */
            json_t *copy = json_deep_copy(params);
            json_decref(params);
            params = copy;
            own = true;
        }
        json_object_set(params, key, value);
    }
    return params;
}

int job_request_parse(const json_t *body, job_create_req_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (body == NULL)
        return err_set(err, errlen, TERN_EINVAL,
                       "workflow: required (a workflow uuid or name); the body is empty");
    const char *workflow, *target, *locks, *uuid;
    uint64_t exec_after;
    int rc;
    if ((rc = body_string(body, "workflow", "a workflow uuid or name (a string)", &workflow, err,
                          errlen)) != 0 ||
        (rc = body_string(body, "target", "a string", &target, err, errlen)) != 0 ||
        (rc = body_string(body, "locks", "a regular expression (a string)", &locks, err, errlen)) !=
            0 ||
        (rc = body_string(body, "uuid", "a UUID (a string)", &uuid, err, errlen)) != 0 ||
        (rc = body_exec_after(body, &exec_after, err, errlen)) != 0)
        return rc;
    if (workflow == NULL)
        return err_set(err, errlen, TERN_EINVAL, "workflow: required (a workflow uuid or name)");
    json_t *urls = json_object_get(body, "post_back_urls");
    json_t *params = body_params(body, err, errlen);
    if (params == NULL)
        return TERN_EINVAL;
    *out = (job_create_req_t){
        .workflow = workflow,
        .params = params,
        .target = target,
        .exec_after_ms = exec_after,
        .locks = locks,
        .uuid = uuid,
        .post_back_urls = json_is_null(urls) ? NULL : urls,
    };
    return 0;
}
