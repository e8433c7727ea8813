/*
 * test_dc_disks.c -- the agent's disk tasks of the built dc plugin (dc.disk_usage,
 * dc.disk_apply, dc.disk_undo, and dc.instance_create's disks), through
 * tests/support/task_harness.c on a fresh lab directory under /tmp, checked on the
 * files: sizes (st_size), sparseness (st_blocks), content checksums, file names by PCI
 * slot, snapshot directories, no .part left, and vm.json agreeing with the files after
 * every step; snapshot_bytes checked against the blocks the test overwrote.
 *
 * Arguments: the built dc.so and tern-workload.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image_file.h"
#include "lab_dir.h"
#include "task_harness.h"
#include "file_checks.h"

#define MIB   (1024ll * 1024ll)
#define BLOCK 4096ll
#define CN1   "4d16fdf2-c04f-41fb-b197-1c8335405d01"
#define IMG   "3c00c831-904f-482f-a941-dda583127bb6" /* 10 GiB, 1 MiB of data */
#define VM1   "11111111-1111-4111-8111-111111111111"
#define VM2   "22222222-2222-4222-8222-222222222222"
#define BOOT  "aaaaaaaa-0000-4000-8000-000000000000"
#define DATA  "bbbbbbbb-0000-4000-8000-000000000000"
#define ADDED "cccccccc-0000-4000-8000-000000000000"
#define OTHER "dddddddd-0000-4000-8000-000000000000"
#define BOUND 20000 /* ms: any one task */

static test_lab_t lab;
static char dir1[1200]; /* VM1's directory */

static task_harness_t *new_agent(void)
{
    return test_lab_agent(&lab, CN1);
}

/* The args of dc.disk_apply / dc.disk_undo on VM1 with this change (JSON text). */
static char *change_args(const char *change)
{
    static char buf[1024];
    snprintf(buf, sizeof buf, "{\"vm_uuid\": \"" VM1 "\", \"change\": %s}", change);
    return buf;
}

#define USAGE "{\"vm_uuid\": \"" VM1 "\"}"

static char *disk_file(int function)
{
    return test_path("%s/disks/disk%d.img", dir1, function);
}

/* No ".part" anywhere in the instance's directory tree. */
static void assert_no_part(void)
{
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "find '%s' -name '*.part' | grep -q .", dir1);
    if (system(cmd) == 0)
        fail_msg("a .part is left under %s", dir1);
}

/* vm.json's disks agree with the files: each file exists at its slot's name with the
 * size vm.json says, the list is by function, and no other disk file is there; its
 * snapshots are the whole snapshot directories, in the order given. */
static json_t *vm_json_agrees(const char *const *snapshot_names)
{
    json_error_t je;
    json_t *vm = json_load_file(test_path("%s/vm.json", dir1), 0, &je);
    assert_non_null(vm);
    size_t i;
    json_t *d;
    int last = -1, files = 0;
    json_array_foreach(json_object_get(vm, "disks"), i, d)
    {
        const char *slot = json_string_value(json_object_get(d, "pci_slot"));
        assert_non_null(slot);
        int f = slot[4] - '0';
        assert_true(f > last);
        last = f;
        assert_string_equal(json_string_value(json_object_get(d, "path")), disk_file(f));
        assert_int_equal(test_file_stat(disk_file(f)).st_size,
                         json_integer_value(json_object_get(d, "size")) * MIB);
    }
    for (int f = 0; f < 8; f++)
        files += test_file_exists(disk_file(f));
    assert_int_equal(files, (int)json_array_size(json_object_get(vm, "disks")));
    size_t n = 0;
    while (snapshot_names[n] != NULL)
        n++;
    const json_t *snaps = json_object_get(vm, "snapshots");
    if (json_array_size(snaps) != n)
        fail_msg("vm.json snapshots: %s", json_dumps(snaps, 0));
    for (i = 0; i < n; i++) {
        assert_string_equal(json_string_value(json_object_get(json_array_get(snaps, i), "name")),
                            snapshot_names[i]);
        assert_true(test_file_exists(test_path("%s/snapshots/%s", dir1, snapshot_names[i])));
    }
    assert_no_part();
    return vm;
}

/* The usage entry of the disk in this slot in a task's answer (borrowed). */
static json_t *usage_of(const json_t *answer, const char *slot)
{
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(answer, "disks"), i,
                       d) if (strcmp(json_string_value(json_object_get(d, "pci_slot")), slot) ==
                              0) return d;
    return NULL;
}

static long long field(const json_t *answer, const char *slot, const char *key)
{
    json_t *d = usage_of(answer, slot);
    if (d == NULL)
        fail_msg("no disk %s in %s", slot, json_dumps(answer, 0));
    return json_integer_value(json_object_get(d, key));
}

static const char *none[] = {NULL};

/* ---- setup: a description with one server and a 10 GiB image holding 1 MiB ---------- */

static void write_description(void)
{
    test_lab_write_description(
        &lab, "{\"servers\": [{\"uuid\": \"" CN1 "\", \"hostname\": \"cn1\", \"rack\": \"r1\", "
              "\"ram_mib\": 65536, \"disk_mib\": 2097152, \"data_root\": \"servers/cn1\"}],"
              " \"networks\": [], \"packages\": [],"
              " \"images\": [{\"uuid\": \"" IMG "\", \"name\": \"lab-os\", \"version\": \"1.0\", "
              "\"size_mib\": 10240, \"data_mib\": 1, \"file\": \"images/lab-os-1.0.img\"}]}");
    test_lab_ensure_image(&lab, IMG, 10240, 1, "images/lab-os-1.0.img");
}

/* ---- the tests --------------------------------------------------------------------------- */

/* instance_create with ids and slots: files named by slot, the answer by function. */
static void test_create_with_slots(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    json_decref(task_harness_run_ok(h, "image_ensure", "{\"image_uuid\": \"" IMG "\"}", BOUND));
    json_t *r =
        task_harness_run_ok(h, "instance_create",
                            "{\"vm_uuid\": \"" VM1 "\", \"image_uuid\": \"" IMG "\", \"disks\": ["
                            "{\"id\": \"" BOOT "\", \"boot\": true, \"image\": \"" IMG "\", "
                            "\"size\": 10240, \"pci_slot\": \"0:4:0\"}, "
                            "{\"id\": \"" DATA "\", \"size\": 20480, \"pci_slot\": \"0:4:2\"}]}",
                            BOUND);
    json_t *want =
        json_pack("[{s:s, s:b, s:s, s:i, s:s, s:s}, {s:s, s:b, s:i, s:s, s:s}]", "id", BOOT, "boot",
                  1, "image", IMG, "size", 10240, "pci_slot", "0:4:0", "path", disk_file(0), "id",
                  DATA, "boot", 0, "size", 20480, "pci_slot", "0:4:2", "path", disk_file(2));
    if (!json_equal(json_object_get(r, "disks"), want))
        fail_msg("disks: %s", json_dumps(json_object_get(r, "disks"), 0));
    json_decref(want);
    json_decref(r);
    assert_false(test_file_exists(disk_file(1)));
    assert_int_equal(test_file_stat(disk_file(2)).st_blocks, 0);
    json_decref(vm_json_agrees(none));

    /* A slot twice, a slot out of range, an unknown key: refused, nothing made. */
    task_harness_run_fails(
        h, "instance_create",
        "{\"vm_uuid\": \"" VM2 "\", \"image_uuid\": \"" IMG "\", \"disks\": ["
        "{\"size\": 10240, \"pci_slot\": \"0:4:1\"}, {\"size\": 5, \"pci_slot\": "
        "\"0:4:1\"}]}",
        BOUND, "InvalidArgument", "disks[1].pci_slot: 0:4:1 is disks[0]'s too");
    task_harness_run_fails(h, "instance_create",
                           "{\"vm_uuid\": \"" VM2 "\", \"image_uuid\": \"" IMG "\", \"disks\": ["
                           "{\"size\": 10240}, {\"size\": 5, \"pci_slot\": \"0:4:8\"}]}",
                           BOUND, "InvalidArgument", "disks[1].pci_slot: expected 0:4:0 to 0:4:7");
    task_harness_run_fails(h, "instance_create",
                           "{\"vm_uuid\": \"" VM2 "\", \"image_uuid\": \"" IMG "\", \"disks\": ["
                           "{\"size\": 10240, \"sise\": 3}]}",
                           BOUND, "InvalidArgument", "disks[0].sise: unknown");
    assert_false(test_file_exists(test_path("%s/" VM2, lab.root)));
    task_harness_free(h);
}

static void test_usage_add_resize(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    json_t *u = task_harness_run_ok(h, "disk_usage", USAGE, BOUND);
    assert_int_equal(field(u, "0:4:0", "size"), 10240);
    assert_int_equal(field(u, "0:4:0", "data_bytes"), MIB);
    assert_int_equal(field(u, "0:4:0", "snapshot_bytes"), 0);
    assert_int_equal(field(u, "0:4:2", "data_bytes"), 0);
    assert_string_equal(json_string_value(json_object_get(usage_of(u, "0:4:2"), "id")), DATA);
    assert_int_equal(json_array_size(json_object_get(u, "snapshots")), 0);
    json_decref(u);

    /* add: a sparse file named by its slot, in vm.json by function; twice = once. */
    const char *add = "{\"op\": \"add\", \"job_uuid\": \"" OTHER "\", \"id\": \"" ADDED
                      "\", \"pci_slot\": \"0:4:1\", \"new_size\": 30000}";
    json_t *a = task_harness_run_ok(h, "disk_apply", change_args(add), BOUND);
    assert_int_equal(field(a, "0:4:1", "size"), 30000);
    json_decref(a);
    struct stat st = test_file_stat(disk_file(1));
    assert_int_equal(st.st_size, 30000 * MIB);
    assert_int_equal(st.st_blocks, 0);
    json_decref(task_harness_run_ok(h, "disk_apply", change_args(add), BOUND));
    assert_int_equal(test_file_stat(disk_file(1)).st_ino, st.st_ino);
    json_t *vm = vm_json_agrees(none);
    assert_int_equal(json_array_size(json_object_get(vm, "disks")), 3);
    json_decref(vm);
    /* Another disk into that slot: refused, the file kept. */
    task_harness_run_fails(h, "disk_apply",
                           change_args("{\"op\": \"add\", \"id\": \"" OTHER
                                       "\", \"pci_slot\": \"0:4:1\", "
                                       "\"new_size\": 5}"),
                           BOUND, "InvalidArgument", "0:4:1 of vm " VM1 " holds disk " ADDED);
    assert_int_equal(test_file_stat(disk_file(1)).st_size, 30000 * MIB);

    /* resize: grow keeps the bytes and adds a hole; shrink keeps the first MiB. */
    test_file_write_pattern(disk_file(2), 0, 3, 2 * MIB);
    uint64_t first2 = test_file_checksum(disk_file(2), 0, 2 * MIB),
             first1 = test_file_checksum(disk_file(2), 0, MIB);
    const char *grow = "{\"op\": \"resize\", \"id\": \"" DATA "\", \"pci_slot\": \"0:4:2\", "
                       "\"old_size\": 20480, \"new_size\": 102400}";
    a = task_harness_run_ok(h, "disk_apply", change_args(grow), BOUND);
    assert_int_equal(field(a, "0:4:2", "size"), 102400);
    assert_int_equal(field(a, "0:4:2", "data_bytes"), 2 * MIB);
    json_decref(a);
    json_decref(task_harness_run_ok(h, "disk_apply", change_args(grow), BOUND));
    assert_int_equal(test_file_stat(disk_file(2)).st_size, 102400 * MIB);
    assert_true(test_file_stat(disk_file(2)).st_blocks * 512 <= 2 * MIB + 64 * 1024);
    assert_int_equal(test_file_checksum(disk_file(2), 0, 2 * MIB), first2);
    json_decref(vm_json_agrees(none));
    json_decref(task_harness_run_ok(
        h, "disk_apply", change_args("{\"op\": \"resize\", \"id\": \"" DATA "\", \"new_size\": 1}"),
        BOUND));
    assert_int_equal(test_file_stat(disk_file(2)).st_size, MIB);
    assert_int_equal(test_file_checksum(disk_file(2), 0, MIB), first1);
    json_decref(task_harness_run_ok(
        h, "disk_apply",
        change_args("{\"op\": \"resize\", \"pci_slot\": \"0:4:2\", \"new_size\": "
                    "20480}"),
        BOUND));
    json_decref(vm_json_agrees(none));

    /* Refusals, nothing changed. */
    task_harness_run_fails(
        h, "disk_apply",
        change_args("{\"op\": \"resize\", \"id\": \"" OTHER "\", \"new_size\": 40}"), BOUND,
        "InvalidArgument", "no disk " OTHER);
    task_harness_run_fails(
        h, "disk_apply",
        change_args("{\"op\": \"resize\", \"id\": \"" DATA "\", \"new_size\": 67108865}"), BOUND,
        "InvalidArgument", "change.new_size");
    task_harness_run_fails(h, "disk_apply",
                           change_args("{\"op\": \"resize\", \"vm_uuid\": \"" VM2
                                       "\", \"id\": \"" DATA "\", \"new_size\": 40}"),
                           BOUND, "InvalidArgument", "the change is of vm " VM2);
    task_harness_run_fails(h, "disk_apply",
                           change_args("{\"op\": \"add\", \"id\": \"" OTHER
                                       "\", \"pci_slot\": \"0:4:9\", "
                                       "\"new_size\": 40}"),
                           BOUND, "InvalidArgument", "change.pci_slot");
    task_harness_run_fails(h, "disk_apply", change_args("{\"op\": \"grow\"}"), BOUND,
                           "InvalidArgument", "change.op");
    task_harness_run_fails(h, "disk_apply",
                           change_args("{\"op\": \"snapshot_create\", \"name\": \"../../x\"}"),
                           BOUND, "InvalidArgument", "change.name");
    task_harness_run_fails(h, "disk_apply",
                           "{\"vm_uuid\": \"../../etc\", \"change\": {\"op\": \"snapshot_delete\", "
                           "\"name\": \"a\"}}",
                           BOUND, "InvalidArgument", "vm_uuid");
    task_harness_run_fails(h, "disk_usage", "{\"vm_uuid\": \"" VM2 "\"}", BOUND, "InstanceNotFound",
                           VM2);
    task_harness_run_fails(
        h, "disk_apply",
        change_args("{\"op\": \"delete\", \"id\": \"" BOOT "\", \"pci_slot\": \"0:4:0\"}"), BOUND,
        "InvalidArgument", "boot disk");
    assert_int_equal(test_file_stat(disk_file(2)).st_size, 20480 * MIB);
    assert_true(test_file_exists(disk_file(0)));
    task_harness_free(h);
}

static void test_snapshots_and_their_space(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    const char *s1 = "{\"op\": \"snapshot_create\", \"name\": \"s1\"}";
    json_t *a = task_harness_run_ok(h, "disk_apply", change_args(s1), BOUND);
    assert_int_equal(field(a, "0:4:0", "snapshot_bytes"), 0);
    assert_int_equal(field(a, "0:4:2", "snapshot_bytes"), 0);
    assert_int_equal(json_array_size(json_object_get(a, "snapshots")), 1);
    json_decref(a);
    json_decref(task_harness_run_ok(h, "disk_apply", change_args(s1), BOUND)); /* twice = once */
    const char *one[] = {"s1", NULL};
    json_decref(vm_json_agrees(one));
    for (int f = 0; f < 3; f++) {
        char *copy = test_path("%s/snapshots/s1/disk%d.img", dir1, f);
        assert_int_equal(test_file_stat(copy).st_size, test_file_stat(disk_file(f)).st_size);
        assert_int_equal(test_file_checksum(copy, 0, MIB),
                         test_file_checksum(disk_file(f), 0, MIB));
    }
    assert_true(test_file_stat(test_path("%s/snapshots/s1/disk1.img", dir1)).st_blocks == 0);

    /* Overwriting 3 blocks of the boot disk's data: exactly 3 blocks, 1 MiB rounded up. */
    test_file_write_pattern(disk_file(0), 4 * BLOCK, 40, 3 * BLOCK);
    json_t *u = task_harness_run_ok(h, "disk_usage", USAGE, BOUND);
    assert_int_equal(field(u, "0:4:0", "snapshot_bytes"), 3 * BLOCK);
    assert_int_equal(field(u, "0:4:0", "snapshot_size"), 1);
    json_decref(u);
    /* Writes into holes: nothing more. */
    test_file_write_pattern(disk_file(0), 5 * MIB, 41, MIB);
    test_file_write_pattern(disk_file(1), 0, 42, MIB);
    u = task_harness_run_ok(h, "disk_usage", USAGE, BOUND);
    assert_int_equal(field(u, "0:4:0", "snapshot_bytes"), 3 * BLOCK);
    assert_int_equal(field(u, "0:4:1", "snapshot_bytes"), 0);
    json_decref(u);

    /* A second snapshot; then a block both hold overwritten: s2's copy counts. */
    json_decref(task_harness_run_ok(h, "disk_apply",
                                    change_args("{\"op\": \"snapshot_create\", \"name\": "
                                                "\"s2\"}"),
                                    BOUND));
    test_file_write_pattern(disk_file(0), 100 * BLOCK, 43, BLOCK);
    test_file_write_pattern(disk_file(1), 0, 44, 2 * BLOCK); /* data s2 holds (written after s1) */
    u = task_harness_run_ok(h, "disk_usage", USAGE, BOUND);
    assert_int_equal(field(u, "0:4:0", "snapshot_bytes"), 4 * BLOCK);
    assert_int_equal(field(u, "0:4:1", "snapshot_bytes"), 2 * BLOCK);
    const char *two[] = {"s1", "s2", NULL};
    json_t *names = json_object_get(u, "snapshots");
    assert_string_equal(json_string_value(json_array_get(names, 0)), "s1");
    assert_string_equal(json_string_value(json_array_get(names, 1)), "s2");
    json_decref(u);
    json_decref(vm_json_agrees(two));

    /* Deleting s1: only s2 against the live disk is left. */
    const char *del1 = "{\"op\": \"snapshot_delete\", \"name\": \"s1\"}";
    a = task_harness_run_ok(h, "disk_apply", change_args(del1), BOUND);
    assert_int_equal(field(a, "0:4:0", "snapshot_bytes"), BLOCK);
    json_decref(a);
    json_decref(task_harness_run_ok(h, "disk_apply", change_args(del1), BOUND));
    const char *only2[] = {"s2", NULL};
    json_decref(vm_json_agrees(only2));
    assert_false(test_file_exists(test_path("%s/snapshots/s1", dir1)));

    /* Deleting a data disk takes its copies in every snapshot with it. */
    const char *deld = "{\"op\": \"delete\", \"id\": \"" ADDED "\", \"pci_slot\": \"0:4:1\"}";
    a = task_harness_run_ok(h, "disk_apply", change_args(deld), BOUND);
    assert_null(usage_of(a, "0:4:1"));
    json_decref(a);
    json_decref(task_harness_run_ok(h, "disk_apply", change_args(deld), BOUND));
    assert_false(test_file_exists(disk_file(1)));
    assert_false(test_file_exists(test_path("%s/snapshots/s2/disk1.img", dir1)));
    assert_true(test_file_exists(test_path("%s/snapshots/s2/disk0.img", dir1)));
    json_decref(vm_json_agrees(only2));
    task_harness_free(h);
}

/* What killed and failed steps leave is made whole. */
static void test_undo_and_leftovers(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    /* undo of an add: the file and the disk gone; twice = once. */
    const char *add = "{\"op\": \"add\", \"id\": \"" OTHER "\", \"pci_slot\": \"0:4:5\", "
                      "\"new_size\": 64}";
    json_decref(task_harness_run_ok(h, "disk_apply", change_args(add), BOUND));
    assert_true(test_file_exists(disk_file(5)));
    json_t *u = task_harness_run_ok(h, "disk_undo", change_args(add), BOUND);
    assert_null(usage_of(u, "0:4:5"));
    json_decref(u);
    json_decref(task_harness_run_ok(h, "disk_undo", change_args(add), BOUND));
    assert_false(test_file_exists(disk_file(5)));
    const char *only2[] = {"s2", NULL};
    json_decref(vm_json_agrees(only2));
    /* undo of an add into a slot another disk holds: that disk untouched. */
    json_decref(
        task_harness_run_ok(h, "disk_undo",
                            change_args("{\"op\": \"add\", \"id\": \"" OTHER "\", \"pci_slot\": "
                                        "\"0:4:2\", \"new_size\": 64}"),
                            BOUND));
    assert_true(test_file_exists(disk_file(2)));
    /* undo of a resize changes nothing; null is measure and agree. */
    json_decref(
        task_harness_run_ok(h, "disk_undo",
                            change_args("{\"op\": \"resize\", \"id\": \"" DATA "\", \"new_size\": "
                                        "30720}"),
                            BOUND));
    assert_int_equal(test_file_stat(disk_file(2)).st_size, 20480 * MIB);
    json_decref(task_harness_run_ok(h, "disk_undo", change_args("null"), BOUND));

    /* A snapshot copy killed midway (a .part directory): the next run redoes it whole. */
    assert_int_equal(mkdir(test_path("%s/snapshots/s3.part", dir1), 0700), 0);
    FILE *f = fopen(test_path("%s/snapshots/s3.part/disk0.img.part", dir1), "w");
    assert_non_null(f);
    fputs("half a copy", f);
    fclose(f);
    const char *s3 = "{\"op\": \"snapshot_create\", \"name\": \"s3\"}";
    json_decref(task_harness_run_ok(h, "disk_apply", change_args(s3), BOUND));
    const char *two[] = {"s2", "s3", NULL};
    json_decref(vm_json_agrees(two));
    assert_int_equal(test_file_checksum(test_path("%s/snapshots/s3/disk0.img", dir1), 0, 2 * MIB),
                     test_file_checksum(disk_file(0), 0, 2 * MIB));
    /* undo of a snapshot_create: gone. */
    json_decref(task_harness_run_ok(h, "disk_undo", change_args(s3), BOUND));
    json_decref(vm_json_agrees(only2));
    /* A .part left with no step to redo it: any step's end removes it. */
    assert_int_equal(mkdir(test_path("%s/snapshots/s4.part", dir1), 0700), 0);
    json_decref(task_harness_run_ok(h, "disk_usage", USAGE, BOUND));
    json_decref(vm_json_agrees(only2));
    /* A disk file unlinked by a delete killed before vm.json: vm.json follows the files. */
    const char *add6 = "{\"op\": \"add\", \"id\": \"" OTHER "\", \"pci_slot\": \"0:4:6\", "
                       "\"new_size\": 8}";
    json_decref(task_harness_run_ok(h, "disk_apply", change_args(add6), BOUND));
    assert_int_equal(unlink(disk_file(6)), 0);
    u = task_harness_run_ok(h, "disk_usage", USAGE, BOUND);
    assert_null(usage_of(u, "0:4:6"));
    json_decref(u);
    json_decref(vm_json_agrees(only2));
    /* ... and a step that follows such a delete works on the files as they are: a
     * snapshot of the disks there. */
    json_decref(task_harness_run_ok(h, "disk_apply", change_args(add6), BOUND));
    assert_int_equal(unlink(disk_file(6)), 0);
    const char *s7 = "{\"op\": \"snapshot_create\", \"name\": \"s7\"}";
    u = task_harness_run_ok(h, "disk_apply", change_args(s7), BOUND);
    assert_null(usage_of(u, "0:4:6"));
    json_decref(u);
    assert_false(test_file_exists(test_path("%s/snapshots/s7/disk6.img", dir1)));
    assert_true(test_file_exists(test_path("%s/snapshots/s7/disk0.img", dir1)));
    const char *with7[] = {"s2", "s7", NULL};
    json_decref(vm_json_agrees(with7));
    json_decref(task_harness_run_ok(
        h, "disk_apply", change_args("{\"op\": \"snapshot_delete\", \"name\": \"s7\"}"), BOUND));
    json_decref(vm_json_agrees(only2));
    /* A disk file whose size is not whole MiB: an error naming it. */
    assert_int_equal(truncate(disk_file(2), 20480 * MIB + 1), 0);
    task_harness_run_fails(h, "disk_usage", USAGE, BOUND, "DiskFileInvalid", "disk2.img");
    assert_int_equal(truncate(disk_file(2), 20480 * MIB), 0);
    json_decref(task_harness_run_ok(h, "disk_usage", USAGE, BOUND));
    task_harness_free(h);
}

/* A snapshot copy cancelled at any moment leaves it whole or absent, never a .part. */
static void test_snapshot_cancelled(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    test_file_write_pattern(disk_file(2), 0, 50, 64 * MIB); /* a copy that takes a moment */
    const char *s5 = "{\"op\": \"snapshot_create\", \"name\": \"s5\"}";
    for (unsigned after_ms = 1; after_ms <= 4; after_ms++) {
        json_t *args = task_harness_json(change_args(s5));
        harness_run_t r;
        int rc = task_harness_run(h, "disk_apply", args, NULL, NULL, BOUND, after_ms, &r);
        json_decref(args);
        assert_true(rc == -ECANCELED || rc == 0);
        harness_run_dispose(&r);
        /* The context is gone only once its work ended: what it left is final. */
        assert_false(test_file_exists(test_path("%s/snapshots/s5.part", dir1)));
        json_decref(task_harness_run_ok(h, "disk_undo", change_args(s5), BOUND));
        assert_false(test_file_exists(test_path("%s/snapshots/s5", dir1)));
    }
    const char *only2[] = {"s2", NULL};
    json_decref(vm_json_agrees(only2));
    /* An agent killed -9 mid-copy left .part copies: its next start removes them. */
    task_harness_free(h);
    assert_int_equal(mkdir(test_path("%s/snapshots/s6.part", dir1), 0700), 0);
    FILE *f = fopen(test_path("%s/disks/disk7.img.part", dir1), "w");
    assert_non_null(f);
    fclose(f);
    h = new_agent();
    assert_no_part();
    json_decref(vm_json_agrees(only2));
    /* destroy takes the snapshots with the instance. */
    json_decref(task_harness_run_ok(h, "instance_destroy", "{\"vm_uuid\": \"" VM1 "\"}", BOUND));
    assert_false(test_file_exists(dir1));
    task_harness_free(h);
}

int main(int argc, char **argv)
{
    int rc = test_lab_open(&lab, "test_dc_disks", argc, argv, "DC_PLUGIN TERN_WORKLOAD");
    if (rc != 0)
        return rc;
    snprintf(dir1, sizeof dir1, "%s/" VM1, lab.root);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_with_slots),         cmocka_unit_test(test_usage_add_resize),
        cmocka_unit_test(test_snapshots_and_their_space), cmocka_unit_test(test_undo_and_leftovers),
        cmocka_unit_test(test_snapshot_cancelled),
    };
    write_description();
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    test_lab_close(&lab);
    return rc;
}
