-- dc.disk_reserve: the job's own check and reservation of a disk operation, at once.
-- ARGV[1]: {"action", "vm_uuid", "job_uuid", "params", "usage"?}, usage the agent's
-- fresh measure of the VM's disks (add and resize). The measured snapshot space is
-- recorded first, then every rule of disk_rules.lua runs again (the record may have
-- changed since admission), then the change is written as the VM's disk_change, which
-- vm_free_space counts, so a second operation can never be granted the same space.
-- ARGV[3]: fresh UUIDs, the first the id of an added disk. Run again for the same job,
-- it answers the change already written.
local a = cjson.decode(ARGV[1])
if type(a.job_uuid) ~= 'string' or a.job_uuid == '' then
  return refuse_err(bad_param('job_uuid', 'expected the job\'s uuid'))
end
local r, e = disk_request(a)
if not r then return refuse_err(e) end
local vm
vm, e = disk_vm(r)
if not vm then return refuse_err(e) end
local pending = disk_pending(vm)
if pending and pending.job_uuid == a.job_uuid then
  return ok({disk_change = pending, free_space = vm_free_space(vm)})
end
if pending then
  -- Operations on a VM are serialised by its hold: a change still here belongs to a job
  -- that ended without settling it.
  return refuse(409, 'InvalidState', 'vm ' .. vm.uuid .. ' has a pending ' .. pending.op ..
    ' of job ' .. tostring(pending.job_uuid) .. ', which ended without settling it: run ' ..
    'vm-disk-usage to make the record agree with the files')
end
if given(a.usage) then
  e = usage_valid(a.usage)
  if e then return refuse_err(e) end
  record_snapshot_usage(vm, a.usage)
end
local c
c, e = disk_rules(vm, r)
if not c then
  -- The fresh measure is kept: free_space then shows why the operation was refused.
  if given(a.usage) then disk_save(vm) end
  return refuse_err(e)
end
c.job_uuid = a.job_uuid
if c.op == 'add' then
  c.id = fresh_uuids()[1]
  if not c.id then return refuse(0, 'NoRandomness', 'dc.disk_reserve: no fresh uuid for the new disk') end
end
vm.disk_change = c
disk_save(vm)
return ok({disk_change = c, free_space = vm.free_space})
