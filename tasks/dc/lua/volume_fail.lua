-- dc.volume_fail: the onerror of volume-create and volume-delete. ARGV[1]:
-- {volume_uuid, job_uuid}. The volume becomes "failed" (kept, RFD 26's retention of
-- failed volumes), share_state "error". A volume that failed while creating gives its
-- name back, so a create of the same name works; one that failed while deleting keeps
-- it (its data may still be there). A record that is gone (a delete that removed it)
-- or that another job holds is left alone. Answers {failed: bool, volume?}.
local a = cjson.decode(ARGV[1])
local v = volume_get(a.volume_uuid)
if not v then return ok({failed = false}) end
if v.job_uuid ~= a.job_uuid and v.job_uuid ~= nil and v.job_uuid ~= NULL then
  return ok({failed = false, volume = v})
end
if v.state ~= 'creating' and v.state ~= 'deleting' then return ok({failed = false, volume = v}) end
local before = v.state
if before == 'creating' then
  local names = P .. 'volume_names:' .. v.owner_uuid
  if redis.call('HGET', names, v.name) == v.uuid then redis.call('HDEL', names, v.name) end
end
v.state = 'failed'
v.share_state = 'error'
v.job_uuid = NULL
volume_put(v, before)
return ok({failed = true, volume = v})
