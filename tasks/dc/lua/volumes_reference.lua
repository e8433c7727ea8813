-- dc.volumes_reference: a provisioned VM's reservations become references, at once
-- (RFD 26 "Volume reservations": a reference of the same VM to the same volume
-- replaces the reservation). ARGV[1]: {"vm_uuid", "job_uuid"}. Each reservation of
-- this job for this VM: the VM joins the volume's refs (a set) and the reservation is
-- deleted. A VM that is not active (failed, destroyed, gone) takes no reference: its
-- reservations are only deleted. Run again, it finds nothing left to turn.
-- Answers {"referenced": [volume uuid], "dropped": [reservation uuid]}.
local a = cjson.decode(ARGV[1])
local vm = get_json('vm:' .. a.vm_uuid)
local active = vm ~= nil and vm.state ~= 'failed' and vm.state ~= 'destroyed'
local referenced, dropped = {}, {}
for _, ru in ipairs(redis.call('ZRANGE', P .. 'job_reservations:' .. a.job_uuid, 0, -1)) do
  local r = get_json('reservation:' .. ru)
  if r and r.vm_uuid == a.vm_uuid then
    if active and volume_refs_add(r.volume_uuid, a.vm_uuid) then
      referenced[#referenced + 1] = r.volume_uuid
    else
      dropped[#dropped + 1] = ru
    end
    reservation_del(ru)
  end
end
return ok_lists({referenced = referenced, dropped = dropped}, {'referenced', 'dropped'})
