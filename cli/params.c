/*
 * params.c -- `-p KEY=VALUE` and `-f FILE` into a params object; see params.h.
 */
#include "params.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

/* Splits the key at unescaped dots into malloc'd segments ("\." is a literal dot).
 * Returns the number of segments in *out (free them with free_segs), or 0, with nothing
 * to free, when one is empty. */
static void free_segs(char **segs, size_t n);

static size_t split_key(const char *key, size_t len, char ***out)
{
    size_t cap = 4, n = 0;
    char **segs = xcalloc(cap, sizeof *segs);
    char *cur = xmalloc(len + 1);
    size_t k = 0;
    bool ok = true;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && key[i] == '\\' && i + 1 < len && key[i + 1] == '.') {
            cur[k++] = '.';
            i++;
        } else if (i == len || key[i] == '.') {
            if (k == 0)
                ok = false;
            cur[k] = '\0';
            if (n == cap) {
                cap *= 2;
                segs = xrealloc(segs, cap * sizeof *segs);
            }
            segs[n++] = xstrdup(cur);
            k = 0;
        } else {
            cur[k++] = key[i];
        }
    }
    free(cur);
    if (!ok) {
        free_segs(segs, n);
        segs = NULL;
        n = 0;
    }
    *out = segs;
    return n;
}

static void free_segs(char **segs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(segs[i]);
    free(segs);
}

/* VALUE as JSON when it is valid JSON, else as a string. */
static json_t *parse_value(const char *s)
{
    json_t *v = json_loads(s, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    return v != NULL ? v : json_string(s);
}

int params_set(json_t *params, const char *assignment, char *err, size_t errlen)
{
    const char *eq = strchr(assignment, '=');
    if (eq == NULL)
        return err_set(err, errlen, -1, "-p \"%s\": expected KEY=VALUE", assignment);
    char **segs = NULL;
    size_t n = split_key(assignment, (size_t)(eq - assignment), &segs);
    if (n == 0)
        return err_set(err, errlen, -1, "-p \"%s\": empty key or key segment", assignment);
    json_t *value = parse_value(eq + 1);
    if (value == NULL) {
        free_segs(segs, n);
        return err_set(err, errlen, -1, "-p \"%s\": the value is not valid UTF-8", assignment);
    }
    json_t *obj = params;
    int rc = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        json_t *next = json_object_get(obj, segs[i]);
        if (next == NULL) {
            next = json_object();
            if (json_object_set_new(obj, segs[i], next) != 0) {
                rc = err_set(err, errlen, -1, "-p \"%s\": the key is not valid UTF-8", assignment);
                break;
            }
        } else if (!json_is_object(next)) {
            /* Name the part of the key that is not an object: "disk is 10". */
            char prefix[256] = "";
            for (size_t j = 0; j <= i; j++)
                snprintf(prefix + strlen(prefix), sizeof prefix - strlen(prefix), "%s%s",
                         j > 0 ? "." : "", segs[j]);
            char *text = json_dumps(next, JSON_COMPACT | JSON_ENCODE_ANY);
            rc = err_set(err, errlen, -1, "-p \"%s\": %s is %.60s, not an object", assignment,
                         prefix, text != NULL ? text : "?");
            free(text);
            break;
        }
        obj = next;
    }
    if (rc == 0 && json_object_set_new(obj, segs[n - 1], value) != 0)
        rc = err_set(err, errlen, -1, "-p \"%s\": the key is not valid UTF-8", assignment);
    else if (rc != 0)
        json_decref(value);
    free_segs(segs, n);
    return rc;
}

json_t *params_load_file(const char *path, char *err, size_t errlen)
{
    bool is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "r");
    if (f == NULL) {
        err_set(err, errlen, -1, "%s: %s", path, strerror(errno));
        return NULL;
    }
    json_error_t jerr;
    json_t *v = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
    if (!is_stdin)
        fclose(f);
    if (v == NULL) {
        err_set(err, errlen, -1, "%s: line %d, column %d: %s", is_stdin ? "<stdin>" : path,
                jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        err_set(err, errlen, -1, "%s: expected a JSON object", is_stdin ? "<stdin>" : path);
        return NULL;
    }
    return v;
}

void params_merge(json_t *dst, const json_t *src)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)src, key, v)
    {
        json_t *cur = json_object_get(dst, key);
        if (json_is_object(cur) && json_is_object(v))
            params_merge(cur, v);
        else
            json_object_set_new(dst, key, json_deep_copy(v));
    }
}
