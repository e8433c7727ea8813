/*
 * config.c -- the exec plugin's configuration, built by init from {"plugins":
 * {"exec": {...}}} and freed by fini, and what it allows to run: which programs, as
 * whom, and whether shell steps may run. Owns the exec_config_t and its lists.
 */
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec.h"

#include "lib/json_kind.h"

#define DEFAULT_USER "nobody" /* whom steps run as when ternd is root and no user is set */

/* ---- the plugin's configuration ------------------------------------------------ */

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
bool resolve_program(const char *program, const char *path, const char *cwd, char *out,
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

int exec_init(const tern_host *host, const json_t *config, void **state, char *err, size_t errlen)
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

void exec_fini(void *state)
{
    config_free(state);
}
/* ---- what the configuration allows --------------------------------------------- */

/* Whether `program` may run, given the child's PATH and cwd. Returns NULL and the
 * absolute path to run in `run_path`, or `msg` filled. With no "programs" list every
 * program may run and run_path is the program as written. */
const char *program_allowed(const exec_config_t *c, const char *program, const char *path,
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
