-- dc.inventory_load: the description (ARGV[1]: {"servers", "networks", "packages",
-- "images"}, each network with its addresses as integers too) into the records.
-- Keeps what is live: committed capacity, taken addresses, VMs, NICs. Refuses, before
-- writing anything, to drop a server or network that still holds something.
local d = cjson.decode(ARGV[1])

local function set_of(list)
  local s = {}
  for _, x in ipairs(list) do s[x.uuid] = true end
  return s
end

local keep_servers, keep_networks = set_of(d.servers), set_of(d.networks)
local drop_servers, drop_networks = {}, {}
for _, u in ipairs(redis.call('ZRANGE', P .. 'servers', 0, -1)) do
  if not keep_servers[u] then
    local c = redis.call('HMGET', P .. 'server:' .. u, 'instances', 'ram_committed_mib')
    if tonumber(c[1] or 0) > 0 or tonumber(c[2] or 0) > 0 then
      return refuse(0, 'InventoryInUse', 'server ' .. u .. ' is not in the description but holds ' ..
        (c[1] or 0) .. ' instances (' .. (c[2] or 0) .. ' MiB of RAM): delete them first')
    end
    drop_servers[#drop_servers + 1] = u
  end
end
for _, u in ipairs(redis.call('ZRANGE', P .. 'networks', 0, -1)) do
  if not keep_networks[u] then
    local taken = redis.call('HGET', P .. 'network:' .. u, 'taken')
    if tonumber(taken or 0) > 0 then
      return refuse(0, 'InventoryInUse', 'network ' .. u .. ' is not in the description but ' ..
        taken .. ' of its addresses are taken: delete the instances using it first')
    end
    drop_networks[#drop_networks + 1] = u
  end
end

for _, u in ipairs(drop_servers) do
  redis.call('DEL', P .. 'server:' .. u)
  index_rem('servers', u)
end
for _, u in ipairs(drop_networks) do
  for _, ip in ipairs(redis.call('ZRANGE', P .. 'network:' .. u .. ':ips', 0, -1)) do
    redis.call('DEL', P .. 'ip:' .. u .. ':' .. ip)
  end
  redis.call('DEL', P .. 'network:' .. u, P .. 'network:' .. u .. ':free',
    P .. 'network:' .. u .. ':ips')
  index_rem('networks', u)
end

for _, s in ipairs(d.servers) do
  local k = P .. 'server:' .. s.uuid
  redis.call('HSET', k, 'uuid', s.uuid, 'hostname', s.hostname, 'rack', s.rack,
    'ram_mib', s.ram_mib, 'disk_mib', s.disk_mib, 'data_root', s.data_root,
    'platform_version', s.platform_version or '')
  redis.call('HSETNX', k, 'ram_committed_mib', 0)
  redis.call('HSETNX', k, 'disk_committed_mib', 0)
  redis.call('HSETNX', k, 'instances', 0)
  index_add('servers', s.uuid)
end

local free_total = 0
-- The description's order of the networks (score: position), which the default
-- networks of a volume follow (docs/VOLUMES.md "Create").
redis.call('DEL', P .. 'networks:described')
for i, n in ipairs(d.networks) do
  local k = P .. 'network:' .. n.uuid
  redis.call('ZADD', P .. 'networks:described', i, n.uuid)
  redis.call('HSET', k, 'uuid', n.uuid, 'name', n.name, 'subnet', n.subnet,
    'netmask', n.netmask, 'gateway', n.gateway, 'provision_start_ip', n.provision_start_ip,
    'provision_end_ip', n.provision_end_ip, 'vlan_id', n.vlan_id, 'mtu', n.mtu,
    'start_n', n.start_n, 'end_n', n.end_n, 'gateway_n', n.gateway_n,
    'fabric', n.fabric and 'true' or 'false', 'owner_uuids', enc(n.owner_uuids))
  redis.call('HSETNX', k, 'taken', 0)
  index_add('networks', n.uuid)
  -- The gateway is never handed out: a reserved record says why, when in the range.
  local gw = P .. 'ip:' .. n.uuid .. ':' .. n.gateway
  if n.gateway_n >= n.start_n and n.gateway_n <= n.end_n and redis.call('EXISTS', gw) == 0 then
    redis.call('HSET', gw, 'ip', n.gateway, 'network_uuid', n.uuid, 'state', 'reserved',
      'belongs_to_uuid', '', 'belongs_to_type', 'router', 'owner_uuid', '')
    redis.call('ZADD', k .. ':ips', n.gateway_n, n.gateway)
  end
  -- The free pool: the range less every address with a record (taken or reserved).
  local held = {}
  for _, ip in ipairs(redis.call('ZRANGE', k .. ':ips', 0, -1)) do held[ip_int(ip)] = true end
  redis.call('DEL', k .. ':free')
  local batch = {}
  for a = n.start_n, n.end_n do
    if not held[a] and a ~= n.gateway_n then
      batch[#batch + 1] = a
      batch[#batch + 1] = a
      free_total = free_total + 1
      if #batch >= 1000 then
        redis.call('ZADD', k .. ':free', unpack(batch))
        batch = {}
      end
    end
  end
  if #batch > 0 then redis.call('ZADD', k .. ':free', unpack(batch)) end
end

local function load_named(kind, list, name_of)
  for _, u in ipairs(redis.call('ZRANGE', P .. kind .. 's', 0, -1)) do
    redis.call('DEL', P .. kind .. ':' .. u)
  end
  redis.call('DEL', P .. kind .. 's', P .. kind .. '_names')
  for _, x in ipairs(list) do
    redis.call('SET', P .. kind .. ':' .. x.uuid, cjson.encode(x))
    index_add(kind .. 's', x.uuid)
    redis.call('HSET', P .. kind .. '_names', name_of(x), x.uuid)
  end
end
load_named('package', d.packages, function(x) return x.name end)
load_named('image', d.images, function(x) return x.name .. '@' .. x.version end)

return ok({servers = #d.servers, networks = #d.networks, packages = #d.packages,
  images = #d.images, free_ips = free_total, servers_dropped = #drop_servers,
  networks_dropped = #drop_networks})
