/*
 * argv.c -- the argument vector of exec.run: an argv array with each element one
 * argument whatever its templates' values hold, or, with "shell": true, the script
 * built by shell.c. Pushes owned strings and strings borrowed from args to argv.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"

#include "lib/args.h"
#include "lib/json_kind.h"

/* ---- the argument vector --------------------------------------------------------- */

/* True when v is what the engine hands over for an "interpolation": "parts" string:
 * {"strings": [n + 1 strings], "values": [n values]}. */
static bool is_parts(const json_t *v)
{
    const json_t *strings = json_object_get(v, "strings");
    const json_t *values = json_object_get(v, "values");
    if (!json_is_object(v) || !json_is_array(strings) || !json_is_array(values) ||
        json_array_size(strings) != json_array_size(values) + 1)
        return false;
    size_t i;
    const json_t *s;
    json_array_foreach(strings, i, s)
    {
        if (!json_is_string(s))
            return false;
    }
    return true;
}

/* Appends a value of a template as text: a string as it is, anything else as compact
 * JSON, as templates read inside a longer string. Returns 0, or -1 for a NUL byte
 * (which no argument can carry) or no memory. */
int append_value(char **buf, size_t *len, const json_t *v)
{
    char *text = json_is_string(v)
                     ? NULL
                     : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
    const char *p = json_is_string(v) ? json_string_value(v) : text;
    size_t n = json_is_string(v) ? json_string_length(v) : p != NULL ? strlen(p) : 0;
    if (p == NULL || memchr(p, '\0', n) != NULL) {
        free(text);
        return -1;
    }
    char *grown = realloc(*buf, *len + n + 1);
    if (grown == NULL) {
        free(text);
        return -1;
    }
    memcpy(grown + *len, p, n);
    *len += n;
    grown[*len] = '\0';
    *buf = grown;
    free(text);
    return 0;
}

int append_text(char **buf, size_t *len, const char *s, size_t n)
{
    char *grown = realloc(*buf, *len + n + 1);
    if (grown == NULL)
        return -1;
    memcpy(grown + *len, s, n);
    *len += n;
    grown[*len] = '\0';
    *buf = grown;
    return 0;
}

/* One element of an argv array: a plain string, or its parts. *from_value is set when
 * the element starts with a template's value (no literal text before it). */
static const char *build_arg(const json_t *el, size_t i, task_strv_t *argv, bool *starts_with_value,
                             char *msg, size_t msglen)
{
    *starts_with_value = false;
    if (json_is_string(el)) {
        if (strlen(json_string_value(el)) != json_string_length(el)) {
            snprintf(msg, msglen, "argv[%zu]: contains a NUL byte", i);
            return msg;
        }
        if (task_strv_push(argv, json_string_value(el), NULL) != 0)
            goto NoMemory;
        return NULL;
    }
    if (!is_parts(el)) {
        snprintf(msg, msglen, "argv[%zu]: expected string, got %s", i, task_json_kind(el));
        return msg;
    }
    const json_t *strings = json_object_get(el, "strings");
    const json_t *values = json_object_get(el, "values");
    char *arg = NULL;
    size_t len = 0;
    for (size_t k = 0; k < json_array_size(strings); k++) {
        const json_t *s = json_array_get(strings, k);
        if (append_text(&arg, &len, json_string_value(s), json_string_length(s)) != 0)
            goto NoMemoryArg;
        if (k + 1 < json_array_size(strings) &&
            append_value(&arg, &len, json_array_get(values, k)) != 0) {
            free(arg);
            snprintf(msg, msglen, "argv[%zu]: the value of a template contains a NUL byte", i);
            return msg;
        }
    }
    if (arg == NULL && append_text(&arg, &len, "", 0) != 0)
        goto NoMemoryArg;
    if (strlen(arg) != len) {
        free(arg);
        snprintf(msg, msglen, "argv[%zu]: contains a NUL byte", i);
        return msg;
    }
    *starts_with_value =
        json_array_size(values) > 0 && json_string_length(json_array_get(strings, 0)) == 0;
    if (task_strv_push(argv, NULL, arg) != 0)
        goto NoMemoryArg;
    return NULL;
NoMemoryArg:
    free(arg);
NoMemory:
    snprintf(msg, msglen, "out of memory building argv");
    return msg;
}

/* Shells whose -c takes the next operand as a script. */
static bool is_shell_program(const char *program)
{
    static const char *const shells[] = {"sh",   "bash", "dash", "rbash", "ash", "ksh",
                                         "mksh", "zsh",  "yash", "posh",  NULL};
    const char *slash = strrchr(program, '/');
    const char *base = slash != NULL ? slash + 1 : program;
    for (size_t i = 0; shells[i] != NULL; i++)
        if (strcmp(base, shells[i]) == 0)
            return true;
    return false;
}

/* In ["sh", "-c", SCRIPT, ...] the script is code: a template in it, or among the
 * shell's options before it, would put its value in the code. Values belong after
 * the script, where the shell reads them as "$1"... The shell may come after a
 * program that runs it (timeout 5 sh -c, env X=1 bash -c, sudo sh -c). Returns the
 * index of the first element with a template up to a script, with the shell's index
 * in *shell, or 0 when there is none. */
static size_t shell_c_template(const json_t *a, const task_strv_t *argv, size_t *shell)
{
    for (size_t k = 0; k < argv->n; k++) {
        if (!is_shell_program(argv->v[k]))
            continue;
        size_t j = k + 1;
        bool dash_c = false;
        for (; j < argv->n; j++) {
            const char *s = argv->v[j];
            if (strcmp(s, "--") == 0 || strcmp(s, "-") == 0) {
                j++;
                break;
            }
            if ((s[0] != '-' && s[0] != '+') || s[1] == '\0')
                break;
            if (s[0] == '-' && s[1] == '-') { /* long options; two take a file */
                if (strcmp(s, "--rcfile") == 0 || strcmp(s, "--init-file") == 0)
                    j++;
                continue;
            }
            dash_c = dash_c || strchr(s + 1, 'c') != NULL;
            for (const char *o = s + 1; *o != '\0'; o++) /* -o NAME, -O NAME */
                if (*o == 'o' || *o == 'O')
                    j++;
        }
        if (!dash_c)
            continue;
        for (size_t i = k + 1; i <= j && i < json_array_size(a); i++) {
            if (json_array_size(json_object_get(json_array_get(a, i), "values")) > 0) {
                *shell = k;
                return i;
            }
        }
    }
    return 0;
}

/* The argument vector: the array as given, or /bin/sh -c <script> when shell is true.
 * `argv` in args is what the engine hands over for an "interpolation": "parts"
 * argument (or plain strings, when a caller expands nothing). Returns NULL, or `msg`
 * filled. */
const char *build_argv(const json_t *args, task_strv_t *argv, bool *is_shell, char *msg,
                       size_t msglen)
{
    const json_t *a = json_object_get(args, "argv");
    bool shell = false;
    if (task_args_bool(args, "shell", &shell, msg, msglen) != NULL)
        return msg;
    /* A string without templates arrives as its parts too: read it as the string. */
    json_t *plain = NULL;
    if (is_parts(a) && json_array_size(json_object_get(a, "values")) == 0)
        a = plain = json_incref(json_array_get(json_object_get(a, "strings"), 0));
    const char *bad = NULL;
    *is_shell = shell;
    if (*is_shell) {
        if (json_is_string(a)) {
            json_t *p = json_pack("{s:[O], s:[]}", "strings", a, "values");
            bad = p != NULL ? build_shell(p, argv, msg, msglen) : "out of memory";
            json_decref(p);
        } else if (is_parts(a)) {
            bad = build_shell(a, argv, msg, msglen);
        } else {
            snprintf(msg, msglen,
                     "argv: with \"shell\": true, expected one non-empty string (the command "
                     "line for /bin/sh -c), got %s",
                     a == NULL ? "nothing" : task_json_kind(a));
            bad = msg;
        }
        json_decref(plain);
        return bad;
    }
    /* "argv": "${params.argv}" naming an array: the whole vector comes from the job,
     * which the workflow's author chose to allow. */
    const json_t *values = json_object_get(a, "values");
    const json_t *strings = json_object_get(a, "strings");
    bool whole_value = is_parts(a) && json_array_size(values) == 1 &&
                       json_string_length(json_array_get(strings, 0)) == 0 &&
                       json_string_length(json_array_get(strings, 1)) == 0 &&
                       json_is_array(json_array_get(values, 0));
    if (whole_value)
        a = json_array_get(values, 0);
    if (json_is_string(a) || is_parts(a)) {
        snprintf(msg, msglen,
                 "argv: expected an array of strings, got a string; a command line runs "
                 "through /bin/sh only with \"shell\": true");
        bad = msg;
        goto Out;
    }
    if (!json_is_array(a) || json_array_size(a) == 0) {
        snprintf(msg, msglen, "argv: expected a non-empty array of strings, got %s",
                 a == NULL          ? "nothing"
                 : json_is_array(a) ? "an empty array"
                                    : task_json_kind(a));
        bad = msg;
        goto Out;
    }
    size_t i;
    const json_t *el;
    bool after_dashes = false;
    json_array_foreach(a, i, el)
    {
        bool starts_with_value;
        if ((bad = build_arg(el, i, argv, &starts_with_value, msg, msglen)) != NULL)
            goto Out;
        const char *arg = argv->v[argv->n - 1];
        /* A value that begins an argument with '-' would be read as an option (rm's
         * "-rf", curl's "-o/etc/x"): the author asked for an operand. */
        if (i > 0 && starts_with_value && arg[0] == '-' && !after_dashes) {
            snprintf(msg, msglen,
                     "argv[%zu]: the value of a template, \"%.64s\", begins the argument with "
                     "'-', which the program would read as an option; write a literal \"--\" "
                     "argument before it, or text before the template",
                     i, arg);
            bad = msg;
            goto Out;
        }
        bool literal = json_is_string(el) || json_array_size(json_object_get(el, "values")) == 0;
        if (i > 0 && literal && strcmp(arg, "--") == 0)
            after_dashes = true;
    }
    if (argv->v[0][0] == '\0') {
        snprintf(msg, msglen, "argv[0]: empty program name");
        bad = msg;
        goto Out;
    }
    size_t shell_at = 0, in_script = whole_value ? 0 : shell_c_template(a, argv, &shell_at);
    if (in_script > 0) {
        snprintf(msg, msglen,
                 "argv[%zu]: a template in the script of %s -c, or in the options before it, "
                 "would make its value shell code; write \"shell\": true, or pass the value "
                 "as an argument after the script and use \"$1\" in it",
                 in_script, argv->v[shell_at]);
        bad = msg;
    }
Out:
    json_decref(plain);
    return bad;
}
