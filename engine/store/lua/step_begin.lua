-- include: prelude gather layout queues events holds
-- step_begin.lua: called before a step that holds resources or is not idempotent.
-- Takes the step's holds in order (or parks the job off the runner until they are
-- granted) and, for an irreversible step, marks it in flight, so that a runner death
-- fails the job with StepInterrupted instead of running the step twice.
-- ARGV: 3 uuid, 4 runner, 5 fence, 6 phase, 7 idx, 8 mark in flight 0|1,
--       9 holds: lines "<capacity> <resource>" ('' none)
-- Returns {'GO'} | {'PARKED', resource} | {'STALE', why} | {'CANCEL'} (a cancel was
-- asked meanwhile: run oncancel rather than wait for a ticket)
local uuid, runner, fence = ARGV[3], ARGV[4], ARGV[5]
local k = jkey(uuid)
local cur = redis.call('HMGET', k, 'runner', 'fence', 'phase', 'idx', 'cancel')
if cur[1] ~= runner or cur[2] ~= fence or cursor_text(cur[3], cur[4]) ~= ARGV[6] .. ':' .. ARGV[7] then
    return {'STALE', 'owned by ' .. tostring(cur[1]) .. ' fence ' .. tostring(cur[2])}
end
if cur[5] == '1' and ARGV[6] ~= WF_ONCANCEL_TEXT then
    return {'CANCEL'}
end
local now = now_ms()
if ARGV[9] ~= '' then
    local names = {}
    for line in string.gmatch(ARGV[9], '[^\n]+') do
        local cap, res = string.match(line, '^(%d+) (.+)$')
        if not hold_try(uuid, res, tonumber(cap)) then
            redis.call('HSET', k, 'blocked_on', res, 'rf', '1') -- see RARE_FIELDS
            runner_list_rem(runner, uuid)
            redis.call('HDEL', k, 'runner')
            set_execution(uuid, 'queued')
            rearm_deadline(uuid)
            event(uuid, {type = 'hold_wait', resource = res}, now)
            hold_tell(k, uuid, {type = 'hold_wait', resource = res, capacity = tonumber(cap)}, now,
                      P .. 'hold:' .. res)
            if #names > 0 then
                redis.call('HSET', k, 'step_holds', table.concat(names, '\n'), 'rf', '1')
            end
            return {'PARKED', res}
        end
        names[#names + 1] = res
    end
    redis.call('HSET', k, 'step_holds', table.concat(names, '\n'), 'rf', '1')
end
if ARGV[8] == '1' then
    redis.call('HSET', k, 'inflight', ARGV[6] .. ':' .. ARGV[7], 'rf', '1')
end
return {'GO'}
