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

-- ---- the volume workflows' rules (volume-create, volume-delete, volume-update) ----

local UUID_PATTERN = '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$'
local function uuid_ok(s) return type(s) == 'string' and string.match(s, UUID_PATTERN) ~= nil end

local function bad_arg(field, msg)
  return refuse(422, 'InvalidArgument', field .. ': ' .. msg)
end

-- The role RFD 26 gives a volume's storage instance (internal_metadata
-- "sdc:system_role"). Instances of a role are never shown or touched through the
-- instance endpoints (docs/VOLUMES.md "Storage instances").
local STORAGE_ROLE = 'nfsvolumestorage'
local function vm_system_role(vm)
  local im = vm and vm.internal_metadata
  if type(im) ~= 'table' then return nil end
  local role = im['sdc:system_role']
  if type(role) ~= 'string' then return nil end
  return role
end

-- The VMs a volume is used by: its references, then the VM of each reservation
-- (DOMAIN 1.3: a reserved volume is in use as much as a referenced one). Sorted,
-- without duplicates.
local function volume_users(v)
  local seen, out = {}, {}
  for _, r in ipairs(v.refs or {}) do
    if not seen[r] then seen[r] = true; out[#out + 1] = r end
  end
  for _, ru in ipairs(redis.call('ZRANGE', P .. 'volume_reservations:' .. v.uuid, 0, -1)) do
    local r = get_json('reservation:' .. ru)
    if r and r.vm_uuid and not seen[r.vm_uuid] then seen[r.vm_uuid] = true; out[#out + 1] = r.vm_uuid end
  end
  table.sort(out)
  return out
end

local function volume_in_use_refusal(v, users)
  return refuse(409, 'VolumeInUse', 'Volume with name ' .. v.name .. ' is used by ' ..
    table.concat(users, ', '))
end

local function volume_not_ready(v, what)
  return refuse(409, 'VolumeNotReady', 'volume ' .. v.uuid .. ' (' .. v.name .. ') is ' ..
    v.state .. ': ' .. what)
end

-- A network a volume of `owner` may be reached on: it exists (else 404
-- ResourceNotFound), is a fabric and is the owner's (owner_uuids empty: anyone's).
-- Returns nil or the refusal. `field` names it in the message.
local function volume_network_fault(owner, u, field)
  if not uuid_ok(u) then return bad_arg(field, 'expected a network UUID, got ' .. cjson.encode(u)) end
  local f = redis.call('HMGET', P .. 'network:' .. u, 'uuid', 'fabric', 'owner_uuids', 'name')
  if not f[1] then
    return refuse(404, 'ResourceNotFound', field .. ': network ' .. u .. ' does not exist')
  end
  if f[2] ~= 'true' then
    return bad_arg(field, 'network ' .. f[4] .. ' (' .. u .. ') is not a fabric network: ' ..
      'volumes are reached on fabric networks only')
  end
  local owners = f[3] and cjson.decode(f[3]) or {}
  if type(owners) == 'table' and #owners > 0 then
    for _, o in ipairs(owners) do if o == owner then return nil end end
    return bad_arg(field, 'network ' .. f[4] .. ' (' .. u .. ') is not a fabric network of owner ' .. owner)
  end
  return nil
end

-- The owner's fabric networks in the description's order.
local function owner_fabric_networks(owner)
  local out = {}
  for _, u in ipairs(redis.call('ZRANGE', P .. 'networks:described', 0, -1)) do
    local f = redis.call('HMGET', P .. 'network:' .. u, 'fabric', 'owner_uuids')
    if f[1] == 'true' then
      local owners = f[2] and cjson.decode(f[2]) or {}
      local mine = type(owners) ~= 'table' or #owners == 0
      for _, o in ipairs(type(owners) == 'table' and owners or {}) do
        if o == owner then mine = true end
      end
      if mine then out[#out + 1] = u end
    end
  end
  return out
end

-- The storage instance's package name: sdc_volume_nfs_<size in GiB> (RFD 26).
local function volume_package_name(size) return 'sdc_volume_nfs_' .. math.floor(size / 1024) end

-- The tags of a volume: an object of scalar values (RFD 26: docker labels are tags).
local function volume_tags_fault(tags)
  if type(tags) ~= 'table' then return 'expected an object, got ' .. cjson.encode(tags) end
  if #tags > 0 then return 'expected an object, got an array' end
  for k, val in pairs(tags) do
    local t = type(val)
    if type(k) ~= 'string' or k == '' or (t ~= 'string' and t ~= 'number' and t ~= 'boolean') then
      return 'tag ' .. cjson.encode(k) .. ': expected a string, number or boolean value, got ' ..
        cjson.encode(val)
    end
  end
  return nil
end
