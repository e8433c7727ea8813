/*
 * args_schema.c -- compiles a task's args_schema text into a small table (one entry
 * per property with a bit mask of accepted JSON types) and checks argument objects
 * against it. It owns the parsed document and the table; it knows nothing of plugins
 * or workflows beyond the `what`/`path` strings it puts in messages. See
 * args_schema.h for the accepted schema language.
 */
#include "model/args_schema.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

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

/* The bounds of a number, each a JSON number borrowed from the schema document or NULL
 * when absent. They apply to integer and real arguments only; an argument of another
 * type the property accepts (a string, say) is not compared. */
typedef struct range {
    const json_t *min, *max;           /* "minimum", "maximum": inclusive */
    const json_t *min_excl, *max_excl; /* "exclusiveMinimum", "exclusiveMaximum" */
} range_t;

typedef struct prop {
    const char *name; /* borrowed from doc */
    unsigned mask;
    const json_t *type; /* the "type" value as written, for messages; may be NULL */
    bool parts;         /* "interpolation": "parts" */
    range_t range;
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
            return err_set(err, errlen, TERN_EINVAL,
                           "%s: args_schema: properties.%s.type: unknown type \"%s\"", what, prop,
                           json_string_value(type));
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
                    return err_set(err, errlen, TERN_EINVAL,
                                   "%s: args_schema: properties.%s.type[%zu]: unknown type \"%s\"",
                                   what, prop, i, json_string_value(t));
                return err_set(err, errlen, TERN_EINVAL,
                               "%s: args_schema: properties.%s.type[%zu]: expected string, "
                               "got %s",
                               what, prop, i, json_type_name(t));
            }
            *mask |= m;
        }
        return 0;
    }
    return err_set(err, errlen, TERN_EINVAL,
                   "%s: args_schema: properties.%s.type: expected a type name or a "
                   "non-empty array of them, got %s",
                   what, prop, json_is_array(type) ? "an empty array" : json_type_name(type));
}

/* The slot of range keyword `kw` in r, or NULL when kw is not one. */
static const json_t **range_slot(range_t *r, const char *kw)
{
    if (strcmp(kw, "minimum") == 0)
        return &r->min;
    if (strcmp(kw, "maximum") == 0)
        return &r->max;
    if (strcmp(kw, "exclusiveMinimum") == 0)
        return &r->min_excl;
    if (strcmp(kw, "exclusiveMaximum") == 0)
        return &r->max_excl;
    return NULL;
}

/* Compares two JSON numbers: <0, 0 or >0. Two integers compare exactly (a double cannot
 * tell 2^62 from 2^62 + 1); otherwise as doubles. */
static int number_cmp(const json_t *a, const json_t *b)
{
    if (json_is_integer(a) && json_is_integer(b)) {
        json_int_t x = json_integer_value(a), y = json_integer_value(b);
        return (x > y) - (x < y);
    }
    double x = json_number_value(a), y = json_number_value(b);
    return (x > y) - (x < y);
}

/* Writes a JSON number as JSON writes it. */
static void number_text(const json_t *n, char *buf, size_t len)
{
    if (json_is_integer(n))
        snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(n));
    else
        snprintf(buf, len, "%.17g", json_real_value(n));
}

/* Reads the range keywords of property `prop` (schema object `def`) into p->range.
 * Each must be a number, the property must accept numbers, and the range must hold
 * at least one value. Returns 0 or TERN_EINVAL. */
static int compile_range(const json_t *def, prop_t *p, const char *what, const char *prop,
                         char *err, size_t errlen)
{
    static const char *const keywords[] = {"minimum", "maximum", "exclusiveMinimum",
                                           "exclusiveMaximum"};
    range_t *r = &p->range;
    bool any = false;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(keywords); i++) {
        const json_t *n = json_object_get(def, keywords[i]);
        if (n == NULL)
            continue;
        if (!json_is_number(n))
            return err_set(err, errlen, TERN_EINVAL,
                           "%s: args_schema: properties.%s.%s: expected number, got %s", what, prop,
                           keywords[i], json_type_name(n));
        *range_slot(r, keywords[i]) = n;
        any = true;
    }
    if (!any)
        return 0;
    if (!(p->mask & (T_INTEGER | T_REAL)))
        return err_set(err, errlen, TERN_EINVAL,
                       "%s: args_schema: properties.%s: a range needs a type that accepts "
                       "numbers",
                       what, prop);
    /* One bound a side, and room for a value between them. */
    if (r->min != NULL && r->min_excl != NULL)
        return err_set(err, errlen, TERN_EINVAL,
                       "%s: args_schema: properties.%s: minimum and exclusiveMinimum "
                       "together (give one)",
                       what, prop);
    if (r->max != NULL && r->max_excl != NULL)
        return err_set(err, errlen, TERN_EINVAL,
                       "%s: args_schema: properties.%s: maximum and exclusiveMaximum "
                       "together (give one)",
                       what, prop);
    const json_t *low = r->min != NULL ? r->min : r->min_excl;
    const json_t *high = r->max != NULL ? r->max : r->max_excl;
    if (low != NULL && high != NULL) {
        int c = number_cmp(low, high);
        if (c > 0 || (c == 0 && (r->min_excl != NULL || r->max_excl != NULL))) {
            char lo[40], hi[40];
            number_text(low, lo, sizeof lo);
            number_text(high, hi, sizeof hi);
            return err_set(err, errlen, TERN_EINVAL,
                           "%s: args_schema: properties.%s: %s %s leaves no value under %s %s",
                           what, prop, r->min != NULL ? "minimum" : "exclusiveMinimum", lo,
                           r->max != NULL ? "maximum" : "exclusiveMaximum", hi);
        }
    }
    return 0;
}

/* True when number v lies in r. */
static bool range_holds(const range_t *r, const json_t *v)
{
    return (r->min == NULL || number_cmp(v, r->min) >= 0) &&
           (r->max == NULL || number_cmp(v, r->max) <= 0) &&
           (r->min_excl == NULL || number_cmp(v, r->min_excl) > 0) &&
           (r->max_excl == NULL || number_cmp(v, r->max_excl) < 0);
}

/* Describes what a range accepts: "an integer from 0 to 10", "a number greater than 0",
 * "an integer of at most 5", "an integer of at least 1 and less than 100". */
static void describe_range(const prop_t *p, char *buf, size_t len)
{
    const range_t *r = &p->range;
    const char *noun = (p->mask & T_REAL) ? "a number" : "an integer";
    const json_t *low = r->min != NULL ? r->min : r->min_excl;
    const json_t *high = r->max != NULL ? r->max : r->max_excl;
    char lo[40] = "", hi[40] = "";
    if (low != NULL)
        number_text(low, lo, sizeof lo);
    if (high != NULL)
        number_text(high, hi, sizeof hi);
    if (r->min != NULL && r->max != NULL) {
        snprintf(buf, len, "%s from %s to %s", noun, lo, hi);
        return;
    }
    const char *low_words = low == NULL ? "" : r->min != NULL ? " of at least " : " greater than ";
    const char *high_words = high == NULL          ? ""
                             : r->max_excl != NULL ? " less than "
                             : low != NULL         ? " at most "
                                                   : " of at most ";
    snprintf(buf, len, "%s%s%s%s%s%s", noun, low_words, lo,
             low != NULL && high != NULL ? " and" : "", high_words, hi);
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
        return err_set(err, errlen, TERN_EINVAL, "%s: args_schema: expected object, got %s", what,
                       json_type_name(doc));
    json_object_foreach((json_t *)doc, key, v)
    {
        if (strcmp(key, "required") != 0 && strcmp(key, "properties") != 0 &&
            strcmp(key, "additional") != 0 && strcmp(key, "description") != 0)
            return err_set(err, errlen, TERN_EINVAL,
                           "%s: args_schema: unknown key \"%s\" (expected required, "
                           "properties, additional, description)",
                           what, key);
    }

    const json_t *additional = json_object_get(doc, "additional");
    if (additional != NULL && !json_is_boolean(additional))
        return err_set(err, errlen, TERN_EINVAL,
                       "%s: args_schema: additional: expected boolean, got %s", what,
                       json_type_name(additional));
    s->additional = additional == NULL || json_is_true(additional);

    const json_t *props = json_object_get(doc, "properties");
    if (props != NULL && !json_is_object(props))
        return err_set(err, errlen, TERN_EINVAL,
                       "%s: args_schema: properties: expected object, got %s", what,
                       json_type_name(props));
    s->props = xcalloc(json_object_size(props) + 1, sizeof *s->props);
    json_object_foreach((json_t *)props, key, v)
    {
        prop_t *p = &s->props[s->n_props++];
        p->name = key;
        p->mask = T_ANY;
        if (!json_is_object(v))
            return err_set(err, errlen, TERN_EINVAL,
                           "%s: args_schema: properties.%s: expected object, got %s", what, key,
                           json_type_name(v));
        const char *k2;
        const json_t *v2;
        json_object_foreach((json_t *)v, k2, v2)
        {
            if (strcmp(k2, "type") != 0 && strcmp(k2, "description") != 0 &&
                strcmp(k2, "interpolation") != 0 && range_slot(&p->range, k2) == NULL)
                return err_set(err, errlen, TERN_EINVAL,
                               "%s: args_schema: properties.%s: unknown key \"%s\" "
                               "(expected type, description, interpolation, minimum, "
                               "maximum, exclusiveMinimum, exclusiveMaximum)",
                               what, key, k2);
        }
        const json_t *interp = json_object_get(v, "interpolation");
        const char *mode = json_string_value(interp);
        if (interp != NULL &&
            (mode == NULL || (strcmp(mode, "text") != 0 && strcmp(mode, "parts") != 0)))
            return err_set(err, errlen, TERN_EINVAL,
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
        int rc = compile_range(v, p, what, key, err, errlen);
        if (rc != 0)
            return rc;
    }

    const json_t *required = json_object_get(doc, "required");
    if (required != NULL && !json_is_array(required))
        return err_set(err, errlen, TERN_EINVAL,
                       "%s: args_schema: required: expected array, got %s", what,
                       json_type_name(required));
    s->required = xcalloc(json_array_size(required) + 1, sizeof *s->required);
    size_t i;
    json_array_foreach(required, i, v)
    {
        if (!json_is_string(v))
            return err_set(err, errlen, TERN_EINVAL,
                           "%s: args_schema: required[%zu]: expected string, got %s", what, i,
                           json_type_name(v));
        const char *name = json_string_value(v);
        if (!s->additional && find_prop(s, name) == NULL)
            return err_set(err, errlen, TERN_EINVAL,
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
        return err_set(err, errlen, TERN_EINVAL,
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
            return err_set(err, errlen, TERN_EINVAL, "%s: missing required \"%s\"", path,
                           s->required[0]);
        return 0;
    }
    if (!json_is_object(args))
        return err_set(err, errlen, TERN_EINVAL, "%s: expected object, got %s", path,
                       json_type_name(args));

    for (size_t i = 0; i < s->n_required; i++)
        if (json_object_get(args, s->required[i]) == NULL)
            return err_set(err, errlen, TERN_EINVAL, "%s: missing required \"%s\"", path,
                           s->required[i]);

    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)args, key, v)
    {
        const prop_t *p = find_prop(s, key);
        if (p == NULL) {
            if (!s->additional)
                return err_set(err, errlen, TERN_EINVAL, "%s: unknown argument \"%s\"", path, key);
            continue;
        }
        if (p->mask & json_type_bit(v)) {
            if (json_is_number(v) && !range_holds(&p->range, v)) {
                char want[160], got[40];
                describe_range(p, want, sizeof want);
                number_text(v, got, sizeof got);
                return err_set(err, errlen, TERN_EINVAL, "%s.%s: expected %s, got %s", path, key,
                               want, got);
            }
            continue;
        }
        if ((flags & ARGS_SCHEMA_EXPANDED) && p->parts)
            continue; /* {"strings", "values"} objects: the task checks their shape */
        if (!(flags & ARGS_SCHEMA_EXPANDED) && json_is_string(v) &&
            args_schema_is_template(json_string_value(v)))
            continue;
        char want[128];
        describe_type(p->type, want, sizeof want);
        return err_set(err, errlen, TERN_EINVAL, "%s.%s: expected %s, got %s", path, key, want,
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
