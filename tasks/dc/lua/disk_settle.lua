-- dc.disk_settle: what a failed disk operation leaves, recorded. ARGV[1]: {"vm_uuid",
-- "job_uuid", "usage", "snapshots"?}, usage the agent's measure after its undo. The
-- data plane decides: the record is made to agree with the files (sizes, disks present,
-- snapshot space, snapshots present) and the job's disk_change is cleared. With no
-- usage (the agent could not be reached or measure) nothing is known of the files: the
-- change stays, so its space is still counted and the next disk operation on the VM is
-- refused until vm-disk-usage measures and settles it. Idempotent.
local a = cjson.decode(ARGV[1])
local vm = get_json('vm:' .. tostring(a.vm_uuid))
if not vm or vm.state == 'destroyed' then return ok({settled = false}) end
if type(vm.disks) ~= 'table' then vm.disks = {} end
if type(vm.snapshots) ~= 'table' then vm.snapshots = {} end
local pending = disk_pending(vm)
local mine = pending and pending.job_uuid == a.job_uuid
if not given(a.usage) then
  return ok({settled = false, disk_change = mine and pending or NULL, free_space = vm.free_space or NULL})
end
local e = reconcile(vm, a.usage, a.snapshots)
if e then return refuse_err(e) end
if mine then vm.disk_change = NULL end
disk_save(vm)
return ok({settled = true, cleared = mine and pending or NULL, disks = vm.disks,
  free_space = vm.free_space})
