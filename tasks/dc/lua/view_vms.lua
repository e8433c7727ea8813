-- GET /vms[?owner_uuid&server_uuid&state&alias&system_role]: the VMs by uuid, destroyed
-- ones only with state=destroyed. Volumes' storage instances only with
-- system_role=nfsvolumestorage (then only they): RFD 26 keeps them out of the
-- instance listings. The walk follows the smallest index a filter names; the other
-- filters are checked on each record.
if Q.system_role and Q.system_role ~= STORAGE_ROLE then
  return redis.error_reply('REFUSED 409 InvalidArgument system_role: expected "' .. STORAGE_ROLE ..
    '", got ' .. cjson.encode(Q.system_role))
end
local idx = {}
if Q.owner_uuid then idx[#idx + 1] = 'vms:owner:' .. Q.owner_uuid end
if Q.server_uuid then idx[#idx + 1] = 'vms:server:' .. Q.server_uuid end
if Q.state then idx[#idx + 1] = 'vms:state:' .. Q.state end
if Q.alias then idx[#idx + 1] = 'vms:alias:' .. Q.alias end
if Q.system_role and Q.state ~= 'destroyed' then idx[#idx + 1] = 'vms:role:' .. Q.system_role end
local walk, size = 'vms', nil
for _, k in ipairs(idx) do
  local n = redis.call('ZCARD', P .. k)
  if size == nil or n < size then walk, size = k, n end
end
-- Destroyed VMs are in no index but their state's.
if Q.state == 'destroyed' then walk = 'vms:state:destroyed' end
-- Every VM shows `migrating` (the CLI's flag M): false when no migration holds it.
local function get(u)
  local vm = get_json('vm:' .. u)
  if vm then vm.migrating = vm.migrating == true end
  return vm
end
local function keep(vm)
  return (Q.owner_uuid == nil or vm.owner_uuid == Q.owner_uuid) and
    (Q.server_uuid == nil or vm.server_uuid == Q.server_uuid) and
    (Q.state == nil or vm.state == Q.state) and (Q.alias == nil or vm.alias == Q.alias) and
    vm_system_role(vm) == Q.system_role
end
local answer = page(P .. walk, get, keep)
-- With no filter the count is still known: every listed VM but the storage instances.
if walk == 'vms' and #idx == 0 then
  answer[3] = redis.call('ZCARD', P .. 'vms') - redis.call('ZCARD', P .. 'vms:role:' .. STORAGE_ROLE)
end
return answer
