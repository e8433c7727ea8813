-- dc.share_states: the control's half of volume-share-watch (docs/VOLUMES.md "Share
-- states"), one script per tick so that a volume's share state, its state and its
-- consumers' remount requests move together.
-- ARGV[1]: {"server_uuid", "now" (ISO, ms), "every_s"? (the watch's period, kept in the
-- hash share_watch:<server_uuid> {every_s, probed_at} for the views), and either
--   "probe": dc.share_probe's answer  (the step `apply`), or
--   "started": [storage vm uuid], "remounted": [consumer vm uuid]  (the step `settle`)}.
-- A volume in creating, deleting or rolling_back is never changed: the job in flight
-- owns it. A volume goes failed -> ready here only if this watch made it failed (its
-- error_since is set): one that failed at create stays failed.
local a = cjson.decode(ARGV[1])
local UUID = '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$'
local BUSY = {creating = true, deleting = true, rolling_back = true}

local function bad(msg) return refuse(0, 'InvalidArgument', msg) end
if type(a.server_uuid) ~= 'string' or not string.match(a.server_uuid, UUID) then
  return bad('server_uuid: expected a UUID, got ' .. cjson.encode(a.server_uuid))
end
local now = a.now
if now == nil or now == NULL then now = ARGV[2] end
local now_s = iso_seconds(now)
if not now_s then return bad('now: expected an ISO 8601 UTC time, got ' .. cjson.encode(now)) end

local every_s = a.every_s
if every_s ~= nil and every_s ~= NULL and
  (type(every_s) ~= 'number' or every_s < 1 or every_s ~= math.floor(every_s)) then
  return bad('every_s: expected a positive integer of seconds, got ' .. cjson.encode(every_s))
end

local function uuid_list(key)
  local l = a[key]
  if l == nil or l == NULL then return {}, nil end
  if type(l) ~= 'table' then return nil, bad(key .. ': expected an array of uuids') end
  for i, u in ipairs(l) do
    if type(u) ~= 'string' or not string.match(u, UUID) then
      return nil, bad(key .. '[' .. (i - 1) .. ']: expected a UUID, got ' .. cjson.encode(u))
    end
  end
  return l, nil
end

-- The storage VM's volume when it is this server's and this VM is its storage, else nil.
local function storage_volume(vm_uuid, volume_uuid)
  local vm = get_json('vm:' .. vm_uuid)
  if vm and volume_uuid == nil then volume_uuid = vm.volume_uuid end
  local v = volume_get(volume_uuid)
  if not v or v.vm_uuid ~= vm_uuid then return nil end
  if v.server_uuid ~= nil and v.server_uuid ~= NULL and v.server_uuid ~= a.server_uuid then
    return nil
  end
  return v
end

local function share_up(v)
  local before = v.state
  v.share_state = 'running'
  if v.state == 'failed' and v.error_since ~= nil and v.error_since ~= NULL then
    v.state = 'ready'
  end
  v.error_since = NULL
  v.share_probed_at = now
  volume_put(v, before)
end

-- {"ok": {k: list, ...}} with each list written as an array even when empty (enc
-- writes an empty table of another name as {}).
local function ok_lists(t)
  local parts = {}
  for k, l in pairs(t) do
    parts[#parts + 1] = cjson.encode(k) .. ':' .. (#l == 0 and '[]' or cjson.encode(l))
  end
  table.sort(parts)
  return '{"ok":{' .. table.concat(parts, ',') .. '}}'
end

local function set_vm(vm) redis.call('SET', P .. 'vm:' .. vm.uuid, enc(vm)) end

-- A share in error: since when (kept from the first tick that saw it), and every
-- consumer asked to remount, on every tick while it lasts (seed 003).
local function in_error(v)
  if v.error_since == nil or v.error_since == NULL then v.error_since = now end
  for _, r in ipairs(v.refs or {}) do
    local vm = get_json('vm:' .. r)
    if vm then
      vm.remount_requested_at = now
      set_vm(vm)
    end
  end
end

-- ---- settle: what the restart step started and remounted ----------------------------
if a.probe == nil or a.probe == NULL then
  local started, e1 = uuid_list('started')
  if e1 then return e1 end
  local remounted, e2 = uuid_list('remounted')
  if e2 then return e2 end
  local running, marked = {}, {}
  for _, u in ipairs(started) do
    local v = storage_volume(u, nil)
    if v and not BUSY[v.state] then
      share_up(v)
      running[#running + 1] = v.uuid
    end
  end
  for _, u in ipairs(remounted) do
    local vm = get_json('vm:' .. u)
    if vm and vm.server_uuid == a.server_uuid then
      vm.remounted_at = now
      set_vm(vm)
      marked[#marked + 1] = u
    end
  end
  return ok_lists({running = running, remounted = marked})
end

-- ---- apply: the probe's findings ---------------------------------------------------
local probe = a.probe
if type(probe) ~= 'table' then return bad('probe: expected dc.share_probe\'s answer') end
if probe.server_uuid ~= nil and probe.server_uuid ~= a.server_uuid then
  return bad('probe: it is server ' .. tostring(probe.server_uuid) .. '\'s, not ' .. a.server_uuid .. '\'s')
end
local storage, consumers = probe.storage or {}, probe.consumers or {}
if type(storage) ~= 'table' or type(consumers) ~= 'table' then
  return bad('probe: expected {storage: [...], consumers: [...]}')
end
for i, s in ipairs(storage) do
  if type(s) ~= 'table' or type(s.vm_uuid) ~= 'string' or not string.match(s.vm_uuid, UUID) then
    return bad('probe.storage[' .. (i - 1) .. '].vm_uuid: expected a UUID')
  end
end
for i, c in ipairs(consumers) do
  if type(c) ~= 'table' or type(c.vm_uuid) ~= 'string' or not string.match(c.vm_uuid, UUID) then
    return bad('probe.consumers[' .. (i - 1) .. '].vm_uuid: expected a UUID')
  end
end

-- What a view needs to tell a stale probe of this server (share_state_shown).
if type(every_s) == 'number' then
  redis.call('HSET', P .. 'share_watch:' .. a.server_uuid, 'every_s', every_s, 'probed_at', now)
end

local restart, remount, exports = {}, {}, {}
for _, s in ipairs(storage) do
  local vol = s.volume_uuid
  if vol == NULL then vol = nil end
  local v = storage_volume(s.vm_uuid, vol)
  if v and not BUSY[v.state] then
    local before = v.state
    if s.state == 'running' and s.alive == true then
      share_up(v)
    elseif s.state == 'running' then
      -- Dead while it should run: error, the volume failed, every consumer asked to
      -- remount on every tick while it lasts (seed 003).
      local seen_before = v.error_since ~= nil and v.error_since ~= NULL and
        (iso_seconds(v.error_since) or now_s) < now_s
      v.share_state = 'error'
      if v.state == 'ready' then v.state = 'failed' end
      in_error(v)
      -- Restarted only once an earlier tick saw it dead too, so a share between a
      -- stop and a start of someone else's is not started twice.
      if seen_before then
        v.share_state = 'starting'
        restart[#restart + 1] = s.vm_uuid
      end
      v.share_probed_at = now
      volume_put(v, before)
    elseif s.state == 'stopped' then
      v.share_state = 'stopped'
      v.share_probed_at = now
      volume_put(v, before)
    end
  end
end

-- A storage instance of this server that the probe did not find (its directory gone:
-- destroyed behind the control plane's back) serves nothing: its volume is failed and
-- its share in error, as sdc-volapi does for a storage VM destroyed (DOMAIN 1.1), so a
-- volume is never ready without its export. A volume whose job is in flight is left to
-- that job; nothing is restarted (there is nothing to start).
local probed = {}
for _, s in ipairs(storage) do probed[s.vm_uuid] = true end
for _, u in ipairs(redis.call('ZRANGE', P .. 'vms:role:nfsvolumestorage', 0, -1)) do
  local vm = not probed[u] and get_json('vm:' .. u)
  if vm and vm.server_uuid == a.server_uuid and (vm.state == 'running' or vm.state == 'stopped') then
    local v = storage_volume(u, vm.volume_uuid)
    if v and not BUSY[v.state] and (v.state ~= 'failed' or v.share_state ~= 'error') then
      local before = v.state
      v.state, v.share_state = 'failed', 'error'
      in_error(v)
      v.share_probed_at = now
      volume_put(v, before)
    end
  end
end

-- Consumers asked to remount since their last remount (or whose links are broken),
-- once every volume they mount is running again.
for _, c in ipairs(consumers) do
  local vm = get_json('vm:' .. c.vm_uuid)
  if vm and vm.server_uuid == a.server_uuid then
    local asked = iso_seconds(vm.remount_requested_at)
    local done = iso_seconds(vm.remounted_at) or -1
    if (asked and asked > done) or c.mounts_ok == false then
      local all_running = #(vm.volumes or {}) > 0
      for _, m in ipairs(vm.volumes or {}) do
        local v = volume_get(m.volume_uuid)
        if not v or v.share_state ~= 'running' then all_running = false end
      end
      if all_running then
        remount[#remount + 1] = c.vm_uuid
        for _, m in ipairs(vm.volumes or {}) do
          local v = volume_get(m.volume_uuid)
          if v and type(v.export_path) == 'string' then exports[v.uuid] = v.export_path end
        end
      end
    end
  end
end
-- exports: where each remounted consumer's volumes are served now (a storage instance
-- migrated moves its export), which the restart writes into their vm.json first.
local answer = ok_lists({restart = restart, remount = remount})
if next(exports) then
  answer = string.sub(answer, 1, -3) .. ',"exports":' .. cjson.encode(exports) .. '}}'
end
return answer
