/*
 * datacenter.h -- the static description of a datacenter: its servers, networks,
 * packages, images and settings, read from the JSON file the lab starts from and the
 * dc plugin is configured with. What is running on it (instances, NICs, IPs,
 * committed capacity) is not here: that is live state, kept in Redis.
 *
 * The document, every size in MiB, every relative path relative to the lab
 * directory:
 *
 *   {"servers":  [{"uuid", "hostname", "rack", "ram_mib", "disk_mib", "data_root",
 *                  "platform_version"?}],
 *    "networks": [{"uuid", "name", "subnet" ("a.b.c.d/n"), "gateway",
 *                  "provision_start_ip", "provision_end_ip", "vlan_id", "mtu"}],
 *    "packages": [{"uuid", "name", "brand", "ram_mib", "vcpus", "disk_mib",
 *                  "flexible_disk"?, "quota_mib"?, "disks"?}],
 *    "images":   [{"uuid", "name", "version", "size_mib", "file", "data_mib"?,
 *                  "brand"?, "os"?}],
 *    "settings": {...}?}
 *
 * A description is accepted whole or refused with every fault found, each as
 * "<JSON path>: <what is wrong>" ("servers[1].uuid: expected a UUID ..."), so one
 * round of edits can fix them all. The rules, each a fault of its own:
 *   - every listed field present with its type; no field that is not listed;
 *   - uuids are lowercase 8-4-4-4-12 hex (they name queues, whose names are
 *     lowercase), and no uuid appears twice anywhere in the document;
 *   - hostnames, network names, package names, image name+version pairs and image
 *     files are unique;
 *   - a subnet is an IPv4 network address with its prefix (host bits zero, prefix
 *     8..30); its gateway and provision range lie inside it, off the network and
 *     broadcast addresses, start <= end, and no two networks' provision ranges
 *     overlap;
 *   - vlan_id is 0..4094, mtu 576..9000 (what Triton's NAPI accepts);
 *   - a brand is bhyve, kvm, joyent, joyent-minimal or lx; flexible_disk is bhyve's;
 *   - quota_mib (the zone root's own space, default 0) and disks (the default disk
 *     layout) are a flexible_disk package's only; disks is a list of 1 to 8 objects
 *     whose one member is "size": a positive integer of MiB or "remaining" (once), the
 *     first (the boot disk) alone may leave it out (the image's size), and the sizes
 *     given add up to at most disk_mib (less than it when one is "remaining");
 *   - an image's data_mib (default 1) is 1..size_mib;
 *   - a data root lies strictly inside the lab directory once `..` and the symlinks of
 *     its existing parts are resolved, and no data root is inside another: an agent
 *     touches only its own server's root.
 *
 * This is the jansson-only library dc_model, linked by the dc plugin and by the lab
 * tool, so `tern-lab check` refuses exactly what the plugin refuses. It includes no
 * engine header; errors are negative errno values, the engine's TERN_E* codes.
 *
 * Ownership: a datacenter_t owns every string and array in it; json_t parameters are
 * borrowed.
 */
#ifndef DC_DATACENTER_H
#define DC_DATACENTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define DC_UUID_LEN 36 /* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */

typedef struct dc_server {
    char uuid[DC_UUID_LEN + 1];
    char *hostname;
    char *rack;
    uint64_t ram_mib;
    uint64_t disk_mib;
    char *data_root;        /* absolute, resolved, inside the lab directory */
    char *platform_version; /* or NULL */
} dc_server_t;

typedef struct dc_network {
    char uuid[DC_UUID_LEN + 1];
    char *name;
    char *subnet;                                    /* as written: "203.0.113.0/24" */
    uint32_t subnet_addr, gateway, start_ip, end_ip; /* IPv4, host byte order */
    unsigned prefix_len;
    char *gateway_text, *start_text, *end_text;
    unsigned vlan_id;
    unsigned mtu;
    bool fabric;        /* a fabric (overlay) network: volumes live only on these */
    char **owner_uuids; /* the owners who may use it, NULL-terminated; NULL: any owner */
    size_t n_owner_uuids;
} dc_network_t;

#define DC_DISKS_MAX 8 /* disks of a VM: PCI functions 0:4:0 .. 0:4:7 */

/* One disk of a package's default layout. */
typedef struct dc_package_disk {
    bool remaining;    /* {"size": "remaining"}: what the others leave of disk_mib */
    uint64_t size_mib; /* {"size": n}; 0 for {} (the boot disk at the image's size) */
} dc_package_disk_t;

typedef struct dc_package {
    char uuid[DC_UUID_LEN + 1];
    char *name;
    char *brand;
    uint64_t ram_mib;
    uint64_t vcpus;
    uint64_t disk_mib; /* flexible: the space of all disks together */
    bool flexible_disk;
    uint64_t quota_mib;                    /* flexible: the zone root's own space (0 when absent) */
    dc_package_disk_t disks[DC_DISKS_MAX]; /* the default layout, n_disks of them */
    size_t n_disks;                        /* 0: no default layout */
} dc_package_t;

typedef struct dc_image {
    char uuid[DC_UUID_LEN + 1];
    char *name;
    char *version;
    uint64_t size_mib;
    uint64_t data_mib; /* MiB of deterministic content at its start when the lab makes it */
    char *file;        /* absolute */
    char *brand;       /* or NULL: any brand */
    char *os;          /* or NULL */
} dc_image_t;

/* The description's "settings", each optional, with its default (docs/LAB.md
 * "Settings"). */
typedef struct dc_settings {
    uint64_t share_health_ms;           /* a share process checks its export this often: 5000 */
    uint64_t share_watch_every_s;       /* the lab's share-watch schedule per server: 5 */
    uint64_t writer_records_per_s;      /* the writer workload's rate, 512 B records: 10 */
    uint64_t net_reconcile_every_s;     /* the lab's net-reconcile schedule per server: 300 */
    uint64_t net_reconcile_delay_min_s; /* an agent's first reconcile, drawn in [min, max]: */
    uint64_t net_reconcile_delay_max_s; /* 120 and 600, as net-agent's start-up delay */
    uint64_t reservation_max_age_s;     /* a volume reservation older than this is stale: 900 */
    uint64_t max_snapshots_per_volume;  /* 16 */
    /* Migration (RFD 34, docs/MIGRATION.md "Settings"). */
    uint64_t max_running_migrations_per_cn;   /* source and target both count: 5 */
    uint64_t migration_send_mbps_limit;       /* megabits/s per migration, a token bucket: 500 */
    uint64_t migration_block_kib;             /* the unit a pass compares and sends: 1024 */
    uint64_t migration_window_blocks;         /* blocks the receiver makes durable at once: 16 */
    uint64_t migration_converge_max_mib;      /* automatic: switch after a pass under this: 50 */
    uint64_t migration_converge_max_passes;   /* automatic: switch after this many passes: 10 */
    uint64_t migration_converge_stall_passes; /* ... or this many passes without falling: 3 */
    uint64_t migration_converge_min_reduction_pct; /* "falling": by this % of the least: 10 */
    bool allow_user_migrations;                    /* an owner may migrate its instances: false */
    bool migration_scheduler;                      /* migrate-schedule is available: true */
} dc_settings_t;

typedef struct datacenter {
    char *lab_dir; /* absolute, resolved */
    dc_server_t *servers;
    size_t n_servers;
    dc_network_t *networks;
    size_t n_networks;
    dc_package_t *packages;
    size_t n_packages;
    dc_image_t *images;
    size_t n_images;
    json_t *settings;  /* owned object ({} when absent), every member checked */
    dc_settings_t set; /* the settings with their defaults filled in */
} datacenter_t;

/* The faults of a refused description, in document order. */
typedef struct dc_faults {
    char **items; /* each "<path>: <message>", malloc'd */
    size_t n;
} dc_faults_t;

/* Reads `doc` against the lab directory `lab_dir` (absolute or relative to the
 * working directory; it need not exist yet). Returns 0 and a new datacenter in *out,
 * or -EINVAL with *out NULL and every fault appended to *faults (which the caller
 * zeroes before and disposes after). */
int datacenter_parse(const json_t *doc, const char *lab_dir, datacenter_t **out,
                     dc_faults_t *faults);

/* datacenter_parse of the JSON file at `path`; a file that cannot be read or is not
 * JSON is one fault naming the file (and line and column). Returns 0 or -EINVAL. */
int datacenter_load(const char *path, const char *lab_dir, datacenter_t **out, dc_faults_t *faults);

void datacenter_free(datacenter_t *dc);

/* The server with this uuid, borrowed from dc, or NULL. */
const dc_server_t *datacenter_server_find(const datacenter_t *dc, const char *uuid);

/* The name of the queue a server's agent serves, written into out: "server:<uuid>"
 * (queue names are a-z, 0-9, "_-:."). Returns out. */
char *datacenter_server_queue(const dc_server_t *s, char *out, size_t outlen);

/* The runner id of a server's agent: "agent-<hostname>". Returns out. */
char *datacenter_server_runner_id(const dc_server_t *s, char *out, size_t outlen);

/* Resolves `path` against `base` (when relative): `.` and `..` are applied and the
 * symlinks of the parts that exist are followed, so the result is where the path
 * leads. Returns a malloc'd absolute path, or NULL with errno set. */
char *datacenter_resolve_path(const char *base, const char *path);

/* Appends one fault ("path: message") to f. */
void dc_faults_add(dc_faults_t *f, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* All faults, one a line, each line ending in '\n'. Returns a malloc'd string. */
char *dc_faults_join(const dc_faults_t *f);

void dc_faults_dispose(dc_faults_t *f);

#endif
