-- dc.migration_unswitch: the swap undone (an abort after it, a rollback after a
-- success): the VM, its disk paths, NICs and indexes back on the source, its
-- allocation the source's again (committed again when a success had released it: a
-- rollback, refused when the source no longer has the room), the target's released.
-- The ip: records stay taken by the VM throughout. ARGV[1]: {migration_uuid}.
-- Idempotent: a VM already on the source is left as it is. Answers {vm, nics}.
local a = cjson.decode(ARGV[1])
local m, e = mig_for_step(a.migration_uuid)
if not m then return mig_refuse(e) end
local vm = get_json('vm:' .. m.vm_uuid)
if not vm then
  return refuse(0, 'ResourceNotFound', 'vm ' .. m.vm_uuid .. ' of migration ' .. m.uuid .. ' does not exist')
end
if vm.server_uuid == m.source_server_uuid then
  return ok({vm = vm, nics = vm.nics or {}})
end
if m.state ~= 'running' or (m.phase ~= 'abort' and m.phase ~= 'rollback') then
  return refuse(0, 'InvalidState', 'migration ' .. m.uuid .. ' is ' .. m.state .. ' in phase ' ..
    m.phase .. ': only a running abort or rollback moves the vm back')
end
local sa = m.source_allocation
if type(sa) ~= 'table' then
  return refuse(0, 'InvalidState', 'migration ' .. m.uuid .. ' has no source_allocation: the vm ' ..
    'was never swapped')
end
if sa.released == true then
  local f = mig_server_free(sa.server_uuid)
  if not f or f.ram < sa.ram or f.disk < sa.disk then
    return refuse(0, 'NoAllocatableServersError', 'server ' .. sa.server_uuid .. ' (the source) ' ..
      'has no room left for ' .. sa.ram .. ' MiB of RAM and ' .. sa.disk .. ' MiB of disk: ' ..
      'migration ' .. m.uuid .. ' cannot move back')
  end
end
local now = now_iso_ms()
mig_alloc_commit(sa)
local nics = mig_move_vm(vm, m.target_server_uuid, m.source_server_uuid, sa)
mig_alloc_release(m.target_allocation)
mig_add_entry(m, m.phase, 'switching instance information back to the source', now, m.job_uuid)
mig_close_entry(m, 'successful', now)
mig_put(m)
return ok({vm = vm, nics = nics})
