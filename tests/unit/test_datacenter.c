/*
 * test_datacenter.c -- the datacenter description (tasks/dc/datacenter.c): a good
 * document read into its structs, and each fault a bad one can have refused with the
 * JSON path that names it, every fault of a document at once. The first argument is
 * the source root (the shipped examples/lab/datacenter.json is read too).
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

#include "datacenter.h"

static const char *source_root;
static char lab_dir[PATH_MAX]; /* a fresh directory, holding a link to outside it */
static char outside[PATH_MAX]; /* a directory next to it */

static const char base_doc[] =
    "{\"servers\": ["
    " {\"uuid\": \"00000000-0000-4000-8000-000000000001\", \"hostname\": \"cn1\","
    "  \"rack\": \"r1\", \"ram_mib\": 4096, \"disk_mib\": 102400, \"data_root\": \"servers/cn1\"},"
    " {\"uuid\": \"00000000-0000-4000-8000-000000000002\", \"hostname\": \"cn2\","
    "  \"rack\": \"r2\", \"ram_mib\": 8192, \"disk_mib\": 204800, \"data_root\": \"servers/cn2\"}],"
    " \"networks\": ["
    " {\"uuid\": \"00000000-0000-4000-8000-000000000011\", \"name\": \"external\","
    "  \"subnet\": \"203.0.113.0/24\", \"gateway\": \"203.0.113.1\","
    "  \"provision_start_ip\": \"203.0.113.10\", \"provision_end_ip\": \"203.0.113.250\","
    "  \"vlan_id\": 0, \"mtu\": 1500},"
    " {\"uuid\": \"00000000-0000-4000-8000-000000000012\", \"name\": \"internal\","
    "  \"subnet\": \"10.0.0.0/16\", \"gateway\": \"10.0.0.1\","
    "  \"provision_start_ip\": \"10.0.1.0\", \"provision_end_ip\": \"10.0.1.255\","
    "  \"vlan_id\": 12, \"mtu\": 9000}],"
    " \"packages\": ["
    " {\"uuid\": \"00000000-0000-4000-8000-000000000021\", \"name\": \"small\","
    "  \"brand\": \"bhyve\", \"ram_mib\": 1024, \"vcpus\": 1, \"disk_mib\": 20480,"
    "  \"flexible_disk\": true},"
    " {\"uuid\": \"00000000-0000-4000-8000-000000000022\", \"name\": \"zone\","
    "  \"brand\": \"joyent\", \"ram_mib\": 512, \"vcpus\": 1, \"disk_mib\": 10240}],"
    " \"images\": ["
    " {\"uuid\": \"00000000-0000-4000-8000-000000000031\", \"name\": \"os\", \"version\": \"1\","
    "  \"size_mib\": 10240, \"file\": \"images/os-1.img\", \"brand\": \"bhyve\"},"
    " {\"uuid\": \"00000000-0000-4000-8000-000000000032\", \"name\": \"os\", \"version\": \"2\","
    "  \"size_mib\": 10240, \"data_mib\": 3, \"file\": \"/srv/images/os-2.img\"}],"
    " \"settings\": {\"share_health_ms\": 200, \"net_reconcile_start_delay_s\": [1, 3]}}";

/* ---- building variants of the base document ----------------------------------------- */

/* The value at "a[1].b" in doc (borrowed), creating nothing; *parent and *key say
 * where it lives so it can be replaced or removed. */
static json_t *locate(json_t *doc, const char *path, json_t **parent, char *key, size_t *index)
{
    json_t *cur = doc;
    const char *p = path;
    *parent = NULL;
    while (*p != '\0') {
        if (*p == '.')
            p++;
        if (*p == '[') {
            char *end;
            *index = strtoul(p + 1, &end, 10);
            p = end + 1;
            *parent = cur;
            key[0] = '\0';
            cur = json_array_get(cur, *index);
        } else {
            size_t n = strcspn(p, ".[");
            memcpy(key, p, n);
            key[n] = '\0';
            p += n;
            *parent = cur;
            cur = json_object_get(cur, key);
        }
    }
    return cur;
}

/* The base document with each "path=json" (or "path=DELETE") edit applied. */
static json_t *variant(const char *edits[])
{
    json_t *doc = json_loads(base_doc, 0, NULL);
    assert_non_null(doc);
    for (size_t i = 0; edits != NULL && edits[i] != NULL; i++) {
        const char *eq = strchr(edits[i], '=');
        assert_non_null(eq);
        char path[256], key[128];
        snprintf(path, sizeof path, "%.*s", (int)(eq - edits[i]), edits[i]);
        json_t *parent;
        size_t index = 0;
        locate(doc, path, &parent, key, &index);
        assert_non_null(parent);
        if (strcmp(eq + 1, "DELETE") == 0) {
            if (json_is_array(parent))
                json_array_remove(parent, index);
            else
                json_object_del(parent, key);
            continue;
        }
        json_error_t jerr;
        json_t *v = json_loads(eq + 1, JSON_DECODE_ANY, &jerr);
        if (v == NULL)
            fail_msg("edit %s: %s", edits[i], jerr.text);
        if (json_is_array(parent))
            json_array_set_new(parent, index, v);
        else
            json_object_set_new(parent, key, v);
    }
    return doc;
}

/* Parses the variant and checks that it is refused with exactly the faults that
 * start with each of `want` (prefix match: the message's start names the path). */
static void expect_faults(const char *edits[], const char *want[])
{
    json_t *doc = variant(edits);
    datacenter_t *dc = NULL;
    dc_faults_t faults = {0};
    int rc = datacenter_parse(doc, lab_dir, &dc, &faults);
    char *all = dc_faults_join(&faults);
    size_t n_want = 0;
    while (want[n_want] != NULL)
        n_want++;
    if (rc != -EINVAL || dc != NULL || faults.n != n_want)
        fail_msg("expected %zu fault(s), got rc %d and %zu:\n%s", n_want, rc, faults.n, all);
    for (size_t i = 0; i < n_want; i++) {
        bool found = false;
        for (size_t j = 0; j < faults.n && !found; j++)
            found = strncmp(faults.items[j], want[i], strlen(want[i])) == 0;
        if (!found)
            fail_msg("no fault starting with \"%s\" in:\n%s", want[i], all);
    }
    free(all);
    dc_faults_dispose(&faults);
    json_decref(doc);
}

#define EDITS(...) ((const char *[]){__VA_ARGS__, NULL})
#define WANT(...)  ((const char *[]){__VA_ARGS__, NULL})

/* ---- fixtures -------------------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/test_datacenter.XXXXXX";
    char *top = mkdtemp(tmpl);
    if (top == NULL)
        return -1;
    snprintf(lab_dir, sizeof lab_dir, "%s/lab", top);
    snprintf(outside, sizeof outside, "%s/outside", top);
    char link[PATH_MAX + 16];
    snprintf(link, sizeof link, "%s/escape", lab_dir);
    if (mkdir(lab_dir, 0700) != 0 || mkdir(outside, 0700) != 0 || symlink(outside, link) != 0)
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/escape", lab_dir);
    unlink(path);
    rmdir(lab_dir);
    rmdir(outside);
    char *slash = strrchr(lab_dir, '/');
    *slash = '\0';
    rmdir(lab_dir);
    return 0;
}

/* ---- a good description ----------------------------------------------------------------- */

static void test_base_reads(void **state)
{
    (void)state;
    json_t *doc = variant(NULL);
    datacenter_t *dc = NULL;
    dc_faults_t faults = {0};
    int rc = datacenter_parse(doc, lab_dir, &dc, &faults);
    if (rc != 0) {
        char *all = dc_faults_join(&faults);
        fail_msg("refused:\n%s", all);
    }
    assert_non_null(dc);
    assert_int_equal(dc->n_servers, 2);
    assert_string_equal(dc->servers[1].hostname, "cn2");
    assert_string_equal(dc->servers[1].rack, "r2");
    assert_int_equal(dc->servers[1].ram_mib, 8192);
    assert_int_equal(dc->servers[1].disk_mib, 204800);
    char want[PATH_MAX + 32];
    snprintf(want, sizeof want, "%s/servers/cn1", lab_dir);
    assert_string_equal(dc->servers[0].data_root, want);
    assert_null(dc->servers[0].platform_version);

    assert_int_equal(dc->n_networks, 2);
    assert_int_equal(dc->networks[0].subnet_addr, 0xcb007100u);
    assert_int_equal(dc->networks[0].prefix_len, 24);
    assert_int_equal(dc->networks[0].gateway, 0xcb007101u);
    assert_int_equal(dc->networks[0].start_ip, 0xcb00710au);
    assert_int_equal(dc->networks[0].end_ip, 0xcb0071fau);
    assert_int_equal(dc->networks[1].vlan_id, 12);
    assert_int_equal(dc->networks[1].mtu, 9000);

    assert_true(dc->packages[0].flexible_disk);
    assert_false(dc->packages[1].flexible_disk);
    assert_string_equal(dc->packages[1].brand, "joyent");

    snprintf(want, sizeof want, "%s/images/os-1.img", lab_dir);
    assert_string_equal(dc->images[0].file, want);
    assert_int_equal(dc->images[0].data_mib, 1); /* the default */
    assert_string_equal(dc->images[0].brand, "bhyve");
    assert_null(dc->images[1].brand);
    assert_int_equal(dc->images[1].data_mib, 3);
    assert_string_equal(dc->images[1].file, "/srv/images/os-2.img");
    assert_int_equal(dc->set.share_health_ms, 200);
    assert_int_equal(dc->set.net_reconcile_delay_min_s, 1);
    assert_int_equal(dc->set.net_reconcile_delay_max_s, 3);
    assert_int_equal(dc->set.share_watch_every_s, 5); /* the defaults of the others */
    assert_int_equal(dc->set.writer_records_per_s, 10);
    assert_int_equal(dc->set.max_snapshots_per_volume, 16);

    assert_ptr_equal(datacenter_server_find(dc, "00000000-0000-4000-8000-000000000002"),
                     &dc->servers[1]);
    assert_null(datacenter_server_find(dc, "00000000-0000-4000-8000-000000000099"));
    char name[128];
    assert_string_equal(datacenter_server_queue(&dc->servers[0], name, sizeof name),
                        "server:00000000-0000-4000-8000-000000000001");
    assert_string_equal(datacenter_server_runner_id(&dc->servers[0], name, sizeof name),
                        "agent-cn1");
    datacenter_free(dc);
    dc_faults_dispose(&faults);
    json_decref(doc);
}

static void test_example_reads(void **state)
{
    (void)state;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/examples/lab/datacenter.json", source_root);
    datacenter_t *dc = NULL;
    dc_faults_t faults = {0};
    if (datacenter_load(path, lab_dir, &dc, &faults) != 0)
        fail_msg("%s refused:\n%s", path, dc_faults_join(&faults));
    assert_int_equal(dc->n_servers, 3);
    assert_int_equal(dc->n_networks, 3);
    /* A fabric network of the default owner, for its volumes. */
    assert_true(dc->networks[2].fabric && !dc->networks[0].fabric);
    assert_int_equal(dc->networks[2].n_owner_uuids, 1);
    assert_string_equal(dc->networks[2].owner_uuids[0], "00000000-0000-0000-0000-000000000000");
    /* Three servers in two racks. */
    assert_string_equal(dc->servers[0].rack, dc->servers[1].rack);
    assert_string_not_equal(dc->servers[0].rack, dc->servers[2].rack);
    /* A package with a default disk layout: boot, 20480 MiB, the rest. */
    size_t with_layout = 0;
    for (size_t i = 0; i < dc->n_packages; i++) {
        const dc_package_t *k = &dc->packages[i];
        if (k->n_disks == 0)
            continue;
        with_layout++;
        assert_int_equal(k->n_disks, 3);
        assert_int_equal(k->disks[1].size_mib, 20480);
        assert_true(k->disks[2].remaining);
    }
    assert_int_equal(with_layout, 1);
    datacenter_free(dc);
}

/* ---- faults, one kind per test ----------------------------------------------------------- */

static void test_wrong_types(void **state)
{
    (void)state;
    expect_faults(EDITS("servers[0].ram_mib=\"lots\"", "networks[1].vlan_id=1.5",
                        "packages[0].flexible_disk=\"yes\"", "images[0].name=7", "servers=DELETE"),
                  WANT("servers: missing", "networks[1].vlan_id: expected an integer",
                       "packages[0].flexible_disk: expected a boolean, got a string",
                       "images[0].name: expected a string, got an integer"));
    /* servers[0].ram_mib went with the servers; the next call checks it alone. */
    expect_faults(EDITS("servers[0].ram_mib=\"lots\""),
                  WANT("servers[0].ram_mib: expected an integer from 1 to 1099511627776, got a "
                       "string"));
    expect_faults(EDITS("settings=[]", "images={}"),
                  WANT("settings: expected an object, got an array",
                       "images: expected an array, got an object"));
    /* A volume's networks and the lab's schedules read these: a fault is named, never
     * taken for the default. */
    expect_faults(EDITS("networks[0].fabric=1", "networks[1].owner_uuids=[\"nope\"]",
                        "settings.share_health_ms=0", "settings.share_watch_every=5",
                        "settings.writer_records_per_s=100001",
                        "settings.net_reconcile_start_delay_s=[9, 3]"),
                  WANT("networks[0].fabric: expected a boolean, got an integer",
                       "networks[1].owner_uuids[0]: expected a lowercase uuid, got nope",
                       "settings.share_watch_every: unknown field",
                       "settings.share_health_ms: expected an integer from 50 to 600000, got 0",
                       "settings.writer_records_per_s: expected an integer from 1 to 100000, "
                       "got 100001",
                       "settings.net_reconcile_start_delay_s: expected [min, max]"));
}

static void test_missing_fields(void **state)
{
    (void)state;
    expect_faults(EDITS("servers[1].rack=DELETE", "networks[0].gateway=DELETE",
                        "packages[1].vcpus=DELETE", "images[1].file=DELETE"),
                  WANT("servers[1].rack: missing", "networks[0].gateway: missing",
                       "packages[1].vcpus: missing", "images[1].file: missing"));
    expect_faults(EDITS("servers=[]"), WANT("servers: a datacenter needs at least one server"));
}

static void test_bad_uuids(void **state)
{
    (void)state;
    expect_faults(EDITS("packages[0].uuid=\"not-a-uuid\"",
                        "servers[1].uuid=\"00000000-0000-4000-8000-00000000000G\"",
                        "images[0].uuid=\"00000000-0000-4000-8000-0000000000AA\""),
                  WANT("packages[0].uuid: expected a UUID (8-4-4-4-12 lowercase hex digits), got "
                       "\"not-a-uuid\"",
                       "servers[1].uuid: expected a UUID", "images[0].uuid: expected a UUID"));
}

static void test_duplicates(void **state)
{
    (void)state;
    /* A uuid is unique across the whole document, not only within its section. */
    expect_faults(EDITS("images[1].uuid=\"00000000-0000-4000-8000-000000000001\"",
                        "networks[1].uuid=\"00000000-0000-4000-8000-000000000011\""),
                  WANT("images[1].uuid: \"00000000-0000-4000-8000-000000000001\" is also the "
                       "uuid of servers[0]",
                       "networks[1].uuid: \"00000000-0000-4000-8000-000000000011\" is also the "
                       "uuid of networks[0]"));
    expect_faults(EDITS("servers[1].hostname=\"cn1\"", "networks[1].name=\"external\"",
                        "packages[1].name=\"small\"", "images[1].version=\"1\"",
                        "images[1].file=\"images/os-1.img\""),
                  WANT("servers[1].hostname: hostname \"cn1\" is also that of servers[0]",
                       "networks[1].name: name \"external\" is also that of networks[0]",
                       "packages[1].name: name \"small\" is also that of packages[0]",
                       "images[1].version: image os version 1 is also images[0]",
                       "images[1].file: file"));
}

static void test_bad_subnets(void **state)
{
    (void)state;
    expect_faults(EDITS("networks[0].subnet=\"203.0.113.0\""),
                  WANT("networks[0].subnet: expected an IPv4 subnet in CIDR form"));
    expect_faults(EDITS("networks[0].subnet=\"203.0.113.5/24\""),
                  WANT("networks[0].subnet: \"203.0.113.5/24\" has host bits set; the network "
                       "is 203.0.113.0/24"));
    expect_faults(EDITS("networks[0].subnet=\"203.0.113.0/33\""),
                  WANT("networks[0].subnet: prefix length /33 is out of range"));
    expect_faults(EDITS("networks[0].subnet=\"fd00::/64\""),
                  WANT("networks[0].subnet: expected an IPv4 subnet"));
    expect_faults(EDITS("networks[0].subnet=\"203.0.113.0/24x\""),
                  WANT("networks[0].subnet: expected an IPv4 subnet"));
}

static void test_addresses_outside_subnet(void **state)
{
    (void)state;
    expect_faults(
        EDITS("networks[0].gateway=\"203.0.114.1\"", "networks[1].provision_end_ip=\"10.1.0.5\""),
        WANT("networks[0].gateway: 203.0.114.1 is outside the subnet 203.0.113.0/24",
             "networks[1].provision_end_ip: 10.1.0.5 is outside the subnet "
             "10.0.0.0/16"));
    expect_faults(EDITS("networks[0].provision_start_ip=\"203.0.113.0\"",
                        "networks[0].provision_end_ip=\"203.0.113.255\""),
                  WANT("networks[0].provision_start_ip: 203.0.113.0 is the network address",
                       "networks[0].provision_end_ip: 203.0.113.255 is the broadcast address"));
    expect_faults(EDITS("networks[0].provision_start_ip=\"203.0.113.200\"",
                        "networks[0].provision_end_ip=\"203.0.113.100\""),
                  WANT("networks[0].provision_start_ip: 203.0.113.200 comes after "
                       "provision_end_ip 203.0.113.100"));
    expect_faults(EDITS("networks[0].gateway=\"203.0.113.300\""),
                  WANT("networks[0].gateway: expected an IPv4 address, got \"203.0.113.300\""));
}

static void test_overlapping_ranges(void **state)
{
    (void)state;
    /* Two networks on the same subnet may coexist (other VLANs); their ranges may not
     * overlap, since one address would then be handed out twice. */
    expect_faults(EDITS("networks[1].subnet=\"203.0.113.0/24\"",
                        "networks[1].gateway=\"203.0.113.1\"",
                        "networks[1].provision_start_ip=\"203.0.113.250\"",
                        "networks[1].provision_end_ip=\"203.0.113.254\""),
                  WANT("networks[1].provision_start_ip: the provision range "
                       "203.0.113.250-203.0.113.254 overlaps that of networks[0] "
                       "(203.0.113.10-203.0.113.250)"));
    json_t *doc = variant(EDITS("networks[1].subnet=\"203.0.113.0/24\"",
                                "networks[1].gateway=\"203.0.113.1\"",
                                "networks[1].provision_start_ip=\"203.0.113.251\"",
                                "networks[1].provision_end_ip=\"203.0.113.254\""));
    datacenter_t *dc = NULL;
    dc_faults_t faults = {0};
    assert_int_equal(datacenter_parse(doc, lab_dir, &dc, &faults), 0);
    datacenter_free(dc);
    json_decref(doc);
}

static void test_data_roots(void **state)
{
    (void)state;
    char abs_outside[PATH_MAX + 64], edit[PATH_MAX + 128];
    expect_faults(EDITS("servers[0].data_root=\"servers/../../elsewhere\""),
                  WANT("servers[0].data_root: \"servers/../../elsewhere\" leads to"));
    snprintf(abs_outside, sizeof abs_outside, "%s/cn1", outside);
    snprintf(edit, sizeof edit, "servers[0].data_root=\"%s\"", abs_outside);
    expect_faults(EDITS(edit), WANT("servers[0].data_root: \""));
    /* A link inside the lab directory that leads out of it. */
    expect_faults(EDITS("servers[1].data_root=\"escape/cn2\""),
                  WANT("servers[1].data_root: \"escape/cn2\" leads to"));
    /* The lab directory itself, and one root inside another. */
    expect_faults(EDITS("servers[0].data_root=\"./servers/..\""),
                  WANT("servers[0].data_root: \"./servers/..\" leads to"));
    expect_faults(EDITS("servers[1].data_root=\"servers/cn1/inner\""),
                  WANT("servers[1].data_root: "));
    expect_faults(EDITS("servers[1].data_root=\"servers//cn1/\""), WANT("servers[1].data_root: "));
    /* An absolute root inside the lab directory is fine. */
    snprintf(edit, sizeof edit, "servers[0].data_root=\"%s/servers/a/../cn1\"", lab_dir);
    json_t *doc = variant(EDITS(edit));
    datacenter_t *dc = NULL;
    dc_faults_t faults = {0};
    assert_int_equal(datacenter_parse(doc, lab_dir, &dc, &faults), 0);
    char want[PATH_MAX + 32];
    snprintf(want, sizeof want, "%s/servers/cn1", lab_dir);
    assert_string_equal(dc->servers[0].data_root, want);
    datacenter_free(dc);
    json_decref(doc);
}

static void test_unknown_fields(void **state)
{
    (void)state;
    expect_faults(EDITS("zones=[]", "servers[0].cpus=4", "images[1].checksum=\"x\""),
                  WANT("zones: unknown field (expected one of servers, networks, packages, "
                       "images, settings)",
                       "servers[0].cpus: unknown field", "images[1].checksum: unknown field"));
}

static void test_ranges_and_brands(void **state)
{
    (void)state;
    expect_faults(EDITS("networks[0].vlan_id=4095", "networks[1].mtu=100",
                        "packages[1].brand=\"docker\"", "packages[0].ram_mib=0"),
                  WANT("networks[0].vlan_id: expected an integer from 0 to 4094, got 4095",
                       "networks[1].mtu: expected an integer from 576 to 9000, got 100",
                       "packages[1].brand: expected bhyve, kvm, joyent, joyent-minimal or lx",
                       "packages[0].ram_mib: expected an integer from 1 to"));
    expect_faults(EDITS("packages[1].flexible_disk=true", "images[1].data_mib=20000"),
                  WANT("packages[1].flexible_disk: flexible disk space is for bhyve packages",
                       "images[1].data_mib: 20000 MiB of data do not fit"));
    expect_faults(EDITS("servers[0].hostname=\"cn 1\"", "packages[0].name=\"-x\""),
                  WANT("servers[0].hostname: expected 1 to 63", "packages[0].name: expected"));
}

/* A flexible package's disk fields: the default layout read, and each fault of it. */
static void test_package_disks(void **state)
{
    (void)state;
    json_t *doc = variant(EDITS("packages[0].disk_mib=102400", "packages[0].quota_mib=512",
                                "packages[0].disks=[{}, {\"size\": 20480}, {\"size\": "
                                "\"remaining\"}]"));
    datacenter_t *dc = NULL;
    dc_faults_t faults = {0};
    if (datacenter_parse(doc, lab_dir, &dc, &faults) != 0)
        fail_msg("refused:\n%s", dc_faults_join(&faults));
    const dc_package_t *k = &dc->packages[0];
    assert_int_equal(k->quota_mib, 512);
    assert_int_equal(k->n_disks, 3);
    assert_false(k->disks[0].remaining);
    assert_int_equal(k->disks[0].size_mib, 0);
    assert_int_equal(k->disks[1].size_mib, 20480);
    assert_true(k->disks[2].remaining);
    assert_int_equal(dc->packages[1].quota_mib, 0);
    assert_int_equal(dc->packages[1].n_disks, 0);
    datacenter_free(dc);
    json_decref(doc);

    expect_faults(EDITS("packages[1].disks=[{}]", "packages[1].quota_mib=10"),
                  WANT("packages[1].disks: a default disk layout is for flexible_disk packages",
                       "packages[1].quota_mib: the zone root's own space is for flexible_disk "
                       "packages"));
    expect_faults(EDITS("packages[0].disks=[]", "packages[0].quota_mib=-1"),
                  WANT("packages[0].disks: expected 1 to 8 disks (PCI functions 0:4:0 to 0:4:7), "
                       "got 0",
                       "packages[0].quota_mib: expected an integer from 0 to"));
    expect_faults(EDITS("packages[0].disks=\"remaining\""),
                  WANT("packages[0].disks: expected a list of 1 to 8 of {}, {\"size\": MiB} or "
                       "{\"size\": \"remaining\"}, got a string"));
    expect_faults(EDITS("packages[0].disks=[{}, {\"size\": 1}, {\"size\": 1}, {\"size\": 1}, "
                        "{\"size\": 1}, {\"size\": 1}, {\"size\": 1}, {\"size\": 1}, "
                        "{\"size\": 1}]"),
                  WANT("packages[0].disks: expected 1 to 8 disks (PCI functions 0:4:0 to 0:4:7), "
                       "got 9"));
    expect_faults(EDITS("packages[0].disks=[{}, {}, {\"size\": 0}, {\"size\": \"rest\"}, "
                        "{\"size\": 1.5}, {\"size\": 10, \"pci_slot\": \"0:4:5\"}, 5]"),
                  WANT("packages[0].disks[1].size: required for a disk other than the first",
                       "packages[0].disks[2].size: expected an integer from 1 to",
                       "packages[0].disks[3].size: expected a positive integer of MiB or "
                       "\"remaining\", got a string",
                       "packages[0].disks[4].size: expected a positive integer of MiB or "
                       "\"remaining\", got a number",
                       "packages[0].disks[5].pci_slot: unknown field (expected one of size)",
                       "packages[0].disks[6]: expected an object, got an integer"));
    expect_faults(EDITS("packages[0].disks=[{\"size\": \"remaining\"}, {\"size\": "
                        "\"remaining\"}]"),
                  WANT("packages[0].disks[1].size: \"remaining\" is also the size of disks[0]"));
    /* Sizes that no instance of the package could have (disk_mib 20480). */
    expect_faults(EDITS("packages[0].disks=[{\"size\": 10240}, {\"size\": 10240}, "
                        "{\"size\": \"remaining\"}]"),
                  WANT("packages[0].disks: the sizes given add up to 20480 MiB, all of disk_mib "
                       "20480"));
    expect_faults(EDITS("packages[0].disks=[{\"size\": 30000}]"),
                  WANT("packages[0].disks: the sizes given add up to 30000 MiB, more than "
                       "disk_mib 20480"));
}

/* Every fault of a document at once, and entries that are not objects named by their
 * own index without shifting the others'. */
static void test_all_faults_at_once(void **state)
{
    (void)state;
    expect_faults(EDITS("servers[0]=5", "servers[1].uuid=\"x\"", "networks[0].mtu=DELETE",
                        "packages[1].name=\"small\"", "images[0].size_mib=-1"),
                  WANT("servers[0]: expected an object, got an integer",
                       "servers[1].uuid: expected a UUID", "networks[0].mtu: missing",
                       "packages[1].name: name \"small\" is also that of packages[0]",
                       "images[0].size_mib: expected an integer from 1 to 1099511627776, got -1"));
    expect_faults(
        EDITS("servers=DELETE", "networks=DELETE", "packages=DELETE", "images=DELETE"),
        WANT("servers: missing", "networks: missing", "packages: missing", "images: missing"));
}

static void test_load_file(void **state)
{
    (void)state;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/bad.json", lab_dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"servers\": [\n  {\"uuid\": }\n]}\n", f);
    fclose(f);
    datacenter_t *dc = NULL;
    dc_faults_t faults = {0};
    assert_int_equal(datacenter_load(path, lab_dir, &dc, &faults), -EINVAL);
    assert_int_equal(faults.n, 1);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "%s: line 2, column", path);
    assert_true(strncmp(faults.items[0], want, strlen(want)) == 0);
    dc_faults_dispose(&faults);
    unlink(path);

    /* A duplicate key is a fault, not a silent choice of one of the values. */
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"servers\": [], \"servers\": []}", f);
    fclose(f);
    assert_int_equal(datacenter_load(path, lab_dir, &dc, &faults), -EINVAL);
    assert_non_null(strstr(faults.items[0], "duplicate"));
    dc_faults_dispose(&faults);
    unlink(path);

    assert_int_equal(datacenter_load("/nonexistent/dc.json", lab_dir, &dc, &faults), -EINVAL);
    assert_non_null(strstr(faults.items[0], "/nonexistent/dc.json"));
    dc_faults_dispose(&faults);
}

static void test_resolve_path(void **state)
{
    (void)state;
    char want[PATH_MAX + 64];
    char *p = datacenter_resolve_path(lab_dir, "a/b/../c/./d");
    snprintf(want, sizeof want, "%s/a/c/d", lab_dir);
    assert_string_equal(p, want);
    free(p);
    /* A link is followed, and a `..` after it climbs from where it led. */
    p = datacenter_resolve_path(lab_dir, "escape/x/../y");
    snprintf(want, sizeof want, "%s/y", outside);
    assert_string_equal(p, want);
    free(p);
    p = datacenter_resolve_path(lab_dir, "escape/..");
    char *top = strdup(outside);
    *strrchr(top, '/') = '\0';
    assert_string_equal(p, top);
    free(top);
    free(p);
    p = datacenter_resolve_path(lab_dir, "/../../x");
    assert_string_equal(p, "/x");
    free(p);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s SOURCE_ROOT\n", argv[0]);
        return 2;
    }
    source_root = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base_reads),         cmocka_unit_test(test_example_reads),
        cmocka_unit_test(test_wrong_types),        cmocka_unit_test(test_missing_fields),
        cmocka_unit_test(test_bad_uuids),          cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_bad_subnets),        cmocka_unit_test(test_addresses_outside_subnet),
        cmocka_unit_test(test_overlapping_ranges), cmocka_unit_test(test_data_roots),
        cmocka_unit_test(test_unknown_fields),     cmocka_unit_test(test_ranges_and_brands),
        cmocka_unit_test(test_all_faults_at_once), cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_resolve_path),       cmocka_unit_test(test_package_disks),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
