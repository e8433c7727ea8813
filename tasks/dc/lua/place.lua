-- dc.place: picks a server for a VM and commits its RAM and disk there, writing the VM
-- record "provisioning" with the allocation, all at once, so concurrent places never
-- commit more than a server has. ARGV[1] the task's arguments (the check's resolution:
-- "ram", "quota", "reservation" (the disk committed: allocation.disk), "flexible",
-- "flexible_disk_size", "disks" [{boot, size, image?}]), ARGV[2] the time now (ISO
-- 8601), ARGV[3] fresh UUIDs: the disks' ids. The rule (docs/DATACENTER.md
-- "Placement"): among the servers whose free RAM and disk fit, the most free RAM; then
-- the rack holding fewer of the owner's instances; then the lowest uuid. A pinned
-- server is the only candidate. A volume's storage instance (args "role":
-- "nfsvolumestorage", "volume_uuid", "package_name", "disks": []) is placed by the same
-- rule and indexed in vms:role:nfsvolumestorage. Answers {server_uuid, reused, disks}: the disks the
-- agent is to make ({id, boot, image?, size, pci_slot}).
local a = cjson.decode(ARGV[1])
local vk = 'vm:' .. a.vm_uuid
local ram, disk = tonumber(a.ram), tonumber(a.reservation)
local vm = get_json(vk)

-- What the agent makes of a disk of the record.
local function agent_disks(list)
  local out = {}
  for i, d in ipairs(list or {}) do
    out[i] = {id = d.id, boot = d.boot == true, image = d.image, size = d.size,
      pci_slot = d.pci_slot}
  end
  return out
end

if vm and vm.allocation ~= NULL and vm.allocation ~= nil then
  return ok({server_uuid = vm.allocation.server_uuid, reused = true, disks = agent_disks(vm.disks)})
end
if vm and vm.state == 'destroyed' then
  return refuse(409, 'InvalidState', 'vm ' .. a.vm_uuid .. ' was destroyed: its uuid is not reused')
end
-- A volume's storage instance (docs/VOLUMES.md "Create"): no disks of its own (its
-- quota is the volume's size), the fields of RFD 26's storage VMs.
local storage = a.role ~= nil and a.role ~= NULL
if storage then
  if a.role ~= 'nfsvolumestorage' then
    return refuse(0, 'InvalidArgument', 'role: expected "nfsvolumestorage", got ' .. cjson.encode(a.role))
  end
  if type(a.volume_uuid) ~= 'string' or type(a.alias) ~= 'string' or type(a.package_name) ~= 'string' then
    return refuse(0, 'InvalidArgument', 'volume_uuid, alias, package_name: a storage instance ' ..
      'needs all three, got ' .. cjson.encode({a.volume_uuid, a.alias, a.package_name}))
  end
  if type(a.disks) ~= 'table' or #a.disks ~= 0 then
    return refuse(0, 'InvalidArgument', 'disks: a storage instance has none, got ' .. cjson.encode(a.disks))
  end
elseif type(a.disks) ~= 'table' or #a.disks == 0 or #a.disks > 8 then
  return refuse(0, 'InvalidArgument', 'disks: expected the 1 to 8 disks of the check, got ' ..
    cjson.encode(a.disks) .. ' (none only for a storage instance: role "nfsvolumestorage")')
end
local flexible = a.flexible == true
if flexible and type(a.flexible_disk_size) ~= 'number' then
  return refuse(0, 'InvalidArgument', 'flexible_disk_size: a flexible VM needs it, got ' ..
    cjson.encode(a.flexible_disk_size))
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

-- The disks: ids from ARGV[3], slots 0:4:0, 0:4:1, ... in order. A VM placed again
-- after a release keeps the ids its disks had.
local ids = fresh_uuids()
local disks = {}
for i, d in ipairs(a.disks) do
  local old = vm and vm.disks and vm.disks[i]
  local id = (old and type(old.id) == 'string') and old.id or ids[i]
  if not id then
    return refuse(0, 'InvalidArgument', 'disks: no fresh id for disk ' .. (i - 1))
  end
  disks[i] = {id = id, boot = i == 1, size = d.size, snapshot_size = 0,
    pci_slot = '0:4:' .. (i - 1)}
  if i == 1 then disks[i].image = d.image or a.image_uuid end
end

local sk = P .. 'server:' .. chosen
redis.call('HINCRBY', sk, 'ram_committed_mib', ram)
redis.call('HINCRBY', sk, 'disk_committed_mib', disk)
redis.call('HINCRBY', sk, 'instances', 1)
redis.call('HINCRBY', P .. 'owner_racks:' .. a.owner_uuid, rack, 1)

local fresh = vm == nil
if fresh then
  vm = {uuid = a.vm_uuid, alias = a.alias, owner_uuid = a.owner_uuid, brand = a.brand,
    billing_id = a.billing_id, ram = ram, vcpus = a.vcpus or NULL,
    cpu_cap = a.cpu_cap or NULL, image_uuid = a.image_uuid, nics = {},
    create_timestamp = ARGV[2], autoboot = a.autoboot ~= false,
    do_not_inventory = false, customer_metadata = a.customer_metadata or {},
    internal_metadata = {}}
  if storage then
    vm.brand, vm.vcpus, vm.cpu_cap, vm.image_uuid, vm.billing_id = 'joyent-minimal', 1, NULL, NULL, NULL
    vm.package_name, vm.volume_uuid = a.package_name, a.volume_uuid
    vm.internal_metadata = {['sdc:system_role'] = a.role}
    vm.disks = {}
    index_add('vms:role:' .. a.role, a.vm_uuid)
  end
  index_add('vms', a.vm_uuid)
  index_add('vms:owner:' .. a.owner_uuid, a.vm_uuid)
  if a.alias and a.alias ~= NULL and a.alias ~= '' then index_add('vms:alias:' .. a.alias, a.vm_uuid) end
else
  index_rem('vms:state:' .. vm.state, a.vm_uuid)
  if vm.server_uuid and vm.server_uuid ~= NULL then index_rem('vms:server:' .. vm.server_uuid, a.vm_uuid) end
end
vm.state = 'provisioning'
vm.server_uuid = chosen
vm.quota = tonumber(a.quota)
vm.flexible = flexible
vm.flexible_disk_size = flexible and a.flexible_disk_size or nil
vm.disks = disks
vm.free_space = vm_free_space(vm)
vm.allocation = {server_uuid = chosen, ram = ram, disk = disk, rack = rack}
index_add('vms:state:provisioning', a.vm_uuid)
index_add('vms:server:' .. chosen, a.vm_uuid)
redis.call('SET', P .. vk, enc(vm))
return ok({server_uuid = chosen, reused = false, disks = agent_disks(disks)})
