-- GET /migrations[?owner_uuid&state&vm_uuid]: the migrations, newest first (by
-- created_timestamp), paged as the other views (the marker is the last uuid of a
-- page). state is one of the six or "active" (running, paused, scheduled, failed: a
-- migration still holding its VM). Never shows `secret`.
if Q.state and not MIG_STATES[Q.state] and Q.state ~= 'active' then
  return redis.error_reply('REFUSED 409 InvalidArgument state: expected one of scheduled, ' ..
    'running, paused, aborted, failed, successful, active, got ' .. cjson.encode(Q.state))
end
for _, k in ipairs({'owner_uuid', 'vm_uuid'}) do
  if Q[k] and not uuid_ok(Q[k]) then
    return redis.error_reply('REFUSED 409 InvalidArgument ' .. k .. ': expected a UUID, got ' ..
      cjson.encode(Q[k]))
  end
end
local key = P .. 'migrations'
if Q.vm_uuid then
  key = P .. 'migrations:vm:' .. Q.vm_uuid
elseif Q.owner_uuid then
  key = P .. 'migrations:owner:' .. Q.owner_uuid
end
local function keep(m)
  if Q.state == 'active' then
    if not MIG_ACTIVE[m.state] then return false end
  elseif Q.state and m.state ~= Q.state then
    return false
  end
  if Q.owner_uuid and Q.vm_uuid and
    not redis.call('ZSCORE', P .. 'migrations:owner:' .. Q.owner_uuid, m.uuid) then
    return false
  end
  return true
end
local filtered = Q.state ~= nil or (Q.owner_uuid ~= nil and Q.vm_uuid ~= nil)
local at, skip = 0, OFFSET
if MARKER ~= '' then
  local r = redis.call('ZREVRANK', key, MARKER)
  if not r then
    return redis.error_reply('REFUSED 409 InvalidArgument marker: ' .. cjson.encode(MARKER) ..
      ' is not a migration of this listing')
  end
  at, skip = r + 1, 0
elseif not filtered then
  at, skip = OFFSET, 0
end
local out, more, last = {}, false, nil
local batch = LIMIT + 1
while not more do
  local ms = redis.call('ZREVRANGE', key, at, at + batch - 1)
  for _, u in ipairs(ms) do
    local m = mig_get(u)
    if m and keep(m) then
      if skip > 0 then
        skip = skip - 1
      elseif #out == LIMIT then
        more = true
        break
      else
        out[#out + 1] = mig_public(m)
        last = u
      end
    end
  end
  at = at + #ms
  if #ms < batch then break end
end
local body = #out == 0 and '[]' or mig_enc(out)
local count = (not filtered) and redis.call('ZCARD', key) or nil
return {body, more and last or false, count}
