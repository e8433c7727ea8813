-- dc.reservations_clean: the clean-up of stale volume reservations (RFD 26 "Volume
-- reservations": "cleaned up periodically"), at once. ARGV[1]: {"older_than": ISO
-- 8601, "limit"?}. For each reservation, by what became of its VM: gone,
-- failed or destroyed -> deleted (the provision failed: nothing mounts the volume);
-- running or stopped (active) -> turned into a reference and deleted (the provision
-- got its VM but not to its refs step); still provisioning but made before
-- older_than (a job past its timeout) -> deleted; its volume gone -> deleted. Others
-- are a provision at work and stay. At most `limit` (default 1000) are looked at.
-- Answers {"removed": [reservation uuid], "referenced": [reservation uuid], "more":
-- whether reservations were left unexamined}.
local a = cjson.decode(ARGV[1])
if type(a.older_than) ~= 'string' or
    not string.match(a.older_than, '^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d') then
  return refuse(0, 'InvalidArgument', 'older_than: expected an ISO 8601 time, got ' ..
    cjson.encode(a.older_than))
end
local limit = tonumber(a.limit) or 1000
local removed, referenced = {}, {}
local all = redis.call('ZRANGE', P .. 'reservations', 0, limit)
for i, ru in ipairs(all) do
  if i > limit then break end
  local r = get_json('reservation:' .. ru)
  if not r then
    index_rem('reservations', ru)
    removed[#removed + 1] = ru
  else
    local vm = get_json('vm:' .. r.vm_uuid)
    local vol = volume_get(r.volume_uuid)
    if not vm or not vol or vm.state == 'failed' or vm.state == 'destroyed' then
      reservation_del(ru)
      removed[#removed + 1] = ru
    elseif vm.state == 'running' or vm.state == 'stopped' then
      volume_refs_add(r.volume_uuid, r.vm_uuid)
      reservation_del(ru)
      referenced[#referenced + 1] = ru
    elseif tostring(r.create_timestamp) < a.older_than then
      reservation_del(ru)
      removed[#removed + 1] = ru
    end
  end
end
return ok_lists({removed = removed, referenced = referenced, more = #all > limit},
  {'removed', 'referenced'})
