/*
 * args_schema.c -- compiles a task's args_schema text into a small table (one entry
 * per property with a bit mask of accepted JSON types) and checks argument objects
 * against it. It owns the parsed document and the table; it knows nothing of plugins
 * or workflows beyond the `what`/`path` strings it puts in messages. See
 * args_schema.h for the accepted schema language.
 */
#include "args_schema.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* Type bits. */
enum {
    T_STRING = 1u << 0,
    T_INTEGER = 1u << 1,
    T_REAL = 1u << 2, /* "number" is T_INTEGER | T_REAL */
    T_BOOLEAN = 1u << 3,
    T_OBJECT = 1u << 4,
    T_ARRAY = 1u << 5,
    T_NULL = 1u << 6,
    T_ANY = 0x7fu,
};

static const struct {
    const char *name;
    unsigned mask;
} type_names[] = {
    {"string", T_STRING},   {"integer", T_INTEGER}, {"number", T_INTEGER | T_REAL},
    {"boolean", T_BOOLEAN}, {"object", T_OBJECT},   {"array", T_ARRAY},
    {"null", T_NULL},       {"any", T_ANY},
};

typedef struct prop {
    const char *name; /* borrowed from doc */
    unsigned mask;
    const json_t *type; /* the "type" value as written, for messages; may be NULL */
    bool parts;         /* "interpolation": "parts" */
} prop_t;

struct args_schema {
    json_t *doc; /* owned */
    prop_t *props;
    size_t n_props;
    const char **required; /* borrowed from doc */
    size_t n_required;
    bool additional;
};

static unsigned type_mask_by_name(const char *name)
{
    for (size_t i = 0; i < TERN_ARRAY_SIZE(type_names); i++)
        if (strcmp(type_names[i].name, name) == 0)
            return type_names[i].mask;
    return 0;
}

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    case JSON_NULL:
        return "null";
    }
    return "unknown";
}

static unsigned json_type_bit(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return T_OBJECT;
    case JSON_ARRAY:
        return T_ARRAY;
    case JSON_STRING:
        return T_STRING;
    case JSON_INTEGER:
        return T_INTEGER;
    case JSON_REAL:
        return T_REAL;
    case JSON_TRUE:
    case JSON_FALSE:
        return T_BOOLEAN;
    case JSON_NULL:
        return T_NULL;
    }
    return 0;
}

/* See args_schema.h. */
int args_schema_is_template(const char *s)
{
    for (const char *p = s; (p = strchr(p, '$')) != NULL;) {
        if (p[1] == '$' && p[2] == '{') {
            p += 3; /* "$${" is a literal "${" */
            continue;
        }
        if (p[1] == '{')
            return 1;
        p++;
    }
    return 0;
}

/* Parses one "type" value into a mask. Returns 0 or TERN_EINVAL. */
static int compile_type(const json_t *type, const char *what, const char *prop, unsigned *mask,
                        char *err, size_t errlen)
{
    if (json_is_string(type)) {
        *mask = type_mask_by_name(json_string_value(type));
        if (*mask == 0)
            return tern_seterr(err, errlen, TERN_EINVAL,
                               "%s: args_schema: properties.%s.type: unknown type \"%s\"", what,
                               prop, json_string_value(type));
        return 0;
    }
    if (json_is_array(type) && json_array_size(type) > 0) {
        size_t i;
        const json_t *t;
        *mask = 0;
        json_array_foreach(type, i, t)
        {
            unsigned m = json_is_string(t) ? type_mask_by_name(json_string_value(t)) : 0;
            if (m == 0) {
                if (json_is_string(t))
                    return tern_seterr(
                        err, errlen, TERN_EINVAL,
                        "%s: args_schema: properties.%s.type[%zu]: unknown type \"%s\"", what, prop,
                        i, json_string_value(t));
                return tern_seterr(err, errlen, TERN_EINVAL,
                                   "%s: args_schema: properties.%s.type[%zu]: expected string, "
                                   "got %s",
                                   what, prop, i, json_type_name(t));
            }
            *mask |= m;
        }
        return 0;
    }
    return tern_seterr(err, errlen, TERN_EINVAL,
                       "%s: args_schema: properties.%s.type: expected a type name or a "
                       "non-empty array of them, got %s",
                       what, prop, json_is_array(type) ? "an empty array" : json_type_name(type));
}

static const prop_t *find_prop(const args_schema_t *s, const char *name)
{
    for (size_t i = 0; i < s->n_props; i++)
        if (strcmp(s->props[i].name, name) == 0)
            return &s->props[i];
    return NULL;
}

static int compile_doc(args_schema_t *s, const char *what, char *err, size_t errlen)
{
    const json_t *doc = s->doc;
    const char *key;
    const json_t *v;

    if (!json_is_object(doc))
        return tern_seterr(err, errlen, TERN_EINVAL, "%s: args_schema: expected object, got %s",
                           what, json_type_name(doc));
    json_object_foreach((json_t *)doc, key, v)
    {
        if (strcmp(key, "required") != 0 && strcmp(key, "properties") != 0 &&
            strcmp(key, "additional") != 0 && strcmp(key, "description") != 0)
            return tern_seterr(err, errlen, TERN_EINVAL,
                               "%s: args_schema: unknown key \"%s\" (expected required, "
                               "properties, additional, description)",
                               what, key);
    }

    const json_t *additional = json_object_get(doc, "additional");
    if (additional != NULL && !json_is_boolean(additional))
        return tern_seterr(err, errlen, TERN_EINVAL,
                           "%s: args_schema: additional: expected boolean, got %s", what,
                           json_type_name(additional));
    s->additional = additional == NULL || json_is_true(additional);

    const json_t *props = json_object_get(doc, "properties");
    if (props != NULL && !json_is_object(props))
        return tern_seterr(err, errlen, TERN_EINVAL,
                           "%s: args_schema: properties: expected object, got %s", what,
                           json_type_name(props));
    s->props = xcalloc(json_object_size(props) + 1, sizeof *s->props);
    json_object_foreach((json_t *)props, key, v)
    {
        prop_t *p = &s->props[s->n_props++];
        p->name = key;
        p->mask = T_ANY;
        if (!json_is_object(v))
            return tern_seterr(err, errlen, TERN_EINVAL,
                               "%s: args_schema: properties.%s: expected object, got %s", what, key,
                               json_type_name(v));
        const char *k2;
        const json_t *v2;
        json_object_foreach((json_t *)v, k2, v2)
        {
            if (strcmp(k2, "type") != 0 && strcmp(k2, "description") != 0 &&
                strcmp(k2, "interpolation") != 0)
                return tern_seterr(err, errlen, TERN_EINVAL,
                                   "%s: args_schema: properties.%s: unknown key \"%s\" "
                                   "(expected type, description, interpolation)",
                                   what, key, k2);
        }
        const json_t *interp = json_object_get(v, "interpolation");
        const char *mode = json_string_value(interp);
        if (interp != NULL &&
            (mode == NULL || (strcmp(mode, "text") != 0 && strcmp(mode, "parts") != 0)))
            return tern_seterr(err, errlen, TERN_EINVAL,
                               "%s: args_schema: properties.%s.interpolation: expected \"text\" "
                               "or \"parts\"",
                               what, key);
        p->parts = mode != NULL && strcmp(mode, "parts") == 0;
        p->type = json_object_get(v, "type");
        if (p->type != NULL) {
            int rc = compile_type(p->type, what, key, &p->mask, err, errlen);
            if (rc != 0)
                return rc;
        }
    }

    const json_t *required = json_object_get(doc, "required");
    if (required != NULL && !json_is_array(required))
        return tern_seterr(err, errlen, TERN_EINVAL,
                           "%s: args_schema: required: expected array, got %s", what,
                           json_type_name(required));
    s->required = xcalloc(json_array_size(required) + 1, sizeof *s->required);
    size_t i;
    json_array_foreach(required, i, v)
    {
        if (!json_is_string(v))
            return tern_seterr(err, errlen, TERN_EINVAL,
                               "%s: args_schema: required[%zu]: expected string, got %s", what, i,
                               json_type_name(v));
        const char *name = json_string_value(v);
        if (!s->additional && find_prop(s, name) == NULL)
            return tern_seterr(err, errlen, TERN_EINVAL,
                               "%s: args_schema: required[%zu]: \"%s\" is not among the "
                               "properties, and additional arguments are refused",
                               what, i, name);
        s->required[s->n_required++] = name;
    }
    return 0;
}

/* See args_schema.h. */
int args_schema_compile(const char *text, const char *what, args_schema_t **out, char *err,
                        size_t errlen)
{
    *out = NULL;
    json_error_t jerr;
    json_t *doc = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    if (doc == NULL)
        return tern_seterr(err, errlen, TERN_EINVAL,
                           "%s: args_schema is not valid JSON: %s (line %d, column %d)", what,
                           jerr.text, jerr.line, jerr.column);
    args_schema_t *s = xcalloc(1, sizeof *s);
    s->doc = doc;
    int rc = compile_doc(s, what, err, errlen);
    if (rc != 0) {
        args_schema_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* Writes the accepted types as the schema spells them: "integer", "integer or string",
 * "integer, string or null". */
static void describe_type(const json_t *type, char *buf, size_t len)
{
    if (json_is_string(type)) {
        snprintf(buf, len, "%s", json_string_value(type));
        return;
    }
    size_t n = json_array_size(type), used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < len; i++) {
        const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
        int w = snprintf(buf + used, len - used, "%s%s", sep,
                         json_string_value(json_array_get(type, i)));
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/* See args_schema.h. */
int args_schema_check(const args_schema_t *s, const json_t *args, const char *path, unsigned flags,
                      char *err, size_t errlen)
{
    if (args == NULL) {
        if (s->n_required > 0)
            return tern_seterr(err, errlen, TERN_EINVAL, "%s: missing required \"%s\"", path,
                               s->required[0]);
        return 0;
    }
    if (!json_is_object(args))
        return tern_seterr(err, errlen, TERN_EINVAL, "%s: expected object, got %s", path,
                           json_type_name(args));

    for (size_t i = 0; i < s->n_required; i++)
        if (json_object_get(args, s->required[i]) == NULL)
            return tern_seterr(err, errlen, TERN_EINVAL, "%s: missing required \"%s\"", path,
                               s->required[i]);

    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)args, key, v)
    {
        const prop_t *p = find_prop(s, key);
        if (p == NULL) {
            if (!s->additional)
                return tern_seterr(err, errlen, TERN_EINVAL, "%s: unknown argument \"%s\"", path,
                                   key);
            continue;
        }
        if (p->mask & json_type_bit(v))
            continue;
        if ((flags & ARGS_SCHEMA_EXPANDED) && p->parts)
            continue; /* {"strings", "values"} objects: the task checks their shape */
        if (!(flags & ARGS_SCHEMA_EXPANDED) && json_is_string(v) &&
            args_schema_is_template(json_string_value(v)))
            continue;
        char want[128];
        describe_type(p->type, want, sizeof want);
        return tern_seterr(err, errlen, TERN_EINVAL, "%s.%s: expected %s, got %s", path, key, want,
                           json_type_name(v));
    }
    return 0;
}

/* See args_schema.h. */
bool args_schema_prop_is_parts(const args_schema_t *s, const char *name)
{
    const prop_t *p = find_prop(s, name);
    return p != NULL && p->parts;
}

/* See args_schema.h. */
const json_t *args_schema_doc_get(const args_schema_t *s)
{
    return s->doc;
}

/* See args_schema.h. */
void args_schema_free(args_schema_t *s)
{
    if (s == NULL)
        return;
    free(s->props);
    free(s->required);
    json_decref(s->doc);
    free(s);
}
