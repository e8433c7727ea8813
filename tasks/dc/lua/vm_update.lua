-- dc.vm_update_check, dc.vm_update, dc.vm_update_revert: a VM's metadata update
-- (alias, tags, customer_metadata; docs/DATACENTER.md "Updates"). One script for the
-- three so the rules that admit an update are the rules that apply it.
-- ARGV[1]: {"mode": "check"|"apply"|"revert", "vm_uuid", "owner_uuid"?, "job_uuid"?,
--   "update"?: {"alias"?, "tags"?, "add_tags"?, "customer_metadata"?} (shapes checked by
--   the task), "resize"?: [the size or placement fields asked, which vm-update refuses]}.
-- check reads only; apply changes the record and answers {vm_uuid, server_uuid,
-- kept_server_uuid, kept, before, after}; revert puts back what the job's apply changed.
local a = cjson.decode(ARGV[1])
local vm = get_json('vm:' .. a.vm_uuid)
if not vm or vm_system_role(vm) then
  return refuse(404, 'ResourceNotFound', 'vm ' .. a.vm_uuid .. ' does not exist')
end
if a.mode == 'revert' then
  local last = vm.last_update
  if type(last) ~= 'table' or last.job_uuid ~= a.job_uuid or last.reverted == true then
    return ok({vm_uuid = a.vm_uuid, reverted = false})
  end
  local b = last.before
  local kept_alias = false
  if b.alias ~= vm.alias then
    local taken = false
    if type(b.alias) == 'string' then
      for _, u in ipairs(redis.call('ZRANGE', P .. 'vms:alias:' .. b.alias, 0, 99)) do
        local other = u ~= vm.uuid and get_json('vm:' .. u)
        if other and other.owner_uuid == vm.owner_uuid and other.state ~= 'failed' and
          other.state ~= 'destroyed' then
          taken = true
        end
      end
    end
    -- Another VM of the owner took the old alias meanwhile: the new one stays, so no
    -- two live VMs of an owner ever share one.
    if taken then
      kept_alias = true
    else
      if type(vm.alias) == 'string' then index_rem('vms:alias:' .. vm.alias, vm.uuid) end
      if type(b.alias) == 'string' then index_add('vms:alias:' .. b.alias, vm.uuid) end
      vm.alias = b.alias
    end
  end
  vm.tags = b.tags
  vm.customer_metadata = b.customer_metadata
  last.reverted = true
  redis.call('SET', P .. 'vm:' .. vm.uuid, enc(vm))
  return ok({vm_uuid = a.vm_uuid, reverted = true, alias_kept = kept_alias})
end

if a.owner_uuid ~= nil and a.owner_uuid ~= NULL and vm.owner_uuid ~= a.owner_uuid then
  return refuse(404, 'ResourceNotFound', 'vm ' .. a.vm_uuid .. ' does not exist')
end
if vm.state == 'destroyed' then
  return refuse(404, 'ResourceNotFound', 'vm ' .. a.vm_uuid .. ' was destroyed')
end

-- The server of the VM's copy kept hidden by a successful migration not yet finalized
-- (its source): a rollback makes that copy the VM again, so the update is written there
-- too. The VM's own server when there is none (the agent's step then changes nothing).
local function kept_server()
  local mid = redis.call('GET', P .. 'migration_active:' .. vm.uuid)
  local m = mid and get_json('migration:' .. mid)
  if m and m.state == 'successful' and (m.finalized_timestamp == nil or m.finalized_timestamp == NULL) and
    type(m.source_server_uuid) == 'string' then
    return m.source_server_uuid, true
  end
  return vm.server_uuid, false
end

-- A step run again by its job answers what its first run did.
if a.mode == 'apply' and type(vm.last_update) == 'table' and vm.last_update.job_uuid == a.job_uuid then
  local ks, kept = kept_server()
  return ok({vm_uuid = a.vm_uuid, server_uuid = vm.server_uuid, kept_server_uuid = ks, kept = kept,
    before = vm.last_update.before,
    after = {alias = vm.alias or NULL, tags = vm.tags or {}, customer_metadata = vm.customer_metadata or {}}})
end

-- During a migration: metadata moves with the record at the switch and reaches the
-- target's vm.json with the next pass, so it may change while the migration syncs, is
-- paused or scheduled. Size and placement would change what the target was made and
-- reserved for: refused. From the moment a switch, abort or rollback runs, or once a
-- switch stopped the source (switch_step 1), an update is refused too: the final pass
-- may have sent vm.json already, and an update landing after it would be lost on the
-- target (docs/MIGRATION.md "Updates during a migration").
if vm.migrating == true then
  local mid = type(vm.migration_uuid) == 'string' and vm.migration_uuid or 'unknown'
  local function migrating(why)
    return refuse(409, 'VmMigrating', 'vm ' .. a.vm_uuid .. ' is migrating (migration ' .. mid ..
      '): ' .. why)
  end
  if type(a.resize) == 'table' and #a.resize > 0 then
    return migrating('update of ' .. table.concat(a.resize, ', ') .. ' refused')
  end
  local m = get_json('migration:' .. mid)
  if m then
    if (tonumber(m.switch_step) or 0) >= 1 then
      return migrating('update refused once its switch has begun (switch step ' .. m.switch_step .. ')')
    end
    if m.state == 'running' and (m.phase == 'switch' or m.phase == 'abort' or m.phase == 'rollback') then
      return migrating('update refused while its ' .. m.phase .. ' runs')
    end
    if m.abort_requested == true then
      return migrating('update refused while an abort is asked')
    end
  end
end
if type(a.resize) == 'table' and #a.resize > 0 then
  return refuse(422, 'InvalidArgument', 'params.' .. a.resize[1] .. ': vm-update changes alias, ' ..
    'tags and customer_metadata only; a resize is not supported')
end
if vm.state ~= 'running' and vm.state ~= 'stopped' then
  return refuse(409, 'InvalidState', 'vm ' .. a.vm_uuid .. ' is ' .. tostring(vm.state) ..
    ': only a running or stopped vm is updated')
end
if vm.disk_change and vm.disk_change ~= NULL then
  return refuse(409, 'InvalidState', 'vm ' .. a.vm_uuid .. ' has a disk operation in flight')
end

local u = a.update or {}
-- As VMAPI: an alias names one live VM of an owner (a failed one does not count).
if type(u.alias) == 'string' and u.alias ~= vm.alias then
  for _, other_uuid in ipairs(redis.call('ZRANGE', P .. 'vms:alias:' .. u.alias, 0, 99)) do
    local other = other_uuid ~= vm.uuid and get_json('vm:' .. other_uuid)
    if other and other.owner_uuid == vm.owner_uuid and other.state ~= 'failed' and
      other.state ~= 'destroyed' then
      return refuse(409, 'DuplicateAlias', 'alias: ' .. u.alias .. ' already names vm ' ..
        other_uuid .. ' of owner ' .. vm.owner_uuid)
    end
  end
end

local before = {alias = vm.alias or NULL, tags = vm.tags or {}, customer_metadata = vm.customer_metadata or {}}
local after = {alias = before.alias, tags = {}, customer_metadata = before.customer_metadata}
for k, v in pairs(before.tags) do after.tags[k] = v end
if type(u.alias) == 'string' then after.alias = u.alias end
if type(u.tags) == 'table' then after.tags = u.tags end
if type(u.add_tags) == 'table' then
  for k, v in pairs(u.add_tags) do after.tags[k] = v end
end
if type(u.customer_metadata) == 'table' then after.customer_metadata = u.customer_metadata end

if a.mode == 'check' then
  return ok({vm_uuid = a.vm_uuid, server_uuid = vm.server_uuid, state = vm.state})
end

if after.alias ~= before.alias then
  if type(before.alias) == 'string' then index_rem('vms:alias:' .. before.alias, vm.uuid) end
  index_add('vms:alias:' .. after.alias, vm.uuid)
end
vm.alias = after.alias
vm.tags = after.tags
vm.customer_metadata = after.customer_metadata
vm.last_update = {job_uuid = a.job_uuid, before = before, timestamp = ARGV[4]}
redis.call('SET', P .. 'vm:' .. vm.uuid, enc(vm))
local ks, kept = kept_server()
return ok({vm_uuid = a.vm_uuid, server_uuid = vm.server_uuid, kept_server_uuid = ks, kept = kept,
  before = before, after = after})
