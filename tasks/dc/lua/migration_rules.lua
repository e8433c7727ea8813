-- migration_rules.lua: put after prelude.lua and volume_rules.lua in every migration_*
-- script and every view_migration* view (lua_embed.py). The migration record's helpers
-- and the rules of RFD 34 that more than one script applies (docs/MIGRATION.md).

local MIG_STATES = {scheduled = true, running = true, paused = true, aborted = true,
  failed = true, successful = true}
-- What `state=active` lists: a migration that still holds its VM.
local MIG_ACTIVE = {running = true, paused = true, scheduled = true, failed = true}

local function mig_given(v) return v ~= nil and v ~= NULL end

-- An error value {status, code, message}; mig_refuse answers it.
local function mig_err(status, code, msg) return {status = status, code = code, message = msg} end
local function mig_refuse(e) return refuse(e.status, e.code, e.message) end

-- cjson writes an empty Lua table as {}: the record's lists are put right.
local function mig_enc(v)
  local s = enc(v)
  return (string.gsub(s, '"([%a_]+)":{}', function(k)
    if k == 'progress_history' or k == 'reserved_nics' or k == 'lines' then
      return '"' .. k .. '":[]'
    end
  end))
end

local function mig_key(uuid) return 'migration:' .. uuid end
local function mig_events_key(uuid) return 'migration:' .. uuid .. ':events' end

-- The state each record had when this script read it: mig_put moves the state
-- indexes from it.
local mig_read_state = {}

-- The record, or nil.
local function mig_get(uuid)
  if type(uuid) ~= 'string' then return nil end
  local m = get_json(mig_key(uuid))
  if m then mig_read_state[uuid] = m.state end
  return m
end

-- Writes the record and keeps its state indexes (`migrations:state:<state>`, and
-- `migrations:active` while the state is one `active` lists), scored by creation as
-- `migrations` is, so that a view filtered by state walks only those.
local function mig_put(m)
  redis.call('SET', P .. mig_key(m.uuid), mig_enc(m))
  local was = mig_read_state[m.uuid]
  if was ~= m.state then
    local score = redis.call('ZSCORE', P .. 'migrations', m.uuid)
    if score then
      if was then redis.call('ZREM', P .. 'migrations:state:' .. was, m.uuid) end
      redis.call('ZADD', P .. 'migrations:state:' .. m.state, score, m.uuid)
      if MIG_ACTIVE[m.state] then
        redis.call('ZADD', P .. 'migrations:active', score, m.uuid)
      else
        redis.call('ZREM', P .. 'migrations:active', m.uuid)
      end
      mig_read_state[m.uuid] = m.state
    end
  end
end

-- The record as every answer and view shows it: everything but `secret`. A copy.
local function mig_public(m)
  local o = {}
  for k, v in pairs(m) do
    if k ~= 'secret' then o[k] = v end
  end
  -- A boolean the workflows pass on to dc.instance_start's autoboot as it is.
  o.vm_was_running = m.vm_state_before == 'running'
  return o
end

-- One event (a progress event, a history entry, the end) onto the migration's stream,
-- which watchers follow (field `e`, its JSON text). The stream is trimmed near 2000
-- entries: the history is in the record, the stream only has to cover a watcher's gap.
local function mig_event(m, ev)
  redis.call('XADD', P .. mig_events_key(m.uuid), 'MAXLEN', '~', 2000, '*', 'e', mig_enc(ev))
end

-- Milliseconds between two ISO times, or nil.
local function mig_ms_between(a, b)
  local x, y = iso_seconds(a), iso_seconds(b)
  if not x or not y then return nil end
  return math.floor((y - x) * 1000 + 0.5)
end

-- The history entry still running (the last one, when its state is running), or nil.
local function mig_open_entry(m)
  local h = m.progress_history
  local last = h and h[#h]
  if last and last.state == 'running' then return last end
  return nil
end

-- Ends the running history entry with `state` (successful, failed, paused, ...) at
-- `now`; the closed entry is published. Nothing when none is running.
local function mig_close_entry(m, state, now, err)
  local e = mig_open_entry(m)
  if not e then return end
  e.state = state
  e.finished_timestamp = now
  e.duration_ms = mig_ms_between(e.started_timestamp, now)
  if state == 'successful' and type(e.total_progress) == 'number' then
    e.current_progress = e.total_progress
  end
  if err then e.error = err end
  mig_event(m, e)
end

-- Appends a history entry (after ending the one running: one runs at a time) and
-- publishes it. `fields` may set current_progress, total_progress, state, pass, ...
local function mig_add_entry(m, phase, message, now, job_uuid, fields)
  mig_close_entry(m, 'successful', now)
  local e = {type = 'progress', phase = phase, state = 'running', message = message,
    started_timestamp = now, current_progress = 0, total_progress = 100,
    job_uuid = job_uuid or NULL}
  for k, v in pairs(fields or {}) do e[k] = v end
  m.progress_history = m.progress_history or {}
  m.progress_history[#m.progress_history + 1] = e
  mig_event(m, e)
  return e
end

-- The one end event of a stop of running (paused, scheduled, successful, aborted,
-- failed): DOMAIN 5.5.
local function mig_end_event(m, message)
  local ev = {type = 'end', phase = m.phase, state = m.state}
  if message then ev.message = message end
  mig_event(m, ev)
end

-- Idempotence per (job, phase, event): true the first time a key is marked.
local function mig_mark_once(uuid, key)
  return redis.call('SADD', P .. mig_key(uuid) .. ':done', key) == 1
end

-- Gives back an allocation's RAM and disk on its server, once (alloc.released).
local function mig_alloc_release(alloc)
  if type(alloc) ~= 'table' or alloc.released == true then return end
  local sk = P .. 'server:' .. alloc.server_uuid
  if redis.call('EXISTS', sk) == 1 then
    redis.call('HINCRBY', sk, 'ram_committed_mib', -alloc.ram)
    redis.call('HINCRBY', sk, 'disk_committed_mib', -alloc.disk)
  end
  alloc.released = true
end

-- Commits an allocation's RAM and disk on its server again (a rollback's source).
local function mig_alloc_commit(alloc)
  if type(alloc) ~= 'table' or alloc.released ~= true then return end
  local sk = P .. 'server:' .. alloc.server_uuid
  redis.call('HINCRBY', sk, 'ram_committed_mib', alloc.ram)
  redis.call('HINCRBY', sk, 'disk_committed_mib', alloc.disk)
  alloc.released = nil
end

-- The free RAM and disk (MiB) of a server, its rack and platform, or nil when unknown.
local function mig_server_free(u)
  local f = redis.call('HMGET', P .. 'server:' .. u, 'ram_mib', 'disk_mib', 'ram_committed_mib',
    'disk_committed_mib', 'rack', 'platform_version', 'data_root')
  if not f[1] then return nil end
  return {ram = tonumber(f[1]) - tonumber(f[3] or 0), disk = tonumber(f[2]) - tonumber(f[4] or 0),
    rack = f[5], platform = f[6] or '', data_root = f[7]}
end

-- The servers hosting the VMs `uuids` (a set of server uuids), or nil and an error
-- naming the first VM that does not exist; `path` names the parameter.
local function mig_servers_of(uuids, path)
  local out = {}
  for i, u in ipairs(uuids) do
    local vm = get_json('vm:' .. u)
    if not vm or vm.state == 'destroyed' or not mig_given(vm.server_uuid) then
      return nil, mig_err(404, 'ResourceNotFound', path .. '[' .. (i - 1) .. ']: vm ' .. u ..
        ' does not exist')
    end
    out[vm.server_uuid] = true
  end
  return out
end

-- Compares dotted platform versions ("20261126T120000Z" or "1.2.3"): -1, 0, 1.
local function mig_version_cmp(a, b)
  if a == b then return 0 end
  return a < b and -1 or 1
end

-- The target of a VM's migration, read-only (DOMAIN 5.2 "Target selection"): a
-- server with room for the VM's actual allocation (ram, disk: never the package's, a
-- resized VM commits what it has), never the source, a platform not older than the
-- source's, within the affinity ({near: [vm], far: [vm], rack: "same"|"other"}: near
-- the servers of those VMs, far none of them, rack the source's or another); first a
-- server in the source's rack (DOMAIN 5.2: a VM's networks and storage are the rack's,
-- so a move within it changes least; test_migration_placement's test 28), then
-- placement's rule (docs/DATACENTER.md "Placement"): the most free RAM, the rack with
-- fewer of the owner's instances, the lowest uuid. A pinned server is the only
-- candidate (the operator's choice bypasses affinity, not room). Returns the server
-- uuid or nil and an error.
local function mig_choose_target(vm, pinned, affinity)
  local al = vm.allocation
  if not mig_given(al) then
    return nil, mig_err(409, 'InvalidState', 'vm ' .. vm.uuid .. ' holds no allocation')
  end
  local ram, disk = tonumber(al.ram), tonumber(al.disk)
  local source = vm.server_uuid
  local src = mig_server_free(source) or {platform = ''}
  local want = ram .. ' MiB of RAM and ' .. disk .. ' MiB of disk'
  if pinned then
    if pinned == source then
      return nil, mig_err(422, 'InvalidArgument', 'target_server_uuid: ' .. pinned ..
        ' is the source server of vm ' .. vm.uuid .. ': a migration moves it elsewhere')
    end
    local f = mig_server_free(pinned)
    if not f then
      return nil, mig_err(404, 'ResourceNotFound', 'target_server_uuid: server ' .. pinned ..
        ' does not exist')
    end
    if f.platform ~= '' and src.platform ~= '' and mig_version_cmp(f.platform, src.platform) < 0 then
      return nil, mig_err(409, 'NoAllocatableServersError', 'server ' .. pinned .. ' (pinned) runs ' ..
        'platform ' .. f.platform .. ', older than the source\'s ' .. src.platform)
    end
    if f.ram < ram or f.disk < disk then
      return nil, mig_err(409, 'NoAllocatableServersError', 'server ' .. pinned .. ' (pinned) has ' ..
        'no room for ' .. want .. ' (free: ' .. f.ram .. ' MiB of RAM, ' .. f.disk .. ' MiB of disk)')
    end
    return pinned
  end
  local near, far, e
  if affinity then
    -- An empty list asks nothing.
    if affinity.near and #affinity.near > 0 then
      near, e = mig_servers_of(affinity.near, 'affinity.near')
      if not near then return nil, e end
    end
    if affinity.far and #affinity.far > 0 then
      far, e = mig_servers_of(affinity.far, 'affinity.far')
      if not far then return nil, e end
    end
  end
  local spread = redis.call('HGETALL', P .. 'owner_racks:' .. tostring(vm.owner_uuid))
  local in_rack = {}
  for i = 1, #spread, 2 do in_rack[spread[i]] = tonumber(spread[i + 1]) end
  local chosen, best_near, best_ram, best_owned
  for _, u in ipairs(redis.call('ZRANGE', P .. 'servers', 0, -1)) do
    local f = u ~= source and mig_server_free(u)
    local fits = f and f.ram >= ram and f.disk >= disk and
      (f.platform == '' or src.platform == '' or mig_version_cmp(f.platform, src.platform) >= 0) and
      (not near or near[u]) and (not far or not far[u]) and
      (not affinity or type(affinity.rack) ~= 'string' or
        (affinity.rack == 'same') == (f.rack == src.rack))
    if fits then
      local owned = in_rack[f.rack] or 0
      local near_src = (src.rack ~= nil and f.rack == src.rack) and 1 or 0
      if not chosen or near_src > best_near or (near_src == best_near and (f.ram > best_ram or
        (f.ram == best_ram and owned < best_owned))) then
        chosen, best_near, best_ram, best_owned = u, near_src, f.ram, owned
      end
    end
  end
  if not chosen then
    local why = affinity and ' within its affinity ' .. cjson.encode(affinity) or ''
    return nil, mig_err(409, 'NoAllocatableServersError', 'no server but the source has room for ' ..
      want .. ' (vm ' .. vm.uuid .. ')' .. why)
  end
  return chosen
end

-- Whether a switch job may start on a migration that failed: the one rule of the way
-- forward from a failed switch (docs/MIGRATION.md "After a failure"). Only a switch
-- that failed once it had swapped (switch_step >= 5: the VM's record, NICs and
-- allocation are the target's, its disks verified at step 3) is finished forward: the
-- new switch job makes no pass and no verify (the target may already run, from step
-- 6), and runs the swap and what follows again, each idempotent. A switch that failed
-- before the swap, and a failed begin or sync, are aborted instead (the source still
-- has the VM).
local function mig_switch_resumes(m)
  return m.state == 'failed' and m.phase == 'switch' and (tonumber(m.switch_step) or 0) >= 5
end

-- The refusal of a new migration of a VM whose migration_active names `active`.
local function mig_active_refusal(vm_uuid, active)
  local m = mig_get(active)
  if m and m.state == 'successful' then
    return mig_err(409, 'PreviousMigration', 'A previous migration exists for this instance, ' ..
      'use migration finalize to complete it.')
  end
  return mig_err(409, 'MigrationInProgress', 'An active migration already exists for this ' ..
    'instance (vm ' .. vm_uuid .. ', migration ' .. active .. ')')
end

-- A disk path under the source's data root put under the target's, or the instance's
-- layout there (<root>/<vm>/disks/disk<N>.img, N the PCI function) when it is not.
local function mig_reroot(path, from_root, to_root, vm_uuid, pci_slot)
  if type(path) == 'string' and type(from_root) == 'string' and
    string.sub(path, 1, #from_root + 1) == from_root .. '/' then
    return to_root .. string.sub(path, #from_root + 1)
  end
  local n = type(pci_slot) == 'string' and string.match(pci_slot, ':(%d+)$') or '0'
  return to_root .. '/' .. vm_uuid .. '/disks/disk' .. n .. '.img'
end

-- A storage instance's export path under the source's data root put under the
-- target's, or the instance's layout there (<root>/<vm>/export) when it is not.
local function mig_reroot_export(path, from_root, to_root, vm_uuid)
  if type(path) == 'string' and type(from_root) == 'string' and
    string.sub(path, 1, #from_root + 1) == from_root .. '/' then
    return to_root .. string.sub(path, #from_root + 1)
  end
  return to_root .. '/' .. vm_uuid .. '/export'
end

-- A storage instance moving to server `to`: its volume's server_uuid and export_path
-- move with it (filesystem_path and share_endpoint name its address, which the NICs
-- keep), its share is `starting` until the watch sees it run there, and every
-- consumer's record names the new export_path and is asked to remount: the share
-- watch of each consumer's server re-points its links (docs/VOLUMES.md "Consumers'
-- mounts"). Anything else: nothing.
local function mig_move_volume(vm, to, froot, troot)
  if not vm_system_role(vm) or type(vm.volume_uuid) ~= 'string' or not troot then return end
  local v = volume_get(vm.volume_uuid)
  if not v or v.vm_uuid ~= vm.uuid then return end
  local before = v.state
  local export = mig_reroot_export(v.export_path, froot, troot, vm.uuid)
  local now = now_iso_ms()
  v.server_uuid = to
  v.export_path = export
  v.share_state = 'starting'
  for _, c in ipairs(v.refs or {}) do
    local cvm = get_json('vm:' .. c)
    if cvm then
      for _, mnt in ipairs(cvm.volumes or {}) do
        if type(mnt) == 'table' and mnt.volume_uuid == v.uuid then mnt.export_path = export end
      end
      cvm.remount_requested_at = now
      redis.call('SET', P .. 'vm:' .. c, enc(cvm))
    end
  end
  volume_put(v, before)
end

-- Moves a VM's record, disks, NICs and indexes from server `from` to `to`, its
-- allocation becoming `alloc` (the committed counters are the caller's: a migration
-- commits and releases them at its own points). The `ip:` records are not touched:
-- they stay taken by the VM throughout, so no provision can get one. Returns the NICs.
local function mig_move_vm(vm, from, to, alloc)
  local froot = redis.call('HGET', P .. 'server:' .. from, 'data_root')
  local troot = redis.call('HGET', P .. 'server:' .. to, 'data_root')
  local old = vm.allocation
  redis.call('HINCRBY', P .. 'server:' .. from, 'instances', -1)
  redis.call('HINCRBY', P .. 'server:' .. to, 'instances', 1)
  if mig_given(old) and old.rack then
    redis.call('HINCRBY', P .. 'owner_racks:' .. vm.owner_uuid, old.rack, -1)
  end
  if alloc.rack then redis.call('HINCRBY', P .. 'owner_racks:' .. vm.owner_uuid, alloc.rack, 1) end
  index_rem('vms:server:' .. from, vm.uuid)
  index_add('vms:server:' .. to, vm.uuid)
  vm.server_uuid = to
  vm.allocation = {server_uuid = to, ram = alloc.ram, disk = alloc.disk, rack = alloc.rack}
  for _, d in ipairs(vm.disks or {}) do
    if d.path ~= nil or troot then d.path = mig_reroot(d.path, froot, troot, vm.uuid, d.pci_slot) end
  end
  mig_move_volume(vm, to, froot, troot)
  for _, nic in ipairs(vm.nics or {}) do
    nic.cn_uuid = to
    index_rem('nics:cn:' .. from, nic.mac)
    index_add('nics:cn:' .. to, nic.mac)
    local rec = get_json('nic:' .. nic.mac)
    if rec then
      rec.cn_uuid = to
      redis.call('SET', P .. 'nic:' .. nic.mac, enc(rec))
    end
  end
  redis.call('SET', P .. 'vm:' .. vm.uuid, enc(vm))
  return vm.nics or {}
end

-- The end of a migration's hold on its VM: `migrating` and `migration_uuid` cleared.
local function mig_vm_release(m)
  local vm = get_json('vm:' .. m.vm_uuid)
  if not vm then return end
  if vm.migration_uuid == m.uuid or vm.migration_uuid == nil or vm.migration_uuid == NULL then
    vm.migrating = false
    vm.migration_uuid = nil
    redis.call('SET', P .. 'vm:' .. vm.uuid, enc(vm))
  end
end

-- The record of `uuid` for a step, or nil and the error naming it.
local function mig_for_step(uuid)
  if type(uuid) ~= 'string' or not uuid_ok(uuid) then
    return nil, mig_err(422, 'InvalidArgument', 'migration_uuid: expected a UUID, got ' ..
      cjson.encode(uuid))
  end
  local m = mig_get(uuid)
  if not m then
    return nil, mig_err(404, 'MigrationNotFound', 'migration ' .. uuid .. ' does not exist')
  end
  return m
end

-- The migration a view shows for `uuid`: the migration of that uuid, else the latest
-- of the VM of that uuid; nil when none, or when `owner` is given and the migration
-- is not of one of the owner's VMs.
local function mig_find_viewed(uuid, owner)
  if type(uuid) ~= 'string' then return nil end
  local m = mig_get(uuid)
  if not m then
    local latest = redis.call('ZREVRANGE', P .. 'migrations:vm:' .. uuid, 0, 0)
    if #latest == 0 then return nil end
    m = mig_get(latest[1])
  end
  if m and owner and not redis.call('ZSCORE', P .. 'migrations:owner:' .. owner, m.uuid) then
    return nil
  end
  return m
end
