/*
 * views.c -- the dc plugin's read views: the inventory as GET routes, each a Lua
 * script of tasks/dc/lua/ (view_*.lua) paging an index of the plugin's namespace as
 * GET /jobs pages (docs/DATACENTER.md "Views").
 */
#include "dc_tasks.h"
#include "lua_scripts.h"

/* Every script completes record keys from the namespace itself. */
static const char *const ns_keys[] = {"", NULL};
static const char *const vms_params[] = {"owner_uuid", "server_uuid", "state",
                                         "alias",      "system_role", NULL};
static const char *const vm_params[] = {"system_role", NULL};
static const char *const volumes_params[] = {"owner_uuid", "name", "state",   "size",   "type",
                                             "predicate",  "tag",  "vm_uuid", "render", NULL};
static const char *const volume_params[] = {"owner_uuid", "render", NULL};
static const char *const volume_references_params[] = {"owner_uuid", NULL};
static const char *const volume_sizes_params[] = {"type", NULL};
static const char *const reservations_params[] = {"volume_uuid", "job_uuid", NULL};
static const char *const nics_params[] = {"belongs_to_uuid", "cn_uuid", NULL};
static const char *const migrations_params[] = {"owner_uuid", "state", "vm_uuid", NULL};
static const char *const migration_params[] = {"owner_uuid", NULL};

#define DC_VIEW(p, s, q, lua)                                                                      \
    {                                                                                              \
        .size = sizeof(tern_view_def), .path = (p), .summary = (s), .params = (q),                 \
        .keys = ns_keys, .script = (lua),                                                          \
    }

static const tern_view_def servers_view =
    DC_VIEW("/servers", "The servers, by uuid, with their committed RAM and disk.", NULL,
            dc_lua_view_servers);
static const tern_view_def server_view =
    DC_VIEW("/servers/:uuid", "One server.", NULL, dc_lua_view_server);
static const tern_view_def vms_view =
    DC_VIEW("/vms",
            "The VMs, by uuid (destroyed ones only with state=destroyed, volumes' storage "
            "instances only with system_role=nfsvolumestorage).",
            vms_params, dc_lua_view_vms);
static const tern_view_def vm_view =
    DC_VIEW("/vms/:uuid", "One VM (a storage instance only with system_role=nfsvolumestorage).",
            vm_params, dc_lua_view_vm);
static const tern_view_def networks_view =
    DC_VIEW("/networks", "The networks, by uuid, with their free and taken addresses.", NULL,
            dc_lua_view_networks);
static const tern_view_def network_ips_view =
    DC_VIEW("/networks/:uuid/ips", "A network's taken and reserved addresses, in order.", NULL,
            dc_lua_view_network_ips);
static const tern_view_def nics_view =
    DC_VIEW("/nics", "The NICs, by MAC.", nics_params, dc_lua_view_nics);
static const tern_view_def packages_view =
    DC_VIEW("/packages", "The packages, by uuid.", NULL, dc_lua_view_packages);
static const tern_view_def images_view =
    DC_VIEW("/images", "The images, by uuid.", NULL, dc_lua_view_images);

static const tern_view_def volumes_view =
    DC_VIEW("/volumes",
            "The shared volumes, by uuid, filtered by name glob, state, size, tag, "
            "predicate.",
            volumes_params, dc_lua_view_volumes);
static const tern_view_def volume_view =
    DC_VIEW("/volumes/:uuid", "One volume (404 VolumeNotFound for another owner's).", volume_params,
            dc_lua_view_volume);
static const tern_view_def volume_references_view =
    DC_VIEW("/volumes/:uuid/references", "The uuids of the VMs that reference a volume.",
            volume_references_params, dc_lua_view_volume_references);
static const tern_view_def volume_sizes_view =
    DC_VIEW("/volumesizes", "The sizes a volume may have (MiB), ascending.", volume_sizes_params,
            dc_lua_view_volume_sizes);
static const tern_view_def reservations_view =
    DC_VIEW("/reservations", "The volume reservations of provisions in flight, by uuid.",
            reservations_params, dc_lua_view_reservations);

static const tern_view_def migrations_view =
    DC_VIEW("/migrations",
            "The migrations, newest first, by owner, state (or active) and VM; never their "
            "secret.",
            migrations_params, dc_lua_view_migrations);
static const tern_view_def migration_view =
    DC_VIEW("/migrations/:uuid", "One migration, by its uuid or its VM's (the latest).",
            migration_params, dc_lua_view_migration);
/* A streaming view (include/tern/task.h): the script gives the history lines and the
 * stream to follow; the engine writes them as newline-delimited JSON to the end event. */
static const tern_view_def migration_watch_view = {
    .size = sizeof(tern_view_def),
    .flags = TERN_VIEW_STREAM,
    .path = "/migrations/:uuid/watch",
    .summary = "A migration's history, then its progress as it happens, to its end "
               "(newline-delimited JSON).",
    .params = migration_params,
    .keys = ns_keys,
    .script = dc_lua_view_migration_watch,
};

const tern_view_def *const dc_views[] = {
    &servers_view,      &server_view,          &vms_view,
    &vm_view,           &networks_view,        &network_ips_view,
    &nics_view,         &packages_view,        &images_view,
    &volumes_view,      &volume_view,          &volume_references_view,
    &volume_sizes_view, &reservations_view,    &migrations_view,
    &migration_view,    &migration_watch_view, NULL,
};
