-- dc.volumes_wait: whether the volumes a provision mounts are all ready. Reads only.
-- ARGV[1]: {"vm_uuid", "expired"?, "wait_s"?}. Answers {"volumes": [{name, volume_uuid,
-- mountpoint, mode, type, nfsvolume, export_path}]} when every volume of vm.volumes is
-- ready, or
-- {"pending": [{name, volume_uuid, state}]} while some are creating or rolling back
-- (the task asks to be run again). A volume failed, deleting or gone can never become
-- ready for this VM: VolumeNotReady naming it and its state, at once, so that the
-- provision fails instead of waiting out its timeout; and so is a volume still not
-- ready when the task says its wait expired (after wait_s seconds).
local a = cjson.decode(ARGV[1])
local vm = get_json('vm:' .. a.vm_uuid)
if not vm then
  return refuse(404, 'ResourceNotFound', 'vm ' .. a.vm_uuid .. ' does not exist')
end
local out, pending = {}, {}
for i, m in ipairs(vm.volumes or {}) do
  local v = volume_get(m.volume_uuid)
  if not v then
    return refuse(409, 'VolumeNotReady', 'volume ' .. m.name .. ' (' .. tostring(m.volume_uuid) ..
      ') is gone: it was deleted while vm ' .. a.vm_uuid .. ' waited for it')
  end
  if v.state == 'failed' or v.state == 'deleting' then
    return refuse(409, 'VolumeNotReady', 'volume ' .. m.name .. ' (' .. v.uuid .. ') is ' ..
      v.state .. ': vm ' .. a.vm_uuid .. ' cannot mount it')
  end
  if v.state == 'ready' then
    out[i] = {name = m.name, volume_uuid = v.uuid, mountpoint = m.mountpoint, mode = m.mode,
      type = m.type, nfsvolume = v.filesystem_path, export_path = v.export_path}
  else
    pending[#pending + 1] = {name = m.name, volume_uuid = v.uuid, state = v.state}
  end
end
if #pending > 0 and a.expired == true then
  local what = {}
  for i, p in ipairs(pending) do what[i] = p.name .. ' (' .. p.volume_uuid .. ') is ' .. p.state end
  return refuse(409, 'VolumeNotReady', 'after ' .. tostring(a.wait_s) .. ' s, volumes are ' ..
    'still not ready: ' .. table.concat(what, ', '))
end
if #pending > 0 then return ok({pending = pending}) end
return ok({volumes = out})
