/*
 * test_plugin_loader.c -- the plugin loader against the plugins of tests/plugins/,
 * each wrong in one way: every refusal message is asserted as the operator reads it,
 * then a successful load, task lookup, fatal codes, GET /tasks' description, the
 * workflow-time checks of task names and arguments, and load_all's logging.
 *
 * Usage: test_plugin_loader <build dir of tests/plugins>
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/log.h"
#include "plugins/plugin_loader.h"

static char plugins_dir[PATH_MAX]; /* realpath of the test plugins' directory */

/* A host table with nothing in it: the test plugins' init does not call the host. */
static const tern_host test_host = {
    .size = sizeof(tern_host),
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
};

static int setup(void **state)
{
    char err[PATH_MAX + 64];
    plugin_registry_t *reg = plugin_registry_new(plugins_dir, &test_host, err, sizeof err);
    if (reg == NULL) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    *state = reg;
    return 0;
}

static int teardown(void **state)
{
    plugin_registry_free(*state);
    return 0;
}

/* Loads `file` expecting refusal `code`; returns the message (static buffer). */
static const char *refusal(plugin_registry_t *reg, const char *file, int code)
{
    static char err[2 * PATH_MAX];
    err[0] = '\0';
    int rc = plugin_registry_load(reg, file, NULL, err, sizeof err);
    if (rc != code)
        fail_msg("loading %s returned %d, expected %d (%s)", file, rc, code, err);
    assert_null(plugin_registry_find(reg, "good.echo", NULL));
    return err;
}

/* "plugin \"<plugins_dir>/<file>\": <rest>" */
static const char *expect(const char *file, const char *rest)
{
    static char buf[4 * PATH_MAX];
    snprintf(buf, sizeof buf, "plugin \"%s/%s\": %s", plugins_dir, file, rest);
    return buf;
}

#define ASSERT_REFUSED(reg, file, code, rest)                                                      \
    do {                                                                                           \
        const char *got_ = refusal((reg), (file), (code));                                         \
        assert_string_equal(got_, expect((file), (rest)));                                         \
    } while (0)

/* ---- refusals, in the loader's order ------------------------------------------- */

static void test_refuses_bad_names(void **state)
{
    plugin_registry_t *reg = *state;
    ASSERT_REFUSED(reg, "a.b.so", TERN_EINVAL, "name \"a.b\" does not match [a-z][a-z0-9_]*");
    ASSERT_REFUSED(reg, "Good.so", TERN_EINVAL, "name \"Good\" does not match [a-z][a-z0-9_]*");
    ASSERT_REFUSED(reg, "9lives.so", TERN_EINVAL, "name \"9lives\" does not match [a-z][a-z0-9_]*");
    ASSERT_REFUSED(reg, "good", TERN_EINVAL, "expected a file name of the form <name>.so");
    ASSERT_REFUSED(reg, "../good.so", TERN_EINVAL, "expected a file name of the form <name>.so");
    ASSERT_REFUSED(reg, "absent.so", TERN_ENOENT, "No such file or directory");
}

static void test_refuses_dlopen_failure(void **state)
{
    plugin_registry_t *reg = *state;
    const char *got = refusal(reg, "missing_symbol.so", TERN_EINVAL);
    const char *want = expect("missing_symbol.so", "dlopen failed: ");
    assert_memory_equal(got, want, strlen(want));
    /* dlerror's own text follows. */
    assert_non_null(strstr(got, "undefined symbol: tern_test_undefined_function"));
}

static void test_refuses_no_entry(void **state)
{
    plugin_registry_t *reg = *state;
    ASSERT_REFUSED(reg, "no_entry.so", TERN_EINVAL,
                   "no tern_plugin_entry symbol (not a tern plugin, or built without "
                   "TERN_PLUGIN)");
    ASSERT_REFUSED(reg, "null_desc.so", TERN_EINVAL, "tern_plugin_entry() returned NULL");
}

static void test_refuses_bad_magic(void **state)
{
    ASSERT_REFUSED(*state, "bad_magic.so", TERN_EINVAL,
                   "bad magic 0x12345678, expected 0x7465726e");
}

static void test_refuses_abi_versions(void **state)
{
    plugin_registry_t *reg = *state;
    char rest[128];
    snprintf(rest, sizeof rest, "ABI major %d, engine provides %d.%d", TERN_ABI_MAJOR + 1,
             TERN_ABI_MAJOR, TERN_ABI_MINOR);
    ASSERT_REFUSED(reg, "abi_major.so", TERN_EINVAL, rest);
    snprintf(rest, sizeof rest, "ABI %d.%d is newer than the engine's %d.%d", TERN_ABI_MAJOR,
             TERN_ABI_MINOR + 1, TERN_ABI_MAJOR, TERN_ABI_MINOR);
    ASSERT_REFUSED(reg, "abi_minor.so", TERN_EINVAL, rest);
    snprintf(rest, sizeof rest, "descriptor size 8, engine needs at least %zu",
             offsetof(tern_plugin, tasks) + sizeof(void *));
    ASSERT_REFUSED(reg, "small_size.so", TERN_EINVAL, rest);
}

static void test_refuses_wrong_name(void **state)
{
    ASSERT_REFUSED(*state, "wrong_name.so", TERN_EINVAL,
                   "name \"other\" differs from the file name \"wrong_name\"");
}

static void test_refuses_bad_tasks(void **state)
{
    plugin_registry_t *reg = *state;
    ASSERT_REFUSED(reg, "no_tasks.so", TERN_EINVAL, "task table is NULL");
    char rest[128];
    /* The size of an ABI 1.0 definition: later minors append optional hooks. */
    snprintf(rest, sizeof rest, "tasks[0]: size 4, engine needs at least %zu",
             offsetof(tern_task_def, cancel) + sizeof(void *));
    ASSERT_REFUSED(reg, "bad_task_size.so", TERN_EINVAL, rest);
    ASSERT_REFUSED(reg, "bad_task_name.so", TERN_EINVAL,
                   "tasks[0]: name \"Run\" does not match [a-z][a-z0-9_]*");
    ASSERT_REFUSED(reg, "bad_task.so", TERN_EINVAL, "task \"bad_task.run\": start is NULL");
    ASSERT_REFUSED(reg, "dup_task.so", TERN_EINVAL,
                   "task \"dup_task.run\" is defined twice (tasks[0] and tasks[2])");
}

static void test_refuses_bad_schema(void **state)
{
    const char *got = refusal(*state, "bad_schema.so", TERN_EINVAL);
    char want[2 * PATH_MAX];
    snprintf(want, sizeof want,
             "plugin \"%s/bad_schema.so\": task \"bad_schema.run\": args_schema is not valid "
             "JSON: string or '}' expected near 'required' (line 1, column 9)",
             plugins_dir);
    assert_string_equal(got, want);
}

static void test_refuses_bad_range(void **state)
{
    ASSERT_REFUSED(*state, "bad_range.so", TERN_EINVAL,
                   "task \"bad_range.run\": args_schema: properties.ms: minimum 10 leaves no value "
                   "under maximum 5");
    ASSERT_REFUSED(*state, "bad_range_type.so", TERN_EINVAL,
                   "task \"bad_range_type.run\": args_schema: properties.ms.maximum: expected "
                   "number, got string");
}

static void test_refuses_failing_init(void **state)
{
    ASSERT_REFUSED(*state, "init_fails.so", TERN_EINVAL,
                   "init failed: cannot reach the inventory at /nonexistent/dc.json");
}

/* The engine's member of the configuration is checked before the plugin is opened;
 * a good list is kept on the plugin with the configuration (for isolated helpers). */
static void test_allow_networks(void **state)
{
    plugin_registry_t *reg = *state;
    char err[2 * PATH_MAX] = "";
    json_t *config = json_pack("{s:[s,s]}", "allow_networks", "10.0.0.0/8", "10.1.2.3/8");
    assert_int_equal(plugin_registry_load(reg, "good.so", config, err, sizeof err), TERN_EINVAL);
    json_decref(config);
    assert_string_equal(err, expect("good.so", "plugins.good.allow_networks[1]: \"10.1.2.3/8\": "
                                               "host bits set: the network is 10.0.0.0/8 "
                                               "(expected ADDRESS/PREFIX such as 10.0.0.0/8 or "
                                               "fd00::/8)"));
    assert_null(plugin_registry_find(reg, "good.echo", NULL));

    config = json_pack("{s:[s], s:i}", "allow_networks", "10.0.0.0/8", "n", 7);
    if (plugin_registry_load(reg, "good.so", config, err, sizeof err) != 0)
        fail_msg("%s", err);
    const plugin_t *p = NULL;
    assert_non_null(plugin_registry_find(reg, "good.echo", &p));
    assert_non_null(p->allow_networks);
    assert_string_equal(net_allow_setting(p->allow_networks), "plugins.good.allow_networks");
    assert_true(json_equal(p->config, config));
    json_decref(config);
}

static void test_refuses_second_load(void **state)
{
    plugin_registry_t *reg = *state;
    char err[2 * PATH_MAX];
    assert_int_equal(plugin_registry_load(reg, "good.so", NULL, err, sizeof err), 0);
    assert_int_equal(plugin_registry_load(reg, "good.so", NULL, err, sizeof err), TERN_EEXIST);
    char rest[PATH_MAX + 128];
    snprintf(rest, sizeof rest, "a plugin named \"good\" is already loaded from \"%s/good.so\"",
             plugins_dir);
    assert_string_equal(err, expect("good.so", rest));
    /* The first load is untouched. */
    assert_non_null(plugin_registry_find(reg, "good.echo", NULL));
}

static void test_registry_needs_a_directory(void **state)
{
    (void)state;
    char err[256];
    assert_null(plugin_registry_new("/nonexistent/tern/tasks", &test_host, err, sizeof err));
    assert_string_equal(err, "plugin directory \"/nonexistent/tern/tasks\": No such file or "
                             "directory");
    assert_null(plugin_registry_new("/etc/passwd", &test_host, err, sizeof err));
    assert_string_equal(err, "plugin directory \"/etc/passwd\": not a directory");
}

/* ---- the plugin directory boundary --------------------------------------------- */

typedef struct tmpdir {
    char path[PATH_MAX];
} tmpdir_t;

static void tmpdir_make(tmpdir_t *t)
{
    char tmpl[] = "/tmp/tern-plugins-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    assert_non_null(realpath(tmpl, t->path));
}

static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb");
    FILE *out = fopen(to, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    assert_int_equal(fclose(out), 0);
}

static void test_symlink_outside_is_refused(void **state)
{
    (void)state;
    tmpdir_t t;
    tmpdir_make(&t);
    char link[PATH_MAX + 32], target[PATH_MAX + 32];
    snprintf(link, sizeof link, "%s/good.so", t.path);
    snprintf(target, sizeof target, "%s/good.so", plugins_dir);
    assert_int_equal(symlink(target, link), 0);

    char err[3 * PATH_MAX];
    plugin_registry_t *reg = plugin_registry_new(t.path, &test_host, err, sizeof err);
    assert_non_null(reg);
    assert_int_equal(plugin_registry_load(reg, "good.so", NULL, err, sizeof err), TERN_EPERM);
    char want[5 * PATH_MAX];
    snprintf(want, sizeof want,
             "plugin \"%s/good.so\": resolves to \"%s/good.so\", outside the plugin directory "
             "\"%s\"",
             t.path, plugins_dir, t.path);
    assert_string_equal(err, want);
    /* load_all counts it as a refusal too. */
    assert_int_equal(plugin_registry_load_all(reg, NULL), 1);
    assert_null(plugin_registry_find(reg, "good.echo", NULL));
    plugin_registry_free(reg);

    /* A prefix of the directory's name is not the directory: <dir>-evil/x.so. */
    char evil[PATH_MAX + 32], evil_so[PATH_MAX + 64];
    snprintf(evil, sizeof evil, "%s-evil", t.path);
    assert_int_equal(mkdir(evil, 0700), 0);
    snprintf(evil_so, sizeof evil_so, "%s/good.so", evil);
    copy_file(target, evil_so);
    assert_int_equal(unlink(link), 0);
    assert_int_equal(symlink(evil_so, link), 0);
    reg = plugin_registry_new(t.path, &test_host, err, sizeof err);
    assert_int_equal(plugin_registry_load(reg, "good.so", NULL, err, sizeof err), TERN_EPERM);
    assert_non_null(strstr(err, "outside the plugin directory"));
    plugin_registry_free(reg);

    assert_int_equal(unlink(evil_so), 0);
    assert_int_equal(rmdir(evil), 0);
    assert_int_equal(unlink(link), 0);
    assert_int_equal(rmdir(t.path), 0);
}

static void test_symlink_inside_is_followed(void **state)
{
    (void)state;
    tmpdir_t t;
    tmpdir_make(&t);
    char sub[PATH_MAX + 32], real[PATH_MAX + 64], link[PATH_MAX + 32], from[PATH_MAX + 32];
    snprintf(sub, sizeof sub, "%s/lib", t.path);
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(real, sizeof real, "%s/good.so", sub);
    snprintf(from, sizeof from, "%s/good.so", plugins_dir);
    copy_file(from, real);
    snprintf(link, sizeof link, "%s/good.so", t.path);
    assert_int_equal(symlink("lib/good.so", link), 0);

    char err[3 * PATH_MAX];
    plugin_registry_t *reg = plugin_registry_new(t.path, &test_host, err, sizeof err);
    assert_non_null(reg);
    if (plugin_registry_load(reg, "good.so", NULL, err, sizeof err) != 0)
        fail_msg("%s", err);
    const plugin_t *p = NULL;
    assert_non_null(plugin_registry_find(reg, "good.echo", &p));
    assert_string_equal(p->path, real); /* the resolved path is what is remembered */
    plugin_registry_free(reg);

    assert_int_equal(unlink(link), 0);
    assert_int_equal(unlink(real), 0);
    assert_int_equal(rmdir(sub), 0);
    assert_int_equal(rmdir(t.path), 0);
}

/* ---- a good plugin --------------------------------------------------------------- */

static void test_good_plugin_loads(void **state)
{
    plugin_registry_t *reg = *state;
    char err[2 * PATH_MAX] = "";
    json_t *config = json_pack("{s:i}", "n", 7);
    if (plugin_registry_load(reg, "good.so", config, err, sizeof err) != 0)
        fail_msg("%s", err);
    json_decref(config);

    const plugin_t *p = NULL;
    const tern_task_def *echo = plugin_registry_find(reg, "good.echo", &p);
    assert_non_null(echo);
    assert_string_equal(echo->name, "echo");
    assert_non_null(p);
    assert_string_equal(p->name, "good");
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/good.so", plugins_dir);
    assert_string_equal(p->path, path);
    assert_string_equal(p->desc->version, "1.2.3");
    assert_non_null(p->dl);
    assert_int_equal(*(const int *)p->state, 7); /* init saw its configuration */

    const tern_task_def *noop = plugin_registry_find(reg, "good.noop", NULL);
    assert_non_null(noop);
    assert_string_equal(noop->name, "noop");

    assert_null(plugin_registry_find(reg, "good.ech", &p));
    assert_null(p);
    assert_null(plugin_registry_find(reg, "good", NULL));
    assert_null(plugin_registry_find(reg, "good.", NULL));
    assert_null(plugin_registry_find(reg, "core.echo", NULL));
    assert_null(plugin_registry_find(reg, "", NULL));

    assert_true(plugin_task_code_is_fatal(echo, "BadMessage"));
    assert_true(plugin_task_code_is_fatal(echo, "Forbidden"));
    assert_false(plugin_task_code_is_fatal(echo, "Timeout"));
    assert_false(plugin_task_code_is_fatal(echo, NULL));
    assert_false(plugin_task_code_is_fatal(noop, "BadMessage"));
}

static void test_describe(void **state)
{
    plugin_registry_t *reg = *state;
    json_t *empty = plugin_registry_describe(reg);
    assert_true(json_is_array(empty));
    assert_int_equal(json_array_size(empty), 0);
    json_decref(empty);

    char err[2 * PATH_MAX];
    assert_int_equal(plugin_registry_load(reg, "good.so", NULL, err, sizeof err), 0);
    json_t *got = plugin_registry_describe(reg);
    json_error_t jerr;
    json_t *want = json_loads(
        "[{\"name\": \"good\", \"version\": \"1.2.3\", \"tasks\": ["
        "  {\"name\": \"good.echo\", \"summary\": \"Returns its arguments.\","
        "   \"args_schema\": {\"required\": [\"msg\"], \"properties\": {"
        "      \"msg\": {\"type\": \"string\"}, \"n\": {\"type\": [\"integer\", \"null\"]}},"
        "      \"additional\": false},"
        "   \"fatal_codes\": [\"BadMessage\", \"Forbidden\"]},"
        "  {\"name\": \"good.noop\", \"summary\": \"Does nothing.\", \"args_schema\": null,"
        "   \"fatal_codes\": []}]}]",
        0, &jerr);
    assert_non_null(want);
    if (!json_equal(got, want)) {
        char *s = json_dumps(got, JSON_INDENT(2));
        fail_msg("describe gave %s", s);
    }
    json_decref(got);
    json_decref(want);
}

/* A task's check hook runs when a workflow is stored, with init's state, and its message
 * gets the step's path; a definition of ABI 1.0's size has no hook, whatever follows it. */
static void test_check_hook(void **state)
{
    plugin_registry_t *reg = *state;
    char err[2 * PATH_MAX];
    assert_int_equal(plugin_registry_load(reg, "store_check.so", NULL, err, sizeof err), 0);
    assert_int_equal(plugin_registry_load(reg, "abi_1_0.so", NULL, err, sizeof err), 0);
    const plugin_t *p = NULL;
    assert_non_null(plugin_registry_find(reg, "store_check.run", &p));
    int before = *(const int *)p->state;

    json_t *args = json_pack("{s:s}", "mode", "fine");
    assert_int_equal(
        plugin_registry_check_task(reg, "store_check.run", args, "chain[2]", err, sizeof err), 0);
    json_decref(args);
    args = json_pack("{s:s}", "mode", "forbidden");
    assert_int_equal(
        plugin_registry_check_task(reg, "store_check.run", args, "chain[2]", err, sizeof err),
        TERN_EINVAL);
    assert_string_equal(err, "chain[2].args.mode: \"forbidden\" is not allowed here");
    assert_int_equal(*(const int *)p->state, before + 2);
    /* The schema is checked first: a wrong type never reaches the hook. */
    json_decref(args);
    args = json_pack("{s:i}", "mode", 1);
    assert_int_equal(
        plugin_registry_check_task(reg, "store_check.run", args, "chain[2]", err, sizeof err),
        TERN_EINVAL);
    assert_string_equal(err, "chain[2].args.mode: expected string, got integer");
    assert_int_equal(*(const int *)p->state, before + 2);
    json_decref(args);

    args = json_object();
    assert_int_equal(
        plugin_registry_check_task(reg, "abi_1_0.run", args, "chain[0]", err, sizeof err), 0);
    json_decref(args);
}

static void test_check_task(void **state)
{
    plugin_registry_t *reg = *state;
    char err[2 * PATH_MAX];
    assert_int_equal(plugin_registry_load(reg, "good.so", NULL, err, sizeof err), 0);

    json_t *args = json_pack("{s:s}", "msg", "hi");
    assert_int_equal(
        plugin_registry_check_task(reg, "good.echo", args, "chain[1]", err, sizeof err), 0);

    assert_int_equal(plugin_registry_check_task(reg, "good.ech", args, "chain[1]", err, sizeof err),
                     TERN_ENOENT);
    assert_string_equal(err, "chain[1].task: unknown task \"good.ech\"");
    assert_int_equal(
        plugin_registry_check_task(reg, "vm.create", args, "onerror[0]", err, sizeof err),
        TERN_ENOENT);
    assert_string_equal(err, "onerror[0].task: unknown task \"vm.create\" (no plugin \"vm\" "
                             "loaded)");
    assert_int_equal(plugin_registry_check_task(reg, "core.lgo", args, "chain[1]", err, sizeof err),
                     TERN_ENOENT);
    assert_string_equal(err,
                        "chain[1].task: unknown task \"core.lgo\" (no plugin \"core\" loaded)");
    assert_int_equal(plugin_registry_check_task(reg, "good", args, "chain[1]", err, sizeof err),
                     TERN_ENOENT);
    assert_string_equal(err, "chain[1].task: unknown task \"good\" (expected \"family.entry\")");
    json_decref(args);

    /* Arguments. */
    args = json_pack("{s:i}", "msg", 5);
    assert_int_equal(
        plugin_registry_check_task(reg, "good.echo", args, "chain[1]", err, sizeof err),
        TERN_EINVAL);
    assert_string_equal(err, "chain[1].args.msg: expected string, got integer");
    json_decref(args);

    args = json_pack("{s:s}", "n", "3");
    assert_int_equal(
        plugin_registry_check_task(reg, "good.echo", args, "chain[1]", err, sizeof err),
        TERN_EINVAL);
    assert_string_equal(err, "chain[1].args: missing required \"msg\"");
    json_decref(args);

    args = json_pack("{s:s, s:s}", "msg", "m", "mgs", "m");
    assert_int_equal(
        plugin_registry_check_task(reg, "good.echo", args, "chain[1]", err, sizeof err),
        TERN_EINVAL);
    assert_string_equal(err, "chain[1].args: unknown argument \"mgs\"");
    json_decref(args);

    /* A template passes at load time and is checked after expansion. */
    args = json_pack("{s:s, s:s}", "msg", "m", "n", "${params.n}");
    assert_int_equal(
        plugin_registry_check_task(reg, "good.echo", args, "chain[1]", err, sizeof err), 0);
    assert_int_equal(
        plugin_registry_check_expanded(reg, "good.echo", args, "chain[1]", err, sizeof err),
        TERN_EINVAL);
    assert_string_equal(err, "chain[1].args.n: expected integer or null, got string");
    json_decref(args);
    args = json_pack("{s:s, s:n}", "msg", "m", "n");
    assert_int_equal(
        plugin_registry_check_expanded(reg, "good.echo", args, "chain[1]", err, sizeof err), 0);
    json_decref(args);

    /* A task without a schema takes any object, or no args at all; never a non-object. */
    assert_int_equal(
        plugin_registry_check_task(reg, "good.noop", NULL, "chain[0]", err, sizeof err), 0);
    args = json_pack("{s:i}", "whatever", 1);
    assert_int_equal(
        plugin_registry_check_task(reg, "good.noop", args, "chain[0]", err, sizeof err), 0);
    json_decref(args);
    args = json_pack("[i]", 1);
    assert_int_equal(
        plugin_registry_check_task(reg, "good.noop", args, "chain[0]", err, sizeof err),
        TERN_EINVAL);
    assert_string_equal(err, "chain[0].args: expected object, got array");
    json_decref(args);
}

/* ---- views (ABI 1.2) ------------------------------------------------------------ */

static void test_refuses_bad_views(void **state)
{
    plugin_registry_t *reg = *state;
    ASSERT_REFUSED(reg, "bad_view_path.so", TERN_EINVAL,
                   "view \"/bad_view_path//items\": bad path: it has an empty segment");
    ASSERT_REFUSED(reg, "dup_view_param.so", TERN_EINVAL,
                   "view \"/dup_view_param/:id\": query parameter \"id\" is also a parameter "
                   "of the path");
    char rest[160];
    snprintf(rest, sizeof rest, "views[0]: size 8, engine needs at least %zu",
             sizeof(tern_view_def));
    ASSERT_REFUSED(reg, "bad_view_size.so", TERN_EINVAL, rest);
    /* A flag bit the engine does not know, and a flag from a plugin built before flags. */
    ASSERT_REFUSED(reg, "bad_view_flags.so", TERN_EINVAL,
                   "view \"/bad_view_flags\": flags 0x6, engine knows 0x1 (TERN_VIEW_STREAM, "
                   "ABI 1.3; the plugin is ABI 1.3)");
    ASSERT_REFUSED(reg, "view_stream_1_2.so", TERN_EINVAL,
                   "view \"/view_stream_1_2\": flags 0x1, engine knows 0x1 (TERN_VIEW_STREAM, "
                   "ABI 1.3; the plugin is ABI 1.2)");
    /* Nothing of a refused plugin's views is kept. */
    assert_int_equal(plugin_registry_view_count(reg), 0);
}

static void test_refuses_view_over_engine_route(void **state)
{
    plugin_registry_t *reg = *state;
    plugin_registry_reserve(reg, "/jobs");
    plugin_registry_reserve(reg, "/jobs/:uuid");
    ASSERT_REFUSED(reg, "view_route_clash.so", TERN_EEXIST,
                   "view \"/jobs/:id\" overlaps the engine's route \"/jobs/:uuid\"");
}

static void test_refuses_view_over_another_plugins(void **state)
{
    plugin_registry_t *reg = *state;
    char err[2 * PATH_MAX];
    assert_int_equal(plugin_registry_load(reg, "views_good.so", NULL, err, sizeof err), 0);
    ASSERT_REFUSED(reg, "view_clash.so", TERN_EEXIST,
                   "view \"/things/list\" overlaps view \"/things/:id\" of plugin "
                   "\"views_good\"");
    assert_int_equal(plugin_registry_view_count(reg), 2);
}

static void test_views_load_and_describe(void **state)
{
    plugin_registry_t *reg = *state;
    char err[2 * PATH_MAX];
    assert_int_equal(plugin_registry_load(reg, "views_good.so", NULL, err, sizeof err), 0);
    /* A 1.1 descriptor is read with its own size: the view past it is never seen. */
    if (plugin_registry_load(reg, "abi_1_1.so", NULL, err, sizeof err) != 0)
        fail_msg("abi_1_1 refused: %s", err);
    assert_int_equal(plugin_registry_view_count(reg), 2);
    const plugin_view_t *item = plugin_registry_view(reg, 1);
    assert_string_equal(item->def->path, "/things/:id");
    assert_string_equal(item->plugin->name, "views_good");
    assert_int_equal(item->n_path_params, 1);
    assert_string_equal(item->path_params[0], "id");
    assert_null(plugin_registry_view(reg, 2));

    json_t *got = plugin_registry_describe_views(reg);
    json_t *want = json_pack(
        "[{s:s, s:s, s:s, s:[], s:[s], s:b}, {s:s, s:s, s:s, s:[s], s:[], s:b}]", "plugin",
        "views_good", "path", "/things", "summary", "Lists the things.", "path_params", "params",
        "kind", "stream", 0, "plugin", "views_good", "path", "/things/:id", "summary", "One thing.",
        "path_params", "id", "params", "stream", 1);
    if (!json_equal(got, want)) {
        char *g = json_dumps(got, JSON_COMPACT);
        fail_msg("GET /views: %s", g);
    }
    json_decref(got);
    json_decref(want);
}

static void test_view_path_rules(void **state)
{
    (void)state;
    static const char *const good[] = {"/vms", "/vms/:uuid", "/a/:b/:c/:d/:e", "/v1.2/x-y_Z",
                                       "/:any"};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(good); i++)
        if (plugin_view_path_fault(good[i]) != NULL)
            fail_msg("\"%s\" refused: %s", good[i], plugin_view_path_fault(good[i]));
    static const char *const bad[][2] = {
        {"vms", "it does not start with \"/\""},
        {"/", "\"/\" is not a view"},
        {"/vms/", "it ends with \"/\""},
        {"/vms//x", "it has an empty segment"},
        {"/vms/:", "a parameter has no name"},
        {"/vms/:Uuid", "a parameter's name does not match [a-z][a-z0-9_]*"},
        {"/vms/:u-id", "a parameter's name does not match [a-z][a-z0-9_]*"},
        {"/a/:b/:c/:d/:e/:f", "it has more than 4 parameters"},
        {"/vms?x=1", "a segment has a character outside [A-Za-z0-9_.-]"},
        {"/v ms", "a segment has a character outside [A-Za-z0-9_.-]"},
        {"/v%20", "a segment has a character outside [A-Za-z0-9_.-]"},
        {NULL, "path is NULL"},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(bad); i++) {
        const char *got = plugin_view_path_fault(bad[i][0]);
        if (got == NULL || strcmp(got, bad[i][1]) != 0)
            fail_msg("\"%s\": got %s, expected %s", bad[i][0] ? bad[i][0] : "(null)",
                     got ? got : "(accepted)", bad[i][1]);
    }
    char longest[PLUGIN_VIEW_PATH_MAX + 2];
    memset(longest, 'a', sizeof longest);
    longest[0] = '/';
    longest[PLUGIN_VIEW_PATH_MAX] = '\0';
    assert_null(plugin_view_path_fault(longest));
    longest[PLUGIN_VIEW_PATH_MAX] = 'a';
    longest[PLUGIN_VIEW_PATH_MAX + 1] = '\0';
    assert_string_equal(plugin_view_path_fault(longest), "it is longer than 200 bytes");
}

static void test_view_paths_overlap(void **state)
{
    (void)state;
    assert_true(plugin_view_paths_overlap("/jobs/:uuid", "/jobs/:id"));
    assert_true(plugin_view_paths_overlap("/jobs/:uuid", "/jobs/stats"));
    assert_true(plugin_view_paths_overlap("/a/:x/c", "/:y/b/c"));
    assert_true(plugin_view_paths_overlap("/views", "/views"));
    assert_false(plugin_view_paths_overlap("/jobs", "/jobs/:uuid"));
    assert_false(plugin_view_paths_overlap("/jobs/:uuid/info", "/jobs/:uuid"));
    assert_false(plugin_view_paths_overlap("/jobsx", "/jobs"));
    assert_false(plugin_view_paths_overlap("/vms/:uuid/disks", "/vms/:uuid/nics"));
}

/* ---- load_all ------------------------------------------------------------------ */

static void test_load_all_logs_each_refusal(void **state)
{
    plugin_registry_t *reg = *state;
    char logpath[] = "/tmp/tern-plugin-log-XXXXXX";
    int fd = mkstemp(logpath);
    assert_true(fd >= 0);
    log_init("test_plugin_loader", TERN_LOG_INFO, fd);

    json_t *configs = json_pack("{s:{s:i}}", "good", "n", 42);
    plugin_registry_reserve(reg, "/jobs/:uuid");
    int refused = plugin_registry_load_all(reg, configs);
    json_decref(configs);
    log_init("test_plugin_loader", TERN_LOG_INFO, 2);

    /* Every plugin of the directory but `good`, `store_check`, `abi_1_0`, `abi_1_1` and
     * `view_clash` is refused; `views_good` comes after `view_clash` in name order, so it
     * is the one whose view overlaps. */
    assert_int_equal(refused, 24);
    const plugin_t *p = NULL;
    assert_non_null(plugin_registry_find(reg, "good.echo", &p));
    assert_int_equal(*(const int *)p->state, 42);

    FILE *f = fopen(logpath, "r");
    assert_non_null(f);
    char line[8192];
    int errors = 0, infos = 0;
    bool saw_magic = false, saw_overlap = false;
    while (fgets(line, sizeof line, f) != NULL) {
        json_error_t jerr;
        json_t *l = json_loads(line, 0, &jerr);
        if (l == NULL)
            fail_msg("log line is not JSON: %s", line);
        assert_string_equal(json_string_value(json_object_get(l, "component")), "plugins");
        json_int_t level = json_integer_value(json_object_get(l, "level"));
        const char *msg = json_string_value(json_object_get(l, "msg"));
        if (level == TERN_LOG_ERROR) {
            errors++;
            assert_non_null(strstr(msg, "plugin \""));
            if (strcmp(msg, expect("bad_magic.so", "bad magic 0x12345678, expected "
                                                   "0x7465726e")) == 0)
                saw_magic = true;
            if (strcmp(msg, expect("views_good.so", "view \"/things/:id\" overlaps view "
                                                    "\"/things/list\" of plugin "
                                                    "\"view_clash\"")) == 0)
                saw_overlap = true;
        } else if (level == TERN_LOG_INFO) {
            infos++;
            if (strstr(msg, "loaded plugin \"good\" 1.2.3") == NULL &&
                strstr(msg, "loaded plugin \"store_check\" 0.0.1") == NULL &&
                strstr(msg, "loaded plugin \"abi_1_0\" 0.0.1") == NULL &&
                strstr(msg, "loaded plugin \"abi_1_1\" 0.0.1") == NULL &&
                (strstr(msg, "loaded plugin \"view_clash\" 0.0.1") == NULL ||
                 strstr(msg, "(1 task, 1 view)") == NULL))
                fail_msg("unexpected log line: %s", msg);
        }
        json_decref(l);
    }
    fclose(f);
    close(fd);
    unlink(logpath);
    assert_int_equal(errors, 24);
    assert_int_equal(infos, 5);
    assert_true(saw_magic);
    assert_true(saw_overlap);

    /* Loading the directory again refuses everything, the valid five because they are
     * loaded. */
    log_init("test_plugin_loader", TERN_LOG_FATAL, 2);
    assert_int_equal(plugin_registry_load_all(reg, NULL), 29);
    log_init("test_plugin_loader", TERN_LOG_INFO, 2);
}

int main(int argc, char **argv)
{
    if (argc != 2 || realpath(argv[1], plugins_dir) == NULL) {
        fprintf(stderr, "usage: %s <directory of the test plugins>\n", argv[0]);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_refuses_bad_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_dlopen_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_no_entry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_bad_magic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_abi_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_wrong_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_bad_tasks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_bad_schema, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_bad_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_failing_init, setup, teardown),
        cmocka_unit_test_setup_teardown(test_allow_networks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_second_load, setup, teardown),
        cmocka_unit_test(test_registry_needs_a_directory),
        cmocka_unit_test(test_symlink_outside_is_refused),
        cmocka_unit_test(test_symlink_inside_is_followed),
        cmocka_unit_test_setup_teardown(test_good_plugin_loads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_describe, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_task, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_hook, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_bad_views, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_view_over_engine_route, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_view_over_another_plugins, setup, teardown),
        cmocka_unit_test_setup_teardown(test_views_load_and_describe, setup, teardown),
        cmocka_unit_test(test_view_path_rules),
        cmocka_unit_test(test_view_paths_overlap),
        cmocka_unit_test_setup_teardown(test_load_all_logs_each_refusal, setup, teardown),
    };
    int failures = cmocka_run_group_tests_name("plugin_loader", tests, NULL, NULL);
    return failures == 0 ? 0 : 1;
}
