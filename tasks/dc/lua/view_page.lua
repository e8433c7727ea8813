-- The first lines of every list view of the dc plugin, after the prelude: the paging
-- of the engine's views (ARGV[1] limit, ARGV[2] offset, ARGV[3] marker, ARGV[4] the
-- parameters as JSON) over an index, a sorted set whose members are ordered by name.
local LIMIT, OFFSET, MARKER = tonumber(ARGV[1]), tonumber(ARGV[2]) or 0, ARGV[3]
local Q = cjson.decode(ARGV[4])

-- A page of index `key` (a full key): get(member) makes a member's object (nil skips
-- it), keep(obj) filters (nil keeps all). Returns the view's answer {json, next, count};
-- the marker is the last member of the page, a count only when nothing is filtered.
local function page(key, get, keep)
  local out, more, last = {}, false, nil
  local skip = MARKER == '' and OFFSET or 0
  local from = MARKER ~= '' and '(' .. MARKER or '-'
  if keep == nil and skip > 0 then
    -- Unfiltered: the offset is a rank, so the skipped members are never read.
    local at = redis.call('ZRANGE', key, skip, skip, 'WITHSCORES')
    if #at == 0 then return {'[]', false, redis.call('ZCARD', key)} end
    from, skip = '[' .. at[1], 0
  end
  local batch = LIMIT + 1
  while not more do
    local ms = redis.call('ZRANGEBYLEX', key, from, '+', 'LIMIT', 0, batch)
    for _, m in ipairs(ms) do
      local obj = get(m)
      if obj ~= nil and (keep == nil or keep(obj)) then
        if skip > 0 then
          skip = skip - 1
        elseif #out == LIMIT then
          more = true
          break
        else
          out[#out + 1] = obj
          last = m
        end
      end
      from = '(' .. m
    end
    if #ms < batch then break end
  end
  local body = #out == 0 and '[]' or enc(out)
  local count = keep == nil and redis.call('ZCARD', key) or nil
  return {body, more and last or false, count}
end

-- A hash as an object, its numeric fields as numbers.
local function hash_object(key, numeric)
  local f = redis.call('HGETALL', key)
  if #f == 0 then return nil end
  local o = {}
  for i = 1, #f, 2 do o[f[i]] = f[i + 1] end
  for _, n in ipairs(numeric) do if o[n] then o[n] = tonumber(o[n]) end end
  return o
end

local SERVER_NUMBERS = {'ram_mib', 'disk_mib', 'ram_committed_mib', 'disk_committed_mib', 'instances'}
local function server_object(u)
  local s = hash_object(P .. 'server:' .. u, SERVER_NUMBERS)
  if s then
    s.ram_free_mib = s.ram_mib - s.ram_committed_mib
    s.disk_free_mib = s.disk_mib - s.disk_committed_mib
    if s.platform_version == '' then s.platform_version = nil end
  end
  return s
end

local function network_object(u)
  local n = hash_object(P .. 'network:' .. u, {'vlan_id', 'mtu', 'taken'})
  if n then
    n.free = redis.call('ZCARD', P .. 'network:' .. u .. ':free')
    n.start_n, n.end_n, n.gateway_n = nil, nil, nil
    n.fabric = n.fabric == 'true'
    n.owner_uuids = n.owner_uuids and cjson.decode(n.owner_uuids) or {}
  end
  return n
end
