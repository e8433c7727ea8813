-- GET /volumes/:uuid[?owner_uuid]: one volume, with "id" (its uuid) too. With
-- owner_uuid, another owner's volume is 404 VolumeNotFound, as one that does not
-- exist: whether it exists is not told.
local v = volume_get(Q.uuid)
if not v or (Q.owner_uuid and v.owner_uuid ~= Q.owner_uuid) then
  return redis.error_reply('REFUSED 404 VolumeNotFound volume ' .. Q.uuid .. ' not found')
end
v.id = v.uuid
-- A share whose server's agent has not probed it for 3 watch periods shows unknown.
v.share_state = share_state_shown(v, tonumber(redis.call('TIME')[1]))
return enc(v)
