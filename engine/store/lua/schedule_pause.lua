-- include: prelude schedules
-- schedule_pause.lua: pauses a schedule (no tick fires while it is paused) or resumes
-- it at its next tick after now (the ticks missed meanwhile are not fired).
-- ARGV: 3 uuid, 4 'pause'|'resume', 5 next run ms (resume)
-- Returns the fields as a flat array, or {} when there is no such schedule.
local uuid, action, nxt = ARGV[3], ARGV[4], ARGV[5]
local sk = skey(uuid)
if redis.call('EXISTS', sk) == 0 then
    return {}
end
local paused = redis.call('HGET', sk, 'paused')
if action == 'pause' and not paused then
    redis.call('HSET', sk, 'paused', '1')
    redis.call('ZREM', SCHED_DUE, uuid)
elseif action == 'resume' and paused then
    local last = tonumber(redis.call('HGET', sk, 'last_run') or '-1')
    if tonumber(nxt) <= last then
        nxt = time_text(last + 1)
    end
    redis.call('HDEL', sk, 'paused', 'lease')
    redis.call('HSET', sk, 'next_run', nxt)
    redis.call('ZADD', SCHED_DUE, nxt, uuid)
    sched_wake_if_first(uuid, tonumber(nxt))
end
return redis.call('HGETALL', sk)
