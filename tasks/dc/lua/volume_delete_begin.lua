-- dc.volume_delete_begin: volume-delete's switch to "deleting", with the check that
-- the volume is not in use made again in the same script (DOMAIN 1.4: a provision
-- reserving the volume either comes first, and the delete is refused VolumeInUse, or
-- comes after and finds it deleting). ARGV[1]: {volume_uuid, owner_uuid, force,
-- job_uuid}. A volume already deleting is answered as it is. Answers {volume, vm_uuid,
-- server_uuid}: the storage instance and the server it is on (null: never placed).
local a = cjson.decode(ARGV[1])
local v, e = volume_of_owner(a.volume_uuid, a.owner_uuid)
if not v then return e end

local function answer()
  local vm = uuid_ok(v.vm_uuid) and get_json('vm:' .. v.vm_uuid) or nil
  local server = vm and vm.server_uuid
  if server == nil or (vm and vm.state == 'destroyed') then server = NULL end
  return ok({volume = v, vm_uuid = v.vm_uuid or NULL, server_uuid = server})
end

if v.state == 'deleting' then return answer() end
if v.state ~= 'ready' and v.state ~= 'failed' then
  return volume_not_ready(v, 'it is deleted from ready or failed')
end
local migrating = volume_storage_migration(v)
if migrating then return volume_migrating_refusal(v, migrating) end
local users = volume_users(v)
if #users > 0 and a.force ~= true then return volume_in_use_refusal(v, users) end
local before = v.state
v.state = 'deleting'
v.job_uuid = a.job_uuid
volume_put(v, before)
return answer()
