/*
 * test_dc_instances.c -- the agent's data plane of the built dc plugin, through
 * tests/support/task_harness.c on a fresh lab directory under /tmp: dc.image_ensure,
 * dc.instance_create (vm.json, sparse disks of their exact size with few blocks, the
 * boot disk's content equal to the image's data, holes kept, PCI slots; run twice;
 * partial instances redone; a missing image; a cancelled create), dc.instance_start
 * and dc.instance_stop of real tern-workload processes (detached, never this test's
 * children; the writer's records growing), an agent restarted (a new plugin instance
 * finding and stopping the workload the old one started), dc.instance_destroy, and
 * paths that would lead outside the data root.
 *
 * Arguments: the built dc.so and tern-workload. Prints the median time of
 * dc.instance_create for a 10 GiB image with 1 MiB of data.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "image_file.h"
#include "sparse.h"
#include "lab_dir.h"
#include "task_harness.h"
#include "file_checks.h"

#define MIB   (1024ll * 1024ll)
#define CN1   "4d16fdf2-c04f-41fb-b197-1c8335405d01"
#define IMG   "3c00c831-904f-482f-a941-dda583127bb6" /* 10 GiB, 1 MiB of data */
#define IMG2  "fc632c0e-d053-4365-9cdf-941218110459" /* in the description, file never made */
#define VM1   "11111111-1111-4111-8111-111111111111"
#define BOUND 20000 /* ms: any one task */
#define NRUNS 5     /* creates timed */

static test_lab_t lab;

/* An agent of cn1: a fresh plugin instance, as an agent that (re)starts has. */
static task_harness_t *new_agent(void)
{
    return test_lab_agent(&lab, CN1);
}

static char *create_args(const char *vm, const char *image, const char *workload)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"vm_uuid\": \"%s\", \"image_uuid\": \"%s\", \"alias\": \"web-1\", "
             "\"owner_uuid\": \"930896af-bf8c-48d4-885c-6573a94b1853\", \"brand\": \"bhyve\", "
             "\"ram\": 1024, \"vcpus\": 1, \"autoboot\": true, "
             "\"nics\": [{\"mac\": \"90:b8:d0:00:00:01\", \"ip\": \"203.0.113.10\"}], "
             "\"customer_metadata\": %s, "
             "\"disks\": [{\"boot\": true, \"size\": 10240, \"image_uuid\": \"%s\"}, "
             "{\"size\": 20480}]}",
             vm, image, workload != NULL ? workload : "{}", image);
    return buf;
}

static char *vm_args(const char *vm)
{
    static char buf[128];
    snprintf(buf, sizeof buf, "{\"vm_uuid\": \"%s\"}", vm);
    return buf;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Where the next data is at or after `from`, or -1 when only a hole follows. */
static off_t next_data(const char *path, off_t from)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    off_t at = lseek(fd, from, SEEK_DATA);
    int e = errno;
    close(fd);
    if (at < 0) {
        assert_int_equal(e, ENXIO);
        return -1;
    }
    return at;
}

/* `tern-workload verify FILE`: the number of valid records. Exit 0 is asserted when
 * `settled` (no writer on the disk); on a live disk a batch still landing can read as
 * a gap at the tail (exit 1), and only the count is used. */
static long verify_records(const char *disk, bool settled)
{
    char cmd[2 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "'%s' verify '%s'", lab.workload_bin, disk);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    long n = -1;
    int got = fscanf(p, "%ld", &n);
    int status = pclose(p);
    if (got != 1 || !WIFEXITED(status) || WEXITSTATUS(status) > (settled ? 0 : 1))
        fail_msg("%s: status %d, read %d", cmd, status, got);
    return n;
}

/* The parent pid of pid, from /proc. */
static long parent_of(long pid)
{
    FILE *f = fopen(test_path("/proc/%ld/stat", pid), "r");
    assert_non_null(f);
    char line[512] = "";
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    char state;
    long ppid = -1;
    assert_int_equal(sscanf(strrchr(line, ')') + 2, "%c %ld", &state, &ppid), 2);
    return ppid;
}

/* ---- setup: a description with one server and a 10 GiB image holding 1 MiB ---------- */

static void write_description(void)
{
    test_lab_write_description(
        &lab, "{\"servers\": [{\"uuid\": \"" CN1 "\", \"hostname\": \"cn1\", \"rack\": \"r1\", "
              "\"ram_mib\": 65536, \"disk_mib\": 2097152, \"data_root\": \"servers/cn1\"}],"
              " \"networks\": [{\"uuid\": \"20f777ca-b134-47d8-97c6-e7d216932064\", \"name\": "
              "\"external\", \"subnet\": \"203.0.113.0/24\", \"gateway\": \"203.0.113.1\", "
              "\"provision_start_ip\": \"203.0.113.10\", \"provision_end_ip\": \"203.0.113.250\", "
              "\"vlan_id\": 0, \"mtu\": 1500}],"
              " \"packages\": [],"
              " \"images\": [{\"uuid\": \"" IMG "\", \"name\": \"lab-os\", \"version\": \"1.0\", "
              "\"size_mib\": 10240, \"data_mib\": 1, \"file\": \"images/lab-os-1.0.img\"},"
              " {\"uuid\": \"" IMG2 "\", \"name\": \"lab-os\", \"version\": \"1.1\", "
              "\"size_mib\": 10240, \"file\": \"images/lab-os-1.1.img\"}]}");
    test_lab_ensure_image(&lab, IMG, 10240, 1, "images/lab-os-1.0.img");
}

/* ---- the tests --------------------------------------------------------------------------- */

static void test_image_ensure(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    json_t *r = task_harness_run_ok(h, "image_ensure", "{\"image_uuid\": \"" IMG "\"}", BOUND);
    const char *copy = test_path("%s/images/" IMG ".img", lab.root);
    assert_string_equal(json_string_value(json_object_get(r, "path")), copy);
    assert_true(json_is_true(json_object_get(r, "copied")));
    json_decref(r);
    struct stat st = test_file_stat(copy);
    assert_int_equal(st.st_size, 10240 * MIB);
    assert_true(st.st_blocks * 512 <= 2 * MIB); /* 1 MiB of data, nothing more */
    uint64_t data = 0;
    assert_int_equal(dc_sparse_data_bytes(copy, &data), 0);
    assert_int_equal(data, MIB);
    const char *lab_file = test_path("%s/images/lab-os-1.0.img", lab.dir);
    assert_int_equal(test_file_checksum(copy, 0, MIB), test_file_checksum(lab_file, 0, MIB));
    assert_int_equal(next_data(copy, MIB), -1);

    /* Again: the copy there is whole, kept as it is. */
    r = task_harness_run_ok(h, "image_ensure", "{\"image_uuid\": \"" IMG "\"}", BOUND);
    assert_true(json_is_false(json_object_get(r, "copied")));
    json_decref(r);
    assert_int_equal(test_file_stat(copy).st_ino, st.st_ino);

    /* The lab's file gone: named, and nothing made. */
    task_harness_run_fails(h, "image_ensure", "{\"image_uuid\": \"" IMG2 "\"}", BOUND,
                           "ImageFileMissing", "images/lab-os-1.1.img");
    assert_false(test_file_exists(test_path("%s/images/" IMG2 ".img", lab.root)));
    assert_false(test_file_exists(test_path("%s/images/" IMG2 ".img.part", lab.root)));
    task_harness_run_fails(h, "image_ensure",
                           "{\"image_uuid\": \"00000000-0000-4000-8000-000000000000\"}", BOUND,
                           "ResourceNotFound", "not an image of the datacenter");
    task_harness_free(h);
}

static void test_create(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    json_decref(task_harness_run_ok(h, "image_ensure", "{\"image_uuid\": \"" IMG "\"}", BOUND));
    json_t *r = task_harness_run_ok(h, "instance_create", create_args(VM1, IMG, NULL), BOUND);
    char dir[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s/" VM1, lab.root);
    json_t *want =
        json_pack("[{s:s, s:i, s:s, s:b, s:s}, {s:s, s:i, s:s, s:b}]", "path",
                  test_path("%s/disks/disk0.img", dir), "size", 10240, "pci_slot", "0:4:0", "boot",
                  1, "image", IMG, "path", test_path("%s/disks/disk1.img", dir), "size", 20480,
                  "pci_slot", "0:4:1", "boot", 0);
    if (!json_equal(json_object_get(r, "disks"), want))
        fail_msg("disks: %s", json_dumps(json_object_get(r, "disks"), 0));
    assert_true(json_is_true(json_object_get(r, "created")));

    /* vm.json: the instance, stopped, the same disks. */
    json_error_t je;
    json_t *vm = json_load_file(test_path("%s/vm.json", dir), 0, &je);
    assert_non_null(vm);
    assert_string_equal(json_string_value(json_object_get(vm, "uuid")), VM1);
    assert_string_equal(json_string_value(json_object_get(vm, "state")), "stopped");
    assert_string_equal(json_string_value(json_object_get(vm, "alias")), "web-1");
    assert_string_equal(json_string_value(json_object_get(vm, "workload")), "idle");
    assert_int_equal(json_integer_value(json_object_get(vm, "ram")), 1024);
    assert_true(json_equal(json_object_get(vm, "disks"), want));
    assert_non_null(json_string_value(json_object_get(vm, "create_timestamp")));
    json_decref(vm);
    json_decref(want);

    /* The boot disk: the image's data, grown to its size, holes kept. */
    char disk0[PATH_MAX + 128], disk1[PATH_MAX + 128];
    snprintf(disk0, sizeof disk0, "%s/disks/disk0.img", dir);
    struct stat st0 = test_file_stat(disk0);
    assert_int_equal(st0.st_size, 10240 * MIB);
    assert_true(st0.st_blocks * 512 <= 2 * MIB);
    assert_int_equal(test_file_checksum(disk0, 0, MIB),
                     test_file_checksum(test_path("%s/images/" IMG ".img", lab.root), 0, MIB));
    assert_int_equal(next_data(disk0, 0), 0);
    assert_int_equal(next_data(disk0, MIB), -1);
    /* The data disk: its size, nothing written. */
    snprintf(disk1, sizeof disk1, "%s/disks/disk1.img", dir);
    struct stat st1 = test_file_stat(disk1);
    assert_int_equal(st1.st_size, 20480 * MIB);
    assert_int_equal(st1.st_blocks, 0);
    assert_int_equal(next_data(disk1, 0), -1);
    assert_false(test_file_exists(test_path("%s/disks/disk0.img.part", dir)));

    /* Again: done, the same files (not made again). */
    json_t *again = task_harness_run_ok(h, "instance_create", create_args(VM1, IMG, NULL), BOUND);
    assert_true(json_is_false(json_object_get(again, "created")));
    assert_true(json_equal(json_object_get(again, "disks"), json_object_get(r, "disks")));
    json_decref(again);
    json_decref(r);
    assert_int_equal(test_file_stat(disk0).st_ino, st0.st_ino);
    assert_int_equal(test_file_stat(disk0).st_mtim.tv_nsec, st0.st_mtim.tv_nsec);
    assert_int_equal(test_file_stat(disk1).st_ino, st1.st_ino);
    /* Another instance asked for under the same uuid: refused, the one there kept. */
    const char *other = "{\"vm_uuid\": \"" VM1 "\", \"image_uuid\": \"" IMG "\", "
                        "\"disks\": [{\"boot\": true, \"size\": 10240}, {\"size\": 1}]}";
    task_harness_run_fails(h, "instance_create", other, BOUND, "InstanceConflict",
                           "not the one asked for");
    assert_int_equal(test_file_stat(disk1).st_ino, st1.st_ino);
    assert_int_equal(test_file_stat(disk1).st_size, 20480 * MIB);

    /* A partial instance (an attempt killed midway: a .part, no vm.json) is redone. */
    const char *vm2 = "22222222-2222-4222-8222-222222222222";
    char dir2[PATH_MAX + 64];
    snprintf(dir2, sizeof dir2, "%s/%s", lab.root, vm2);
    assert_int_equal(mkdir(dir2, 0755), 0);
    assert_int_equal(mkdir(test_path("%s/disks", dir2), 0755), 0);
    FILE *f = fopen(test_path("%s/disks/disk0.img.part", dir2), "w");
    assert_non_null(f);
    fputs("half a copy", f);
    fclose(f);
    r = task_harness_run_ok(h, "instance_create", create_args(vm2, IMG, NULL), BOUND);
    assert_true(json_is_true(json_object_get(r, "created")));
    json_decref(r);
    assert_false(test_file_exists(test_path("%s/disks/disk0.img.part", dir2)));
    assert_true(test_file_exists(test_path("%s/vm.json", dir2)));
    assert_int_equal(test_file_checksum(test_path("%s/disks/disk0.img", dir2), 0, MIB),
                     test_file_checksum(test_path("%s/images/" IMG ".img", lab.root), 0, MIB));
    json_decref(task_harness_run_ok(h, "instance_destroy", vm_args(vm2), BOUND));
    task_harness_free(h);
}

static void test_create_refusals(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    const char *vm = "33333333-3333-4333-8333-333333333333";
    /* The server's copy of the image missing: named, nothing left behind. */
    task_harness_run_fails(h, "instance_create", create_args(vm, IMG2, NULL), BOUND,
                           "ImageFileMissing", test_path("%s/images/" IMG2 ".img", lab.root));
    assert_false(test_file_exists(test_path("%s/%s", lab.root, vm)));
    /* A workload the lab does not have: refused naming those it has, nothing made. */
    task_harness_run_fails(
        h, "instance_create", create_args(vm, IMG, "{\"lab:workload\": \"/bin/sh\"}"), BOUND,
        "InvalidArgument", "unknown workload \"/bin/sh\" (expected one of idle, writer)");
    assert_false(test_file_exists(test_path("%s/%s", lab.root, vm)));
    /* Bad disks and a vm_uuid that is no UUID. */
    task_harness_run_fails(
        h, "instance_create",
        "{\"vm_uuid\": \"33333333-3333-4333-8333-333333333333\", \"image_uuid\": \"" IMG
        "\", \"disks\": [{\"size\": 0}]}",
        BOUND, "InvalidArgument", "disks[0].size: expected an integer of MiB");
    task_harness_run_fails(
        h, "instance_create",
        "{\"vm_uuid\": \"33333333-3333-4333-8333-333333333333\", \"image_uuid\": \"" IMG
        "\", \"disks\": [{\"size\": 100}]}",
        BOUND, "InvalidArgument", "is smaller than the image");
    assert_false(test_file_exists(test_path("%s/%s", lab.root, vm)));
    task_harness_run_fails(h, "instance_create", create_args("../../etc", IMG, NULL), BOUND,
                           "InvalidArgument", "vm_uuid: \"../../etc\" is not a UUID");
    task_harness_free(h);
}

static void test_path_escape(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    /* An instance directory that is a symlink to elsewhere: never followed. */
    const char *vm = "44444444-4444-4444-8444-444444444444";
    char outside[PATH_MAX + 16];
    snprintf(outside, sizeof outside, "%s/outside", lab.dir);
    assert_int_equal(mkdir(outside, 0755), 0);
    FILE *f = fopen(test_path("%s/keep", outside), "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(symlink(outside, test_path("%s/%s", lab.root, vm)), 0);
    task_harness_run_fails(h, "instance_destroy", vm_args(vm), BOUND, "PathOutsideDataRoot",
                           "a symlink");
    task_harness_run_fails(h, "instance_create", create_args(vm, IMG, NULL), BOUND,
                           "PathOutsideDataRoot", "a symlink");
    task_harness_run_fails(h, "instance_start", vm_args(vm), BOUND, "PathOutsideDataRoot",
                           "a symlink");
    task_harness_run_fails(h, "instance_stop", vm_args(vm), BOUND, "PathOutsideDataRoot",
                           "a symlink");
    assert_true(test_file_exists(test_path("%s/keep", outside)));
    /* An instance whose disks directory leads elsewhere: not started. */
    const char *vm2 = "45454545-4545-4545-8545-454545454545";
    json_decref(task_harness_run_ok(h, "image_ensure", "{\"image_uuid\": \"" IMG "\"}", BOUND));
    json_decref(task_harness_run_ok(
        h, "instance_create", create_args(vm2, IMG, "{\"lab:workload\": \"writer\"}"), BOUND));
    char disks[PATH_MAX + 64], moved[PATH_MAX + 64];
    snprintf(disks, sizeof disks, "%s/%s/disks", lab.root, vm2);
    snprintf(moved, sizeof moved, "%s/moved-disks", outside);
    assert_int_equal(rename(disks, moved), 0);
    assert_int_equal(symlink(moved, disks), 0);
    task_harness_run_fails(h, "instance_start", vm_args(vm2), BOUND, "PathOutsideDataRoot",
                           "disks is a symlink");
    assert_false(test_file_exists(test_path("%s/%s/workload.pid", lab.root, vm2)));
    assert_int_equal(unlink(disks), 0);
    assert_int_equal(rename(moved, disks), 0);
    json_decref(task_harness_run_ok(h, "instance_destroy", vm_args(vm2), BOUND));
    task_harness_run_fails(h, "instance_destroy", "{\"vm_uuid\": \"..\"}", BOUND, "InvalidArgument",
                           "not a UUID");
    task_harness_run_fails(h, "instance_stop", "{\"vm_uuid\": \"/etc\"}", BOUND, "InvalidArgument",
                           "not a UUID");
    assert_int_equal(unlink(test_path("%s/%s", lab.root, vm)), 0);
    assert_int_equal(unlink(test_path("%s/keep", outside)), 0);
    assert_int_equal(rmdir(outside), 0);
    task_harness_free(h);
}

static void test_start_stop_restart_destroy(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    const char *vm = "55555555-5555-4555-8555-555555555555";
    json_decref(task_harness_run_ok(h, "image_ensure", "{\"image_uuid\": \"" IMG "\"}", BOUND));
    json_decref(task_harness_run_ok(h, "instance_create",
                                    create_args(vm, IMG, "{\"lab:workload\": \"writer\"}"), BOUND));
    json_t *r = task_harness_run_ok(h, "instance_start", vm_args(vm), BOUND);
    long pid = (long)json_integer_value(json_object_get(r, "pid"));
    assert_true(json_is_true(json_object_get(r, "started")));
    json_decref(r);
    assert_true(pid > 0 && test_lab_pid_alive(pid));
    /* Detached: not this process's child. */
    assert_true(parent_of(pid) != (long)getpid());
    assert_int_equal(waitpid((pid_t)pid, NULL, WNOHANG), -1);
    char dir[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s/%s", lab.root, vm);
    json_error_t je;
    json_t *doc = json_load_file(test_path("%s/vm.json", dir), 0, &je);
    assert_string_equal(json_string_value(json_object_get(doc, "state")), "running");
    json_decref(doc);

    /* The writer writes to the data disk: its records grow (bounded wait). */
    char disk1[PATH_MAX + 128];
    snprintf(disk1, sizeof disk1, "%s/disks/disk1.img", dir);
    long first = -1, later = -1;
    for (int i = 0; i < 500 && first < 1; i++, sleep_ms(20))
        first = verify_records(disk1, false);
    assert_true(first >= 1);
    for (int i = 0; i < 500 && later <= first; i++, sleep_ms(20))
        later = verify_records(disk1, false);
    assert_true(later > first);

    /* Start again: the same workload. */
    r = task_harness_run_ok(h, "instance_start", vm_args(vm), BOUND);
    assert_int_equal(json_integer_value(json_object_get(r, "pid")), pid);
    assert_true(json_is_false(json_object_get(r, "started")));
    json_decref(r);

    /* The agent restarts: a new plugin instance finds the instance and its workload. */
    task_harness_free(h);
    assert_true(test_lab_pid_alive(pid));
    h = new_agent();
    json_t *info = task_harness_run_ok(h, "agent_info", "{}", BOUND);
    assert_true(json_integer_value(json_object_get(info, "instances_at_init")) >= 1);
    json_t *found = NULL;
    size_t i;
    json_t *inst;
    json_array_foreach(json_object_get(info, "instances"), i, inst)
    {
        if (strcmp(json_string_value(json_object_get(inst, "uuid")), vm) == 0)
            found = inst;
    }
    if (found == NULL)
        fail_msg("agent_info lists no %s: %s", vm, json_dumps(info, 0));
    assert_int_equal(json_integer_value(json_object_get(found, "pid")), pid);
    assert_true(json_is_true(json_object_get(found, "alive")));
    assert_string_equal(json_string_value(json_object_get(found, "state")), "running");
    json_decref(info);

    /* Stop through the pid file: the workload is gone, the state recorded. */
    r = task_harness_run_ok(h, "instance_stop", vm_args(vm), BOUND);
    assert_int_equal(json_integer_value(json_object_get(r, "pid")), pid);
    json_decref(r);
    assert_false(test_lab_pid_alive(pid));
    assert_false(test_file_exists(test_path("%s/workload.pid", dir)));
    doc = json_load_file(test_path("%s/vm.json", dir), 0, &je);
    assert_string_equal(json_string_value(json_object_get(doc, "state")), "stopped");
    json_decref(doc);
    long written = verify_records(disk1, true);
    assert_true(written >= later);
    r = task_harness_run_ok(h, "instance_stop", vm_args(vm), BOUND);
    assert_true(json_is_null(json_object_get(r, "pid")));
    json_decref(r);

    /* Start once more, then destroy: stops the workload, removes the directory. */
    r = task_harness_run_ok(h, "instance_start", vm_args(vm), BOUND);
    long pid2 = (long)json_integer_value(json_object_get(r, "pid"));
    json_decref(r);
    assert_true(test_lab_pid_alive(pid2));
    r = task_harness_run_ok(h, "instance_destroy", vm_args(vm), BOUND);
    assert_true(json_is_true(json_object_get(r, "destroyed")));
    assert_int_equal(json_integer_value(json_object_get(r, "pid")), pid2);
    json_decref(r);
    assert_false(test_lab_pid_alive(pid2));
    assert_false(test_file_exists(dir));
    r = task_harness_run_ok(h, "instance_destroy", vm_args(vm), BOUND);
    assert_true(json_is_false(json_object_get(r, "destroyed")));
    json_decref(r);
    task_harness_run_fails(h, "instance_start", vm_args(vm), BOUND, "InstanceNotFound", vm);
    task_harness_free(h);
}

/* A workload that does not stop on SIGTERM (stopped with SIGSTOP, so the signal stays
 * pending) is killed once the grace period is over. */
static void test_stop_kills_a_stuck_workload(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    const char *vm = "99999999-9999-4999-8999-999999999999";
    json_decref(task_harness_run_ok(h, "image_ensure", "{\"image_uuid\": \"" IMG "\"}", BOUND));
    json_decref(task_harness_run_ok(h, "instance_create", create_args(vm, IMG, NULL), BOUND));
    json_t *r = task_harness_run_ok(h, "instance_start", vm_args(vm), BOUND);
    long pid = (long)json_integer_value(json_object_get(r, "pid"));
    json_decref(r);
    assert_true(test_lab_pid_alive(pid));
    assert_int_equal(kill((pid_t)pid, SIGSTOP), 0);
    json_t *args = task_harness_json(vm_args(vm));
    harness_run_t run_stop;
    assert_int_equal(task_harness_run(h, "instance_stop", args, NULL, NULL, 30000, 0, &run_stop),
                     0);
    json_decref(args);
    assert_int_equal(run_stop.outcome.kind, TASK_DONE);
    assert_int_equal(json_integer_value(json_object_get(run_stop.outcome.result, "pid")), pid);
    /* SIGTERM went unanswered for the whole grace period before SIGKILL. */
    assert_true(run_stop.elapsed_ms >= 9000);
    harness_run_dispose(&run_stop);
    assert_false(test_lab_pid_alive(pid));
    json_decref(task_harness_run_ok(h, "instance_destroy", vm_args(vm), BOUND));
    task_harness_free(h);
}

/* A vm.json that is not JSON, or that is gone: every task that reads it names the
 * fault and the file the same way (instance_read), and changes nothing. */
static void test_unreadable_instance(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    const char *vm = "47474747-4747-4747-8747-474747474747";
    json_decref(task_harness_run_ok(h, "image_ensure", "{\"image_uuid\": \"" IMG "\"}", BOUND));
    json_decref(task_harness_run_ok(h, "instance_create", create_args(vm, IMG, NULL), BOUND));
    const char *vm_json = test_path("%s/%s/vm.json", lab.root, vm);
    char saved[PATH_MAX + 16];
    snprintf(saved, sizeof saved, "%s.saved", vm_json);
    assert_int_equal(rename(vm_json, saved), 0);
    FILE *f = fopen(vm_json, "w");
    assert_non_null(f);
    fputs("{\"uuid\": ", f); /* cut short, as a disk that filled would leave it */
    fclose(f);
    task_harness_run_fails(h, "instance_start", vm_args(vm), BOUND, "InstanceUnreadable",
                           "not a JSON object");
    task_harness_run_fails(h, "instance_nics",
                           "{\"vm_uuid\": \"47474747-4747-4747-8747-474747474747\", \"nics\": []}",
                           BOUND, "InstanceUnreadable", "vm.json: not a JSON object");
    assert_false(test_file_exists(test_path("%s/%s/workload.pid", lab.root, vm)));
    assert_int_equal(unlink(vm_json), 0);
    task_harness_run_fails(h, "instance_start", vm_args(vm), BOUND, "InstanceNotFound", "has no");
    assert_int_equal(rename(saved, vm_json), 0);
    json_decref(task_harness_run_ok(h, "instance_destroy", vm_args(vm), BOUND));
    task_harness_free(h);
}

static void test_start_refusals(void **state)
{
    (void)state;
    /* No workload_bin configured: said so, nothing started. */
    json_t *conf = test_lab_agent_config(&lab, CN1);
    json_object_del(conf, "workload_bin");
    task_harness_t *h = task_harness_new(lab.plugin_path, conf);
    json_decref(conf);
    const char *vm = "66666666-6666-4666-8666-666666666666";
    json_decref(task_harness_run_ok(h, "image_ensure", "{\"image_uuid\": \"" IMG "\"}", BOUND));
    json_decref(task_harness_run_ok(h, "instance_create", create_args(vm, IMG, NULL), BOUND));
    task_harness_run_fails(h, "instance_start", vm_args(vm), BOUND, "NoWorkloadBin",
                           "workload_bin");
    json_decref(task_harness_run_ok(h, "instance_destroy", vm_args(vm), BOUND));
    task_harness_free(h);
}

/* A cancelled create leaves a complete instance or none, never a partial one. */
static void test_create_cancelled(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    json_decref(task_harness_run_ok(h, "image_ensure", "{\"image_uuid\": \"" IMG "\"}", BOUND));
    const char *vm = "77777777-7777-4777-8777-777777777777";
    char dir[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s/%s", lab.root, vm);
    for (unsigned after_ms = 1; after_ms <= 4; after_ms++) {
        json_t *args = task_harness_json(create_args(vm, IMG, NULL));
        harness_run_t r;
        int rc = task_harness_run(h, "instance_create", args, NULL, NULL, BOUND, after_ms, &r);
        json_decref(args);
        assert_true(rc == -ECANCELED || rc == 0);
        harness_run_dispose(&r);
        /* The context is gone only once its work ended: what it left is final. */
        if (test_file_exists(dir))
            assert_true(test_file_exists(test_path("%s/vm.json", dir)));
        json_decref(task_harness_run_ok(h, "instance_destroy", vm_args(vm), BOUND));
        assert_false(test_file_exists(dir));
    }
    task_harness_free(h);
}

/* An agent killed -9 mid-copy left a ".part": the agent's next start removes it and
 * keeps the whole copies. */
static void test_init_removes_cut_copies(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    json_decref(task_harness_run_ok(h, "image_ensure", "{\"image_uuid\": \"" IMG "\"}", BOUND));
    task_harness_free(h);
    char part[PATH_MAX + 128];
    snprintf(part, sizeof part, "%s/images/" IMG2 ".img.part", lab.root);
    FILE *f = fopen(part, "w");
    assert_non_null(f);
    fputs("a copy cut short", f);
    fclose(f);
    h = new_agent();
    assert_false(test_file_exists(part));
    assert_true(test_file_exists(test_path("%s/images/" IMG ".img", lab.root)));
    task_harness_free(h);
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The time of dc.instance_create (10 GiB image, 1 MiB of data, a 20 GiB data disk). */
static void test_create_time(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    json_decref(task_harness_run_ok(h, "image_ensure", "{\"image_uuid\": \"" IMG "\"}", BOUND));
    uint64_t ns[NRUNS];
    for (int i = 0; i < NRUNS; i++) {
        char vm[40];
        snprintf(vm, sizeof vm, "88888888-8888-4888-8888-%012d", i);
        uint64_t t0 = now_ns();
        json_decref(task_harness_run_ok(h, "instance_create", create_args(vm, IMG, NULL), BOUND));
        ns[i] = now_ns() - t0;
        json_decref(task_harness_run_ok(h, "instance_destroy", vm_args(vm), BOUND));
    }
    qsort(ns, NRUNS, sizeof ns[0], compare_u64);
    printf("dc.instance_create, 10 GiB image with 1 MiB of data: median %.1f ms of %d "
           "(min %.1f, max %.1f)\n",
           (double)ns[NRUNS / 2] / 1e6, NRUNS, (double)ns[0] / 1e6, (double)ns[NRUNS - 1] / 1e6);
    task_harness_free(h);
}

int main(int argc, char **argv)
{
    int rc = test_lab_open(&lab, "test_dc_instances", argc, argv, "DC_PLUGIN TERN_WORKLOAD");
    if (rc != 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_image_ensure),
        cmocka_unit_test(test_create),
        cmocka_unit_test(test_create_refusals),
        cmocka_unit_test(test_path_escape),
        cmocka_unit_test(test_start_stop_restart_destroy),
        cmocka_unit_test(test_stop_kills_a_stuck_workload),
        cmocka_unit_test(test_start_refusals),
        cmocka_unit_test(test_unreadable_instance),
        cmocka_unit_test(test_create_cancelled),
        cmocka_unit_test(test_init_removes_cut_copies),
        cmocka_unit_test(test_create_time),
    };
    write_description();
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    test_lab_close(&lab);
    return rc;
}
