-- dc.vm_set_state: the VM's state and its NICs' at once, and its disks as the agent
-- made them when given. ARGV[1]: {"vm_uuid", "state": "running"|"stopped", "disks"?,
-- "volumes"?}. volumes (a provision's mounts as dc.volumes_wait answers them) writes
-- internal_metadata["sdc:volumes"], the JSON text RFD 26 gives.
-- The agent's disks are matched to the record's by pci_slot: each record disk takes
-- its path, and keeps what only the control plane knows (id, image, snapshot_size).
-- A disk of one side missing on the other, or a size that differs, is refused naming
-- both: the record never says other than what the files are.
local a = cjson.decode(ARGV[1])
local vk = 'vm:' .. a.vm_uuid
local vm = get_json(vk)
if not vm then
  return refuse(404, 'ResourceNotFound', 'vm ' .. a.vm_uuid .. ' does not exist')
end
if vm.state == 'destroyed' or vm.state == 'failed' then
  return refuse(409, 'InvalidState', 'vm ' .. a.vm_uuid .. ' is ' .. vm.state ..
    ': it cannot become ' .. a.state)
end
local disks = a.disks
if disks == NULL then disks = nil end
if disks ~= nil then
  local function mismatch(msg)
    return refuse(0, 'InvalidArgument', 'disks: vm ' .. a.vm_uuid .. ' ' .. msg)
  end
  if type(disks) ~= 'table' then return mismatch('expected the agent\'s list of disks') end
  local made = {}
  for i, d in ipairs(disks) do
    if type(d) ~= 'table' or type(d.pci_slot) ~= 'string' or type(d.path) ~= 'string' then
      return mismatch('disk ' .. (i - 1) .. ' of the agent has no pci_slot or path: ' .. cjson.encode(d))
    end
    if made[d.pci_slot] then return mismatch('the agent made two disks at ' .. d.pci_slot) end
    made[d.pci_slot] = d
  end
  local have = {}
  for _, r in ipairs(vm.disks or {}) do
    if r.pci_slot == nil then
      return mismatch('has a disk without pci_slot in its record: ' .. cjson.encode(r))
    end
    local d = made[r.pci_slot]
    if not d then
      return mismatch('disk ' .. r.pci_slot .. ' (' .. tostring(r.id) .. ', ' .. r.size ..
        ' MiB) of the record was not made by the agent')
    end
    if tonumber(d.size) ~= r.size then
      return mismatch('disk ' .. r.pci_slot .. ' (' .. tostring(r.id) .. ') is ' .. r.size ..
        ' MiB in the record and ' .. tostring(d.size) .. ' MiB on the agent (' .. d.path .. ')')
    end
    have[r.pci_slot] = true
  end
  for slot, d in pairs(made) do
    if not have[slot] then
      return mismatch('the agent made disk ' .. slot .. ' (' .. d.path .. ', ' .. tostring(d.size) ..
        ' MiB), which the record does not have')
    end
  end
  for _, r in ipairs(vm.disks or {}) do r.path = made[r.pci_slot].path end
  if vm.disks then table.sort(vm.disks, function(x, y) return x.pci_slot < y.pci_slot end) end
end
local mounts = a.volumes
if mounts ~= nil and mounts ~= NULL then
  if type(mounts) ~= 'table' then
    return refuse(0, 'InvalidArgument', 'volumes: expected the list dc.volumes_wait answers')
  end
  if #mounts > 0 then
    for i, m in ipairs(mounts) do
      if type(m) ~= 'table' or type(m.name) ~= 'string' or type(m.mountpoint) ~= 'string' then
        return refuse(0, 'InvalidArgument', 'volumes[' .. (i - 1) .. ']: expected {name, ' ..
          'mountpoint, mode, type, nfsvolume}, got ' .. cjson.encode(m))
      end
    end
    if type(vm.internal_metadata) ~= 'table' then vm.internal_metadata = {} end
    vm.internal_metadata['sdc:volumes'] = sdc_volumes_text(mounts)
  end
end
if vm.state ~= a.state then
  index_rem('vms:state:' .. vm.state, a.vm_uuid)
  index_add('vms:state:' .. a.state, a.vm_uuid)
  vm.state = a.state
  -- The NIC reconcile leaves a VM that became running or stopped after its scan was
  -- taken (its directory may have come after the scan): docs/RECONCILE.md.
  -- To the millisecond: a reconcile whose scan was taken in the same second must tell
  -- a VM marked before it from one marked after (RFD 58's reap).
  vm.state_changed_at = now_iso_ms()
end
for _, nic in ipairs(vm.nics or {}) do
  nic.state = a.state
  redis.call('SET', P .. 'nic:' .. nic.mac, enc(nic))
end
redis.call('SET', P .. vk, enc(vm))
return ok({state = vm.state})
