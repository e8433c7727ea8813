/*
 * workflow.c -- parsing and validation of workflow definitions, and their model.
 *
 * This file owns the rules of a definition: which keys exist at the workflow, step,
 * fallback and hold level, their types and ranges, the names and their uniqueness,
 * which template roots each part may use, and the size limits. It builds two things
 * at once: the normalized document (a deep copy with defaults written out, the retry
 * policy spelled as an object and each fallback named "<step>.fallback"), and the
 * model (workflow_t) whose strings and argument values are borrowed from that
 * document. It does not know which tasks exist (the caller's check function does) and
 * it does not expand templates (template.c does, when a job runs).
 *
 * The normalized document is itself a valid definition: parsing it again gives the
 * same model, which is what lets a job carry a frozen copy and a runner rebuild the
 * model from it. For that reason a fallback may carry a "name" key, but only the
 * "<step>.fallback" name this file writes there.
 *
 * Validation stops at the first fault. Messages start with the JSON path of the fault
 * and name the bad value; limits name the limit and the actual count.
 */
#include "model/workflow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/describe.h"
#include "base/error.h"
#include "base/ident.h"
#include "model/schedule.h"
#include "model/template.h"

#define TIMEOUT_MAX_S (365.0 * 24 * 3600) /* one year, in seconds */

/* The roots each part of a definition may name in its templates. */
#define ROOTS_WORKFLOW_HOLDS (TEMPLATE_PARAMS | TEMPLATE_JOB | TEMPLATE_ADMISSION)
#define ROOTS_CHAIN                                                                                \
    (TEMPLATE_PARAMS | TEMPLATE_STATE | TEMPLATE_JOB | TEMPLATE_STEPS | TEMPLATE_ADMISSION)
#define ROOTS_BRANCH    (ROOTS_CHAIN | TEMPLATE_ERROR)
#define ROOTS_ADMISSION (TEMPLATE_PARAMS | TEMPLATE_JOB | TEMPLATE_ADMISSION)

typedef struct parser {
    workflow_task_check_fn check;
    void *check_data;
    char *err;
    size_t errlen;
    json_t *seen; /* step name -> path of the step that first used it */
    /* The names of the workflow's admission checks (borrowed from its doc), which every
     * step and the workflow's holds may name. */
    const char **admission;
    size_t n_admission;
} parser_t;

/* What a step sees when it is parsed: its place and the steps that run before it. */
typedef struct step_scope {
    wf_phase_t phase;
    size_t index;
    unsigned roots;
    const char *const *known;
    size_t n_known;
    const char *const *admission; /* the admission checks that run before it */
    size_t n_admission;
} step_scope_t;

/* What the templates of a part in scope `sc` may name. */
static template_names_t scope_names(const step_scope_t *sc, unsigned roots)
{
    template_names_t names = {
        .roots = roots,
        .steps = sc->known,
        .n_steps = sc->n_known,
        .admission = sc->admission,
        .n_admission = sc->n_admission,
    };
    return names;
}

static int fail(parser_t *ps, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(parser_t *ps, int code, const char *fmt, ...)
{
    if (ps->err != NULL && ps->errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ps->err, ps->errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

#define DESCRIBE(v) describe_json((v), (char[64]){0}, 64)

/* ---- small validators ----------------------------------------------------------- */

static bool is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* [A-Za-z0-9][A-Za-z0-9_.-]{0,127}, without '.' when allow_dot is false. */
static bool valid_name(const char *s, bool allow_dot)
{
    size_t n = strlen(s);
    if (n == 0 || n > WORKFLOW_NAME_MAX || !is_alnum(s[0]))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!is_alnum(s[i]) && s[i] != '_' && s[i] != '-' && !(allow_dot && s[i] == '.'))
            return false;
    return true;
}

/* [0-9A-Za-z.+-]{1,64} */
static bool valid_version(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_alnum(s[i]) && s[i] != '.' && s[i] != '+' && s[i] != '-')
            return false;
    return true;
}

/* [a-z0-9_:.-]{1,64} */
bool workflow_queue_valid(const char *s, size_t n)
{
    if (n == 0 || n > WORKFLOW_QUEUE_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
              s[i] == '-' || s[i] == ':' || s[i] == '.'))
            return false;
    return true;
}

/* [a-z][a-z0-9_]* ending at s + n. */
static bool valid_ident(const char *s, size_t n)
{
    if (n == 0 || !(s[0] >= 'a' && s[0] <= 'z'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return false;
    return true;
}

/* "family.entry" */
static bool valid_task(const char *s)
{
    const char *dot = strchr(s, '.');
    return dot != NULL && valid_ident(s, (size_t)(dot - s)) &&
           valid_ident(dot + 1, strlen(dot + 1));
}

/* Refuses the first key of obj that is not in `allowed` (NULL-terminated). `what` says
 * what the object is for the message ("a step has name, task, ..."). */
static int check_keys(parser_t *ps, const json_t *obj, const char *path, const char *const *allowed,
                      const char *what)
{
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)obj, key, val)
    {
        bool ok = false;
        for (size_t i = 0; allowed[i] != NULL && !ok; i++)
            ok = strcmp(key, allowed[i]) == 0;
        if (ok)
            continue;
        const char *sep = path[0] != '\0' ? "." : "";
        if (strcmp(key, "body") == 0 && path[0] != '\0')
            return fail(ps, TERN_EINVAL,
                        "%s%sbody: code in workflow definitions is not supported; name a task "
                        "of a loaded plugin (\"family.entry\")",
                        path, sep);
        return fail(ps, TERN_EINVAL, "%s%s%s: unknown key; %s", path, sep, key, what);
    }
    return 0;
}

/* Reads an optional string member; *out stays NULL when the key is absent. */
static int get_string(parser_t *ps, const json_t *obj, const char *path, const char *key,
                      const json_t **out)
{
    const json_t *v = json_object_get(obj, key);
    const char *sep = path[0] != '\0' ? "." : "";
    *out = NULL;
    if (v == NULL)
        return 0;
    if (!json_is_string(v))
        return fail(ps, TERN_EINVAL, "%s%s%s: expected a string, got %s", path, sep, key,
                    DESCRIBE(v));
    *out = v;
    return 0;
}

static int get_bool(parser_t *ps, const json_t *obj, const char *path, const char *key, bool dflt,
                    bool *out)
{
    const json_t *v = json_object_get(obj, key);
    *out = dflt;
    if (v == NULL)
        return 0;
    if (!json_is_boolean(v))
        return fail(ps, TERN_EINVAL, "%s.%s: expected true or false, got %s", path, key,
                    DESCRIBE(v));
    *out = json_is_true(v);
    return 0;
}

/* A timeout in seconds (integer or real) greater than 0 and at most a year. */
static int get_timeout(parser_t *ps, const json_t *v, const char *path, uint64_t *ms)
{
    *ms = 0;
    if (v == NULL)
        return 0;
    if (!json_is_number(v) || !(json_number_value(v) > 0.0))
        return fail(ps, TERN_EINVAL, "%s: expected a number of seconds greater than 0, got %s",
                    path, DESCRIBE(v));
    double s = json_number_value(v);
    if (s > TIMEOUT_MAX_S)
        return fail(ps, TERN_EINVAL, "%s: at most %.0f seconds (365 days), got %s", path,
                    TIMEOUT_MAX_S, DESCRIBE(v));
    *ms = (uint64_t)(s * 1000.0 + 0.5);
    if (*ms == 0)
        *ms = 1;
    return 0;
}

/* ---- holds ---------------------------------------------------------------------- */

static const char *const hold_keys[] = {"resource", "capacity", NULL};

/* Parses a "holds" array at `path`. On success *nout is its normalized copy (a new
 * reference) and *holds and *n the model, whose resources are borrowed from *nout. */
static int parse_holds(parser_t *ps, const json_t *v, const char *path, const step_scope_t *sc,
                       json_t **nout, wf_hold_t **holds, size_t *n)
{
    char ipath[192];
    json_t *norm = NULL, *item;
    wf_hold_t *arr = NULL;
    size_t i, count;
    int rc = 0;

    if (!json_is_array(v))
        return fail(ps, TERN_EINVAL, "%s: expected an array of resource names, got %s", path,
                    DESCRIBE(v));
    count = json_array_size(v);
    if (count > WORKFLOW_MAX_HOLDS)
        return fail(ps, TERN_E2BIG, "%s: %zu holds, over the limit of %d (WORKFLOW_MAX_HOLDS)",
                    path, count, WORKFLOW_MAX_HOLDS);

    norm = json_array();
    arr = xcalloc(count, sizeof *arr);
    json_array_foreach(v, i, item)
    {
        const json_t *res;
        json_t *nitem;
        uint32_t capacity = 1;
        const char *capacity_template = NULL;

        snprintf(ipath, sizeof ipath, "%s[%zu]", path, i);
        if (json_is_string(item)) {
            res = item;
            nitem = json_deep_copy(item);
        } else if (json_is_object(item)) {
            rc = check_keys(ps, item, ipath, hold_keys, "a hold has resource and capacity");
            if (rc != 0)
                goto Error;
            const json_t *cap = json_object_get(item, "capacity");
            res = json_object_get(item, "resource");
            if (res == NULL) {
                rc = fail(ps, TERN_EINVAL, "%s.resource: missing; a hold names a resource", ipath);
                goto Error;
            }
            if (!json_is_string(res)) {
                rc = fail(ps, TERN_EINVAL, "%s.resource: expected a string, got %s", ipath,
                          DESCRIBE(res));
                goto Error;
            }
            if (cap != NULL && json_is_string(cap)) {
                /* A capacity the job's inputs give: checked as the resource's template
                 * is, expanded and bounded when the job (or the step) takes it. */
                char cpath[224];
                snprintf(cpath, sizeof cpath, "%s.capacity", ipath);
                if (!template_present(json_string_value(cap))) {
                    rc = fail(ps, TERN_EINVAL,
                              "%s: expected an integer from 1 to %d or a template of one, got %s",
                              cpath, WORKFLOW_HOLD_CAPACITY_MAX, DESCRIBE(cap));
                    goto Error;
                }
                template_names_t cnames = scope_names(sc, sc->roots);
                rc = template_check_names(cap, cpath, &cnames, ps->err, ps->errlen);
                if (rc != 0)
                    goto Error;
                capacity_template = json_string_value(cap);
            } else if (cap != NULL) {
                if (!json_is_integer(cap) || json_integer_value(cap) < 1 ||
                    json_integer_value(cap) > WORKFLOW_HOLD_CAPACITY_MAX) {
                    rc = fail(ps, TERN_EINVAL,
                              "%s.capacity: expected an integer from 1 to %d, got %s", ipath,
                              WORKFLOW_HOLD_CAPACITY_MAX, DESCRIBE(cap));
                    goto Error;
                }
                capacity = (uint32_t)json_integer_value(cap);
            }
            nitem = json_object();
            json_object_set_new(nitem, "resource", json_deep_copy(res));
            if (capacity_template != NULL)
                json_object_set_new(nitem, "capacity", json_string(capacity_template));
            else
                json_object_set_new(nitem, "capacity", json_integer(capacity));
            snprintf(ipath + strlen(ipath), sizeof ipath - strlen(ipath), ".resource");
        } else {
            rc = fail(ps, TERN_EINVAL,
                      "%s: expected a resource name or {\"resource\": name, \"capacity\": n}, "
                      "got %s",
                      ipath, DESCRIBE(item));
            goto Error;
        }
        json_array_append_new(norm, nitem);
        if (json_string_length(res) == 0) {
            rc = fail(ps, TERN_EINVAL, "%s: expected a resource name, got \"\"", ipath);
            goto Error;
        }
        template_names_t names = scope_names(sc, sc->roots);
        rc = template_check_names(res, ipath, &names, ps->err, ps->errlen);
        if (rc != 0)
            goto Error;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(arr[j].resource, json_string_value(res)) == 0) {
                rc = fail(ps, TERN_EINVAL, "%s[%zu]: duplicate hold %s (first at %s[%zu])", path, i,
                          DESCRIBE(res), path, j);
                goto Error;
            }
        }
        arr[i].resource =
            json_string_value(json_is_string(nitem) ? nitem : json_object_get(nitem, "resource"));
        arr[i].capacity = capacity;
        if (capacity_template != NULL)
            arr[i].capacity_template =
                json_string_value(json_object_get(nitem, "capacity")); /* borrowed from norm */
    }
    *nout = norm;
    *holds = arr;
    *n = count;
    return 0;

Error:
    free(arr);
    json_decref(norm);
    return rc;
}

/* ---- steps ---------------------------------------------------------------------- */

static const char *const step_keys[] = {"name",  "task",     "args",        "timeout",
                                        "retry", "fallback", "idempotent",  "isolate",
                                        "holds", "queue",    "description", NULL};
static const char *const fallback_keys[] = {"name", "task", "args", "timeout", NULL};

#define STEP_KEYS_TEXT                                                                             \
    "a step has name, task, args, timeout, retry, fallback, idempotent, isolate, holds, "          \
    "queue and description"

/* Calls the caller's task check for the step at `path` ("chain[1]", "chain[1].fallback"):
 * the checker names what it refuses below it ("chain[1].task", "chain[1].args.msg"). */
static int check_task(parser_t *ps, const char *task, const json_t *args, const char *path)
{
    if (ps->check == NULL)
        return 0;
    if (ps->err != NULL && ps->errlen > 0)
        ps->err[0] = '\0';
    int rc = ps->check(ps->check_data, task, args, path, ps->err, ps->errlen);
    if (rc == 0)
        return 0;
    if (rc > 0)
        rc = TERN_EINVAL;
    if (ps->err != NULL && ps->errlen > 0 && ps->err[0] == '\0')
        fail(ps, rc, "%s.task: task \"%s\" refused", path, task);
    return rc;
}

/* Reads the required "task" member of obj at path. */
static int get_task(parser_t *ps, const json_t *obj, const char *path, const json_t **out)
{
    int rc = get_string(ps, obj, path, "task", out);
    if (rc != 0)
        return rc;
    if (*out == NULL)
        return fail(ps, TERN_EINVAL,
                    "%s.task: missing; name a task of a loaded plugin "
                    "(\"family.entry\")",
                    path);
    if (!valid_task(json_string_value(*out)))
        return fail(ps, TERN_EINVAL,
                    "%s.task: expected \"family.entry\" (each [a-z][a-z0-9_]*), got %s", path,
                    DESCRIBE(*out));
    return 0;
}

/* Reads "args" (default {}) and checks its templates; *out is a new reference. */
static int get_args(parser_t *ps, const json_t *obj, const char *path, unsigned roots,
                    const step_scope_t *sc, json_t **out)
{
    char apath[192];
    const json_t *args = json_object_get(obj, "args");
    snprintf(apath, sizeof apath, "%s.args", path);
    *out = NULL;
    if (args != NULL) {
        template_names_t names = scope_names(sc, roots);
        int rc = template_check_names(args, apath, &names, ps->err, ps->errlen);
        if (rc != 0)
            return rc;
    }
    *out = args != NULL ? json_deep_copy(args) : json_object();
    return 0;
}

static json_t *policy_json(const retry_policy_t *p)
{
    static const char *const kinds[] = {
        [BACKOFF_CONSTANT] = "constant",
        [BACKOFF_LINEAR] = "linear",
        [BACKOFF_EXPONENTIAL] = "exponential",
    };
    return json_pack("{s:I, s:s, s:I, s:I, s:f, s:b}", "max_attempts", (json_int_t)p->max_attempts,
                     "backoff", kinds[p->kind], "initial_ms", (json_int_t)p->initial_ms, "max_ms",
                     (json_int_t)p->max_ms, "factor", p->factor, "jitter", p->jitter);
}

/* Parses the fallback of the step at `path` (named `step_name`). On success *nout is
 * its normalized object and *out the model, borrowing from *nout. The fallback's
 * timeout defaults to its step's; it runs once, is idempotent and is isolated when its
 * step is. */
static int parse_fallback(parser_t *ps, const json_t *v, const char *path, const char *step_name,
                          const json_t *step_timeout, bool isolate, const step_scope_t *sc,
                          json_t **nout, wf_step_t **out)
{
    char fpath[160], tpath[192];
    const json_t *task, *name, *timeout;
    json_t *args = NULL, *norm = NULL;
    wf_step_t *fb = NULL;
    char *fname = xasprintf("%s.fallback", step_name);
    unsigned roots = sc->roots | TEMPLATE_ERROR;
    int rc;

    snprintf(fpath, sizeof fpath, "%s.fallback", path);
    if (json_is_string(v)) {
        rc = fail(ps, TERN_EINVAL,
                  "%s: code in workflow definitions is not supported; a fallback is an object "
                  "{\"task\": \"family.entry\", \"args\": {...}, \"timeout\": seconds}",
                  fpath);
        goto Done;
    }
    if (!json_is_object(v)) {
        rc = fail(ps, TERN_EINVAL,
                  "%s: expected an object {\"task\", \"args\", \"timeout\"}, got %s", fpath,
                  DESCRIBE(v));
        goto Done;
    }
    if ((rc = check_keys(ps, v, fpath, fallback_keys, "a fallback has task, args and timeout")) !=
        0)
        goto Done;
    if ((rc = get_string(ps, v, fpath, "name", &name)) != 0)
        goto Done;
    if (name != NULL && strcmp(json_string_value(name), fname) != 0) {
        rc = fail(ps, TERN_EINVAL, "%s.name: a fallback is named after its step (\"%s\"), got %s",
                  fpath, fname, DESCRIBE(name));
        goto Done;
    }
    if ((rc = get_task(ps, v, fpath, &task)) != 0)
        goto Done;
    if ((rc = get_args(ps, v, fpath, roots, sc, &args)) != 0)
        goto Done;
    timeout = json_object_get(v, "timeout");
    snprintf(tpath, sizeof tpath, "%s.timeout", fpath);
    fb = xcalloc(1, sizeof *fb);
    if (timeout == NULL)
        timeout = step_timeout; /* already checked as the step's timeout */
    if ((rc = get_timeout(ps, timeout, tpath, &fb->timeout_ms)) != 0)
        goto Done;

    norm = json_object();
    json_object_set_new(norm, "name", json_string(fname));
    json_object_set_new(norm, "task", json_deep_copy(task));
    json_object_set(norm, "args", args);
    if (timeout != NULL)
        json_object_set_new(norm, "timeout", json_deep_copy(timeout));
    if ((rc = check_task(ps, json_string_value(task), args, fpath)) != 0)
        goto Done;

    fb->name = json_string_value(json_object_get(norm, "name"));
    fb->task = json_string_value(json_object_get(norm, "task"));
    fb->args = json_object_get(norm, "args");
    retry_policy_default(&fb->retry);
    fb->idempotent = true;
    fb->isolate = isolate;
    *nout = norm;
    *out = fb;
    norm = NULL;
    fb = NULL;

Done:
    json_decref(norm);
    json_decref(args);
    free(fb);
    free(fname);
    return rc;
}

/* Checks a step's "queue" (at path.queue): a literal is a queue name; a template must
 * name what the step's holds may (it is expanded when the step is about to run, see
 * runner.c), and its value is checked then. */
static int check_step_queue(parser_t *ps, const json_t *queue, const char *path,
                            const step_scope_t *sc)
{
    char qpath[192];
    snprintf(qpath, sizeof qpath, "%s.queue", path);
    const char *s = json_string_value(queue);
    if (!template_present(s)) {
        if (!workflow_queue_valid(s, json_string_length(queue)))
            return fail(ps, TERN_EINVAL, "%s: expected " WORKFLOW_QUEUE_RULE ", got %s", qpath,
                        DESCRIBE(queue));
        return 0;
    }
    template_names_t names = scope_names(sc, sc->roots & ~(unsigned)TEMPLATE_ERROR);
    return template_check_names(queue, qpath, &names, ps->err, ps->errlen);
}

/* Checks a step name and records it; refuses a name used by an earlier step. */
static int register_name(parser_t *ps, const json_t *name, const char *path)
{
    const char *s = json_string_value(name);
    if (!valid_name(s, false))
        return fail(ps, TERN_EINVAL,
                    "%s.name: expected a step name (a letter or digit, then up to %d letters, "
                    "digits, '_' or '-'%s), got %s",
                    path, WORKFLOW_NAME_MAX - 1,
                    strchr(s, '.') != NULL ? "; '.' is kept for \"<step>.fallback\"" : "",
                    DESCRIBE(name));
    const json_t *first = json_object_get(ps->seen, s);
    if (first != NULL)
        return fail(ps, TERN_EINVAL, "%s.name: duplicate step name \"%s\" (first at %s)", path, s,
                    json_string_value(first));
    json_object_set_new(ps->seen, s, json_string(path));
    return 0;
}

/* Parses one step. On success *nout is its normalized object and *out (a slot of the
 * workflow's array) the model, borrowing from *nout. */
static int parse_step(parser_t *ps, const json_t *v, const step_scope_t *sc, json_t **nout,
                      wf_step_t *out)
{
    char path[64], sub[192];
    const json_t *name, *task, *desc, *timeout, *retry, *fallback, *holds, *queue;
    json_t *args = NULL, *nretry = NULL, *nfallback = NULL, *nholds = NULL, *norm = NULL;
    int rc;

    snprintf(path, sizeof path, "%s[%zu]", workflow_phase_name(sc->phase), sc->index);
    if (!json_is_object(v))
        return fail(ps, TERN_EINVAL, "%s: expected a step object, got %s", path, DESCRIBE(v));
    if ((rc = check_keys(ps, v, path, step_keys, STEP_KEYS_TEXT)) != 0)
        goto Done;

    if ((rc = get_string(ps, v, path, "name", &name)) != 0)
        goto Done;
    if (name == NULL) {
        rc = fail(ps, TERN_EINVAL, "%s.name: missing; every step needs a name", path);
        goto Done;
    }
    if ((rc = register_name(ps, name, path)) != 0)
        goto Done;
    if ((rc = get_task(ps, v, path, &task)) != 0)
        goto Done;
    if ((rc = get_string(ps, v, path, "description", &desc)) != 0)
        goto Done;
    if ((rc = get_args(ps, v, path, sc->roots, sc, &args)) != 0)
        goto Done;

    timeout = json_object_get(v, "timeout");
    snprintf(sub, sizeof sub, "%s.timeout", path);
    if ((rc = get_timeout(ps, timeout, sub, &out->timeout_ms)) != 0)
        goto Done;

    retry_policy_default(&out->retry);
    retry = json_object_get(v, "retry");
    if (retry != NULL) {
        snprintf(sub, sizeof sub, "%s.retry", path);
        if ((rc = retry_policy_parse(retry, sub, &out->retry, ps->err, ps->errlen)) != 0)
            goto Done;
        nretry = policy_json(&out->retry);
    }

    if ((rc = get_bool(ps, v, path, "idempotent", true, &out->idempotent)) != 0)
        goto Done;
    if ((rc = get_bool(ps, v, path, "isolate", false, &out->isolate)) != 0)
        goto Done;

    fallback = json_object_get(v, "fallback");
    if (fallback != NULL &&
        (rc = parse_fallback(ps, fallback, path, json_string_value(name), timeout, out->isolate, sc,
                             &nfallback, &out->fallback)) != 0)
        goto Done;

    holds = json_object_get(v, "holds");
    if (holds != NULL) {
        step_scope_t hsc = *sc;
        hsc.roots &= ~(unsigned)TEMPLATE_ERROR;
        snprintf(sub, sizeof sub, "%s.holds", path);
        if ((rc = parse_holds(ps, holds, sub, &hsc, &nholds, &out->holds, &out->n_holds)) != 0)
            goto Done;
    }

    if ((rc = get_string(ps, v, path, "queue", &queue)) != 0)
        goto Done;
    if (queue != NULL && (rc = check_step_queue(ps, queue, path, sc)) != 0)
        goto Done;

    if ((rc = check_task(ps, json_string_value(task), args, path)) != 0)
        goto Done;

    /* The normalized step, in a fixed key order. */
    norm = json_object();
    json_object_set_new(norm, "name", json_deep_copy(name));
    json_object_set_new(norm, "task", json_deep_copy(task));
    if (desc != NULL)
        json_object_set_new(norm, "description", json_deep_copy(desc));
    json_object_set(norm, "args", args);
    if (timeout != NULL)
        json_object_set_new(norm, "timeout", json_deep_copy(timeout));
    if (nretry != NULL)
        json_object_set(norm, "retry", nretry);
    if (nfallback != NULL)
        json_object_set(norm, "fallback", nfallback);
    json_object_set_new(norm, "idempotent", json_boolean(out->idempotent));
    json_object_set_new(norm, "isolate", json_boolean(out->isolate));
    if (nholds != NULL)
        json_object_set(norm, "holds", nholds);
    if (queue != NULL)
        json_object_set_new(norm, "queue", json_deep_copy(queue));

    out->name = json_string_value(json_object_get(norm, "name"));
    out->queue = json_string_value(json_object_get(norm, "queue"));
    if (out->fallback != NULL)
        out->fallback->queue = out->queue;
    out->task = json_string_value(json_object_get(norm, "task"));
    out->args = json_object_get(norm, "args");
    *nout = norm;

Done:
    json_decref(args);
    json_decref(nretry);
    json_decref(nfallback);
    json_decref(nholds);
    return rc;
}

/* Parses the chain of `phase` (key `key` of doc) into wf and the normalized doc. */
static int parse_phase(parser_t *ps, const json_t *doc, wf_phase_t phase, workflow_t *wf,
                       const char **chain_names)
{
    const char *key = workflow_phase_name(phase);
    const json_t *arr = json_object_get(doc, key);
    const char **known = NULL;
    size_t base = 0, n;
    json_t *norm = NULL;
    int rc = 0;

    if (arr == NULL) {
        if (phase == WF_CHAIN)
            return fail(ps, TERN_EINVAL, "chain: missing; a workflow needs a chain of steps");
        return 0;
    }
    if (!json_is_array(arr))
        return fail(ps, TERN_EINVAL, "%s: expected an array of steps, got %s", key, DESCRIBE(arr));
    n = json_array_size(arr);
    if (n == 0 && phase == WF_CHAIN)
        return fail(ps, TERN_EINVAL, "chain: empty; a workflow needs at least one step");
    if (n > WORKFLOW_MAX_STEPS)
        return fail(ps, TERN_E2BIG, "%s: %zu steps, over the limit of %d (WORKFLOW_MAX_STEPS)", key,
                    n, WORKFLOW_MAX_STEPS);

    /* Chain steps may name the chain steps before them; onerror and oncancel steps
     * every chain step and the steps of their own branch before them. */
    if (phase != WF_CHAIN)
        base = wf->n_steps[WF_CHAIN];
    known = xcalloc(base + n, sizeof *known);
    if (base > 0)
        memcpy(known, chain_names, base * sizeof *known);

    wf->steps[phase] = xcalloc(n, sizeof(wf_step_t));
    wf->n_steps[phase] = n;
    norm = json_array();
    for (size_t i = 0; i < n; i++) {
        step_scope_t sc = {
            .phase = phase,
            .index = i,
            .roots = phase == WF_CHAIN ? ROOTS_CHAIN : ROOTS_BRANCH,
            .known = known,
            .n_known = base + i,
            .admission = ps->admission,
            .n_admission = ps->n_admission,
        };
        json_t *nstep = NULL;
        rc = parse_step(ps, json_array_get(arr, i), &sc, &nstep, &wf->steps[phase][i]);
        if (rc != 0)
            goto Done;
        json_array_append_new(norm, nstep);
        known[base + i] = wf->steps[phase][i].name;
        if (phase == WF_CHAIN)
            chain_names[i] = wf->steps[phase][i].name;
    }
    json_object_set(wf->doc, key, norm);

Done:
    json_decref(norm);
    free(known);
    return rc;
}

/* ---- admission checks ------------------------------------------------------------ */

static const char *const admission_keys[] = {"name",    "task",        "args", "timeout",
                                             "isolate", "description", NULL};

/* Parses one admission check at `path` into *out (borrowing from *nout, its normalized
 * object). `sc` names the checks before it. */
static int parse_check(parser_t *ps, const json_t *v, const char *path, const step_scope_t *sc,
                       json_t **nout, wf_admission_t *out)
{
    char sub[192];
    const json_t *name, *task, *desc, *timeout;
    json_t *args = NULL, *norm = NULL;
    int rc;

    if (!json_is_object(v))
        return fail(ps, TERN_EINVAL,
                    "%s: expected a check {\"name\", \"task\", \"args\", \"timeout\"}, got %s",
                    path, DESCRIBE(v));
    if ((rc = check_keys(ps, v, path, admission_keys,
                         "an admission check has name, task, args, timeout, isolate and "
                         "description")) != 0)
        return rc;
    if ((rc = get_string(ps, v, path, "name", &name)) != 0)
        return rc;
    if (name == NULL)
        return fail(ps, TERN_EINVAL, "%s.name: missing; every admission check needs a name", path);
    if (!valid_name(json_string_value(name), false))
        return fail(ps, TERN_EINVAL,
                    "%s.name: expected a check name (a letter or digit, then up to %d letters, "
                    "digits, '_' or '-'), got %s",
                    path, WORKFLOW_NAME_MAX - 1, DESCRIBE(name));
    for (size_t i = 0; i < sc->n_admission; i++)
        if (strcmp(sc->admission[i], json_string_value(name)) == 0)
            return fail(ps, TERN_EINVAL,
                        "%s.name: duplicate admission check name \"%s\" (first at "
                        "admission[%zu])",
                        path, sc->admission[i], i);
    if ((rc = get_task(ps, v, path, &task)) != 0)
        return rc;
    if ((rc = get_string(ps, v, path, "description", &desc)) != 0)
        return rc;
    if ((rc = get_args(ps, v, path, ROOTS_ADMISSION, sc, &args)) != 0)
        return rc;
    timeout = json_object_get(v, "timeout");
    snprintf(sub, sizeof sub, "%s.timeout", path);
    if (timeout != NULL && (!json_is_number(timeout) || !(json_number_value(timeout) > 0.0) ||
                            json_number_value(timeout) > WORKFLOW_ADMISSION_MAX_S)) {
        rc = fail(ps, TERN_EINVAL,
                  "%s: expected a number of seconds greater than 0 and at most %d (a check "
                  "holds its create's answer), got %s",
                  sub, WORKFLOW_ADMISSION_MAX_S, DESCRIBE(timeout));
        goto Done;
    }
    if ((rc = get_timeout(ps, timeout, sub, &out->timeout_ms)) != 0)
        goto Done;
    if ((rc = get_bool(ps, v, path, "isolate", false, &out->isolate)) != 0)
        goto Done;
    if ((rc = check_task(ps, json_string_value(task), args, path)) != 0)
        goto Done;

    norm = json_object();
    json_object_set_new(norm, "name", json_deep_copy(name));
    json_object_set_new(norm, "task", json_deep_copy(task));
    if (desc != NULL)
        json_object_set_new(norm, "description", json_deep_copy(desc));
    json_object_set(norm, "args", args);
    if (timeout != NULL)
        json_object_set_new(norm, "timeout", json_deep_copy(timeout));
    json_object_set_new(norm, "isolate", json_boolean(out->isolate));
    out->name = json_string_value(json_object_get(norm, "name"));
    out->task = json_string_value(json_object_get(norm, "task"));
    out->args = json_object_get(norm, "args");
    *nout = norm;

Done:
    json_decref(args);
    return rc;
}

/* Parses the optional "admission" list `arr` into wf and the normalized doc, and keeps
 * the checks' names in ps for the templates of the steps. */
static int parse_admission(parser_t *ps, const json_t *arr, workflow_t *wf)
{
    char path[48];
    if (arr == NULL)
        return 0;
    if (!json_is_array(arr))
        return fail(ps, TERN_EINVAL, "admission: expected an array of checks, got %s",
                    DESCRIBE(arr));
    size_t n = json_array_size(arr);
    if (n > WORKFLOW_MAX_ADMISSION)
        return fail(ps, TERN_E2BIG,
                    "admission: %zu checks, over the limit of %d (WORKFLOW_MAX_ADMISSION)", n,
                    WORKFLOW_MAX_ADMISSION);
    if (n == 0)
        return 0;
    wf->admission = xcalloc(n, sizeof *wf->admission);
    ps->admission = xcalloc(n, sizeof *ps->admission);
    json_t *norm = json_array();
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        step_scope_t sc = {.admission = ps->admission, .n_admission = i};
        json_t *ncheck = NULL;
        snprintf(path, sizeof path, "admission[%zu]", i);
        rc = parse_check(ps, json_array_get(arr, i), path, &sc, &ncheck, &wf->admission[i]);
        if (rc != 0)
            break;
        json_array_append_new(norm, ncheck);
        ps->admission[i] = wf->admission[i].name;
        wf->n_admission = ps->n_admission = i + 1;
    }
    if (rc == 0)
        json_object_set(wf->doc, "admission", norm);
    json_decref(norm);
    return rc;
}

static const char *const workflow_keys[] = {"name",      "version",    "uuid",     "description",
                                            "timeout",   "queue",      "holds",    "hold_events",
                                            "chain",     "onerror",    "oncancel", "admission",
                                            "schedules", "retry_from", NULL};

/* True when the `len` bytes at s are a plugin's name, as the plugin loader takes it: a
 * lowercase letter, then lowercase letters, digits or '_'. */
static bool plugin_name_valid(const char *s, size_t len)
{
    if (len == 0 || len > 64 || !(s[0] >= 'a' && s[0] <= 'z'))
        return false;
    for (size_t i = 1; i < len; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return false;
    return true;
}

/* Checks "hold_events": one "<plugin>:<key template>" or an array of 1 to
 * WORKFLOW_MAX_HOLD_EVENTS of them, whose templates name what the workflow's holds may.
 * The plugin's name is literal (a stream is never put in another namespace by a
 * param). Keeps the normalized array in the document. */
static int parse_hold_events(parser_t *ps, const json_t *v, const step_scope_t *sc, workflow_t *wf)
{
    json_t *arr;
    if (json_is_string(v)) {
        arr = json_array();
        json_array_append_new(arr, json_deep_copy(v));
    } else if (json_is_array(v)) {
        size_t n = json_array_size(v);
        if (n == 0 || n > WORKFLOW_MAX_HOLD_EVENTS)
            return fail(ps, TERN_EINVAL,
                        "hold_events: expected 1 to %d streams \"<plugin>:<key>\", got %zu",
                        WORKFLOW_MAX_HOLD_EVENTS, n);
        arr = json_deep_copy(v);
    } else {
        return fail(ps, TERN_EINVAL,
                    "hold_events: expected a stream \"<plugin>:<key>\" or an array of them, got %s",
                    DESCRIBE(v));
    }
    size_t i;
    json_t *item;
    json_array_foreach(arr, i, item)
    {
        char path[48];
        if (json_is_string(v))
            snprintf(path, sizeof path, "hold_events");
        else
            snprintf(path, sizeof path, "hold_events[%zu]", i);
        int rc = 0;
        if (!json_is_string(item)) {
            rc = fail(ps, TERN_EINVAL, "%s: expected a stream \"<plugin>:<key>\", got %s", path,
                      DESCRIBE(item));
            json_decref(arr);
            return rc;
        }
        const char *text = json_string_value(item);
        const char *colon = strchr(text, ':');
        if (colon == NULL || !plugin_name_valid(text, (size_t)(colon - text)) || colon[1] == '\0') {
            rc = fail(ps, TERN_EINVAL,
                      "%s: expected \"<plugin>:<key>\" (a plugin's name, a lowercase letter "
                      "then lowercase letters, digits or '_'; then a key of its namespace), "
                      "got %s",
                      path, DESCRIBE(item));
            json_decref(arr);
            return rc;
        }
        for (size_t j = 0; j < i; j++)
            if (json_equal(json_array_get(arr, j), item)) {
                rc = fail(ps, TERN_EINVAL, "%s: duplicate stream %s (first at hold_events[%zu])",
                          path, DESCRIBE(item), j);
                json_decref(arr);
                return rc;
            }
        template_names_t names = scope_names(sc, sc->roots);
        rc = template_check_names(item, path, &names, ps->err, ps->errlen);
        if (rc != 0) {
            json_decref(arr);
            return rc;
        }
    }
    json_object_set_new(wf->doc, "hold_events", arr);
    wf->hold_events = json_object_get(wf->doc, "hold_events");
    return 0;
}

/* Checks the "schedules" the workflow declares (model/schedule.h) and keeps their
 * normalized copies, without "workflow" (implied), in the document. Names are unique:
 * a schedule is installed again in place by its name. */
static int parse_schedules(parser_t *ps, const json_t *v, const char *workflow, json_t *doc)
{
    if (!json_is_array(v))
        return fail(ps, TERN_EINVAL, "schedules: expected an array, got %s", DESCRIBE(v));
    json_t *out = json_array();
    for (size_t i = 0; i < json_array_size(v); i++) {
        char path[48];
        snprintf(path, sizeof path, "schedules[%zu].", i);
        schedule_spec_t spec;
        if (schedule_spec_parse(json_array_get(v, i), path, workflow, NULL, &spec, ps->err,
                                ps->errlen) != 0) {
            json_decref(out);
            return TERN_EINVAL;
        }
        for (size_t j = 0; j < json_array_size(out); j++) {
            const char *other = json_string_value(json_object_get(json_array_get(out, j), "name"));
            if (strcmp(other, spec.name) == 0) {
                int rc = fail(ps, TERN_EINVAL, "%sname: \"%s\" is the name of schedules[%zu] too",
                              path, spec.name, j);
                schedule_spec_dispose(&spec);
                json_decref(out);
                return rc;
            }
        }
        json_t *norm = json_deep_copy(spec.doc);
        json_object_del(norm, "workflow");
        json_array_append_new(out, norm);
        schedule_spec_dispose(&spec);
    }
    json_object_set_new(doc, "schedules", out);
    return 0;
}

/* Checks "retry_from", which names a step of the chain (parsed before it), and keeps
 * it in the document. */
static int parse_retry_from(parser_t *ps, const json_t *doc, workflow_t *wf)
{
    const json_t *from;
    int rc;
    if ((rc = get_string(ps, doc, "", "retry_from", &from)) != 0 || from == NULL)
        return rc;
    for (size_t i = 0; i < wf->n_steps[WF_CHAIN]; i++)
        if (strcmp(wf->steps[WF_CHAIN][i].name, json_string_value(from)) == 0) {
            json_object_set_new(wf->doc, "retry_from", json_deep_copy(from));
            wf->retry_from = json_string_value(json_object_get(wf->doc, "retry_from"));
            return 0;
        }
    return fail(ps, TERN_EINVAL, "retry_from: %s is not the name of a step of the chain",
                DESCRIBE(from));
}

static int parse_doc(parser_t *ps, const json_t *doc, workflow_t *wf)
{
    const json_t *name, *version, *uuid, *desc, *timeout, *queue, *holds;
    const char **chain_names = NULL;
    int rc;

    if (!json_is_object(doc))
        return fail(ps, TERN_EINVAL, "workflow: expected an object, got %s", DESCRIBE(doc));
    if ((rc = check_keys(ps, doc, "", workflow_keys,
                         "a workflow has name, version, uuid, description, timeout, queue, "
                         "holds, hold_events, admission, chain, onerror, oncancel, schedules "
                         "and retry_from")) != 0)
        return rc;

    if ((rc = get_string(ps, doc, "", "name", &name)) != 0)
        return rc;
    if (name == NULL)
        return fail(ps, TERN_EINVAL, "name: missing; a workflow needs a name");
    if (!valid_name(json_string_value(name), true))
        return fail(ps, TERN_EINVAL,
                    "name: expected a workflow name (a letter or digit, then up to %d letters, "
                    "digits, '_', '.' or '-'), got %s",
                    WORKFLOW_NAME_MAX - 1, DESCRIBE(name));
    json_object_set_new(wf->doc, "name", json_deep_copy(name));

    if ((rc = get_string(ps, doc, "", "version", &version)) != 0)
        return rc;
    if (version != NULL && !valid_version(json_string_value(version)))
        return fail(ps, TERN_EINVAL,
                    "version: expected 1 to 64 letters, digits, '.', '+' or '-', got %s",
                    DESCRIBE(version));
    json_object_set_new(wf->doc, "version",
                        version != NULL ? json_deep_copy(version) : json_string("1.0.0"));

    if ((rc = get_string(ps, doc, "", "uuid", &uuid)) != 0)
        return rc;
    if (uuid != NULL) {
        if (!uuid_valid(json_string_value(uuid)))
            return fail(ps, TERN_EINVAL, "uuid: expected a UUID, got %s", DESCRIBE(uuid));
        json_object_set_new(wf->doc, "uuid", json_deep_copy(uuid));
    }

    if ((rc = get_string(ps, doc, "", "description", &desc)) != 0)
        return rc;
    if (desc != NULL)
        json_object_set_new(wf->doc, "description", json_deep_copy(desc));

    timeout = json_object_get(doc, "timeout");
    if ((rc = get_timeout(ps, timeout, "timeout", &wf->timeout_ms)) != 0)
        return rc;
    if (timeout != NULL)
        json_object_set_new(wf->doc, "timeout", json_deep_copy(timeout));

    if ((rc = get_string(ps, doc, "", "queue", &queue)) != 0)
        return rc;
    if (queue != NULL && !workflow_queue_valid(json_string_value(queue), json_string_length(queue)))
        return fail(ps, TERN_EINVAL, "queue: expected " WORKFLOW_QUEUE_RULE ", got %s",
                    DESCRIBE(queue));
    json_object_set_new(wf->doc, "queue",
                        queue != NULL ? json_deep_copy(queue) : json_string(TERN_DEFAULT_QUEUE));

    if ((rc = parse_admission(ps, json_object_get(doc, "admission"), wf)) != 0)
        return rc;

    holds = json_object_get(doc, "holds");
    if (holds != NULL) {
        step_scope_t sc = {.roots = ROOTS_WORKFLOW_HOLDS,
                           .admission = ps->admission,
                           .n_admission = ps->n_admission};
        json_t *nholds;
        if ((rc = parse_holds(ps, holds, "holds", &sc, &nholds, &wf->holds, &wf->n_holds)) != 0)
            return rc;
        json_object_set_new(wf->doc, "holds", nholds);
    }

    const json_t *hold_events = json_object_get(doc, "hold_events");
    if (hold_events != NULL) {
        step_scope_t sc = {.roots = ROOTS_WORKFLOW_HOLDS,
                           .admission = ps->admission,
                           .n_admission = ps->n_admission};
        if ((rc = parse_hold_events(ps, hold_events, &sc, wf)) != 0)
            return rc;
    }

    const json_t *schedules = json_object_get(doc, "schedules");
    if (schedules != NULL &&
        (rc = parse_schedules(ps, schedules, json_string_value(name), wf->doc)) != 0)
        return rc;

    chain_names = xcalloc(json_array_size(json_object_get(doc, "chain")) + 1, sizeof *chain_names);
    for (int phase = WF_CHAIN; phase < WF_NPHASES && rc == 0; phase++)
        rc = parse_phase(ps, doc, (wf_phase_t)phase, wf, chain_names);
    free(chain_names);
    if (rc != 0)
        return rc;
    if ((rc = parse_retry_from(ps, doc, wf)) != 0)
        return rc;

    wf->name = json_string_value(json_object_get(wf->doc, "name"));
    wf->version = json_string_value(json_object_get(wf->doc, "version"));
    wf->queue = json_string_value(json_object_get(wf->doc, "queue"));
    return 0;
}

/* The check function is called once per step and per fallback, after that step's own
 * keys are valid, with the normalized args. */
int workflow_parse(const json_t *doc, workflow_task_check_fn check, void *check_data,
                   workflow_t **out, char *err, size_t errlen)
{
    parser_t ps = {
        .check = check,
        .check_data = check_data,
        .err = err,
        .errlen = errlen,
        .seen = json_object(),
    };
    workflow_t *wf = xcalloc(1, sizeof *wf);
    int rc;

    *out = NULL;
    wf->doc = json_object();
    if (doc == NULL)
        rc = fail(&ps, TERN_EINVAL, "workflow: no document");
    else
        rc = parse_doc(&ps, doc, wf);
    json_decref(ps.seen);
    free(ps.admission);
    if (rc != 0) {
        workflow_free(wf);
        return rc;
    }
    *out = wf;
    return 0;
}

int workflow_parse_text(const char *buf, size_t len, workflow_task_check_fn check, void *check_data,
                        workflow_t **out, char *err, size_t errlen)
{
    json_error_t je;
    json_t *doc;
    int rc;

    *out = NULL;
    if (len > WORKFLOW_MAX_BYTES)
        return err_set(err, errlen, TERN_E2BIG,
                       "workflow: %zu bytes, over the limit of %d bytes (WORKFLOW_MAX_BYTES)", len,
                       WORKFLOW_MAX_BYTES);
    doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (doc == NULL)
        return err_set(err, errlen, TERN_EINVAL, "line %d, column %d: %s", je.line, je.column,
                       je.text);
    rc = workflow_parse(doc, check, check_data, out, err, errlen);
    json_decref(doc);
    return rc;
}

static void step_dispose(wf_step_t *s)
{
    if (s->fallback != NULL) {
        step_dispose(s->fallback);
        free(s->fallback);
    }
    free(s->holds);
}

void workflow_free(workflow_t *wf)
{
    if (wf == NULL)
        return;
    for (int p = 0; p < WF_NPHASES; p++) {
        for (size_t i = 0; i < wf->n_steps[p]; i++)
            step_dispose(&wf->steps[p][i]);
        free(wf->steps[p]);
    }
    free(wf->holds);
    free(wf->admission);
    json_decref(wf->doc);
    free(wf);
}

const wf_step_t *workflow_step_get(const workflow_t *wf, wf_phase_t phase, size_t index)
{
    if (wf == NULL || (int)phase < 0 || (int)phase >= WF_NPHASES || index >= wf->n_steps[phase])
        return NULL;
    return &wf->steps[phase][index];
}

const char *workflow_phase_name(wf_phase_t phase)
{
    switch (phase) {
    case WF_CHAIN:
        return "chain";
    case WF_ONERROR:
        return "onerror";
    case WF_ONCANCEL:
        return "oncancel";
    }
    return "unknown";
}
