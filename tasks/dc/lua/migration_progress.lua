-- dc.migration_progress: what the source agent's send reports while bytes move (about
-- once a second, every 60 s as a keep-alive, at each pass end), and what it is told
-- back. ARGV[1]: {migration_uuid, event?: {progress fields}, pass_done?: {pass, bytes,
-- total, duration_ms, started_timestamp}, switch_reason?}. The event goes onto the
-- stream and becomes `progress`; a pass done counts a sync (num_sync_phases,
-- last_sync_size) and ends in a history entry, once per (job, pass). A warning
-- ({message, ...fields}: dc.migration_image_send's image copied from the source) is a
-- history entry of its own, `level` "warning", finished at once, placed before the
-- phase's entry still running; once per (job, message). Answers {pause_requested,
-- abort_requested, send_mbps_limit, state}.
local a = cjson.decode(ARGV[1])
local now = now_iso_ms()
local m, e = mig_for_step(a.migration_uuid)
if not m then return mig_refuse(e) end
local function answer()
  return ok({pause_requested = m.pause_requested == true, abort_requested = m.abort_requested == true,
    send_mbps_limit = m.send_mbps_limit, state = m.state})
end
-- Everything is checked before anything is written.
local ev, pd = a.event, a.pass_done
if ev ~= nil and ev ~= NULL and type(ev) ~= 'table' then
  return refuse(0, 'InvalidArgument', 'event: expected an object, got ' .. cjson.encode(ev))
end
if pd ~= nil and pd ~= NULL and (type(pd) ~= 'table' or type(pd.pass) ~= 'number' or
  type(pd.bytes) ~= 'number') then
  return refuse(0, 'InvalidArgument', 'pass_done: expected {pass, bytes, total, duration_ms, ' ..
    'started_timestamp} with numbers, got ' .. cjson.encode(pd))
end
local warn = a.warning
if warn ~= nil and warn ~= NULL and (type(warn) ~= 'table' or type(warn.message) ~= 'string') then
  return refuse(0, 'InvalidArgument', 'warning: expected {message, ...} with a string message, got ' ..
    cjson.encode(warn))
end
if mig_given(a.switch_reason) and a.switch_reason ~= 'size' and a.switch_reason ~= 'max_passes' and
  a.switch_reason ~= 'stalled' then
  return refuse(0, 'InvalidArgument', 'switch_reason: expected size, max_passes or stalled, got ' ..
    cjson.encode(a.switch_reason))
end
-- A migration no longer running takes no progress (a late report of a stopped send).
if m.state ~= 'running' then return answer() end
local changed = false
if ev ~= nil and ev ~= NULL then
  ev.type = 'progress'
  ev.phase = m.phase
  ev.state = 'running'
  mig_event(m, ev)
  m.progress = ev
  changed = true
end
if pd ~= nil and pd ~= NULL then
  local job = mig_given(m.job_uuid) and m.job_uuid or 'none'
  if mig_mark_once(m.uuid, job .. '|pass|' .. m.phase .. '|' .. pd.pass) then
    m.num_sync_phases = (tonumber(m.num_sync_phases) or 0) + 1
    m.last_sync_size = pd.bytes
    local final = m.phase == 'switch'
    local msg = final and 're-synchronizing filesystems' or 'synchronizing filesystems'
    local started = type(pd.started_timestamp) == 'string' and pd.started_timestamp or now
    local open = mig_open_entry(m)
    local entry
    if open and open.phase == m.phase and open.job_uuid == m.job_uuid and open.pass == nil and
      open.message == msg then
      -- The phase's own entry becomes its first pass's.
      entry = open
      entry.started_timestamp = started
    else
      entry = mig_add_entry(m, m.phase, msg, started, m.job_uuid)
    end
    entry.pass = pd.pass
    entry.current_progress, entry.total_progress = pd.bytes, pd.bytes
    entry.state = 'successful'
    entry.finished_timestamp = now
    entry.duration_ms = type(pd.duration_ms) == 'number' and pd.duration_ms or
      mig_ms_between(started, now)
    mig_event(m, entry)
  end
  changed = true
end
if warn ~= nil and warn ~= NULL then
  local job = mig_given(m.job_uuid) and m.job_uuid or 'none'
  if mig_mark_once(m.uuid, job .. '|warning|' .. warn.message) then
    local e = {}
    for k, v in pairs(warn) do e[k] = v end
    e.type, e.level, e.phase, e.state = 'progress', 'warning', m.phase, 'successful'
    e.started_timestamp, e.finished_timestamp, e.duration_ms = now, now, 0
    e.current_progress, e.total_progress = 1, 1
    e.job_uuid = m.job_uuid or NULL
    m.progress_history = m.progress_history or {}
    local h = m.progress_history
    -- The phase's running entry stays the last one: the phase's own steps close it.
    if mig_open_entry(m) then table.insert(h, #h, e) else h[#h + 1] = e end
    mig_event(m, e)
  end
  changed = true
end
if mig_given(a.switch_reason) then
  m.switch_reason = a.switch_reason
  changed = true
end
if changed then mig_put(m) end
return answer()
