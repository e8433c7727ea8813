-- dc.disk_check: the admission check of disk-add, disk-resize, disk-delete,
-- vm-snapshot-create, vm-snapshot-delete and vm-disk-usage. Reads only. ARGV[1]:
-- {"action", "vm_uuid", "target", "params"}. Every rule of disk_rules.lua against the
-- record as it is (snapshot space as last measured: the job's reserve step measures it
-- again), so a request that cannot succeed is refused at POST /jobs with its code.
local a = cjson.decode(ARGV[1])
local r, e = disk_request(a)
if not r then return refuse_err(e) end
if a.target ~= '/' .. r.workflow .. '-' .. r.vm_uuid then
  return refuse_err(bad_param('target', 'a ' .. r.workflow .. ' of vm ' .. r.vm_uuid ..
    ' has the target /' .. r.workflow .. '-' .. r.vm_uuid .. ', not ' .. cjson.encode(a.target)))
end
local vm
vm, e = disk_vm(r)
if not vm then return refuse_err(e) end
local c
c, e = disk_rules(vm, r)
if not c then return refuse_err(e) end
return ok({server_uuid = vm.server_uuid, state = vm.state, disk = c.id, old_size = c.old_size,
  new_size = c.new_size, pci_slot = c.pci_slot, free_space = vm_free_space(vm)})
