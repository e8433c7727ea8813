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

-- ---- Waiting for a migration slot (docs/MIGRATION.md "Waiting for a slot") -------

-- The engine appends each wait of a migrate-* job for one of its tickets, its grant and
-- its leaving the line (canceled, timed out) to the streams the workflows' hold_events
-- name (docs/WORKFLOWS.md "Telling a plugin of waits for holds"): the migration's own
-- stream, which its watchers follow, and the VM's `migration_waits:<vm>`, which only
-- such events go to. A job writes a wait and a grant (or a leave) there only for each
-- ticket it had to wait for: its VM's, its two slots', and a step's own (a handful),
-- so the stream's newest MIG_WAIT_SCAN entries tell every job of the VM waiting now
-- even with several queued behind one another.
local MIG_WAIT_SCAN = 64
-- The workflows whose job makes the record (its uuid is the job's): while they wait,
-- no record exists yet.
local MIG_BEGINNERS = {['migrate-begin'] = true, ['migrate-automatic'] = true,
  ['migrate-schedule'] = true}
local MIG_WAIT_MESSAGE = 'waiting for a migration slot'

-- The server of a resource `migration-slot:<server>`, or nil for another resource.
local function mig_slot_server(res)
  return type(res) == 'string' and string.match(res, '^migration%-slot:(.+)$') or nil
end

-- Epoch milliseconds as a record's timestamp (ISO 8601, UTC, ms).
local function mig_iso_of_ms(ms)
  ms = math.floor(tonumber(ms) or 0)
  local s = math.floor(ms / 1000)
  local z = math.floor(s / 86400) + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) -
    math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400 + (m <= 2 and 1 or 0)
  local sod = s % 86400
  return string.format('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', y, m, d, math.floor(sod / 3600),
    math.floor(sod % 3600 / 60), sod % 60, ms % 1000)
end

-- The newest engine hold event of each job among the newest entries of stream `key`
-- (in the plugin's namespace), newest first; only those still waiting for a slot. An
-- entry's type and job are read from its text (the engine's cjson writes them as
-- "type":"..." and "job_uuid":"..."): only a wait kept is decoded, so a list of many
-- migrations reads each VM's stream without decoding it.
local function mig_slot_waits_in(key)
  local seen, out = {}, {}
  for _, entry in ipairs(redis.call('XREVRANGE', P .. key, '+', '-', 'COUNT', MIG_WAIT_SCAN)) do
    local f = entry[2]
    for i = 1, #f - 1, 2 do
      if f[i] == 'e' then
        local text = f[i + 1]
        local kind = string.match(text, '"type":"(hold_%a+)"')
        local job = string.match(text, '"job_uuid":"([%x%-]+)"')
        if job and (kind == 'hold_wait' or kind == 'hold_granted' or kind == 'hold_left') and
          not seen[job] then
          seen[job] = true
          if kind == 'hold_wait' and string.find(text, '"resource":"migration-slot:', 1, true) then
            local okd, ev = pcall(cjson.decode, text)
            if okd and type(ev) == 'table' and ev.job_uuid == job and mig_slot_server(ev.resource) then
              out[#out + 1] = ev
            end
          end
        end
      end
    end
  end
  return out
end

-- The jobs of VM `vm_uuid` waiting for a migration slot now, newest first.
local function mig_slot_waits(vm_uuid)
  return mig_slot_waits_in('migration_waits:' .. vm_uuid)
end

-- What a view shows of a job's wait (its engine event `ev`).
local function mig_wait_public(ev)
  local action = string.gsub(type(ev.workflow) == 'string' and ev.workflow or '', '^migrate%-', '')
  return {job_uuid = ev.job_uuid, action = action, server_uuid = mig_slot_server(ev.resource),
    resource = ev.resource, capacity = ev.capacity, holders = ev.holders, ahead = ev.ahead,
    since = mig_iso_of_ms(ev.timestamp), message = MIG_WAIT_MESSAGE}
end

-- The progress a view shows for a wait: RFD 34's progress event, its message saying
-- that the job waits for a slot (state `waiting`: nothing of the phase runs yet).
local function mig_wait_progress(w, phase)
  return {type = 'progress', phase = phase, state = 'waiting', message = MIG_WAIT_MESSAGE,
    server_uuid = w.server_uuid, job_uuid = w.job_uuid, started_timestamp = w.since}
end

local function mig_phase_of_action(action)
  if action == 'sync' or action == 'switch' then return action end
  return 'begin'
end

-- The wait of a job of migration `m` among `waits` (mig_slot_waits of its VM), or nil:
-- its own begin's, or, while it is the VM's migration, a sync's or a switch's.
local function mig_wait_of(m, waits)
  if not MIG_ACTIVE[m.state] then return nil end
  local active
  for _, ev in ipairs(waits) do
    if MIG_BEGINNERS[ev.workflow] then
      if ev.job_uuid == m.uuid then return ev end
    else
      active = active or redis.call('GET', P .. 'migration_active:' .. m.vm_uuid) or false
      if active == m.uuid then return ev end
    end
  end
  return nil
end

-- mig_public(m) with, while a job of it waits for a slot, `waiting_for_slot` and the
-- wait as its `progress`.
local function mig_public_waiting(m, waits)
  local o = mig_public(m)
  local ev = mig_wait_of(m, waits or mig_slot_waits(m.vm_uuid))
  if ev then
    o.waiting_for_slot = mig_wait_public(ev)
    o.progress = mig_wait_progress(o.waiting_for_slot,
      mig_phase_of_action(o.waiting_for_slot.action))
  end
  return o
end

-- What a view shows for a begin (automatic, schedule) waiting for its slot, whose
-- record its first step has not made yet: the migration as it will start, `running`
-- in phase `begin` (RFD 34's begin is running from the request on), with
-- `waiting_for_slot` and that progress. Its uuid is its job's, as its record's will be.
local function mig_waiting_begin(ev, vm_uuid)
  local vm = get_json('vm:' .. vm_uuid) or {}
  local w = mig_wait_public(ev)
  return {uuid = ev.job_uuid, vm_uuid = vm_uuid, action = w.action,
    automatic = w.action == 'automatic', state = 'running', phase = 'begin', job_uuid = NULL,
    source_server_uuid = vm.server_uuid or NULL, target_server_uuid = NULL,
    progress_history = {}, progress = mig_wait_progress(w, 'begin'), waiting_for_slot = w}
end

-- The VM of a migrate-* job's target `/migrate-<action>-<vm uuid>`, or nil.
local function mig_vm_of_target(target)
  return type(target) == 'string' and
    string.match(target, '^/migrate%-%a+%-(%x+%-%x+%-%x+%-%x+%-%x+)$') or nil
end

-- The waiting begins of VM `vm_uuid` that have no record yet, newest first, as views
-- show them; `owner` given: none unless the VM is the owner's.
local function mig_waiting_begins(vm_uuid, owner, waits)
  local out = {}
  if owner then
    local vm = get_json('vm:' .. vm_uuid)
    if not vm or vm.owner_uuid ~= owner then return out end
  end
  for _, ev in ipairs(waits or mig_slot_waits(vm_uuid)) do
    if MIG_BEGINNERS[ev.workflow] and redis.call('EXISTS', P .. mig_key(ev.job_uuid)) == 0 then
      out[#out + 1] = mig_waiting_begin(ev, vm_uuid)
    end
  end
  return out
end

-- The waiting begin of uuid `uuid` (its job's), found in its own stream, or nil.
local function mig_waiting_begin_by_uuid(uuid, owner)
  if type(uuid) ~= 'string' or not uuid_ok(uuid) then return nil end
  local ev = mig_slot_waits_in(mig_events_key(uuid))[1]
  if not ev or ev.job_uuid ~= uuid or not MIG_BEGINNERS[ev.workflow] then return nil end
  local vm_uuid = mig_vm_of_target(ev.target)
  if not vm_uuid then return nil end
  return mig_waiting_begins(vm_uuid, owner, {ev})[1]
end

-- What GET /migrations/:uuid and its watch show for `uuid` (a migration's or its VM's),
-- as `owner` (nil: the operator) may see it: the record, or else a begin waiting for
-- its slot with no record yet (answered from its wait), or neither. A record of
-- another owner is answered as absent.
local function mig_lookup_viewed(uuid, owner)
  local m = mig_get(uuid)
  if m and owner and not redis.call('ZSCORE', P .. 'migrations:owner:' .. owner, m.uuid) then
    return nil, nil
  end
  if m then return m, nil end
  local w = mig_waiting_begin_by_uuid(uuid, owner)
  if not w and type(uuid) == 'string' and uuid_ok(uuid) then
    w = mig_waiting_begins(uuid, owner)[1]
  end
  if w then return nil, w end
  return mig_find_viewed(uuid, owner), nil
end
