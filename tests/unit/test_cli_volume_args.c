/*
 * test_cli_volume_args.c -- the arguments of `tern volume ...` and `tern vm create
 * --volume` that the CLI judges before any request: a volume SIZE (volume_size.c) in
 * every form it takes and refuses, and against the list of sizes offered; a volume
 * name; --volume NAME:/MOUNTPOINT[:ro|:rw] values (volume_spec.c), each refusal naming
 * the value; and which volume a VOL names among an owner's (volume_ref.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "volume_ref.h"
#include "volume_size.h"
#include "volume_spec.h"

/* ---- SIZE ---------------------------------------------------------------------- */

static uint64_t size_ok(const char *s)
{
    uint64_t mib = 0;
    char err[256] = "";
    if (!volume_size_parse(s, &mib, err, sizeof err))
        fail_msg("\"%s\" refused: %s", s, err);
    return mib;
}

static void size_refused(const char *s, const char *want)
{
    uint64_t mib = 77;
    char err[256] = "";
    if (volume_size_parse(s, &mib, err, sizeof err))
        fail_msg("\"%s\" accepted as %llu MiB", s, (unsigned long long)mib);
    assert_int_equal(mib, 0);
    if (strstr(err, want) == NULL)
        fail_msg("\"%s\": message \"%s\" lacks \"%s\"", s, err, want);
}

static void test_size_forms(void **state)
{
    (void)state;
    assert_int_equal(size_ok("10G"), 10240);
    assert_int_equal(size_ok("10g"), 10240);
    assert_int_equal(size_ok("100g"), 102400);
    assert_int_equal(size_ok("1000G"), 1024000);
    /* forms the list judges, not the form: */
    assert_int_equal(size_ok("21G"), 21504);
    assert_int_equal(size_ok("1100G"), 1126400);
    assert_int_equal(size_ok("1G"), 1024);
    assert_int_equal(size_ok("010G"), 10240);
    assert_int_equal(size_ok("8796093022207G"), UINT64_C(8796093022207) * 1024);
}

static void test_size_refusals(void **state)
{
    (void)state;
    size_refused("10", "size \"10\": expected NG or Ng");
    size_refused("10", "the unit G is required");
    size_refused("10M", "size \"10M\": expected");
    size_refused("10m", "expected");
    size_refused("1T", "size \"1T\": expected");
    size_refused("10GB", "size \"10GB\": expected");
    size_refused("10GiB", "size \"10GiB\": expected");
    size_refused("10Gi", "expected");
    size_refused("0G", "size \"0G\": a volume cannot be 0 GiB");
    size_refused("000g", "cannot be 0 GiB");
    size_refused("-10G", "size \"-10G\": expected");
    size_refused("+10G", "expected");
    size_refused("1.5G", "size \"1.5G\": expected");
    size_refused("", "size \"\": expected");
    size_refused("G", "size \"G\": expected");
    size_refused("g", "expected");
    size_refused(" 10G", "expected");
    size_refused("10G ", "expected");
    size_refused("10 G", "expected");
    size_refused("0x10G", "expected");
    size_refused("8796093022208G", "more than the largest size, 8796093022207G");
    size_refused("99999999999999999999999G", "more than the largest size");
    /* The unit is checked before the number's size: a long number without it is a
     * missing unit, not an overflow. */
    size_refused("99999999999999999999999", "the unit G is required");
}

static void test_size_listed(void **state)
{
    (void)state;
    /* The 19 sizes GET /volumesizes answers (DOMAIN 1.2). */
    json_t *sizes = json_array();
    for (int g = 10; g <= 100; g += 10)
        json_array_append_new(sizes,
                              json_pack("{s:i, s:s}", "size", g * 1024, "type", "tritonnfs"));
    for (int g = 200; g <= 1000; g += 100)
        json_array_append_new(sizes,
                              json_pack("{s:i, s:s}", "size", g * 1024, "type", "tritonnfs"));
    assert_int_equal(json_array_size(sizes), 19);
    assert_true(volume_size_listed(sizes, size_ok("10G")));
    assert_true(volume_size_listed(sizes, size_ok("100g")));
    assert_true(volume_size_listed(sizes, size_ok("1000G")));
    assert_true(volume_size_listed(sizes, size_ok("300G")));
    assert_false(volume_size_listed(sizes, size_ok("21G")));
    assert_false(volume_size_listed(sizes, size_ok("1100G")));
    assert_false(volume_size_listed(sizes, size_ok("110G")));
    assert_false(volume_size_listed(sizes, size_ok("1G")));
    assert_false(volume_size_listed(sizes, 10240 + 1));
    json_t *odd = json_pack("[{s:s}, {s:n}, {s:f}, {}]", "size", "10240", "size", "size", 10240.0);
    assert_false(volume_size_listed(odd, 10240));
    json_decref(odd);
    assert_false(volume_size_listed(NULL, 10240));
    json_decref(sizes);

    char buf[32];
    volume_size_text(10240, buf, sizeof buf);
    assert_string_equal(buf, "10G");
    volume_size_text(1024000, buf, sizeof buf);
    assert_string_equal(buf, "1000G");
    volume_size_text(1536, buf, sizeof buf);
    assert_string_equal(buf, "1536M");
    assert_string_equal(VOLUME_SIZE_NOT_AVAILABLE,
                        "volume size not available, use tern volume sizes command for available "
                        "sizes");
}

/* ---- names --------------------------------------------------------------------- */

static void test_names(void **state)
{
    (void)state;
    assert_null(volume_name_fault("db"));
    assert_null(volume_name_fault("wp-uploads"));
    assert_null(volume_name_fault("0.a_b-c"));
    char longest[VOLUME_NAME_MAX + 2];
    memset(longest, 'a', VOLUME_NAME_MAX);
    longest[VOLUME_NAME_MAX] = '\0';
    assert_null(volume_name_fault(longest));
    longest[VOLUME_NAME_MAX] = 'a';
    longest[VOLUME_NAME_MAX + 1] = '\0';
    assert_string_equal(volume_name_fault(longest), "must be at most 256 characters");
    assert_string_equal(volume_name_fault(""), "is empty");
    assert_string_equal(volume_name_fault("a"), "must be at least 2 characters");
    assert_string_equal(volume_name_fault("-vol"), "must start with a letter or a digit");
    assert_string_equal(volume_name_fault(".vol"), "must start with a letter or a digit");
    assert_string_equal(volume_name_fault("vol/1"),
                        "may hold only letters, digits, '_', '.' and '-'");
    assert_non_null(volume_name_fault("vol 1"));
    assert_non_null(volume_name_fault("vol:1"));
    assert_non_null(volume_name_fault("vol\xc3\xa9"));
}

/* ---- --volume values ----------------------------------------------------------- */

/* The volumes the values (a NULL-ended list) make, as compact JSON text (malloc'd). */
static char *specs_ok(const char *first, ...)
{
    json_t *specs = json_array();
    va_list ap;
    va_start(ap, first);
    for (const char *s = first; s != NULL; s = va_arg(ap, const char *))
        json_array_append_new(specs, json_string(s));
    va_end(ap);
    json_t *volumes = NULL;
    char err[1536] = "";
    if (!volume_spec_parse(specs, &volumes, err, sizeof err))
        fail_msg("\"%s\"...: refused: %s", first, err);
    char *text = json_dumps(volumes, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(volumes);
    json_decref(specs);
    return text;
}

/* Asserts the values (a NULL-ended list after `want`) are refused with a message
 * containing `want`. */
static void specs_refused(const char *want, ...)
{
    json_t *specs = json_array();
    va_list ap;
    va_start(ap, want);
    for (const char *s = va_arg(ap, const char *); s != NULL; s = va_arg(ap, const char *))
        json_array_append_new(specs, json_string(s));
    va_end(ap);
    json_t *volumes = (json_t *)1;
    char err[1536] = "";
    if (volume_spec_parse(specs, &volumes, err, sizeof err))
        fail_msg("accepted, expecting \"%s\"", want);
    assert_null(volumes);
    if (strstr(err, want) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", err, want);
    json_decref(specs);
}

static void assert_text(char *got, const char *want)
{
    assert_string_equal(got, want);
    free(got);
}

static void test_specs(void **state)
{
    (void)state;
    assert_text(specs_ok("wp-uploads:/uploads", NULL),
                "[{\"name\":\"wp-uploads\",\"mountpoint\":\"/uploads\",\"mode\":\"rw\"}]");
    assert_text(specs_ok("data:/srv/data:ro", "logs:/var/log/app:rw", NULL),
                "[{\"name\":\"data\",\"mountpoint\":\"/srv/data\",\"mode\":\"ro\"},"
                "{\"name\":\"logs\",\"mountpoint\":\"/var/log/app\",\"mode\":\"rw\"}]");
    /* one volume at two mountpoints is allowed; "..." inside a segment is a name */
    assert_text(specs_ok("db:/a", "db:/b/..c/d..", NULL),
                "[{\"name\":\"db\",\"mountpoint\":\"/a\",\"mode\":\"rw\"},"
                "{\"name\":\"db\",\"mountpoint\":\"/b/..c/d..\",\"mode\":\"rw\"}]");
    assert_text(specs_ok(NULL), "[]");
}

static void test_spec_refusals(void **state)
{
    (void)state;
    specs_refused("--volume \"data\": no mountpoint: expected NAME:/MOUNTPOINT", "data", NULL);
    specs_refused("--volume \"data:\": mountpoint \"\" is empty", "data:", NULL);
    specs_refused("--volume \"data:mnt\": mountpoint \"mnt\" is not absolute", "data:mnt", NULL);
    specs_refused("--volume \"data:./mnt:ro\": mountpoint \"./mnt\" is not absolute",
                  "data:./mnt:ro", NULL);
    specs_refused("--volume \"data:/\": mountpoint \"/\" is the root", "data:/", NULL);
    specs_refused("mountpoint \"//\" is the root", "data://", NULL);
    specs_refused("--volume \"data:/a/../etc\": mountpoint \"/a/../etc\" has a \"..\" segment",
                  "data:/a/../etc", NULL);
    specs_refused("has a \"..\" segment", "data:/..", NULL);
    specs_refused("--volume \"data:/mnt:rx\": mode \"rx\": expected ro or rw", "data:/mnt:rx",
                  NULL);
    specs_refused("mode \"RO\"", "data:/mnt:RO", NULL);
    specs_refused("mode \"\"", "data:/mnt:", NULL);
    specs_refused("mountpoint \"/a:b\" holds a colon", "data:/a:b:ro", NULL);
    specs_refused("--volume \":/mnt\": no volume name", ":/mnt", NULL);
    specs_refused("--volume \"/bar\": no volume name", "/bar", NULL);
    specs_refused("--volume \"/bar:ro\": no volume name", "/bar:ro", NULL);
    specs_refused("--volume \"a:/mnt\": volume name \"a\" must be at least 2 characters", "a:/mnt",
                  NULL);
    specs_refused("volume name \"-x\" must start with a letter or a digit", "-x:/mnt", NULL);
    specs_refused("volume name \"x y\" may hold only", "x y:/mnt", NULL);
    char mp[VOLUME_MOUNTPOINT_MAX + 8];
    mp[0] = 'd', mp[1] = 'b', mp[2] = ':';
    memset(mp + 3, 'a', VOLUME_MOUNTPOINT_MAX + 1);
    mp[3] = '/';
    mp[VOLUME_MOUNTPOINT_MAX + 4] = '\0';
    specs_refused("--volume \"db:/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\": mountpoint is longer "
                  "than 1024 characters (1025)",
                  mp, NULL);
    mp[VOLUME_MOUNTPOINT_MAX + 3] = '\0'; /* 1024 exactly */
    char *ok = specs_ok(mp, NULL);
    free(ok);
    /* A value after a good one is judged too. */
    specs_refused("--volume \"logs:var\"", "data:/data", "logs:var", NULL);
}

static void test_spec_duplicates(void **state)
{
    (void)state;
    /* Docker's `-v /bar -v foo:/bar`: a mountpoint taken twice, naming both values. */
    specs_refused("--volume \"foo:/bar\": mountpoint /bar is also that of --volume \"/bar\"",
                  "/bar", "foo:/bar", NULL);
    specs_refused("--volume \"b2:/bar:ro\": mountpoint /bar is also that of --volume \"b1:/bar\"",
                  "b1:/bar", "b2:/bar:ro", NULL);
    specs_refused("mountpoint /bar/ is also that of --volume \"b1:/bar\"", "b1:/bar", "b2:/bar/",
                  NULL);
    specs_refused("mountpoint //x//y is also that of --volume \"b1:/x/y\"", "b1:/x/y", "b2://x//y",
                  NULL);
    specs_refused("is also that of --volume \"b1:/m\"", "b1:/m", "ok:/n", "b1:/m", NULL);
    /* The duplicate is named before what else is wrong with either value. */
    specs_refused("is also that of", "a:/m", "b:/m:rx", NULL);
    char *ok = specs_ok("b1:/bar", "b2:/bar2", "b3:/ba", NULL);
    free(ok);
}

/* ---- VOL ----------------------------------------------------------------------- */

static json_t *owner_volumes(void)
{
    json_error_t e;
    json_t *v =
        json_loads("["
                   " {\"uuid\": \"aaaa1111-2222-4333-8444-555555555555\", \"name\": \"data\","
                   "  \"state\": \"ready\"},"
                   " {\"uuid\": \"aaaa1111-9999-4333-8444-555555555555\", \"name\": \"logs\","
                   "  \"state\": \"creating\"},"
                   " {\"uuid\": \"bbbb2222-0000-4000-8000-000000000000\", \"name\": \"data\","
                   "  \"state\": \"failed\"},"
                   " {\"uuid\": \"cccc3333-0000-4000-8000-000000000000\", \"name\": \"old\","
                   "  \"state\": \"failed\"},"
                   " {\"uuid\": \"dddd4444-0000-4000-8000-000000000000\", \"name\": \"twice\","
                   "  \"state\": \"failed\"},"
                   " {\"uuid\": \"eeee5555-0000-4000-8000-000000000000\", \"name\": \"twice\","
                   "  \"state\": \"failed\"},"
                   " {\"uuid\": \"ffff6666-0000-4000-8000-000000000000\","
                   "  \"name\": \"aaaa1111-9999-4333-8444-555555555555\", \"state\": \"ready\"},"
                   " {\"uuid\": \"12345678-0000-4000-8000-000000000000\", \"name\": \"bbbb2222\","
                   "  \"state\": \"ready\"}"
                   "]",
                   0, &e);
    assert_non_null(v);
    return v;
}

#define OWNER "00000000-0000-0000-0000-000000000000"

static const char *vol_found(const json_t *vols, const char *ref)
{
    const json_t *vol;
    char err[1536] = "";
    volume_ref_status_t r = volume_ref_find(vols, OWNER, ref, &vol, err, sizeof err);
    if (r != VOLUME_REF_OK)
        fail_msg("\"%s\" not found: %s", ref, err);
    return json_string_value(json_object_get(vol, "uuid"));
}

static void vol_refused(const json_t *vols, const char *ref, volume_ref_status_t want,
                        const char *msg)
{
    const json_t *vol = (const json_t *)1;
    char err[1536] = "";
    assert_int_equal(volume_ref_find(vols, OWNER, ref, &vol, err, sizeof err), want);
    assert_null(vol);
    if (strstr(err, msg) == NULL)
        fail_msg("\"%s\": message \"%s\" lacks \"%s\"", ref, err, msg);
}

static void test_vol_found(void **state)
{
    (void)state;
    json_t *v = owner_volumes();
    /* a name: the volume holding it, not the failed one that gave it back */
    assert_string_equal(vol_found(v, "data"), "aaaa1111-2222-4333-8444-555555555555");
    assert_string_equal(vol_found(v, "logs"), "aaaa1111-9999-4333-8444-555555555555");
    /* a failed volume whose name nobody else has */
    assert_string_equal(vol_found(v, "old"), "cccc3333-0000-4000-8000-000000000000");
    /* a uuid before a name that is that uuid */
    assert_string_equal(vol_found(v, "aaaa1111-9999-4333-8444-555555555555"),
                        "aaaa1111-9999-4333-8444-555555555555");
    /* a name before a prefix that is that name */
    assert_string_equal(vol_found(v, "bbbb2222"), "12345678-0000-4000-8000-000000000000");
    /* prefixes of 8 and more */
    assert_string_equal(vol_found(v, "cccc3333"), "cccc3333-0000-4000-8000-000000000000");
    assert_string_equal(vol_found(v, "aaaa1111-2"), "aaaa1111-2222-4333-8444-555555555555");
    assert_string_equal(vol_found(v, "bbbb2222-"), "bbbb2222-0000-4000-8000-000000000000");
    json_decref(v);
}

static void test_vol_refused(void **state)
{
    (void)state;
    json_t *v = owner_volumes();
    vol_refused(v, "nosuch", VOLUME_REF_UNKNOWN,
                "owner " OWNER " has no volume \"nosuch\" (a VOL is a volume's name, its uuid, "
                "or at least 8 characters of its uuid)");
    vol_refused(v, "cccc333", VOLUME_REF_UNKNOWN, "has no volume \"cccc333\"");
    vol_refused(v, "", VOLUME_REF_UNKNOWN, "has no volume \"\"");
    vol_refused(v, "DATA", VOLUME_REF_UNKNOWN, "has no volume \"DATA\"");
    vol_refused(v, "99999999-0000-4000-8000-000000000000", VOLUME_REF_UNKNOWN, "has no volume");
    vol_refused(v, "aaaa1111", VOLUME_REF_AMBIGUOUS,
                "volume \"aaaa1111\" is ambiguous: 2 volumes of owner " OWNER
                " have that uuid prefix (aaaa1111-2222-4333-8444-555555555555 (data, ready), "
                "aaaa1111-9999-4333-8444-555555555555 (logs, creating)); name one by its uuid");
    vol_refused(v, "twice", VOLUME_REF_AMBIGUOUS,
                "volume \"twice\" is ambiguous: 2 volumes of owner " OWNER " have that name "
                "(dddd4444-0000-4000-8000-000000000000 (twice, failed), "
                "eeee5555-0000-4000-8000-000000000000 (twice, failed))");
    vol_refused(NULL, "data", VOLUME_REF_UNKNOWN, "has no volume \"data\"");
    /* More matches than a message names: the count is whole, the list cut short. */
    json_t *many = json_array();
    for (int i = 0; i < 12; i++) {
        char uuid[37];
        snprintf(uuid, sizeof uuid, "77777777-0000-4000-8000-%012d", i);
        json_array_append_new(
            many, json_pack("{s:s, s:s, s:s}", "uuid", uuid, "name", "same", "state", "ready"));
    }
    vol_refused(many, "same", VOLUME_REF_AMBIGUOUS, "12 volumes of owner");
    vol_refused(many, "same", VOLUME_REF_AMBIGUOUS,
                "77777777-0000-4000-8000-000000000007 (same, "
                "ready), ...); name one by its uuid");
    json_decref(many);
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_forms),      cmocka_unit_test(test_size_refusals),
        cmocka_unit_test(test_size_listed),     cmocka_unit_test(test_names),
        cmocka_unit_test(test_specs),           cmocka_unit_test(test_spec_refusals),
        cmocka_unit_test(test_spec_duplicates), cmocka_unit_test(test_vol_found),
        cmocka_unit_test(test_vol_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
