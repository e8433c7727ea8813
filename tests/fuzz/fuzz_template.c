/*
 * fuzz_template.c -- libFuzzer target for the ${...} templates: template_check and
 * template_expand over a fuzzed template (any JSON value, or else the input as one
 * string) against a fixed scope, template_expand_parts over the same (it fails exactly
 * when template_expand does, and a string's parts have one literal piece more than
 * values), and template_expand_string over the input as text.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/template.h"

static template_scope_t scope;

static void make_scope(void)
{
    json_error_t jerr;
    scope.params =
        json_loads("{\"who\": \"world\", \"size\": 10, \"disks\": [{\"size\": 5}, "
                   "{\"size\": null}], \"flag\": true, \"obj\": {\"a\": [1, 2.5, \"x\"]}, "
                   "\"empty\": \"\", \"nested\": {\"s\": \"${params.who}\"}}",
                   0, &jerr);
    scope.steps =
        json_loads("{\"check\": {\"result\": {\"size\": 20, \"list\": [1, 2]}}, "
                   "\"pause\": {\"result\": {\"slept_ms\": 200}}, \"broken\": {\"result\": "
                   "null, \"error\": {\"code\": \"E\", \"message\": \"m\"}}}",
                   0, &jerr);
    scope.state = json_loads("{\"greeted\": \"yes\", \"n\": 3}", 0, &jerr);
    scope.job = json_loads("{\"uuid\": \"6f0c1e2a-0000-4000-8000-000000000000\", \"target\": "
                           "\"vm-1\", \"workflow\": \"hello\"}",
                           0, &jerr);
    scope.error = json_loads("{\"code\": \"Timeout\", \"message\": \"took too long\", \"step\": "
                             "\"resize\"}",
                             0, &jerr);
    if (!scope.params || !scope.steps || !scope.state || !scope.job || !scope.error)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (scope.params == NULL)
        make_scope();
    static const char *const known[] = {"check", "pause", "broken"};
    const unsigned all =
        TEMPLATE_PARAMS | TEMPLATE_STEPS | TEMPLATE_STATE | TEMPLATE_JOB | TEMPLATE_ERROR;
    /* The first byte picks the allowed roots and how many steps are known. */
    unsigned roots = size > 0 ? data[0] & all : all;
    size_t n_known = size > 0 ? (data[0] >> 5) % 4 : 3;
    const char *text = size > 0 ? (const char *)data + 1 : "";
    size_t len = size > 0 ? size - 1 : 0;

    /* Workflow text is JSON without NUL escapes, so strings are valid UTF-8 C strings. */
    char *s = malloc(len + 1);
    memcpy(s, text, len);
    s[len] = '\0';
    json_error_t jerr;
    json_t *tmpl = json_loadb(text, len, JSON_DECODE_ANY, &jerr);
    if (tmpl == NULL)
        tmpl = json_string(s);
    char err[512];
    if (tmpl != NULL) {
        err[0] = '\0';
        int rc = template_check(tmpl, "args", roots, known, n_known, err, sizeof err);
        if (rc != 0 && err[0] == '\0')
            abort();
        err[0] = '\0';
        json_t *out = template_expand(tmpl, "args", &scope, err, sizeof err);
        if (out == NULL && err[0] == '\0')
            abort();
        err[0] = '\0';
        json_t *parts = template_expand_parts(tmpl, "args", &scope, err, sizeof err);
        if ((parts == NULL) != (out == NULL) || (parts == NULL && err[0] == '\0'))
            abort();
        if (parts != NULL && json_is_string(tmpl) &&
            json_array_size(json_object_get(parts, "strings")) !=
                json_array_size(json_object_get(parts, "values")) + 1)
            abort();
        json_decref(parts);
        json_decref(out);
        json_decref(tmpl);
    }

    (void)template_present(s);
    err[0] = '\0';
    char *str = template_expand_string(s, "holds[0]", &scope, err, sizeof err);
    if (str == NULL && err[0] == '\0')
        abort();
    free(str);
    free(s);
    return 0;
}
