-- GET /reservations[?volume_uuid&job_uuid]: the volume reservations of provisions in
-- flight, by uuid (docs/VOLUMES.md "Records").
local function bad(field, msg)
  return redis.error_reply('REFUSED 409 InvalidArgument ' .. field .. ': ' .. msg)
end
if Q.volume_uuid and not uuid_ok(Q.volume_uuid) then
  return bad('volume_uuid', 'expected a UUID, got ' .. cjson.encode(Q.volume_uuid))
end
local walk = 'reservations'
if Q.volume_uuid then walk = 'volume_reservations:' .. Q.volume_uuid end
if Q.job_uuid then walk = 'job_reservations:' .. Q.job_uuid end
local keep = nil
if Q.volume_uuid and Q.job_uuid then
  keep = function(r) return r.volume_uuid == Q.volume_uuid end
end
return page(P .. walk, function(u) return get_json('reservation:' .. u) end, keep)
