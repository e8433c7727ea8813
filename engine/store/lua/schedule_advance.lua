-- include: prelude schedules
-- schedule_advance.lua: records what a claimed tick came to and moves the schedule on
-- to its next tick. Only the tick the schedule is at is recorded: a second process
-- that did the same tick after a lease ran out finds it moved on already.
-- ARGV: 3 uuid, 4 tick ms, 5 'fired'|'skipped'|'failed', 6 job uuid ('' none),
--       7 next run ms, 8 error message ('' none)
-- Returns 'OK', 'STALE' (the schedule is at another tick: moved on by another process,
-- or changed meanwhile) or 'GONE' (deleted meanwhile).
local uuid, tick, outcome, job, nxt, msg = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local sk = skey(uuid)
local f = redis.call('HMGET', sk, 'next_run', 'paused')
if not f[1] then
    return 'GONE'
end
if f[1] ~= tick then
    return 'STALE'
end
-- The next tick comes after this one whatever the clocks said.
if tonumber(nxt) <= tonumber(tick) then
    nxt = time_text(tonumber(tick) + 1)
end
if outcome == 'fired' then
    redis.call('HSET', sk, 'last_job', job)
    redis.call('HINCRBY', sk, 'fired', 1)
elseif outcome == 'skipped' then
    redis.call('HINCRBY', sk, 'skipped', 1)
else
    redis.call('HINCRBY', sk, 'failed', 1)
    redis.call('HSET', sk, 'last_error', msg)
end
redis.call('HSET', sk, 'last_run', tick, 'next_run', nxt)
redis.call('HDEL', sk, 'lease')
if not f[2] then
    redis.call('ZADD', SCHED_DUE, nxt, uuid)
    sched_wake_if_first(uuid, tonumber(nxt))
end
return 'OK'
