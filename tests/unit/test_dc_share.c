/*
 * test_dc_share.c -- the agent's share tasks of the built dc plugin (dc.storage_create,
 * dc.instance_start of a storage instance, dc.share_probe, dc.share_restart, and
 * dc.instance_destroy of a storage instance), through tests/support/task_harness.c on a
 * fresh lab directory under /tmp, with real share processes (tern-workload share,
 * detached, never this test's children) found again by a new plugin instance, as an
 * agent that restarts finds them. Checked on the files and in /proc: export/, vm.json,
 * the pid file, the process's arguments, the mount links.
 *
 * Arguments: the built dc.so and tern-workload.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "file_checks.h"
#include "lab_dir.h"
#include "task_harness.h"

#define CN1     "4d16fdf2-c04f-41fb-b197-1c8335405d01"
#define ST1     "51000000-0000-4000-8000-000000000001" /* storage instance of VOL1 */
#define ST2     "51000000-0000-4000-8000-000000000002" /* storage instance of VOL2 */
#define VOL1    "a1000000-0000-4000-8000-000000000001"
#define VOL2    "a1000000-0000-4000-8000-000000000002"
#define VM1     "c1000000-0000-4000-8000-000000000001" /* a consumer of VOL1 */
#define OWNER   "930896af-bf8c-48d4-885c-6573a94b1853"
#define BOUND   20000 /* ms: any one task */
#define HEALTH  "100" /* the description's share_health_ms */
#define WAIT_MS 10000 /* a share to exit after its failed checks */

static test_lab_t lab;

static task_harness_t *new_agent(void)
{
    return test_lab_agent(&lab, CN1);
}

static char *storage_args(const char *vm, const char *vol)
{
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"vm_uuid\": \"%s\", \"volume_uuid\": \"%s\", \"alias\": \"volume-data-%s\", "
             "\"owner_uuid\": \"" OWNER "\", \"nics\": [{\"mac\": \"90:b8:d0:00:00:09\", "
             "\"ip\": \"192.168.128.200\"}]}",
             vm, vol, vol);
    return buf;
}

static char *vm_args(const char *vm)
{
    static char buf[128];
    snprintf(buf, sizeof buf, "{\"vm_uuid\": \"%s\"}", vm);
    return buf;
}

static json_t *read_json(const char *path)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (doc == NULL)
        fail_msg("%s: %s", path, je.text);
    return doc;
}

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s != NULL ? s : "(none)";
}

/* The process's arguments, NUL separators made spaces. */
static char *cmdline_of(long pid)
{
    static char buf[4096];
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    for (size_t i = 0; i < n; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
    buf[n] = '\0';
    return buf;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void wait_gone(long pid)
{
    for (unsigned waited = 0; test_lab_pid_alive(pid); waited += 20) {
        if (waited >= WAIT_MS)
            fail_msg("pid %ld still runs %d ms on", pid, WAIT_MS);
        sleep_ms(20);
    }
}

/* The probe's entry for vm in its list `key` (borrowed), or NULL. */
static json_t *probe_entry(json_t *probe, const char *key, const char *vm)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(probe, key), i, e)
    {
        if (strcmp(str(e, "vm_uuid"), vm) == 0)
            return e;
    }
    return NULL;
}

/* A consumer as dc.instance_create leaves one that mounts VOL1 at /data/shared (the
 * test writes its vm.json; its links are what dc.share_restart makes). */
static void make_consumer(void)
{
    assert_int_equal(mkdir(test_path("%s/" VM1, lab.root), 0755), 0);
    json_t *vm = json_pack("{s:s, s:s, s:s, s:[{s:s, s:s, s:s, s:s, s:s, s:s, s:s}]}", "uuid", VM1,
                           "state", "running", "workload", "idle", "volumes", "name", "data",
                           "volume_uuid", VOL1, "mountpoint", "/data/shared", "mode", "rw", "type",
                           "tritonnfs", "nfsvolume", "192.168.128.200:/exports/data", "export_path",
                           test_path("%s/" ST1 "/export", lab.root));
    assert_int_equal(json_dump_file(vm, test_path("%s/" VM1 "/vm.json", lab.root), 0), 0);
    json_decref(vm);
}

/* ---- setup ------------------------------------------------------------------------------- */

static void write_description(void)
{
    test_lab_write_description(
        &lab, "{\"servers\": [{\"uuid\": \"" CN1 "\", \"hostname\": \"cn1\", \"rack\": \"r1\", "
              "\"ram_mib\": 65536, \"disk_mib\": 2097152, \"data_root\": \"servers/cn1\"}],"
              " \"networks\": [], \"packages\": [], \"images\": [],"
              " \"settings\": {\"share_health_ms\": " HEALTH "}}");
}

/* ---- the tests --------------------------------------------------------------------------- */

/* storage_create: export/ and vm.json, whole; again: answered as is; refusals. */
static void test_storage_create(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    json_t *r = task_harness_run_ok(h, "storage_create", storage_args(ST1, VOL1), BOUND);
    assert_true(json_is_true(json_object_get(r, "created")));
    assert_string_equal(str(r, "export_path"), test_path("%s/" ST1 "/export", lab.root));
    json_decref(r);
    struct stat st;
    assert_int_equal(lstat(test_path("%s/" ST1 "/export", lab.root), &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    json_t *vm = read_json(test_path("%s/" ST1 "/vm.json", lab.root));
    assert_string_equal(str(vm, "uuid"), ST1);
    assert_string_equal(str(vm, "role"), "nfsvolumestorage");
    assert_string_equal(str(vm, "volume_uuid"), VOL1);
    assert_string_equal(str(vm, "workload"), "share");
    assert_string_equal(str(vm, "state"), "stopped");
    assert_string_equal(str(vm, "brand"), "joyent-minimal");
    assert_string_equal(str(vm, "alias"), "volume-data-" VOL1);
    assert_string_equal(str(vm, "owner_uuid"), OWNER);
    assert_string_equal(str(json_object_get(vm, "internal_metadata"), "sdc:system_role"),
                        "nfsvolumestorage");
    assert_string_equal(str(json_array_get(json_object_get(vm, "nics"), 0), "ip"),
                        "192.168.128.200");
    assert_int_equal(json_array_size(json_object_get(vm, "disks")), 0);
    json_decref(vm);

    /* Again: the data in export/ and vm.json as they were. */
    FILE *f = fopen(test_path("%s/" ST1 "/export/kept.txt", lab.root), "w");
    assert_non_null(f);
    fputs("kept\n", f);
    fclose(f);
    ino_t ino = test_file_stat(test_path("%s/" ST1 "/vm.json", lab.root)).st_ino;
    r = task_harness_run_ok(h, "storage_create", storage_args(ST1, VOL1), BOUND);
    assert_true(json_is_false(json_object_get(r, "created")));
    json_decref(r);
    assert_true(test_file_exists(test_path("%s/" ST1 "/export/kept.txt", lab.root)));
    assert_int_equal(test_file_stat(test_path("%s/" ST1 "/vm.json", lab.root)).st_ino, ino);

    /* Another volume's storage under that uuid: refused, nothing changed. */
    task_harness_run_fails(h, "storage_create", storage_args(ST1, VOL2), BOUND, "InstanceConflict",
                           "the storage instance of another volume");
    assert_true(test_file_exists(test_path("%s/" ST1 "/export/kept.txt", lab.root)));

    /* A vm.json that cannot be read: refused, the data kept. */
    char *vmj = test_path("%s/" ST1 "/vm.json", lab.root);
    char saved[4096];
    FILE *in = fopen(vmj, "r");
    assert_non_null(in);
    size_t len = fread(saved, 1, sizeof saved, in);
    fclose(in);
    FILE *out = fopen(vmj, "w");
    assert_non_null(out);
    fputs("{\"uuid\": ", out);
    fclose(out);
    task_harness_run_fails(h, "storage_create", storage_args(ST1, VOL1), BOUND, "InstanceBroken",
                           "not a JSON object");
    assert_true(test_file_exists(test_path("%s/" ST1 "/export/kept.txt", lab.root)));
    out = fopen(test_path("%s/" ST1 "/vm.json", lab.root), "w");
    assert_non_null(out);
    assert_int_equal(fwrite(saved, 1, len, out), len);
    fclose(out);

    /* A partial one (no vm.json, as a create killed midway leaves it): made again. */
    assert_int_equal(mkdir(test_path("%s/" ST2, lab.root), 0755), 0);
    assert_int_equal(mkdir(test_path("%s/" ST2 "/junk", lab.root), 0755), 0);
    r = task_harness_run_ok(h, "storage_create", storage_args(ST2, VOL2), BOUND);
    assert_true(json_is_true(json_object_get(r, "created")));
    json_decref(r);
    assert_false(test_file_exists(test_path("%s/" ST2 "/junk", lab.root)));
    assert_true(test_file_exists(test_path("%s/" ST2 "/export", lab.root)));

    /* Bad arguments: refused, nothing made. */
    const char *nothing = "51000000-0000-4000-8000-0000000000ff";
    struct {
        const char *args, *part;
    } bad[] = {
        {"{\"vm_uuid\": \"../x\", \"volume_uuid\": \"" VOL1 "\", \"alias\": \"a\", "
         "\"owner_uuid\": \"" OWNER "\", \"nics\": []}",
         "vm_uuid: expected a UUID"},
        {"{\"vm_uuid\": \"51000000-0000-4000-8000-0000000000ff\", \"volume_uuid\": 7, "
         "\"alias\": \"a\", \"owner_uuid\": \"" OWNER "\", \"nics\": []}",
         "volume_uuid: expected a UUID"},
        {"{\"vm_uuid\": \"51000000-0000-4000-8000-0000000000ff\", \"volume_uuid\": \"" VOL1
         "\", \"alias\": \"a/b\", \"owner_uuid\": \"" OWNER "\", \"nics\": []}",
         "alias: expected a string of 1 to 512 characters"},
        {"{\"vm_uuid\": \"51000000-0000-4000-8000-0000000000ff\", \"volume_uuid\": \"" VOL1
         "\", \"alias\": \"a\", \"owner_uuid\": \"" OWNER "\", \"nics\": {}}",
         "nics: expected an array"},
        {"{\"vm_uuid\": \"51000000-0000-4000-8000-0000000000ff\", \"volume_uuid\": \"" VOL1
         "\", \"alias\": \"a\", \"owner_uuid\": \"" OWNER "\", \"nics\": [3]}",
         "nics[0]: expected an object"},
        {"{\"vm_uuid\": \"51000000-0000-4000-8000-0000000000ff\", \"volume_uuid\": \"" VOL1
         "\", \"alias\": \"a\", \"owner_uuid\": \"nobody\", \"nics\": []}",
         "owner_uuid: expected a UUID"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        task_harness_run_fails(h, "storage_create", bad[i].args, BOUND, "InvalidArgument",
                               bad[i].part);
    assert_false(test_file_exists(test_path("%s/%s", lab.root, nothing)));

    /* An instance directory that is a symlink out of the data root: refused. */
    assert_int_equal(symlink("/tmp", test_path("%s/%s", lab.root, nothing)), 0);
    task_harness_run_fails(h, "storage_create", storage_args(nothing, VOL1), BOUND,
                           "PathOutsideDataRoot", "a symlink");
    assert_int_equal(unlink(test_path("%s/%s", lab.root, nothing)), 0);
    task_harness_free(h);
}

/* start, probe, a share killed by its failed checks, restart and remount, destroy. */
static void test_share_lifecycle(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    /* Started as the share, with the description's health period. */
    json_t *r = task_harness_run_ok(h, "instance_start", vm_args(ST1), BOUND);
    long pid = (long)json_integer_value(json_object_get(r, "pid"));
    json_decref(r);
    assert_true(test_lab_pid_alive(pid));
    const char *cmd = cmdline_of(pid);
    if (strstr(cmd, " share --dir ") == NULL || strstr(cmd, "--health-ms " HEALTH " ") == NULL ||
        strstr(cmd, "--file") != NULL)
        fail_msg("the share runs as: %s", cmd);
    json_t *vm = read_json(test_path("%s/" ST1 "/vm.json", lab.root));
    assert_string_equal(str(vm, "state"), "running");
    json_decref(vm);

    /* A consumer; its links made by a remount. */
    make_consumer();
    r = task_harness_run_ok(h, "share_probe", "{}", BOUND);
    assert_string_equal(str(r, "server_uuid"), CN1);
    json_t *s1 = probe_entry(r, "storage", ST1), *s2 = probe_entry(r, "storage", ST2);
    assert_non_null(s1);
    assert_true(json_is_true(json_object_get(s1, "alive")));
    assert_int_equal(json_integer_value(json_object_get(s1, "pid")), pid);
    assert_string_equal(str(s1, "state"), "running");
    assert_string_equal(str(s1, "volume_uuid"), VOL1);
    assert_non_null(s2);
    assert_true(json_is_false(json_object_get(s2, "alive")));
    assert_string_equal(str(s2, "state"), "stopped");
    assert_true(json_is_false(json_object_get(probe_entry(r, "consumers", VM1), "mounts_ok")));
    assert_null(probe_entry(r, "storage", VM1));
    json_decref(r);

    r = task_harness_run_ok(h, "share_restart", "{\"restart\": [], \"remount\": [\"" VM1 "\"]}",
                            BOUND);
    assert_string_equal(json_string_value(json_array_get(json_object_get(r, "remounted"), 0)), VM1);
    json_decref(r);
    char target[PATH_MAX];
    ssize_t n =
        readlink(test_path("%s/" VM1 "/mounts/data/shared", lab.root), target, sizeof target - 1);
    assert_true(n > 0);
    target[n] = '\0';
    assert_string_equal(target, test_path("%s/" ST1 "/export", lab.root));
    assert_true(test_file_exists(test_path("%s/" VM1 "/mounts/data/shared/kept.txt", lab.root)));
    r = task_harness_run_ok(h, "share_probe", "{}", BOUND);
    assert_true(json_is_true(json_object_get(probe_entry(r, "consumers", VM1), "mounts_ok")));
    json_decref(r);

    /* The agent restarts: a new plugin instance finds the share. */
    task_harness_free(h);
    h = new_agent();
    r = task_harness_run_ok(h, "share_probe", "{}", BOUND);
    assert_int_equal(json_integer_value(json_object_get(probe_entry(r, "storage", ST1), "pid")),
                     pid);
    json_decref(r);

    /* export/ renamed away: the share exits after its failed checks; the probe says
     * so, and the consumer's link no longer resolves. */
    assert_int_equal(rename(test_path("%s/" ST1 "/export", lab.root),
                            test_path("%s/" ST1 "/export.away", lab.root)),
                     0);
    wait_gone(pid);
    assert_false(test_file_exists(test_path("%s/" ST1 "/workload.pid", lab.root)));
    r = task_harness_run_ok(h, "share_probe", "{}", BOUND);
    s1 = probe_entry(r, "storage", ST1);
    assert_true(json_is_false(json_object_get(s1, "alive")));
    assert_true(json_is_null(json_object_get(s1, "pid")));
    assert_string_equal(str(s1, "state"), "running"); /* not stopped on purpose */
    assert_true(json_is_false(json_object_get(probe_entry(r, "consumers", VM1), "mounts_ok")));
    json_decref(r);

    /* A restart while export/ is gone: the share refuses, listed failed; the step is
     * done. A stopped one is skipped, a consumer is not a storage instance. */
    r = task_harness_run_ok(h, "share_restart",
                            "{\"restart\": [\"" ST1 "\", \"" ST2 "\", \"" VM1 "\"]}", BOUND);
    assert_int_equal(json_array_size(json_object_get(r, "started")), 0);
    json_t *failed = json_object_get(r, "failed");
    assert_int_equal(json_array_size(failed), 2);
    assert_string_equal(str(json_array_get(failed, 0), "vm_uuid"), ST1);
    if (strstr(str(json_array_get(failed, 0), "reason"), "refusing to start") == NULL)
        fail_msg("failed: %s", json_dumps(failed, 0));
    assert_string_equal(str(json_array_get(failed, 1), "vm_uuid"), VM1);
    assert_string_equal(str(json_array_get(failed, 1), "reason"), "not a storage instance");
    assert_string_equal(str(json_array_get(json_object_get(r, "skipped"), 0), "vm_uuid"), ST2);
    json_decref(r);
    assert_false(test_file_exists(test_path("%s/" ST1 "/workload.pid", lab.root)));

    /* export/ back: the restart starts it, the data intact; the consumer remounted. */
    assert_int_equal(rename(test_path("%s/" ST1 "/export.away", lab.root),
                            test_path("%s/" ST1 "/export", lab.root)),
                     0);
    assert_int_equal(unlink(test_path("%s/" VM1 "/mounts/data/shared", lab.root)), 0);
    r = task_harness_run_ok(h, "share_restart",
                            "{\"restart\": [\"" ST1 "\"], \"remount\": [\"" VM1 "\"]}", BOUND);
    assert_string_equal(json_string_value(json_array_get(json_object_get(r, "started"), 0)), ST1);
    assert_string_equal(json_string_value(json_array_get(json_object_get(r, "remounted"), 0)), VM1);
    assert_int_equal(json_array_size(json_object_get(r, "failed")), 0);
    json_decref(r);
    r = task_harness_run_ok(h, "share_probe", "{}", BOUND);
    s1 = probe_entry(r, "storage", ST1);
    assert_true(json_is_true(json_object_get(s1, "alive")));
    long pid2 = (long)json_integer_value(json_object_get(s1, "pid"));
    assert_true(pid2 != pid && test_lab_pid_alive(pid2));
    assert_true(json_is_true(json_object_get(probe_entry(r, "consumers", VM1), "mounts_ok")));
    json_decref(r);
    assert_true(test_file_exists(test_path("%s/" VM1 "/mounts/data/shared/kept.txt", lab.root)));

    /* Restarting a running share: counted started, the same process. */
    r = task_harness_run_ok(h, "share_restart", "{\"restart\": [\"" ST1 "\"]}", BOUND);
    assert_string_equal(json_string_value(json_array_get(json_object_get(r, "started"), 0)), ST1);
    json_decref(r);
    assert_true(test_lab_pid_alive(pid2));
    assert_int_equal(test_file_stat(test_path("%s/" ST1 "/workload.pid", lab.root)).st_size,
                     snprintf(NULL, 0, "%ld\n", pid2));

    /* Bad lists: refused. */
    task_harness_run_fails(h, "share_restart", "{\"restart\": \"" ST1 "\"}", BOUND,
                           "InvalidArgument", "restart: expected an array");
    task_harness_run_fails(h, "share_restart", "{\"remount\": [\"../../etc\"]}", BOUND,
                           "InvalidArgument", "remount[0]: expected a UUID");

    /* A consumer whose mountpoint climbs out: refused, nothing linked. */
    json_t *c = read_json(test_path("%s/" VM1 "/vm.json", lab.root));
    json_object_set_new(json_array_get(json_object_get(c, "volumes"), 0), "mountpoint",
                        json_string("/../../escape"));
    assert_int_equal(json_dump_file(c, test_path("%s/" VM1 "/vm.json", lab.root), 0), 0);
    json_decref(c);
    r = task_harness_run_ok(h, "share_restart", "{\"remount\": [\"" VM1 "\"]}", BOUND);
    if (strstr(str(json_array_get(json_object_get(r, "failed"), 0), "reason"),
               "no empty, \".\" or \"..\" segment") == NULL)
        fail_msg("remount: %s", json_dumps(r, 0));
    json_decref(r);
    assert_false(test_file_exists(test_path("%s/escape", lab.root)));

    /* Destroy: the share stopped, export/ with its data and snapshots/ removed. */
    assert_int_equal(mkdir(test_path("%s/" ST1 "/snapshots", lab.root), 0755), 0);
    assert_int_equal(mkdir(test_path("%s/" ST1 "/snapshots/s1", lab.root), 0755), 0);
    r = task_harness_run_ok(h, "instance_destroy", vm_args(ST1), BOUND);
    assert_int_equal(json_integer_value(json_object_get(r, "pid")), pid2);
    json_decref(r);
    assert_false(test_lab_pid_alive(pid2));
    assert_false(test_file_exists(test_path("%s/" ST1, lab.root)));
    /* The consumer's link dangles; it is not followed by anything that removes. */
    assert_true(test_file_exists(test_path("%s/" VM1 "/vm.json", lab.root)));
    r = task_harness_run_ok(h, "instance_destroy", vm_args(ST2), BOUND);
    json_decref(r);
    r = task_harness_run_ok(h, "share_probe", "{}", BOUND);
    assert_int_equal(json_array_size(json_object_get(r, "storage")), 0);
    json_decref(r);
    task_harness_free(h);
}

int main(int argc, char **argv)
{
    int rc = test_lab_open(&lab, "test_dc_share", argc, argv, "DC_PLUGIN TERN_WORKLOAD");
    if (rc != 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_storage_create),
        cmocka_unit_test(test_share_lifecycle),
    };
    write_description();
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    test_lab_close(&lab);
    return rc;
}
