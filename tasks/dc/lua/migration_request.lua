-- dc.migration_request: a pause or an abort asked of a migration, taken by its send at
-- the next window boundary (the answer of dc.migration_progress). ARGV[1]:
-- {migration_uuid, what: "pause"|"abort"}. pause: only a running sync (Triton's
-- message). abort: refused on a successful or aborted migration and from switch step 6
-- on (the target runs). Answers {job_uuid (the job in flight or null), state, phase,
-- switch_step, vm_state_before}.
local a = cjson.decode(ARGV[1])
local m, e = mig_for_step(a.migration_uuid)
if not m then return mig_refuse(e) end
local function answer()
  return ok({job_uuid = m.job_uuid, state = m.state, phase = m.phase, switch_step = m.switch_step,
    vm_state_before = m.vm_state_before})
end
if a.what == 'pause' then
  if m.state ~= 'running' or m.phase ~= 'sync' then
    return refuse(409, 'InvalidState', 'Pause requires a running migration sync action')
  end
  if m.pause_requested ~= true then
    m.pause_requested = true
    mig_event(m, {type = 'progress', phase = m.phase, state = 'running', message = 'pausing'})
    mig_put(m)
  end
  return answer()
elseif a.what == 'abort' then
  if m.state == 'successful' or m.state == 'aborted' then
    return refuse(409, 'InvalidState', 'Abort cannot work on a ' .. m.state .. ' migration')
  end
  if (tonumber(m.switch_step) or 0) >= 6 then
    return refuse(409, 'InvalidState', 'Abort is refused after the point of no return: the target runs')
  end
  if m.abort_requested ~= true then
    m.abort_requested = true
    mig_event(m, {type = 'progress', phase = m.phase, state = 'running', message = 'aborting'})
    mig_put(m)
  end
  return answer()
end
return refuse(0, 'InvalidArgument', 'what: expected pause or abort, got ' .. cjson.encode(a.what))
