-- GET /migrations[?owner_uuid&state&vm_uuid]: the migrations, newest first (by
-- created_timestamp), paged as the other views (the marker is the last uuid of a
-- page). state is one of the six or "active" (running, paused, scheduled, failed: a
-- migration still holding its VM). Never shows `secret`. A migration whose job waits
-- for a migration slot carries `waiting_for_slot` (and that progress); filtered by
-- vm_uuid, the first page starts with the VM's begins waiting for their slot, which
-- have no record yet (mig_waiting_begin: state running, phase begin).
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
-- The walk follows the smallest index a filter names; the others are checked on each
-- member (a ZSCORE: the record is read only for a member kept).
local idx = {}
if Q.vm_uuid then idx[#idx + 1] = P .. 'migrations:vm:' .. Q.vm_uuid end
if Q.owner_uuid then idx[#idx + 1] = P .. 'migrations:owner:' .. Q.owner_uuid end
if Q.state == 'active' then
  idx[#idx + 1] = P .. 'migrations:active'
elseif Q.state then
  idx[#idx + 1] = P .. 'migrations:state:' .. Q.state
end
local key, size = P .. 'migrations', nil
for _, k in ipairs(idx) do
  local n = redis.call('ZCARD', k)
  if size == nil or n < size then key, size = k, n end
end
local function keep(u)
  for _, k in ipairs(idx) do
    if k ~= key and not redis.call('ZSCORE', k, u) then return false end
  end
  return true
end
local filtered = #idx > 1
local at, skip = 0, OFFSET
if MARKER ~= '' then
  local r = redis.call('ZREVRANK', key, MARKER)
  if r then
    at = r + 1
  else
    -- The marker's migration left this listing's index since (its state changed):
    -- the page goes on after every migration newer than it.
    local score = redis.call('ZSCORE', P .. 'migrations', MARKER)
    if not score then
      return redis.error_reply('REFUSED 409 InvalidArgument marker: ' .. cjson.encode(MARKER) ..
        ' is not a migration')
    end
    at = redis.call('ZCOUNT', key, '(' .. score, '+inf')
  end
  skip = 0
elseif not filtered then
  at, skip = OFFSET, 0
end
local out, more, last = {}, false, nil
local waits_of = {} -- vm uuid -> its jobs waiting for a slot, read once per view
local function public(m)
  if not MIG_ACTIVE[m.state] then return mig_public(m) end
  waits_of[m.vm_uuid] = waits_of[m.vm_uuid] or mig_slot_waits(m.vm_uuid)
  return mig_public_waiting(m, waits_of[m.vm_uuid])
end
-- A VM's begins waiting for a slot (no record yet) head its first page, on top of the
-- limit: the limit counts records, so the marker of a page is always a record's (a
-- page of waiting begins alone would have none to go on from). A VM has one such
-- begin at most in practice: each begin holds the VM's own ticket while it waits.
if Q.vm_uuid and MARKER == '' and OFFSET == 0 and
  (not Q.state or Q.state == 'running' or Q.state == 'active') then
  for _, w in ipairs(mig_waiting_begins(Q.vm_uuid, Q.owner_uuid)) do out[#out + 1] = w end
end
local records = 0
local batch = LIMIT + 1
while not more do
  local ms = redis.call('ZREVRANGE', key, at, at + batch - 1)
  for _, u in ipairs(ms) do
    local m = keep(u) and mig_get(u)
    if m then
      if skip > 0 then
        skip = skip - 1
      elseif records == LIMIT then
        more = true
        break
      else
        out[#out + 1] = public(m)
        records = records + 1
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
