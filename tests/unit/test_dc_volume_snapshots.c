/*
 * test_dc_volume_snapshots.c -- the agent's dc.volume_snapshot of the built dc plugin,
 * through tests/support/task_harness.c, on a storage instance the test writes itself
 * (vm.json with role nfsvolumestorage and an export/ of files) in a fresh lab directory
 * under /tmp, checked on the files: a digest of the whole tree (names, kinds, modes,
 * contents, symlink targets), holes kept, no .part left; snapshot X then Y then a
 * rollback to s1 (acceptance 28); a server with no room (29: ServerDiskFull naming
 * the bytes, the data unchanged, no .part), by a tmpfs of a few MiB when the test may
 * mount one and by the task's test-only free_bytes otherwise; what a rollback killed
 * midway leaves, made whole by the next step, and a rollback killed -9 for real;
 * dc.instance_nics writing a storage instance's NICs into its vm.json. Prints the time
 * of a 48 MiB snapshot and of a rollback to it.
 *
 * And the five workflows of these operations parsed against the built dc and core
 * plugins: every task exists and every literal argument is one its schema takes.
 *
 * Arguments: the built dc.so, tern-workload and the workflows directory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "file_checks.h"
#include "model/workflow.h"
#include "plugins/plugin_loader.h"
#include "lab_dir.h"
#include "task_harness.h"

#define MIB   (1024ll * 1024ll)
#define CN1   "4d16fdf2-c04f-41fb-b197-1c8335405d01"
#define VM1   "11111111-1111-4111-8111-111111111111"
#define VM2   "22222222-2222-4222-8222-222222222222"
#define BOUND 30000 /* ms: any one task */

static const char *workflows_dir;
static test_lab_t lab;
static char dir1[1200]; /* VM1's directory */
static char exp1[1300]; /* VM1's export/ */

static task_harness_t *new_agent(void)
{
    return test_lab_agent(&lab, CN1);
}

static char *args_of(const char *op, const char *name, const char *more)
{
    static char buf[2048];
    snprintf(buf, sizeof buf, "{\"vm_uuid\": \"" VM1 "\", \"op\": \"%s\", \"name\": \"%s\"%s%s}",
             op, name, more != NULL ? ", " : "", more != NULL ? more : "");
    return buf;
}

/* ---- the tree's digest ---------------------------------------------------------------- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Every entry under dir, by name: its relative path, kind, mode, size and content
 * checksum or link target. Two trees with the same digest hold the same data. */
static uint64_t tree_digest_at(const char *dir, const char *rel, uint64_t h)
{
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    assert_true(n >= 0);
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
            char path[PATH_MAX], sub[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", dir, name);
            snprintf(sub, sizeof sub, "%s/%s", rel, name);
            struct stat st;
            assert_int_equal(lstat(path, &st), 0);
            h = fnv(h, sub, strlen(sub) + 1);
            unsigned mode = (unsigned)st.st_mode;
            h = fnv(h, &mode, sizeof mode);
            if (S_ISDIR(st.st_mode)) {
                h = tree_digest_at(path, sub, h);
            } else if (S_ISLNK(st.st_mode)) {
                char target[PATH_MAX];
                ssize_t len = readlink(path, target, sizeof target);
                assert_true(len > 0);
                h = fnv(h, target, (size_t)len);
            } else {
                uint64_t sum = test_file_checksum(path, 0, st.st_size);
                long long size = (long long)st.st_size;
                h = fnv(h, &size, sizeof size);
                h = fnv(h, &sum, sizeof sum);
            }
        }
        free(names[i]);
    }
    free(names);
    return h;
}

static uint64_t tree_digest(const char *dir)
{
    return tree_digest_at(dir, "", 14695981039346656037ull);
}

/* No ".part" and no rollback leftover anywhere in the instance's directory. */
static void assert_nothing_partial(const char *dir)
{
    char cmd[PATH_MAX + 128];
    snprintf(cmd, sizeof cmd,
             "find '%s' -name '*.part' -o -name export.rollback -o -name export.old | grep -q .",
             dir);
    if (system(cmd) == 0)
        fail_msg("a partial copy is left under %s", dir);
}

static json_t *names(const json_t *answer)
{
    return json_object_get(answer, "snapshots");
}

static void assert_snapshots(const json_t *answer, const char *want)
{
    char *got = json_dumps(names(answer), JSON_COMPACT);
    if (strcmp(got, want) != 0)
        fail_msg("snapshots: %s, expected %s", got, want);
    free(got);
}

/* ---- setup: a storage instance with an export of files --------------------------------- */

static void write_description(void)
{
    test_lab_write_description(
        &lab, "{\"servers\": [{\"uuid\": \"" CN1 "\", \"hostname\": \"cn1\", \"rack\": \"r1\", "
              "\"ram_mib\": 65536, \"disk_mib\": 2097152, \"data_root\": \"servers/cn1\"}],"
              " \"networks\": [], \"packages\": [], \"images\": []}");
}

/* A storage instance (or, with role NULL, another instance) at <root>/<vm>. */
static void make_instance(const char *vm, const char *role)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", lab.root, vm);
    assert_int_equal(mkdir(dir, 0755), 0);
    assert_int_equal(mkdir(test_path("%s/export", dir), 0755), 0);
    json_t *doc = json_pack("{s:s, s:s, s:s, s:s}", "uuid", vm, "brand", "joyent-minimal", "state",
                            "running", "workload", "share");
    if (role != NULL)
        json_object_set_new(doc, "role", json_string(role));
    assert_int_equal(json_dump_file(doc, test_path("%s/vm.json", dir), 0), 0);
    json_decref(doc);
}

/* The volume's files at first: text, a sparse file with data in its middle, a
 * subdirectory, a symlink, modes other than the default. */
static void fill_export(void)
{
    FILE *f = fopen(test_path("%s/a.txt", exp1), "w");
    assert_non_null(f);
    fputs("the first file\n", f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(test_path("%s/a.txt", exp1), 0640), 0);
    assert_int_equal(mkdir(test_path("%s/sub", exp1), 0750), 0);
    int fd = open(test_path("%s/sub/sparse.bin", exp1), O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 100 * MIB), 0);
    close(fd);
    test_file_write_pattern(test_path("%s/sub/sparse.bin", exp1), 50 * MIB, 7, MIB);
    assert_int_equal(symlink("../a.txt", test_path("%s/sub/link", exp1)), 0);
    assert_int_equal(mkdir(test_path("%s/sub/empty", exp1), 0700), 0);
}

/* ---- the tests -------------------------------------------------------------------------- */

static void test_create_and_delete(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    uint64_t before = tree_digest(exp1);
    json_t *r = task_harness_run_ok(h, "volume_snapshot", args_of("create", "s1", NULL), BOUND);
    assert_snapshots(r, "[\"s1\"]");
    assert_int_equal(json_integer_value(json_object_get(r, "data_bytes")),
                     MIB + (long long)strlen("the first file\n"));
    json_decref(r);
    const char *s1 = test_path("%s/snapshots/s1", dir1);
    assert_true(tree_digest(s1) == before);
    assert_true(tree_digest(exp1) == before);
    /* The hole stays a hole (a reflink shares blocks; a copy writes the data only). */
    assert_true(test_file_stat(test_path("%s/sub/sparse.bin", s1)).st_blocks * 512 <= 2 * MIB);
    struct stat link;
    assert_int_equal(lstat(test_path("%s/sub/link", s1), &link), 0);
    assert_true(S_ISLNK(link.st_mode));
    assert_nothing_partial(dir1);
    /* A setuid file in the export: its snapshot copy keeps the mode without setuid and
     * setgid (the agent owns the copy). */
    FILE *t = fopen(test_path("%s/tool", exp1), "w");
    assert_non_null(t);
    assert_int_equal(fclose(t), 0);
    assert_int_equal(chmod(test_path("%s/tool", exp1), 06755), 0);
    json_decref(task_harness_run_ok(h, "volume_snapshot", args_of("create", "setid", NULL), BOUND));
    assert_int_equal(test_file_stat(test_path("%s/snapshots/setid/tool", dir1)).st_mode & 07777,
                     0755);
    json_decref(task_harness_run_ok(h, "volume_snapshot", args_of("delete", "setid", NULL), BOUND));
    assert_int_equal(unlink(test_path("%s/tool", exp1)), 0);

    /* Again: done already, the copy kept as it is. */
    ino_t ino = test_file_stat(s1).st_ino;
    r = task_harness_run_ok(h, "volume_snapshot", args_of("create", "s1", NULL), BOUND);
    assert_snapshots(r, "[\"s1\"]");
    json_decref(r);
    assert_int_equal(test_file_stat(s1).st_ino, ino);

    /* Data written after the snapshot is not in it. */
    test_file_write_pattern(test_path("%s/a.txt", exp1), 0, 9, 64);
    assert_true(tree_digest(s1) == before);
    assert_true(tree_digest(exp1) != before);

    /* A .part left by a killed create is made again. */
    assert_int_equal(mkdir(test_path("%s/snapshots/s2.part", dir1), 0700), 0);
    test_file_write_pattern(test_path("%s/snapshots/s2.part/junk", dir1), 0, 1, 10);
    r = task_harness_run_ok(h, "volume_snapshot", args_of("create", "s2", NULL), BOUND);
    assert_snapshots(r, "[\"s1\",\"s2\"]");
    json_decref(r);
    assert_true(tree_digest(test_path("%s/snapshots/s2", dir1)) == tree_digest(exp1));
    assert_nothing_partial(dir1);

    /* Delete: gone; again: done. */
    for (int i = 0; i < 2; i++) {
        r = task_harness_run_ok(h, "volume_snapshot", args_of("delete", "s2", NULL), BOUND);
        assert_snapshots(r, "[\"s1\"]");
        json_decref(r);
    }
    assert_false(test_file_exists(test_path("%s/snapshots/s2", dir1)));
    r = task_harness_run_ok(h, "volume_snapshot", args_of("delete", "s1", NULL), BOUND);
    assert_snapshots(r, "[]");
    json_decref(r);
    task_harness_free(h);
}

/* Acceptance 28: s1, write X, s2, write Y, rollback to s1: neither X nor Y, s2 gone. */
static void test_rollback_to_s1(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    uint64_t at_s1 = tree_digest(exp1);
    json_decref(task_harness_run_ok(h, "volume_snapshot", args_of("create", "s1", NULL), BOUND));
    test_file_write_pattern(test_path("%s/X", exp1), 0, 1, 4096);
    json_decref(task_harness_run_ok(h, "volume_snapshot", args_of("create", "s2", NULL), BOUND));
    test_file_write_pattern(test_path("%s/sub/Y", exp1), 0, 2, 4096);
    test_file_write_pattern(test_path("%s/a.txt", exp1), 0, 3,
                            100); /* and a change to a file s1 has */
    ino_t export_before = test_file_stat(exp1).st_ino;

    json_t *r = task_harness_run_ok(h, "volume_snapshot",
                                    args_of("rollback", "s1", "\"later\": [\"s2\"]"), BOUND);
    assert_snapshots(r, "[\"s1\"]");
    json_decref(r);
    assert_false(test_file_exists(test_path("%s/X", exp1)));
    assert_false(test_file_exists(test_path("%s/sub/Y", exp1)));
    assert_true(tree_digest(exp1) == at_s1);
    assert_true(test_file_stat(exp1).st_ino != export_before); /* replaced, not edited */
    assert_false(test_file_exists(test_path("%s/snapshots/s2", dir1)));
    assert_true(tree_digest(test_path("%s/snapshots/s1", dir1)) == at_s1);
    assert_nothing_partial(dir1);

    /* Again (a retried step): the same result. */
    r = task_harness_run_ok(h, "volume_snapshot", args_of("rollback", "s1", "\"later\": [\"s2\"]"),
                            BOUND);
    assert_snapshots(r, "[\"s1\"]");
    json_decref(r);
    assert_true(tree_digest(exp1) == at_s1);
    task_harness_free(h);
}

/* Refusals: nothing changed. */
static void test_refusals(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    uint64_t before = tree_digest(dir1);
    task_harness_run_fails(h, "volume_snapshot", args_of("grow", "s1", NULL), BOUND,
                           "InvalidArgument", "op: expected create, delete or rollback");
    const char *bad_names[] = {"x.part", "a", "-x", "../x", "a/b", ""};
    for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; i++)
        task_harness_run_fails(h, "volume_snapshot", args_of("create", bad_names[i], NULL), BOUND,
                               "InvalidArgument", "name: expected a snapshot name");
    task_harness_run_fails(h, "volume_snapshot",
                           args_of("rollback", "s1", "\"later\": [\"../../etc\"]"), BOUND,
                           "InvalidArgument", "later[0]: expected a snapshot name");
    task_harness_run_fails(h, "volume_snapshot", args_of("rollback", "s1", "\"later\": [\"s1\"]"),
                           BOUND, "InvalidArgument", "later[0]: s1 is the snapshot rolled back to");
    task_harness_run_fails(h, "volume_snapshot", args_of("create", "s3", "\"later\": [\"s1\"]"),
                           BOUND, "InvalidArgument", "later: only a rollback");
    task_harness_run_fails(h, "volume_snapshot", args_of("create", "s3", "\"free_bytes\": -1"),
                           BOUND, "InvalidArgument", "free_bytes");
    task_harness_run_fails(h, "volume_snapshot",
                           "{\"vm_uuid\": \"../../etc\", \"op\": \"create\", \"name\": \"s1\"}",
                           BOUND, "InvalidArgument", "vm_uuid");
    task_harness_run_fails(h, "volume_snapshot",
                           "{\"vm_uuid\": \"" VM2 "\", \"op\": \"create\", \"name\": \"s1\"}",
                           BOUND, "InvalidArgument", "is not a storage instance");
    task_harness_run_fails(
        h, "volume_snapshot",
        "{\"vm_uuid\": \"33333333-3333-4333-8333-333333333333\", \"op\": \"create\", "
        "\"name\": \"s1\"}",
        BOUND, "InstanceNotFound", "33333333-3333-4333-8333-333333333333");
    task_harness_run_fails(h, "volume_snapshot", args_of("rollback", "nope", NULL), BOUND,
                           "VolumeSnapshotNotFound", "snapshot nope has no copy on this server");
    assert_false(test_file_exists(test_path("%s/" VM2 "/snapshots", lab.root)));
    assert_true(tree_digest(dir1) == before);

    /* A rollback while the share process runs: refused, the data untouched. */
    char cmd[PATH_MAX * 2];
    snprintf(cmd, sizeof cmd, "'%s' idle --dir '%s' --daemonize --pidfile '%s/workload.pid'",
             lab.workload_bin, dir1, dir1);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(test_path("%s/workload.pid", dir1), "r");
    assert_non_null(f);
    int pid = 0;
    assert_int_equal(fscanf(f, "%d", &pid), 1);
    fclose(f);
    task_harness_run_fails(h, "volume_snapshot", args_of("rollback", "s1", NULL), BOUND,
                           "InvalidState", "is running: stop it before a rollback");
    assert_int_equal(kill(pid, SIGKILL), 0);
    for (int i = 0; i < 500 && kill(pid, 0) == 0; i++)
        usleep(10000);
    assert_int_equal(unlink(test_path("%s/workload.pid", dir1)), 0);
    assert_true(tree_digest(exp1) == tree_digest(test_path("%s/snapshots/s1", dir1)));
    task_harness_free(h);
}

/* Acceptance 29 with the free space given: ServerDiskFull naming the bytes, the data
 * unchanged, no .part; a rollback refused the same way. */
static void test_no_room_given(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    test_file_write_pattern(test_path("%s/more", exp1), 0, 5, 3 * MIB);
    uint64_t data = tree_digest(exp1);
    /* The data of the export's files: "more", the MiB of sparse.bin, a.txt. */
    long long need = 4 * MIB + (long long)test_file_stat(test_path("%s/a.txt", exp1)).st_size;
    char want[256];
    snprintf(want, sizeof want, "the copy needs %lld bytes and its file system has 4096 free",
             need);
    task_harness_run_fails(h, "volume_snapshot", args_of("create", "full", "\"free_bytes\": 4096"),
                           BOUND, "ServerDiskFull", want);
    assert_false(test_file_exists(test_path("%s/snapshots/full", dir1)));
    assert_nothing_partial(dir1);
    assert_true(tree_digest(exp1) == data);
    task_harness_run_fails(h, "volume_snapshot", args_of("rollback", "s1", "\"free_bytes\": 10"),
                           BOUND, "ServerDiskFull", "its file system has 10 free");
    assert_true(tree_digest(exp1) == data);
    assert_nothing_partial(dir1);
    /* Room exactly: made. */
    char fits[64];
    snprintf(fits, sizeof fits, "\"free_bytes\": %lld", need);
    json_decref(task_harness_run_ok(h, "volume_snapshot", args_of("create", "fits", fits), BOUND));
    json_decref(task_harness_run_ok(h, "volume_snapshot", args_of("delete", "fits", NULL), BOUND));
    assert_int_equal(unlink(test_path("%s/more", exp1)), 0);
    task_harness_free(h);
}

/* Acceptance 29 on a file system that is really full: the data root a tmpfs of 8 MiB
 * (when this test may mount one: root, or a user namespace's root). */
static void test_no_room_on_a_full_file_system(void **state)
{
    (void)state;
    const char *vm = "44444444-4444-4444-8444-444444444444";
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", lab.root, vm);
    assert_int_equal(mkdir(dir, 0755), 0);
    if (mount("tmpfs", dir, "tmpfs", 0, "size=8m") != 0) {
        printf("# skipped: cannot mount a tmpfs here (%s); test_no_room_given covers the rule\n",
               strerror(errno));
        assert_int_equal(rmdir(dir), 0);
        return;
    }
    /* tmpfs makes its root 1777: made the instance directory's own again. */
    assert_int_equal(chmod(dir, 0755), 0);
    assert_int_equal(mkdir(test_path("%s/export", dir), 0755), 0);
    json_t *doc = json_pack("{s:s, s:s}", "uuid", vm, "role", "nfsvolumestorage");
    assert_int_equal(json_dump_file(doc, test_path("%s/vm.json", dir), 0), 0);
    json_decref(doc);
    test_file_write_pattern(test_path("%s/export/data", dir), 0, 11, 5 * MIB);
    uint64_t data = tree_digest(test_path("%s/export", dir));
    task_harness_t *h = new_agent();
    char args[512];
    snprintf(args, sizeof args, "{\"vm_uuid\": \"%s\", \"op\": \"create\", \"name\": \"s1\"}", vm);
    task_harness_run_fails(h, "volume_snapshot", args, BOUND, "ServerDiskFull",
                           "the copy needs 5242880 bytes and its file system has");
    assert_true(tree_digest(test_path("%s/export", dir)) == data);
    assert_false(test_file_exists(test_path("%s/snapshots/s1", dir)));
    assert_nothing_partial(dir);
    /* Told there is room (free_bytes) when there is none: the copy itself runs out of
     * space midway, and fails the same way, its partial copy removed. */
    char told[512];
    snprintf(told, sizeof told,
             "{\"vm_uuid\": \"%s\", \"op\": \"create\", \"name\": \"s1\", "
             "\"free_bytes\": 1000000000000}",
             vm);
    task_harness_run_fails(h, "volume_snapshot", told, BOUND, "ServerDiskFull", strerror(ENOSPC));
    assert_true(tree_digest(test_path("%s/export", dir)) == data);
    assert_false(test_file_exists(test_path("%s/snapshots/s1", dir)));
    assert_nothing_partial(dir);
    /* Room made: the snapshot is taken. */
    assert_int_equal(truncate(test_path("%s/export/data", dir), 2 * MIB), 0);
    json_decref(task_harness_run_ok(h, "volume_snapshot", args, BOUND));
    assert_true(test_file_exists(test_path("%s/snapshots/s1/data", dir)));
    task_harness_free(h);
    assert_int_equal(umount2(dir, MNT_DETACH), 0);
    assert_int_equal(rmdir(dir), 0);
}

/* What a rollback killed at each point leaves, put right by the next step: a build
 * cut short (the old data stays), killed between the renames (the new data is put in
 * place), killed before the old export was removed. */
static void test_rollback_leftovers(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    const char *s1 = test_path("%s/snapshots/s1", dir1);
    uint64_t old = tree_digest(exp1), snap = tree_digest(s1);
    char cmd[PATH_MAX * 3];
    const char *rb = test_path("%s/export.rollback", dir1);
    const char *oldp = test_path("%s/export.old", dir1);

    /* Killed while building: export.rollback partial beside export. */
    assert_int_equal(mkdir(rb, 0700), 0);
    test_file_write_pattern(test_path("%s/half", rb), 0, 3, 1000);
    json_t *r = task_harness_run_ok(h, "volume_snapshot", args_of("delete", "zz", NULL), BOUND);
    json_decref(r);
    assert_false(test_file_exists(rb));
    assert_true(tree_digest(exp1) == old);

    /* Killed between the renames: export.old and a whole export.rollback, no export. */
    snprintf(cmd, sizeof cmd, "cp -a '%s' '%s' && mv '%s' '%s'", s1, rb, exp1, oldp);
    assert_int_equal(system(cmd), 0);
    json_decref(task_harness_run_ok(h, "volume_snapshot", args_of("delete", "zz", NULL), BOUND));
    assert_true(tree_digest(exp1) == snap);
    assert_nothing_partial(dir1);

    /* Killed before export.old was removed. */
    snprintf(cmd, sizeof cmd, "cp -a '%s' '%s'", exp1, oldp);
    assert_int_equal(system(cmd), 0);
    test_file_write_pattern(test_path("%s/stale", oldp), 0, 3, 10);
    json_decref(task_harness_run_ok(h, "volume_snapshot", args_of("create", "s9", NULL), BOUND));
    assert_true(tree_digest(exp1) == snap);
    assert_nothing_partial(dir1);
    json_decref(task_harness_run_ok(h, "volume_snapshot", args_of("delete", "s9", NULL), BOUND));
    task_harness_free(h);

    /* An agent killed -9 between the renames and during a snapshot copy: its next
     * start puts both right before any step runs. */
    test_file_write_pattern(test_path("%s/changed", exp1), 0, 4, 100);
    snprintf(cmd, sizeof cmd, "cp -a '%s' '%s' && mv '%s' '%s' && mkdir '%s/snapshots/s8.part'", s1,
             rb, exp1, oldp, dir1);
    assert_int_equal(system(cmd), 0);
    assert_true(tree_digest(rb) == snap && tree_digest(oldp) != snap);
    h = new_agent();
    assert_true(tree_digest(exp1) == snap);
    assert_nothing_partial(dir1);
    task_harness_free(h);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static bool exists_within(const char *path, int ms)
{
    for (int i = 0; i < ms; i++) {
        if (test_file_exists(path))
            return true;
        usleep(1000);
    }
    return false;
}

/* A rollback of 48 MiB in 48 files killed -9 in the middle of its copy (in a child
 * process running the task): export/ is the old data, whole; the next rollback makes
 * it the snapshot's. */
static void test_rollback_killed(void **state)
{
    (void)state;
    for (int i = 0; i < 48; i++)
        test_file_write_pattern(test_path("%s/big%02d", exp1, i), 0, (unsigned)i, MIB);
    task_harness_t *h = new_agent();
    uint64_t t0 = now_ms();
    json_t *r = task_harness_run_ok(h, "volume_snapshot", args_of("create", "big", NULL), BOUND);
    printf("# a snapshot of 48 MiB in 48 files: %llu ms (%s)\n",
           (unsigned long long)(now_ms() - t0),
           json_is_true(json_object_get(r, "cloned")) ? "reflinks" : "copies of the data");
    json_decref(r);
    task_harness_free(h);
    uint64_t snap = tree_digest(test_path("%s/snapshots/big", dir1));
    test_file_write_pattern(test_path("%s/after", exp1), 0, 99, 4096);
    for (int i = 0; i < 48; i++)
        test_file_write_pattern(test_path("%s/big%02d", exp1, i), 0, 1000u + (unsigned)i, 4096);
    uint64_t old = tree_digest(exp1);

    fflush(NULL);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        task_harness_t *ch = new_agent();
        harness_run_t r =
            task_harness_run_text(ch, "volume_snapshot", args_of("rollback", "big", NULL), BOUND);
        harness_run_dispose(&r);
        _exit(0);
    }
    bool building = exists_within(test_path("%s/export.rollback/big00", dir1), 20000);
    assert_int_equal(kill(child, SIGKILL), 0);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    uint64_t now = test_file_exists(exp1) ? tree_digest(exp1) : 0;
    /* Killed while copying (the usual case) or after the swap: old or new, whole. */
    if (now != old && now != snap)
        fail_msg("export/ after the kill is neither the old data nor the snapshot's");
    printf("# killed %s: export/ held the %s data\n", building ? "mid-copy" : "late",
           now == old ? "old" : "new");
    h = new_agent();
    t0 = now_ms();
    json_decref(task_harness_run_ok(h, "volume_snapshot", args_of("rollback", "big", NULL), BOUND));
    printf("# a rollback to it: %llu ms\n", (unsigned long long)(now_ms() - t0));
    assert_true(tree_digest(exp1) == snap);
    assert_nothing_partial(dir1);
    task_harness_free(h);
}

/* dc.instance_nics: vm.json lists the NICs given, in their order; bad ones refused. */
static void test_instance_nics(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    const char *two = "{\"vm_uuid\": \"" VM1 "\", \"nics\": ["
                      "{\"mac\": \"90:b8:d0:00:00:01\", \"ip\": \"192.168.128.200\", "
                      "\"interface\": \"net0\", \"primary\": true}, "
                      "{\"mac\": \"90:b8:d0:00:00:02\", \"ip\": \"192.168.129.200\", "
                      "\"interface\": \"net1\", \"primary\": false}]}";
    for (int i = 0; i < 2; i++) {
        json_t *r = task_harness_run_ok(h, "instance_nics", two, BOUND);
        char *macs = json_dumps(json_object_get(r, "macs"), JSON_COMPACT);
        assert_string_equal(macs, "[\"90:b8:d0:00:00:01\",\"90:b8:d0:00:00:02\"]");
        free(macs);
        json_decref(r);
    }
    json_error_t je;
    json_t *vm = json_load_file(test_path("%s/vm.json", dir1), 0, &je);
    assert_non_null(vm);
    json_t *want = task_harness_json(two);
    assert_true(json_equal(json_object_get(vm, "nics"), json_object_get(want, "nics")));
    assert_string_equal(json_string_value(json_object_get(vm, "role")), "nfsvolumestorage");
    json_decref(want);
    json_decref(vm);
    task_harness_run_fails(h, "instance_nics",
                           "{\"vm_uuid\": \"" VM1 "\", \"nics\": [{\"mac\": "
                           "\"90:b8:d0:00:00:01\"}, {\"mac\": \"90:b8:d0:00:00:01\"}]}",
                           BOUND, "InvalidArgument",
                           "nics[1].mac: 90:b8:d0:00:00:01 is nics[0]'s too");
    task_harness_run_fails(h, "instance_nics", "{\"vm_uuid\": \"" VM1 "\", \"nics\": [{}]}", BOUND,
                           "InvalidArgument", "nics[0].mac");
    task_harness_run_fails(h, "instance_nics",
                           "{\"vm_uuid\": \"33333333-3333-4333-8333-333333333333\", \"nics\": []}",
                           BOUND, "InstanceNotFound", "33333333-3333-4333-8333-333333333333");
    json_decref(
        task_harness_run_ok(h, "instance_nics", "{\"vm_uuid\": \"" VM1 "\", \"nics\": []}", BOUND));
    task_harness_free(h);
}

/* The core plugin's and the dc plugin's inits do not call the host. */
static const tern_host empty_host = {
    .size = sizeof(tern_host),
    .abi_major = TERN_ABI_MAJOR,
    .abi_minor = TERN_ABI_MINOR,
};

static void test_workflows_parse(void **state)
{
    (void)state;
    char dir[PATH_MAX], err[1024];
    snprintf(dir, sizeof dir, "%s", lab.plugin_path);
    *strrchr(dir, '/') = '\0';
    plugin_registry_t *reg = plugin_registry_new(dir, &empty_host, err, sizeof err);
    if (reg == NULL)
        fail_msg("%s", err);
    if (plugin_registry_load(reg, "core.so", NULL, err, sizeof err) != 0 ||
        plugin_registry_load(reg, "dc.so", NULL, err, sizeof err) != 0)
        fail_msg("%s", err);
    const char *files[] = {"volume-snapshot-create", "volume-snapshot-delete", "volume-rollback",
                           "volume-attach-network", "volume-detach-network"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        FILE *f = fopen(test_path("%s/%s.json", workflows_dir, files[i]), "rb");
        assert_non_null(f);
        static char text[WORKFLOW_MAX_BYTES];
        size_t n = fread(text, 1, sizeof text, f);
        fclose(f);
        workflow_t *wf = NULL;
        if (workflow_parse_text(text, n, plugin_registry_check_task, reg, &wf, err, sizeof err) !=
            0)
            fail_msg("%s: %s", files[i], err);
        assert_string_equal(wf->name, files[i]);
        workflow_free(wf);
    }
    plugin_registry_free(reg);
}

int main(int argc, char **argv)
{
    int rc =
        test_lab_open(&lab, "test_dc_volsnap", argc, argv, "DC_PLUGIN TERN_WORKLOAD WORKFLOWS_DIR");
    if (rc != 0)
        return rc;
    workflows_dir = argv[3];
    snprintf(dir1, sizeof dir1, "%s/" VM1, lab.root);
    snprintf(exp1, sizeof exp1, "%s/export", dir1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_and_delete),
        cmocka_unit_test(test_rollback_to_s1),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_no_room_given),
        cmocka_unit_test(test_no_room_on_a_full_file_system),
        cmocka_unit_test(test_rollback_leftovers),
        cmocka_unit_test(test_rollback_killed),
        cmocka_unit_test(test_instance_nics),
        cmocka_unit_test(test_workflows_parse),
    };
    write_description();
    make_instance(VM1, "nfsvolumestorage");
    make_instance(VM2, NULL);
    fill_export();
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    test_lab_close(&lab);
    return rc;
}
