-- dc.vm_check: the admission check of vm-start, vm-stop and vm-delete. Reads only.
-- ARGV[1]: {"vm_uuid", "action": "start"|"stop"|"delete", "target"}.
local a = cjson.decode(ARGV[1])
local UUID = '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$'
if type(a.vm_uuid) ~= 'string' or not string.match(a.vm_uuid, UUID) then
  return refuse(422, 'InvalidArgument', 'vm_uuid: expected a UUID, got ' .. cjson.encode(a.vm_uuid))
end
local allowed = {start = {stopped = true}, stop = {running = true},
  delete = {running = true, stopped = true, failed = true}}
if not allowed[a.action] then
  return refuse(422, 'InvalidArgument', 'action: expected start, stop or delete, got ' .. cjson.encode(a.action))
end
if a.target ~= '/' .. a.action .. '-' .. a.vm_uuid then
  return refuse(422, 'InvalidArgument', 'target: a ' .. a.action .. ' of vm ' .. a.vm_uuid ..
    ' has the target /' .. a.action .. '-' .. a.vm_uuid .. ', not ' .. cjson.encode(a.target))
end
local vm = get_json('vm:' .. a.vm_uuid)
-- A volume's storage instance is not an instance of the instance endpoints: it is
-- answered as if absent (RFD 26; docs/VOLUMES.md "Storage instances").
if not vm or vm_system_role(vm) then
  return refuse(404, 'ResourceNotFound', 'vm ' .. a.vm_uuid .. ' does not exist')
end
if vm.state == 'destroyed' then
  return refuse(404, 'ResourceNotFound', 'vm ' .. a.vm_uuid .. ' was destroyed')
end
-- A migration holds the VM until it ends successful or aborted (docs/MIGRATION.md).
if vm.migrating == true then
  return refuse(409, 'VmMigrating', 'vm ' .. a.vm_uuid .. ' is migrating (migration ' ..
    (type(vm.migration_uuid) == 'string' and vm.migration_uuid or 'unknown') .. '): ' .. a.action .. ' refused')
end
if not allowed[a.action][vm.state] then
  return refuse(409, 'InvalidState', 'vm ' .. a.vm_uuid .. ' is ' .. vm.state .. ': cannot ' .. a.action .. ' it')
end
return ok({server_uuid = vm.server_uuid, state = vm.state})
