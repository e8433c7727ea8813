-- dc.migration_switch: switch steps 3 to 5 of DOMAIN 5.3 at once (verified, NICs
-- swapped, inventory flipped): the VM's server, allocation, disk paths (re-rooted on
-- the target's data root), its NICs' cn_uuid and the server indexes move to the
-- target; the addresses' ip: records are never touched, so they stay taken by the VM
-- and no provision can get one at any instant. The VM's old allocation becomes
-- source_allocation (still committed on the source until the migration is successful).
-- ARGV[1]: {migration_uuid}. Idempotent: from switch_step 5 on it answers the same.
-- Answers {vm, nics}.
local a = cjson.decode(ARGV[1])
local m, e = mig_for_step(a.migration_uuid)
if not m then return mig_refuse(e) end
local vm = get_json('vm:' .. m.vm_uuid)
if not vm then
  return refuse(0, 'ResourceNotFound', 'vm ' .. m.vm_uuid .. ' of migration ' .. m.uuid .. ' does not exist')
end
local step = tonumber(m.switch_step) or 0
if step >= 5 then return ok({vm = vm, nics = vm.nics or {}}) end
if m.state ~= 'running' or (m.phase ~= 'switch' and m.phase ~= 'abort') then
  return refuse(0, 'InvalidState', 'migration ' .. m.uuid .. ' is ' .. m.state .. ' in phase ' ..
    m.phase .. ': the swap belongs to a running switch')
end
if m.abort_requested == true then
  return refuse(0, 'InvalidState', 'migration ' .. m.uuid .. ' is being aborted: no swap')
end
if step < 3 then
  return refuse(0, 'InvalidState', 'migration ' .. m.uuid .. ' is at switch step ' .. step ..
    ': the target is swapped in only once verified (step 3)')
end
if vm.server_uuid ~= m.source_server_uuid then
  return refuse(0, 'InvalidState', 'vm ' .. vm.uuid .. ' is on server ' .. tostring(vm.server_uuid) ..
    ', not the migration\'s source ' .. m.source_server_uuid)
end
local now = now_iso_ms()
local src = vm.allocation
m.source_allocation = {server_uuid = src.server_uuid, ram = src.ram, disk = src.disk, rack = src.rack}
local nics = mig_move_vm(vm, m.source_server_uuid, m.target_server_uuid, m.target_allocation)
local reserved = {}
for i, nic in ipairs(nics) do
  reserved[i] = {network_uuid = nic.network_uuid, ip = nic.ip, mac = nic.mac}
end
m.reserved_nics = reserved
m.switch_step = 5
mig_add_entry(m, m.phase, 'switching instance information', now, m.job_uuid)
mig_close_entry(m, 'successful', now)
mig_put(m)
return ok({vm = vm, nics = nics})
