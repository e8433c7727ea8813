/*
 * template.h -- the ${...} templates of workflow step arguments.
 *
 * A JSON string that is exactly one template, "${params.size}", is replaced by the
 * value it names with that value's JSON type (a number stays a number, an object an
 * object). Templates inside a longer string are interpolated as text: strings as they
 * are, numbers/booleans/null in their JSON spelling, objects and arrays as compact
 * JSON. Templates are expanded in strings at any depth of objects and arrays; object
 * keys are never expanded. "$${" writes a literal "${".
 *
 * Names: params.<path>, steps.<step>.result.<path> (also steps.<step>.error.code/
 * message), state.<path>, job.uuid, job.target, job.workflow, error.code,
 * error.message, error.step (error.* only in onerror, oncancel and fallback),
 * admission.<check>.result.<path> (the result of an admission check of the job).
 * A <path> is dot-separated keys; a key that is all digits indexes an array
 * (params.disks.0.size). A name that resolves to nothing is an error of the step,
 * unless written with a default: ${params.x:-default}. The default text is parsed as
 * JSON when it is valid JSON (false, 10, "a", {}), and taken as a plain string
 * otherwise; so ${params.shrink:-false} yields the boolean false.
 */
#ifndef TERN_TEMPLATE_H
#define TERN_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* The roots a template may name. */
enum template_root {
    TEMPLATE_PARAMS = 1u << 0,
    TEMPLATE_STEPS = 1u << 1,
    TEMPLATE_STATE = 1u << 2,
    TEMPLATE_JOB = 1u << 3,
    TEMPLATE_ERROR = 1u << 4,
    TEMPLATE_ADMISSION = 1u << 5,
};

/* What the names resolve against. Every member is borrowed and may be NULL (then
 * every name under it is missing). `steps` maps a step name to an object with
 * "result" and optionally "error". `job` has "uuid", "target", "workflow". */
typedef struct template_scope {
    const json_t *params;
    const json_t *steps;
    const json_t *state;
    const json_t *job;
    const json_t *error;
    /* Check name -> {"result": value}: the admission checks the job passed. */
    const json_t *admission;
} template_scope_t;

/* Checks every template in `tmpl` (any JSON value) without expanding it: syntax, a
 * root allowed by `roots` (enum template_root bits), and for steps.<name> that the
 * step is one of `known_steps` (n names; the steps that run before this one).
 * `path` prefixes messages: "chain[1].args.size: ${steps.chek.result.size} names
 * step \"chek\", which does not run before this step". Returns 0 or TERN_EINVAL. */
int template_check(const json_t *tmpl, const char *path, unsigned roots,
                   const char *const *known_steps, size_t n_known, char *err, size_t errlen);

/* What a part of a workflow may name: template_check's roots and known steps, and the
 * admission checks that run before it (all of them for a step; the earlier ones for a
 * check). Every member is borrowed. */
typedef struct template_names {
    unsigned roots;
    const char *const *steps;
    size_t n_steps;
    const char *const *admission;
    size_t n_admission;
} template_names_t;

/* template_check with the names of admission checks too: admission.<check> must name
 * one of names->admission ("admission[1].args.x: ${admission.quota.result} names
 * admission check \"quota\", which does not run before this"). */
int template_check_names(const json_t *tmpl, const char *path, const template_names_t *names,
                         char *err, size_t errlen);

/* Expands every template in `tmpl` against `scope`. Returns a new reference, or NULL
 * with "args.size: ${steps.check.result.size} names nothing" (the path is relative to
 * `path`) in err when a name without default resolves to nothing. */
json_t *template_expand(const json_t *tmpl, const char *path, const template_scope_t *scope,
                        char *err, size_t errlen);

/* Like template_expand, but every string at any depth of `tmpl` becomes
 *   {"strings": ["echo hello ", ""], "values": ["x; id"]}
 * rather than interpolated text: the literal pieces as written ("$${" unescaped; one
 * more than there are templates) and the value of each template with its JSON type.
 * For tasks that hand text to an interpreter and must keep values out of the code (a
 * shell's positional parameters, SQL placeholders). Returns a new reference, or NULL
 * with a message in err as template_expand does. */
json_t *template_expand_parts(const json_t *tmpl, const char *path, const template_scope_t *scope,
                              char *err, size_t errlen);

/* Expands one string (a hold name, a queue name) and returns it as a malloc'd string;
 * a whole-string template naming a non-string is spelled as compact JSON. NULL and a
 * message in err when a name resolves to nothing. */
char *template_expand_string(const char *s, const char *path, const template_scope_t *scope,
                             char *err, size_t errlen);

/* True when s contains at least one template. */
bool template_present(const char *s);

#endif /* TERN_TEMPLATE_H */
