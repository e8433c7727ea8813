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

/* GET /migrations/:uuid/watch (a streaming view, include/tern/task.h): the migration's
 * history, then its event stream to the end event. `uuid` is a migration's uuid or a
 * VM's with a migration (migration_active:<vm>); ?owner_uuid= hides another owner's
 * migration (404 MigrationNotFound). A migration that is not running any more gets its
 * end line at once: its end event is already behind the stream's last id. The script
 * is written here until the migration views' own Lua file replaces it. */
static const char *const migration_watch_params[] = {"owner_uuid", NULL};
static const char dc_lua_view_migration_watch[] =
    "local ns = KEYS[1]\n"
    "local p = cjson.decode(ARGV[4])\n"
    "local id = p.uuid\n"
    "local text = redis.call('GET', ns .. 'migration:' .. id)\n"
    "if not text then\n"
    "  local m = redis.call('GET', ns .. 'migration_active:' .. id)\n"
    "  if m then id = m; text = redis.call('GET', ns .. 'migration:' .. id) end\n"
    "end\n"
    "local rec = text and cjson.decode(text)\n"
    "if not rec or (p.owner_uuid and rec.account_uuid ~= p.owner_uuid) then\n"
    "  return redis.error_reply('REFUSED 404 MigrationNotFound no migration ' .. p.uuid)\n"
    "end\n"
    "local lines = {}\n"
    "for _, h in ipairs(type(rec.progress_history) == 'table' and rec.progress_history or {}) do\n"
    "  lines[#lines + 1] = cjson.encode(h)\n"
    "end\n"
    "local key = 'migration:' .. id .. ':events'\n"
    "local last = redis.call('XREVRANGE', ns .. key, '+', '-', 'COUNT', 1)\n"
    "local follow = cjson.encode(key)\n"
    "if rec.state ~= 'running' then\n"
    "  lines[#lines + 1] = cjson.encode({type = 'end', phase = rec.phase, state = rec.state,\n"
    "                                    message = rec.error})\n"
    "  follow = 'null'\n"
    "end\n"
    "return '{\"lines\":[' .. table.concat(lines, ',') .. '],\"follow\":' .. follow ..\n"
    "  ',\"after\":\"' .. (last[1] and last[1][1] or '0') .. '\"}'\n";
static const tern_view_def migration_watch_view = {
    .size = sizeof(tern_view_def),
    .flags = TERN_VIEW_STREAM,
    .path = "/migrations/:uuid/watch",
    .summary = "A migration's history, then its progress as it happens, to its end "
               "(newline-delimited JSON).",
    .params = migration_watch_params,
    .keys = ns_keys,
    .script = dc_lua_view_migration_watch,
};

const tern_view_def *const dc_views[] = {
    &servers_view,
    &server_view,
    &vms_view,
    &vm_view,
    &networks_view,
    &network_ips_view,
    &nics_view,
    &packages_view,
    &images_view,
    &volumes_view,
    &volume_view,
    &volume_references_view,
    &volume_sizes_view,
    &reservations_view,
    &migration_watch_view,
    NULL,
};
