-- dc.volume_update: volume-update's change of name and tags, the rules of the check
-- made again at once. ARGV[1]: {volume_uuid, owner_uuid, name?, tags?}. A rename is
-- refused VolumeInUse while the volume has references or reservations (their VMs
-- mount it by name), VolumeAlreadyExists when the owner has a volume of the new name;
-- the name claim moves in the same script (the old name is free when it answers).
-- Tags are replaced whole. Answers the volume.
local a = cjson.decode(ARGV[1])
local v, e = volume_of_owner(a.volume_uuid, a.owner_uuid)
if not v then return e end
if v.state ~= 'ready' and v.state ~= 'failed' then
  return volume_not_ready(v, 'it is updated when ready or failed')
end
local name = a.name
if name == NULL then name = nil end
if name ~= nil then
  local fault = volume_name_fault(name)
  if fault then return refuse(0, 'InvalidArgument', 'name: ' .. fault) end
end
local tags = a.tags
if tags == NULL then tags = nil end
if tags ~= nil then
  local tf = volume_tags_fault(tags)
  if tf then return refuse(0, 'InvalidArgument', 'tags: ' .. tf) end
end
if name ~= nil and name ~= v.name then
  local users = volume_users(v)
  if #users > 0 then return volume_in_use_refusal(v, users) end
  local names = P .. 'volume_names:' .. v.owner_uuid
  if redis.call('HSETNX', names, name, v.uuid) == 0 then
    return refuse(0, 'VolumeAlreadyExists', 'Volume with name ' .. name .. ' already exists (volume ' ..
      redis.call('HGET', names, name) .. ')')
  end
  if redis.call('HGET', names, v.name) == v.uuid then redis.call('HDEL', names, v.name) end
  v.name = name
  if v.share_endpoint ~= nil and v.share_endpoint ~= NULL and v.filesystem_path ~= NULL then
    v.share_endpoint = 'nfs://' .. string.match(v.filesystem_path, '^([^:]+)') .. '/' .. name
  end
end
if tags ~= nil then v.tags = tags end
if name ~= nil or tags ~= nil then volume_put(v, v.state) end
return ok(v)
