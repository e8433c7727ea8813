-- GET /volumes[?owner_uuid&name&state&size&type&predicate&tag&vm_uuid]: the volumes by
-- uuid, each with "id" (its uuid) too (RFD 26 ListVolumes, VOLAPI's rendering).
--   name       foo (exact), foo* (prefix), *foo (suffix), *foo* (substring); apart from
--              the stars [a-zA-Z0-9_.-]+
--   state      creating|ready|failed|deleting|rolling_back
--   size       MiB, ^[1-9][0-9]*$
--   type       tritonnfs
--   predicate  JSON: {"eq": [field, value]}, {"and": [...]}, {"or": [...]} over name,
--              state, size, type, owner_uuid, billing_id; a field both here and as a
--              parameter is refused
--   tag        key=value: volumes whose tag key has that value
--   vm_uuid    the volume whose storage instance it is
--   render     volapi (the default: the whole record) or cloudapi (volume_rendered)
-- A bad value is refused 409 InvalidArgument naming the parameter.
local function bad(field, msg)
  return redis.error_reply('REFUSED 409 InvalidArgument ' .. field .. ': ' .. msg)
end

local STATES = {creating = true, ready = true, failed = true, deleting = true, rolling_back = true}
local FIELDS = {name = true, state = true, size = true, type = true, owner_uuid = true, billing_id = true}

-- A name filter as a test of a name: nil and what is wrong when the filter is bad.
local function name_matcher(pat)
  if type(pat) ~= 'string' then return nil, 'expected a string' end
  local pre, core, suf = string.match(pat, '^(%*?)(.-)(%*?)$')
  if core == '' or not string.match(core, '^[a-zA-Z0-9_%.%-]+$') then
    return nil, cjson.encode(pat) .. ' must be foo, foo*, *foo or *foo* with foo of [a-zA-Z0-9_.-]+'
  end
  return function(n)
    if type(n) ~= 'string' then return false end
    local at = string.find(n, core, 1, true)
    if pre == '' and suf == '' then return n == core end
    if pre == '' then return string.sub(n, 1, #core) == core end
    if suf == '' then return #n >= #core and string.sub(n, -#core) == core end
    return at ~= nil
  end
end

-- The predicate as a test of a volume; the fields it names go into `named`.
local function compile(pred, path, named)
  if type(pred) ~= 'table' then return nil, path .. ': expected an object' end
  local op, arg, n = nil, nil, 0
  for k, val in pairs(pred) do op, arg, n = k, val, n + 1 end
  if n ~= 1 then return nil, path .. ': expected exactly one of eq, and, or' end
  if op == 'eq' then
    if type(arg) ~= 'table' or #arg ~= 2 then return nil, path .. '.eq: expected [field, value]' end
    local field, want = arg[1], arg[2]
    if not FIELDS[field] then
      return nil, path .. '.eq[0]: expected one of name, state, size, type, owner_uuid, billing_id, got ' ..
        cjson.encode(field)
    end
    named[field] = true
    if field == 'name' then
      local m, why = name_matcher(want)
      if not m then return nil, path .. '.eq[1]: ' .. why end
      return function(v) return m(v.name) end
    end
    if field == 'size' then
      local want_n = tonumber(want)
      if not want_n then return nil, path .. '.eq[1]: expected a size in MiB, got ' .. cjson.encode(want) end
      return function(v) return v.size == want_n end
    end
    if type(want) ~= 'string' then return nil, path .. '.eq[1]: expected a string, got ' .. cjson.encode(want) end
    return function(v) return v[field] == want end
  end
  if op == 'and' or op == 'or' then
    if type(arg) ~= 'table' or #arg == 0 then return nil, path .. '.' .. op .. ': expected a non-empty array' end
    local tests = {}
    for i, sub in ipairs(arg) do
      local t, why = compile(sub, path .. '.' .. op .. '[' .. (i - 1) .. ']', named)
      if not t then return nil, why end
      tests[i] = t
    end
    if op == 'and' then
      return function(v)
        for _, t in ipairs(tests) do if not t(v) then return false end end
        return true
      end
    end
    return function(v)
      for _, t in ipairs(tests) do if t(v) then return true end end
      return false
    end
  end
  return nil, path .. ': unknown operator ' .. cjson.encode(op) .. ' (expected eq, and, or)'
end

local tests = {}
local named = {}
if Q.predicate then
  local okp, pred = pcall(cjson.decode, Q.predicate)
  if not okp then return bad('predicate', 'not JSON: ' .. cjson.encode(Q.predicate)) end
  local t, why = compile(pred, 'predicate', named)
  if not t then return bad('predicate', why) end
  tests[#tests + 1] = t
end
for f in pairs(FIELDS) do
  if named[f] and Q[f] then
    return bad(f, 'given both as a parameter and in the predicate')
  end
end
if Q.name then
  local m, why = name_matcher(Q.name)
  if not m then return bad('name', why) end
  tests[#tests + 1] = function(v) return m(v.name) end
end
if Q.state then
  if not STATES[Q.state] then
    return bad('state', 'expected creating, ready, failed, deleting or rolling_back, got ' .. cjson.encode(Q.state))
  end
  tests[#tests + 1] = function(v) return v.state == Q.state end
end
if Q.size then
  if not string.match(Q.size, '^[1-9][0-9]*$') then
    return bad('size', 'expected a positive integer of MiB, got ' .. cjson.encode(Q.size))
  end
  local n = tonumber(Q.size)
  tests[#tests + 1] = function(v) return v.size == n end
end
if Q.type then
  if Q.type ~= 'tritonnfs' then return bad('type', 'expected tritonnfs, got ' .. cjson.encode(Q.type)) end
  tests[#tests + 1] = function(v) return v.type == Q.type end
end
if Q.owner_uuid then
  if not uuid_ok(Q.owner_uuid) then return bad('owner_uuid', 'expected a UUID, got ' .. cjson.encode(Q.owner_uuid)) end
  tests[#tests + 1] = function(v) return v.owner_uuid == Q.owner_uuid end
end
if Q.tag then
  local k, val = string.match(Q.tag, '^([^=]+)=(.*)$')
  if not k then return bad('tag', 'expected key=value, got ' .. cjson.encode(Q.tag)) end
  tests[#tests + 1] = function(v)
    local t = type(v.tags) == 'table' and v.tags[k]
    return t ~= nil and t ~= NULL and tostring(t) == val
  end
end
if Q.vm_uuid then
  if not uuid_ok(Q.vm_uuid) then return bad('vm_uuid', 'expected a UUID, got ' .. cjson.encode(Q.vm_uuid)) end
  tests[#tests + 1] = function(v) return v.vm_uuid == Q.vm_uuid end
end

-- The smallest index a filter names.
local walk = 'volumes'
if Q.owner_uuid then walk = 'volumes:owner:' .. Q.owner_uuid end
if Q.state and (walk == 'volumes' or
    redis.call('ZCARD', P .. 'volumes:state:' .. Q.state) < redis.call('ZCARD', P .. walk)) then
  walk = 'volumes:state:' .. Q.state
end
if Q.render ~= nil then
  local _, fault = volume_rendered({}, Q.render, 0)
  if fault then return bad('render', fault) end
end
-- A share whose server's agent has not probed it for 3 watch periods shows unknown.
local now_s = tonumber(redis.call('TIME')[1])
local function get(u)
  local v = volume_get(u)
  if v then
    v.id = v.uuid
    v.share_state = share_state_shown(v, now_s)
  end
  return v
end
local keep = nil
if #tests > 0 or Q.render == 'cloudapi' then
  -- Rendered once kept: the filters read the whole record (vm_uuid).
  keep = function(v)
    for _, t in ipairs(tests) do if not t(v) then return false end end
    volume_rendered(v, Q.render, now_s)
    return true
  end
end
return page(P .. walk, get, keep)
