-- dc.migration_phase: the migration's state machine (DOMAIN 5.1, docs/MIGRATION.md
-- "Records and states"). ARGV[1]: {migration_uuid, job_uuid, phase, event:
-- "start"|"done"|"fail", error?, errorDetail?, history?: {message, current_progress,
-- total_progress}}. Each (job_uuid, phase, event) is applied once: a step run again is
-- answered with the record as it is. Every stop of running (paused, scheduled,
-- successful, aborted, failed) writes the one end event to the stream. Answers the
-- public record.
local a = cjson.decode(ARGV[1])
local now = now_iso_ms()
local m, e = mig_for_step(a.migration_uuid)
-- The onerror of a begin whose claim lost (or never ran) has no record to fail: there
-- is nothing of its own to undo, and another migration's record is never touched.
if not m and a.event == 'fail' and e.code == 'MigrationNotFound' then
  return ok({uuid = a.migration_uuid, state = NULL})
end
if not m then return mig_refuse(e) end
local PHASES = {begin = true, sync = true, switch = true, abort = true, rollback = true,
  finalize = true}
if not PHASES[a.phase] then
  return refuse(0, 'InvalidArgument', 'phase: expected begin, sync, switch, abort, rollback or ' ..
    'finalize, got ' .. cjson.encode(a.phase))
end
if a.event ~= 'start' and a.event ~= 'done' and a.event ~= 'fail' then
  return refuse(0, 'InvalidArgument', 'event: expected start, done or fail, got ' .. cjson.encode(a.event))
end
if not uuid_ok(a.job_uuid) then
  return refuse(0, 'InvalidArgument', 'job_uuid: expected a UUID, got ' .. cjson.encode(a.job_uuid))
end
local h = a.history
if h ~= nil and h ~= NULL and type(h) ~= 'table' then
  return refuse(0, 'InvalidArgument', 'history: expected an object, got ' .. cjson.encode(h))
end
if h == NULL then h = nil end
local once = a.job_uuid .. '|' .. a.phase .. '|' .. a.event
if redis.call('SISMEMBER', P .. mig_key(m.uuid) .. ':done', once) == 1 then
  return ok(mig_public(m))
end
local st, ph = m.state, a.phase
local function bad(msg) return refuse(0, 'InvalidState', 'migration ' .. m.uuid .. ': ' .. msg) end
local DEFAULT_MESSAGE = {begin = 'making a reservation', sync = 'synchronizing filesystems',
  switch = 'switching instances', abort = 'aborting', rollback = 'reverting migration',
  finalize = 'removing the source instance'}

-- Writes the record, marks the event applied and answers.
local function commit()
  mig_put(m)
  mig_mark_once(m.uuid, once)
  return ok(mig_public(m))
end

if a.event == 'fail' then
  -- An abort is taking over: the failing job was stopped for it.
  if m.abort_requested == true and ph ~= 'abort' then return ok(mig_public(m)) end
  -- Only the job in flight fails its migration; a stale job's onerror changes nothing.
  if st ~= 'running' or (mig_given(m.job_uuid) and m.job_uuid ~= a.job_uuid) then
    return ok(mig_public(m))
  end
  local text = type(a.error) == 'string' and a.error or ('the ' .. ph .. ' job failed')
  local first, rest = string.match(text, '^([^\n]*)\n(.*)$')
  if not first then first = text end
  local detail = a.errorDetail
  if type(detail) ~= 'string' then detail = rest or NULL end
  -- The phase stays the one that was running (DOMAIN 5.1: failed in the current phase).
  m.state, m.error, m.errorDetail = 'failed', first, detail
  m.job_uuid = NULL
  m.finished_timestamp = now
  mig_close_entry(m, 'failed', now, first)
  mig_end_event(m, first)
  return commit()
end

if a.event == 'start' then
  if ph == 'begin' then
    if st ~= 'running' or m.phase ~= 'begin' then return bad('begin starts only a new migration') end
  elseif ph == 'sync' or ph == 'switch' then
    -- Paused or scheduled (on demand); running after a begin or sync of an automatic
    -- or scheduled migration in the same job.
    local chained = st == 'running' and (m.job_uuid == a.job_uuid or not mig_given(m.job_uuid)) and
      (m.phase == 'begin' or m.phase == 'sync')
    local resumes = ph == 'switch' and mig_switch_resumes(m)
    if st ~= 'paused' and st ~= 'scheduled' and not chained and not resumes then
      return bad(ph == 'sync' and 'Cannot sync in migration state: ' .. st or
        'Cannot switch in migration state: ' .. st)
    end
    if m.abort_requested == true then return bad('an abort was asked: no ' .. ph .. ' starts') end
    -- An automatic job whose pass a pause stopped goes no further: the migration waits
    -- for an operator's sync or switch, each a job of its own.
    local last = m.progress_history and m.progress_history[#m.progress_history]
    if st == 'paused' and last and last.state == 'paused' and last.job_uuid == a.job_uuid then
      return bad('Migration was paused: a sync or a switch resumes it')
    end
  elseif ph == 'abort' then
    if st == 'successful' or st == 'aborted' then return bad('Abort cannot work on a ' .. st .. ' migration') end
    if (tonumber(m.switch_step) or 0) >= 6 then
      return bad('Abort is refused after the point of no return: the target runs')
    end
    m.abort_requested = true
  elseif ph == 'rollback' then
    local retry = st == 'failed' and m.phase == 'rollback'
    if (st ~= 'successful' and not retry) or mig_given(m.finalized_timestamp) then
      return bad('Rollback only works on a successful migration')
    end
    -- The VM is held again while it moves back.
    local vm = get_json('vm:' .. m.vm_uuid)
    if vm then
      vm.migrating, vm.migration_uuid = true, m.uuid
      redis.call('SET', P .. 'vm:' .. vm.uuid, enc(vm))
    end
  elseif ph == 'finalize' then
    if st ~= 'successful' then return bad('Finalize only works on a successful migration') end
    m.job_uuid = a.job_uuid
    return commit()
  end
  if st ~= 'running' or m.phase ~= ph or m.job_uuid ~= a.job_uuid then
    mig_add_entry(m, ph, h and h.message or DEFAULT_MESSAGE[ph], now, a.job_uuid,
      h and {current_progress = tonumber(h.current_progress) or 0,
        total_progress = tonumber(h.total_progress) or 100} or nil)
  end
  m.state, m.phase, m.job_uuid = 'running', ph, a.job_uuid
  if ph ~= 'begin' then m.action = ph end
  if ph == 'sync' then m.pause_requested = false end
  if not mig_given(m.started_timestamp) then m.started_timestamp = now end
  m.error, m.errorDetail = NULL, NULL
  -- A failed migration aborted, rolled back or switched forward has not ended yet.
  if st == 'failed' then m.finished_timestamp = NULL end
  return commit()
end

-- done
if ph == 'finalize' then
  if st ~= 'successful' then return bad('Finalize only works on a successful migration') end
  m.finalized_timestamp = now
  m.job_uuid = NULL
  if redis.call('GET', P .. 'migration_active:' .. m.vm_uuid) == m.uuid then
    redis.call('DEL', P .. 'migration_active:' .. m.vm_uuid)
  end
  return commit()
end
-- An abort waiting on its lost target's queue that an abort with target_lost took over
-- finds the migration aborted already when that server comes back: nothing to do.
if ph == 'abort' and st == 'aborted' and m.phase == 'abort' then return ok(mig_public(m)) end
if st ~= 'running' or m.phase ~= ph then
  return bad('the ' .. ph .. ' phase is not running (state ' .. st .. ', phase ' .. m.phase .. ')')
end
if mig_given(m.job_uuid) and m.job_uuid ~= a.job_uuid then
  return bad('its ' .. ph .. ' phase is run by job ' .. m.job_uuid .. ', not ' .. a.job_uuid)
end
local scheduled = mig_given(m.scheduled_timestamp) and m.automatic ~= true
if ph == 'begin' then
  if m.automatic == true or scheduled then
    -- The same job goes on with the sync: no stop, no end event.
    mig_close_entry(m, 'successful', now)
    return commit()
  end
  m.state = 'paused'
elseif ph == 'sync' then
  if m.pause_requested == true then
    m.state = 'paused'
    m.pause_was_requested = true
  elseif m.automatic == true and a.job_uuid == m.uuid then
    -- The automatic job goes on (another pass or the switch). A paused automatic
    -- migration resumed by a sync job pauses again after it.
    mig_close_entry(m, 'successful', now)
    return commit()
  elseif scheduled then
    m.state = 'scheduled'
  else
    m.state = 'paused'
  end
  m.pause_requested = false
elseif ph == 'switch' then
  if (tonumber(m.switch_step) or 0) < 5 then
    return bad('the switch is done only after the swap (switch_step ' .. tostring(m.switch_step) .. ')')
  end
  m.state = 'successful'
  m.finished_timestamp = now
  m.switch_step = math.max(tonumber(m.switch_step) or 0, 7)
  -- The source's capacity is given back only now (DOMAIN 5.6 test 32).
  if type(m.source_allocation) == 'table' then mig_alloc_release(m.source_allocation) end
  mig_vm_release(m)
elseif ph == 'abort' or ph == 'rollback' then
  local vm = get_json('vm:' .. m.vm_uuid)
  if vm and vm.server_uuid ~= m.source_server_uuid then
    return bad('vm ' .. m.vm_uuid .. ' is still on the target ' .. tostring(vm.server_uuid) ..
      ': unswitch it before the ' .. ph .. ' is done')
  end
  m.state = 'aborted'
  m.finished_timestamp = now
  if ph == 'abort' and m.target_cleanup ~= 'pending' then
    -- What the migration committed on the target (unswitch released it after a swap).
    -- A copy left on a lost target keeps it until migration_leftover.lua's done.
    mig_alloc_release(m.target_allocation)
  end
  mig_vm_release(m)
  if redis.call('GET', P .. 'migration_active:' .. m.vm_uuid) == m.uuid then
    redis.call('DEL', P .. 'migration_active:' .. m.vm_uuid)
  end
end
m.job_uuid = NULL
-- The phase's entry ends successful, or paused when a pause stopped the pass.
local paused_by_request = m.state == 'paused' and ph == 'sync' and mig_open_entry(m) ~= nil and
  m.pause_was_requested == true
mig_close_entry(m, paused_by_request and 'paused' or 'successful', now)
m.pause_was_requested = nil
mig_end_event(m, nil)
return commit()
