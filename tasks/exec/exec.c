/*
 * exec.c -- the "exec" plugin: runs a program on the runner's host.
 *
 * exec.run starts one child process through the host (tern_spawn: the engine's
 * child_process, stopped by the engine if the attempt is cancelled) and reports how it
 * ended. The program is executed directly, never through a shell, unless the workflow
 * says "shell": true, in which case argv is one string given to /bin/sh -c: the step
 * asks for a shell in writing, where a reviewer sees it.
 *
 * What may run is the operator's decision, in the plugin's configuration
 * ({"plugins": {"exec": {...}}} in ternd's configuration file), checked when a
 * workflow is stored (run_check) and again at every attempt (run_start), since the
 * configuration may change in between:
 *   allow_shell  shell steps are refused unless it is true (ExecNotAllowed);
 *   programs     when given, only these programs run: each entry a name (found in
 *                the default PATH when the plugin loads) or an absolute path, matched
 *                by realpath and by name (the file's name before symlinks) against argv[0]
 *                as the child's PATH and cwd resolve it,
 *                and the path found is what runs; a shell step needs /bin/sh listed;
 *   user         whom children run as when ternd is root (default "nobody", with its
 *                group and no supplementary groups); when not root, children run as
 *                ternd's user, and naming anyone else is refused at load.
 *
 * Templates never reach a shell as text: argv is an "interpolation": "parts" argument,
 * so the engine hands over the literal pieces and the values apart. A shell step's
 * script gets a positional-parameter reference in place of each template and the
 * values follow as `sh -c SCRIPT sh VALUE1 ...` (build_shell). In an argv array each
 * element stays one argument whatever its values hold, and a value that would begin
 * an argument with '-' (an option) is refused unless a literal "--" came before; in
 * ["sh", "-c", SCRIPT] a template in the script (code) is refused.
 *
 * The child gets a minimal environment by default (PATH=/usr/local/bin:/usr/bin:/bin
 * plus the step's "env"), so what a command sees does not depend on how ternd was
 * started; "inherit_env": true passes ternd's environment, with "env" on top.
 *
 * This file owns the configuration init builds (freed by fini) and one attempt's
 * argument vectors, which live only for the tern_spawn call (the host copies them).
 * No state survives between attempts and nothing is allocated across the callback, so
 * the task needs no cancel hook.
 */
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tern/task.h>

#include "lib/args.h"
#include "lib/json_kind.h"
#include "lib/strvec.h"

#define DEFAULT_PATH_DIRS "/usr/local/bin:/usr/bin:/bin"
#define DEFAULT_PATH      "PATH=" DEFAULT_PATH_DIRS
#define DEFAULT_USER      "nobody" /* whom steps run as when ternd is root and no user is set */
#define SHELL_PATH        "/bin/sh"
#define MAX_TAIL_BYTES    (1024 * 1024) /* results are stored in Redis */
#define DEFAULT_TAIL      4096
#define MAX_MSG_STDERR    2048 /* bytes of stderr quoted in a failure message */

/* Builds the child's environment into *env (left empty when the child simply inherits
 * ternd's). Returns NULL, or `msg` filled with what is wrong. */
static const char *build_env(const json_t *args, task_strv_t *env, bool *inherit_all, char *msg,
                             size_t msglen)
{
    const json_t *given = NULL;
    bool inherit = false;
    const char *bad = task_args_object(args, "env", &given, msg, msglen);
    if (bad == NULL)
        bad = task_args_bool(args, "inherit_env", &inherit, msg, msglen);
    if (bad != NULL)
        return bad;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)given, key, val)
    {
        if (key[0] == '\0' || strchr(key, '=') != NULL) {
            snprintf(msg, msglen, "env: invalid variable name \"%s\"", key);
            return msg;
        }
        if (!json_is_string(val)) {
            snprintf(msg, msglen, "env.%s: expected string, got %s", key, task_json_kind(val));
            return msg;
        }
    }
    *inherit_all = inherit;
    if (*inherit_all && json_object_size(given) == 0)
        return NULL; /* plain inheritance: the host passes NULL */

    if (*inherit_all) {
        for (char **e = environ; e != NULL && *e != NULL; e++) {
            const char *eq = strchr(*e, '=');
            if (eq == NULL || json_object_getn(given, *e, (size_t)(eq - *e)) != NULL)
                continue; /* malformed, or overridden by the step's env below */
            if (task_strv_push(env, *e, NULL) != 0)
                goto NoMemory;
        }
    } else if (json_object_get(given, "PATH") == NULL) {
        if (task_strv_push(env, DEFAULT_PATH, NULL) != 0)
            goto NoMemory;
    }
    json_object_foreach((json_t *)given, key, val)
    {
        size_t len = strlen(key) + 1 + json_string_length(val) + 1;
        char *entry = malloc(len);
        if (entry == NULL)
            goto NoMemory;
        snprintf(entry, len, "%s=%s", key, json_string_value(val));
        if (task_strv_push(env, NULL, entry) != 0) {
            free(entry);
            goto NoMemory;
        }
    }
    return NULL;
NoMemory:
    snprintf(msg, msglen, "out of memory building the environment");
    return msg;
}

/* ---- the plugin's configuration ------------------------------------------------ */

/* What the operator allows, from {"plugins": {"exec": {...}}}; built by init, read by
 * every attempt, freed by fini. */
typedef struct exec_config {
    bool allow_shell;  /* "allow_shell": shell steps may run */
    bool has_programs; /* "programs" was given: only those programs run */
    char **programs;   /* realpath of each allowed program */
    char **names;      /* parallel: the name it was found by (basename, before symlinks) */
    size_t n_programs;
    bool set_ids; /* run children as uid/gid (ternd is root) */
    uid_t uid;
    gid_t gid;
} exec_config_t;

static void config_free(exec_config_t *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->n_programs; i++) {
        free(c->programs[i]);
        free(c->names[i]);
    }
    free(c->programs);
    free(c->names);
    free(c);
}

/* Finds `name` (no '/') in the ':'-separated directories of `path`, as execvp does;
 * an empty or relative directory counts from `cwd` (NULL: ternd's). Writes the path
 * found into out and returns true. */
static bool search_path(const char *name, const char *path, const char *cwd, char *out,
                        size_t outlen)
{
    for (const char *p = path; p != NULL;) {
        const char *colon = strchr(p, ':');
        size_t dlen = colon != NULL ? (size_t)(colon - p) : strlen(p);
        int n;
        if (dlen == 0)
            n = snprintf(out, outlen, "%s/%s", cwd != NULL ? cwd : ".", name);
        else if (p[0] == '/' || cwd == NULL)
            n = snprintf(out, outlen, "%.*s/%s", (int)dlen, p, name);
        else
            n = snprintf(out, outlen, "%s/%.*s/%s", cwd, (int)dlen, p, name);
        struct stat st;
        if (n > 0 && (size_t)n < outlen && stat(out, &st) == 0 && S_ISREG(st.st_mode) &&
            access(out, X_OK) == 0)
            return true;
        p = colon != NULL ? colon + 1 : NULL;
    }
    return false;
}

/* Where `program` (argv[0]) runs from, given the child's PATH and cwd: an absolute
 * path written into out, or false when it cannot be found. */
static bool resolve_program(const char *program, const char *path, const char *cwd, char *out,
                            size_t outlen)
{
    char found[PATH_MAX];
    if (strchr(program, '/') == NULL) {
        if (!search_path(program, path, cwd, found, sizeof found))
            return false;
    } else if (program[0] == '/' || cwd == NULL) {
        snprintf(found, sizeof found, "%s", program);
    } else {
        snprintf(found, sizeof found, "%s/%s", cwd, program);
    }
    if (found[0] == '/') {
        snprintf(out, outlen, "%s", found);
        return access(found, X_OK) == 0;
    }
    char here[PATH_MAX];
    if (getcwd(here, sizeof here) == NULL)
        return false;
    int n = snprintf(out, outlen, "%s/%s", here, found);
    return n > 0 && (size_t)n < outlen && access(out, X_OK) == 0;
}

static int config_programs(exec_config_t *c, const json_t *list, char *err, size_t errlen)
{
    if (!json_is_array(list)) {
        snprintf(err, errlen, "programs: expected an array of program names or paths, got %s",
                 task_json_kind(list));
        return -1;
    }
    c->has_programs = true;
    c->programs = calloc(json_array_size(list) + 1, sizeof *c->programs);
    c->names = calloc(json_array_size(list) + 1, sizeof *c->names);
    if (c->programs == NULL || c->names == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    size_t i;
    const json_t *v;
    json_array_foreach(list, i, v)
    {
        const char *name = json_string_value(v);
        if (name == NULL || name[0] == '\0') {
            snprintf(err, errlen, "programs[%zu]: expected a program name or absolute path", i);
            return -1;
        }
        if (strchr(name, '/') != NULL && name[0] != '/') {
            snprintf(err, errlen,
                     "programs[%zu]: \"%s\" is a relative path; give a name (found in %s) or an "
                     "absolute path",
                     i, name, DEFAULT_PATH_DIRS);
            return -1;
        }
        char found[PATH_MAX];
        if (!resolve_program(name, DEFAULT_PATH_DIRS, "/", found, sizeof found)) {
            snprintf(err, errlen, "programs[%zu]: \"%s\" is not an executable file%s%s", i, name,
                     name[0] == '/' ? "" : " in ", name[0] == '/' ? "" : DEFAULT_PATH_DIRS);
            return -1;
        }
        char *real = realpath(found, NULL);
        if (real == NULL) {
            snprintf(err, errlen, "programs[%zu]: \"%s\": %s", i, found, strerror(errno));
            return -1;
        }
        char *base = strdup(strrchr(found, '/') + 1);
        if (base == NULL) {
            free(real);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        c->programs[c->n_programs] = real;
        c->names[c->n_programs++] = base;
    }
    return 0;
}

/* Which user children run as. As root: "user", or DEFAULT_USER when none is given, so
 * that a step never runs with root's privileges unless the configuration says "root".
 * Otherwise children run as ternd's user, and a "user" naming anyone else is refused:
 * switching needs root. */
static int config_user(exec_config_t *c, const json_t *user, char *err, size_t errlen)
{
    if (user != NULL && (!json_is_string(user) || json_string_length(user) == 0)) {
        snprintf(err, errlen, "user: expected a user name, got %s", task_json_kind(user));
        return -1;
    }
    const char *name = user != NULL ? json_string_value(user) : DEFAULT_USER;
    if (geteuid() != 0 && user == NULL)
        return 0;
    errno = 0;
    struct passwd *pw = getpwnam(name);
    if (pw == NULL) {
        snprintf(err, errlen, "user \"%s\"%s: %s", name,
                 user == NULL ? " (the default when ternd runs as root)" : "",
                 /* getpwnam(3): these, or none, mean "not found" */
                 errno == 0 || errno == ENOENT || errno == ESRCH || errno == EBADF || errno == EPERM
                     ? "no such user"
                     : strerror(errno));
        return -1;
    }
    if (geteuid() != 0) {
        if (pw->pw_uid != geteuid()) {
            snprintf(err, errlen,
                     "user \"%s\": ternd runs as uid %u, not root, and cannot run steps as uid "
                     "%u; remove \"user\" or run ternd as root",
                     name, (unsigned)geteuid(), (unsigned)pw->pw_uid);
            return -1;
        }
        return 0;
    }
    c->set_ids = true;
    c->uid = pw->pw_uid;
    c->gid = pw->pw_gid;
    return 0;
}

static int exec_init(const tern_host *host, const json_t *config, void **state, char *err,
                     size_t errlen)
{
    (void)host;
    if (config != NULL && !json_is_object(config)) {
        snprintf(err, errlen, "configuration: expected object, got %s", task_json_kind(config));
        return -1;
    }
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)config, key, v)
    {
        if (strcmp(key, "allow_shell") != 0 && strcmp(key, "programs") != 0 &&
            strcmp(key, "user") != 0) {
            snprintf(err, errlen,
                     "configuration: unknown setting \"%s\" (expected allow_shell, programs, user)",
                     key);
            return -1;
        }
    }
    exec_config_t *c = calloc(1, sizeof *c);
    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    const json_t *allow = json_object_get(config, "allow_shell");
    if (allow != NULL && !json_is_boolean(allow)) {
        snprintf(err, errlen, "allow_shell: expected boolean, got %s", task_json_kind(allow));
        goto Error;
    }
    c->allow_shell = json_is_true(allow);
    const json_t *programs = json_object_get(config, "programs");
    if (programs != NULL && config_programs(c, programs, err, errlen) != 0)
        goto Error;
    if (config_user(c, json_object_get(config, "user"), err, errlen) != 0)
        goto Error;
    *state = c;
    return 0;
Error:
    config_free(c);
    return -1;
}

static void exec_fini(void *state)
{
    config_free(state);
}

/* ---- what the configuration allows --------------------------------------------- */

#define SHELL_REFUSED                                                                              \
    "\"shell\": true is not allowed; the exec plugin's configuration must say "                    \
    "\"allow_shell\": true ({\"plugins\": {\"exec\": {\"allow_shell\": true}}})"

/* Whether `program` may run, given the child's PATH and cwd. Returns NULL and the
 * absolute path to run in `run_path`, or `msg` filled. With no "programs" list every
 * program may run and run_path is the program as written. */
static const char *program_allowed(const exec_config_t *c, const char *program, const char *path,
                                   const char *cwd, char *run_path, size_t run_len, char *msg,
                                   size_t msglen)
{
    snprintf(run_path, run_len, "%s", program);
    if (c == NULL || !c->has_programs)
        return NULL;
    char found[PATH_MAX];
    if (!resolve_program(program, path, cwd, found, sizeof found)) {
        snprintf(msg, msglen,
                 "program \"%s\" is not allowed: not found as an executable (PATH %s), and only "
                 "the exec plugin's \"programs\" may run",
                 program, path != NULL ? path : "unset");
        return msg;
    }
    /* The same file and the same name: a program may act on the name it is run by
     * (rbash and bash are one file, and so are view and vim). */
    char *real = realpath(found, NULL);
    const char *name = strrchr(found, '/') + 1;
    const char *alias_of = NULL;
    for (size_t i = 0; real != NULL && i < c->n_programs; i++) {
        if (strcmp(real, c->programs[i]) != 0)
            continue;
        if (strcmp(name, c->names[i]) == 0) {
            free(real);
            snprintf(run_path, run_len, "%s", found);
            return NULL;
        }
        alias_of = c->names[i];
    }
    if (alias_of != NULL) {
        snprintf(msg, msglen,
                 "program \"%s\" (%s) is not allowed: it is \"%s\" of the exec plugin's "
                 "\"programs\" list under another name, and a program may act on the name it "
                 "is run by",
                 program, found, alias_of);
        free(real);
        return msg;
    }
    snprintf(msg, msglen,
             "program \"%s\" (%s) is not allowed: it is not in the exec plugin's \"programs\" "
             "list",
             program, real != NULL ? real : found);
    free(real);
    return msg;
}

/* The PATH the child will search: the step's env, ternd's when inherited, or the
 * default. Borrowed from args or environ. */
static const char *child_path(const json_t *args)
{
    const char *p = json_string_value(json_object_get(json_object_get(args, "env"), "PATH"));
    if (p != NULL)
        return p;
    if (json_is_true(json_object_get(args, "inherit_env")))
        return getenv("PATH");
    return DEFAULT_PATH_DIRS;
}

/* The store-time check (tern_task_def.check): the arguments as written, templates
 * unexpanded. A program named by a template, or one not found on this host (the
 * runners may differ), is left to run time, which checks every step again. */
static int run_check(void *state, const json_t *args, char *err, size_t errlen)
{
    const exec_config_t *c = state;
    const json_t *shell = json_object_get(args, "shell");
    bool is_shell = json_is_true(shell);
    if (is_shell && (c == NULL || !c->allow_shell)) {
        snprintf(err, errlen, "shell: " SHELL_REFUSED);
        return -1;
    }
    if (c == NULL || !c->has_programs)
        return 0;
    const json_t *a = json_object_get(args, "argv");
    const char *program = is_shell ? SHELL_PATH : json_string_value(json_array_get(a, 0));
    const json_t *cwd = json_object_get(args, "cwd");
    const char *path = child_path(args);
    if (program == NULL || strstr(program, "${") != NULL ||
        (json_is_string(cwd) && strstr(json_string_value(cwd), "${") != NULL) ||
        (path != NULL && strstr(path, "${") != NULL))
        return 0;
    char run_path[PATH_MAX], found[PATH_MAX], msg[PATH_MAX + 256];
    if (!resolve_program(program, path, json_string_value(cwd), found, sizeof found))
        return 0;
    if (program_allowed(c, program, path, json_string_value(cwd), run_path, sizeof run_path, msg,
                        sizeof msg) == NULL)
        return 0;
    snprintf(err, errlen, "%s: %s%s", is_shell ? "shell" : "argv[0]", msg,
             is_shell ? " (a shell step needs the shell, " SHELL_PATH ", among the programs)" : "");
    return -1;
}

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
static int append_value(char **buf, size_t *len, const json_t *v)
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

static int append_text(char **buf, size_t *len, const char *s, size_t n)
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

/* Where a shell reads the text that comes next. */
enum shell_quote { SQ_NONE, SQ_SINGLE, SQ_DOUBLE };

#define SHELL_NEST_MAX 16

/* The quoting of literal script text as the shell will read it, so that each
 * template's reference is written in the form that keeps its value one word there.
 * A command substitution ($(...) or `...`) starts a new unquoted level inside the
 * quotes around it, as in the shell; comments are skipped. Whatever the lexer
 * concludes, the values are not in the script, but a mistake here would leave a
 * reference unquoted, where the shell splits its value into words (options among
 * them). So where the text is beyond what the lexer follows (here-documents, a case
 * pattern's ")" inside parentheses, backslashes inside backquotes, $'...', levels
 * deeper than SHELL_NEST_MAX) it records why in `unsure`, and no template may come
 * after that point. */
typedef struct shell_lexer {
    struct {
        enum shell_quote q;
        int parens;    /* open "(" at this level */
        bool backtick; /* this level was opened by "`" */
        bool arith;    /* this level is an arithmetic expansion, $((...)) */
    } lv[SHELL_NEST_MAX];
    int depth;
    bool escaped;
    bool word_start;    /* the next character would begin a word (a "#" there is a comment) */
    bool comment;       /* inside a comment, up to the end of the line */
    const char *unsure; /* what the lexer does not follow, once met; NULL while it follows */
} shell_lexer_t;

static void lexer_push(shell_lexer_t *lx, bool backtick, bool arith)
{
    if (lx->depth + 1 >= SHELL_NEST_MAX) {
        lx->unsure = "command substitutions nested more than 15 deep";
        return;
    }
    lx->depth++;
    lx->lv[lx->depth].q = SQ_NONE;
    lx->lv[lx->depth].parens = 0;
    lx->lv[lx->depth].backtick = backtick;
    lx->lv[lx->depth].arith = arith;
}

/* True when the text that comes next is inside an arithmetic expansion at any level. */
static bool lexer_in_arith(const shell_lexer_t *lx)
{
    for (int d = 0; d <= lx->depth; d++)
        if (lx->lv[d].arith)
            return true;
    return false;
}

/* True when the depth-th level or one around it was opened by a backquote. */
static bool lexer_in_backticks(const shell_lexer_t *lx)
{
    for (int d = 0; d <= lx->depth; d++)
        if (lx->lv[d].backtick)
            return true;
    return false;
}

/* Notes in lx->unsure what, starting at s[i] (unquoted, not escaped, beginning a word
 * when word_start), the lexer does not follow. */
static void lexer_check_unfollowed(shell_lexer_t *lx, const char *s, size_t n, size_t i,
                                   bool word_start)
{
    char c = s[i];
    if (lx->unsure != NULL || lexer_in_arith(lx))
        return;
    if (c == '<' && i + 1 < n && s[i + 1] == '<')
        lx->unsure = "a here-document (<<)";
    else if (c == '$' && i + 1 < n && s[i + 1] == '\'')
        lx->unsure = "$'...' (bash reads it as one quoted string, dash as \"$\" and a string)";
    else if (c == 'c' && word_start && n - i >= 5 && memcmp(s + i, "case", 4) == 0 &&
             strchr(" \t\n", s[i + 4]) != NULL && (lx->depth > 0 || lx->lv[lx->depth].parens > 0))
        lx->unsure = "a case statement inside parentheses or $(...) (its patterns end with \")\")";
}

static void follow_quotes(shell_lexer_t *lx, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        enum shell_quote *q = &lx->lv[lx->depth].q;
        bool word_start = lx->word_start, was_escaped = lx->escaped;
        lx->word_start = false;
        if (lx->comment) {
            if (c == '\n') {
                lx->comment = false;
                lx->word_start = true;
            }
        } else if (*q == SQ_SINGLE) {
            if (c == '\'')
                *q = SQ_NONE;
        } else if (lx->escaped) {
            lx->escaped = false;
        } else if (c == '\\') {
            lx->escaped = true;
            if (lexer_in_backticks(lx) && lx->unsure == NULL)
                lx->unsure = "a backslash inside backquotes (use $(...) instead)";
        } else if (*q == SQ_NONE && c == '#' && word_start) {
            lx->comment = true;
        } else if (c == '$' && i + 2 < n && s[i + 1] == '(' && s[i + 2] == '(') {
            lexer_push(lx, false, true);
            i += 2;
        } else if (c == '$' && i + 1 < n && s[i + 1] == '(') {
            lexer_push(lx, false, false);
            i++;
        } else if (c == '`') {
            if (lx->depth > 0 && lx->lv[lx->depth].backtick && *q == SQ_NONE)
                lx->depth--;
            else
                lexer_push(lx, true, false);
        } else if (c == '"') {
            *q = *q == SQ_DOUBLE ? SQ_NONE : SQ_DOUBLE;
        } else if (*q == SQ_NONE && c == '\'') {
            *q = SQ_SINGLE;
        } else if (*q == SQ_NONE && c == '(') {
            lx->lv[lx->depth].parens++;
        } else if (*q == SQ_NONE && c == ')') {
            if (lx->lv[lx->depth].parens > 0) {
                lx->lv[lx->depth].parens--;
            } else if (lx->depth > 0 && !lx->lv[lx->depth].backtick) {
                if (lx->lv[lx->depth].arith && i + 1 < n && s[i + 1] == ')')
                    i++; /* the second ")" of "))" */
                lx->depth--;
            }
        }
        if (!lx->comment && lx->lv[lx->depth].q == SQ_NONE && !was_escaped && !lx->escaped) {
            if (c != '\'' && c != '"')
                lexer_check_unfollowed(lx, s, n, i, word_start);
            /* After a blank or an operator a new word begins, as after "$(" and "`". */
            lx->word_start = s[i] != '\0' && strchr(" \t\n;&|()<>`", s[i]) != NULL;
        }
    }
}

/* /bin/sh -c SCRIPT sh VALUE1 VALUE2 ...: the script is the author's text with each
 * template replaced by a reference to a positional parameter, and the values travel
 * as those parameters, so no value is ever part of the code the shell parses.
 * Unquoted, a reference is written "${N}" (one word, no globbing); inside double
 * quotes ${N}; inside single quotes '"${N}"' (the quotes are closed around it); the
 * same inside a command substitution, by the quoting within it. */
static const char *build_shell(const json_t *a, task_strv_t *argv, char *msg, size_t msglen)
{
    const json_t *strings = json_object_get(a, "strings");
    const json_t *values = json_object_get(a, "values");
    char *script = NULL;
    size_t len = 0;
    shell_lexer_t lx = {.word_start = true};

    for (size_t i = 0; i < json_array_size(strings); i++) {
        const json_t *s = json_array_get(strings, i);
        if (append_text(&script, &len, json_string_value(s), json_string_length(s)) != 0)
            goto NoMemory;
        follow_quotes(&lx, json_string_value(s), json_string_length(s));
        enum shell_quote q = lx.lv[lx.depth].q;
        if (i + 1 == json_array_size(strings))
            break;
        if (lexer_in_arith(&lx)) {
            snprintf(msg, msglen,
                     "argv: template %zu is inside $((...)), where the shell reads a value as an "
                     "expression (bash runs the command substitutions in one); check the value "
                     "in the script before any arithmetic",
                     i + 1);
            free(script);
            return msg;
        }
        if (lx.unsure != NULL) {
            snprintf(msg, msglen,
                     "argv: template %zu comes after %s, whose quoting is not followed here, so "
                     "the form that keeps its value one word is not known; give the value to a "
                     "variable before that point and use \"$x\" after it",
                     i + 1, lx.unsure);
            free(script);
            return msg;
        }
        if (lx.escaped) {
            snprintf(msg, msglen,
                     "argv: template %zu follows a backslash, which would quote the shell "
                     "syntax around its value; remove the backslash",
                     i + 1);
            free(script);
            return msg;
        }
        char ref[48];
        snprintf(ref, sizeof ref,
                 q == SQ_NONE     ? "\"${%zu}\""
                 : q == SQ_DOUBLE ? "${%zu}"
                                  : "'\"${%zu}\"'",
                 i + 1);
        if (append_text(&script, &len, ref, strlen(ref)) != 0)
            goto NoMemory;
        lx.word_start = false; /* what follows is glued to the reference: "${1}"#x */
    }
    if (script == NULL || script[0] == '\0' || strlen(script) != len) {
        snprintf(msg, msglen,
                 "argv: with \"shell\": true, expected one non-empty string without "
                 "NUL bytes (the script for /bin/sh -c)");
        free(script);
        return msg;
    }
    if (task_strv_push(argv, SHELL_PATH, NULL) != 0 || task_strv_push(argv, "-c", NULL) != 0 ||
        task_strv_push(argv, NULL, script) != 0) {
        free(script);
        goto NoMemory;
    }
    if (task_strv_push(argv, "sh", NULL) != 0) /* $0 */
        goto NoMemory;
    for (size_t i = 0; i < json_array_size(values); i++) {
        char *v = NULL;
        size_t vlen = 0;
        if (append_value(&v, &vlen, json_array_get(values, i)) != 0 ||
            (v == NULL && append_text(&v, &vlen, "", 0) != 0)) {
            free(v);
            snprintf(msg, msglen, "argv: the value of template %zu contains a NUL byte", i + 1);
            return msg;
        }
        if (task_strv_push(argv, NULL, v) != 0) {
            free(v);
            goto NoMemory;
        }
    }
    return NULL;
NoMemory:
    snprintf(msg, msglen, "out of memory building argv");
    return msg;
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
static const char *build_argv(const json_t *args, task_strv_t *argv, bool *is_shell, char *msg,
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

/* The last `max` bytes of s without trailing newlines, for a message. */
static void quote_tail(const char *s, size_t len, char *out, size_t outlen)
{
    while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == '\r'))
        len--;
    size_t from = len > MAX_MSG_STDERR ? len - MAX_MSG_STDERR : 0;
    snprintf(out, outlen, "%s%.*s", from > 0 ? "..." : "", (int)(len - from), s + from);
}

/* `data` carries the step's timeout_ms (an integer, not a pointer), so that nothing is
 * allocated across the callback. */
static void on_exec_exit(tern_ctx *ctx, const tern_spawn_res *res, void *data)
{
    unsigned long long timeout_ms = (unsigned long long)(uintptr_t)data;
    if (res->error != NULL) {
        tern_task_fail(ctx, "ExecSpawnError", "%s", res->error);
        return;
    }
    char err_tail[MAX_MSG_STDERR + 8];
    quote_tail(res->stderr_tail, res->stderr_len, err_tail, sizeof err_tail);
    const char *sep = err_tail[0] != '\0' ? ": " : " (no stderr)";

    if (res->timed_out) {
        const char *abbrev = res->term_signal > 0 ? sigabbrev_np(res->term_signal) : NULL;
        tern_task_fail(ctx, "ExecTimeout",
                       "timed out after %llu ms, killed by signal %d (SIG%s)%s%s", timeout_ms,
                       res->term_signal, abbrev != NULL ? abbrev : "?", sep, err_tail);
        return;
    }
    if (res->term_signal != 0) {
        const char *abbrev = sigabbrev_np(res->term_signal);
        tern_task_fail(ctx, "ExecKilled", "killed by signal %d (SIG%s)%s%s", res->term_signal,
                       abbrev != NULL ? abbrev : "?", sep, err_tail);
        return;
    }
    if (res->exit_status != 0) {
        tern_task_fail(ctx, "ExecNonZeroExit", "exited with status %lld%s%s",
                       (long long)res->exit_status, sep, err_tail);
        return;
    }
    json_t *result = json_object();
    json_object_set_new(result, "exit_status", json_integer(res->exit_status));
    json_object_set_new(result, "stdout", json_stringn(res->stdout_tail, res->stdout_len));
    json_object_set_new(result, "stderr", json_stringn(res->stderr_tail, res->stderr_len));
    json_object_set_new(result, "elapsed_ms", json_integer((json_int_t)res->elapsed_ms));
    tern_task_done(ctx, result);
}

static void run_start(tern_ctx *ctx, const json_t *args)
{
    char msg[512];
    const char *bad = NULL;
    task_strv_t argv = {0}, env = {0};
    bool inherit_all = false;
    uint64_t timeout_ms = 0, tail = DEFAULT_TAIL;

    const exec_config_t *cfg = tern_plugin_state(ctx);
    bool is_shell = false;
    bad = build_argv(args, &argv, &is_shell, msg, sizeof msg);
    if (bad == NULL)
        bad = build_env(args, &env, &inherit_all, msg, sizeof msg);
    if (bad == NULL)
        bad = task_args_uint(args, "timeout_ms", UINTPTR_MAX, &timeout_ms, msg, sizeof msg);
    if (bad == NULL)
        bad = task_args_uint(args, "tail_bytes", MAX_TAIL_BYTES, &tail, msg, sizeof msg);
    const char *cwd = NULL, *in = NULL;
    size_t in_len = 0;
    if (bad == NULL)
        bad = task_args_string(args, "cwd", &cwd, NULL, msg, sizeof msg);
    if (bad == NULL)
        bad = task_args_string(args, "stdin", &in, &in_len, msg, sizeof msg);
    if (bad != NULL) {
        tern_task_fail(ctx, "InvalidArgument", "%s", bad);
        goto Out;
    }
    /* The configuration is checked again at every attempt: it may have changed since
     * the workflow was stored. */
    if (is_shell && (cfg == NULL || !cfg->allow_shell)) {
        tern_task_fail(ctx, "ExecNotAllowed", SHELL_REFUSED);
        goto Out;
    }
    char run_path[PATH_MAX];
    const char *path = inherit_all && env.n == 0 ? getenv("PATH") : NULL;
    for (size_t i = 0; path == NULL && i < env.n; i++)
        if (strncmp(env.v[i], "PATH=", 5) == 0)
            path = env.v[i] + 5;
    if (program_allowed(cfg, argv.v[0], path, cwd, run_path, sizeof run_path, msg, sizeof msg) !=
        NULL) {
        tern_task_fail(
            ctx, "ExecNotAllowed", "%s%s", msg,
            is_shell ? " (a shell step needs the shell, " SHELL_PATH ", among the programs)" : "");
        goto Out;
    }
    /* Run what was checked: the path found, not a second search of PATH. */
    if (cfg != NULL && cfg->has_programs)
        argv.v[0] = run_path;

    tern_spawn_opts opts = {
        .size = sizeof(tern_spawn_opts),
        .argv = argv.v,
        .env = inherit_all && env.n == 0 ? NULL : env.v,
        .cwd = cwd,
        .timeout_ms = timeout_ms,
        .tail_bytes = tail == 0 ? DEFAULT_TAIL : (size_t)tail,
        .stdin_data = in,
        .stdin_len = in_len,
        .flags = cfg != NULL && cfg->set_ids ? TERN_SPAWN_SET_IDS : 0,
        .uid = cfg != NULL ? (uint32_t)cfg->uid : 0,
        .gid = cfg != NULL ? (uint32_t)cfg->gid : 0,
    };
    int rc = tern_spawn(ctx, &opts, on_exec_exit, (void *)(uintptr_t)timeout_ms);
    if (rc < 0)
        tern_task_fail(ctx, "ExecSpawnError", "spawn \"%s\": %s", argv.v[0], strerror(-rc));
Out:
    task_strv_free(&argv);
    task_strv_free(&env);
}

static const char *const run_fatal[] = {"ExecSpawnError", "InvalidArgument", "ExecNotAllowed",
                                        NULL};

static const tern_task_def run_task = {
    .size = sizeof(tern_task_def),
    .name = "run",
    .summary = "Runs a program (never through a shell unless \"shell\": true) and returns "
               "its exit status and the tails of its output.",
    .args_schema = "{\"required\": [\"argv\"],"
                   " \"properties\": {"
                   "  \"argv\": {\"type\": [\"array\", \"string\"],"
                   "            \"interpolation\": \"parts\","
                   "            \"description\": \"program and arguments; a string only with "
                   "shell\"},"
                   "  \"env\": {\"type\": \"object\"},"
                   "  \"inherit_env\": {\"type\": \"boolean\"},"
                   "  \"cwd\": {\"type\": \"string\"},"
                   "  \"timeout_ms\": {\"type\": \"integer\", \"minimum\": 0,"
                   "                 \"maximum\": 31536000000},"
                   "  \"stdin\": {\"type\": \"string\"},"
                   "  \"tail_bytes\": {\"type\": \"integer\", \"minimum\": 0,"
                   "                 \"maximum\": 1048576},"
                   "  \"shell\": {\"type\": \"boolean\"}},"
                   " \"additional\": false}",
    .fatal_codes = run_fatal,
    .start = run_start,
    .check = run_check,
};

static const tern_task_def *const tasks[] = {&run_task, NULL};

static const tern_plugin exec_plugin = {
    .magic = TERN_PLUGIN_MAGIC,
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
    .size = sizeof(tern_plugin),
    .name = "exec",
    .version = "1.1.0",
    .init = exec_init,
    .fini = exec_fini,
    .tasks = tasks,
};

TERN_PLUGIN(exec_plugin)
