-- GET /volumes/:uuid/references[?owner_uuid]: the uuids of the VMs that reference the
-- volume (its refs; reservations are GET /reservations?volume_uuid=).
local v = volume_get(Q.uuid)
if not v or (Q.owner_uuid and v.owner_uuid ~= Q.owner_uuid) then
  return redis.error_reply('REFUSED 404 VolumeNotFound volume ' .. Q.uuid .. ' not found')
end
if type(v.refs) ~= 'table' or #v.refs == 0 then return '[]' end
return cjson.encode(v.refs)
