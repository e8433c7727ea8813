-- dc.migration_step: how far the switch got (switch_step, monotonic: a lower or equal
-- step changes nothing). ARGV[1]: {migration_uuid, switch_step, vm_state_before?}:
-- vm_state_before ("running"|"stopped") is taken at step 1. Step 6 (the target
-- starting: the point of no return) is refused once an abort was requested; an abort
-- is refused from step 6 on (dc.migration_request): one script each, so never both.
-- Each step opens its history entry. Answers the public record.
local a = cjson.decode(ARGV[1])
local m, e = mig_for_step(a.migration_uuid)
if not m then return mig_refuse(e) end
local n = a.switch_step
if type(n) ~= 'number' or n ~= math.floor(n) or n < 1 or n > 7 then
  return refuse(0, 'InvalidArgument', 'switch_step: expected an integer 1 to 7, got ' .. cjson.encode(n))
end
local before = a.vm_state_before
if before == NULL then before = nil end
if before ~= nil and before ~= 'running' and before ~= 'stopped' then
  return refuse(0, 'InvalidArgument', 'vm_state_before: expected running or stopped, got ' ..
    cjson.encode(before))
end
local cur = tonumber(m.switch_step) or 0
if n <= cur then return ok(mig_public(m)) end
if m.state ~= 'running' or m.phase ~= 'switch' then
  return refuse(0, 'InvalidState', 'migration ' .. m.uuid .. ' is ' .. m.state .. ' in phase ' ..
    m.phase .. ': switch steps belong to a running switch')
end
if n == 5 then
  return refuse(0, 'InvalidArgument', 'switch_step: 5 is the swap\'s own (dc.migration_switch)')
end
if n >= 6 and cur < 5 then
  return refuse(0, 'InvalidState', 'migration ' .. m.uuid .. ' is at switch step ' .. cur ..
    ': the target starts only after the swap (step 5)')
end
if n >= 6 and m.abort_requested == true then
  return refuse(0, 'InvalidState', 'migration ' .. m.uuid .. ' is being aborted: the target is ' ..
    'not started (the point of no return is not passed)')
end
local now = now_iso_ms()
local MESSAGE = {[1] = 'stopping instance', [6] = 'restarting instance', [7] = 'removing sync snapshots'}
if n == 1 and before then m.vm_state_before = before end
m.switch_step = n
if MESSAGE[n] and not (n == 6 and m.vm_state_before ~= 'running') then
  mig_add_entry(m, 'switch', MESSAGE[n], now, m.job_uuid)
elseif n == 3 or n == 2 then
  mig_close_entry(m, 'successful', now)
end
mig_put(m)
return ok(mig_public(m))
