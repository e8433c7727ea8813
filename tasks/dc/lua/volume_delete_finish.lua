-- dc.volume_delete_finish: the end of volume-delete, after the agent destroyed the
-- storage instance. ARGV[1]: {volume_uuid, owner_uuid}. At once: the storage
-- instance's allocation, NICs and addresses given back and the instance marked
-- destroyed (vm_release), the reservations still held on the volume (a forced delete)
-- deleted, and the volume's record, name claim and indexes removed: a deleted volume is
-- gone (GET answers 404). A volume already gone is answered {removed: false}.
local a = cjson.decode(ARGV[1])
local v = volume_get(a.volume_uuid)
if not v then return ok({removed = false}) end
if v.owner_uuid ~= a.owner_uuid then
  return refuse(0, 'VolumeNotFound', 'volume ' .. a.volume_uuid .. ' not found')
end
if v.state ~= 'deleting' then return volume_not_ready(v, 'only a deleting volume is removed') end
local released = false
if uuid_ok(v.vm_uuid) then
  local vm
  vm, released = vm_release(v.vm_uuid, 'destroyed')
end
for _, ru in ipairs(redis.call('ZRANGE', P .. 'volume_reservations:' .. v.uuid, 0, -1)) do
  reservation_del(ru)
end
volume_remove(v)
return ok({removed = true, vm_uuid = v.vm_uuid, released = released})
