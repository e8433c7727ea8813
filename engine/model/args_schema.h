/*
 * args_schema.h -- the argument descriptions of tasks (tern_task_def.args_schema).
 *
 * A plugin may describe the arguments of a task as JSON text:
 *   {"required": ["url"],
 *    "properties": {"url": {"type": "string"}, "ms": {"type": ["integer", "string"]}},
 *    "additional": false}
 * "type" is one of string, integer, number (integers count as numbers), boolean,
 * object, array, null, any, or a non-empty array of them; a property without "type"
 * accepts anything. "additional" defaults to true (names not listed are accepted).
 * "minimum", "maximum", "exclusiveMinimum" and "exclusiveMaximum" (JSON Schema's
 * keywords, numbers) bound an integer or number argument; at most one lower and one
 * upper bound, leaving room for a value, on a property whose type accepts numbers; an
 * argument of another accepted type (a string, say) is not compared.
 * "description" is allowed at the top and in each property and is not interpreted.
 * "interpolation": "parts" in a property asks the runner to hand every string inside
 * that argument to the task as {"strings": [...], "values": [...]} rather than as
 * interpolated text (see template_expand_parts and tern_task_def.args_schema);
 * "text", the default, interpolates as usual.
 * Any other key is refused, so that a misspelt "requried" is found when the plugin
 * loads rather than never.
 *
 * A schema is compiled once, when its plugin loads, and checked many times: when a
 * workflow is loaded (templates still unexpanded: a string holding a template passes
 * the type check, since its type is known only after expansion) and again by the
 * runner after expansion (ARGS_SCHEMA_EXPANDED: every value is checked).
 */
#ifndef TERN_ARGS_SCHEMA_H
#define TERN_ARGS_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

typedef struct args_schema args_schema_t;

/* Flags of args_schema_check. */
enum args_schema_flags {
    /* The arguments are already expanded: a string containing "${" is plain text and
     * gets no free pass. */
    ARGS_SCHEMA_EXPANDED = 1u << 0,
};

/* Parses and validates schema text. `what` names the owner in messages (e.g.
 * `task "http.get"`). Returns 0 and *out (free with args_schema_free), or TERN_EINVAL
 * with e.g. `task "http.get": args_schema: properties.url.type: unknown type "strng"`
 * or `task "http.get": args_schema is not valid JSON: ... (line 1, column 2)` in err. */
int args_schema_compile(const char *text, const char *what, args_schema_t **out, char *err,
                        size_t errlen);

/* Checks `args` (borrowed; NULL counts as an empty object). `path` prefixes messages
 * ("chain[1].args"). Returns 0, or TERN_EINVAL with the first fault in err:
 *   chain[1].args.ms: expected integer, got string
 *   chain[1].args.ms: expected an integer from 0 to 86400000, got -1
 *   chain[1].args: missing required "url"
 *   chain[1].args: unknown argument "urll"
 *   chain[1].args: expected object, got array
 * Required names are checked first, in schema order, then each argument in order. */
int args_schema_check(const args_schema_t *schema, const json_t *args, const char *path,
                      unsigned flags, char *err, size_t errlen);

/* True when property `name` says "interpolation": "parts". */
bool args_schema_prop_is_parts(const args_schema_t *schema, const char *name);

/* The parsed schema document; borrowed, valid while the schema lives. */
const json_t *args_schema_doc_get(const args_schema_t *schema);

/* True when `s` holds a ${...} template ("$${" is an escaped, literal "${"). */
int args_schema_is_template(const char *s);

void args_schema_free(args_schema_t *schema);

#endif /* TERN_ARGS_SCHEMA_H */
