-- GET /networks/:uuid/ips: the addresses of a network that have a record (taken or
-- reserved), in address order; the marker is the last address as an integer.
local nk = P .. 'network:' .. Q.uuid
if redis.call('EXISTS', nk) == 0 then return false end
local key = nk .. ':ips'
local ips
if MARKER ~= '' then
  ips = redis.call('ZRANGEBYSCORE', key, '(' .. MARKER, '+inf', 'LIMIT', 0, LIMIT + 1)
else
  ips = redis.call('ZRANGE', key, OFFSET, OFFSET + LIMIT)
end
local out = {}
for i = 1, math.min(#ips, LIMIT) do
  local f = redis.call('HGETALL', P .. 'ip:' .. Q.uuid .. ':' .. ips[i])
  local o = {}
  for j = 1, #f, 2 do o[f[j]] = f[j + 1] end
  if o.belongs_to_uuid == '' then o.belongs_to_uuid = nil end
  if o.owner_uuid == '' then o.owner_uuid = nil end
  out[i] = o
end
local next = #ips > LIMIT and tostring(ip_int(ips[LIMIT])) or false
return {#out == 0 and '[]' or enc(out), next, redis.call('ZCARD', key)}
