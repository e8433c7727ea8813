/*
 * test_dc_instance_mounts.c -- dc.instance_create of the built dc plugin with the
 * volumes an instance mounts (docs/VOLUMES.md "Volumes at provision"), through
 * tests/support/task_harness.c on a fresh lab directory under /tmp: vm.json's
 * "volumes" and internal_metadata["sdc:volumes"] (RFD 26's exact text), each mount a
 * symlink to its volume's export through which a file written is the export's,
 * parents made; run again, the same instance (its mounts made again when removed);
 * other volumes under the same uuid refused; bad mounts refused before anything is
 * made.
 *
 * Argument: the built dc.so.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_checks.h"
#include "image_file.h"
#include "lab_dir.h"
#include "task_harness.h"

#define CN1   "4d16fdf2-c04f-41fb-b197-1c8335405d01"
#define IMG   "3c00c831-904f-482f-a941-dda583127bb6"
#define VM1   "11111111-1111-4111-8111-111111111111"
#define VOL1  "d1111111-1111-4111-8111-111111111111"
#define VOL2  "d2222222-2222-4222-8222-222222222222"
#define BOUND 20000 /* ms: any one task */

static test_lab_t lab;
static char export1[1200], export2[1200];

static task_harness_t *new_agent(void)
{
    return test_lab_agent(&lab, CN1);
}

/* A create of vm with the volumes given as JSON text. */
static char *create_args(const char *vm, const char *volumes)
{
    static char buf[8192];
    snprintf(buf, sizeof buf,
             "{\"vm_uuid\": \"%s\", \"image_uuid\": \"" IMG "\", \"alias\": \"web-1\", "
             "\"owner_uuid\": \"930896af-bf8c-48d4-885c-6573a94b1853\", \"brand\": \"bhyve\", "
             "\"disks\": [{\"boot\": true, \"size\": 1024, \"image_uuid\": \"" IMG "\"}], "
             "\"volumes\": %s}",
             vm, volumes);
    return buf;
}

static char *two_volumes(void)
{
    static char buf[4096];
    snprintf(buf, sizeof buf,
             "[{\"name\": \"wp-uploads\", \"volume_uuid\": \"" VOL1 "\", \"mountpoint\": "
             "\"/uploads\", \"mode\": \"rw\", \"type\": \"tritonnfs\", \"nfsvolume\": "
             "\"192.168.128.201:/exports/data\", \"export_path\": \"%s\"}, "
             "{\"name\": \"shared\", \"volume_uuid\": \"" VOL2 "\", \"mountpoint\": "
             "\"/srv/data/shared\", \"mode\": \"ro\", \"type\": \"tritonnfs\", \"nfsvolume\": "
             "\"192.168.128.202:/exports/data\", \"export_path\": \"%s\"}]",
             export1, export2);
    return buf;
}

static void write_description(void)
{
    test_lab_write_description(
        &lab, "{\"servers\": [{\"uuid\": \"" CN1 "\", \"hostname\": \"cn1\", \"rack\": \"r1\", "
              "\"ram_mib\": 65536, \"disk_mib\": 2097152, \"data_root\": \"servers/cn1\"}],"
              " \"networks\": [], \"packages\": [],"
              " \"images\": [{\"uuid\": \"" IMG "\", \"name\": \"lab-os\", \"version\": \"1.0\", "
              "\"size_mib\": 1024, \"data_mib\": 1, \"file\": \"images/lab-os-1.0.img\"}]}");
    /* The storage instances' exports, as dc.storage_create makes them. */
    snprintf(export1, sizeof export1, "%s/90000000-0000-4000-8000-000000000001", lab.root);
    assert_int_equal(mkdir(export1, 0755), 0);
    strcat(export1, "/export");
    assert_int_equal(mkdir(export1, 0755), 0);
    snprintf(export2, sizeof export2, "%s/90000000-0000-4000-8000-000000000002", lab.root);
    assert_int_equal(mkdir(export2, 0755), 0);
    strcat(export2, "/export");
    assert_int_equal(mkdir(export2, 0755), 0);
    test_lab_ensure_image(&lab, IMG, 1024, 1, "images/lab-os-1.0.img");
}

static void assert_link(const char *link, const char *target)
{
    char have[PATH_MAX];
    ssize_t n = readlink(link, have, sizeof have - 1);
    if (n < 0)
        fail_msg("%s: %s", link, strerror(errno));
    have[n] = '\0';
    assert_string_equal(have, target);
}

static void test_create_mounts(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    json_decref(task_harness_run_ok(h, "image_ensure", "{\"image_uuid\": \"" IMG "\"}", BOUND));
    json_t *r = task_harness_run_ok(h, "instance_create", create_args(VM1, two_volumes()), BOUND);
    assert_true(json_is_true(json_object_get(r, "created")));
    json_decref(r);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/" VM1, lab.root);

    /* vm.json: the volumes as given, and sdc:volumes in RFD 26's exact form. */
    json_error_t je;
    json_t *vm = json_load_file(test_path("%s/vm.json", dir), 0, &je);
    assert_non_null(vm);
    json_t *given = task_harness_json(two_volumes());
    assert_true(json_equal(json_object_get(vm, "volumes"), given));
    json_decref(given);
    const char *meta =
        json_string_value(json_object_get(json_object_get(vm, "internal_metadata"), "sdc:volumes"));
    assert_non_null(meta);
    assert_string_equal(meta, "[{\"mountpoint\":\"/uploads\",\"name\":\"wp-uploads\","
                              "\"nfsvolume\":\"192.168.128.201:/exports/data\",\"mode\":\"rw\","
                              "\"type\":\"tritonnfs\"},{\"mountpoint\":\"/srv/data/shared\","
                              "\"name\":\"shared\",\"nfsvolume\":\"192.168.128.202:/exports/"
                              "data\",\"mode\":\"ro\",\"type\":\"tritonnfs\"}]");
    json_decref(vm);

    /* Each mount a symlink to its export, the directories above it made. */
    assert_link(test_path("%s/mounts/uploads", dir), export1);
    assert_link(test_path("%s/mounts/srv/data/shared", dir), export2);
    assert_true(S_ISDIR(test_file_stat(test_path("%s/mounts/srv/data", dir)).st_mode));
    /* A file written through the mount is the export's. */
    FILE *f = fopen(test_path("%s/mounts/uploads/hello.txt", dir), "w");
    assert_non_null(f);
    fputs("hello", f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(test_file_stat(test_path("%s/hello.txt", export1)).st_size, 5);

    /* Again: the same instance, its mounts kept; one removed meanwhile is made again. */
    struct stat before = test_file_stat(test_path("%s/vm.json", dir));
    assert_int_equal(unlink(test_path("%s/mounts/uploads", dir)), 0);
    r = task_harness_run_ok(h, "instance_create", create_args(VM1, two_volumes()), BOUND);
    assert_true(json_is_false(json_object_get(r, "created")));
    json_decref(r);
    assert_int_equal(test_file_stat(test_path("%s/vm.json", dir)).st_ino, before.st_ino);
    assert_link(test_path("%s/mounts/uploads", dir), export1);
    assert_link(test_path("%s/mounts/srv/data/shared", dir), export2);
    assert_int_equal(test_file_stat(test_path("%s/mounts/uploads/hello.txt", dir)).st_size, 5);

    /* Other volumes under the same uuid: another instance, refused, the one there kept. */
    task_harness_run_fails(h, "instance_create", create_args(VM1, "[]"), BOUND, "InstanceConflict",
                           "mounting other volumes");
    /* Something else where a mount goes: refused naming it, never replaced. */
    assert_int_equal(unlink(test_path("%s/mounts/uploads", dir)), 0);
    assert_int_equal(mkdir(test_path("%s/mounts/uploads", dir), 0755), 0);
    task_harness_run_fails(h, "instance_create", create_args(VM1, two_volumes()), BOUND,
                           "InstanceCreateFailed", "is a directory, not a mount link: refused");
    assert_true(S_ISDIR(test_file_stat(test_path("%s/mounts/uploads", dir)).st_mode));

    /* No volumes: no mounts directory, no sdc:volumes. */
    const char *vm2 = "22222222-2222-4222-8222-222222222222";
    json_decref(task_harness_run_ok(h, "instance_create", create_args(vm2, "null"), BOUND));
    assert_false(test_file_exists(test_path("%s/%s/mounts", lab.root, vm2)));
    vm = json_load_file(test_path("%s/%s/vm.json", lab.root, vm2), 0, &je);
    assert_non_null(vm);
    assert_null(json_object_get(vm, "internal_metadata"));
    assert_null(json_object_get(vm, "volumes"));
    json_decref(vm);
    task_harness_free(h);
}

/* Each bad mount, refused naming it by its path, with nothing made. */
static void test_refusals(void **state)
{
    (void)state;
    task_harness_t *h = new_agent();
    json_decref(task_harness_run_ok(h, "image_ensure", "{\"image_uuid\": \"" IMG "\"}", BOUND));
    static const struct {
        const char *mountpoint, *mode, *type, *export_path, *extra, *part;
    } bad[] = {
        {"data", "rw", "tritonnfs", "/e", "",
         "volumes[0].mountpoint: \"data\": expected an absolute"},
        {"/", "rw", "tritonnfs", "/e", "", "volumes[0].mountpoint"},
        {"/a/../b", "rw", "tritonnfs", "/e", "", "\"..\" segment"},
        {"/a//b", "rw", "tritonnfs", "/e", "", "empty"},
        {"/a/./b", "rw", "tritonnfs", "/e", "", "\".\""},
        {"/d", "rx", "tritonnfs", "/e", "", "volumes[0].mode: expected \"rw\" or \"ro\""},
        {"/d", "rw", "nfs", "/e", "", "volumes[0].type: expected \"tritonnfs\""},
        {"/d", "rw", "tritonnfs", "export", "", "volumes[0].export_path"},
        {"/d", "rw", "tritonnfs", "/x/../../etc", "", "volumes[0].export_path"},
        {"/d", "rw", "tritonnfs", "/e", ", \"colour\": \"red\"", "volumes[0].colour: unknown"},
    };
    const char *vm = "33333333-3333-4333-8333-333333333333";
    char vols[2048];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(vols, sizeof vols,
                 "[{\"name\": \"v1\", \"volume_uuid\": \"" VOL1 "\", \"mountpoint\": \"%s\", "
                 "\"mode\": \"%s\", \"type\": \"%s\", \"nfsvolume\": null, \"export_path\": "
                 "\"%s\"%s}]",
                 bad[i].mountpoint, bad[i].mode, bad[i].type, bad[i].export_path, bad[i].extra);
        task_harness_run_fails(h, "instance_create", create_args(vm, vols), BOUND,
                               "InvalidArgument", bad[i].part);
        assert_false(test_file_exists(test_path("%s/%s", lab.root, vm)));
    }
    /* Two mounts on one directory, or one inside the other. */
    static const char *const pairs[][2] = {{"/d", "/d"}, {"/d", "/d/e"}, {"/d/e", "/d"}};
    for (size_t i = 0; i < 3; i++) {
        snprintf(vols, sizeof vols,
                 "[{\"name\": \"v1\", \"volume_uuid\": \"" VOL1 "\", \"mountpoint\": \"%s\", "
                 "\"mode\": \"rw\", \"type\": \"tritonnfs\", \"export_path\": \"/e\"}, "
                 "{\"name\": \"v2\", \"volume_uuid\": \"" VOL2 "\", \"mountpoint\": \"%s\", "
                 "\"mode\": \"rw\", \"type\": \"tritonnfs\", \"export_path\": \"/f\"}]",
                 pairs[i][0], pairs[i][1]);
        task_harness_run_fails(h, "instance_create", create_args(vm, vols), BOUND,
                               "InvalidArgument", "volumes[1].mountpoint");
        assert_false(test_file_exists(test_path("%s/%s", lab.root, vm)));
    }
    task_harness_run_fails(h, "instance_create", create_args(vm, "{\"v\": 1}"), BOUND,
                           "InvalidArgument", "volumes: expected an array");
    assert_false(test_file_exists(test_path("%s/%s", lab.root, vm)));
    task_harness_free(h);
}

int main(int argc, char **argv)
{
    int rc = test_lab_open(&lab, "test_dc_instance_mounts", argc, argv, "DC_PLUGIN");
    if (rc != 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_mounts),
        cmocka_unit_test(test_refusals),
    };
    write_description();
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    test_lab_close(&lab);
    return rc;
}
