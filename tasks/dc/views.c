/*
 * views.c -- the dc plugin's read views: the inventory as GET routes, each a Lua
 * script of tasks/dc/lua/ (view_*.lua) paging an index of the plugin's namespace as
 * GET /jobs pages (docs/DATACENTER.md "Views").
 */
#include "dc_tasks.h"
#include "lua_scripts.h"

/* Every script completes record keys from the namespace itself. */
static const char *const ns_keys[] = {"", NULL};
static const char *const vms_params[] = {"owner_uuid", "server_uuid", "state", "alias", NULL};
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
    DC_VIEW("/vms", "The VMs, by uuid (destroyed ones only with state=destroyed).", vms_params,
            dc_lua_view_vms);
static const tern_view_def vm_view = DC_VIEW("/vms/:uuid", "One VM.", NULL, dc_lua_view_vm);
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

const tern_view_def *const dc_views[] = {
    &servers_view,     &server_view, &vms_view,      &vm_view,     &networks_view,
    &network_ips_view, &nics_view,   &packages_view, &images_view, NULL,
};
