-- dc.place: picks a server for a VM and commits its RAM and disk there, writing the VM
-- record "provisioning" with the allocation, all at once, so concurrent places never
-- commit more than a server has. ARGV[1] the task's arguments, ARGV[2] the time now
-- (ISO 8601). The rule (docs/DATACENTER.md "Placement"): among the servers whose free
-- RAM and disk fit, the most free RAM; then the rack holding fewer of the owner's
-- instances; then the lowest uuid. A pinned server is the only candidate.
local a = cjson.decode(ARGV[1])
local vk = 'vm:' .. a.vm_uuid
local ram, disk = tonumber(a.ram), tonumber(a.quota)
local vm = get_json(vk)

if vm and vm.allocation ~= NULL and vm.allocation ~= nil then
  return ok({server_uuid = vm.allocation.server_uuid, reused = true})
end
if vm and vm.state == 'destroyed' then
  return refuse(409, 'InvalidState', 'vm ' .. a.vm_uuid .. ' was destroyed: its uuid is not reused')
end

local function fits(u)
  local f = redis.call('HMGET', P .. 'server:' .. u, 'ram_mib', 'disk_mib', 'ram_committed_mib',
    'disk_committed_mib', 'rack')
  if not f[1] then return nil end
  local free_ram = tonumber(f[1]) - tonumber(f[3])
  local free_disk = tonumber(f[2]) - tonumber(f[4])
  if free_ram < ram or free_disk < disk then return nil end
  return free_ram, f[5]
end

local chosen, rack
local pinned = a.server_uuid
if pinned == NULL then pinned = nil end
-- A VM placed before and released (a provision's onerror) goes back where it was when
-- that server still has room; a retried job then finds its instance's files there.
if vm and vm.server_uuid and vm.server_uuid ~= NULL and (not pinned or pinned == vm.server_uuid) then
  local fr, rk = fits(vm.server_uuid)
  if fr then chosen, rack = vm.server_uuid, rk end
end
if not chosen and pinned then
  if redis.call('EXISTS', P .. 'server:' .. pinned) == 0 then
    return refuse(404, 'ResourceNotFound', 'server ' .. pinned .. ' does not exist')
  end
  local fr, rk = fits(pinned)
  if not fr then
    return refuse(0, 'NoAllocatableServersError', 'server ' .. pinned .. ' (pinned) has no room for '
      .. ram .. ' MiB of RAM and ' .. disk .. ' MiB of disk')
  end
  chosen, rack = pinned, rk
end
if not chosen then
  local spread = redis.call('HGETALL', P .. 'owner_racks:' .. a.owner_uuid)
  local in_rack = {}
  for i = 1, #spread, 2 do in_rack[spread[i]] = tonumber(spread[i + 1]) end
  local best_ram, best_owned
  for _, u in ipairs(redis.call('ZRANGE', P .. 'servers', 0, -1)) do
    local fr, rk = fits(u)
    if fr then
      local owned = in_rack[rk] or 0
      -- Servers come in uuid order, so the first of equals is the lowest uuid.
      if not chosen or fr > best_ram or (fr == best_ram and owned < best_owned) then
        chosen, rack, best_ram, best_owned = u, rk, fr, owned
      end
    end
  end
  if not chosen then
    return refuse(0, 'NoAllocatableServersError', 'no server has room for ' .. ram ..
      ' MiB of RAM and ' .. disk .. ' MiB of disk (vm ' .. a.vm_uuid .. ')')
  end
end

local sk = P .. 'server:' .. chosen
redis.call('HINCRBY', sk, 'ram_committed_mib', ram)
redis.call('HINCRBY', sk, 'disk_committed_mib', disk)
redis.call('HINCRBY', sk, 'instances', 1)
redis.call('HINCRBY', P .. 'owner_racks:' .. a.owner_uuid, rack, 1)

local fresh = vm == nil
if fresh then
  vm = {uuid = a.vm_uuid, alias = a.alias, owner_uuid = a.owner_uuid, brand = a.brand,
    billing_id = a.billing_id, ram = ram, quota = disk, vcpus = a.vcpus or NULL,
    cpu_cap = a.cpu_cap or NULL, image_uuid = a.image_uuid, disks = a.disks or {}, nics = {},
    create_timestamp = ARGV[2], autoboot = a.autoboot ~= false,
    do_not_inventory = false, customer_metadata = a.customer_metadata or {},
    internal_metadata = {}}
  index_add('vms', a.vm_uuid)
  index_add('vms:owner:' .. a.owner_uuid, a.vm_uuid)
  if a.alias and a.alias ~= NULL and a.alias ~= '' then index_add('vms:alias:' .. a.alias, a.vm_uuid) end
else
  index_rem('vms:state:' .. vm.state, a.vm_uuid)
  if vm.server_uuid and vm.server_uuid ~= NULL then index_rem('vms:server:' .. vm.server_uuid, a.vm_uuid) end
end
vm.state = 'provisioning'
vm.server_uuid = chosen
vm.allocation = {server_uuid = chosen, ram = ram, disk = disk, rack = rack}
index_add('vms:state:provisioning', a.vm_uuid)
index_add('vms:server:' .. chosen, a.vm_uuid)
redis.call('SET', P .. vk, enc(vm))
return ok({server_uuid = chosen, reused = false})
