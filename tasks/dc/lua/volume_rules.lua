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

-- The migration of v's storage instance that is active (from its claim until it is
-- aborted or finalized), or nil.
local function volume_storage_migration(v)
  if type(v.vm_uuid) ~= 'string' then return nil end
  local m = redis.call('GET', P .. 'migration_active:' .. v.vm_uuid)
  if m then return m end
  return nil
end

-- The refusal of a delete while the storage instance migrates: the data may be on
-- either server, and the hidden copy the migration keeps would be left behind.
local function volume_migrating_refusal(v, m)
  return refuse(409, 'VolumeMigrating', 'volume ' .. v.uuid .. ' (' .. tostring(v.name) .. '): ' ..
    'its storage instance ' .. v.vm_uuid .. ' is being migrated (migration ' .. m .. '); ' ..
    'delete it once the migration is aborted or finalized')
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

-- Gives back all a VM took, at once (dc.release, and the NIC reconcile for a VM whose
-- directory vanished): its allocation (the server's counters), its NICs and their
-- addresses (nic_free), its volume references and reservations, and sets its final
-- state ("failed" or "destroyed"). Returns the record as written and whether anything
-- was given back (nil, false: no record; a destroyed VM is returned unchanged). What
-- was held is kept in "released_nics" (a failed VM) so a re-run of the provision takes
-- the same addresses back when they are still free.
local function vm_release(vm_uuid, final_state)
  local vk = 'vm:' .. vm_uuid
  local vm = get_json(vk)
  if not vm then return nil, false end
  if vm.state == 'destroyed' then return vm, false end

  local al = vm.allocation
  local released = false
  if al and al ~= NULL then
    local sk = P .. 'server:' .. al.server_uuid
    if redis.call('EXISTS', sk) == 1 then
      redis.call('HINCRBY', sk, 'ram_committed_mib', -al.ram)
      redis.call('HINCRBY', sk, 'disk_committed_mib', -al.disk)
      redis.call('HINCRBY', sk, 'instances', -1)
    end
    if al.rack then redis.call('HINCRBY', P .. 'owner_racks:' .. vm.owner_uuid, al.rack, -1) end
    vm.allocation = NULL
    released = true
  end

  local kept = {}
  for _, nic in ipairs(vm.nics or {}) do
    nic_free(nic, vm_uuid)
    kept[#kept + 1] = {network_uuid = nic.network_uuid, ip = nic.ip, mac = nic.mac}
    released = true
  end
  if #kept > 0 then vm.released_nics = kept end
  vm.nics = {}

  -- Neither failed nor destroyed is active: its volume references and reservations go.
  vm_volumes_release(vm)

  index_rem('vms:state:' .. vm.state, vm_uuid)
  vm.state = final_state
  index_add('vms:state:' .. vm.state, vm_uuid)
  if vm.state == 'destroyed' then
    -- A destroyed VM leaves every list but the one of destroyed VMs.
    index_rem('vms', vm_uuid)
    index_rem('vms:owner:' .. vm.owner_uuid, vm_uuid)
    if vm.server_uuid and vm.server_uuid ~= NULL then
      index_rem('vms:server:' .. vm.server_uuid, vm_uuid)
    end
    if vm.alias and vm.alias ~= NULL and vm.alias ~= '' then
      index_rem('vms:alias:' .. vm.alias, vm_uuid)
    end
    local role = vm_system_role(vm)
    if role then index_rem('vms:role:' .. role, vm_uuid) end
    vm.released_nics = nil
  end
  redis.call('SET', P .. vk, enc(vm))
  return vm, released
end

-- Seconds since 1970 of an ISO 8601 UTC time ("2026-11-26T12:00:00Z", with or
-- without milliseconds), or nil: times are compared as numbers, never as text, since
-- "…:00.5Z" sorts before "…:00Z".
local function iso_seconds(s)
  if type(s) ~= 'string' then return nil end
  local y, mo, d, h, mi, sec, frac = string.match(s,
    '^(%d%d%d%d)%-(%d%d)%-(%d%d)T(%d%d):(%d%d):(%d%d)(%.?%d*)Z$')
  if not y then return nil end
  y, mo = tonumber(y), tonumber(mo)
  -- Days from 1970-01-01 to the date (proleptic Gregorian: Howard Hinnant's
  -- days_from_civil).
  if mo <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = (mo + 9) % 12
  local doy = math.floor((153 * mp + 2) / 5) + tonumber(d) - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  local days = era * 146097 + doe - 719468
  return days * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60 + tonumber(sec) +
    (tonumber('0' .. frac) or 0)
end

-- The share state a view shows (docs/VOLUMES.md "Share states"): the stored one, or
-- "unknown" when the last probe (share_probed_at) is older than 3 watch periods at
-- `now`: its server's agent has not answered since, so the stored state may be stale.
-- A volume never probed shows what its create stored. `now` is ISO text or seconds
-- since 1970 (a view has redis.call('TIME')[1]); `every_s` defaults to the period the
-- watch of the volume's server recorded (hash share_watch:<server>), else 5.
local function share_state_shown(v, now, every_s)
  local probed = iso_seconds(v.share_probed_at)
  local at = type(now) == 'number' and now or iso_seconds(now)
  if not every_s and type(v.server_uuid) == 'string' then
    every_s = redis.call('HGET', P .. 'share_watch:' .. v.server_uuid, 'every_s')
  end
  if probed and at and at - probed > 3 * (tonumber(every_s) or 5) then return 'unknown' end
  return v.share_state
end

-- ---- Volumes at provision (docs/VOLUMES.md "Volumes at provision") ----------------

-- The time now as a record's timestamp: ISO 8601 with ms (ARGV[4]; from ARGV[2], to
-- the second, when a caller gave no ARGV[4]).
local function now_iso_ms()
  if ARGV[4] and string.match(ARGV[4], '^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d%d%dZ$') then
    return ARGV[4]
  end
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

-- Of the networks `uuids` (a list of uuids; every described network when nil), those
-- that are fabric networks of the owner (owner_uuids empty: any owner's), in the order
-- given (the description's when nil).
local function fabric_networks_of(owner, uuids)
  uuids = uuids or redis.call('ZRANGE', P .. 'networks:described', 0, -1)
  local out, seen = {}, {}
  for _, u in ipairs(uuids) do
    local f = redis.call('HMGET', P .. 'network:' .. u, 'fabric', 'owner_uuids')
    if f[1] == 'true' and not seen[u] then
      local owners = f[2] and cjson.decode(f[2]) or {}
      if type(owners) ~= 'table' then owners = {} end
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

-- A volume's storage instance destroyed behind the control plane's back (its
-- directory gone, found by the NIC reconcile): as sdc-volapi's updater does, a volume
-- being deleted is deleted (its record removed), any other is failed for good, its
-- share in error, and its name freed: its data is gone, so the name may be made anew
-- while the failed record stays to be looked at and deleted. Returns the volume's uuid
-- when there was one.
local function volume_storage_destroyed(vm)
  if vm_system_role(vm) ~= STORAGE_ROLE then return nil end
  local v = volume_get(vm.volume_uuid)
  if not v or v.vm_uuid ~= vm.uuid then return nil end
  if v.state == 'deleting' then
    volume_remove(v)
    return v.uuid
  end
  local before = v.state
  v.state, v.share_state = 'failed', 'error'
  if v.error_since == nil or v.error_since == NULL then v.error_since = now_iso_ms() end
  if redis.call('HGET', P .. 'volume_names:' .. v.owner_uuid, v.name) == v.uuid then
    redis.call('HDEL', P .. 'volume_names:' .. v.owner_uuid, v.name)
  end
  volume_put(v, before)
  return v.uuid
end

-- A volume as a view answers it: with "id" (its uuid) and its share state as shown
-- (share_state_shown at `now_s`). `render` "cloudapi" is RFD 26's CloudAPI rendering:
-- "uuid" only as "id", and no "vm_uuid" nor where its storage lives (server_uuid,
-- export_path); "volapi" (or nil) the whole record. Returns nil and what is wrong for
-- another render.
local function volume_rendered(v, render, now_s)
  if render ~= nil and render ~= 'volapi' and render ~= 'cloudapi' then
    return nil, 'expected volapi or cloudapi, got ' .. cjson.encode(render)
  end
  v.id = v.uuid
  v.share_state = share_state_shown(v, now_s)
  if render == 'cloudapi' then
    v.uuid, v.vm_uuid, v.server_uuid, v.export_path = nil, nil, nil, nil
  end
  return v
end
