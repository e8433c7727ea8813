-- dc.net_reconcile: makes the NICs of one server agree with the instances its agent
-- found (RFD 58's net-agent at start and on its periodic scan; docs/RECONCILE.md).
-- ARGV[1]: {"server_uuid", "scan": dc.instances_scan's result}. In this order, at once:
--   1. backfill: a NIC of an instance present here, or of a VM whose record is on this
--      server (B), that is not in this server's index (A) gets cn_uuid = this server
--      and moves into its index;
--   2. reap: a zone NIC of A (B included now) whose VM is not present and has no
--      record, or a failed or destroyed one, is freed with its address (nic_free);
--   3. vanished: a running or stopped VM of this server that is not present is
--      released whole (vm_release) and marked destroyed;
--   4. states: a NIC in provisioning of a running instance, and a server or other NIC
--      of this server in provisioning, become running.
-- Left alone: server and other NICs (but for their state), VMs migrating or not to
-- be inventoried, VMs provisioning, VMs marked after the scan, other servers' NICs.
-- Only this server's indexes (nics:cn:<server>, vms:server:<server>) and the scan are
-- read: a NIC of another server is never touched, whatever any other listing says.
-- Answers {backfilled, reaped, state_fixed: [mac], vanished: [vm uuid]}, each sorted.
local a = cjson.decode(ARGV[1])
local server = a.server_uuid
if type(server) ~= 'string' or redis.call('EXISTS', P .. 'server:' .. server) == 0 then
  return refuse(404, 'ResourceNotFound', 'server_uuid: server ' .. tostring(server) ..
    ' is not a server of the inventory')
end
local scan = a.scan
if type(scan) ~= 'table' or type(scan.instances) ~= 'table' then
  return refuse(0, 'InvalidArgument', 'scan: expected dc.instances_scan\'s result {server_uuid, ' ..
    'instances, scanned_at}')
end
if scan.server_uuid ~= server then
  return refuse(0, 'InvalidArgument', 'scan.server_uuid: ' .. tostring(scan.server_uuid) ..
    ' is not ' .. server .. ': a scan of another server reconciles nothing here')
end
if type(scan.scanned_at) ~= 'string' then
  return refuse(0, 'InvalidArgument', 'scan.scanned_at: expected the time of the scan (ISO 8601)')
end

-- ISO 8601 times compared as strings: milliseconds always written, and a time given
-- to the second taken at the end of its second (so a change in the second of the scan
-- counts as after it: the VM is left for the next run).
local function iso_key(s)
  if type(s) ~= 'string' then return nil end
  local base, ms = string.match(s, '^(%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d)%.?(%d*)Z$')
  if not base then return nil end
  if ms == '' then ms = '999' end
  return base .. '.' .. string.sub(ms .. '000', 1, 3)
end
local scanned_at = iso_key(scan.scanned_at)
if not scanned_at then
  return refuse(0, 'InvalidArgument', 'scan.scanned_at: ' .. scan.scanned_at ..
    ' is not an ISO 8601 UTC time')
end

-- The instances present here, and the VMs the reconcile leaves alone: an instance the
-- agents must not inventory (a migration's target before its switch), a VM whose
-- record says it is migrating (RFD 58: do_not_inventory alone comes too late).
local present, untouched = {}, {}
for i, inst in ipairs(scan.instances) do
  if type(inst) ~= 'table' or type(inst.uuid) ~= 'string' then
    return refuse(0, 'InvalidArgument', 'scan.instances[' .. (i - 1) .. '].uuid: expected a uuid')
  end
  present[inst.uuid] = inst
  if inst.do_not_inventory == true then untouched[inst.uuid] = true end
end

local vms = {}
local function vm_of(uuid)
  if type(uuid) ~= 'string' then return nil end
  if vms[uuid] == nil then vms[uuid] = get_json('vm:' .. uuid) or false end
  return vms[uuid] or nil
end
local function left_alone(uuid)
  if untouched[uuid] then return true end
  local vm = vm_of(uuid)
  return vm ~= nil and vm.migrating == true
end

-- A NIC record and the VM's copy of it (vm.nics) change together: dc.vm_set_state
-- writes the copies back over the records.
local function nic_put(nic)
  redis.call('SET', P .. 'nic:' .. nic.mac, enc(nic))
  local vm = vm_of(nic.belongs_to_uuid)
  if not vm then return end
  for _, c in ipairs(vm.nics or {}) do
    if c.mac == nic.mac then
      c.cn_uuid, c.state = nic.cn_uuid, nic.state
      redis.call('SET', P .. 'vm:' .. nic.belongs_to_uuid, enc(vm))
    end
  end
end

local backfilled, reaped, state_fixed, vanished = {}, {}, {}, {}
local cn_key = 'nics:cn:' .. server
local in_a = {}
for _, mac in ipairs(redis.call('ZRANGE', P .. cn_key, 0, -1)) do in_a[mac] = true end

-- 1. Backfill (before the reap, so a NIC that had no cn_uuid is reaped in this run if
-- its VM is gone). B: the NICs of the instances present here, and those of the VMs
-- whose record puts them on this server (present or not: a NIC of a VM whose
-- directory vanished is found this way, backfilled, then reaped below).
local function backfill(vm_uuid, mac)
  local nic = type(mac) == 'string' and not in_a[mac] and get_json('nic:' .. mac)
  if not nic or nic.belongs_to_uuid ~= vm_uuid then return end
  if type(nic.cn_uuid) == 'string' then index_rem('nics:cn:' .. nic.cn_uuid, mac) end
  nic.cn_uuid = server
  index_add(cn_key, mac)
  nic_put(nic)
  in_a[mac] = true
  backfilled[#backfilled + 1] = mac
end
for _, inst in ipairs(scan.instances) do
  local vm = vm_of(inst.uuid)
  -- A directory here of a VM whose record is on another server is not this server's.
  if not left_alone(inst.uuid) and type(inst.nics) == 'table' and
    (not vm or vm.server_uuid == server) then
    for _, mac in ipairs(inst.nics) do backfill(inst.uuid, mac) end
  end
end
local server_vms = redis.call('ZRANGE', P .. 'vms:server:' .. server, 0, -1)
for _, uuid in ipairs(server_vms) do
  local vm = vm_of(uuid)
  if vm and vm.server_uuid == server and not left_alone(uuid) then
    for _, c in ipairs(vm.nics or {}) do backfill(uuid, c.mac) end
  end
end

-- A VM of this server is gone when its directory is: running or stopped in its record
-- since before the scan (a provision's directory comes before its running state), not
-- migrating, not present.
local function gone(uuid, vm)
  if vm.server_uuid ~= server or (vm.state ~= 'running' and vm.state ~= 'stopped') then
    return false
  end
  if vm.migrating == true or present[uuid] then return false end
  local changed = iso_key(vm.state_changed_at)
  return changed == nil or changed < scanned_at
end

-- 2. Reap, and 4. the states, over A (sorted: the answer reads the same each run).
local macs = {}
for mac in pairs(in_a) do macs[#macs + 1] = mac end
table.sort(macs)
for _, mac in ipairs(macs) do
  local nic = get_json('nic:' .. mac)
  if not nic then
    index_rem(cn_key, mac) -- an index entry left without its record: nothing to free
  elseif nic.cn_uuid ~= nil and nic.cn_uuid ~= NULL and nic.cn_uuid ~= server then
    -- Indexed here, recorded on another server: that server's NIC, not this one's.
  elseif nic.belongs_to_type == 'server' or nic.belongs_to_type == 'other' then
    if nic.state == 'provisioning' then
      nic.state = 'running'
      nic_put(nic)
      state_fixed[#state_fixed + 1] = mac
    end
  elseif nic.belongs_to_type == 'zone' and not left_alone(nic.belongs_to_uuid) then
    local owner = nic.belongs_to_uuid
    local inst = present[owner]
    local vm = vm_of(owner)
    if inst then
      if inst.state == 'running' and nic.state == 'provisioning' then
        nic.state = 'running'
        nic_put(nic)
        state_fixed[#state_fixed + 1] = mac
      end
    elseif not vm or vm.state == 'failed' or vm.state == 'destroyed' then
      -- A leak: its VM never was here, or was given up without freeing it.
      nic_free(nic, owner)
      index_rem(cn_key, mac)
      if vm then
        local kept = {}
        for _, c in ipairs(vm.nics or {}) do
          if c.mac ~= mac then kept[#kept + 1] = c end
        end
        vm.nics = kept
        redis.call('SET', P .. 'vm:' .. owner, enc(vm))
      end
      reaped[#reaped + 1] = mac
    end
    -- Else its VM is provisioning (its directory is still to come), lives on another
    -- server, or vanished from this one (released whole below).
  end
end

-- 3. The VMs of this server that vanished.
local seen_reaped = {}
for _, mac in ipairs(reaped) do seen_reaped[mac] = true end
for _, uuid in ipairs(server_vms) do
  local vm = vm_of(uuid)
  if vm and not untouched[uuid] and gone(uuid, vm) then
    for _, c in ipairs(vm.nics or {}) do
      if not seen_reaped[c.mac] then
        seen_reaped[c.mac] = true
        reaped[#reaped + 1] = c.mac
      end
      index_rem(cn_key, c.mac)
    end
    vm_release(uuid, 'destroyed')
    volume_storage_destroyed(vm) -- a volume's storage instance: its volume fails
    vms[uuid] = nil
    vanished[#vanished + 1] = uuid
  end
end

-- Written by hand: cjson would write an empty list as {}.
local function list(t)
  table.sort(t)
  if #t == 0 then return '[]' end
  return cjson.encode(t)
end
return '{"ok":{"backfilled":' .. list(backfilled) .. ',"reaped":' .. list(reaped) ..
  ',"state_fixed":' .. list(state_fixed) .. ',"vanished":' .. list(vanished) .. '}}'
