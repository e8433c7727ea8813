/*
 * migration_agent.c -- the helpers of migration_agent.h.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/args.h"
#include "lua_scripts.h"
#include "migration_agent.h"

const char *migration_arg_uuid(const json_t *args, const char *name, const char **out, char *msg,
                               size_t msglen)
{
    *out = NULL;
    const char *bad = task_args_string(args, name, out, NULL, msg, msglen);
    if (bad != NULL)
        return bad;
    if (*out == NULL) {
        snprintf(msg, msglen, "%s: required", name);
        return msg;
    }
    if (!dc_uuid_ok(*out)) {
        snprintf(msg, msglen, "%s: %.80s is not a lowercase UUID", name, *out);
        return msg;
    }
    return NULL;
}

int migration_arg_swapped(const json_t *args, char *msg, size_t msglen)
{
    const json_t *v = json_object_get(args, "switch_step");
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 7) {
        snprintf(msg, msglen, "switch_step: expected an integer 0 to 7");
        return -1;
    }
    return json_integer_value(v) >= 5 ? 1 : 0;
}

void migration_dir(const instance_paths_t *p, char *out)
{
    /* p->dir was checked to lie under the data root, far shorter than PATH_MAX. */
    int n = snprintf(out, PATH_MAX, "%.*s/.migration", PATH_MAX - 16, p->dir);
    (void)n; /* truncation cannot happen: see above */
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    int rc = flag == FTW_DP ? rmdir(path) : unlink(path);
    return rc != 0 && errno != ENOENT ? -1 : 0;
}

int migration_dir_remove(const instance_paths_t *p, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    migration_dir(p, dir);
    struct stat st;
    if (lstat(dir, &st) != 0)
        return errno == ENOENT ? 0
                               : (snprintf(err, errlen, "%s: %s", dir, strerror(errno)), -errno);
    if (!S_ISDIR(st.st_mode)) {
        if (unlink(dir) == 0)
            return 0;
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return -errno;
    }
    /* FTW_PHYS: a symlink inside is removed, never followed. */
    if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) {
        int e = errno != 0 ? errno : EIO;
        snprintf(err, errlen, "cannot remove %s: %s", dir, strerror(e));
        return -e;
    }
    return 0;
}

const char *migration_target_of(const json_t *vm)
{
    return json_string_value(json_object_get(vm, "migration_target"));
}

const char *migration_hidden_target_of(const json_t *vm)
{
    return json_is_true(json_object_get(vm, "do_not_inventory")) ? migration_target_of(vm) : NULL;
}

int migration_secret_ask(tern_ctx *ctx, const char *mig, dc_script_answer_fn cb, void *data)
{
    json_t *q = json_pack("{s:s}", "migration_uuid", mig);
    int rc = q != NULL ? dc_script_call(ctx, dc_lua_migration_secret, q, cb, data) : -1;
    json_decref(q);
    return rc != 0 ? -1 : 0;
}
