/*
 * test_cli_disk_args.c -- the arguments of `tern vm disk add|resize|delete` that the
 * CLI judges before any request: SIZE (size_arg.c) in every form it takes and every
 * one it refuses, and DISK (disk_ref.c) by slot, id and prefix, with the refusals of
 * an unknown, ambiguous or too short one naming it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "disk_ref.h"
#include "size_arg.h"

/* ---- SIZE ---------------------------------------------------------------------- */

/* The MiB `s` parses to, asserting it is accepted. */
static uint64_t size_ok(const char *s, bool remaining_ok)
{
    size_arg_t out;
    char err[256] = "";
    bool ok = size_arg_parse(s, remaining_ok, &out, err, sizeof err);
    if (!ok)
        fail_msg("\"%s\" refused: %s", s, err);
    assert_false(out.remaining);
    return out.mib;
}

/* The message refusing `s`, asserting it names `s` and contains `want`. */
static void size_refused(const char *s, bool remaining_ok, const char *want)
{
    size_arg_t out = {.mib = 77};
    char err[256] = "";
    if (size_arg_parse(s, remaining_ok, &out, err, sizeof err))
        fail_msg("\"%s\" accepted as %llu MiB", s, (unsigned long long)out.mib);
    assert_int_equal(out.mib, 0);
    if (strstr(err, want) == NULL)
        fail_msg("\"%s\": message \"%s\" lacks \"%s\"", s, err, want);
}

static void test_size_forms(void **state)
{
    (void)state;
    assert_int_equal(size_ok("1", false), 1);
    assert_int_equal(size_ok("10240", false), 10240);
    assert_int_equal(size_ok("512M", false), 512);
    assert_int_equal(size_ok("20G", false), 20480);
    assert_int_equal(size_ok("1024G", true), 1048576); /* 1 TiB */
    assert_int_equal(size_ok("007", false), 7);
    /* the largest, in MiB and in GiB */
    assert_int_equal(size_ok("9007199254740991", false), SIZE_ARG_MAX_MIB);
    assert_int_equal(size_ok("8796093022207G", false), UINT64_C(8796093022207) * 1024);

    size_arg_t out;
    char err[256];
    assert_true(size_arg_parse("remaining", true, &out, err, sizeof err));
    assert_true(out.remaining);
    assert_int_equal(out.mib, 0);
}

static void test_size_refusals(void **state)
{
    (void)state;
    size_refused("0", false, "cannot be 0 MiB");
    size_refused("0G", false, "cannot be 0 MiB");
    size_refused("000M", false, "cannot be 0 MiB");
    size_refused("-5", false, "\"-5\": expected N or NM (MiB) or NG (GiB)");
    size_refused("-5G", false, "expected");
    size_refused("+5", false, "expected");
    size_refused("10GB", false, "\"10GB\": expected");
    size_refused("10MiB", false, "expected");
    size_refused("10g", false, "expected");
    size_refused("1T", false, "expected");
    size_refused("1.5G", false, "expected");
    size_refused(" 10", false, "expected");
    size_refused("10 ", false, "expected");
    size_refused("", false, "expected");
    size_refused("G", false, "expected");
    size_refused("M", false, "expected");
    size_refused("0x10", false, "expected");
    size_refused("remaining", false, "\"remaining\" is only for a new disk");
    size_refused("Remaining", true, "or remaining");
    /* overflow: past 2^53 - 1 MiB, past 2^64, in GiB */
    size_refused("9007199254740992", false, "more than the largest size");
    size_refused("99999999999999999999999", false, "more than the largest size");
    size_refused("8796093022208G", false, "more than the largest size");
    size_refused("18446744073709551616G", false, "more than the largest size");
}

/* ---- DISK ---------------------------------------------------------------------- */

static json_t *vm_with_disks(void)
{
    json_error_t e;
    json_t *vm = json_loads(
        "{\"uuid\": \"6e1d3f00-0000-4000-8000-000000000001\", \"alias\": \"db0\", \"disks\": ["
        " {\"id\": \"aaaa1111-2222-4333-8444-555555555555\", \"pci_slot\": \"0:4:0\"},"
        " {\"id\": \"aaaa1111-9999-4333-8444-555555555555\", \"pci_slot\": \"0:4:1\"},"
        " {\"id\": \"bbbb2222-0000-4000-8000-000000000000\", \"pci_slot\": \"0:4:7\"}]}",
        0, &e);
    assert_non_null(vm);
    return vm;
}

/* The pci_slot of the disk `ref` names, asserting it is found. */
static const char *disk_found(const json_t *vm, const char *ref)
{
    const json_t *disk;
    char err[512] = "";
    disk_ref_status_t r = disk_ref_find(vm, "db0", ref, &disk, err, sizeof err);
    if (r != DISK_REF_OK)
        fail_msg("\"%s\" not found: %s", ref, err);
    return json_string_value(json_object_get(disk, "pci_slot"));
}

static void disk_refused(const json_t *vm, const char *ref, disk_ref_status_t want, const char *msg)
{
    const json_t *disk = (const json_t *)1;
    char err[512] = "";
    assert_int_equal(disk_ref_find(vm, "db0", ref, &disk, err, sizeof err), want);
    assert_null(disk);
    if (strstr(err, msg) == NULL)
        fail_msg("\"%s\": message \"%s\" lacks \"%s\"", ref, err, msg);
}

static void test_disk_found(void **state)
{
    (void)state;
    json_t *vm = vm_with_disks();
    assert_string_equal(disk_found(vm, "0:4:1"), "0:4:1");
    assert_string_equal(disk_found(vm, "0:4:7"), "0:4:7");
    assert_string_equal(disk_found(vm, "aaaa1111-2222-4333-8444-555555555555"), "0:4:0");
    assert_string_equal(disk_found(vm, "bbbb2222"), "0:4:7");
    assert_string_equal(disk_found(vm, "aaaa1111-9"), "0:4:1");
    json_decref(vm);
}

static void test_disk_refused(void **state)
{
    (void)state;
    json_t *vm = vm_with_disks();
    disk_refused(vm, "aaaa1111", DISK_REF_AMBIGUOUS,
                 "disk \"aaaa1111\" of instance db0 is ambiguous: 2 disk ids start with it");
    disk_refused(vm, "0:4:2", DISK_REF_UNKNOWN,
                 "instance db0 has no disk \"0:4:2\" (its disks: 0:4:0 (aaaa1111), 0:4:1 "
                 "(aaaa1111), 0:4:7 (bbbb2222))");
    disk_refused(vm, "cccc3333", DISK_REF_UNKNOWN, "has no disk \"cccc3333\"");
    disk_refused(vm, "bbbb222", DISK_REF_BAD, "at least 8 characters");
    disk_refused(vm, "bbbb", DISK_REF_BAD, "disk \"bbbb\"");
    disk_refused(vm, "", DISK_REF_BAD, "disk \"\"");
    disk_refused(vm, "0:4", DISK_REF_BAD, "expected a PCI slot");
    disk_refused(vm, "0:4:1:", DISK_REF_BAD, "expected a PCI slot");
    disk_refused(vm, "0:4:1:0:4:1", DISK_REF_UNKNOWN, "has no disk \"0:4:1:0:4:1\"");
    json_t *bare = json_pack("{s:s}", "uuid", "x");
    disk_refused(bare, "0:4:0", DISK_REF_UNKNOWN, "(its disks: none)");
    json_decref(bare);
    json_decref(vm);

    assert_true(disk_ref_is_slot("0:4:0"));
    assert_true(disk_ref_is_slot("255:31:7"));
    assert_false(disk_ref_is_slot("0:4"));
    assert_false(disk_ref_is_slot("0:4:-1"));
    assert_false(disk_ref_is_slot(" 0:4:1"));
    assert_false(disk_ref_is_slot("0:4:1x"));
    assert_false(disk_ref_is_slot("0::1"));
    assert_false(disk_ref_is_slot("0:4:1234"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_forms),
        cmocka_unit_test(test_size_refusals),
        cmocka_unit_test(test_disk_found),
        cmocka_unit_test(test_disk_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
