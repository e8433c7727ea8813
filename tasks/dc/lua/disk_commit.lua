-- dc.disk_commit: a disk operation's change made part of the record once the agent
-- made it. ARGV[1]: {"vm_uuid", "job_uuid", "usage", "snapshots"?, "action"?}, usage
-- the agent's measure after its work. The change is applied to disks (a new disk, a
-- size, a disk gone) or snapshots, then the record is made to agree with the measure
-- (paths, sizes, snapshot space), disk_change is cleared and free_space rewritten.
-- Answers {op, disk, pci_slot, before, after, disks, free_space}: the disk's size
-- before and after. Run again for the same job it answers the same. vm-disk-usage
-- ("action": "usage") has no change of its own: it records the measure, and a change
-- left by a job that ended without settling it is settled by the same measure (the
-- files decide).
local a = cjson.decode(ARGV[1])
local vm = get_json('vm:' .. tostring(a.vm_uuid))
if not vm or vm.state == 'destroyed' then
  return refuse(404, 'ResourceNotFound', 'vm ' .. tostring(a.vm_uuid) .. ' does not exist')
end
if type(vm.disks) ~= 'table' then vm.disks = {} end
if type(vm.snapshots) ~= 'table' then vm.snapshots = {} end
local e = usage_valid(a.usage)
if e then return refuse_err(e) end

local pending = disk_pending(vm)
local last = vm.last_disk_change
local done, clears = nil, pending ~= nil
if pending and pending.job_uuid == a.job_uuid then
  local c = pending
  done = {job_uuid = c.job_uuid, op = c.op, disk = c.id or NULL, pci_slot = c.pci_slot or NULL,
    name = c.name or NULL, before = c.old_size or NULL, after = c.new_size or NULL,
    finished_timestamp = ARGV[2]}
  if c.op == 'add' then
    vm.disks[#vm.disks + 1] = {id = c.id, boot = false, size = c.new_size, snapshot_size = 0,
      pci_slot = c.pci_slot}
  elseif c.op == 'resize' then
    for _, d in ipairs(vm.disks) do
      if d.id == c.id then d.size = c.new_size end
    end
  elseif c.op == 'delete' then
    local kept = {}
    for _, d in ipairs(vm.disks) do
      if d.id ~= c.id then kept[#kept + 1] = d end
    end
    vm.disks = kept
  elseif c.op == 'snapshot_create' then
    vm.snapshots[#vm.snapshots + 1] = {name = c.name, created_timestamp = ARGV[2]}
  elseif c.op == 'snapshot_delete' then
    local kept = {}
    for _, s in ipairs(vm.snapshots) do
      if s.name ~= c.name then kept[#kept + 1] = s end
    end
    vm.snapshots = kept
  end
elseif type(last) == 'table' and last.job_uuid == a.job_uuid then
  done, clears = last, false
elseif pending and a.action ~= 'usage' then
  return refuse(409, 'InvalidState', 'vm ' .. vm.uuid .. ' has a pending ' .. pending.op ..
    ' of job ' .. tostring(pending.job_uuid) .. ', not of job ' .. tostring(a.job_uuid))
else
  -- vm-disk-usage, or a change already settled: the measure only.
  done = {job_uuid = a.job_uuid, op = pending and ('settled ' .. pending.op) or 'usage',
    disk = pending and pending.id or NULL, pci_slot = pending and pending.pci_slot or NULL,
    name = pending and pending.name or NULL, before = NULL, after = NULL,
    finished_timestamp = ARGV[2]}
end
sort_disks(vm)
e = reconcile(vm, a.usage, a.snapshots)
if e then return refuse_err(e) end
if clears then vm.disk_change = NULL end
vm.last_disk_change = done
disk_save(vm)
return ok({op = done.op, disk = done.disk, pci_slot = done.pci_slot, name = done.name,
  before = done.before, after = done.after, disks = vm.disks, free_space = vm.free_space})
