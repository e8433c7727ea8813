-- dc.migration_check: the admission check of every migrate-* workflow. Reads only.
-- ARGV[1]: {"action", "vm_uuid", "target", "params", "settings": {allow_user_migrations,
-- migration_scheduler, max_running_migrations_per_cn, migration_send_mbps_limit}}.
-- Every parameter is checked (an unknown one is refused naming it), then the VM, who
-- calls (owner_uuid given: a user), the migration's state for the action, and for
-- begin, automatic and schedule the target (read-only: the claim commits it). Answers
-- {vm_uuid, migration_uuid, source_server_uuid, target_server_uuid, slots, vm_state,
-- automatic, send_mbps_limit, target_lost (an abort's: its target server is lost)}.
local a = cjson.decode(ARGV[1])
local set = type(a.settings) == 'table' and a.settings or {}
local p = a.params
if p == nil or p == NULL then p = {} end
if type(p) ~= 'table' then
  return refuse(422, 'InvalidArgument', 'params: expected an object, got ' .. cjson.encode(p))
end
local STARTS = {begin = true, automatic = true, schedule = true}
local ACTIONS = {begin = true, automatic = true, schedule = true, sync = true, switch = true,
  pause = true, abort = true, rollback = true, finalize = true, estimate = true}
if not ACTIONS[a.action] then
  return refuse(422, 'InvalidArgument', 'action: expected one of begin, automatic, schedule, ' ..
    'sync, switch, pause, abort, rollback, finalize, estimate, got ' .. cjson.encode(a.action))
end
local act = a.action

-- The parameters, and the actions that take each (nil: every action).
local TAKES = {vm_uuid = false, owner_uuid = false,
  target_server_uuid = STARTS, affinity = STARTS, automatic = {begin = true, automatic = true},
  send_mbps_limit = {begin = true, automatic = true, schedule = true, sync = true, switch = true,
    estimate = true},
  scheduled_timestamp = {schedule = true, switch = true}, target_lost = {abort = true}}
local names = {}
for k in pairs(p) do names[#names + 1] = k end
table.sort(names)
for _, k in ipairs(names) do
  local takes = TAKES[k]
  if takes == nil then
    return refuse(422, 'InvalidArgument', 'params.' .. k .. ': unknown parameter of a migration')
  end
  if takes and not takes[act] and mig_given(p[k]) then
    return refuse(422, 'InvalidArgument', 'params.' .. k .. ': a migration ' .. act ..
      ' does not take it')
  end
end

local vm_uuid = p.vm_uuid
if not mig_given(vm_uuid) then vm_uuid = a.vm_uuid end
if not uuid_ok(vm_uuid) then
  return refuse(422, 'InvalidArgument', 'params.vm_uuid: expected a UUID, got ' .. cjson.encode(vm_uuid))
end
if mig_given(a.vm_uuid) and a.vm_uuid ~= vm_uuid then
  return refuse(422, 'InvalidArgument', 'vm_uuid: ' .. cjson.encode(a.vm_uuid) ..
    ' differs from params.vm_uuid ' .. vm_uuid)
end
local want_target = '/migrate-' .. act .. '-' .. vm_uuid
if a.target ~= want_target then
  return refuse(422, 'InvalidArgument', 'target: a migration ' .. act .. ' of vm ' .. vm_uuid ..
    ' has the target ' .. want_target .. ', not ' .. cjson.encode(a.target))
end
local owner = p.owner_uuid
if owner == NULL then owner = nil end
if owner ~= nil and not uuid_ok(owner) then
  return refuse(422, 'InvalidArgument', 'params.owner_uuid: expected a UUID, got ' .. cjson.encode(owner))
end
local pinned = p.target_server_uuid
if pinned == NULL then pinned = nil end
if pinned ~= nil and not uuid_ok(pinned) then
  return refuse(422, 'InvalidArgument', 'params.target_server_uuid: expected a UUID, got ' ..
    cjson.encode(pinned))
end
local affinity = p.affinity
if affinity == NULL then affinity = nil end
if affinity ~= nil then
  -- An empty object (which cjson cannot tell from an empty list) asks nothing.
  if type(affinity) ~= 'table' or #affinity > 0 then
    return refuse(422, 'InvalidArgument', 'params.affinity: expected an object with near, far ' ..
      'or rack, got ' .. cjson.encode(affinity))
  end
  for k, v in pairs(affinity) do
    if k == 'near' or k == 'far' then
      if type(v) ~= 'table' or (next(v) ~= nil and #v == 0) or #v > 100 then
        return refuse(422, 'InvalidArgument', 'params.affinity.' .. k .. ': expected a list of ' ..
          'at most 100 VM uuids, got ' .. cjson.encode(v))
      end
      for i, u in ipairs(v) do
        if not uuid_ok(u) then
          return refuse(422, 'InvalidArgument', 'params.affinity.' .. k .. '[' .. (i - 1) ..
            ']: expected a UUID, got ' .. cjson.encode(u))
        end
      end
    elseif k == 'rack' then
      if v ~= 'same' and v ~= 'other' then
        return refuse(422, 'InvalidArgument', 'params.affinity.rack: expected "same" or "other", ' ..
          'got ' .. cjson.encode(v))
      end
    else
      return refuse(422, 'InvalidArgument', 'params.affinity.' .. tostring(k) ..
        ': unknown (near, far, rack)')
    end
  end
end
if mig_given(p.automatic) and type(p.automatic) ~= 'boolean' then
  return refuse(422, 'InvalidArgument', 'params.automatic: expected a boolean, got ' ..
    cjson.encode(p.automatic))
end
if mig_given(p.send_mbps_limit) and (type(p.send_mbps_limit) ~= 'number' or
  p.send_mbps_limit <= 0 or p.send_mbps_limit > 1000000) then
  return refuse(422, 'InvalidArgument', 'params.send_mbps_limit: expected a positive number of ' ..
    'megabits per second (at most 1000000), got ' .. cjson.encode(p.send_mbps_limit))
end
if mig_given(p.target_lost) and type(p.target_lost) ~= 'boolean' then
  return refuse(422, 'InvalidArgument', 'params.target_lost: expected a boolean, got ' ..
    cjson.encode(p.target_lost))
end
local target_lost = p.target_lost == true
if act == 'schedule' then
  if set.migration_scheduler == false then
    return refuse(409, 'SchedulerDisabled', 'migration schedule: the scheduler is disabled ' ..
      '(setting migration_scheduler); an on-demand or automatic migration still works')
  end
  local at = iso_seconds(p.scheduled_timestamp)
  if not at then
    return refuse(422, 'InvalidArgument', 'params.scheduled_timestamp: expected an ISO 8601 UTC ' ..
      'time (2026-11-26T12:00:00Z), got ' .. cjson.encode(p.scheduled_timestamp))
  end
  if at <= iso_seconds(ARGV[2]) then
    return refuse(422, 'InvalidArgument', 'params.scheduled_timestamp: ' .. p.scheduled_timestamp ..
      ' is not in the future (now ' .. ARGV[2] .. ')')
  end
end

-- The VM.
local vm = get_json('vm:' .. vm_uuid)
if not vm or vm.state == 'destroyed' then
  return refuse(404, 'ResourceNotFound', 'vm ' .. vm_uuid .. (vm and ' was destroyed' or ' does not exist'))
end
if owner and vm.owner_uuid ~= owner then
  return refuse(404, 'ResourceNotFound', 'vm ' .. vm_uuid .. ' does not exist')
end
-- A storage instance (RFD 26): the operator's alone (DOMAIN 5.2), and only while its
-- volume is not being deleted, rolled back or changed by a snapshot job: such a job
-- stops, starts or rewrites the share under the transfer's feet.
if vm_system_role(vm) then
  if owner then
    return refuse(403, 'NotAllowed', 'User migration on this VM not allowed')
  end
  if STARTS[act] or act == 'sync' or act == 'switch' then
    local v = type(vm.volume_uuid) == 'string' and volume_get(vm.volume_uuid) or nil
    if not v then
      return refuse(409, 'InvalidState', 'vm ' .. vm_uuid .. ': a storage instance whose volume (' ..
        (type(vm.volume_uuid) == 'string' and vm.volume_uuid or 'none named') .. ') does not ' ..
        'exist: nothing to migrate it for')
    end
    if v.state ~= 'ready' and v.state ~= 'failed' then
      return refuse(409, 'VolumeNotReady', 'vm ' .. vm_uuid .. ': its volume ' .. v.uuid .. ' (' ..
        tostring(v.name) .. ') is ' .. tostring(v.state) .. ': a storage instance is migrated ' ..
        'while its volume is ready or failed')
    end
    if mig_given(v.job_uuid) then
      return refuse(409, 'VolumeBusy', 'vm ' .. vm_uuid .. ': its volume ' .. v.uuid .. ' (' ..
        tostring(v.name) .. ') has job ' .. tostring(v.job_uuid) .. ' in flight (a snapshot, a ' ..
        'rollback): migrate it once that is done')
    end
  end
end
local im = type(vm.internal_metadata) == 'table' and vm.internal_metadata or {}
local tags = type(vm.tags) == 'table' and vm.tags or {}
if mig_given(tags.smartdc_role) or mig_given(im.smartdc_role) then
  return refuse(409, 'InvalidArgument', 'Cannot migrate a core instance (vm ' .. vm_uuid .. ')')
end
-- A user: the per-VM flag, else the global one (DOMAIN 5.2). The operator always may.
if owner then
  local allowed = im.user_migration_allowed
  if type(allowed) ~= 'boolean' then allowed = set.allow_user_migrations == true end
  if not allowed then
    return refuse(403, 'NotAllowed', 'User migration on this VM not allowed')
  end
end

local slots = tonumber(set.max_running_migrations_per_cn) or 5
local limit = p.send_mbps_limit
if not mig_given(limit) then limit = tonumber(set.migration_send_mbps_limit) or 500 end
local active = redis.call('GET', P .. 'migration_active:' .. vm_uuid)

if STARTS[act] or act == 'estimate' then
  if active and act ~= 'estimate' then return mig_refuse(mig_active_refusal(vm_uuid, active)) end
  if vm.migrating == true and act ~= 'estimate' then
    return refuse(409, 'MigrationInProgress', 'An active migration already exists for this instance ' ..
      '(vm ' .. vm_uuid .. ' is marked migrating, migration ' ..
      (type(vm.migration_uuid) == 'string' and vm.migration_uuid or 'unknown') .. ')')
  end
  if vm.state ~= 'running' and vm.state ~= 'stopped' then
    return refuse(409, 'InvalidState', 'vm ' .. vm_uuid .. ' is ' .. tostring(vm.state) ..
      ': only a running or stopped instance is migrated')
  end
  if mig_given(vm.disk_change) then
    return refuse(409, 'InvalidState', 'vm ' .. vm_uuid .. ' has a disk operation in flight (' ..
      tostring(vm.disk_change.op) .. '): migrate it once that is done')
  end
  local target = NULL
  if act ~= 'estimate' then
    local t, e = mig_choose_target(vm, pinned, affinity)
    if not t then return mig_refuse(e) end
    target = t
  end
  return ok({vm_uuid = vm_uuid, migration_uuid = NULL, source_server_uuid = vm.server_uuid,
    target_server_uuid = target, slots = slots, vm_state = vm.state,
    automatic = act == 'automatic' or p.automatic == true, send_mbps_limit = limit})
end

-- Every other action works on the VM's migration.
local m = active and mig_get(active)
if not m then
  return refuse(404, 'MigrationNotFound', 'vm ' .. vm_uuid .. ' has no migration to ' .. act)
end
if owner and m.account_uuid ~= owner then
  if m.account_uuid == NULL or m.account_uuid == nil then
    return refuse(403, 'NotAllowed', 'migration ' .. m.uuid .. ' of vm ' .. vm_uuid ..
      ' is the operator\'s: its owner cannot ' .. act .. ' it')
  end
  return refuse(404, 'MigrationNotFound', 'vm ' .. vm_uuid .. ' has no migration to ' .. act)
end
local st = m.state
local bad
if act == 'sync' then
  if st ~= 'paused' and st ~= 'scheduled' then
    bad = 'Cannot sync in migration state: ' .. st
  elseif m.phase ~= 'begin' and m.phase ~= 'sync' then
    bad = 'Cannot sync when in migration phase: ' .. m.phase
  end
elseif act == 'switch' then
  if mig_switch_resumes(m) then
    bad = nil
  elseif st == 'failed' then
    bad = 'Cannot switch in migration state: failed (phase ' .. m.phase .. ', switch step ' ..
      tostring(m.switch_step) .. '): only a switch that failed after the swap (step 5) is ' ..
      'switched forward; abort this one'
  elseif st ~= 'paused' and st ~= 'scheduled' then
    bad = 'Cannot switch in migration state: ' .. st
  elseif m.phase ~= 'begin' and m.phase ~= 'sync' then
    bad = 'Cannot switch in migration phase: ' .. m.phase
  end
elseif act == 'pause' then
  if st ~= 'running' or m.phase ~= 'sync' then bad = 'Pause requires a running migration sync action' end
elseif act == 'abort' then
  if st == 'successful' or st == 'aborted' then
    bad = 'Abort cannot work on a ' .. st .. ' migration'
  elseif (tonumber(m.switch_step) or 0) >= 6 then
    bad = 'Abort is refused after the point of no return: the target runs'
  elseif target_lost and (tonumber(m.switch_step) or 0) >= 5 then
    bad = 'params.target_lost: refused once the swap was made (switch step ' ..
      tostring(m.switch_step) .. '): the target may show the VM with its NICs; abort ' ..
      'without it once server ' .. m.target_server_uuid .. ' is back'
  elseif st == 'running' and m.phase == 'abort' and not target_lost then
    -- An abort waiting on its lost target's queue is taken over by one that leaves it.
    bad = 'Abort cannot work on a migration that is aborting'
  end
elseif act == 'rollback' then
  -- A rollback that failed may be run again: the target runs no more, the source not yet.
  local retry = st == 'failed' and m.phase == 'rollback'
  if (st ~= 'successful' and not retry) or mig_given(m.finalized_timestamp) then
    bad = 'Rollback only works on a successful migration'
  end
elseif act == 'finalize' then
  if st ~= 'successful' then bad = 'Finalize only works on a successful migration' end
end
if bad then return refuse(409, 'InvalidState', bad) end
-- A switch naming a scheduled_timestamp is the one a schedule asked for: it must name the
-- migration's own. The param also sets it apart from a switch by hand, which the engine's
-- one unfinished job per target and params would otherwise refuse as its duplicate.
if act == 'switch' and mig_given(p.scheduled_timestamp) and
    p.scheduled_timestamp ~= m.scheduled_timestamp then
  return refuse(409, 'InvalidState', 'params.scheduled_timestamp: migration ' .. m.uuid ..
    (mig_given(m.scheduled_timestamp) and (' is scheduled for ' .. m.scheduled_timestamp)
      or ' is not scheduled') .. ', not ' .. cjson.encode(p.scheduled_timestamp))
end
if not mig_given(p.send_mbps_limit) and mig_given(m.send_mbps_limit) then limit = m.send_mbps_limit end
return ok({vm_uuid = vm_uuid, migration_uuid = m.uuid, source_server_uuid = m.source_server_uuid,
  target_server_uuid = m.target_server_uuid, slots = slots, vm_state = vm.state,
  automatic = m.automatic == true, send_mbps_limit = limit, target_lost = target_lost})
