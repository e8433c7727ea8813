-- The records of shared volumes (RFD 26), shared by every dc script (lua_embed.py puts
-- this file after prelude.lua): a volume, its name claim, its references and the
-- reservations provisions hold on it (docs/VOLUMES.md "Records"). Every change to a
-- volume goes through volume_put, so its state index and version move with it.

-- The volume record, or nil.
local function volume_get(uuid)
  if type(uuid) ~= 'string' then return nil end
  return get_json('volume:' .. uuid)
end

-- The uuid of the owner's volume of this name (its claim), or nil.
local function volume_uuid_by_name(owner, name)
  local u = redis.call('HGET', P .. 'volume_names:' .. owner, name)
  if not u then return nil end
  return u
end

-- Writes the volume, keeping its indexes and bumping "version" (the etag a change
-- checks so that two writers never undo each other). `before` is the state it had
-- when read (nil for a new volume).
local function volume_put(v, before)
  if before and before ~= v.state then index_rem('volumes:state:' .. before, v.uuid) end
  index_add('volumes:state:' .. v.state, v.uuid)
  index_add('volumes', v.uuid)
  index_add('volumes:owner:' .. v.owner_uuid, v.uuid)
  v.version = (tonumber(v.version) or 0) + 1
  redis.call('SET', P .. 'volume:' .. v.uuid, enc(v))
end

-- Removes the volume's record, its name claim (when still its own) and its indexes.
local function volume_remove(v)
  index_rem('volumes:state:' .. v.state, v.uuid)
  index_rem('volumes', v.uuid)
  index_rem('volumes:owner:' .. v.owner_uuid, v.uuid)
  if redis.call('HGET', P .. 'volume_names:' .. v.owner_uuid, v.name) == v.uuid then
    redis.call('HDEL', P .. 'volume_names:' .. v.owner_uuid, v.name)
  end
  redis.call('DEL', P .. 'volume:' .. v.uuid, P .. 'volume_reservations:' .. v.uuid)
end

-- Adds vm_uuid to the volume's refs (a set: twice is once). Returns the volume.
local function volume_refs_add(vol_uuid, vm_uuid)
  local v = volume_get(vol_uuid)
  if not v then return nil end
  for _, r in ipairs(v.refs or {}) do
    if r == vm_uuid then return v end
  end
  v.refs = v.refs or {}
  v.refs[#v.refs + 1] = vm_uuid
  volume_put(v, v.state)
  return v
end

-- Drops vm_uuid from the volume's refs. Returns the volume (nil if none).
local function volume_refs_drop(vol_uuid, vm_uuid)
  local v = volume_get(vol_uuid)
  if not v then return nil end
  local kept, found = {}, false
  for _, r in ipairs(v.refs or {}) do
    if r == vm_uuid then found = true else kept[#kept + 1] = r end
  end
  if found then
    v.refs = kept
    volume_put(v, v.state)
  end
  return v
end

-- A reservation a provision holds on a volume while its job runs:
-- {uuid, vm_uuid, job_uuid, owner_uuid, volume_name, volume_uuid, create_timestamp}.
local function reservation_add(r)
  redis.call('SET', P .. 'reservation:' .. r.uuid, enc(r))
  index_add('reservations', r.uuid)
  index_add('volume_reservations:' .. r.volume_uuid, r.uuid)
  index_add('job_reservations:' .. r.job_uuid, r.uuid)
end

local function reservation_del(uuid)
  local r = get_json('reservation:' .. uuid)
  if not r then return nil end
  redis.call('DEL', P .. 'reservation:' .. uuid)
  index_rem('reservations', uuid)
  index_rem('volume_reservations:' .. r.volume_uuid, uuid)
  index_rem('job_reservations:' .. r.job_uuid, uuid)
  return r
end

-- What a VM that is no longer active (failed, destroyed, vanished from its server)
-- gives up on volumes: its references and its reservations (DOMAIN 1.3 "Reference
-- maintenance"). vm.volumes lists the volumes it mounts ({name, volume_uuid, ...}).
local function vm_volumes_release(vm)
  for _, m in ipairs(vm.volumes or {}) do
    if m.volume_uuid and m.volume_uuid ~= NULL then
      volume_refs_drop(m.volume_uuid, vm.uuid)
      for _, ru in ipairs(redis.call('ZRANGE', P .. 'volume_reservations:' .. m.volume_uuid, 0, -1)) do
        local r = get_json('reservation:' .. ru)
        if r and r.vm_uuid == vm.uuid then reservation_del(ru) end
      end
    end
  end
end

-- The sizes a volume may have, MiB (RFD 26 ListVolumeSizes, tritonnfs): 10 GiB steps to
-- 100 GiB, then 100 GiB steps to 1000 GiB. A size not listed is refused, never rounded.
local VOLUME_SIZES = {10240, 20480, 30720, 40960, 51200, 61440, 71680, 81920, 92160, 102400,
  204800, 307200, 409600, 512000, 614400, 716800, 819200, 921600, 1024000}
local VOLUME_SIZE_DEFAULT = 10240

local function volume_size_ok(n)
  for _, s in ipairs(VOLUME_SIZES) do
    if s == n then return true end
  end
  return false
end

local function volume_sizes_refusal()
  return refuse(409, 'VolumeSizeNotAvailable', 'Volume size not available. Available sizes: ' ..
    table.concat(VOLUME_SIZES, ', ') .. ' (MiB)')
end

-- RFD 26's name rule: a letter or digit, then at least one of letters, digits, "_",
-- "." or "-" (so at least 2 characters); at most 256. Returns nil or what is wrong.
local function volume_name_fault(name)
  if type(name) ~= 'string' then return 'expected a string' end
  if #name > 256 then return 'at most 256 characters, got ' .. #name end
  if not string.match(name, '^[a-zA-Z0-9][a-zA-Z0-9_%.%-]+$') then
    return '"' .. name .. '" must match ^[a-zA-Z0-9][a-zA-Z0-9_.-]+$ (at least 2 characters)'
  end
  return nil
end

-- The owner's volume: the record, or nil and the refusal (404 VolumeNotFound for one
-- that does not exist or is another owner's: whether it exists is not told).
local function volume_of_owner(uuid, owner)
  local v = volume_get(uuid)
  if not v or v.owner_uuid ~= owner then
    return nil, refuse(404, 'VolumeNotFound', 'volume ' .. tostring(uuid) .. ' not found')
  end
  return v
end

-- ---- Volumes at provision (docs/VOLUMES.md "Volumes at provision") ----------------

-- ARGV[2] (the time now, to the second) as a record's timestamp: ISO 8601 with ms.
local function now_iso_ms()
  local t = ARGV[2] or ''
  if string.match(t, '^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ$') then
    return string.sub(t, 1, 19) .. '.000Z'
  end
  return t
end

-- A UUID made from a text by SHA-1 (the layout of an RFC 4122 version 5 name-based
-- UUID): the same text always gives the same UUID, so a step run again names the
-- same record or job; texts that differ give different ones.
local function uuid_of_text(text)
  local h = redis.sha1hex(text)
  local variant = string.format('%x', 8 + tonumber(string.sub(h, 17, 17), 16) % 4)
  return string.sub(h, 1, 8) .. '-' .. string.sub(h, 9, 12) .. '-5' .. string.sub(h, 14, 16) ..
    '-' .. variant .. string.sub(h, 18, 20) .. '-' .. string.sub(h, 21, 32)
end

-- The uuid of the volume-delete job a failed provision asks for a volume it created:
-- one per volume, so a step run again finds the job it made.
local function volume_delete_job_uuid(vol_uuid)
  return uuid_of_text('volume-delete:' .. vol_uuid)
end

-- Of the networks `uuids` (a list of uuids), those that are fabric networks of the
-- owner (owner_uuids empty: any owner's), in the order given.
local function fabric_networks_of(owner, uuids)
  local out, seen = {}, {}
  for _, u in ipairs(uuids) do
    local f = redis.call('HMGET', P .. 'network:' .. u, 'fabric', 'owner_uuids')
    if f[1] == 'true' and not seen[u] then
      local owners = f[2] and cjson.decode(f[2]) or {}
      local mine = #owners == 0
      for _, o in ipairs(owners) do
        if o == owner then mine = true end
      end
      if mine then
        out[#out + 1] = u
        seen[u] = true
      end
    end
  end
  return out
end

-- true when the volume is reachable on one of the networks `uuids`.
local function volume_reachable(v, uuids)
  for _, n in ipairs(v.networks or {}) do
    for _, u in ipairs(uuids) do
      if n == u then return true end
    end
  end
  return false
end

-- JSON text of a string as RFD 26's examples write it ("/" left as it is: cjson
-- would write "\/").
local function json_text(s)
  return (string.gsub(cjson.encode(s), '\\/', '/'))
end

-- internal_metadata["sdc:volumes"] of a VM: the JSON text of
-- [{"mountpoint","name","nfsvolume","mode","type"}] in that order (RFD 26
-- "Relationship between shared volumes and VMs"), from the mounts
-- [{name, mountpoint, mode, type, nfsvolume}].
local function sdc_volumes_text(mounts)
  local items = {}
  for i, m in ipairs(mounts) do
    items[i] = '{"mountpoint":' .. json_text(m.mountpoint) .. ',"name":' .. json_text(m.name) ..
      ',"nfsvolume":' .. json_text(m.nfsvolume) .. ',"mode":' .. json_text(m.mode) ..
      ',"type":' .. json_text(m.type) .. '}'
  end
  return '[' .. table.concat(items, ',') .. ']'
end

-- ok(v), with the members `lists` (names) written as [] when empty (cjson writes an
-- empty table as {}).
local function ok_lists(v, lists)
  local s = ok(v)
  for _, k in ipairs(lists) do
    s = string.gsub(s, '"' .. k .. '":{}', '"' .. k .. '":[]')
  end
  return s
end
