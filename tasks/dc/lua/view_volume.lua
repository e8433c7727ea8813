-- GET /volumes/:uuid[?owner_uuid&render]: one volume, with "id" (its uuid) too. With
-- owner_uuid, another owner's volume is 404 VolumeNotFound, as one that does not
-- exist: whether it exists is not told. render=cloudapi: CloudAPI's rendering
-- (volume_rendered).
local v = volume_get(Q.uuid)
if not v or (Q.owner_uuid and v.owner_uuid ~= Q.owner_uuid) then
  return redis.error_reply('REFUSED 404 VolumeNotFound volume ' .. Q.uuid .. ' not found')
end
-- A share whose server's agent has not probed it for 3 watch periods shows unknown.
local shown, fault = volume_rendered(v, Q.render, tonumber(redis.call('TIME')[1]))
if not shown then return redis.error_reply('REFUSED 409 InvalidArgument render: ' .. fault) end
return enc(shown)
